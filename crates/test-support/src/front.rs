//! What every test front shares: a loopback server, runtime-settable fault modes, the
//! request log, and forwarding to the real Prometheus with status and body passed
//! through.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::TestSupportError;

/// The largest request body a test front reads.
const MAX_REQUEST_BODY: usize = 1 << 20;

/// A fault a test front injects instead of forwarding a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// No fault: forward to Prometheus.
    #[default]
    None,
    /// Answer 200 with a valid Prometheus matrix body of at least this many bytes,
    /// streamed in 64 KiB chunks (for the response size cap).
    OversizedBody {
        /// Minimum body size in bytes.
        bytes: usize,
    },
    /// Answer 200 with an HTML maintenance page (`text/html`), not JSON.
    NonJson,
    /// Answer with this status (e.g. 429, 503) and a short plain-text body, with
    /// `Retry-After: 1`.
    Status(u16),
    /// Answer 200 with the first `bytes` bytes of a valid Prometheus matrix body, in
    /// 64 KiB chunks, then break the connection: the body never ends (a provider or
    /// proxy that dies mid-answer).
    CutBody {
        /// Bytes sent before the connection breaks.
        bytes: usize,
    },
    /// Answer 200 with `bytes` bytes that open a Prometheus matrix and stop being one at
    /// once (a comma where the first series must start, then filler), in 64 KiB chunks.
    BrokenMatrix {
        /// Body size in bytes.
        bytes: usize,
    },
    /// Answer 200 with a valid Prometheus matrix of `series` series, each with one label
    /// value of `label_bytes` bytes (a trace list or SQL text in a label), `filler`
    /// repeated, generated as it is sent in 64 KiB chunks.
    LongLabels {
        /// How many series.
        series: usize,
        /// The length of each series' long label value.
        label_bytes: usize,
        /// What the value repeats: words (`"select 1 "`) or one run (`"l"`, which the
        /// output guard decodes as base64).
        filler: &'static str,
    },
    /// Answer 200 with a valid Prometheus matrix body of at least `bytes` bytes, one
    /// 64 KiB chunk every `chunk_delay` (a provider whose answer arrives slowly).
    SlowBody {
        /// Minimum body size in bytes.
        bytes: usize,
        /// The pause before each chunk.
        chunk_delay: Duration,
    },
    /// Answer 200 with the start of a Prometheus matrix at once, then one byte every
    /// `every`, never ending (a provider whose answer drips: only the client's deadline
    /// ends it).
    Drip {
        /// The pause before each byte.
        every: Duration,
    },
    /// Forward, but with every matcher on this label removed from the query first: a
    /// backend that ignores the scope matcher and answers for every cluster.
    IgnoreScope {
        /// The scope label whose matchers are dropped (`cluster_id`).
        label: &'static str,
    },
}

#[derive(Debug, Default)]
struct FaultState {
    delay_ms: AtomicU64,
    fault: Mutex<Fault>,
    only_for: Mutex<Option<String>>,
}

/// Runtime switches for a front's fault modes. Cheap to clone; all clones control the
/// same front.
#[derive(Debug, Clone, Default)]
pub struct FaultControl {
    state: Arc<FaultState>,
}

impl FaultControl {
    /// Delays every affected request by `delay` before answering (slow server).
    pub fn set_delay(&self, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.state.delay_ms.store(ms, Ordering::SeqCst);
    }

    /// Sets the fault injected instead of forwarding.
    pub fn set_fault(&self, fault: Fault) {
        *self
            .state
            .fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = fault;
    }

    /// Applies the delay and the fault only to queries whose expression (the `query`
    /// parameter of a form body) contains `text`; the others are answered as without
    /// them. `None` applies them to every request again. (Honoured by the fronts that
    /// say so: the Clinic front's queries.)
    pub fn set_only_for(&self, text: Option<&str>) {
        *self
            .state
            .only_for
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = text.map(str::to_owned);
    }

    /// No delay, no fault, every request.
    pub fn clear(&self) {
        self.set_delay(Duration::ZERO);
        self.set_fault(Fault::None);
        self.set_only_for(None);
    }

    /// [`FaultControl::apply`] for a request with this form `body`, unless
    /// [`FaultControl::set_only_for`] leaves its query out.
    pub(crate) async fn apply_to(&self, body: &[u8]) -> Option<Response> {
        let only = self
            .state
            .only_for
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(text) = only {
            let query = url::form_urlencoded::parse(body)
                .find(|(name, _)| name == "query")
                .map(|(_, value)| value.into_owned())
                .unwrap_or_default();
            if !query.contains(&text) {
                return None;
            }
        }
        self.apply().await
    }

    /// The form `body` as the front forwards it: unchanged, or under
    /// [`Fault::IgnoreScope`] with every matcher on its label removed from `query`.
    pub(crate) fn rewrite(&self, body: Bytes) -> Bytes {
        let Fault::IgnoreScope { label } = self.fault() else {
            return body;
        };
        let Ok(matcher) = regex::Regex::new(&format!(r#",?\b{label}\s*(=~|!~|!=|=)\s*"[^"]*",?"#))
        else {
            return body;
        };
        let mut out = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in url::form_urlencoded::parse(&body) {
            if name == "query" {
                let stripped = matcher.replace_all(&value, |c: &regex::Captures<'_>| {
                    let text = &c[0];
                    if text.starts_with(',') && text.ends_with(',') {
                        ",".to_owned()
                    } else {
                        String::new()
                    }
                });
                out.append_pair(&name, &stripped);
            } else {
                out.append_pair(&name, &value);
            }
        }
        Bytes::from(out.finish())
    }

    /// The current delay.
    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.state.delay_ms.load(Ordering::SeqCst))
    }

    /// The current fault.
    pub fn fault(&self) -> Fault {
        *self
            .state
            .fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps for the delay, then answers the fault if one is set.
    pub(crate) async fn apply(&self) -> Option<Response> {
        let delay = self.delay();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        match self.fault() {
            Fault::None | Fault::IgnoreScope { .. } => None,
            Fault::NonJson => Some(non_json_page()),
            Fault::Status(code) => Some(status_page(code)),
            Fault::OversizedBody { bytes } => Some(oversized_body(bytes)),
            Fault::CutBody { bytes } => Some(cut_body(bytes)),
            Fault::BrokenMatrix { bytes } => Some(broken_matrix(bytes)),
            Fault::SlowBody { bytes, chunk_delay } => Some(slow_body(bytes, chunk_delay)),
            Fault::Drip { every } => Some(crate::stall::dripping(
                "application/json",
                crate::stall::MATRIX_START,
                every,
            )),
            Fault::LongLabels {
                series,
                label_bytes,
                filler,
            } => Some(long_labels(series, label_bytes, filler)),
        }
    }
}

fn non_json_page() -> Response {
    (
        StatusCode::OK,
        [(CONTENT_TYPE, "text/html; charset=utf-8")],
        "<!DOCTYPE html><html><head><title>Maintenance</title></head>\
         <body><h1>The service is under maintenance</h1></body></html>\n",
    )
        .into_response()
}

fn status_page(code: u16) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let text = format!(
        "{} {}: injected by the test front\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("error")
    );
    (
        status,
        [
            (
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            ),
            (RETRY_AFTER, HeaderValue::from_static("1")),
        ],
        text,
    )
        .into_response()
}

/// A valid Prometheus `query_range` success body of at least `bytes` bytes.
pub fn oversized_matrix_body(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 4096);
    out.extend_from_slice(br#"{"status":"success","data":{"resultType":"matrix","result":["#);
    let mut i = 0u64;
    while out.len() < bytes {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(
            format!(r#"{{"metric":{{"__name__":"padding","series":"{i}"}},"values":["#).as_bytes(),
        );
        for k in 0..64u64 {
            if k > 0 {
                out.push(b',');
            }
            out.extend_from_slice(format!(r#"[{},"{}.5"]"#, 1_784_641_800 + 15 * k, k).as_bytes());
        }
        out.extend_from_slice(b"]}");
        i += 1;
    }
    out.extend_from_slice(b"]}}");
    out
}

/// The size of each chunk a streamed fault body is sent in.
const FAULT_CHUNK: usize = 64 * 1024;

/// `body` cut into [`FAULT_CHUNK`]-byte pieces.
fn chunks_of(body: &Bytes) -> Vec<Bytes> {
    (0..body.len())
        .step_by(FAULT_CHUNK)
        .map(|start| body.slice(start..(start + FAULT_CHUNK).min(body.len())))
        .collect()
}

/// A 200 JSON answer whose body is `stream` (chunked, no `Content-Length`).
fn streamed<S>(stream: S) -> Response
where
    S: futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
{
    Response::builder()
        .status(StatusCode::OK)
        .header(CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn oversized_body(bytes: usize) -> Response {
    let pieces = chunks_of(&Bytes::from(oversized_matrix_body(bytes)));
    streamed(futures::stream::iter(pieces.into_iter().map(Ok)))
}

fn long_labels(series: usize, label_bytes: usize, filler: &str) -> Response {
    let filler = Bytes::from(filler.repeat(FAULT_CHUNK / filler.len().max(1) + 1));
    let parts = (0..series).flat_map(move |i| {
        let head = format!(
            r#"{}{{"metric":{{"__name__":"tidb_query","instance":"tidb-{i}:10080","sql":""#,
            if i == 0 {
                r#"{"status":"success","data":{"resultType":"matrix","result":["#
            } else {
                ","
            }
        );
        let filler = filler.clone();
        let body = (0..label_bytes)
            .step_by(FAULT_CHUNK)
            .map(move |start| filler.slice(..FAULT_CHUNK.min(label_bytes - start)));
        let tail = format!(
            r#"{i}"}},"values":[[1786348800,"{i}.5"],[1786348815,"1"]]}}{}"#,
            if i + 1 == series { "]}}" } else { "" }
        );
        std::iter::once(Bytes::from(head))
            .chain(body)
            .chain(std::iter::once(Bytes::from(tail)))
    });
    streamed(futures::stream::iter(parts.map(Ok)))
}

fn cut_body(bytes: usize) -> Response {
    let mut body = oversized_matrix_body(bytes);
    body.truncate(bytes);
    let pieces = chunks_of(&Bytes::from(body)).into_iter().map(Ok);
    let broken = std::iter::once(Err(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "the test front broke the answer",
    )));
    streamed(futures::stream::iter(pieces.chain(broken)))
}

fn broken_matrix(bytes: usize) -> Response {
    let mut body = br#"{"status":"success","data":{"resultType":"matrix","result":[,"#.to_vec();
    body.resize(bytes.max(body.len()), b'x');
    let pieces = chunks_of(&Bytes::from(body));
    streamed(futures::stream::iter(pieces.into_iter().map(Ok)))
}

fn slow_body(bytes: usize, chunk_delay: Duration) -> Response {
    let pieces = chunks_of(&Bytes::from(oversized_matrix_body(bytes)));
    let stream = futures::stream::unfold(pieces.into_iter(), move |mut rest| async move {
        let next = rest.next()?;
        tokio::time::sleep(chunk_delay).await;
        Some((Ok(next), rest))
    });
    streamed(stream)
}

/// One request a front received: method, path, decoded query-string and form
/// parameters (never headers), and the status the front answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Path, without the query string.
    pub path: String,
    /// Decoded parameters from the query string, then from a form body.
    pub params: Vec<(String, String)>,
    /// The status the front answered.
    pub status: u16,
}

impl RecordedRequest {
    /// The first value of a parameter (e.g. `query`).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The log of the requests a front received: each answered request with its status,
/// and the count of requests that arrived (also those still unanswered, a stalled one).
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestLog {
    answered: Arc<Mutex<Vec<RecordedRequest>>>,
    arrived: Arc<std::sync::atomic::AtomicUsize>,
}

impl RequestLog {
    pub(crate) fn snapshot(&self) -> Vec<RecordedRequest> {
        self.answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many requests arrived, answered or not.
    pub(crate) fn arrived(&self) -> usize {
        self.arrived.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn push(&self, request: RecordedRequest) {
        self.answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request);
    }
}

/// Middleware that records every request with its parameters and answered status.
async fn record(State(log): State<RequestLog>, request: Request, next: Next) -> Response {
    log.arrived
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_REQUEST_BODY).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n").into_response();
    };
    let mut params: Vec<(String, String)> = parts
        .uri
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    let is_form = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if is_form {
        params.extend(url::form_urlencoded::parse(&bytes).into_owned());
    }
    let method = parts.method.to_string();
    let path = parts.uri.path().to_owned();
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    log.push(RecordedRequest {
        method,
        path,
        params,
        status: response.status().as_u16(),
    });
    response
}

/// The real Prometheus a front forwards to.
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    base: String,
    client: reqwest::Client,
}

impl Upstream {
    pub(crate) fn new(base: &str) -> Result<Self, TestSupportError> {
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| TestSupportError::Front(e.to_string()))?;
        Ok(Upstream {
            base: base.trim_end_matches('/').to_owned(),
            client,
        })
    }

    /// Forwards a `query_range` request to Prometheus as [`Upstream::forward`] does, its
    /// form body as `faults` rewrites it ([`FaultControl::rewrite`]).
    pub(crate) async fn forward_query_range(
        &self,
        faults: &FaultControl,
        method: Method,
        query: Option<&str>,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Response {
        let body = faults.rewrite(body);
        self.forward(method, "/api/v1/query_range", query, headers, body)
            .await
    }

    /// Forwards a `GET` of the metadata path (its query string) to Prometheus' global
    /// `/api/v1/metadata`, as [`Upstream::forward`] does.
    pub(crate) async fn forward_metadata(
        &self,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Response {
        self.forward(
            Method::GET,
            "/api/v1/metadata",
            query,
            headers,
            Bytes::new(),
        )
        .await
    }

    /// Forwards a request to `path` on Prometheus, with the same method, query string,
    /// content type and body, and passes status, content type and body back. When
    /// Prometheus does not answer (killed), answers 502.
    pub(crate) async fn forward(
        &self,
        method: Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Response {
        let url = match query {
            Some(q) => format!("{}{path}?{q}", self.base),
            None => format!("{}{path}", self.base),
        };
        let mut request = self.client.request(method, url);
        if let Some(ct) = headers.get(CONTENT_TYPE) {
            request = request.header(CONTENT_TYPE, ct.clone());
        }
        let answer = match request.body(body).send().await {
            Ok(resp) => {
                let status = resp.status();
                let content_type = resp.headers().get(CONTENT_TYPE).cloned();
                resp.bytes().await.map(|b| (status, content_type, b))
            }
            Err(e) => Err(e),
        };
        match answer {
            Ok((status, content_type, bytes)) => {
                let mut response = Response::new(Body::from(bytes));
                *response.status_mut() = status;
                if let Some(ct) = content_type {
                    response.headers_mut().insert(CONTENT_TYPE, ct);
                }
                response
            }
            Err(_) => (
                StatusCode::BAD_GATEWAY,
                [(CONTENT_TYPE, "text/plain; charset=utf-8")],
                "502 Bad Gateway: the upstream Prometheus did not answer\n",
            )
                .into_response(),
        }
    }
}

/// A running axum server on a free loopback port; stopped on drop.
#[derive(Debug)]
pub(crate) struct Server {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Server {
    /// Binds `127.0.0.1:0` (the OS picks a free port, so there is no race) and serves
    /// `router` with the request log in front of it.
    pub(crate) async fn start(router: Router, log: RequestLog) -> Result<Self, TestSupportError> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|e| TestSupportError::Front(format!("cannot bind 127.0.0.1:0: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| TestSupportError::Front(e.to_string()))?;
        let app = router.layer(axum::middleware::from_fn_with_state(log, record));
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(Server {
            addr,
            shutdown: Some(tx),
            task,
        })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.abort();
    }
}

/// A JSON error body with the given status.
pub(crate) fn json_error(status: StatusCode, body: serde_json::Value) -> Response {
    (status, axum::Json(body)).into_response()
}
