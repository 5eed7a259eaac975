//! The one rule for what the output guard does with each value derived from a storage
//! state, and when the whole state is refused. The guard builder
//! ([`GuardBuilder::add_storage_state`](crate::GuardBuilder::add_storage_state)), the
//! redactor's values ([`StorageState::protected_values`](super::StorageState::protected_values))
//! and the rotation check ([`check`](super::check)) all decide through it.

use secrecy::SecretString;

use super::derive::{DerivedValue, Role, derive_from};
use super::model::StorageState;
use crate::MIN_SECRET_BYTES;
use crate::secrets::SecretError;

/// What the output guard does with one derived value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Treatment {
    /// At least [`MIN_SECRET_BYTES`] long: guarded, whatever its role.
    Guarded,
    /// Shorter, and page state or a segment of a JWT guarded whole: left unguarded, for
    /// the reason given (`page state`, `a segment of a guarded JWT`).
    Unguarded(&'static str),
    /// Shorter, and a credential (for the reason given): it cannot be guarded without
    /// false positives, so the whole state is refused.
    Refused(&'static str),
}

/// What the guard does with `value`.
pub(crate) fn treatment(value: &DerivedValue) -> Treatment {
    if value.value.len() >= MIN_SECRET_BYTES {
        return Treatment::Guarded;
    }
    match value.role {
        Role::Credential(why) => Treatment::Refused(why),
        Role::Segment => Treatment::Unguarded("a segment of a guarded JWT"),
        Role::Data => Treatment::Unguarded("page state"),
    }
}

/// Why a whole storage state is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal<'d> {
    /// A credential too short to guard: its description and why it is a credential.
    TooShort {
        /// The description of the value (never the value).
        what: &'d str,
        /// Why it is a credential.
        why: &'static str,
    },
    /// No value is a credential: nothing to sign in with.
    NoCredential,
}

/// Why the state whose derived values are `derived` is refused (the first reason), or
/// `None` when the guard accepts it.
pub(crate) fn refusal(derived: &[DerivedValue]) -> Option<Refusal<'_>> {
    for d in derived {
        if let Treatment::Refused(why) = treatment(d) {
            return Some(Refusal::TooShort { what: &d.what, why });
        }
    }
    if derived
        .iter()
        .any(|d| matches!(d.role, Role::Credential(_)))
    {
        None
    } else {
        Some(Refusal::NoCredential)
    }
}

impl StorageState {
    /// Every value of the state that the output guard protects and that a redactor of
    /// provider text must cover (see [`storage_state_values`](super::storage_state_values)); `name` is the secret's
    /// name, for errors.
    pub fn protected_values(&self, name: &str) -> Result<Vec<SecretString>, SecretError> {
        Ok(derive_from(name, self)?
            .into_iter()
            .filter(|d| matches!(treatment(d), Treatment::Guarded))
            // A value that is not UTF-8 (a percent-decoding of other bytes) never
            // appears in text as itself; the guard searches its encodings.
            .filter_map(|d| {
                std::str::from_utf8(&d.value)
                    .ok()
                    .map(|v| SecretString::from(v.to_owned()))
            })
            .collect())
    }
}
