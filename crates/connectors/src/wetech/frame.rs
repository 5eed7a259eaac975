//! `/api/ds/query`-style error frames: Grafana's way of answering a failed datasource
//! query, `{"results": {"A": {"error": TEXT, "errorSource": "downstream", "status": N}}}`.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The Prometheus `errorType`s, as Prometheus writes them before its error text.
const ERROR_TYPES: [&str; 8] = [
    "bad_data",
    "execution",
    "timeout",
    "canceled",
    "internal",
    "unavailable",
    "not_found",
    "not_acceptable",
];

/// The first failed query of an error frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorFrame {
    /// The provider's complete error text.
    pub(crate) error: String,
    /// The status the frame gives for that query.
    pub(crate) status: Option<u16>,
    /// The Prometheus `errorType`: given by the frame, written before the text
    /// (`bad_data: ...`), or implied by a downstream 400 (`bad_data`) or 422
    /// (`execution`), the only statuses Prometheus uses for those types.
    pub(crate) error_type: Option<String>,
}

#[derive(Deserialize)]
struct Wire {
    results: BTreeMap<String, Result>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Result {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_source: Option<String>,
    #[serde(default)]
    error_type: Option<String>,
    #[serde(default)]
    status: Option<u16>,
}

/// The error frame in `body`, if the body is one and a query in it failed (the first
/// failed query by ref id).
pub(crate) fn error_frame(body: &[u8]) -> Option<ErrorFrame> {
    let wire: Wire = serde_json::from_slice(body).ok()?;
    let (_, failed) = wire
        .results
        .into_iter()
        .find(|(_, r)| r.error.as_deref().is_some_and(|e| !e.is_empty()))?;
    let error = failed.error?;
    let error_type = failed
        .error_type
        .filter(|t| !t.is_empty())
        .or_else(|| {
            let (head, _) = error.split_once(": ")?;
            ERROR_TYPES.contains(&head).then(|| head.to_owned())
        })
        .or_else(|| {
            let downstream = failed.error_source.as_deref() == Some("downstream");
            match (downstream, failed.status) {
                (true, Some(400)) => Some("bad_data".to_owned()),
                (true, Some(422)) => Some("execution".to_owned()),
                _ => None,
            }
        });
    Some(ErrorFrame {
        error,
        status: failed.status,
        error_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_frames() {
        let f = error_frame(br#"{"results":{"B":{"frames":[]},"A":{"error":"found duplicate series; many-to-many matching not allowed","errorSource":"downstream","status":422}}}"#).unwrap();
        assert_eq!(f.status, Some(422));
        assert_eq!(f.error_type.as_deref(), Some("execution"));
        assert!(f.error.starts_with("found duplicate series"));
        let f = error_frame(
            br#"{"results":{"A":{"error":"bad_data: 1:10: parse error","status":400}}}"#,
        )
        .unwrap();
        assert_eq!(f.error_type.as_deref(), Some("bad_data"));
        let f = error_frame(br#"{"results":{"A":{"error":"boom","status":500}}}"#).unwrap();
        assert_eq!(f.error_type, None);
        assert!(error_frame(br#"{"results":{"A":{"frames":[]}}}"#).is_none());
        assert!(
            error_frame(br#"{"status":"error","errorType":"execution","error":"x"}"#).is_none()
        );
        assert!(error_frame(b"not json").is_none());
    }
}
