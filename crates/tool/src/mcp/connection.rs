//! The connections of one listener of a package's server over HTTP: accepting them
//! within a bound, TLS first when configured, HTTP/1.1 with the head bounds, and the
//! audit record of whatever the HTTP layer refuses before a request reaches a route.
//!
//! - At most `max_connections` connections are served at once, at most
//!   `max_connections_per_peer` of them from one peer address. One over a bound is
//!   answered at once, `503 Service Unavailable` with `Retry-After` (a TLS connection,
//!   which cannot be answered before its handshake, is closed), and leaves a request
//!   record `connections_full` (`peer_connections_full`): the server never runs out of descriptors, whatever
//!   arrives, and keeps [`super::limits::RESERVED_DESCRIPTORS`] for the audit log, the
//!   turn ledger and the calls running.
//! - What hyper refuses itself leaves a request record too, method and path `-`: a head
//!   over [`MAX_HEAD_BYTES`] (`head_too_large`, answered 431), a head that is not HTTP
//!   (`malformed_request`, 400), a head not finished within [`HEAD_READ_TIMEOUT`]
//!   (`head_timeout`), a request cut off by its client (`request_incomplete`) and a TLS
//!   handshake that failed or did not finish in time (`tls_handshake_failed`). A
//!   connection that sends nothing and closes, or stays idle between requests until
//!   the head timeout closes it, made no request and leaves none.
//!
//! Every request that reaches a route is answered by it, and the route leaves its record.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::mcp::limits::RETRY_AFTER_SECS;
use crate::mcp::listen::{HEAD_READ_TIMEOUT, MAX_HEAD_BYTES};

/// An answer of the HTTP layer.
pub(crate) type Answer =
    Response<http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>>;

/// What the HTTP layer saw of one request and answered (the request record's content).
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) time: jiff::Timestamp,
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) mcp_method: Option<String>,
    /// The status answered; 0 when the connection was closed without an answer.
    pub(crate) status: u16,
    pub(crate) refused: Option<&'static str>,
    pub(crate) policy_id: Option<String>,
    pub(crate) duration_ms: u64,
}

impl Seen {
    /// A request as it arrives: nothing answered yet.
    pub(crate) fn arriving(method: &str, path: &str) -> Self {
        Seen {
            time: jiff::Timestamp::now(),
            method: method.to_owned(),
            path: path.to_owned(),
            mcp_method: None,
            status: 0,
            refused: None,
            policy_id: None,
            duration_ms: 0,
        }
    }
}

/// Marked by the server handler when a `tools/call` of the request reaches it: that call
/// leaves its own record, so the request leaves none. Read when the answer's body ends
/// (a call answered on an event stream runs after the answer's head is sent).
#[derive(Debug, Clone, Default)]
pub(crate) struct CallSeen(Arc<AtomicBool>);

impl CallSeen {
    /// The call will leave its record.
    pub(crate) fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn marked(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// How a route answered one request.
#[derive(Debug)]
pub(crate) struct Routed {
    pub(crate) answer: Answer,
    /// Marked when a call record covers the request (it then leaves no request record).
    pub(crate) covered: CallSeen,
    pub(crate) refused: Option<&'static str>,
    pub(crate) mcp_method: Option<String>,
    pub(crate) policy_id: Option<String>,
}

impl Routed {
    /// An answer with nothing more to say.
    pub(crate) fn answered(answer: Answer) -> Self {
        Routed {
            answer,
            covered: CallSeen::default(),
            refused: None,
            mcp_method: None,
            policy_id: None,
        }
    }

    /// A refusal: a plain-text answer with `status` and the reason's code.
    pub(crate) fn refused(status: StatusCode, code: &'static str) -> Self {
        Routed {
            refused: Some(code),
            ..Routed::answered(plain(status, code))
        }
    }

    /// A refusal because a bound is reached: `503` with `Retry-After`.
    pub(crate) fn busy(code: &'static str) -> Self {
        let mut routed = Routed::refused(StatusCode::SERVICE_UNAVAILABLE, code);
        routed.answer.headers_mut().insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from(RETRY_AFTER_SECS),
        );
        routed
    }
}

/// The requests of one listener: how they are answered and recorded.
pub(crate) trait Route: Clone + Send + Sync + 'static {
    /// Answers one request from `peer`.
    fn route(
        &self,
        request: Request<Incoming>,
        peer: IpAddr,
    ) -> impl Future<Output = Routed> + Send;

    /// Writes the request record of a request no call record covers.
    fn record(&self, seen: Seen);
}

/// A listener's socket, TLS and bound.
pub(crate) struct Listening {
    /// The name the server goes by on stderr.
    pub(crate) name: String,
    pub(crate) listener: TcpListener,
    pub(crate) tls: Option<TlsAcceptor>,
    /// Connections served at once.
    pub(crate) max_connections: usize,
    /// Connections served at once from one peer address.
    pub(crate) max_connections_per_peer: usize,
    /// The package served, as metrics name it.
    pub(crate) package: Arc<str>,
}

/// The connections open per peer address; a connection's place is freed when its
/// [`PeerPlace`] is dropped.
#[derive(Debug, Default)]
struct PerPeer(Mutex<HashMap<IpAddr, usize>>);

/// One connection's place among its peer's.
struct PeerPlace {
    peers: Arc<PerPeer>,
    ip: IpAddr,
}

impl PerPeer {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for one more connection of `ip`, when it has fewer than `max`.
    fn enter(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<PeerPlace> {
        let mut open = self.lock();
        let n = open.entry(ip).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(PeerPlace {
            peers: self.clone(),
            ip,
        })
    }
}

impl Drop for PeerPlace {
    fn drop(&mut self) {
        let mut open = self.peers.lock();
        if let Some(n) = open.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Serves `route` on `listening` until `stop` is cancelled: one task per connection
/// within the bound. A failed accept (a connection reset before it was taken) is
/// reported on stderr and serving goes on.
pub(crate) async fn serve<R: Route>(listening: Listening, route: R, stop: CancellationToken) {
    let Listening {
        name,
        listener,
        tls,
        max_connections,
        max_connections_per_peer,
        package,
    } = listening;
    let gate = Arc::new(Semaphore::new(max_connections.max(1)));
    let peers = Arc::new(PerPeer::default());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => return,
        };
        let (stream, peer) = match accepted {
            // No Nagle delay: an answer's head and its SSE events are separate writes,
            // and a client that acknowledges late would otherwise hold each ~40 ms.
            Ok((stream, peer)) => {
                let _nodelay = stream.set_nodelay(true);
                (stream, peer)
            }
            Err(e) => {
                crate::log::warn("accept_failed", &format!("{name}: accept failed: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = gate.clone().try_acquire_owned() else {
            let seen = refuse_connection(stream, tls.is_some(), "connections_full");
            record(&route, &package, seen);
            continue;
        };
        let Some(place) = peers.enter(peer.ip(), max_connections_per_peer) else {
            let seen = refuse_connection(stream, tls.is_some(), "peer_connections_full");
            record(&route, &package, seen);
            continue;
        };
        let (route, stop, tls) = (route.clone(), stop.clone(), tls.clone());
        let package = package.clone();
        tokio::spawn(async move {
            let _held = (permit, place);
            let pending = Arc::new(AtomicBool::new(false));
            let stream = Watched {
                inner: stream,
                pending: pending.clone(),
            };
            match tls {
                None => {
                    serve_connection(TokioIo::new(stream), peer, route, package, pending, stop)
                        .await;
                }
                Some(tls) => {
                    let handshake = tokio::time::timeout(HEAD_READ_TIMEOUT, tls.accept(stream));
                    match handshake.await {
                        Ok(Ok(stream)) => {
                            pending.store(false, Ordering::Relaxed);
                            serve_connection(
                                TokioIo::new(stream),
                                peer,
                                route,
                                package,
                                pending,
                                stop,
                            )
                            .await;
                        }
                        _ if pending.load(Ordering::Relaxed) => {
                            record(&route, &package, refusal_seen(0, "tls_handshake_failed"));
                        }
                        // Nothing arrived: no request was made.
                        _ => {}
                    }
                }
            }
        });
    }
}

/// Counts a request and writes its record.
fn record<R: Route>(route: &R, package: &str, seen: Seen) {
    crate::metrics::global().http_request(package, seen.status, seen.refused);
    route.record(seen);
}

/// The record of a request refused below the routes.
fn refusal_seen(status: u16, code: &'static str) -> Seen {
    Seen {
        status,
        refused: Some(code),
        ..Seen::arriving("-", "-")
    }
}

/// Answers a connection over the bound at once, without waiting on it: what it sent
/// so far is read (so that closing does not reset the answer away), `503` with
/// `Retry-After` written when it is plain HTTP, and the connection closed. The socket is
/// used directly (non-blocking), since the runtime has not seen it ready yet.
fn refuse_connection(stream: TcpStream, tls: bool, code: &'static str) -> Seen {
    use std::io::{Read as _, Write as _};
    let status = match stream.into_std() {
        Ok(mut stream) => {
            let mut sink = [0_u8; 4096];
            for _ in 0..4 {
                match stream.read(&mut sink) {
                    Ok(n) if n == sink.len() => {}
                    _ => break,
                }
            }
            if tls {
                0
            } else {
                let answer = format!(
                    "HTTP/1.1 503 Service Unavailable\r\nRetry-After: {RETRY_AFTER_SECS}\r\n\
                     Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\
                     \r\n{code}\n",
                    code.len() + 1
                );
                // A fresh socket's send buffer takes the whole answer at once; a
                // partial write is counted as no answer.
                match stream.write(answer.as_bytes()) {
                    Ok(n) if n == answer.len() => 503,
                    _ => 0,
                }
            }
        }
        Err(_) => 0,
    };
    refusal_seen(status, code)
}

/// Serves one connection until it closes, or until `stop` (then ends it gracefully);
/// records what hyper refused on it.
async fn serve_connection<I, R>(
    io: I,
    peer: SocketAddr,
    route: R,
    package: Arc<str>,
    pending: Arc<AtomicBool>,
    stop: CancellationToken,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    R: Route,
{
    let (answering, answered) = (route.clone(), pending.clone());
    let serving = package.clone();
    let handle = hyper::service::service_fn(move |request: Request<Incoming>| {
        let (route, answered, package) = (answering.clone(), answered.clone(), serving.clone());
        async move {
            let answer = answer(request, peer.ip(), &route, package).await;
            // The request was read whole: what arrives next is the next request.
            answered.store(false, Ordering::Relaxed);
            Ok::<_, std::convert::Infallible>(answer)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES);
    let connection = builder.serve_connection(io, handle);
    tokio::pin!(connection);
    let served = tokio::select! {
        served = connection.as_mut() => served,
        () = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            return;
        }
    };
    if let Err(e) = served {
        let refused = if e.is_parse_too_large() {
            Some((431, "head_too_large"))
        } else if e.is_parse() {
            Some((400, "malformed_request"))
        } else if !pending.load(Ordering::Relaxed) {
            // Idle between requests, or closed by its client after an answer.
            None
        } else if e.is_timeout() {
            Some((0, "head_timeout"))
        } else {
            Some((0, "request_incomplete"))
        };
        if let Some((status, code)) = refused {
            record(&route, &package, refusal_seen(status, code));
        }
    }
}

/// Answers one request through `route` and, once the answer's body ends, leaves its
/// request record unless a call record covers it.
async fn answer<R: Route>(
    request: Request<Incoming>,
    peer: IpAddr,
    route: &R,
    package: Arc<str>,
) -> Answer {
    let started = std::time::Instant::now();
    let mut seen = Seen::arriving(request.method().as_str(), request.uri().path());
    let routed = route.route(request, peer).await;
    seen.status = routed.answer.status().as_u16();
    seen.refused = routed.refused;
    seen.mcp_method = routed.mcp_method;
    seen.policy_id = routed.policy_id;
    seen.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let ending = RecordAtEnd {
        route: route.clone(),
        package,
        seen: Some(seen),
        covered: routed.covered,
    };
    routed.answer.map(|body| {
        body.map_frame(move |frame| {
            let _ending = &ending;
            frame
        })
        .boxed()
    })
}

/// Writes a request's record when its answer's body is done with (sent, or dropped
/// with its connection), unless a call record covers the request.
struct RecordAtEnd<R: Route> {
    route: R,
    package: Arc<str>,
    seen: Option<Seen>,
    covered: CallSeen,
}

impl<R: Route> Drop for RecordAtEnd<R> {
    fn drop(&mut self) {
        let Some(seen) = self.seen.take() else {
            return;
        };
        if self.covered.marked() {
            // The call's own record covers it; it is counted all the same.
            crate::metrics::global().http_request(&self.package, seen.status, seen.refused);
        } else {
            record(&self.route, &self.package, seen);
        }
    }
}

/// A plain-text answer with `status`.
pub(crate) fn plain(status: StatusCode, text: &str) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *response.status_mut() = status;
    response
}

/// A connection's stream that notes when bytes of a request arrive (cleared once a
/// request is answered), so that a connection error can tell a refused request from an
/// idle connection.
struct Watched {
    inner: TcpStream,
    pending: Arc<AtomicBool>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.pending.store(true, Ordering::Relaxed);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The whole body, at most `limit` bytes and within [`HEAD_READ_TIMEOUT`]: `Err` is the
/// status and the refusal's code.
pub(crate) async fn read_body(
    body: Incoming,
    limit: usize,
) -> Result<Bytes, (StatusCode, &'static str)> {
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
