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
//! stores (`judge.rs`): a delivery is stored only when it was issued strictly later than
//! the one held (re-delivering the envelope held is accepted and changes nothing). Two
//! envelopes issued at the same instant are refused as ambiguous: the runtime issues
//! one per pass.

pub(crate) mod file;
mod judge;
pub(crate) mod redis;

use std::time::Duration;

use evidence_policy::{SignedPolicy, TrustedPolicy};
use evidence_result::{Digest, PackageId};
use jiff::Timestamp;

use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::shared_state::{SharedState, SharedStateError};
pub(crate) use file::FileSessions;
pub(crate) use judge::{Delivered, SessionStoreError};
pub(crate) use redis::RedisSessions;

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
