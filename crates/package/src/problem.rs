//! The problem shapes several operations share, each with its one message: a field
//! outside its documented shape, a file or folder that could not be read, a JSON document
//! that could not be parsed or written. Each per-operation error (see
//! [`error`](crate::error)) wraps the ones it can meet, transparently.

use std::path::PathBuf;

/// A field has a value outside its documented shape or range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {reason}")]
pub struct InvalidField {
    /// The offending field.
    pub field: String,
    /// Why it is refused.
    pub reason: String,
}

impl InvalidField {
    /// `field` refused for `reason`.
    pub(crate) fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        InvalidField {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// A file or folder could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}: {source}")]
pub struct ReadError {
    /// The path.
    pub path: PathBuf,
    /// The underlying error.
    #[source]
    pub source: std::io::Error,
}

impl ReadError {
    /// `path` could not be read.
    pub(crate) fn new(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ReadError {
            path: path.into(),
            source,
        }
    }
}

/// A JSON document could not be parsed (or written).
#[derive(Debug, thiserror::Error)]
#[error("cannot parse {what}: {source}")]
pub struct JsonError {
    /// What was parsed.
    pub what: String,
    /// The underlying error.
    #[source]
    pub source: serde_json::Error,
}

impl JsonError {
    /// `what` could not be parsed.
    pub(crate) fn new(what: impl Into<String>, source: serde_json::Error) -> Self {
        JsonError {
            what: what.into(),
            source,
        }
    }
}
