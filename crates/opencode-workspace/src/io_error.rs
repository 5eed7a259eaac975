//! The one failure every file-touching operation shares: a file or folder that could not
//! be read, inspected or written. Each operation's error wraps it, so the message is
//! written once.

use std::path::{Path, PathBuf};

/// A file or folder could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {path}: {source}")]
pub struct IoError {
    action: &'static str,
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

impl IoError {
    pub(crate) fn new(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self {
            action,
            path: path.into(),
            source,
        }
    }

    /// What was being done (`read`, `write`, `create folder`, ...).
    pub fn action(&self) -> &'static str {
        self.action
    }

    /// The path involved.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The kind of the underlying error.
    pub fn kind(&self) -> std::io::ErrorKind {
        self.source.kind()
    }
}
