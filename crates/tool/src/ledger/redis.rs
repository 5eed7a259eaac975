//! The Redis store of the turn ledger, for servers on several hosts (and several
//! replicas of each package behind a load balancer). A turn is three keys in one hash
//! slot: `evidence:turn:{<policy_id>}:entries`, a list of JSON entries (at most three
//! per admitted call); `evidence:turn:{<policy_id>}:running`, a sorted set of the
//! admitted calls' leases (score: when the lease ends, in Redis' own milliseconds, so
//! the hosts' clocks do not matter); and `evidence:turn:{<policy_id>}:refusals`, a hash
//! of the turn's refusals counted by code.
//!
//! An admission reads the turn (the entries and the leases still running, one script),
//! judges the call with [`super::judge`] in this process, and writes with a second
//! script that writes only when the list still has the length it was judged on (it
//! appends an admission, or counts a refusal with `HINCRBY`); when another replica
//! appended in between, the call is judged again on the new entries. So two replicas
//! can never both admit what one `Turn` would refuse, the rules stay in
//! [`evidence_materialize::Turn`] (Redis only stores and orders), and a refusal adds
//! nothing for later admissions to read.
//!
//! A lease ends when the call's deadline and margin end: a replica killed mid-call
//! leaves an admission whose lease runs out, and the next admission of the turn appends
//! it as abandoned, as the file store does for a running file nobody holds. The keys
//! expire an hour after the latest-expiring policy that wrote to the turn (no call
//! verifies under it by then, whatever the clocks of the hosts say within
//! [`evidence_policy::CLOCK_SKEW`] many times over): every write only ever moves a key's
//! expiry later, so an envelope of the same `policy_id` that expires sooner never
//! shortens the life of a turn a longer-lived one still uses.

use std::collections::BTreeSet;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use evidence_materialize::Call;
use redis::Script;

use super::entry::Entry;
use super::error::LedgerError;
use super::judge::{Ruled, TurnSpec, Verdict, judge};
use crate::shared_state::{SharedState, SharedStateError};

/// How long after its policy expires a turn's keys are kept.
pub(crate) const KEPT_AFTER_EXPIRY: jiff::SignedDuration = jiff::SignedDuration::from_hours(1);

/// The turn's entries and the leases running now, as Redis' clock says.
const READ: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local entries = redis.call('LRANGE', KEYS[1], 0, -1)
local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf')
return {entries, live}
";

/// The Lua function of the write scripts that keeps every key of `keys` until at least
/// `at` (ms) and the latest expiry any of them has: an expiry only ever moves later, and
/// the keys of a turn (one recreated since, too) expire together. A missing key is left.
const KEEP_UNTIL: &str = r"
local function keep(keys, at)
  for _, key in ipairs(keys) do
    local t = redis.call('PEXPIRETIME', key)
    if t > at then at = t end
  end
  for _, key in ipairs(keys) do
    if redis.call('PEXPIRETIME', key) < at then redis.call('PEXPIREAT', key, at) end
  end
end
";

/// When the list has ARGV[1] entries: appends ARGV[6..], counts a refusal of code
/// ARGV[5] (when not empty), adds the lease of call ARGV[3] (when not empty) for ARGV[4]
/// ms, drops the leases that ended, and keeps the keys until at least ARGV[2] (ms). 1
/// when written, 0 when the turn changed.
const APPEND_IF: &str = r"
if redis.call('LLEN', KEYS[1]) ~= tonumber(ARGV[1]) then return 0 end
for i = 6, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
if ARGV[5] ~= '' then redis.call('HINCRBY', KEYS[3], ARGV[5], 1) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[3]) end
keep(KEYS, tonumber(ARGV[2]))
return 1
";

/// Appends the answer ARGV[3] of call ARGV[1] and ends its lease; the keys are kept
/// until at least ARGV[2] (ms).
const ANSWER: &str = r"
redis.call('RPUSH', KEYS[1], ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[1])
keep(KEYS, tonumber(ARGV[2]))
return 1
";

/// The scripts, each one's SHA1 computed once per process rather than per call.
static READ_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(READ));
static APPEND_IF_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(&format!("{KEEP_UNTIL}{APPEND_IF}")));
static ANSWER_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(&format!("{KEEP_UNTIL}{ANSWER}")));

/// A turn ledger in a shared Redis.
#[derive(Debug, Clone)]
pub(crate) struct RedisLedger {
    state: SharedState,
}

/// The lease of an admitted call, ended when its answer is appended.
#[derive(Debug)]
pub(crate) struct Running {
    state: SharedState,
    keys: Keys,
    expire_at_ms: i64,
    log_within: Duration,
}

#[derive(Debug, Clone)]
struct Keys {
    entries: String,
    running: String,
    refusals: String,
}

impl Keys {
    fn of(spec: &TurnSpec) -> Self {
        let policy = &spec.policy_id;
        Keys {
            entries: format!("evidence:turn:{{{policy}}}:entries"),
            running: format!("evidence:turn:{{{policy}}}:running"),
            refusals: format!("evidence:turn:{{{policy}}}:refusals"),
        }
    }
}

/// How much earlier than the call's deadline a Redis that does not answer is given up
/// on (half the time left when that is less than twice this): the call then answers
/// `turn_ledger_unavailable`, naming Redis, rather than its provider's timeout.
const BEFORE_DEADLINE: Duration = Duration::from_millis(250);

/// How long a check at start may take.
const CHECK_WITHIN: Duration = Duration::from_secs(5);

impl RedisLedger {
    /// The ledger in the Redis `state` (not connected yet).
    pub(crate) fn new(state: SharedState) -> Self {
        RedisLedger { state }
    }

    /// The Redis it uses.
    pub(crate) fn state(&self) -> &SharedState {
        &self.state
    }

    /// Connects (checking durability) and asks for a `PONG`.
    pub(crate) fn check(&self) -> Result<(), LedgerError> {
        let pong: String = self
            .state
            .with("pinged", CHECK_WITHIN, |c| redis::cmd("PING").query(c))?;
        if pong == "PONG" {
            Ok(())
        } else {
            Err(LedgerError::Shared(SharedStateError::Nonsense {
                at: self.state.shown().to_owned(),
                action: "PING",
                why: format!("{} bytes that are not PONG", pong.len()),
            }))
        }
    }

    /// Judges `call` on the turn's entries and writes (appends the admission, or counts
    /// the refusal), again until no other admission came in between or `spec.wait` is
    /// over.
    pub(crate) fn admit(
        &self,
        spec: &TurnSpec,
        call: &Call,
    ) -> Result<Ruled<Running>, LedgerError> {
        let started = Instant::now();
        let keys = Keys::of(spec);
        let expire_at_ms = (spec.expires_at + KEPT_AFTER_EXPIRY).as_millisecond();
        let (read, append_if) = (&*READ_SCRIPT, &*APPEND_IF_SCRIPT);
        let lease_ms = u64::try_from(spec.runs_for.as_millis()).unwrap_or(u64::MAX);
        let wait = if spec.wait > BEFORE_DEADLINE * 2 {
            spec.wait - BEFORE_DEADLINE
        } else {
            spec.wait / 2
        };
        let mut attempts = 0_u32;
        loop {
            let left = wait.saturating_sub(started.elapsed());
            if attempts > 0 && left.is_zero() {
                return Err(LedgerError::Contended { attempts });
            }
            attempts += 1;
            let (raw, live): (Vec<String>, Vec<String>) = self.state.with("read", left, |c| {
                read.key(&keys.entries).key(&keys.running).invoke(c)
            })?;
            let entries = parse_entries(&keys.entries, &raw)?;
            let live: BTreeSet<u32> = live.iter().filter_map(|n| n.parse().ok()).collect();
            let judged = judge(spec.limits, &entries, |n| !live.contains(&n), call)?;
            let lines = judged
                .appended
                .iter()
                .map(serde_json::to_string)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| LedgerError::Corrupt {
                    at: keys.entries.clone(),
                    line: 0,
                    why: e.to_string(),
                })?;
            let lease_call = match &judged.verdict {
                Verdict::Run(n) => n.to_string(),
                Verdict::Refused(_) => String::new(),
            };
            let refused = judged.verdict.refusal_code().unwrap_or("");
            let left = wait.saturating_sub(started.elapsed());
            let appended: i64 = self.state.with("appended to", left, |c| {
                append_if
                    .key(&keys.entries)
                    .key(&keys.running)
                    .key(&keys.refusals)
                    .arg(raw.len())
                    .arg(expire_at_ms)
                    .arg(&lease_call)
                    .arg(lease_ms)
                    .arg(refused)
                    .arg(&lines)
                    .invoke(c)
            })?;
            match appended {
                1 => {}
                0 => continue,
                other => {
                    return Err(LedgerError::Shared(SharedStateError::Nonsense {
                        at: self.state.shown().to_owned(),
                        action: "the append",
                        why: format!("{other}, neither 0 nor 1"),
                    }));
                }
            }
            return Ok(match judged.verdict {
                Verdict::Run(number) => Ruled::Run {
                    call: number,
                    running: Running {
                        state: self.state.clone(),
                        keys,
                        expire_at_ms,
                        log_within: spec.log_within,
                    },
                },
                Verdict::Refused(refusal) => Ruled::Refused(refusal),
            });
        }
    }
}

impl Running {
    /// Appends the answer of call `call` and ends its lease.
    pub(crate) fn log(self, call: u32, entry: &Entry) -> Result<(), LedgerError> {
        let line = serde_json::to_string(entry).map_err(|e| LedgerError::Corrupt {
            at: self.keys.entries.clone(),
            line: 0,
            why: e.to_string(),
        })?;
        let _appended: i64 = self.state.with("appended to", self.log_within, |c| {
            ANSWER_SCRIPT
                .key(&self.keys.entries)
                .key(&self.keys.running)
                .key(&self.keys.refusals)
                .arg(call)
                .arg(self.expire_at_ms)
                .arg(&line)
                .invoke(c)
        })?;
        Ok(())
    }
}

fn parse_entries(key: &str, raw: &[String]) -> Result<Vec<Entry>, LedgerError> {
    raw.iter()
        .enumerate()
        .map(|(i, text)| {
            serde_json::from_str(text).map_err(|e| LedgerError::Corrupt {
                at: key.to_owned(),
                line: i + 1,
                why: e.to_string(),
            })
        })
        .collect()
}
