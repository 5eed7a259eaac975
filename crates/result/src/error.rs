//! The error of building, checking or reading a result.

use thiserror::Error;

/// Everything that can go wrong while building, checking or reading a result.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ResultError {
    /// A query id is empty, too long, or holds a character outside `[A-Za-z0-9_.:-]`.
    #[error("invalid query id {0:?}: use 1-64 characters of letters, digits, '_', '-', '.', ':'")]
    InvalidQueryId(String),
    /// A package id is not a lower-case snake_case identifier.
    #[error("invalid package id {0:?}: use 1-64 characters of lower-case letters, digits and '_'")]
    InvalidPackageId(String),
    /// An error code is not a lower-case snake_case identifier.
    #[error("invalid error code {0:?}: use 1-64 characters of lower-case letters, digits and '_'")]
    InvalidErrorCode(String),
    /// A digest string is not `sha256:` followed by 64 lower-case hex digits.
    #[error("invalid digest {0:?}: expected 'sha256:' and 64 lower-case hex digits")]
    InvalidDigest(String),
    /// A request digest is not 32 lower-case hex digits (the first 128 bits of the
    /// request's SHA-256, without a prefix).
    #[error(
        "invalid request digest {0:?}: expected 32 lower-case hex digits (the first 128 bits \
         of the request's SHA-256, no prefix)"
    )]
    InvalidRequestDigest(String),
    /// A value could not be put into canonical JSON.
    #[error("cannot canonicalize request: {0}")]
    Canonical(String),
    /// Serializing details to JSON failed.
    #[error("cannot serialize details: {0}")]
    Serialize(#[source] serde_json::Error),
    /// The `text` of a result is not exactly the JSON of its `details`.
    #[error("result text is not exactly the JSON serialization of its details")]
    TextMismatch,
    /// An MCP `CallToolResult` does not carry a managed tool result.
    #[error("not a managed tool result: {0}")]
    NotAToolResult(&'static str),
    /// The details break a rule of the contract (for example a success without evidence).
    #[error("inconsistent details: {0}")]
    Inconsistent(&'static str),
}
