//! What is wrong with secret values: one missing or unknown to the auth binding, too
//! short to guard, a storage state that is not one or holds no credential, a binding
//! asked for another package, an output guard that cannot be built.

use evidence_result::{Digest, PackageId};
use thiserror::Error;

use crate::Revision;
use crate::problem::{InvalidField, JsonError};

/// Secret values refused while binding them to a package, parsing a storage state or
/// building the output guard. No message ever contains a secret value.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SecretError {
    /// A secret value is missing from a binding.
    #[error("secret `{0}` of the auth binding has no value")]
    MissingSecret(String),
    /// A value was given for a secret the auth binding does not name.
    #[error("secret `{0}` is not part of the package's auth binding")]
    UnknownSecret(String),
    /// A secret value is too short to be guarded without false positives.
    #[error(
        "secret `{name}`: {what} is shorter than {min} bytes and cannot be guarded without false positives; refused"
    )]
    SecretTooShort {
        /// The secret name.
        name: String,
        /// Which value (the secret itself or a storage-state entry, never the value).
        what: String,
        /// The minimum length.
        min: usize,
    },
    /// A browser storage state secret is not valid Playwright storage state.
    #[error("secret `{name}`: not a Playwright storage state: {reason}")]
    InvalidStorageState {
        /// The secret name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A browser storage state holds no credential: nothing to sign in with and nothing
    /// the output guard could tell apart from page state.
    #[error(
        "secret `{name}`: the storage state holds no credential (no httpOnly cookie, no cookie, localStorage entry or JSON leaf named like a session or credential, no JWT); refused"
    )]
    StorageStateWithoutCredential {
        /// The secret name.
        name: String,
    },
    /// A secret binding was asked for another package digest.
    #[error(
        "secrets are bound to {bound} {bound_revision} ({bound_digest}), not to {requested} {requested_revision} ({requested_digest}); no environment is produced"
    )]
    BindingMismatch {
        /// The bound identity.
        bound: PackageId,
        /// The bound revision.
        bound_revision: Revision,
        /// The bound digest.
        bound_digest: Digest,
        /// The requested identity.
        requested: PackageId,
        /// The requested revision.
        requested_revision: Revision,
        /// The requested digest.
        requested_digest: Digest,
    },
    /// The output guard automaton could not be built.
    #[error("cannot build the output guard: {0}")]
    Guard(String),
    /// A field has a value outside its documented shape or range.
    #[error(transparent)]
    InvalidField(#[from] InvalidField),
    /// A JSON document could not be parsed.
    #[error(transparent)]
    Json(#[from] JsonError),
}

impl SecretError {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        SecretError::InvalidField(InvalidField::new(field, reason))
    }
}
