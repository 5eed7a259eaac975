//! The error of starting or driving the real test processes.

use std::path::PathBuf;

use thiserror::Error;

/// Everything that can go wrong while starting or driving the real test processes.
#[derive(Debug, Error)]
pub enum TestSupportError {
    /// A program the tests need is not installed.
    #[error("`{program}` was not found on PATH: install with `{install}`")]
    MissingProgram {
        /// The program that was looked for.
        program: &'static str,
        /// The command that installs it.
        install: &'static str,
    },
    /// A file system operation failed.
    #[error("{context} ({path}): {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// `promtool` could not backfill the fixture.
    #[error("promtool failed to backfill the {fixture} fixture: {output}")]
    Backfill {
        /// The fixture name.
        fixture: String,
        /// What promtool printed.
        output: String,
    },
    /// A process exited or never became ready.
    #[error("{program} did not become ready: {detail}")]
    NotReady {
        /// The program.
        program: &'static str,
        /// Why, with the tail of its log where there is one.
        detail: String,
    },
    /// A test front could not bind or serve.
    #[error("test front failed: {0}")]
    Front(String),
    /// A background task failed.
    #[error("background task failed: {0}")]
    Task(String),
    /// A package source could not be copied for local use.
    #[error("package source: {0}")]
    PackageSource(String),
}

impl TestSupportError {
    pub(crate) fn io(
        context: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        TestSupportError::Io {
            context,
            path: path.into(),
            source,
        }
    }
}
