//! The session store of the HTTP tool servers: for each session (the digest of its
//! token, [`evidence_policy::SessionToken::digest`]) and package, the newest envelope the
//! runtime delivered. A call presenting a session's token runs under that envelope; an
//! older envelope of the session can never become current again.
//!
//! The store lives beside the turn ledger, in its directory's `sessions/` folder, so the
//! three package servers of a host (and their restarts) share it: one file per package
//! and session, `sessions/<package>/<digest hex>.json`, replaced whole (written aside,
//! then renamed) under an exclusive `flock` of its lock file. It holds envelopes and
//! their times only, never a token: an envelope bound to a session serves no call that
//! does not present the token, so the store gives nothing to a reader of its files.
//!
//! The order of a session's envelopes is their policies' `issued_at`: a delivery is
//! stored only when it was issued strictly later than the one held (re-delivering the
//! envelope held is accepted and changes nothing). Two envelopes issued at the same
//! second are refused as ambiguous: the runtime issues one per pass.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use evidence_policy::{SignedPolicy, TrustedPolicy};
use evidence_result::{Digest, PackageId};
use jiff::Timestamp;
use rustix::fs::{FlockOperation, flock};
use serde::{Deserialize, Serialize};

use crate::failure::{RuntimeFailure, RuntimeFailureKind};

/// The folder of the turn ledger directory that holds the sessions.
pub(crate) const SESSIONS_DIR: &str = "sessions";

/// Why a delivery or a lookup could not use the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SessionStoreError {
    /// A file of the store could not be created, locked, read or written.
    #[error("the session store {path} cannot be {action}: {source}")]
    Io {
        /// What was tried.
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A file of the store is not a stored session.
    #[error("the session store file {path} is not a stored session: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why it does not read.
        why: String,
    },
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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    policy_id: String,
    issued_at: Timestamp,
    expires_at: Timestamp,
    envelope: String,
}

/// The session store in a turn ledger directory (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct SessionStore {
    dir: PathBuf,
}

impl SessionStore {
    /// The store of `package` in the turn ledger directory `ledger_dir`.
    pub(crate) fn new(ledger_dir: &Path, package: &PackageId) -> Self {
        SessionStore {
            dir: ledger_dir.join(SESSIONS_DIR).join(package.to_string()),
        }
    }

    fn file(&self, session: &Digest) -> PathBuf {
        self.dir.join(format!("{}.json", hex_of(session)))
    }

    /// Stores `envelope` (whose `policy`, verified by the caller, names `session`) as the
    /// session's current envelope when it was issued after the one held.
    pub(crate) fn deliver(
        &self,
        session: &Digest,
        envelope: &SignedPolicy,
        policy: &TrustedPolicy,
    ) -> Result<Delivered, SessionStoreError> {
        let io = |action, path: &Path, source| SessionStoreError::Io {
            action,
            path: path.to_owned(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| io("created", &self.dir, e))?;
        let file = self.file(session);
        let lock_path = file.with_extension("lock");
        let lock = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| io("created", &lock_path, e))?;
        flock(&lock, FlockOperation::LockExclusive)
            .map_err(|e| io("locked", &lock_path, e.into()))?;
        let text = envelope.to_json().map_err(|e| SessionStoreError::Corrupt {
            path: file.clone(),
            why: e.to_string(),
        })?;
        let held = read_stored(&file)?;
        let replaced = match held {
            Some(held) if held.envelope == text => return Ok(Delivered::Unchanged),
            Some(held) if held.issued_at >= policy.issued_at => {
                return Ok(Delivered::NotNewer {
                    current: held.policy_id,
                    current_issued_at: held.issued_at,
                });
            }
            held => held.map(|held| held.policy_id),
        };
        let stored = Stored {
            policy_id: policy.policy_id.to_string(),
            issued_at: policy.issued_at,
            expires_at: policy.expires_at,
            envelope: text,
        };
        let aside = file.with_extension("json.new");
        let mut out = File::create(&aside).map_err(|e| io("written", &aside, e))?;
        let body = serde_json::to_vec(&stored).map_err(|e| SessionStoreError::Corrupt {
            path: aside.clone(),
            why: e.to_string(),
        })?;
        out.write_all(&body)
            .and_then(|()| out.sync_all())
            .map_err(|e| io("written", &aside, e))?;
        std::fs::rename(&aside, &file).map_err(|e| io("renamed into place", &file, e))?;
        drop(lock);
        Ok(Delivered::Stored { replaced })
    }

    /// The current envelope of `session` at `now`: `session_unknown` when none was
    /// delivered, `session_expired` when the newest has expired.
    pub(crate) fn current(
        &self,
        session: &Digest,
        now: Timestamp,
    ) -> Result<SignedPolicy, RuntimeFailure> {
        let unusable = |e: SessionStoreError| {
            RuntimeFailure::new(RuntimeFailureKind::ContextInvalid, e.to_string())
        };
        let file = self.file(session);
        let Some(stored) = read_stored(&file).map_err(unusable)? else {
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
                path: file,
                why: e.to_string(),
            })
        })
    }
}

fn read_stored(file: &Path) -> Result<Option<Stored>, SessionStoreError> {
    match std::fs::read(file) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| SessionStoreError::Corrupt {
                    path: file.to_owned(),
                    why: e.to_string(),
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SessionStoreError::Io {
            action: "read",
            path: file.to_owned(),
            source: e,
        }),
    }
}

fn hex_of(digest: &Digest) -> String {
    hex::encode(digest.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use evidence_policy::{KeyId, PolicySigner, SessionToken};
    use proptest::prelude::*;
    use serde_json::json;

    fn signer() -> PolicySigner {
        PolicySigner::from_seed(
            KeyId::new("store-test").unwrap(),
            secrecy::SecretBox::new(Box::new([5; 32])),
        )
    }

    /// The policy `policy_id` of the session `session`, issued `issued` seconds after a
    /// fixed start.
    fn signed(session: &Digest, policy_id: &str, issued: i64) -> (SignedPolicy, TrustedPolicy) {
        let start: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let at = start + jiff::SignedDuration::from_secs(issued);
        let mut policy = evidence_test_support::policy::issued(
            evidence_test_support::policy::apid_29213_policy("clinic").unwrap(),
            at,
            jiff::SignedDuration::from_hours(1),
        );
        policy["policy_id"] = json!(policy_id);
        policy["package"] = json!("managed_auto_oncall_clinic");
        policy["session"] = json!(session.to_string());
        let policy: TrustedPolicy = serde_json::from_value(policy).unwrap();
        let envelope = signer().sign(&policy, Digest::sha256(b"pkg")).unwrap();
        (envelope, policy)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the order of deliveries over several sessions, each session's current
        /// envelope is always the one issued latest among those delivered to it: an
        /// earlier one never comes back, and no session sees another's.
        #[test]
        fn the_current_envelope_is_always_the_latest_issued_of_its_own_session(
            deliveries in proptest::collection::vec((0usize..3, 0i64..40), 1..24),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let store = SessionStore::new(dir.path(), &PackageId::clinic());
            let tokens: Vec<Digest> = (0..3).map(|_| SessionToken::mint().digest()).collect();
            let mut latest: Vec<Option<(i64, String)>> = vec![None; 3];
            for (n, (session, issued)) in deliveries.into_iter().enumerate() {
                let policy_id = format!("pol-{session}-{issued}-{n}");
                let (envelope, policy) = signed(&tokens[session], &policy_id, issued);
                let delivered = store.deliver(&tokens[session], &envelope, &policy).unwrap();
                let newer = latest[session].as_ref().is_none_or(|(at, _)| issued > *at);
                prop_assert_eq!(matches!(delivered, Delivered::Stored { .. }), newer);
                if newer {
                    latest[session] = Some((issued, policy_id));
                }
                let now: Timestamp = "2026-12-01T00:01:00Z".parse().unwrap();
                for (i, token) in tokens.iter().enumerate() {
                    let current = store.current(token, now);
                    match &latest[i] {
                        None => prop_assert_eq!(
                            current.unwrap_err().kind,
                            RuntimeFailureKind::SessionUnknown
                        ),
                        Some((issued, policy_id)) => {
                            let (expected, _) = signed(&tokens[i], policy_id, *issued);
                            prop_assert_eq!(current.unwrap(), expected);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_session_past_its_newest_policy_is_expired_and_a_corrupt_file_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(dir.path(), &PackageId::clinic());
        let session = SessionToken::mint().digest();
        let (envelope, policy) = signed(&session, "pol-a", 0);
        store.deliver(&session, &envelope, &policy).unwrap();
        let later: Timestamp = "2026-12-01T02:00:00Z".parse().unwrap();
        let expired = store.current(&session, later).unwrap_err();
        assert_eq!(expired.kind, RuntimeFailureKind::SessionExpired);
        std::fs::write(store.file(&session), "{}").unwrap();
        let now: Timestamp = "2026-12-01T00:01:00Z".parse().unwrap();
        let corrupt = store.current(&session, now).unwrap_err();
        assert_eq!(corrupt.kind, RuntimeFailureKind::ContextInvalid);
        // Nothing in the store's files is a token: the file is named by the digest.
        let name = store.file(&session);
        assert!(
            name.to_str()
                .unwrap()
                .ends_with(&format!("{}.json", hex_of(&session)))
        );
    }
}
