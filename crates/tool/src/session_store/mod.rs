//! The session store of the HTTP tool servers: for each session (the digest of its
//! token, [`evidence_policy::SessionToken::digest`]) and package, the newest envelope the
//! runtime delivered. A call presenting a session's token runs under that envelope; an
//! older envelope of the session can never become current again.
//!
//! The store lives beside the turn ledger, in the same place: the ledger directory's
//! `sessions/` folder ([`file`], the servers of one host) or the ledger's Redis
//! ([`redis`], servers on several hosts), so the three package servers (their replicas
//! and restarts) share it. It holds envelopes and their times only, never a token: an
//! envelope bound to a session serves no call that does not present the token, so the
//! store gives nothing to a reader.
//!
//! The order of a session's envelopes is their policies' `issued_at`, one rule for both
//! stores ([`judge`]): a delivery is stored only when it was issued strictly later than
//! the one held (re-delivering the envelope held is accepted and changes nothing). Two
//! envelopes issued at the same instant are refused as ambiguous: the runtime issues
//! one per pass.

pub(crate) mod file;
pub(crate) mod redis;

use std::time::Duration;

use evidence_policy::{SignedPolicy, TrustedPolicy};
use evidence_result::{Digest, PackageId};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::shared_state::{SharedState, SharedStateError};
pub(crate) use file::FileSessions;
pub(crate) use redis::RedisSessions;

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

/// The session store of one package: in a directory, or in a Redis.
#[derive(Debug, Clone)]
pub(crate) enum SessionStore {
    /// Files beside the file ledger.
    File(FileSessions),
    /// Keys beside the Redis ledger.
    Redis(RedisSessions),
}

impl SessionStore {
    /// The store of `package` in the turn ledger directory `ledger_dir`.
    pub(crate) fn in_dir(ledger_dir: &std::path::Path, package: &PackageId) -> Self {
        SessionStore::File(FileSessions::new(ledger_dir, package))
    }

    /// The store of `package` in the Redis `state`.
    pub(crate) fn in_redis(state: SharedState, package: &PackageId) -> Self {
        SessionStore::Redis(RedisSessions::new(state, package))
    }

    /// The store's kind, as metrics name it: `file` or `redis`.
    pub(crate) fn backend(&self) -> &'static str {
        match self {
            SessionStore::File(_) => "file",
            SessionStore::Redis(_) => "redis",
        }
    }

    /// Stores `envelope` (whose `policy`, verified by the caller, names `session`) as the
    /// session's current envelope when it was issued after the one held; a Redis store
    /// waits at most `within`.
    pub(crate) fn deliver(
        &self,
        session: &Digest,
        envelope: &SignedPolicy,
        policy: &TrustedPolicy,
        within: Duration,
    ) -> Result<Delivered, SessionStoreError> {
        match self {
            SessionStore::File(store) => store.deliver(session, envelope, policy),
            SessionStore::Redis(store) => store.deliver(session, envelope, policy, within),
        }
    }

    /// The current envelope of `session` at `now`: `session_unknown` when none was
    /// delivered, `session_expired` when the newest has expired, and
    /// `turn_ledger_unavailable` when a Redis store cannot answer within `within`.
    pub(crate) fn current(
        &self,
        session: &Digest,
        now: Timestamp,
        within: Duration,
    ) -> Result<SignedPolicy, RuntimeFailure> {
        let unusable = |e: SessionStoreError| {
            let kind = match e {
                SessionStoreError::Shared(SharedStateError::Address { .. }) => {
                    RuntimeFailureKind::ContextInvalid
                }
                SessionStoreError::Shared(_) => RuntimeFailureKind::TurnLedgerUnavailable,
                _ => RuntimeFailureKind::ContextInvalid,
            };
            RuntimeFailure::new(kind, format!("{e}; nothing was sent"))
        };
        let held = match self {
            SessionStore::File(store) => store.read(session),
            SessionStore::Redis(store) => store.read(session, within),
        };
        let Some(stored) = held.map_err(unusable)? else {
            return Err(RuntimeFailure::new(
                RuntimeFailureKind::SessionUnknown,
                "no envelope was delivered to this server for the session the call presents; \
                 nothing was sent",
            ));
        };
        if stored.expires_at <= now {
            return Err(RuntimeFailure::new(
                RuntimeFailureKind::SessionExpired,
                format!(
                    "the session's newest policy expired at {}; nothing was sent",
                    stored.expires_at
                ),
            ));
        }
        SignedPolicy::from_json(&stored.envelope).map_err(|e| {
            unusable(SessionStoreError::Corrupt {
                at: "the session's stored envelope".to_owned(),
                why: e.to_string(),
            })
        })
    }
}

/// The hex digits of a session digest: its name in either store.
pub(crate) fn hex_of(digest: &Digest) -> String {
    hex::encode(digest.as_bytes())
}
