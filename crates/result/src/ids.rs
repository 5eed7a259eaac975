//! Identifiers of the contract: query ids, package ids, error codes, and the provider
//! and operation a result is for.

use std::fmt;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ResultError;

fn is_snake_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && s.as_bytes()[0].is_ascii_lowercase()
}

checked_string! {
    /// The stable identity of one diagnostic objective: 1-64 characters of letters,
    /// digits, `_`, `-`, `.` and `:`. Attempts with the same `QueryId` are one objective.
    #[derive(JsonSchema)]
    pub struct QueryId;
    check: |s| !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':')),
    error: ResultError = ResultError::InvalidQueryId,
}

checked_string! {
    /// The identity of a Managed Tool package, e.g. `managed_auto_oncall_clinic`.
    #[derive(JsonSchema)]
    pub struct PackageId;
    check: is_snake_id,
    error: ResultError = ResultError::InvalidPackageId,
}

checked_string! {
    /// A machine-readable error code that names its origin, e.g. `clinic_http_422`,
    /// `promql_parse_error`, `scope_violation`.
    #[derive(JsonSchema)]
    pub struct ErrorCode;
    check: is_snake_id,
    error: ResultError = ResultError::InvalidErrorCode,
}

impl PackageId {
    /// The Clinic package identity.
    pub fn clinic() -> Self {
        Self(Arc::from("managed_auto_oncall_clinic"))
    }
    /// The Manus package identity.
    pub fn manus() -> Self {
        Self(Arc::from("managed_auto_oncall_manus"))
    }
    /// The Wetech package identity.
    pub fn wetech() -> Self {
        Self(Arc::from("managed_auto_oncall_wetech"))
    }
}

impl ErrorCode {
    /// An HTTP rejection code that names its origin: `http("grafana", 422)` is
    /// `grafana_http_422`.
    pub fn http(origin: Provider, status: u16) -> Self {
        let prefix = match origin {
            Provider::Clinic => "clinic",
            Provider::Manus => "manus",
            Provider::Wetech => "grafana",
        };
        Self(Arc::from(format!("{prefix}_http_{status}")))
    }

    /// A code from a fixed identifier of this crate's known codes.
    fn known(code: &'static str) -> Self {
        Self(Arc::from(code))
    }

    /// The PromQL expression did not parse.
    pub fn promql_parse_error() -> Self {
        Self::known("promql_parse_error")
    }
    /// A selector reaches outside the policy's scope labels.
    pub fn scope_violation() -> Self {
        Self::known("scope_violation")
    }
    /// The expression reads outside the policy window plus look-back.
    pub fn window_violation() -> Self {
        Self::known("window_violation")
    }
    /// The output held a bound secret and was replaced.
    pub fn output_blocked() -> Self {
        Self::known("output_blocked")
    }
}

/// The provider a package talks to. It is fixed by installation and routing, never by
/// a model argument.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// The Clinic API over HTTP.
    Clinic,
    /// Manus over an HTTP session, targets `vida` and `monica`.
    Manus,
    /// Wetech through Chromium in front of Grafana.
    Wetech,
}

impl Provider {
    /// The lower-case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Clinic => "clinic",
            Provider::Manus => "manus",
            Provider::Wetech => "wetech",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The provider operation a result is for. Only `query_range` is allowed today.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// A Prometheus-style range query.
    QueryRange,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_id_rules() {
        assert!(QueryId::new("tidb_cpu:top-1.v2").is_ok());
        assert!(QueryId::new("").is_err());
        assert!(QueryId::new("a b").is_err());
        assert!(QueryId::new("x".repeat(64)).is_ok());
        assert!(QueryId::new("x".repeat(65)).is_err());
        let err: Result<QueryId, _> = serde_json::from_str("\"bad id\"");
        assert!(err.is_err());
    }

    #[test]
    fn http_codes_name_origin() {
        assert_eq!(
            ErrorCode::http(Provider::Clinic, 422).as_str(),
            "clinic_http_422"
        );
        assert_eq!(
            ErrorCode::http(Provider::Wetech, 422).as_str(),
            "grafana_http_422"
        );
        assert_eq!(
            ErrorCode::http(Provider::Manus, 400).as_str(),
            "manus_http_400"
        );
        assert!(ErrorCode::new("Bad-Code").is_err());
    }
}
