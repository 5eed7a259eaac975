//! The MCP protocol sessions of a server over HTTP, bounded: `rmcp`'s own session
//! manager underneath, with at most [`ServerLimits::max_sessions`] sessions kept, at
//! most [`ServerLimits::max_sessions_per_peer`] for one peer address, each ended after
//! [`ServerLimits::session_idle`] without a request, and at most
//! [`ServerLimits::max_streams_per_session`] event streams open on one session.
//!
//! It also keeps which session token each protocol session carries: the first
//! `X-Evidence-Session` token presented on a protocol session binds it, a request of that
//! session with another token is refused, and a stream resumed on a bound session
//! (`GET` with `Last-Event-ID`) must present the bound token: what a call answered is
//! replayed only to whoever holds the call's capability.
//!
//! The peer address of the request that creates a session reaches the session manager
//! through [`with_peer`] (the HTTP layer serves every request inside it).

use std::cell::Cell;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, PoisonError};

use evidence_result::Digest;
use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};

use crate::mcp::limits::ServerLimits;

tokio::task_local! {
    /// The peer of the request being served, and whether its session was refused.
    static PEER: RequestPeer;
}

/// What the session manager learns of the request it serves.
#[derive(Debug)]
struct RequestPeer {
    ip: IpAddr,
    refused: Cell<Option<&'static str>>,
}

/// Serves `work` (one request) as coming from `ip`; returns its output and the refusal
/// code when the session it would have created was over a bound.
pub(crate) async fn with_peer<F: Future>(ip: IpAddr, work: F) -> (F::Output, Option<&'static str>) {
    let peer = RequestPeer {
        ip,
        refused: Cell::new(None),
    };
    PEER.scope(peer, async move {
        let out = work.await;
        let refused = PEER.try_with(|p| p.refused.get()).ok().flatten();
        (out, refused)
    })
    .await
}

/// Why a request is refused by the session bounds or the token binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SessionRefusal {
    /// As many sessions as allowed are kept.
    #[error("sessions_full")]
    SessionsFull,
    /// As many sessions as allowed are kept for this peer.
    #[error("peer_sessions_full")]
    PeerSessionsFull,
    /// As many event streams as allowed are open, on the server or on the session.
    #[error("streams_full")]
    StreamsFull,
    /// The request presents another session token than the one its protocol session
    /// carries, or a resume presents none.
    #[error("session_token_mismatch")]
    TokenMismatch,
}

impl SessionRefusal {
    /// The refusal's code, as request records and counters name it.
    pub(crate) fn code(self) -> &'static str {
        match self {
            SessionRefusal::SessionsFull => "sessions_full",
            SessionRefusal::PeerSessionsFull => "peer_sessions_full",
            SessionRefusal::StreamsFull => "streams_full",
            SessionRefusal::TokenMismatch => "session_token_mismatch",
        }
    }
}

/// The errors of the bounded manager: a bound, or `rmcp`'s own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum BoundedSessionsError {
    /// A bound refused the session.
    #[error("the session is refused: {0}")]
    Refused(SessionRefusal),
    /// The session manager underneath failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

#[derive(Debug, Default)]
struct State {
    sessions: HashMap<SessionId, Kept>,
    per_peer: HashMap<IpAddr, usize>,
    streams: usize,
}

#[derive(Debug)]
struct Kept {
    peer: IpAddr,
    token: Option<Digest>,
    streams: usize,
}

/// The bounded session manager (see the module documentation).
#[derive(Debug)]
pub(crate) struct BoundedSessions {
    inner: LocalSessionManager,
    limits: ServerLimits,
    state: Mutex<State>,
    /// The package served, as metrics name it.
    package: String,
}

/// An open event stream's place in the bounds; freed when dropped.
#[derive(Debug)]
pub(crate) struct StreamPlace {
    sessions: Arc<BoundedSessions>,
    session: SessionId,
}

impl BoundedSessions {
    /// A manager with `limits`; idle sessions end after `limits.session_idle`, and an
    /// answer is kept for a late resume at most that long too.
    pub(crate) fn new(limits: ServerLimits, package: &str) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(limits.session_idle);
        inner.session_config.completed_cache_ttl = limits
            .session_idle
            .min(inner.session_config.completed_cache_ttl);
        inner.session_config.init_timeout = Some(limits.session_idle);
        crate::metrics::global().sessions(package, 0);
        BoundedSessions {
            inner,
            limits,
            state: Mutex::new(State::default()),
            package: package.to_owned(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fits(&self, state: &State, peer: IpAddr) -> Result<(), SessionRefusal> {
        if state.sessions.len() >= self.limits.max_sessions {
            return Err(SessionRefusal::SessionsFull);
        }
        if state.per_peer.get(&peer).copied().unwrap_or(0) >= self.limits.max_sessions_per_peer {
            return Err(SessionRefusal::PeerSessionsFull);
        }
        Ok(())
    }

    /// The protocol sessions kept now.
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.lock().sessions.len()
    }

    /// A request of protocol session `session` presents the token of `digest`: binds
    /// the session to it when it carries none yet; refuses another one.
    pub(crate) fn present(&self, session: &str, digest: Digest) -> Result<(), SessionRefusal> {
        let mut state = self.lock();
        let Some(kept) = state.sessions.get_mut(session) else {
            // An unknown session: rmcp answers it (404).
            return Ok(());
        };
        match kept.token {
            None => {
                kept.token = Some(digest);
                Ok(())
            }
            Some(bound) if bound == digest => Ok(()),
            Some(_) => Err(SessionRefusal::TokenMismatch),
        }
    }

    /// Whether a resume on `session` that presents `digest` (or none) may replay: the
    /// session carries no token, or exactly that one.
    pub(crate) fn may_resume(
        &self,
        session: &str,
        digest: Option<Digest>,
    ) -> Result<(), SessionRefusal> {
        let state = self.lock();
        match state.sessions.get(session).and_then(|kept| kept.token) {
            None => Ok(()),
            Some(bound) if Some(bound) == digest => Ok(()),
            Some(_) => Err(SessionRefusal::TokenMismatch),
        }
    }

    /// A place for one more event stream of `session`, within the bounds.
    pub(crate) fn open_stream(
        self: &Arc<Self>,
        session: &str,
    ) -> Result<StreamPlace, SessionRefusal> {
        let mut state = self.lock();
        if state.streams >= self.limits.max_streams {
            return Err(SessionRefusal::StreamsFull);
        }
        let Some((id, kept)) = state.sessions.get_key_value(session) else {
            // An unknown session: rmcp answers it (404); it holds no place.
            return Ok(StreamPlace {
                sessions: self.clone(),
                session: SessionId::from(""),
            });
        };
        if kept.streams >= self.limits.max_streams_per_session {
            return Err(SessionRefusal::StreamsFull);
        }
        let id = id.clone();
        if let Some(kept) = state.sessions.get_mut(&id) {
            kept.streams += 1;
        }
        state.streams += 1;
        Ok(StreamPlace {
            sessions: self.clone(),
            session: id,
        })
    }
}

impl Drop for StreamPlace {
    fn drop(&mut self) {
        if self.session.is_empty() {
            return;
        }
        let mut state = self.sessions.lock();
        state.streams = state.streams.saturating_sub(1);
        if let Some(kept) = state.sessions.get_mut(&self.session) {
            kept.streams = kept.streams.saturating_sub(1);
        }
    }
}

impl SessionManager for BoundedSessions {
    type Error = BoundedSessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let peer = PEER
            .try_with(|p| p.ip)
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        {
            let state = self.lock();
            if let Err(refused) = self.fits(&state, peer) {
                let _noted = PEER.try_with(|p| p.refused.set(Some(refused.code())));
                return Err(BoundedSessionsError::Refused(refused));
            }
        }
        let (id, transport) = self.inner.create_session().await?;
        let mut state = self.lock();
        *state.per_peer.entry(peer).or_default() += 1;
        state.sessions.insert(
            id.clone(),
            Kept {
                peer,
                token: None,
                streams: 0,
            },
        );
        crate::metrics::global().sessions(&self.package, state.sessions.len());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        {
            let mut state = self.lock();
            if let Some(kept) = state.sessions.remove(id)
                && let Some(n) = state.per_peer.get_mut(&kept.peer)
            {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    state.per_peer.remove(&kept.peer);
                }
            }
            crate::metrics::global().sessions(&self.package, state.sessions.len());
        }
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }

    async fn restore_session(
        &self,
        _id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // Sessions live in this process only: nothing is restored from elsewhere.
        Ok(RestoreOutcome::NotSupported)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per_peer: usize) -> ServerLimits {
        ServerLimits {
            max_sessions: total,
            max_sessions_per_peer: per_peer,
            max_streams: 3,
            max_streams_per_session: 2,
            ..ServerLimits::default()
        }
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    #[tokio::test]
    async fn sessions_are_bounded_in_total_and_per_peer_and_a_closed_one_frees_its_place() {
        let sessions = Arc::new(BoundedSessions::new(limits(3, 2), "test"));
        let create = |peer| {
            let sessions = sessions.clone();
            async move { with_peer(peer, sessions.create_session()).await }
        };
        let (first, refused) = create(ip(1)).await;
        assert!(first.is_ok() && refused.is_none());
        assert!(create(ip(1)).await.0.is_ok());
        let (third, refused) = create(ip(1)).await;
        assert!(matches!(
            third,
            Err(BoundedSessionsError::Refused(
                SessionRefusal::PeerSessionsFull
            ))
        ));
        assert_eq!(refused, Some("peer_sessions_full"));
        assert!(create(ip(2)).await.0.is_ok());
        assert_eq!(
            create(ip(3)).await.1,
            Some("sessions_full"),
            "the fourth session of three"
        );
        let (id, _) = first.unwrap();
        sessions.close_session(&id).await.unwrap();
        assert_eq!(sessions.count(), 2);
        assert!(create(ip(1)).await.0.is_ok());
    }

    #[tokio::test]
    async fn a_session_is_bound_to_its_first_token_and_streams_are_bounded() {
        let sessions = Arc::new(BoundedSessions::new(limits(4, 4), "test"));
        let (id, _) = with_peer(ip(1), sessions.create_session()).await.0.unwrap();
        let (a, b) = (Digest::sha256(b"a"), Digest::sha256(b"b"));
        assert_eq!(sessions.may_resume(&id, None), Ok(()));
        assert_eq!(sessions.present(&id, a), Ok(()));
        assert_eq!(sessions.present(&id, a), Ok(()));
        assert_eq!(sessions.present(&id, b), Err(SessionRefusal::TokenMismatch));
        assert_eq!(sessions.may_resume(&id, Some(a)), Ok(()));
        assert_eq!(
            sessions.may_resume(&id, Some(b)),
            Err(SessionRefusal::TokenMismatch)
        );
        assert_eq!(
            sessions.may_resume(&id, None),
            Err(SessionRefusal::TokenMismatch)
        );
        let one = sessions.open_stream(&id).unwrap();
        let two = sessions.open_stream(&id).unwrap();
        assert_eq!(
            sessions.open_stream(&id).err(),
            Some(SessionRefusal::StreamsFull)
        );
        drop(one);
        let three = sessions.open_stream(&id).unwrap();
        let (other, _) = with_peer(ip(2), sessions.create_session()).await.0.unwrap();
        let four = sessions.open_stream(&other).unwrap();
        // Three streams in all.
        assert_eq!(
            sessions.open_stream(&other).err(),
            Some(SessionRefusal::StreamsFull)
        );
        drop((two, three, four));
        assert!(sessions.open_stream(&other).is_ok());
    }
}
