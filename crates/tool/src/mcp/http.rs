//! The agent's listener of a package's server over Streamable HTTP (`--mcp-http ADDR`):
//! the same server handler as over stdio, behind `rmcp`'s Streamable HTTP service, at
//! the path [`MCP_HTTP_PATH`], with the protocol sessions of [`super::bounded_sessions`].
//!
//! The rules of the agent's side:
//! - Plain HTTP is served on a loopback address only; any other address needs TLS
//!   ([`super::listen`]). DNS-rebinding protection ([`super::host_check`]): a wrong
//!   `Host` or a foreign `Origin` is answered `403 Forbidden` before any MCP message is
//!   read.
//! - Bounds: a request body over [`MAX_REQUEST_BODY_BYTES`] is answered `413 Payload Too
//!   Large` (counted while it streams, whatever `Content-Length` says), an `initialize`
//!   over [`MAX_INITIALIZE_BYTES`] too; connections, heads and slow clients are bounded
//!   by [`super::connection`]; protocol sessions (in total and per peer) and event
//!   streams (in total and per session) by [`super::limits`]: a request over one of
//!   these is answered `503` with `Retry-After`.
//! - The session token a protocol session carries: a request of a bound session with
//!   another `X-Evidence-Session` token is answered `403` (`session_token_mismatch`), and
//!   a stream resumed with `Last-Event-ID` on a bound session must present its token.
//! - Envelopes are delivered on the operator listener ([`super::operator`]); only with
//!   `--envelopes-on-mcp-port` (deprecated) also here.
//!
//! Everything past the transport (the call slots of `limits.concurrency`, the per-call
//! deadline, verification, lock, guard, audit and the turn ledger) is the one server
//! handler of [`super::server`], exactly as over stdio. A `tools/call` that reaches the
//! handler leaves its call record ([`CallSeen`] tells the HTTP layer so); every other
//! request leaves a request record, among them a call the MCP service refused before
//! the handler (an unknown tool, malformed `params`).

use std::net::IpAddr;
use std::sync::Arc;

use evidence_policy::SessionToken;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tower_service::Service as _;

use crate::mcp::bounded_sessions::{BoundedSessions, with_peer};
use crate::mcp::connection::{CallSeen, Route, Routed, Seen, read_body};
use crate::mcp::host_check::check_host_and_origin;
use crate::mcp::limits::MAX_INITIALIZE_BYTES;
use crate::mcp::listen::{ENVELOPES_PATH, MAX_REQUEST_BODY_BYTES, MCP_HTTP_PATH};
use crate::mcp::operator::{Deliver, Record, deliver_envelope};
use crate::mcp::session::SESSION_HEADER;

/// The header naming a request's protocol session.
const PROTOCOL_SESSION_HEADER: &str = "mcp-session-id";
/// The header of a resumed event stream.
const LAST_EVENT_ID_HEADER: &str = "last-event-id";

/// The Streamable HTTP service of a handler (each session gets a clone of `handler`),
/// its protocol sessions kept by `sessions`.
pub(crate) fn service<S>(
    handler: S,
    config: StreamableHttpServerConfig,
    sessions: Arc<BoundedSessions>,
) -> StreamableHttpService<S, BoundedSessions>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    StreamableHttpService::new(move || Ok(handler.clone()), sessions, config)
}

/// What the agent's listener serves besides the MCP service, and where it reports.
pub(crate) struct Endpoints {
    /// Takes one delivered envelope, only with `--envelopes-on-mcp-port`.
    pub(crate) deliver: Option<Arc<Deliver>>,
    /// Writes the request record of a request no call record covers.
    pub(crate) record: Arc<Record>,
    /// The allowed `Host` values.
    pub(crate) hosts: Vec<String>,
    /// The allowed `Origin` values.
    pub(crate) origins: Vec<String>,
    /// The protocol sessions, their bounds and tokens.
    pub(crate) sessions: Arc<BoundedSessions>,
}

/// The routes of the agent's listener.
pub(crate) struct AgentRoute<S: ServerHandler + Send + 'static> {
    pub(crate) service: StreamableHttpService<S, BoundedSessions>,
    pub(crate) endpoints: Arc<Endpoints>,
}

impl<S: ServerHandler + Send + 'static> Clone for AgentRoute<S> {
    fn clone(&self) -> Self {
        AgentRoute {
            service: self.service.clone(),
            endpoints: self.endpoints.clone(),
        }
    }
}

impl<S: ServerHandler + Send + Sync + 'static> Route for AgentRoute<S> {
    async fn route(&self, request: Request<Incoming>, peer: IpAddr) -> Routed {
        let endpoints = &self.endpoints;
        if let Err(refused) = check_host_and_origin(&request, &endpoints.hosts, &endpoints.origins)
        {
            return Routed::refused(StatusCode::FORBIDDEN, refused);
        }
        let path = request.uri().path();
        if path == ENVELOPES_PATH
            && let Some(deliver) = &endpoints.deliver
        {
            return deliver_envelope(request, deliver).await;
        }
        if path != MCP_HTTP_PATH {
            return Routed {
                refused: Some("not_found"),
                ..Routed::answered(crate::mcp::connection::plain(
                    StatusCode::NOT_FOUND,
                    "Not Found: the MCP endpoint is /mcp",
                ))
            };
        }
        self.serve_mcp(request, peer).await
    }

    fn record(&self, seen: Seen) {
        (self.endpoints.record)(seen);
    }
}

impl<S: ServerHandler + Send + Sync + 'static> AgentRoute<S> {
    /// A request of the MCP endpoint, within the session bounds and token binding.
    async fn serve_mcp(&self, request: Request<Incoming>, peer: IpAddr) -> Routed {
        let sessions = &self.endpoints.sessions;
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let protocol_session = header(PROTOCOL_SESSION_HEADER);
        let token = header(SESSION_HEADER)
            .and_then(|text| SessionToken::parse(&text).ok())
            .map(|token| token.digest());
        if let (Some(session), Some(digest)) = (&protocol_session, token)
            && let Err(refused) = sessions.present(session, digest)
        {
            return Routed::refused(StatusCode::FORBIDDEN, refused.code());
        }
        let mut place = None;
        if request.method() == Method::GET
            && let Some(session) = &protocol_session
        {
            if request.headers().contains_key(LAST_EVENT_ID_HEADER)
                && let Err(refused) = sessions.may_resume(session, token)
            {
                return Routed::refused(StatusCode::FORBIDDEN, refused.code());
            }
            match sessions.open_stream(session) {
                Ok(held) => place = Some(held),
                Err(refused) => return Routed::busy(refused.code()),
            }
        }
        let (mut parts, body) = request.into_parts();
        let body = match read_body(body, MAX_REQUEST_BODY_BYTES).await {
            Ok(body) => body,
            Err((status, refused)) => return Routed::refused(status, refused),
        };
        let mcp_method = read_message(&body);
        if mcp_method.as_deref() == Some("initialize") && body.len() > MAX_INITIALIZE_BYTES {
            return Routed {
                mcp_method,
                ..Routed::refused(StatusCode::PAYLOAD_TOO_LARGE, "initialize_too_large")
            };
        }
        let seen = CallSeen::default();
        parts.extensions.insert(seen.clone());
        let mut service = self.service.clone();
        let (response, refused) = with_peer(
            peer,
            service.call(Request::from_parts(parts, Full::new(body))),
        )
        .await;
        let response = match response {
            Ok(response) => response,
            Err(never) => match never {},
        };
        if let Some(refused) = refused {
            return Routed {
                mcp_method,
                ..Routed::busy(refused)
            };
        }
        let response = match place {
            // The stream's place is held for as long as its body is.
            Some(place) => response.map(|body| {
                body.map_frame(move |frame| {
                    let _held = &place;
                    frame
                })
                .boxed()
            }),
            None => response,
        };
        Routed {
            covered: seen,
            mcp_method,
            ..Routed::answered(response)
        }
    }
}

/// What the HTTP layer reads of a posted message: its JSON-RPC `method`, when it is one
/// object that names one (at most 64 bytes long).
fn read_message(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Message {
        method: Option<String>,
    }
    let message = serde_json::from_slice::<Message>(body).ok()?;
    message.method.filter(|m| m.len() <= 64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_method_of_one_message_is_read() {
        let read = |body: serde_json::Value| read_message(body.to_string().as_bytes());
        assert_eq!(
            read(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}})),
            Some("tools/call".to_owned())
        );
        assert_eq!(read(json!({"method": "x".repeat(65)})), None);
        assert_eq!(read_message(b"[1,2]"), None);
        assert_eq!(read_message(b"{"), None);
    }
}
