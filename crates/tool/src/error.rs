//! The error of this crate: what stops a call from producing even a failure result, and
//! what refuses a packaging or signing request.

use std::path::PathBuf;

/// An error of `evidence-tool`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The result contract refused to build a result.
    #[error("result contract: {0}")]
    Result(#[from] evidence_result::ResultError),
    /// A package operation failed (loading, binding, audit).
    #[error("package: {0}")]
    Package(#[from] evidence_package::error::PackageError),
    /// A policy operation failed (signing, parsing).
    #[error("policy: {0}")]
    Policy(#[from] evidence_policy::PolicyError),
    /// A connector could not be built.
    #[error("connector: {0}")]
    Connector(#[from] evidence_connectors::ConnectorError),
    /// Reading or writing a file or stream failed.
    #[error("cannot {what} {path}: {source}")]
    Io {
        /// What was attempted.
        what: &'static str,
        /// The path (or stream name).
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// JSON could not be read or written.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// A packaging request cannot be carried out.
    #[error("packaging: {0}")]
    Packaging(String),
    /// The MCP server could not start, or its session ended abnormally.
    #[error("mcp server: {0}")]
    Mcp(String),
    /// A command-line usage error.
    #[error("{0}")]
    Usage(String),
}

/// Each per-operation error of `evidence-package` converts through its union, so `?`
/// works on any package call.
macro_rules! from_package_error {
    ($($error:ident),* $(,)?) => {$(
        impl From<evidence_package::error::$error> for ToolError {
            fn from(e: evidence_package::error::$error) -> Self {
                ToolError::Package(e.into())
            }
        }
    )*};
}

from_package_error!(
    ManifestError,
    LoadError,
    DigestMismatch,
    CatalogError,
    ProfileError,
    SecretError,
    AuditError,
    RevisionError,
);

impl ToolError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ToolError::Io {
            what,
            path: path.into(),
            source,
        }
    }
}
