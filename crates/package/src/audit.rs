//! One audit record per tool call.

use std::time::Duration;

use evidence_result::evidence::EvidenceOutcome;
use evidence_result::{
    Digest, ErrorCode, FailureClass, PackageId, QueryId, RequestDigest, Status, ToolResult,
};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::traceparent::Traceparent;

use thiserror::Error;

use crate::problem::{InvalidField, JsonError};
use crate::{Package, Revision};

/// What the runtime knows about a call besides its result: trusted identifiers only, never
/// argument text or secret values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallContext {
    /// When the call started.
    pub time: Timestamp,
    /// The trusted policy's id, if a policy was in force.
    pub policy_id: Option<String>,
    /// The ticket the policy was derived from.
    pub ticket: Option<String>,
    /// How long the call took.
    pub duration: Duration,
    /// Size of the tool's output, in bytes, as produced (before any blocking).
    pub output_bytes: u64,
    /// The secrets the output guard found in the output (names only, never values):
    /// the record names them, the model-visible result never does.
    pub blocked_secrets: Vec<String>,
}

/// One JSON audit record of one tool call, written to the package's own audit stream.
///
/// It holds identifiers, digests and counts: no argument text, no provider text and no
/// secret value. The one text it may hold is [`AuditRecord::operator_detail`], what the
/// operator needs of a failure whose model-visible result says it only in generic words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// When the call started (RFC 3339, UTC).
    pub time: Timestamp,
    /// The package's audit stream.
    pub stream: String,
    /// The package identity.
    pub package: PackageId,
    /// The revision; absent only when the package folder could not be loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<Revision>,
    /// The recomputed package digest; absent only when the package folder could not be
    /// loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    /// The trusted policy's id.
    pub policy_id: Option<String>,
    /// The ticket.
    pub ticket: Option<String>,
    /// Query ids of the call (one, or one per batch item).
    pub query_ids: Vec<QueryId>,
    /// Request digests of the call.
    pub request_digests: Vec<RequestDigest>,
    /// `ok`, `partial` or `error`.
    pub status: Status,
    /// The failure class of a failed call.
    pub failure_class: Option<FailureClass>,
    /// The error codes of a failed call: its own, or each failed batch item's, in order
    /// (fixed identifiers such as `policy_verification_failed` or `turn_stopped`, never
    /// provider text); what an alert matches on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_codes: Vec<ErrorCode>,
    /// Duration in milliseconds.
    pub duration_ms: u64,
    /// Output size in bytes.
    pub output_bytes: u64,
    /// Whether the output guard blocked the output.
    pub blocked: bool,
    /// Which secrets the output guard matched when it blocked the output (names only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_secrets: Vec<String>,
    /// The storage-state values the secret binding left unguarded as page state too
    /// short to search for (descriptions from [`crate::secrets::BindingReport::unguarded`], never
    /// values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unguarded: Vec<String>,
    /// Whether the package folder on disk had changed since the serving process hashed
    /// it (a file written, replaced, added or removed). The call ran with what the
    /// process hashed: its running code and the manifest it read then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub folder_changed: bool,
    /// Whether the call was cut off before its result reached its caller: the serving
    /// process was told to stop (SIGTERM, SIGINT) while the call ran (its `status` is
    /// `error` and nothing about its outcome is known), or the MCP client cancelled the
    /// call (its work stopped there; the record keeps what the call answered, which no
    /// client read).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// For the operator only: the detail of a failure that the model-visible result
    /// states in generic words (a runtime-context failure names there only its code,
    /// class and a fixed sentence): the variable, file, host, port, user or database it
    /// concerns, never a password or secret value. At most 2048 bytes (a longer detail
    /// is cut at a character boundary and ends with `…`). Never part of a model-visible
    /// result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_detail: Option<String>,
    /// How many of the call's answers (the call's own, or its batch items') had no data:
    /// `no_data` stays unverified, never zero, and an operator counts it apart.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub no_data: u32,
    /// The W3C `traceparent` the call arrived with (in its MCP request's `_meta`, or its
    /// HTTP header), so that an operator can join the runtime's trace to this record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<Traceparent>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The longest [`AuditRecord::operator_detail`], in bytes: a longer detail is cut at a
/// character boundary and ends with `…`, so a record stays one bounded line.
const OPERATOR_DETAIL_MAX: usize = 2048;

/// `detail` cut to [`OPERATOR_DETAIL_MAX`] bytes (see there).
fn bounded(detail: String) -> String {
    if detail.len() <= OPERATOR_DETAIL_MAX {
        return detail;
    }
    let marker = '…';
    let mut end = OPERATOR_DETAIL_MAX - marker.len_utf8();
    while !detail.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = detail;
    cut.truncate(end);
    cut.push(marker);
    cut
}

fn check_token(field: &str, value: Option<&String>) -> Result<(), AuditError> {
    if let Some(v) = value {
        let ok = !v.is_empty()
            && v.len() <= 128
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
        if !ok {
            return Err(AuditError::invalid(
                field,
                "use 1-128 letters, digits, '-', '_', '.', ':'",
            ));
        }
    }
    Ok(())
}

/// Where a record comes from: the package, as far as it is known.
struct Source {
    stream: String,
    package: PackageId,
    revision: Option<Revision>,
    digest: Option<Digest>,
}

impl AuditRecord {
    /// The record of a call of `package` that returned `result` (the result after the
    /// output guard).
    pub fn for_call(
        package: &Package,
        call: &CallContext,
        result: &ToolResult,
    ) -> Result<Self, AuditError> {
        let source = Source {
            stream: package.manifest().audit_stream.clone(),
            package: package.identity().clone(),
            revision: Some(package.revision()),
            digest: Some(package.digest()),
        };
        AuditRecord::build(source, call, result)
    }

    /// The record of a call whose package folder could not be loaded (so no revision and
    /// no digest are known): the identity the entrypoint serves, its stream
    /// `auto_oncall.<identity>` and the failure result it wrote.
    pub fn for_unloaded(
        identity: &PackageId,
        call: &CallContext,
        result: &ToolResult,
    ) -> Result<Self, AuditError> {
        let source = Source {
            stream: format!("auto_oncall.{identity}"),
            package: identity.clone(),
            revision: None,
            digest: None,
        };
        AuditRecord::build(source, call, result)
    }

    fn build(source: Source, call: &CallContext, result: &ToolResult) -> Result<Self, AuditError> {
        check_token("policy_id", call.policy_id.as_ref())?;
        check_token("ticket", call.ticket.as_ref())?;
        let details = result.details();
        let mut query_ids: Vec<QueryId> = details.query_id.iter().cloned().collect();
        let mut request_digests: Vec<RequestDigest> =
            details.request_digest.iter().copied().collect();
        for item in &details.items {
            query_ids.push(item.query_id.clone());
            request_digests.extend(item.request_digest);
        }
        let error_codes: Vec<ErrorCode> = details
            .error
            .iter()
            .chain(details.items.iter().filter_map(|i| i.error.as_ref()))
            .map(|e| e.code.clone())
            .collect();
        let failure_class = details.failure_class().or_else(|| {
            details
                .items
                .iter()
                .find_map(|i| i.error.as_ref().map(|e| e.class))
        });
        let no_data = details
            .evidence
            .iter()
            .chain(details.items.iter().filter_map(|i| i.evidence.as_ref()))
            .filter(|e| e.outcome == EvidenceOutcome::NoData)
            .count();
        Ok(AuditRecord {
            time: call.time,
            stream: source.stream,
            package: source.package,
            revision: source.revision,
            digest: source.digest,
            policy_id: call.policy_id.clone(),
            ticket: call.ticket.clone(),
            query_ids,
            request_digests,
            status: details.status,
            failure_class,
            error_codes,
            duration_ms: u64::try_from(call.duration.as_millis()).unwrap_or(u64::MAX),
            output_bytes: call.output_bytes,
            blocked: details.failure_class() == Some(FailureClass::OutputBlocked),
            blocked_secrets: call.blocked_secrets.clone(),
            unguarded: Vec::new(),
            folder_changed: false,
            cancelled: false,
            operator_detail: None,
            no_data: u32::try_from(no_data).unwrap_or(u32::MAX),
            traceparent: None,
        })
    }

    /// The record of a call of `package` that was cut off before it produced a result
    /// (see [`AuditRecord::cancelled`]): when it started, how long it ran and the query
    /// ids its arguments named.
    pub fn for_cancelled(
        package: &Package,
        time: Timestamp,
        duration: Duration,
        query_ids: Vec<QueryId>,
    ) -> Self {
        AuditRecord {
            time,
            stream: package.manifest().audit_stream.clone(),
            package: package.identity().clone(),
            revision: Some(package.revision()),
            digest: Some(package.digest()),
            policy_id: None,
            ticket: None,
            query_ids,
            request_digests: Vec::new(),
            status: Status::Error,
            failure_class: None,
            error_codes: Vec::new(),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            output_bytes: 0,
            blocked: false,
            blocked_secrets: Vec::new(),
            unguarded: Vec::new(),
            folder_changed: false,
            cancelled: true,
            operator_detail: None,
            no_data: 0,
            traceparent: None,
        }
    }

    /// The same record, listing the values the call's secret binding left unguarded
    /// ([`crate::SecretBinding::report`]).
    pub fn with_unguarded(mut self, unguarded: Vec<String>) -> Self {
        self.unguarded = unguarded;
        self
    }

    /// The same record, saying whether the package folder on disk changed since the
    /// serving process hashed it.
    pub fn with_folder_changed(mut self, changed: bool) -> Self {
        self.folder_changed = changed;
        self
    }

    /// The same record, with the detail the operator needs of a failure the result
    /// states in generic words (see [`AuditRecord::operator_detail`]; cut to 2048
    /// bytes).
    pub fn with_operator_detail(mut self, detail: impl Into<String>) -> Self {
        self.operator_detail = Some(bounded(detail.into()));
        self
    }

    /// The same record, with the `traceparent` its call arrived with.
    pub fn with_traceparent(mut self, traceparent: Option<Traceparent>) -> Self {
        self.traceparent = traceparent;
        self
    }

    /// The record as one line of JSON (no trailing newline).
    pub fn to_json_line(&self) -> Result<String, AuditError> {
        serde_json::to_string(self)
            .map_err(|source| AuditError::Json(JsonError::new("audit record".to_owned(), source)))
    }
}

/// An audit record refused while building or writing it.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AuditError {
    /// A field has a value outside its documented shape or range.
    #[error(transparent)]
    InvalidField(#[from] InvalidField),
    /// A JSON document could not be parsed.
    #[error(transparent)]
    Json(#[from] JsonError),
}

impl AuditError {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        AuditError::InvalidField(InvalidField::new(field, reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_detail_is_bounded_at_a_character_boundary() {
        assert_eq!(bounded("short".to_owned()), "short");
        let exact = "a".repeat(OPERATOR_DETAIL_MAX);
        assert_eq!(bounded(exact.clone()), exact);
        // Two-byte characters across the limit: the cut never splits one.
        let long = "é".repeat(OPERATOR_DETAIL_MAX);
        let cut = bounded(long);
        assert!(cut.len() <= OPERATOR_DETAIL_MAX, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.trim_end_matches('…').chars().all(|c| c == 'é'));
    }
}
