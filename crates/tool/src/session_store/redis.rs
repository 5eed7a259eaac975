//! The Redis store of sessions, beside the Redis turn ledger, for servers on several
//! hosts: one key per package and session, `evidence:session:<package>:<digest hex>`,
//! holding the stored session as JSON. A delivery reads the key, judges with
//! [`super::judge`] in this process, and writes with a script that writes only when the
//! key still holds what was judged (judged again otherwise), so two replicas can never
//! make an older envelope current.
//!
//! The key is kept until an hour after the latest expiry of any envelope delivered to
//! the session (stored or refused as not newer): an envelope that could still verify can
//! never find the key gone and become current again.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use evidence_policy::{SignedPolicy, TrustedPolicy};
use evidence_result::{Digest, PackageId};
use redis::Script;

use super::judge::{Delivered, Judged, SessionStoreError, Stored, hex_of, judge};
use crate::ledger::redis::KEPT_AFTER_EXPIRY;
use crate::shared_state::{SharedState, SharedStateError};

/// Writes ARGV[2] (when not empty) when the key holds ARGV[1] ('' for none), and keeps
/// the key until at least ARGV[3] (ms). 1 when the key held ARGV[1], 0 otherwise.
const WRITE_IF: &str = r"
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return 0 end
if ARGV[2] ~= '' then redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL') end
if redis.call('PEXPIRETIME', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('PEXPIREAT', KEYS[1], ARGV[3])
end
return 1
";

/// The write script, its SHA1 computed once.
static WRITE_IF_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(WRITE_IF));

/// The sessions of one package in a Redis.
#[derive(Debug, Clone)]
pub(crate) struct RedisSessions {
    state: SharedState,
    prefix: String,
}

impl RedisSessions {
    /// The store of `package` in `state`.
    pub(crate) fn new(state: SharedState, package: &PackageId) -> Self {
        RedisSessions {
            state,
            prefix: format!("evidence:session:{package}:"),
        }
    }

    /// The Redis it uses.
    pub(crate) fn state(&self) -> &SharedState {
        &self.state
    }

    fn key(&self, session: &Digest) -> String {
        format!("{}{}", self.prefix, hex_of(session))
    }

    /// The session's stored envelope, if any, asked within `within`.
    pub(crate) fn read(
        &self,
        session: &Digest,
        within: Duration,
    ) -> Result<Option<Stored>, SessionStoreError> {
        let key = self.key(session);
        let raw = self.get(&key, within)?;
        parse(&key, raw.as_deref())
    }

    fn get(&self, key: &str, within: Duration) -> Result<Option<String>, SessionStoreError> {
        Ok(self
            .state
            .with("read", within, |c| redis::cmd("GET").arg(key).query(c))?)
    }

    /// Judges the delivery on what the key holds and writes when it is newer, again
    /// until no other delivery came in between or `within` is over.
    pub(crate) fn deliver(
        &self,
        session: &Digest,
        envelope: &SignedPolicy,
        policy: &TrustedPolicy,
        within: Duration,
    ) -> Result<Delivered, SessionStoreError> {
        let started = Instant::now();
        let key = self.key(session);
        let keep_until = (policy.expires_at + KEPT_AFTER_EXPIRY).as_millisecond();
        let script = &*WRITE_IF_SCRIPT;
        loop {
            let left = within.saturating_sub(started.elapsed());
            let raw = self.get(&key, left)?;
            let held = parse(&key, raw.as_deref())?;
            let (delivered, write) = match judge(held.as_ref(), envelope, policy, &key)? {
                Judged::Keep(delivered) => (delivered, String::new()),
                Judged::Store(delivered, stored) => {
                    let text =
                        serde_json::to_string(&stored).map_err(|e| SessionStoreError::Corrupt {
                            at: key.clone(),
                            why: e.to_string(),
                        })?;
                    (delivered, text)
                }
            };
            let left = within.saturating_sub(started.elapsed());
            let written: i64 = self.state.with("written", left, |c| {
                script
                    .key(&key)
                    .arg(raw.as_deref().unwrap_or(""))
                    .arg(&write)
                    .arg(keep_until)
                    .invoke(c)
            })?;
            match written {
                1 => return Ok(delivered),
                0 if started.elapsed() < within => {}
                0 => {
                    return Err(SessionStoreError::Shared(SharedStateError::Unavailable {
                        at: self.state.shown().to_owned(),
                        action: "written (other deliveries kept changing the session)",
                        why: "out of time".to_owned(),
                    }));
                }
                other => {
                    return Err(SessionStoreError::Shared(SharedStateError::Nonsense {
                        at: self.state.shown().to_owned(),
                        action: "the write",
                        why: format!("{other}, neither 0 nor 1"),
                    }));
                }
            }
        }
    }
}

fn parse(key: &str, raw: Option<&str>) -> Result<Option<Stored>, SessionStoreError> {
    raw.map(|text| {
        serde_json::from_str(text).map_err(|e| SessionStoreError::Corrupt {
            at: key.to_owned(),
            why: e.to_string(),
        })
    })
    .transpose()
}
