//! The Streamable HTTP transport of a package's MCP server (`--mcp-http ADDR`): the
//! same server handler as over stdio, behind `rmcp`'s Streamable HTTP service, on an
//! HTTP/1.1 listener at the one explicit address it is given, at the path
//! [`MCP_HTTP_PATH`].
//!
//! The rules of the HTTP surface:
//! - Plain HTTP is served on a loopback address only (`127.0.0.0/8`, `::1`); any other
//!   address needs TLS (`--tls-cert FILE --tls-key FILE`, see [`super::tls`]), or it is
//!   refused at start with the reason ([`HttpListenError::NotLoopback`]): the server
//!   never answers in the clear off the machine.
//! - DNS-rebinding protection: a request's `Host` must be one of the allowed hosts and a
//!   request that carries an `Origin` must come from an allowed origin, or it is
//!   answered `403 Forbidden` before any MCP message is read. Both default to the listen
//!   address's forms with its bound port (`127.0.0.1:PORT` or `[::1]:PORT`, and
//!   `localhost:PORT`; origins `http://` of those, `https://` with TLS) and can be
//!   replaced with `--allow-host` and `--allow-origin` (a server reached by a name needs
//!   that name).
//! - Bounds: a request body over [`MAX_REQUEST_BODY_BYTES`] is answered
//!   `413 Payload Too Large` (counted while it streams, whatever `Content-Length` says);
//!   a request head over [`MAX_HEAD_BYTES`] is refused by the HTTP layer; a client that
//!   does not finish its TLS handshake, or sending its head, within
//!   [`HEAD_READ_TIMEOUT`] is disconnected.
//!   Idle MCP sessions expire after `rmcp`'s session keep-alive.
//!
//! Everything past the transport (the call slots of `limits.concurrency`, the per-call
//! deadline, verification, lock, guard, audit and the turn ledger) is the one server
//! handler of [`super::server`], exactly as over stdio.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use evidence_policy::envelope::MAX_ENVELOPE_BYTES;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower_service::Service as _;

use crate::mcp::session::{DeliveryAnswer, ENVELOPES_PATH};
use crate::mcp::tls::{TLS_CERT_FLAG, TLS_KEY_FLAG, TlsFiles};

/// The flag that starts a tool binary as its package's MCP server over Streamable HTTP,
/// followed by the listen address (`127.0.0.1:PORT`; port `0` takes a free port, and
/// the server names the one it bound on stderr).
pub const MCP_HTTP_FLAG: &str = "--mcp-http";
/// The flag (repeatable, after [`MCP_HTTP_FLAG`]) naming an allowed `Host` value,
/// `host` or `host:port`; given once or more, it replaces the default hosts.
pub const ALLOW_HOST_FLAG: &str = "--allow-host";
/// The flag (repeatable, after [`MCP_HTTP_FLAG`]) naming an allowed `Origin`,
/// `scheme://host:port`; given once or more, it replaces the default origins.
pub const ALLOW_ORIGIN_FLAG: &str = "--allow-origin";
/// The path of the MCP endpoint; every other path answers `404 Not Found`.
pub const MCP_HTTP_PATH: &str = "/mcp";
/// The largest request body accepted: 256 KiB (a tool call's arguments are a few
/// PromQL expressions; `initialize` is smaller still).
pub const MAX_REQUEST_BODY_BYTES: usize = 256 * 1024;
/// The largest request head (request line and headers) accepted: 16 KiB.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// How long a client has to finish its TLS handshake, and to send a request's head once
/// it started: 10 s.
pub const HEAD_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the HTTP listen configuration is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpListenError {
    /// The address is not `IP:PORT`.
    #[error("{0:?} is not a listen address: give IP:PORT, e.g. 127.0.0.1:8931")]
    NotAnAddress(String),
    /// Plain HTTP was asked for on an address other machines can reach.
    #[error(
        "refusing to serve plain HTTP on {0}: it is not a loopback address, so it needs \
         TLS (no TLS given: add --tls-cert FILE --tls-key FILE), or listen on 127.0.0.1 or \
         [::1]"
    )]
    NotLoopback(SocketAddr),
    /// A flag of the HTTP server lacks its value, or is unknown.
    #[error("{0}")]
    Usage(String),
}

/// The HTTP server's configuration from the command line: the listen address, its TLS
/// files if any and the `Host` and `Origin` values allowed (empty: the defaults of the
/// bound address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpListen {
    addr: SocketAddr,
    tls: Option<TlsFiles>,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
}

impl HttpListen {
    /// Reads the arguments that follow [`MCP_HTTP_FLAG`]: the address, then any
    /// [`TLS_CERT_FLAG`], [`TLS_KEY_FLAG`] (both or neither), [`ALLOW_HOST_FLAG`] and
    /// [`ALLOW_ORIGIN_FLAG`] pairs. Refuses an address that is not loopback without TLS
    /// ([`HttpListenError::NotLoopback`]).
    pub fn from_args(args: &[OsString]) -> Result<Self, HttpListenError> {
        let text = |arg: &OsString| {
            arg.to_str()
                .map(str::to_owned)
                .ok_or_else(|| HttpListenError::Usage(format!("{arg:?} is not Unicode")))
        };
        let (addr, rest) = args.split_first().ok_or_else(|| {
            HttpListenError::Usage(format!("{MCP_HTTP_FLAG} needs a listen address"))
        })?;
        let addr = text(addr)?;
        let addr: SocketAddr = addr
            .parse()
            .map_err(|_| HttpListenError::NotAnAddress(addr.clone()))?;
        let mut listen = HttpListen {
            addr,
            tls: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        };
        let (mut cert, mut key) = (None, None);
        let mut rest = rest.iter();
        while let Some(flag) = rest.next() {
            let flag = text(flag)?;
            let value = rest
                .next()
                .map(text)
                .transpose()?
                .ok_or_else(|| HttpListenError::Usage(format!("{flag} needs a value")))?;
            match flag.as_str() {
                ALLOW_HOST_FLAG => listen.allowed_hosts.push(value),
                ALLOW_ORIGIN_FLAG => listen.allowed_origins.push(value),
                TLS_CERT_FLAG if cert.is_none() => cert = Some(PathBuf::from(value)),
                TLS_KEY_FLAG if key.is_none() => key = Some(PathBuf::from(value)),
                TLS_CERT_FLAG | TLS_KEY_FLAG => {
                    return Err(HttpListenError::Usage(format!("{flag} given twice")));
                }
                other => {
                    return Err(HttpListenError::Usage(format!(
                        "unknown argument {other:?} after {MCP_HTTP_FLAG}"
                    )));
                }
            }
        }
        listen.tls = match (cert, key) {
            (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
            (None, None) => None,
            _ => {
                return Err(HttpListenError::Usage(format!(
                    "{TLS_CERT_FLAG} and {TLS_KEY_FLAG} go together"
                )));
            }
        };
        if listen.tls.is_none() && !addr.ip().is_loopback() {
            return Err(HttpListenError::NotLoopback(addr));
        }
        Ok(listen)
    }

    /// The TLS files, when the server serves HTTPS.
    pub fn tls(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    /// `https` with TLS, `http` without.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The address to listen on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The arguments that give this configuration again (the server re-executes itself
    /// with them).
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mut args = vec![MCP_HTTP_FLAG.to_owned(), self.addr.to_string()];
        if let Some(tls) = &self.tls {
            args.extend([TLS_CERT_FLAG.to_owned(), tls.cert.display().to_string()]);
            args.extend([TLS_KEY_FLAG.to_owned(), tls.key.display().to_string()]);
        }
        for host in &self.allowed_hosts {
            args.extend([ALLOW_HOST_FLAG.to_owned(), host.clone()]);
        }
        for origin in &self.allowed_origins {
            args.extend([ALLOW_ORIGIN_FLAG.to_owned(), origin.clone()]);
        }
        args
    }

    /// The allowed `Host` values once bound at `bound`: the configured ones, or the
    /// bound address and `localhost`, each with the bound port.
    pub fn allowed_hosts(&self, bound: SocketAddr) -> Vec<String> {
        if !self.allowed_hosts.is_empty() {
            return self.allowed_hosts.clone();
        }
        vec![bound.to_string(), format!("localhost:{}", bound.port())]
    }

    /// The allowed `Origin` values once bound at `bound`: the configured ones, or
    /// [`Self::scheme`]`://` of each default host.
    pub fn allowed_origins(&self, bound: SocketAddr) -> Vec<String> {
        if !self.allowed_origins.is_empty() {
            return self.allowed_origins.clone();
        }
        let defaults = HttpListen {
            allowed_hosts: Vec::new(),
            ..self.clone()
        };
        defaults
            .allowed_hosts(bound)
            .into_iter()
            .map(|host| format!("{}://{host}", self.scheme()))
            .collect()
    }

    /// The `rmcp` configuration of the server bound at `bound`, ended by `stop`.
    pub(crate) fn config(
        &self,
        bound: SocketAddr,
        stop: CancellationToken,
    ) -> StreamableHttpServerConfig {
        StreamableHttpServerConfig::default()
            .with_allowed_hosts(self.allowed_hosts(bound))
            .with_allowed_origins(self.allowed_origins(bound))
            .enforce_origin_validation()
            .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES)
            .with_cancellation_token(stop)
    }
}

/// The Streamable HTTP service of a handler (each session gets a clone of `handler`).
pub(crate) fn service<S>(
    handler: S,
    config: StreamableHttpServerConfig,
) -> StreamableHttpService<S, LocalSessionManager>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// The delivery of one envelope (its body) to the session store.
pub(crate) type Deliver = dyn Fn(&[u8]) -> DeliveryAnswer + Send + Sync;

/// What the HTTP layer serves besides the MCP endpoint, and where it reports each
/// request: the envelope delivery of [`super::session`], the request records of
/// [`super::request_audit`] and the `Host` and `Origin` values allowed.
#[derive(Clone)]
pub(crate) struct Endpoints {
    /// Takes one delivered envelope (the body) and answers it; blocking file work.
    pub(crate) deliver: Arc<Deliver>,
    /// Writes the request record of a request no call record covers.
    pub(crate) record: Arc<dyn Fn(Seen) + Send + Sync>,
    /// The allowed `Host` values.
    pub(crate) hosts: Vec<String>,
    /// The allowed `Origin` values.
    pub(crate) origins: Vec<String>,
    /// The name of the one tool the server serves.
    pub(crate) tool: String,
}

/// What the HTTP layer saw of one request and answered (the request record's content).
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) time: jiff::Timestamp,
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) mcp_method: Option<String>,
    pub(crate) status: u16,
    pub(crate) refused: Option<&'static str>,
    pub(crate) policy_id: Option<String>,
    pub(crate) duration_ms: u64,
}

type Answer = Response<http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>>;

/// Serves `service` on `listener` until `stop` is cancelled: one task per connection
/// (through `tls` first when given), HTTP/1.1 with the bounds of [`MAX_HEAD_BYTES`]
/// and [`HEAD_READ_TIMEOUT`]. A failed accept (too many open files, a connection reset
/// before it was taken) is reported on stderr and serving goes on; a failed or slow
/// TLS handshake ends that connection only.
pub(crate) async fn serve<S>(
    name: &str,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    service: StreamableHttpService<S, LocalSessionManager>,
    endpoints: Endpoints,
    stop: CancellationToken,
) where
    S: ServerHandler + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => return,
        };
        let stream = match accepted {
            // No Nagle delay: an answer's head and its SSE events are separate writes,
            // and a client that acknowledges late would otherwise hold each ~40 ms.
            Ok((stream, _peer)) => {
                let _nodelay = stream.set_nodelay(true);
                stream
            }
            Err(e) => {
                eprintln!("{name} {MCP_HTTP_FLAG}: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (service, stop, tls) = (service.clone(), stop.clone(), tls.clone());
        let endpoints = endpoints.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_connection(TokioIo::new(stream), service, endpoints, stop).await,
                Some(tls) => {
                    let handshake = tokio::time::timeout(HEAD_READ_TIMEOUT, tls.accept(stream));
                    if let Ok(Ok(stream)) = handshake.await {
                        serve_connection(TokioIo::new(stream), service, endpoints, stop).await;
                    }
                }
            }
        });
    }
}

/// Serves one connection until it closes, or until `stop` (then ends it gracefully).
async fn serve_connection<I, S>(
    io: I,
    service: StreamableHttpService<S, LocalSessionManager>,
    endpoints: Endpoints,
    stop: CancellationToken,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: ServerHandler + Send + 'static,
{
    let handle = hyper::service::service_fn(move |request: Request<Incoming>| {
        let (service, endpoints) = (service.clone(), endpoints.clone());
        async move { Ok::<_, std::convert::Infallible>(answer(request, service, endpoints).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES);
    let connection = builder.serve_connection(io, handle);
    tokio::pin!(connection);
    tokio::select! {
        _served = connection.as_mut() => {}
        () = stop.cancelled() => connection.as_mut().graceful_shutdown(),
    }
}

/// Answers one request and leaves its request record unless a call record covers it
/// (a `tools/call` the MCP service took).
async fn answer<S>(
    request: Request<Incoming>,
    service: StreamableHttpService<S, LocalSessionManager>,
    endpoints: Endpoints,
) -> Answer
where
    S: ServerHandler + Send + 'static,
{
    let started = std::time::Instant::now();
    let mut seen = Seen {
        time: jiff::Timestamp::now(),
        method: request.method().to_string(),
        path: request.uri().path().to_owned(),
        mcp_method: None,
        status: 0,
        refused: None,
        policy_id: None,
        duration_ms: 0,
    };
    let (response, covered) = route(request, service, &endpoints, &mut seen).await;
    seen.status = response.status().as_u16();
    seen.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    if !covered {
        (endpoints.record)(seen);
    }
    response
}

/// The answer to one request, and whether a call record covers it.
async fn route<S>(
    request: Request<Incoming>,
    mut service: StreamableHttpService<S, LocalSessionManager>,
    endpoints: &Endpoints,
    seen: &mut Seen,
) -> (Answer, bool)
where
    S: ServerHandler + Send + 'static,
{
    if let Err(refused) = check_host_and_origin(&request, endpoints) {
        seen.refused = Some(refused);
        return (plain(StatusCode::FORBIDDEN, refused), false);
    }
    let path = request.uri().path();
    if path == ENVELOPES_PATH {
        if request.method() != Method::POST {
            seen.refused = Some("method_not_allowed");
            return (
                plain(StatusCode::METHOD_NOT_ALLOWED, "POST an envelope"),
                false,
            );
        }
        let body = match read_body(request.into_body(), MAX_ENVELOPE_BYTES).await {
            Ok(body) => body,
            Err((status, refused)) => {
                seen.refused = Some(refused);
                return (plain(status, refused), false);
            }
        };
        let deliver = endpoints.deliver.clone();
        let answer = tokio::task::spawn_blocking(move || deliver(&body)).await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(_) => {
                seen.refused = Some("delivery_failed");
                return (
                    plain(StatusCode::INTERNAL_SERVER_ERROR, "delivery_failed"),
                    false,
                );
            }
        };
        seen.refused = answer.refused;
        seen.policy_id = answer.policy_id.clone();
        let mut response = Response::new(Full::new(answer.bytes()).boxed());
        *response.status_mut() = answer.status;
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        return (response, false);
    }
    if path != MCP_HTTP_PATH {
        seen.refused = Some("not_found");
        return (
            plain(StatusCode::NOT_FOUND, "Not Found: the MCP endpoint is /mcp"),
            false,
        );
    }
    let (parts, body) = request.into_parts();
    let body = match read_body(body, MAX_REQUEST_BODY_BYTES).await {
        Ok(body) => body,
        Err((status, refused)) => {
            seen.refused = Some(refused);
            return (plain(status, refused), false);
        }
    };
    let (method, handled) = read_message(&body, &endpoints.tool);
    seen.mcp_method = method;
    let is_call = parts.method == Method::POST && handled;
    let response = match service
        .call(Request::from_parts(parts, Full::new(body)))
        .await
    {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let covered = is_call && response.status().is_success();
    (response, covered)
}

/// The `Host` and `Origin` rules (DNS-rebinding protection): `Err` names the refusal.
fn check_host_and_origin<B>(
    request: &Request<B>,
    endpoints: &Endpoints,
) -> Result<(), &'static str> {
    let header = |name| {
        let mut values = request.headers().get_all(name).iter();
        match (values.next(), values.next()) {
            (None, _) => Ok(None),
            (Some(value), None) => value.to_str().map(Some).map_err(|_| ()),
            (Some(_), Some(_)) => Err(()),
        }
    };
    match header(hyper::header::HOST) {
        Ok(Some(host)) if endpoints.hosts.iter().any(|a| host_matches(a, host)) => {}
        _ => return Err("host_not_allowed"),
    }
    match header(hyper::header::ORIGIN) {
        Ok(None) => Ok(()),
        Ok(Some(origin))
            if endpoints
                .origins
                .iter()
                .any(|a| a.eq_ignore_ascii_case(origin)) =>
        {
            Ok(())
        }
        _ => Err("origin_not_allowed"),
    }
}

/// Whether the `Host` value `host` is the allowed `allowed`: the same `host:port`, or,
/// for an allowed value without a port, the same host on any port (as `rmcp` matches).
fn host_matches(allowed: &str, host: &str) -> bool {
    if allowed.eq_ignore_ascii_case(host) {
        return true;
    }
    let name = match host.rsplit_once(':') {
        // `[::1]:80` and `name:80`; a bare IPv6 literal has no port to strip.
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            if name.starts_with('[') || !name.contains(':') {
                name
            } else {
                host
            }
        }
        _ => host,
    };
    let has_port = allowed.rsplit_once(':').is_some_and(|(name, port)| {
        port.bytes().all(|b| b.is_ascii_digit()) && (name.starts_with('[') || !name.contains(':'))
    });
    !has_port && allowed.eq_ignore_ascii_case(name)
}

/// The whole body, at most `limit` bytes and within [`HEAD_READ_TIMEOUT`]: `Err` is the
/// status and the refusal's code.
async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, (StatusCode, &'static str)> {
    let collected = tokio::time::timeout(
        HEAD_READ_TIMEOUT,
        http_body_util::Limited::new(body, limit).collect(),
    )
    .await;
    match collected {
        Err(_) => Err((StatusCode::REQUEST_TIMEOUT, "body_timeout")),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err((StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"))
        }
        Ok(Err(_)) => Err((StatusCode::BAD_REQUEST, "body_unreadable")),
    }
}

/// What the HTTP layer reads of a posted message: its JSON-RPC `method`, when it is one
/// object that names one, and whether it is a `tools/call` of `tool` that the server's
/// handler takes (its name is the tool's, its arguments an object or absent), which
/// leaves the call's own record.
fn read_message(body: &[u8], tool: &str) -> (Option<String>, bool) {
    #[derive(serde::Deserialize)]
    struct Message {
        method: Option<String>,
        params: Option<Params>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        name: Option<String>,
        arguments: Option<serde_json::Value>,
    }
    let Ok(message) = serde_json::from_slice::<Message>(body) else {
        return (None, false);
    };
    let method = message.method.filter(|m| m.len() <= 64);
    let handled = method.as_deref() == Some("tools/call")
        && message.params.is_some_and(|p| {
            p.name.as_deref() == Some(tool)
                && p.arguments
                    .as_ref()
                    .is_none_or(serde_json::Value::is_object)
        });
    (method, handled)
}

/// A plain-text answer with `status`.
fn plain(status: StatusCode, text: &'static str) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn only_a_call_the_handler_takes_is_left_to_its_call_record() {
        let tool = "managed_auto_oncall_clinic";
        let read = |body: serde_json::Value| read_message(body.to_string().as_bytes(), tool);
        let call =
            |params| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        assert_eq!(
            read(call(json!({"name": tool, "arguments": {}}))),
            (Some("tools/call".to_owned()), true)
        );
        assert!(read(call(json!({"name": tool}))).1);
        for params in [
            json!({"name": "test_error_handling", "arguments": {}}),
            json!({"name": tool, "arguments": [1]}),
            json!({"arguments": {}}),
        ] {
            assert_eq!(
                read(call(params.clone())),
                (Some("tools/call".to_owned()), false),
                "{params}"
            );
        }
        assert_eq!(
            read(json!({"method": "tools/list"})),
            (Some("tools/list".to_owned()), false)
        );
        assert_eq!(read_message(b"[1,2]", tool), (None, false));
    }

    #[test]
    fn hosts_match_with_their_port_or_any_port_when_allowed_without_one() {
        assert!(host_matches("127.0.0.1:4100", "127.0.0.1:4100"));
        assert!(host_matches("LOCALHOST:4100", "localhost:4100"));
        assert!(!host_matches("127.0.0.1:4100", "127.0.0.1:4101"));
        assert!(!host_matches("127.0.0.1:4100", "127.0.0.1"));
        assert!(host_matches("127.0.0.1", "127.0.0.1:4100"));
        assert!(host_matches("tools.internal", "tools.internal"));
        assert!(!host_matches("tools.internal", "tools.internal.evil:80"));
        assert!(!host_matches("tools.internal", "evil.example:80"));
        assert!(host_matches("[::1]", "[::1]:4100"));
        assert!(host_matches("[::1]:4100", "[::1]:4100"));
        assert!(!host_matches("[::1]:4100", "[::1]:4"));
    }

    #[test]
    fn plain_http_is_refused_off_loopback() {
        for addr in [
            "0.0.0.0:8931",
            "192.168.1.4:80",
            "[::]:8931",
            "[::ffff:127.0.0.1]:1",
        ] {
            let refused = HttpListen::from_args(&args(&[addr]));
            assert!(
                matches!(refused, Err(HttpListenError::NotLoopback(_))),
                "{addr}: {refused:?}"
            );
        }
        for addr in ["127.0.0.1:8931", "127.0.0.2:0", "[::1]:8931"] {
            assert!(HttpListen::from_args(&args(&[addr])).is_ok(), "{addr}");
        }
        // With TLS any address may be served.
        let tls = [TLS_CERT_FLAG, "/c.pem", TLS_KEY_FLAG, "/k.pem"];
        let listen = HttpListen::from_args(&args(&[&["0.0.0.0:8443"][..], &tls].concat())).unwrap();
        assert_eq!(listen.scheme(), "https");
        assert_eq!(
            listen.to_args(),
            [
                MCP_HTTP_FLAG,
                "0.0.0.0:8443",
                TLS_CERT_FLAG,
                "/c.pem",
                TLS_KEY_FLAG,
                "/k.pem"
            ]
        );
        assert!(matches!(
            HttpListen::from_args(&args(&["127.0.0.1:1", TLS_CERT_FLAG, "/c.pem"])),
            Err(HttpListenError::Usage(_))
        ));
        assert!(matches!(
            HttpListen::from_args(&args(&["localhost:8931"])),
            Err(HttpListenError::NotAnAddress(_))
        ));
        assert!(matches!(
            HttpListen::from_args(&args(&[])),
            Err(HttpListenError::Usage(_))
        ));
    }

    #[test]
    fn the_defaults_are_the_bound_loopback_forms_and_flags_replace_them() {
        let listen = HttpListen::from_args(&args(&["127.0.0.1:0"])).unwrap();
        let bound: SocketAddr = "127.0.0.1:4100".parse().unwrap();
        assert_eq!(
            listen.allowed_hosts(bound),
            ["127.0.0.1:4100", "localhost:4100"]
        );
        assert_eq!(
            listen.allowed_origins(bound),
            ["http://127.0.0.1:4100", "http://localhost:4100"]
        );
        let v6: SocketAddr = "[::1]:4100".parse().unwrap();
        assert_eq!(listen.allowed_hosts(v6), ["[::1]:4100", "localhost:4100"]);

        let configured = args(&[
            "127.0.0.1:4100",
            ALLOW_HOST_FLAG,
            "tools.internal:4100",
            ALLOW_ORIGIN_FLAG,
            "https://app.internal:443",
        ]);
        let listen = HttpListen::from_args(&configured).unwrap();
        assert_eq!(listen.allowed_hosts(bound), ["tools.internal:4100"]);
        assert_eq!(listen.allowed_origins(bound), ["https://app.internal:443"]);
        assert_eq!(
            listen.to_args(),
            [
                MCP_HTTP_FLAG,
                "127.0.0.1:4100",
                ALLOW_HOST_FLAG,
                "tools.internal:4100",
                ALLOW_ORIGIN_FLAG,
                "https://app.internal:443"
            ]
        );
        assert!(matches!(
            HttpListen::from_args(&args(&["127.0.0.1:1", ALLOW_HOST_FLAG])),
            Err(HttpListenError::Usage(_))
        ));
        assert!(matches!(
            HttpListen::from_args(&args(&["127.0.0.1:1", "--tls", "x"])),
            Err(HttpListenError::Usage(_))
        ));
    }
}
