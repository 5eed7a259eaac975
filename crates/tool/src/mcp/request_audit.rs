//! The audit record of an HTTP request that is not a tool call: every request a package's
//! server over HTTP receives leaves one audit record. A `tools/call` the MCP service
//! takes leaves its call's record (`evidence_package::AuditRecord`); every other request,
//! accepted (`initialize`, `tools/list`, a notification, the session's event stream or
//! its end, an envelope delivery) or refused (a `Host` or `Origin` not allowed, a body
//! over its bound, an unknown path, a delivery refused), leaves one [`RequestRecord`] in
//! the same audit log, told apart by its `"record": "http_request"`.
//!
//! A request record holds what the request asked and how it was answered, never a body,
//! a header value or a session token: a delivery names the `policy_id` it carried, a
//! refusal its reason code.

use std::path::Path;

use evidence_result::{Digest, PackageId};
use jiff::Timestamp;
use serde::Serialize;

use crate::ToolError;
use crate::output::append_line;

/// The value of `record` that marks a request record.
pub const HTTP_REQUEST_RECORD: &str = "http_request";

/// One HTTP request's audit record (see the module documentation).
#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    /// Always [`HTTP_REQUEST_RECORD`].
    pub record: &'static str,
    /// When the request arrived (RFC 3339, UTC).
    pub time: Timestamp,
    /// The package's audit stream.
    pub stream: String,
    /// The package identity.
    pub package: PackageId,
    /// The package digest the server computed at start.
    pub digest: Digest,
    /// The HTTP method.
    pub method: String,
    /// The request path (without its query).
    pub path: String,
    /// The JSON-RPC method of a message posted to the MCP endpoint, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_method: Option<String>,
    /// The HTTP status answered.
    pub status: u16,
    /// Why the request was refused, as a fixed code (absent for an accepted request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<&'static str>,
    /// The policy id of a delivered envelope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
    /// Milliseconds from arrival to the answer's head.
    pub duration_ms: u64,
}

/// Appends `record` as one JSON line to `audit_log` (stderr when `None`).
pub(crate) fn write_request_record(
    record: &RequestRecord,
    audit_log: Option<&Path>,
) -> Result<(), ToolError> {
    let what = (
        "append the request record to",
        "write the request record to",
    );
    append_line(&serde_json::to_string(record)?, what, audit_log)
}
