//! What both session stores share: the one rule that orders a session's envelopes
//! ([`judge`]), what it reads and answers ([`Stored`], [`Judged`], [`Delivered`]), the
//! stores' error, and the name of a session in either store ([`hex_of`]).

use evidence_policy::{SignedPolicy, TrustedPolicy};
use evidence_result::Digest;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::shared_state::SharedStateError;

/// Why a delivery or a lookup could not use the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SessionStoreError {
    /// A file of the store could not be created, locked, read or written.
    #[error("the session store {at} cannot be {action}: {source}")]
    Io {
        /// What was tried.
        action: &'static str,
        /// The file or folder.
        at: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// What the store holds for a session is not a stored session.
    #[error("the session store's {at} is not a stored session: {why}")]
    Corrupt {
        /// The file or key.
        at: String,
        /// Why it does not read.
        why: String,
    },
    /// The shared Redis could not be used.
    #[error(transparent)]
    Shared(#[from] SharedStateError),
}

/// What a delivery did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum Delivered {
    /// The envelope is now the session's current one (`replaced`: the `policy_id` it
    /// replaced, if any).
    Stored {
        /// The policy id of the envelope it replaced.
        replaced: Option<String>,
    },
    /// The envelope was already the current one.
    Unchanged,
    /// The session holds an envelope issued at the same time or later: nothing changed.
    NotNewer {
        /// The current envelope's policy id.
        current: String,
        /// When it was issued.
        current_issued_at: Timestamp,
    },
}

/// One stored session: its current envelope and the times of its policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Stored {
    pub(crate) policy_id: String,
    pub(crate) issued_at: Timestamp,
    pub(crate) expires_at: Timestamp,
    pub(crate) envelope: String,
}

/// What a delivery does to the session's stored envelope.
#[derive(Debug)]
pub(crate) enum Judged {
    /// Nothing changes.
    Keep(Delivered),
    /// The delivery replaces what is held.
    Store(Delivered, Stored),
}

/// The one rule of both stores: `envelope` (of `policy`) replaces `held` only when it was
/// issued strictly later.
pub(crate) fn judge(
    held: Option<&Stored>,
    envelope: &SignedPolicy,
    policy: &TrustedPolicy,
    at: &str,
) -> Result<Judged, SessionStoreError> {
    let text = envelope.to_json().map_err(|e| SessionStoreError::Corrupt {
        at: at.to_owned(),
        why: e.to_string(),
    })?;
    let replaced = match held {
        Some(held) if held.envelope == text => return Ok(Judged::Keep(Delivered::Unchanged)),
        Some(held) if held.issued_at >= policy.issued_at => {
            return Ok(Judged::Keep(Delivered::NotNewer {
                current: held.policy_id.clone(),
                current_issued_at: held.issued_at,
            }));
        }
        held => held.map(|held| held.policy_id.clone()),
    };
    let stored = Stored {
        policy_id: policy.policy_id.to_string(),
        issued_at: policy.issued_at,
        expires_at: policy.expires_at,
        envelope: text,
    };
    Ok(Judged::Store(Delivered::Stored { replaced }, stored))
}

/// The hex digits of a session digest: its name in either store.
pub(crate) fn hex_of(digest: &Digest) -> String {
    hex::encode(digest.as_bytes())
}
