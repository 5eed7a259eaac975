//! Why the canary could not run at all (a deployment it cannot use, an output folder it
//! cannot write). A provider that fails is no error: it is an unverified target in the
//! report.

use std::path::PathBuf;

/// The canary could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RolloutError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The deployment file is not the deployment shape.
    #[error("{path} is not a canary deployment file: {source}")]
    DeploymentShape {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
    /// The deployment cannot be used as written.
    #[error("deployment: {0}")]
    Deployment(String),
    /// A target's policy could not be built or signed.
    #[error("policy: {0}")]
    Policy(String),
    /// The report could not be encoded.
    #[error("report: {0}")]
    Encode(#[from] serde_json::Error),
}
