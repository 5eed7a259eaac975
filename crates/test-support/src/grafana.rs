//! The Grafana-compatible test front: login page, session cookie check, health with a
//! version, and the datasource proxy to a real Prometheus.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::{CONTENT_TYPE, COOKIE, LOCATION};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{any, get};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use crate::TestSupportError;
use crate::fixtures::{GRAFANA_SESSION_COOKIE_NAME, GRAFANA_SESSION_COOKIE_VALUE};
use crate::front::{FaultControl, RecordedRequest, RequestLog, Server, Upstream, json_error};
use crate::isolation_probe::{IsolationProbe, service_worker};

/// What `/api/health` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HealthMode {
    /// 200 with `{"commit", "database": "ok", "version"}`.
    #[default]
    Ok,
    /// 503 with `{"database": "failing"}` and no version.
    Unavailable,
    /// 200 with `{"database": "ok"}` but no version.
    NoVersion,
}

/// How the datasource proxy answers a Prometheus error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorStyle {
    /// Status and body of Prometheus, unchanged (what Grafana's proxy does).
    #[default]
    PassThrough,
    /// Same status, body rewritten as an `/api/ds/query`-style error frame:
    /// `{"results":{"A":{"error": TEXT, "errorSource":"downstream", "status": STATUS}}}`
    /// where TEXT is Prometheus' complete error text.
    DsQueryFrame,
}

#[derive(Debug)]
struct GrafanaState {
    upstream: Upstream,
    datasource_uid: String,
    cookie_value: SecretString,
    sessions_expired: AtomicBool,
    forbidden: AtomicBool,
    health: Mutex<HealthMode>,
    error_style: Mutex<ErrorStyle>,
    faults: FaultControl,
    page_stalled: AtomicBool,
    proxy_cookies: Mutex<Vec<Vec<(String, String)>>>,
    probe: IsolationProbe,
}

/// **Test front** standing in for Grafana, which is not packaged here. It serves a login
/// page at `/login`, checks the session cookie ([`GRAFANA_SESSION_COOKIE_NAME`]) on
/// every other route (HTML routes redirect to `/login` with 302, API routes answer 401),
/// answers `/api/health` with a version (no cookie needed), and forwards the datasource
/// proxy path [`GrafanaFront::QUERY_RANGE_PATH_TEMPLATE`] to the real Prometheus,
/// passing status and body through, and a `GET` of `api/v1/metadata` beside it (a POST
/// there is refused, as Grafana does). A 403 mode answers 403 to a valid session.
///
/// So that tests can see what a real browser holds, the front's home page copies the
/// page's localStorage into a [`GrafanaFront::PAGE_STATE_COOKIE`] cookie (a test-front
/// addition, not Grafana behaviour), and the front keeps the cookies of every datasource
/// proxy request ([`GrafanaFront::proxy_cookies`], [`GrafanaFront::page_local_storage`]).
#[derive(Debug)]
pub struct GrafanaFront {
    server: Server,
    state: Arc<GrafanaState>,
    log: RequestLog,
}

impl GrafanaFront {
    /// The Grafana version `/api/health` reports.
    pub const VERSION: &'static str = "10.4.2";
    /// The datasource uid the front serves by default.
    pub const DATASOURCE_UID: &'static str = "prometheus-fixture";
    /// The cookie the home page writes with the page's localStorage (JSON, URI-encoded).
    pub const PAGE_STATE_COOKIE: &'static str = "test_front_page_state";
    /// The datasource proxy `query_range` path; `{uid}` is the datasource uid.
    pub const QUERY_RANGE_PATH_TEMPLATE: &'static str =
        "/api/datasources/proxy/uid/{uid}/api/v1/query_range";

    /// Starts the front for the Prometheus at `prometheus_url`, datasource uid
    /// [`GrafanaFront::DATASOURCE_UID`], accepting the session cookie value
    /// [`GRAFANA_SESSION_COOKIE_VALUE`].
    pub async fn start(prometheus_url: &str) -> Result<Self, TestSupportError> {
        Self::start_with(
            prometheus_url,
            Self::DATASOURCE_UID,
            SecretString::from(GRAFANA_SESSION_COOKIE_VALUE),
        )
        .await
    }

    /// Starts the front with a chosen datasource uid and accepted cookie value.
    pub async fn start_with(
        prometheus_url: &str,
        datasource_uid: &str,
        cookie_value: SecretString,
    ) -> Result<Self, TestSupportError> {
        let state = Arc::new(GrafanaState {
            upstream: Upstream::new(prometheus_url)?,
            datasource_uid: datasource_uid.to_owned(),
            cookie_value,
            sessions_expired: AtomicBool::new(false),
            forbidden: AtomicBool::new(false),
            health: Mutex::new(HealthMode::Ok),
            error_style: Mutex::new(ErrorStyle::PassThrough),
            faults: FaultControl::default(),
            page_stalled: AtomicBool::new(false),
            proxy_cookies: Mutex::new(Vec::new()),
            probe: IsolationProbe::default(),
        });
        let router =
            Router::new()
                .route("/login", get(login_page))
                .route("/api/health", get(health))
                .route(
                    "/api/datasources/proxy/uid/{uid}/{*rest}",
                    any(datasource_proxy),
                )
                .route("/api/{*rest}", any(other_api))
                .route(
                    "/isolation-report",
                    axum::routing::post(
                        |State(state): State<Arc<GrafanaState>>, body: Bytes| async move {
                            state.probe.report(&body)
                        },
                    ),
                )
                .route(
                    "/isolation-gate",
                    get(|State(state): State<Arc<GrafanaState>>| async move {
                        state.probe.gate().await
                    }),
                )
                .route("/isolation-sw.js", get(|| async { service_worker() }))
                .fallback(html_route)
                .with_state(state.clone());
        let log = RequestLog::default();
        let server = Server::start(router, log.clone()).await?;
        Ok(GrafanaFront { server, state, log })
    }

    /// The base URL (the Grafana origin), `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        self.server.url()
    }

    /// The Playwright storage state of a user logged in to this front with the default
    /// session ([`GRAFANA_SESSION_COOKIE_VALUE`]), as a real login leaves it: the
    /// `httpOnly` session cookie and the front's origin with no localStorage.
    pub fn storage_state(&self) -> String {
        serde_json::json!({
            "cookies": [{"name": GRAFANA_SESSION_COOKIE_NAME,
                         "value": GRAFANA_SESSION_COOKIE_VALUE,
                         "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": true,
                         "secure": false, "sameSite": "Lax"}],
            "origins": [{"origin": self.base_url(), "localStorage": []}]
        })
        .to_string()
    }

    /// The address the front listens on.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The datasource uid the proxy serves.
    pub fn datasource_uid(&self) -> &str {
        &self.state.datasource_uid
    }

    /// The proxy path for this front's datasource.
    pub fn query_range_path(&self) -> String {
        Self::QUERY_RANGE_PATH_TEMPLATE.replace("{uid}", &self.state.datasource_uid)
    }

    /// Fault modes of the datasource proxy route.
    pub fn faults(&self) -> &FaultControl {
        &self.state.faults
    }

    /// Serves every Grafana page (the landing page a Wetech call opens after the login
    /// check) as a document that never finishes loading: headers and the start of the
    /// HTML at once, then one byte every half second, forever.
    pub fn set_page_stalled(&self, stalled: bool) {
        self.state.page_stalled.store(stalled, Ordering::SeqCst);
    }

    /// Serves the isolation probe as the home page (`crate::isolation_probe`): each
    /// visit reports what an earlier page left (names only) and plants a cookie, a
    /// `localStorage`, a `sessionStorage`, an IndexedDB, a Cache Storage entry, a service
    /// worker and a named window of its own.
    pub fn set_isolation_probe(&self, on: bool) {
        self.state.probe.set_on(on);
    }

    /// The probe's reports so far, in order of arrival: `{visit, cookies, local,
    /// session, indexeddb, caches, workers, window, broadcast, planted}`.
    pub fn isolation_reports(&self) -> Vec<serde_json::Value> {
        self.state.probe.reports()
    }

    /// When true, a valid session gets 403 on API and proxy routes.
    pub fn set_forbidden(&self, forbidden: bool) {
        self.state.forbidden.store(forbidden, Ordering::SeqCst);
    }

    /// When true, the session cookie is no longer accepted (as after expiry).
    pub fn expire_sessions(&self, expired: bool) {
        self.state.sessions_expired.store(expired, Ordering::SeqCst);
    }

    /// Sets what `/api/health` answers.
    pub fn set_health(&self, mode: HealthMode) {
        *self
            .state
            .health
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = mode;
    }

    /// Sets how Prometheus errors are answered by the proxy.
    pub fn set_error_style(&self, style: ErrorStyle) {
        *self
            .state
            .error_style
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = style;
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.log.snapshot()
    }

    /// The cookies (name, value) of every datasource proxy request with a valid session,
    /// in order.
    pub fn proxy_cookies(&self) -> Vec<Vec<(String, String)>> {
        self.state
            .proxy_cookies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The page's localStorage as the home page saw it, from the
    /// [`GrafanaFront::PAGE_STATE_COOKIE`] of the last datasource proxy request: an
    /// object of name to value, `None` when no such cookie came.
    pub fn page_local_storage(&self) -> Option<serde_json::Value> {
        let cookies = self.proxy_cookies();
        let (_, raw) = cookies
            .last()?
            .iter()
            .find(|(name, _)| name == Self::PAGE_STATE_COOKIE)?
            .clone();
        let decoded: String = url::form_urlencoded::parse(format!("v={raw}").as_bytes())
            .map(|(_, v)| v.into_owned())
            .next()?;
        serde_json::from_str(&decoded).ok()
    }
}

fn cookies_of(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect()
}

fn has_session(state: &GrafanaState, headers: &HeaderMap) -> bool {
    if state.sessions_expired.load(Ordering::SeqCst) {
        return false;
    }
    let expected = state.cookie_value.expose_secret();
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .any(|(name, value)| name == GRAFANA_SESSION_COOKIE_NAME && value == expected)
}

fn unauthorized() -> Response {
    json_error(
        StatusCode::UNAUTHORIZED,
        json!({"message": "Unauthorized", "messageId": "auth.unauthorized", "statusCode": 401}),
    )
}

fn forbidden() -> Response {
    json_error(
        StatusCode::FORBIDDEN,
        json!({"message": "Permission denied", "messageId": "accesscontrol.unauthorized", "statusCode": 403}),
    )
}

async fn login_page() -> Html<&'static str> {
    Html(
        "<!DOCTYPE html><html><head><title>Grafana</title></head><body>\
         <form id=\"login-form\" action=\"/login\" method=\"post\">\
         <input name=\"user\" autocomplete=\"username\">\
         <input name=\"password\" type=\"password\" autocomplete=\"current-password\">\
         <button type=\"submit\">Log in</button></form></body></html>\n",
    )
}

async fn health(State(state): State<Arc<GrafanaState>>) -> Response {
    let mode = *state.health.lock().unwrap_or_else(PoisonError::into_inner);
    match mode {
        HealthMode::Ok => axum::Json(json!({
            "commit": "test-front",
            "database": "ok",
            "version": GrafanaFront::VERSION,
        }))
        .into_response(),
        HealthMode::Unavailable => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"database": "failing"}),
        ),
        HealthMode::NoVersion => axum::Json(json!({"database": "ok"})).into_response(),
    }
}

async fn datasource_proxy(
    State(state): State<Arc<GrafanaState>>,
    Path((uid, rest)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !has_session(&state, &headers) {
        return unauthorized();
    }
    if state.forbidden.load(Ordering::SeqCst) {
        return forbidden();
    }
    state
        .proxy_cookies
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(cookies_of(&headers));
    if uid == state.datasource_uid && rest == "api/v1/metadata" {
        // Grafana's proxy allows POST only for query, query_range, series, labels and
        // query_exemplars: metadata is a GET.
        if method != Method::GET {
            return json_error(
                StatusCode::FORBIDDEN,
                json!({"message": "non allow-listed POSTs not allowed on proxied Prometheus datasource"}),
            );
        }
        return state.upstream.forward_metadata(uri.query(), &headers).await;
    }
    if uid != state.datasource_uid || rest != "api/v1/query_range" {
        return json_error(
            StatusCode::NOT_FOUND,
            json!({"message": "Data source not found"}),
        );
    }
    if let Some(fault) = state.faults.apply().await {
        return fault;
    }
    let response = state
        .upstream
        .forward_query_range(&state.faults, method, uri.query(), &headers, body)
        .await;
    let style = *state
        .error_style
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if style == ErrorStyle::DsQueryFrame && response.status().is_client_error() {
        return error_frame(response).await;
    }
    response
}

/// Rewrites a Prometheus error answer as an `/api/ds/query`-style error frame.
async fn error_frame(response: Response) -> Response {
    let status = response.status();
    let Ok(bytes) = axum::body::to_bytes(response.into_body(), 1 << 20).await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let text = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
    json_error(
        status,
        json!({"results": {"A": {"error": text, "errorSource": "downstream", "status": status.as_u16()}}}),
    )
}

async fn other_api(State(state): State<Arc<GrafanaState>>, headers: HeaderMap) -> Response {
    if !has_session(&state, &headers) {
        return unauthorized();
    }
    if state.forbidden.load(Ordering::SeqCst) {
        return forbidden();
    }
    json_error(StatusCode::NOT_FOUND, json!({"message": "Not found"}))
}

async fn html_route(State(state): State<Arc<GrafanaState>>, headers: HeaderMap) -> Response {
    if !has_session(&state, &headers) {
        return (StatusCode::FOUND, [(LOCATION, "/login")]).into_response();
    }
    if state.page_stalled.load(Ordering::SeqCst) {
        return crate::stall::dripping(
            "text/html; charset=utf-8",
            b"<!DOCTYPE html><html><head><title>Home - Grafana</title></head><body>",
            std::time::Duration::from_millis(500),
        );
    }
    if state.probe.is_on() {
        return state.probe.page();
    }
    (
        StatusCode::OK,
        [(CONTENT_TYPE, "text/html; charset=utf-8")],
        "<!DOCTYPE html><html><head><title>Home - Grafana</title>\
         <script>document.cookie = \"test_front_page_state=\" + \
         encodeURIComponent(JSON.stringify(Object.fromEntries(Object.entries(localStorage)))) + \
         \"; path=/; SameSite=Lax\";</script></head>\
         <body><div id=\"reactRoot\">Grafana test front</div></body></html>\n",
    )
        .into_response()
}
