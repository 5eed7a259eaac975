//! Agent profiles: the dedicated Auto-oncall agent's exact pins to revisions of each
//! identity, and the report of their validation against a catalog.
//!
//! A pin is installed (its tool is offered to the model) or passive (registered,
//! digest-pinned and run by a canary command, never offered to the model). An identity
//! has at most one installed and at most one passive pin. Switching a provider from
//! passive to installed is one line of the profile, the pin's `"state"`, together with
//! the revision's `installed` flag in the catalog:
//!
//! ```json
//! {
//!   "identity": "managed_auto_oncall_clinic",
//!   "revision": "v4",
//!   "digest": "sha256:…",
//!   "state": "passive"
//! }
//! ```
//!
//! One concern per file: this module is what a profile says; `check` is what is wrong
//! with one; `error` names it.

use evidence_result::{Digest, PackageId, PolicySource, Provider};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::problem::JsonError;
use crate::{Revision, manifest::Template};

mod check;
mod error;

pub use error::ProfileError;

/// Whether a pinned revision is given to the agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PinState {
    /// Installed for the agent: its tool is offered to the model. The catalog marks the
    /// revision installed.
    #[default]
    Installed,
    /// Passive: registered, digest-pinned and run by a canary command, never offered to
    /// the model. The catalog marks the revision uninstalled.
    Passive,
}

impl PinState {
    /// Whether this is [`PinState::Installed`] (the default, left out of the JSON).
    pub fn is_installed(&self) -> bool {
        matches!(self, PinState::Installed)
    }
}

/// An exact pin of an agent to one revision and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    /// The identity.
    pub identity: PackageId,
    /// The exact revision.
    pub revision: Revision,
    /// The exact digest; checked against the recomputed digest.
    pub digest: Digest,
    /// Installed (the default, left out of the JSON) or passive.
    #[serde(default, skip_serializing_if = "PinState::is_installed")]
    pub state: PinState,
}

/// A revision named without a digest (a rollback candidate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevisionRef {
    /// The identity.
    pub identity: PackageId,
    /// The revision.
    pub revision: Revision,
}

/// The dedicated Auto-oncall agent: no memory, no session recall, no knowledge base, its
/// skills, and exact pins to revisions of each of the three identities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentProfile {
    /// The agent's name.
    pub agent: String,
    /// Long-term memory (must be off).
    pub memory: bool,
    /// Recall of earlier sessions (must be off).
    pub session_recall: bool,
    /// Knowledge base (must be off).
    pub knowledge_base: bool,
    /// The installed skills.
    pub skills: Vec<String>,
    /// The pins: every identity pinned, with at most one installed and at most one
    /// passive pin (of another revision) each.
    pub pins: Vec<Pin>,
    /// Revisions kept registered but uninstalled for a bounded rollback (at most one per
    /// identity).
    #[serde(default)]
    pub rollback: Vec<RevisionRef>,
}

/// What validation found for one pinned package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinnedPackage {
    /// The identity.
    pub identity: PackageId,
    /// The pinned revision.
    pub revision: Revision,
    /// Installed (offered to the model) or passive (never offered).
    pub state: PinState,
    /// The recomputed digest (equal to the pin).
    pub digest: Digest,
    /// The provider it runs (an installation fact, never an argument).
    pub provider: Provider,
    /// The sandbox template.
    pub template: Template,
    /// Its own secret names.
    pub secrets: Vec<String>,
    /// Its own exact hosts.
    pub hosts: Vec<String>,
    /// Its own audit stream.
    pub audit_stream: String,
    /// How it receives trusted policy.
    pub policy_source: PolicySource,
}

/// The report of a valid profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileReport {
    /// The agent.
    pub agent: String,
    /// The packages offered to the model: the installed pins, at most one per identity,
    /// each independent of the others. A passive pin is never among them.
    pub packages: Vec<PinnedPackage>,
    /// The passive pins, at most one per identity: checked like the installed ones and
    /// run by a canary command, never offered to the model.
    pub passive: Vec<PinnedPackage>,
    /// The rollback revisions, registered and uninstalled.
    pub rollback: Vec<RevisionRef>,
}

impl ProfileReport {
    /// Whether the model is offered this revision's tool: only an installed pin is.
    pub fn offers(&self, identity: &PackageId, revision: Revision) -> bool {
        self.packages
            .iter()
            .any(|p| p.identity == *identity && p.revision == revision)
    }
}

impl AgentProfile {
    /// Parses a profile from JSON.
    pub fn from_json(json: &str) -> Result<Self, ProfileError> {
        serde_json::from_str(json).map_err(|source| {
            ProfileError::Json(JsonError::new("agent profile".to_owned(), source))
        })
    }
}
