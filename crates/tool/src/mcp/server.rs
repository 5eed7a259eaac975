//! The MCP server of one package, over stdio or Streamable HTTP (one handler for both,
//! the transport chosen by [`McpTransport`]): at start it hashes its own package (once,
//! over the file the process was started from) and reads the fixed runtime context;
//! `tools/list` answers the package's one tool, `tools/call` reads the policy envelope
//! afresh, runs the one sandbox call against the digest computed at start and appends
//! the audit record before answering. Every call has its one deadline from the
//! manifest's `limits.timeout_ms`, counted from the arrival of its request
//! (`crate::deadline`).
//!
//! At most the manifest's `concurrency` calls run at once. A call beyond them waits for
//! a slot, but only within its own deadline: when the deadline passes first it answers
//! the typed timeout `<origin>_timeout` (class `timeout`, "a narrower query would not
//! help", nothing sent) with its audit record, so no call waits in an unbounded queue
//! and a stalled provider makes no call wait past its deadline. Waiting was chosen over
//! answering a "busy" result at once: a healthy provider then answers every call of a
//! burst (the calls of one model step often come at once), where a busy answer would
//! fail an objective the turn rules do not let the model retry; and a call that never got
//! a slot is not admitted to the turn ledger, so it uses no attempt of its `queryId`.
//!
//! A call runs as its own task. When the client cancels it (`notifications/cancelled`,
//! which `rmcp` turns into the cancellation of the request's context, as it does for the
//! calls still running a few seconds after a session ended), its work stops at once: the
//! connector sees its deadline over, Wetech's browser is ended, and the call's audit
//! record is written marked `cancelled` (no answer goes to the client, which asked for
//! none). The server exits only after every call it accepted has been recorded. Told to
//! stop (SIGTERM, SIGINT: what an MCP client sends when a closed session's server does
//! not exit in time), it records each call still running as cancelled and exits. A
//! server that finds the policy signing key in its environment, or that has no usable
//! turn ledger, does not start (over stdio it says why in its answer to `initialize`;
//! over HTTP it exits before it listens, saying why on stderr).

use std::borrow::Cow;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use evidence_result::ToolResult;
use hyper::http::request::Parts;
use jiff::Timestamp;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use evidence_connectors::CutOff;
use evidence_package::Traceparent;

use crate::ToolError;
use crate::context::{POLICY_KEYS_ENV, SIGNING_KEY_ENV};
use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::mcp::bounded_sessions::BoundedSessions;
use crate::mcp::browser_flags::BrowserFlags;
use crate::mcp::connection::{self, CallSeen, Listening, Seen};
use crate::mcp::environment::keep_only_own_variables;
use crate::mcp::fair_slots::FairSlots;
use crate::mcp::http::{self, AgentRoute};
use crate::mcp::inflight::{InFlight, query_ids};
use crate::mcp::limits::RESERVED_DESCRIPTORS;
use crate::mcp::listen::{HttpListen, MCP_HTTP_FLAG, MCP_HTTP_PATH, McpTransport, OPERATOR_FLAG};
use crate::mcp::listing::{SUPPORTED_PROTOCOL_VERSIONS, tool_listing};
use crate::mcp::operator::{self, OperatorRoute, Record};
use crate::mcp::request_audit::{HTTP_REQUEST_RECORD, RequestRecord, write_request_record};
use crate::mcp::session::{self, session_envelope};
use crate::mcp::tls::TlsFiles;
use crate::metrics::{Phase, Store};
use crate::output::write_audit;
use crate::readiness;
use crate::runtime::block_on_to_exit;
use crate::runtime_context::RuntimeContext;
use crate::sandbox::{CallEnvelope, Sandbox};
use crate::session_store::SessionStore;
use crate::tools::PackageTool;

/// Whose call slots a call counts against: its session's (the digest of its token), or
/// the one session of stdio.
type SlotKey = Option<evidence_result::Digest>;

/// The server of one tool: the package and runtime context it read at start, its
/// listing (from that package's manifest) and the call slots bounding concurrent calls,
/// shared fairly by the sessions ([`FairSlots`]). Its clones (one per HTTP session)
/// share all of it: the slots, the calls and the set of calls in flight are the
/// process's.
#[derive(Debug)]
struct PackageServer<T: PackageTool> {
    served: Arc<Sandbox<T>>,
    listing: McpTool,
    slots: FairSlots<SlotKey>,
    calls: TaskTracker,
    inflight: Arc<InFlight>,
    /// The session store, over HTTP: each call runs under its session's envelope.
    sessions: Option<SessionStore>,
}

impl<T: PackageTool> Clone for PackageServer<T> {
    fn clone(&self) -> Self {
        PackageServer {
            served: self.served.clone(),
            listing: self.listing.clone(),
            slots: self.slots.clone(),
            calls: self.calls.clone(),
            inflight: self.inflight.clone(),
            sessions: self.sessions.clone(),
        }
    }
}

/// Serves the tool `T` over `transport` (stdio: until the client closes the stream;
/// HTTP: until the process is told to stop); returns the exit status. First the
/// process keeps only its own variables (it re-executes itself, with the same
/// transport, when it was started with others). The package folder must load at
/// start: it is hashed then, once, and every call is verified against that digest.
///
/// `browser` bounds the life of the browser `wetech-tool` keeps warm between calls (each
/// call in a browser context of its own); the other tools keep none. Once serving ends
/// (stdio closed, or the process told to stop), the warm browser is closed: its
/// processes stopped and its profile removed.
pub fn serve_mcp<T: PackageTool>(transport: McpTransport, browser: BrowserFlags) -> ExitCode {
    let name = T::TOOL.binary_name();
    let flag = transport.flag();
    // As the entrypoint does: a sandbox that holds the signing key runs nothing. Checked
    // before the environment is cut down to the server's own variables, which would
    // drop it without a word.
    if std::env::var_os(SIGNING_KEY_ENV).is_some() {
        eprintln!(
            "{name} {flag}: {SIGNING_KEY_ENV} is set: the policy signing key must stay with the \
             signer; give the server only {POLICY_KEYS_ENV}"
        );
        return ExitCode::FAILURE;
    }
    if let Err(e) = keep_only_own_variables(T::TOOL, &transport, browser) {
        eprintln!("{name} {flag}: {e}");
        return ExitCode::FAILURE;
    }
    block_on_to_exit(
        name,
        &format!("{name} {flag}"),
        serve::<T>(transport, browser),
    )
}

async fn serve<T: PackageTool>(
    transport: McpTransport,
    browser: BrowserFlags,
) -> Result<(), ToolError> {
    // What would fail every call is known now (its package does not load, or a part of
    // its runtime context is missing or invalid): the server does not start, and says
    // why to the client (which shows the error of its `initialize` request) and on
    // stderr.
    // Over MCP nothing else keeps the turn: the server also needs the turn ledger it
    // shares with the other packages' servers.
    // Over HTTP every call runs under its own session's envelope, kept in the session
    // store beside the turn ledger.
    let mut context = RuntimeContext::from_env(T::TOOL);
    context.serve_warm(browser.reuse());
    let over_http = matches!(transport, McpTransport::Http(_));
    let sessions = if over_http {
        context.serve_sessions()
    } else {
        Ok(())
    };
    let started = sessions.and_then(|()| Sandbox::<T>::start(context));
    let store = started.as_ref().map_err(Clone::clone).and_then(|s| {
        s.readiness()?;
        let store = s.context().session_store(s.package().identity())?;
        Ok(over_http.then_some(store))
    });
    let store = match store {
        Ok(store) => store,
        Err(failure) => {
            if !over_http {
                refuse_session(T::TOOL.binary_name(), &failure).await;
            }
            return Err(ToolError::Mcp(format!("not started: {failure}")));
        }
    };
    let served = started.map_err(|failure| ToolError::Mcp(failure.to_string()))?;
    let package = served.package();
    let concurrency = usize::try_from(package.manifest().limits.concurrency)
        .unwrap_or(1)
        .max(1);
    crate::metrics::global().build(package.identity().as_str(), &package.digest().to_string());
    let slots = FairSlots::new(concurrency, package.identity().as_str());
    let inflight = Arc::new(InFlight::default());
    let served = Arc::new(served);
    let server = PackageServer {
        listing: tool_listing(served.package())?,
        served: served.clone(),
        slots,
        calls: TaskTracker::new(),
        inflight: inflight.clone(),
        sessions: store,
    };
    let mut stop = StopSignals::new()?;
    let _hangups = tokio::spawn(acknowledge_hangups(StopSignals::hangup()?));
    let stop_serving = CancellationToken::new();
    let serving = async {
        match &transport {
            McpTransport::Stdio => serve_stdio(server).await,
            McpTransport::Http(listen) => serve_http(server, listen, stop_serving.clone()).await,
        }
    };
    let ended = tokio::select! {
        ended = serving => ended,
        () = stop.received() => {
            stop_serving.cancel();
            inflight
                .cancel_all(served.package())
                .iter()
                .try_for_each(|record| write_audit(record, served.context().audit_log()))
        }
    };
    // What the connector keeps between calls (the warm browser) goes with the server.
    let closed = served
        .close()
        .await
        .map_err(|e| ToolError::Mcp(e.to_string()));
    ended.and(closed)
}

/// One session over stdio, then every call it accepted run to its record.
async fn serve_stdio<T: PackageTool>(server: PackageServer<T>) -> Result<(), ToolError> {
    let calls = server.calls.clone();
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ToolError::Mcp(format!("the session did not start: {e}")))?;
    let ended = running
        .waiting()
        .await
        .map_err(|e| ToolError::Mcp(format!("the session ended abnormally: {e}")));
    // Every accepted call runs to its audit record, whatever ended the session (each
    // is bounded by its own time limits).
    calls.close();
    calls.wait().await;
    ended.map(drop)
}

/// Streamable HTTP (HTTPS with TLS files) on `listen` until `stop`, and the operator
/// listener beside it; names each endpoint it serves on stderr once it listens (with
/// the port bound, when `listen` asked for port 0).
async fn serve_http<T: PackageTool>(
    server: PackageServer<T>,
    listen: &HttpListen,
    stop: CancellationToken,
) -> Result<(), ToolError> {
    let name = T::TOOL.binary_name();
    let scanning = server.served.clone();
    crate::log::init(
        listen.log_format(),
        server.served.package().identity().as_str(),
        Arc::new(move |line: &str| scanning.secrets_in(line)),
    );
    // The TLS files are read before the server listens: a bad one stops it here.
    let tls = listen
        .tls()
        .map(TlsFiles::acceptor)
        .transpose()
        .map_err(|e| ToolError::Mcp(e.to_string()))?;
    let bind = |addr| async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| ToolError::Mcp(format!("cannot listen on {addr}: {e}")))?;
        let bound = listener
            .local_addr()
            .map_err(|e| ToolError::Mcp(format!("cannot read the bound address: {e}")))?;
        Ok::<_, ToolError>((listener, bound))
    };
    let (listener, bound) = bind(listen.addr()).await?;
    let operator = match listen.operator() {
        Some(addr) => Some(bind(addr).await?),
        None => None,
    };
    let store = server
        .sessions
        .clone()
        .ok_or_else(|| ToolError::Mcp("no session store".to_owned()))?;
    let mut limits = listen.limits();
    if let Some(fitted) = limits.fitted_connections(open_files_limit()) {
        crate::log::warn(
            "connections_fitted",
            &format!(
                "{name} {MCP_HTTP_FLAG}: at most {fitted} connections per listener (not {}): \
                 the process may open only so many files, {RESERVED_DESCRIPTORS} of them kept \
                 for the audit log, the turn ledger and the calls",
                limits.max_connections
            ),
        );
        limits.max_connections = fitted;
    }
    let delivering = server.served.clone();
    let deliver: Arc<operator::Deliver> = Arc::new(move |body: &[u8]| {
        let started = Instant::now();
        let answer = blocking(|| {
            session::deliver(
                delivering.package(),
                delivering.context(),
                &store,
                body,
                Timestamp::now(),
            )
        });
        let metrics = crate::metrics::global();
        let failed = answer.refused == Some(session::STORE_UNAVAILABLE);
        metrics.store(
            Store::SessionStore,
            store.backend(),
            started.elapsed(),
            failed,
        );
        metrics.delivery(delivering.package().identity().as_str(), answer.outcome());
        answer
    });
    let record = request_recorder(&server.served);
    let (checking, checked_store) = (server.served.clone(), server.sessions.clone());
    let ready: Arc<operator::Ready> = Arc::new(move || {
        readiness::checks(
            checking.package_changed(),
            checking.context(),
            checked_store.as_ref(),
        )
    });
    let package: Arc<str> = Arc::from(server.served.package().identity().as_str());
    let operator_package = package.clone();
    let sessions = Arc::new(BoundedSessions::new(limits, &package));
    let endpoints = http::Endpoints {
        deliver: listen.envelopes_on_mcp_port().then(|| deliver.clone()),
        record: record.clone(),
        hosts: listen.allowed_hosts(bound),
        origins: listen.allowed_origins(bound),
        sessions: sessions.clone(),
    };
    let service = http::service(server, listen.config(bound, stop.clone()), sessions);
    let scheme = listen.scheme();
    let agent = connection::serve(
        Listening {
            name: format!("{name} {MCP_HTTP_FLAG}"),
            listener,
            tls: tls.clone(),
            max_connections: limits.max_connections,
            max_connections_per_peer: limits.max_connections_per_peer,
            package: package.clone(),
        },
        AgentRoute {
            service,
            endpoints: Arc::new(endpoints),
        },
        stop.clone(),
    );
    let operator = operator.map(|(listener, operator_bound)| {
        let hosts = listen.operator_hosts(operator_bound);
        crate::log::info(
            "serving",
            &format!("{name} {OPERATOR_FLAG}: serving {scheme}://{operator_bound}"),
        );
        connection::serve(
            Listening {
                name: format!("{name} {OPERATOR_FLAG}"),
                listener,
                tls,
                max_connections: limits.max_connections,
                max_connections_per_peer: limits.max_connections_per_peer,
                package,
            },
            OperatorRoute {
                deliver,
                record,
                hosts,
                ready,
                package: operator_package,
            },
            stop,
        )
    });
    crate::log::info(
        "serving",
        &format!("{name} {MCP_HTTP_FLAG}: serving {scheme}://{bound}{MCP_HTTP_PATH}"),
    );
    match operator {
        Some(operator) => {
            tokio::join!(agent, operator);
        }
        None => agent.await,
    }
    Ok(())
}

/// Writes the request record of a request no call record covers, to the server's audit
/// log (stderr when it cannot).
fn request_recorder<T: PackageTool>(served: &Arc<Sandbox<T>>) -> Arc<Record> {
    let recording = served.clone();
    Arc::new(move |seen: Seen| {
        let package = recording.package();
        let record = RequestRecord {
            record: HTTP_REQUEST_RECORD,
            time: seen.time,
            stream: package.manifest().audit_stream.clone(),
            package: package.identity().clone(),
            digest: package.digest(),
            method: seen.method,
            path: seen.path,
            mcp_method: seen.mcp_method,
            status: seen.status,
            refused: seen.refused,
            policy_id: seen.policy_id,
            duration_ms: seen.duration_ms,
        };
        if let Err(e) = write_request_record(&record, recording.context().audit_log()) {
            crate::log::error(
                "request_record_failed",
                &format!("{}: {e}", T::TOOL.binary_name()),
            );
        }
    })
}

/// The soft limit of open files of this process, raised to its hard limit first.
fn open_files_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            limit = raised;
        }
    }
    limit.current.unwrap_or(u64::MAX)
}

/// Answers the client's `initialize` with an error that names `failure`, so the client
/// shows why the server did not start; the session then ends.
async fn refuse_session(name: &str, failure: &RuntimeFailure) {
    let refusal = Refusal {
        message: format!("{name} --mcp cannot serve any call: {failure}"),
    };
    if let Ok(running) = refusal.serve(rmcp::transport::stdio()).await {
        let _ended = running.waiting().await;
    }
}

/// A server that refuses every session at `initialize`.
#[derive(Debug, Clone)]
struct Refusal {
    message: String,
}

impl ServerHandler for Refusal {
    async fn initialize(
        &self,
        _request: InitializeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        Err(ErrorData::internal_error(self.message.clone(), None))
    }
}

/// SIGTERM and SIGINT, registered before the session starts.
#[derive(Debug)]
struct StopSignals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn new() -> Result<Self, ToolError> {
        use tokio::signal::unix::{SignalKind, signal};
        let register = |kind| {
            signal(kind).map_err(|e| ToolError::Mcp(format!("cannot watch for stop signals: {e}")))
        };
        Ok(StopSignals {
            terminate: register(SignalKind::terminate())?,
            interrupt: register(SignalKind::interrupt())?,
        })
    }

    /// SIGHUP, which log rotation sends out of habit: without a handler it would end
    /// the server.
    fn hangup() -> Result<tokio::signal::unix::Signal, ToolError> {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|e| ToolError::Mcp(format!("cannot watch for SIGHUP: {e}")))
    }

    async fn received(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

/// Answers each SIGHUP with a log line and goes on serving: the audit log is opened for
/// each record (`crate::output`), so a log that rotation renamed is left at once, and
/// nothing else the server holds is reloaded (its package, keys and secrets are read once,
/// at start).
async fn acknowledge_hangups(mut hangup: tokio::signal::unix::Signal) {
    while hangup.recv().await.is_some() {
        crate::log::info(
            "hangup",
            "SIGHUP: nothing to reopen (the audit log is opened for each record); serving on",
        );
    }
}

/// The MCP projection of a managed result, as `rmcp`'s type: one text block holding
/// exactly `text`, `structuredContent` = `details`, `isError` = failed.
fn to_call_tool_result(result: &ToolResult) -> Result<CallToolResult, ToolError> {
    let projected = serde_json::to_value(result.to_mcp()?)?;
    Ok(serde_json::from_value(projected)?)
}

/// The client's answer when a call's result or record cannot be produced: a fixed text
/// (the cause may name the audit log's path), the cause on stderr for the operator.
fn internal(e: &ToolError) -> ErrorData {
    crate::log::error("no_result", &format!("no result could be produced: {e}"));
    ErrorData::internal_error(
        "no result could be produced; the operator has the detail in the server's log",
        None,
    )
}

impl<T: PackageTool> ServerHandler for PackageServer<T> {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        config.server_info = Implementation::new(
            T::TOOL.identity().as_str().to_owned(),
            env!("CARGO_PKG_VERSION"),
        );
        config
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(SUPPORTED_PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![self.listing.clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        if request.name != self.listing.name {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}: this server serves {}",
                    request.name, self.listing.name
                ),
                None,
            ));
        }
        // From here the call leaves its own record: the HTTP layer writes no request
        // record for it.
        let parts = context.extensions.get::<Parts>();
        if let Some(seen) = parts.and_then(|p| p.extensions.get::<CallSeen>()) {
            seen.mark();
        }
        let traceparent = traceparent_of(
            served_package(&self.served),
            context
                .meta
                .get(TRACEPARENT)
                .and_then(serde_json::Value::as_str),
            parts,
        );
        // The arguments as the JSON text the model wrote them; the sandbox call judges
        // them (a bad argument is a result, never a protocol error).
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let args = arguments.to_string();
        let (served, slots) = (self.served.clone(), self.slots.clone());
        let inflight = self.inflight.clone();
        let cancelled = context.ct.clone();
        let deadline = served
            .deadline(started)
            .with_cancellation(cancelled.clone());
        // A shared (Redis) session store is asked within the call's deadline, off the
        // async workers.
        let (envelope, slot_key) = match &self.sessions {
            None => (CallEnvelope::Context, None),
            Some(store) => {
                let within = deadline.remaining().unwrap_or(Duration::from_secs(60));
                let looking = Instant::now();
                let session = blocking(|| session_envelope(parts, store, Timestamp::now(), within));
                let failed = matches!(&session, Err(f) if f.kind == RuntimeFailureKind::TurnLedgerUnavailable);
                crate::metrics::global().store(
                    Store::SessionStore,
                    store.backend(),
                    looking.elapsed(),
                    failed,
                );
                let key = session.as_ref().ok().map(|(_, digest)| *digest);
                (CallEnvelope::Session(session), key)
            }
        };
        // A call without a valid session is answered before it takes a slot.
        let needs_slot = !matches!(envelope, CallEnvelope::Session(Err(_)));
        let key = inflight.enter(&args);
        // Its own task: the call runs to its record whatever happens to the request;
        // a cancelled request only ends its deadline at once.
        let call = self.calls.spawn(async move {
            let answered = async {
                let slot = if needs_slot {
                    let waiting = Instant::now();
                    let slot = deadline.run(slots.acquire(slot_key)).await.map(Some);
                    crate::metrics::global().phase(
                        served.package().identity().as_str(),
                        Phase::SlotWait,
                        waiting.elapsed(),
                    );
                    slot
                } else {
                    Ok(None)
                };
                match slot {
                    Ok(slot) => {
                        let _slot = slot;
                        let args = args.clone();
                        served
                            .answer_with(move || Ok(args), envelope, started, deadline, traceparent)
                            .await
                    }
                    Err(_) => {
                        let cut = CutOff::BeforeQuery(
                            "while the call waited for one of this server's call slots, \
                             each taken by a call still running; nothing was sent",
                        );
                        let (result, mut audit) = served.answer_cut_off(started, &deadline, cut)?;
                        audit.query_ids = query_ids(&args);
                        audit.traceparent = traceparent;
                        Ok((result, audit))
                    }
                }
            }
            .await;
            // A result is never returned without its record; a call the stop already
            // recorded as cancelled writes none.
            let own_record = inflight.leave(key);
            let (result, mut audit) = answered?;
            if own_record {
                // A call its client cancelled is recorded as cancelled: its work stopped
                // there, and nobody reads its answer.
                audit.cancelled |= cancelled.is_cancelled();
                write_audit(&audit, served.context().audit_log())?;
            }
            Ok::<_, ToolError>(result)
        });
        let result = call
            .await
            .map_err(|e| ErrorData::internal_error(format!("the call did not finish: {e}"), None))?
            .map_err(|e| internal(&e))?;
        Ok(to_call_tool_result(&result)
            .map_err(|e| internal(&e))?
            .into())
    }
}

/// The name of the W3C trace context in a request's `_meta` and in HTTP headers.
const TRACEPARENT: &str = "traceparent";

fn served_package<T: PackageTool>(served: &Sandbox<T>) -> &str {
    served.package().identity().as_str()
}

/// The `traceparent` a call arrived with: in its request's `_meta`, else in its HTTP
/// request's header. A malformed one is ignored and counted; it never fails the call.
fn traceparent_of(package: &str, meta: Option<&str>, parts: Option<&Parts>) -> Option<Traceparent> {
    let header = || {
        parts
            .and_then(|p| p.headers.get(TRACEPARENT))
            .map(|v| v.to_str().unwrap_or(""))
    };
    let text = meta.or_else(header)?;
    match text.parse() {
        Ok(traceparent) => Some(traceparent),
        Err(_) => {
            crate::metrics::global().traceparent_malformed(package);
            None
        }
    }
}

/// Runs `work`, which may wait for a shared (Redis) session store, without holding up
/// the other tasks of a multi-thread runtime's worker.
fn blocking<R>(work: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}
