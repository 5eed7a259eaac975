//! What is wrong with an agent profile: a feature that must be off, a pin that is
//! missing, doubled, unknown, uninstalled or not digest-exact, a passive revision
//! installed for the agent, a rollback revision out of bounds, shared secrets or audit
//! streams.

use evidence_result::PackageId;
use thiserror::Error;

use crate::Revision;
use crate::manifest::ManifestError;
use crate::package::DigestMismatch;
use crate::problem::{InvalidField, JsonError};

/// An agent profile refused while parsing it or validating it against a catalog.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// A field has a value outside its documented shape or range.
    #[error(transparent)]
    InvalidField(#[from] InvalidField),
    /// The identity is not one of the three Managed Tool identities.
    #[error("field `identity`: unknown package identity `{0}`")]
    UnknownIdentity(PackageId),
    /// The catalog holds no such revision.
    #[error("{identity} {revision} is not registered")]
    UnknownRevision {
        /// The identity.
        identity: PackageId,
        /// The revision.
        revision: Revision,
    },
    /// A profile pins a revision that is registered but not installed.
    #[error("pin {identity} {revision} is not installed")]
    PinNotInstalled {
        /// The identity.
        identity: PackageId,
        /// The revision.
        revision: Revision,
    },
    /// Two revisions of one identity are installed at once.
    #[error("{identity} has more than one installed revision: {revisions:?}")]
    TwoInstalledRevisions {
        /// The identity.
        identity: PackageId,
        /// The installed revisions.
        revisions: Vec<Revision>,
    },
    /// A profile has more than one installed pin for an identity.
    #[error("field `pins`: {0} is pinned more than once")]
    DuplicatePin(PackageId),
    /// A profile has more than one passive pin for an identity.
    #[error("field `pins`: {0} has more than one passive pin")]
    DuplicatePassivePin(PackageId),
    /// A passive pin names a revision that is installed for the agent: pinned installed
    /// too, or marked installed in the catalog. A passive revision is never offered to
    /// the model.
    #[error("field `pins`: passive {identity} {revision} is installed for the agent: {reason}")]
    PassiveRevisionInstalled {
        /// The identity.
        identity: PackageId,
        /// The revision.
        revision: Revision,
        /// Why it counts as installed.
        reason: &'static str,
    },
    /// A profile does not pin one of the three identities (neither installed nor
    /// passive).
    #[error("field `pins`: {0} is not pinned")]
    MissingPin(PackageId),
    /// A profile enables a feature the Auto-oncall agent must not have.
    #[error("field `{0}`: must be disabled for the Auto-oncall agent")]
    FeatureEnabled(&'static str),
    /// A rollback revision is installed or pinned (installed or passive), or more than
    /// one per identity.
    #[error("field `rollback`: {identity} {revision}: {reason}")]
    InvalidRollback {
        /// The identity.
        identity: PackageId,
        /// The revision.
        revision: Revision,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A secret name is also used by another package identity of the catalog.
    #[error("field `{field}`: secret name `{name}` is already bound by package `{other}`")]
    SharedSecretName {
        /// The offending field.
        field: String,
        /// The secret name.
        name: String,
        /// The other identity.
        other: PackageId,
    },
    /// Two pinned packages share an audit stream.
    #[error("field `audit_stream`: stream `{stream}` is used by both {first} and {second}")]
    SharedAuditStream {
        /// The stream.
        stream: String,
        /// One identity.
        first: PackageId,
        /// The other identity.
        second: PackageId,
    },
    /// A JSON document could not be parsed.
    #[error(transparent)]
    Json(#[from] JsonError),
    /// A pinned package's manifest is refused (its network or argument schema).
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A pinned digest does not match the recomputed one.
    #[error(transparent)]
    DigestMismatch(#[from] DigestMismatch),
}

impl ProfileError {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ProfileError::InvalidField(InvalidField::new(field, reason))
    }
}
