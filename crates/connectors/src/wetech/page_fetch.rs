//! A request run as a `fetch` inside the Grafana page (so the session cookies apply), its
//! bounded answer, and a `/api/ds/query`-style error frame read as the rejection it
//! carries.

use std::time::Duration;

use base64::Engine as _;
use evidence_result::{ErrorCode, Failure, FailureClass, Provider};
use fantoccini::Client;
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use super::browser::CommandFailure;
use super::script;
use crate::ConnectorError;
use crate::prometheus::{Compaction, KeepLabels, RawResponse, ResponseMapper};

/// Extra time the WebDriver script limit gives a page fetch beyond its own limit.
pub(super) const SCRIPT_MARGIN: Duration = Duration::from_secs(5);

/// The most a page fetch of a query answer reads: 16 MiB. The page cannot hand a body to
/// the connector as a stream: the whole body crosses WebDriver as one script answer (a
/// JSON string), so it is held in the page and, several times over, in the connector
/// while it is decoded (see the crate README for what a body at this bound costs in
/// Chromium). The answer is then folded by the same streaming compaction as Clinic's and
/// Manus'.
pub(crate) const PAGE_MAX_BODY_BYTES: usize = 16 << 20;

/// What a page fetch brought back.
#[derive(Debug)]
pub(super) enum Fetched {
    Response(RawResponse),
    Redirect,
    Failed(ConnectorError),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FetchAnswer {
    kind: String,
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    base64: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// One `fetch` from the current page (see [`script::FETCH`]).
pub(super) async fn page_fetch(
    client: &Client,
    url: &Url,
    method: &str,
    body: Option<String>,
    content_type: Option<&str>,
    max_bytes: usize,
    timeout: Duration,
) -> Result<Fetched, CommandFailure> {
    let args = vec![
        json!(url.as_str()),
        json!(method),
        body.map_or(Value::Null, Value::String),
        content_type.map_or(Value::Null, |c| json!(c)),
        json!(max_bytes),
        json!(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        json!("same-origin"),
    ];
    let run = client.execute_async(script::FETCH, args);
    let value = match tokio::time::timeout(timeout + SCRIPT_MARGIN, run).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            return match CommandFailure::of(&e) {
                CommandFailure::Timeout(m) => Ok(Fetched::Failed(ConnectorError::Timeout(m))),
                other => Err(other),
            };
        }
        Err(_) => {
            return Ok(Fetched::Failed(ConnectorError::Timeout(format!(
                "no complete answer within {} ms",
                timeout.as_millis()
            ))));
        }
    };
    let answer: FetchAnswer = serde_json::from_value(value)
        .map_err(|e| CommandFailure::Other(format!("unreadable fetch answer: {e}")))?;
    Ok(match answer.kind.as_str() {
        "response" => {
            let status = answer.status.unwrap_or(0);
            let bytes = match (answer.text, answer.base64) {
                (Some(text), _) => text.into_bytes(),
                (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| CommandFailure::Other(format!("unreadable body: {e}")))?,
                (None, None) => Vec::new(),
            };
            Fetched::Response(RawResponse::new(status, answer.content_type, bytes))
        }
        "redirect" => Fetched::Redirect,
        "too_large" => Fetched::Failed(ConnectorError::BodyTooLarge { limit: max_bytes }),
        "timeout" => Fetched::Failed(ConnectorError::Timeout(format!(
            "no complete answer within {} ms",
            timeout.as_millis()
        ))),
        _ => Fetched::Failed(ConnectorError::Unreachable(
            answer
                .message
                .unwrap_or_else(|| "the fetch failed".to_owned()),
        )),
    })
}

/// The failure of an `/api/ds/query`-style error frame: the frame's status (the HTTP
/// status when it gives none), its `errorType`, the complete redacted text, and the
/// digest of the raw body as it arrived.
pub(super) fn frame_failure(
    mapper: &ResponseMapper,
    raw: &RawResponse,
    frame: super::frame::ErrorFrame,
) -> Failure {
    let status = frame
        .status
        .filter(|s| !(200..300).contains(s))
        .unwrap_or(raw.status);
    let mut envelope = json!({"status": "error", "error": frame.error});
    if let Some(t) = &frame.error_type {
        envelope["errorType"] = json!(t);
    }
    let as_prometheus = RawResponse::new(status, raw.content_type.clone(), envelope.to_string());
    let mut failure = match mapper.evidence(&as_prometheus, &Compaction::default(), &KeepLabels) {
        Err(f) => f,
        Ok(_) => Failure::new(
            ErrorCode::http(Provider::Wetech, status),
            FailureClass::ProviderUnavailable,
            mapper.redactor().redact(&frame.error),
        ),
    };
    failure.error.http_status = Some(status);
    failure.error.body_digest = Some(raw.body_digest(mapper.redactor()));
    failure
}
