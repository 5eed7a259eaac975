use std::path::PathBuf;

use crate::catalog::CatalogProblem;
use crate::config::ConfigProblem;
use crate::orchestration::Refusal;

/// Everything that can go wrong while generating a workspace, validating its inputs,
/// reading a child agent's output or checking an orchestration transcript.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// A skill or group name does not match `^[a-z0-9]+(-[a-z0-9]+)*$` or is longer than 64.
    #[error(
        "invalid {kind} name {value:?}: use 1-64 lower-case letters and digits in '-'-separated words"
    )]
    InvalidName {
        /// What was being named (`skill`, `group`).
        kind: &'static str,
        /// The refused value.
        value: String,
    },
    /// An option given to the generator is unusable.
    #[error("invalid option {option}: {reason}")]
    InvalidOption {
        /// The option.
        option: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// The skill catalog does not hold against the skills tree or the loading rules.
    #[error("invalid skill catalog: {}", join(.0))]
    InvalidCatalog(Vec<CatalogProblem>),
    /// A generated or inspected `opencode.json` breaks the permission rules.
    #[error("invalid opencode configuration: {}", join(.0))]
    InvalidConfig(Vec<ConfigProblem>),
    /// A file or folder could not be read or written.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done (`read`, `write`, `create folder`, ...).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
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
        join_paths(.0)
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
    /// A generated JSON Schema could not be compiled into a validator.
    #[error("cannot compile the {name} schema: {reason}")]
    Schema {
        /// Which schema.
        name: &'static str,
        /// The compiler's message.
        reason: String,
    },
    /// A child agent's output file does not exist.
    #[error("child output {path} does not exist")]
    ChildOutputMissing {
        /// The expected file.
        path: PathBuf,
    },
    /// A child agent's output file exists but cannot be read, or is too large.
    #[error("child output {path} cannot be read: {reason}")]
    ChildOutputUnreadable {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        reason: String,
    },
    /// A child agent's output is not JSON.
    #[error("child output {path} is not valid JSON: {reason}")]
    ChildOutputNotJson {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// The parser's message.
        reason: String,
    },
    /// A child agent's output is JSON but does not satisfy its schema.
    #[error("child output {path} does not match its schema: {}", .violations.join("; "))]
    ChildOutputSchema {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// One line per violation: instance location and message.
        violations: Vec<String>,
    },
    /// A child agent's output satisfies its schema but breaks a protocol rule (for example a
    /// TiDB high CPU diagnosis without a Go GC metrics check).
    #[error("child output {path} fails the protocol checks: {}", .problems.join("; "))]
    ChildOutputRejected {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// One line per broken rule.
        problems: Vec<String>,
    },
    /// An orchestration step is not allowed by the protocol at this point.
    #[error("step {index} refused: {refusal}")]
    StepRefused {
        /// Zero-based position of the step in the transcript.
        index: usize,
        /// Why it was refused.
        refusal: Refusal,
    },
    /// The workspace's path inside the OpenCode worktree cannot be written as a literal
    /// permission pattern.
    #[error("cannot confine edits for a workspace at {path}: {reason}")]
    UnsupportedPlacement {
        /// The workspace (or relative path) refused.
        path: PathBuf,
        /// Why.
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
    /// A `SKILL_CATALOG.md` source file is malformed.
    #[error("malformed skill catalog {path}, line {line}: {reason}")]
    CatalogSource {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// One-based line of the problem (0 when it concerns the whole file).
        line: usize,
        /// What is wrong.
        reason: String,
    },
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

/// How a child task failed, as the orchestration protocol sees it: every kind is a failed
/// child task that may be retried at most once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildFailure {
    /// The output file does not exist.
    Missing,
    /// The output file cannot be read or is too large.
    Unreadable,
    /// The output is not JSON.
    InvalidJson,
    /// The output does not satisfy its schema.
    SchemaInvalid,
    /// The output breaks a protocol rule (quality checks, unsafe paths, ...).
    Rejected,
}

impl WorkspaceError {
    /// The child-task failure this error stands for, if it is one.
    pub fn child_failure(&self) -> Option<ChildFailure> {
        match self {
            Self::ChildOutputMissing { .. } => Some(ChildFailure::Missing),
            Self::ChildOutputUnreadable { .. } => Some(ChildFailure::Unreadable),
            Self::ChildOutputNotJson { .. } => Some(ChildFailure::InvalidJson),
            Self::ChildOutputSchema { .. } => Some(ChildFailure::SchemaInvalid),
            Self::ChildOutputRejected { .. } => Some(ChildFailure::Rejected),
            _ => None,
        }
    }

    /// The catalog problems, when this is [`WorkspaceError::InvalidCatalog`].
    pub fn catalog_problems(&self) -> &[CatalogProblem] {
        match self {
            Self::InvalidCatalog(problems) => problems,
            _ => &[],
        }
    }

    /// The refusal, when this is [`WorkspaceError::StepRefused`].
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Self::StepRefused { refusal, .. } => Some(refusal),
            _ => None,
        }
    }

    /// The configuration problems, when this is [`WorkspaceError::InvalidConfig`].
    pub fn config_problems(&self) -> &[ConfigProblem] {
        match self {
            Self::InvalidConfig(problems) => problems,
            _ => &[],
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
