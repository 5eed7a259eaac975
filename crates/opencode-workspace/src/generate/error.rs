//! Everything that can stop a generation: the options, the catalog, the workspace's place,
//! and the files already there. Nothing is written when it stops.

use std::path::PathBuf;

use crate::catalog::{CatalogError, CatalogProblem};
use crate::io_error::IoError;
use crate::placement::PlacementError;

/// Why a workspace cannot be generated or written; nothing was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// The skill catalog does not hold against the skills tree or the loading rules.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// An option given to the generator is unusable.
    #[error("invalid option {option}: {reason}")]
    InvalidOption {
        /// The option.
        option: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// The workspace's place in the OpenCode worktree cannot be found or named.
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// A file or folder could not be read or written.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A path the generator would write through is a symbolic link or not the expected kind.
    #[error("refusing to write through {path}: {reason}")]
    UnsafePath {
        /// The offending path.
        path: PathBuf,
        /// Why it is refused.
        reason: &'static str,
    },
    /// Files the generator owns were changed by someone else; nothing was written.
    #[error(
        "these files were changed outside the generator and are left as they are (nothing was written): {}",
        .0.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    Conflict(Vec<PathBuf>),
    /// An existing file the generator must merge into or read cannot be understood.
    #[error("cannot use existing {path}: {reason}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why it is unusable.
        reason: String,
    },
    /// `opencode.json` already names another `default_agent`; it is left as it is and
    /// nothing is written.
    #[error(
        "opencode.json already sets default_agent to {existing:?}; remove it or set it to {generated:?} (nothing was written)"
    )]
    DefaultAgentConflict {
        /// The user's value.
        existing: String,
        /// The agent the generator would set.
        generated: String,
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

impl GenerateError {
    /// The catalog problems, when this is [`GenerateError::Catalog`].
    pub fn catalog_problems(&self) -> &[CatalogProblem] {
        match self {
            Self::Catalog(error) => error.problems(),
            _ => &[],
        }
    }
}
