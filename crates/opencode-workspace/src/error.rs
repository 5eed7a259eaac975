//! The crate's error, above every operation's own: each operation returns its own error
//! (generation, catalog validation and reading, configuration parsing and checking, child
//! output reading, orchestration steps, ...), and [`WorkspaceError`] converts from each,
//! so an embedder can propagate any of them with `?`. Asking the installed OpenCode
//! ([`crate::cli`], [`crate::detect`]) returns it directly.

use std::path::PathBuf;

use crate::catalog::{CatalogError, CatalogSourceError};
use crate::config::{ConfigError, ConfigParseError};
use crate::generate::{CheckError, GenerateError};
pub use crate::io_error::IoError;
use crate::mcp::McpServerError;
use crate::names::NameError;
use crate::orchestration::StepError;
use crate::outputs::ChildOutputError;
use crate::placement::PlacementError;

/// Everything that can go wrong while generating a workspace, validating its inputs,
/// reading a child agent's output, checking an orchestration transcript or asking the
/// installed OpenCode. The messages are the operations' own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// A skill or group name is refused.
    #[error(transparent)]
    Name(#[from] NameError),
    /// A file or folder could not be read or written.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The skill catalog does not hold against the skills tree or the loading rules.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A `SKILL_CATALOG.md` source file cannot be read or is malformed.
    #[error(transparent)]
    CatalogSource(#[from] CatalogSourceError),
    /// The workspace's place in the OpenCode worktree cannot be found or named.
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// An `opencode.json` text cannot be read as a configuration.
    #[error(transparent)]
    ConfigParse(#[from] ConfigParseError),
    /// An `opencode.json` breaks the permission rules.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An MCP server is refused.
    #[error(transparent)]
    McpServer(#[from] McpServerError),
    /// A child agent's output cannot be used.
    #[error(transparent)]
    ChildOutput(#[from] ChildOutputError),
    /// An orchestration step is not allowed by the protocol at this point.
    #[error(transparent)]
    Step(#[from] StepError),
    /// A workspace cannot be generated or written.
    #[error(transparent)]
    Generate(#[from] GenerateError),
    /// A generated workspace no longer sits where its edit patterns point.
    #[error(transparent)]
    Check(#[from] CheckError),
    /// Running the OpenCode command line failed, or its output was not understood.
    #[error("opencode {command}: {reason}")]
    OpenCode {
        /// The subcommand (e.g. `debug agent diagnosis-orchestrator`).
        command: String,
        /// What went wrong, with OpenCode's own error text when it gave one.
        reason: String,
    },
    /// Serializing generated content failed.
    #[error("cannot serialize {what}: {reason}")]
    Serialize {
        /// What was being serialized.
        what: &'static str,
        /// The serializer's message.
        reason: String,
    },
}

impl WorkspaceError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io(IoError::new(action, path, source))
    }
}
