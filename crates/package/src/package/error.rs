//! What is wrong with a package's files: a file listed but missing or present but
//! unlisted, an entrypoint that is not executable, a folder that cannot be read, and a
//! digest that does not match the recomputed one.

use std::path::PathBuf;

use evidence_result::Digest;
use thiserror::Error;

use crate::manifest::ManifestError;
use crate::problem::{InvalidField, JsonError, ReadError};

/// A digest written somewhere (a pin, a catalog file) does not match the one recomputed
/// from the content.
#[derive(Debug, Error)]
#[error("{what}: stated digest {stated} does not match recomputed digest {actual}")]
#[non_exhaustive]
pub struct DigestMismatch {
    /// What was checked.
    pub what: String,
    /// The digest as written.
    pub stated: Digest,
    /// The digest recomputed from the content.
    pub actual: Digest,
}

/// A package refused while building it from a manifest and files or loading it from a
/// folder.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The package directory holds a file the manifest does not list.
    #[error("field `files`: file {0:?} is in the package but not listed")]
    UnlistedFile(String),
    /// The manifest lists a file the package does not hold.
    #[error("field `files`: listed file {0:?} is missing")]
    MissingFile(String),
    /// The entrypoint is not an executable file of the package.
    #[error("field `entrypoint`: {0:?} is not executable")]
    EntrypointNotExecutable(String),
    /// A package's reviewable source holds its entrypoint, which only packaging builds in.
    #[error(
        "{0:?} is the entrypoint binary: package source holds no built binary (packaging adds it)"
    )]
    BuiltFileInSource(String),
    /// A file path is listed twice.
    #[error("field `{field}`: duplicate path {path:?}")]
    DuplicatePath {
        /// The offending field.
        field: String,
        /// The path as written.
        path: String,
    },
    /// A file path is malformed.
    #[error("field `{field}`: invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The offending field.
        field: String,
        /// The path as written.
        path: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A field has a value outside its documented shape or range.
    #[error(transparent)]
    InvalidField(#[from] InvalidField),
    /// A package file or folder could not be read.
    #[error(transparent)]
    Io(#[from] ReadError),
    /// A JSON document could not be parsed.
    #[error(transparent)]
    Json(#[from] JsonError),
    /// The manifest is refused.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A digest does not match the recomputed one.
    #[error(transparent)]
    DigestMismatch(#[from] DigestMismatch),
}

impl LoadError {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        LoadError::InvalidField(InvalidField::new(field, reason))
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LoadError::Io(ReadError::new(path, source))
    }
}
