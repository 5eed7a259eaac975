//! Reading the model's arguments: the JSON object they must be, a `queryId` value, and
//! the rejection of a whole request. Shared by the lock of a request (`request.rs`) and
//! of a discovery (`discovery.rs`).

use evidence_result::QueryId;
use serde_json::{Map, Value};

use super::code::Code;
use super::fixed::quoted_list;
use super::types::LockRejection;
use crate::args::json_kind;

/// Reads a `queryId` value: `Ok` with the id, or the rejection code and message.
pub(super) fn read_query_id(
    value: Option<&Value>,
    wetech: &[QueryId],
) -> Result<QueryId, (Code, String, String)> {
    let hint = if wetech.is_empty() {
        "Add `queryId`: 1-64 letters, digits, '_', '-', '.', ':' naming this objective.".to_owned()
    } else {
        format!(
            "Add `queryId`: one of the query ids the platform authorized ({}).",
            quoted_list(wetech.iter().map(QueryId::as_str))
        )
    };
    match value {
        None | Some(Value::Null) => Err((
            Code::MissingQueryId,
            "`queryId` is required".to_owned(),
            hint,
        )),
        Some(Value::String(s)) => {
            QueryId::new(s.as_str()).map_err(|e| (Code::InvalidQueryId, e.to_string(), hint))
        }
        Some(v) => Err((
            Code::InvalidQueryId,
            format!("`queryId` must be a string, not {}", json_kind(v)),
            hint,
        )),
    }
}

/// A rejection of the whole request (no query id, no digest).
pub(super) fn whole(code: Code, detail: String, hint: &str) -> LockRejection {
    LockRejection {
        query_id: None,
        request_digest: None,
        failure: Box::new(code.failure(detail, hint)),
    }
}

/// The model's arguments as the JSON object they must be.
pub(super) fn arguments_object(args: &Value) -> Result<&Map<String, Value>, LockRejection> {
    args.as_object().ok_or_else(|| {
        whole(
            Code::InvalidArguments,
            format!("arguments must be a JSON object, not {}", json_kind(args)),
            "Send the arguments as one JSON object matching the tool schema.",
        )
    })
}
