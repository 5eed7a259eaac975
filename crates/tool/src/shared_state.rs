//! The Redis that the turn ledger and the session store of tool servers on several hosts
//! share (`EVIDENCE_TURN_LEDGER=redis://...` or `rediss://...`): its address, held as a
//! secret since it may carry the password and shown only with the password replaced;
//! TLS (`rediss://`, the system's roots or the CA file `EVIDENCE_TURN_LEDGER_CA`); the
//! check that the server keeps what it acknowledges (the append-only file with
//! `appendfsync always`: a restart must not reopen a stopped turn) and never evicts it
//! (`maxmemory-policy noeviction`: every key of a turn and a session has a time to live,
//! so a policy that evicts such keys, as managed services' `volatile-lru` default does,
//! could drop a stopped turn under memory pressure); and a few open connections reused by
//! the calls of a process, each use bounded by a timeout the caller gives (what is left
//! of the call's deadline).
//!
//! Every failure is a [`SharedStateError`] whose text names the redacted address and
//! never the password: Redis not reachable, not answering in time, answering what is not
//! a Redis answer, or running without the persistence or the eviction policy the turn
//! rules need.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::{Client, Connection, IntoConnectionInfo as _, RedisError};
use secrecy::{ExposeSecret as _, SecretString};

/// The URL schemes of a Redis turn ledger.
pub(crate) const SCHEMES: [&str; 2] = ["redis://", "rediss://"];

/// The shortest timeout a use is given (a timeout of zero means none to the socket).
const MIN_TIMEOUT: Duration = Duration::from_millis(1);

/// How many idle connections a process keeps.
const POOL: usize = 16;

/// Why the shared state could not be used. Each one fails the call closed.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum SharedStateError {
    /// The address does not parse, or its TLS material cannot be read.
    #[error("the turn ledger's Redis address {at} cannot be used: {why}")]
    Address { at: String, why: String },
    /// Redis could not be reached or did not answer in time.
    #[error("the turn ledger's Redis at {at} could not be {action}: {why}")]
    Unavailable {
        at: String,
        action: &'static str,
        why: String,
    },
    /// Redis answered something that is not the answer asked for.
    #[error(
        "the turn ledger's Redis at {at} answered {action} with what the ledger cannot read: {why}"
    )]
    Nonsense {
        at: String,
        action: &'static str,
        why: String,
    },
    /// Redis does not keep what it acknowledges across a restart.
    #[error(
        "the turn ledger's Redis at {at} does not keep what it acknowledges across a restart \
         ({why}); run it with `appendonly yes` and `appendfsync always`"
    )]
    NotDurable { at: String, why: String },
    /// Redis may evict keys under memory pressure.
    #[error(
        "the turn ledger's Redis at {at} may evict keys under memory pressure \
         (maxmemory-policy is {policy}), and an evicted turn is a reset turn; set \
         `maxmemory-policy noeviction` (`CONFIG SET maxmemory-policy noeviction`, and the \
         same line in redis.conf, or the service's parameter of that name)"
    )]
    Evicting { at: String, policy: String },
}

/// The Redis of a deployment (see the module documentation). Cloning shares the
/// connections.
#[derive(Clone)]
pub(crate) struct SharedState {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    /// The address with its password replaced, for every message.
    shown: String,
    /// The password, to scrub from any text a Redis error carries.
    password: Option<SecretString>,
    idle: Mutex<Vec<Connection>>,
}

impl std::fmt::Debug for SharedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SharedState")
            .field(&self.inner.shown)
            .finish()
    }
}

/// Whether `text` names a Redis (one of [`SCHEMES`]).
pub(crate) fn is_redis_url(text: &str) -> bool {
    SCHEMES.iter().any(|s| text.starts_with(s))
}

/// `url` with any password replaced by `***` (and nothing else of it changed), or a
/// placeholder when it does not parse.
pub(crate) fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ignored = parsed.set_password(Some("***"));
            }
            parsed.to_string()
        }
        Err(_) => "(an address that is not a URL)".to_owned(),
    }
}

impl SharedState {
    /// The Redis at `url` (`redis://` or `rediss://`), its server certificate checked
    /// against `ca_pem` when given (else the system's roots). Nothing is connected yet.
    pub(crate) fn open(
        url: &SecretString,
        ca_pem: Option<Vec<u8>>,
    ) -> Result<Self, SharedStateError> {
        let text = url.expose_secret();
        let shown = redacted(text);
        let address = |why: String| SharedStateError::Address {
            at: shown.clone(),
            why,
        };
        let parsed = url::Url::parse(text).map_err(|e| address(e.to_string()))?;
        if !is_redis_url(text) {
            return Err(address("it is neither redis:// nor rediss://".to_owned()));
        }
        let tls = parsed.scheme() == "rediss";
        if ca_pem.is_some() && !tls {
            return Err(address(
                "a CA file is given for a plain redis:// address; use rediss://".to_owned(),
            ));
        }
        let password = parsed
            .password()
            .map(|p| SecretString::from(percent_decoded(p)));
        if tls {
            // The connectors' provider, unless the process chose one already.
            if rustls::crypto::CryptoProvider::get_default().is_none() {
                let _already = rustls::crypto::ring::default_provider().install_default();
            }
        }
        // No `CLIENT SETINFO` at connect: its replies are read one timeout each, and
        // their errors ignored, so a stopped Redis would hold a connect past its time.
        let info = text
            .into_connection_info()
            .map(|info| {
                let settings = info.redis_settings().clone().set_skip_set_lib_name();
                info.set_redis_settings(settings)
            })
            .map_err(|e| address(scrub(&e.to_string(), password.as_ref())))?;
        let client = match ca_pem {
            Some(root) => Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(root),
                },
            ),
            None => Client::open(info),
        };
        let client = client.map_err(|e| address(scrub(&e.to_string(), password.as_ref())))?;
        Ok(SharedState {
            inner: Arc::new(Inner {
                client,
                shown,
                password,
                idle: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The address as every message shows it (password replaced).
    pub(crate) fn shown(&self) -> &str {
        &self.inner.shown
    }

    /// Runs `work` on a connection (an idle one, or a new one checked for durability),
    /// all of it, connecting and checking included, within `timeout`. A connection that
    /// failed is dropped, never reused.
    pub(crate) fn with<T>(
        &self,
        action: &'static str,
        timeout: Duration,
        work: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T, SharedStateError> {
        let by = Instant::now() + timeout.max(MIN_TIMEOUT);
        let idle = self.inner.idle.lock().ok().and_then(|mut idle| idle.pop());
        let mut conn = match idle {
            Some(conn) => conn,
            None => self.connect(by)?,
        };
        self.bound(&conn, by)?;
        match work(&mut conn) {
            Ok(value) => {
                if let Ok(mut idle) = self.inner.idle.lock()
                    && idle.len() < POOL
                {
                    idle.push(conn);
                }
                Ok(value)
            }
            Err(e) => Err(self.error(action, &e)),
        }
    }

    /// Bounds the next reads and writes of `conn` by the instant `by`.
    fn bound(&self, conn: &Connection, by: Instant) -> Result<(), SharedStateError> {
        let left = by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(SharedStateError::Unavailable {
                at: self.inner.shown.clone(),
                action: "used",
                why: "out of time".to_owned(),
            });
        }
        conn.set_read_timeout(Some(left))
            .and_then(|()| conn.set_write_timeout(Some(left)))
            .map_err(|e| self.error("configured", &e))
    }

    fn connect(&self, by: Instant) -> Result<Connection, SharedStateError> {
        let left = by
            .saturating_duration_since(Instant::now())
            .max(MIN_TIMEOUT);
        let mut conn = self
            .inner
            .client
            .get_connection_with_timeout(left)
            .map_err(|e| self.error("connected to", &e))?;
        self.check_durable(&mut conn, by)?;
        self.check_no_eviction(&mut conn, by)?;
        Ok(conn)
    }

    /// Refuses a Redis whose `maxmemory-policy` (as `INFO memory` says, which managed
    /// services answer where they refuse `CONFIG`) is not `noeviction`: every key of a
    /// turn and a session has a time to live, so any other policy may evict one (the
    /// `volatile-*` ones evict exactly such keys), and a turn evicted is a turn reset.
    fn check_no_eviction(
        &self,
        conn: &mut Connection,
        by: Instant,
    ) -> Result<(), SharedStateError> {
        self.bound(conn, by)?;
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query(conn)
            .map_err(|e| self.error("asked for its memory settings", &e))?;
        let policy = info
            .lines()
            .find_map(|l| l.trim().strip_prefix("maxmemory_policy:"))
            .map(str::to_owned);
        match policy.as_deref() {
            Some("noeviction") => Ok(()),
            Some(other) => Err(SharedStateError::Evicting {
                at: self.inner.shown.clone(),
                policy: other.to_owned(),
            }),
            None => Err(SharedStateError::Nonsense {
                at: self.inner.shown.clone(),
                action: "INFO memory",
                why: "no maxmemory_policy field".to_owned(),
            }),
        }
    }

    /// Refuses a Redis without the append-only file, or (where `CONFIG GET` answers) one
    /// that does not fsync each write: an acknowledged admission or stop would be lost
    /// by a restart.
    fn check_durable(&self, conn: &mut Connection, by: Instant) -> Result<(), SharedStateError> {
        self.bound(conn, by)?;
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query(conn)
            .map_err(|e| self.error("asked for its persistence", &e))?;
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
                .map(str::to_owned)
        };
        let not_durable = |why: String| SharedStateError::NotDurable {
            at: self.inner.shown.clone(),
            why,
        };
        match field("aof_enabled").as_deref() {
            Some("1") => {}
            Some(other) => return Err(not_durable(format!("aof_enabled is {other}"))),
            None => {
                return Err(SharedStateError::Nonsense {
                    at: self.inner.shown.clone(),
                    action: "INFO persistence",
                    why: "no aof_enabled field".to_owned(),
                });
            }
        }
        // Managed services may refuse CONFIG; the append-only file is then their promise.
        self.bound(conn, by)?;
        let fsync: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("appendfsync")
            .query(conn);
        match fsync {
            Ok(pair) => {
                if let [_, value] = pair.as_slice()
                    && value != "always"
                {
                    return Err(not_durable(format!("appendfsync is {value}")));
                }
            }
            // Not answered: the connection may still get the reply, so it is not used.
            Err(e) if is_unanswered(&e) => return Err(self.error("asked for appendfsync", &e)),
            // Refused (`CONFIG` renamed or not permitted): the append-only file is the
            // service's promise.
            Err(_) => {}
        }
        Ok(())
    }

    fn error(&self, action: &'static str, e: &RedisError) -> SharedStateError {
        let at = self.inner.shown.clone();
        let why = scrub(&e.to_string(), self.inner.password.as_ref());
        if e.is_io_error()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
        {
            SharedStateError::Unavailable { at, action, why }
        } else {
            SharedStateError::Nonsense { at, action, why }
        }
    }
}

/// Whether `e` is Redis not answering (unreachable, too slow, gone), as against an
/// answer that is an error or not the one asked for.
fn is_unanswered(e: &RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal()
}

/// `text` with the password, if it appears, replaced.
fn scrub(text: &str, password: Option<&SecretString>) -> String {
    match password.map(|p| p.expose_secret()) {
        Some(p) if !p.is_empty() => text.replace(p, "***"),
        _ => text.to_owned(),
    }
}

fn percent_decoded(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_never_shown() {
        assert_eq!(
            redacted("redis://:s3cret@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            redacted("rediss://user:p%40ss@host:6380"),
            "rediss://user:***@host:6380"
        );
        assert_eq!(redacted("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        let url = SecretString::from("redis://:s3cret@127.0.0.1:1/0");
        let state = SharedState::open(&url, None).unwrap();
        assert!(!format!("{state:?}").contains("s3cret"));
        // Nothing listens on port 1: refused, and the message names no password.
        let err = state
            .with("read", Duration::from_millis(200), |c| {
                redis::cmd("PING").query::<String>(c)
            })
            .unwrap_err();
        assert!(matches!(err, SharedStateError::Unavailable { .. }), "{err}");
        assert!(!err.to_string().contains("s3cret"), "{err}");
        assert_eq!(scrub("a s3cret b", Some(&"s3cret".into())), "a *** b");
    }

    #[test]
    fn bad_addresses_are_refused() {
        for bad in ["http://127.0.0.1:6379", "redis//x", "not a url"] {
            let err = SharedState::open(&SecretString::from(bad), None).unwrap_err();
            assert!(
                matches!(err, SharedStateError::Address { .. }),
                "{bad}: {err}"
            );
        }
        let err = SharedState::open(
            &SecretString::from("redis://127.0.0.1:1"),
            Some(b"x".to_vec()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("rediss://"), "{err}");
    }

    /// A Redis whose eviction policy may drop keys with a time to live (every key of a
    /// turn and a session has one) is refused at every new connection, the message
    /// naming the setting and how to set it: started so, or set so at run time, each of
    /// the eight policies Redis knows but `noeviction`, Redis' default, which is
    /// accepted.
    #[test]
    fn a_redis_that_may_evict_keys_is_refused_naming_the_setting() {
        let ping = |state: &SharedState| {
            state.with("pinged", Duration::from_secs(5), |c| {
                redis::cmd("PING").query::<String>(c)
            })
        };
        for policy in ["allkeys-lru", "volatile-lru"] {
            let server = evidence_test_support::RedisServer::start_with_config(&[(
                "maxmemory-policy",
                policy,
            )])
            .unwrap();
            let state = SharedState::open(&server.url().into(), None).unwrap();
            let err = ping(&state).unwrap_err();
            assert!(matches!(err, SharedStateError::Evicting { .. }), "{err}");
            let text = err.to_string();
            assert!(
                text.contains(&format!("maxmemory-policy is {policy}")),
                "{text}"
            );
            assert!(
                text.contains("CONFIG SET maxmemory-policy noeviction"),
                "{text}"
            );
        }
        let server = evidence_test_support::RedisServer::start().unwrap();
        let state = SharedState::open(&server.url().into(), None).unwrap();
        assert_eq!(ping(&state).unwrap(), "PONG");
        // Every policy Redis knows, set at run time: the next new connection accepts
        // `noeviction` alone.
        let mut admin = redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        for policy in [
            "volatile-lru",
            "allkeys-lru",
            "volatile-lfu",
            "allkeys-lfu",
            "volatile-random",
            "allkeys-random",
            "volatile-ttl",
            "noeviction",
        ] {
            let () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxmemory-policy")
                .arg(policy)
                .query(&mut admin)
                .unwrap();
            let fresh = SharedState::open(&server.url().into(), None).unwrap();
            match ping(&fresh) {
                Ok(pong) => assert_eq!((policy, pong.as_str()), ("noeviction", "PONG")),
                Err(err) => {
                    assert_ne!(policy, "noeviction");
                    assert!(
                        err.to_string()
                            .contains(&format!("maxmemory-policy is {policy}")),
                        "{err}"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Whatever the password (any printable text, percent-encoded in the URL), no
        /// message of the shared state and no `Debug` of it shows it, nor its encoding.
        #[test]
        fn no_message_shows_the_password(password in "[ -~]{6,24}") {
            let encoded: String =
                url::form_urlencoded::byte_serialize(password.as_bytes()).collect();
            let url = format!("redis://user:{encoded}@127.0.0.1:1/0");
            proptest::prop_assert!(!redacted(&url).contains(&encoded));
            let state = SharedState::open(&SecretString::from(url), None);
            let text = match state {
                Ok(state) => {
                    let err = state
                        .with("read", Duration::from_millis(50), |c| {
                            redis::cmd("PING").query::<String>(c)
                        })
                        .unwrap_err();
                    format!("{err} {err:?} {state:?}")
                }
                Err(err) => format!("{err} {err:?}"),
            };
            proptest::prop_assert!(!text.contains(&password), "{}", text);
            proptest::prop_assert!(!text.contains(&encoded), "{}", text);
        }
    }
}
