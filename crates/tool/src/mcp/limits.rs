//! The bounds of a package's server over HTTP, each with its default and its flag: how
//! many connections (in total and per peer address), MCP protocol sessions (in total and per peer address), event
//! streams (in total and per session) it keeps, how long an idle session lives, and how
//! large an `initialize` may be. Whatever arrives, unauthenticated or not, the server's
//! memory and descriptors stay within these; a request beyond one is refused at once
//! (`503 Service Unavailable` with `Retry-After`), with its audit record.

use std::time::Duration;

/// The flag bounding open connections (of each listener).
pub const MAX_CONNECTIONS_FLAG: &str = "--max-connections";
/// The flag bounding open connections of one peer address (of each listener).
pub const MAX_CONNECTIONS_PER_PEER_FLAG: &str = "--max-connections-per-peer";
/// The flag bounding MCP protocol sessions kept at once.
pub const MAX_SESSIONS_FLAG: &str = "--max-sessions";
/// The flag bounding MCP protocol sessions kept at once for one peer address.
pub const MAX_SESSIONS_PER_PEER_FLAG: &str = "--max-sessions-per-peer";
/// The flag bounding open event streams (`GET` on the MCP endpoint) at once.
pub const MAX_STREAMS_FLAG: &str = "--max-streams";
/// The flag bounding open event streams of one MCP session at once.
pub const MAX_STREAMS_PER_SESSION_FLAG: &str = "--max-streams-per-session";
/// The flag giving the seconds after which an idle MCP session ends.
pub const SESSION_IDLE_FLAG: &str = "--session-idle-secs";

/// The largest `initialize` message: 16 KiB (a client's capabilities and name fit in a
/// few hundred bytes; a session keeps what its `initialize` said for its whole life).
pub const MAX_INITIALIZE_BYTES: usize = 16 * 1024;

/// The seconds a refused client is told to wait (`Retry-After`).
pub const RETRY_AFTER_SECS: u64 = 1;

/// Descriptors kept free beyond the connection bound: the audit log, the turn ledger's
/// files, Redis connections, the provider's connections and a browser's pipes of the
/// calls running.
pub const RESERVED_DESCRIPTORS: u64 = 128;

/// The bounds of one server (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections open at once on a listener.
    pub max_connections: usize,
    /// Connections open at once on a listener from one peer address.
    pub max_connections_per_peer: usize,
    /// MCP protocol sessions kept at once.
    pub max_sessions: usize,
    /// MCP protocol sessions kept at once for one peer address.
    pub max_sessions_per_peer: usize,
    /// Event streams (`GET`) open at once.
    pub max_streams: usize,
    /// Event streams open at once on one MCP session.
    pub max_streams_per_session: usize,
    /// How long a session without any request or stream lives.
    pub session_idle: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 512,
            max_connections_per_peer: 64,
            max_sessions: 256,
            max_sessions_per_peer: 32,
            max_streams: 64,
            max_streams_per_session: 2,
            session_idle: Duration::from_secs(60),
        }
    }
}

impl ServerLimits {
    /// Takes one bound flag and its value; `Ok(false)` when `flag` is not a bound flag.
    pub(crate) fn set(&mut self, flag: &str, value: &str) -> Result<bool, String> {
        let number = || {
            value
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{flag} takes a whole number above 0, not {value:?}"))
        };
        let count = || number().map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        match flag {
            MAX_CONNECTIONS_FLAG => self.max_connections = count()?,
            MAX_CONNECTIONS_PER_PEER_FLAG => self.max_connections_per_peer = count()?,
            MAX_SESSIONS_FLAG => self.max_sessions = count()?,
            MAX_SESSIONS_PER_PEER_FLAG => self.max_sessions_per_peer = count()?,
            MAX_STREAMS_FLAG => self.max_streams = count()?,
            MAX_STREAMS_PER_SESSION_FLAG => self.max_streams_per_session = count()?,
            SESSION_IDLE_FLAG => self.session_idle = Duration::from_secs(number()?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The arguments that give these bounds again (only those not at their default).
    pub(crate) fn to_args(self) -> Vec<String> {
        let defaults = ServerLimits::default();
        let mut args = Vec::new();
        let mut push = |flag: &str, value: u64, default: u64| {
            if value != default {
                args.extend([flag.to_owned(), value.to_string()]);
            }
        };
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        push(
            MAX_CONNECTIONS_FLAG,
            n(self.max_connections),
            n(defaults.max_connections),
        );
        push(
            MAX_CONNECTIONS_PER_PEER_FLAG,
            n(self.max_connections_per_peer),
            n(defaults.max_connections_per_peer),
        );
        push(
            MAX_SESSIONS_FLAG,
            n(self.max_sessions),
            n(defaults.max_sessions),
        );
        push(
            MAX_SESSIONS_PER_PEER_FLAG,
            n(self.max_sessions_per_peer),
            n(defaults.max_sessions_per_peer),
        );
        push(
            MAX_STREAMS_FLAG,
            n(self.max_streams),
            n(defaults.max_streams),
        );
        push(
            MAX_STREAMS_PER_SESSION_FLAG,
            n(self.max_streams_per_session),
            n(defaults.max_streams_per_session),
        );
        push(
            SESSION_IDLE_FLAG,
            self.session_idle.as_secs(),
            defaults.session_idle.as_secs(),
        );
        args
    }

    /// The connection bound that fits the process's descriptor limit `open_files`
    /// (both listeners' connections, plus [`RESERVED_DESCRIPTORS`]); `None` when the
    /// configured bound fits as it is.
    pub fn fitted_connections(&self, open_files: u64) -> Option<usize> {
        let room = open_files.saturating_sub(RESERVED_DESCRIPTORS) / 2;
        let room = usize::try_from(room).unwrap_or(usize::MAX).max(1);
        (self.max_connections > room).then_some(room)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_flag_sets_its_bound_and_bad_values_are_refused() {
        let mut limits = ServerLimits::default();
        assert_eq!(limits.to_args(), Vec::<String>::new());
        for (flag, value) in [
            (MAX_CONNECTIONS_FLAG, "7"),
            (MAX_CONNECTIONS_PER_PEER_FLAG, "4"),
            (MAX_SESSIONS_FLAG, "8"),
            (MAX_SESSIONS_PER_PEER_FLAG, "3"),
            (MAX_STREAMS_FLAG, "5"),
            (MAX_STREAMS_PER_SESSION_FLAG, "1"),
            (SESSION_IDLE_FLAG, "9"),
        ] {
            assert_eq!(limits.set(flag, value), Ok(true), "{flag}");
        }
        assert_eq!(limits.max_connections, 7);
        assert_eq!(limits.max_connections_per_peer, 4);
        assert_eq!(limits.max_sessions, 8);
        assert_eq!(limits.max_sessions_per_peer, 3);
        assert_eq!(limits.max_streams, 5);
        assert_eq!(limits.max_streams_per_session, 1);
        assert_eq!(limits.session_idle, Duration::from_secs(9));
        let mut again = ServerLimits::default();
        let args = limits.to_args();
        for pair in args.chunks(2) {
            assert_eq!(again.set(&pair[0], &pair[1]), Ok(true));
        }
        assert_eq!(again, limits);
        for bad in ["0", "-1", "x", ""] {
            assert!(limits.set(MAX_SESSIONS_FLAG, bad).is_err(), "{bad:?}");
        }
        assert_eq!(limits.set("--other", "1"), Ok(false));
    }

    #[test]
    fn the_connection_bound_leaves_descriptors_in_reserve() {
        let limits = ServerLimits::default();
        assert_eq!(limits.fitted_connections(1 << 20), None);
        assert_eq!(limits.fitted_connections(1024), Some(448));
        assert_eq!(limits.fitted_connections(10), Some(1));
    }
}
