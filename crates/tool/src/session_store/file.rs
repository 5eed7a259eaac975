//! The file store of sessions, for the servers of one host: in the turn ledger
//! directory's `sessions/` folder, one file per package and session,
//! `sessions/<package>/<digest hex>.json`, replaced whole (written aside, then renamed)
//! under an exclusive `flock` of its lock file.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use evidence_policy::{SignedPolicy, TrustedPolicy};
use evidence_result::{Digest, PackageId};
use rustix::fs::{FlockOperation, flock};

use super::judge::{Delivered, Judged, SessionStoreError, Stored, hex_of, judge};

/// The folder of the turn ledger directory that holds the sessions.
pub(crate) const SESSIONS_DIR: &str = "sessions";

/// The session store in a turn ledger directory (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct FileSessions {
    dir: PathBuf,
}

impl FileSessions {
    /// The store of `package` in the turn ledger directory `ledger_dir`.
    pub(crate) fn new(ledger_dir: &Path, package: &PackageId) -> Self {
        FileSessions {
            dir: ledger_dir.join(SESSIONS_DIR).join(package.to_string()),
        }
    }

    /// The store's folder.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, session: &Digest) -> PathBuf {
        self.dir.join(format!("{}.json", hex_of(session)))
    }

    /// Judges the delivery of `envelope` with [`judge`] under the session's lock, and
    /// writes it when it is newer.
    pub(crate) fn deliver(
        &self,
        session: &Digest,
        envelope: &SignedPolicy,
        policy: &TrustedPolicy,
    ) -> Result<Delivered, SessionStoreError> {
        let io = |action, path: &Path, source| SessionStoreError::Io {
            action,
            at: path.display().to_string(),
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
        let held = read_stored(&file)?;
        let (delivered, stored) =
            match judge(held.as_ref(), envelope, policy, &file.display().to_string())? {
                Judged::Keep(delivered) => return Ok(delivered),
                Judged::Store(delivered, stored) => (delivered, stored),
            };
        let aside = file.with_extension("json.new");
        let mut out = File::create(&aside).map_err(|e| io("written", &aside, e))?;
        let body = serde_json::to_vec(&stored).map_err(|e| SessionStoreError::Corrupt {
            at: aside.display().to_string(),
            why: e.to_string(),
        })?;
        out.write_all(&body)
            .and_then(|()| out.sync_all())
            .map_err(|e| io("written", &aside, e))?;
        std::fs::rename(&aside, &file).map_err(|e| io("renamed into place", &file, e))?;
        drop(lock);
        Ok(delivered)
    }

    /// The session's stored envelope, if any.
    pub(crate) fn read(&self, session: &Digest) -> Result<Option<Stored>, SessionStoreError> {
        read_stored(&self.file(session))
    }
}

fn read_stored(file: &Path) -> Result<Option<Stored>, SessionStoreError> {
    match std::fs::read(file) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| SessionStoreError::Corrupt {
                    at: file.display().to_string(),
                    why: e.to_string(),
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SessionStoreError::Io {
            action: "read",
            at: file.display().to_string(),
            source: e,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::SessionStore;
    use super::*;
    use crate::failure::RuntimeFailureKind;
    use crate::shared_state::SharedState;
    use evidence_test_support::RedisServer;
    use jiff::Timestamp;
    use std::sync::LazyLock;
    use std::time::Duration;

    /// When the test policies are issued from: now, since a Redis store keeps a session
    /// only until an hour after its policies expire, by the real clock.
    static START: LazyLock<Timestamp> = LazyLock::new(Timestamp::now);
    const W: Duration = Duration::from_secs(10);

    fn minutes(n: i64) -> Timestamp {
        *START + jiff::SignedDuration::from_mins(n)
    }
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
        signed_lasting(
            session,
            policy_id,
            issued,
            jiff::SignedDuration::from_hours(1),
        )
    }

    /// [`signed`], the policy expiring `lasting` after it is issued.
    fn signed_lasting(
        session: &Digest,
        policy_id: &str,
        issued: i64,
        lasting: jiff::SignedDuration,
    ) -> (SignedPolicy, TrustedPolicy) {
        let at = *START + jiff::SignedDuration::from_secs(issued);
        let mut policy = evidence_test_support::policy::issued(
            evidence_test_support::policy::apid_29213_policy("clinic").unwrap(),
            at,
            lasting,
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
            on_redis in proptest::bool::ANY,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let server = on_redis.then(|| RedisServer::start().unwrap());
            let store = match &server {
                None => SessionStore::in_dir(dir.path(), &PackageId::clinic()),
                Some(server) => SessionStore::in_redis(
                    SharedState::open(&server.url().into(), None).unwrap(),
                    &PackageId::clinic(),
                ),
            };
            let tokens: Vec<Digest> = (0..3).map(|_| SessionToken::mint().digest()).collect();
            let mut latest: Vec<Option<(i64, String)>> = vec![None; 3];
            for (n, (session, issued)) in deliveries.into_iter().enumerate() {
                let policy_id = format!("pol-{session}-{issued}-{n}");
                let (envelope, policy) = signed(&tokens[session], &policy_id, issued);
                let delivered = store.deliver(&tokens[session], &envelope, &policy, W).unwrap();
                let newer = latest[session].as_ref().is_none_or(|(at, _)| issued > *at);
                prop_assert_eq!(matches!(delivered, Delivered::Stored { .. }), newer);
                if newer {
                    latest[session] = Some((issued, policy_id));
                }
                let now = minutes(1);
                for (i, token) in tokens.iter().enumerate() {
                    let current = store.current(token, now, W);
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Whatever the issue times and lifetimes of the envelopes delivered to a session
        /// in Redis, in any order (each stored, or refused as not newer), the session's
        /// key is kept until an hour after the latest expiry of any of them: an envelope
        /// issued later that expires sooner never shortens it, so an envelope that could
        /// still verify never finds the key gone.
        #[test]
        fn a_redis_sessions_expiry_only_ever_moves_later(
            deliveries in proptest::collection::vec((0i64..40, 5i64..240), 1..12),
        ) {
            let server = RedisServer::start().unwrap();
            let store = SessionStore::in_redis(
                SharedState::open(&server.url().into(), None).unwrap(),
                &PackageId::clinic(),
            );
            let session = SessionToken::mint().digest();
            let key = format!("evidence:session:{}:{}", PackageId::clinic(), hex_of(&session));
            let mut c = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
            let mut latest = i64::MIN;
            for (n, (issued, minutes)) in deliveries.into_iter().enumerate() {
                let (envelope, policy) = signed_lasting(
                    &session,
                    &format!("pol-{n}"),
                    issued,
                    jiff::SignedDuration::from_mins(minutes),
                );
                store.deliver(&session, &envelope, &policy, W).unwrap();
                latest = latest.max(
                    (policy.expires_at + crate::ledger::redis::KEPT_AFTER_EXPIRY).as_millisecond(),
                );
                let at: i64 = redis::cmd("PEXPIRETIME").arg(&key).query(&mut c).unwrap();
                prop_assert_eq!(at, latest, "after delivery {}", n);
            }
        }
    }

    #[test]
    fn a_session_past_its_newest_policy_is_expired_and_a_corrupt_file_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let files = FileSessions::new(dir.path(), &PackageId::clinic());
        let store = SessionStore::File(files.clone());
        let session = SessionToken::mint().digest();
        let (envelope, policy) = signed(&session, "pol-a", 0);
        store.deliver(&session, &envelope, &policy, W).unwrap();
        let expired = store.current(&session, minutes(120), W).unwrap_err();
        assert_eq!(expired.kind, RuntimeFailureKind::SessionExpired);
        std::fs::write(files.file(&session), "{}").unwrap();
        let corrupt = store.current(&session, minutes(1), W).unwrap_err();
        assert_eq!(corrupt.kind, RuntimeFailureKind::ContextInvalid);
        // Nothing in the store's files is a token: the file is named by the digest.
        let name = files.file(&session);
        assert!(
            name.to_str()
                .unwrap()
                .ends_with(&format!("{}.json", hex_of(&session)))
        );
    }

    #[test]
    fn a_redis_session_is_kept_an_hour_past_the_latest_expiry_delivered() {
        let server = RedisServer::start().unwrap();
        let store = SessionStore::in_redis(
            SharedState::open(&server.url().into(), None).unwrap(),
            &PackageId::clinic(),
        );
        let session = SessionToken::mint().digest();
        let (first, first_policy) = signed(&session, "pol-a", 0);
        store.deliver(&session, &first, &first_policy, W).unwrap();
        let key = format!(
            "evidence:session:{}:{}",
            PackageId::clinic(),
            hex_of(&session)
        );
        let mut c = redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let expiry = |c: &mut redis::Connection| -> i64 {
            redis::cmd("PEXPIRETIME").arg(&key).query(c).unwrap()
        };
        let kept =
            (first_policy.expires_at + crate::ledger::redis::KEPT_AFTER_EXPIRY).as_millisecond();
        assert_eq!(expiry(&mut c), kept);
        // A later envelope moves it on; an earlier one refused leaves it.
        let (second, second_policy) = signed(&session, "pol-b", 30);
        store.deliver(&session, &second, &second_policy, W).unwrap();
        let later =
            (second_policy.expires_at + crate::ledger::redis::KEPT_AFTER_EXPIRY).as_millisecond();
        assert_eq!(expiry(&mut c), later);
        let refused = store.deliver(&session, &first, &first_policy, W).unwrap();
        assert!(matches!(refused, Delivered::NotNewer { .. }), "{refused:?}");
        assert_eq!(expiry(&mut c), later);
    }
}
