//! The Manus test front: a session bootstrap in front of a real Prometheus, one per
//! target (`vida`, `monica`).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;

use crate::front::{FaultControl, RecordedRequest, RequestLog, Server, Upstream, json_error};
use crate::{Fixture, Prometheus, TestSupportError};

/// **Test front** standing in for one Manus target. It adds only what Prometheus lacks:
/// a session bootstrap (`POST` [`ManusFront::LOGIN_PATH`] with a JSON
/// `{"username","password"}` answers `{"session": TOKEN, "expiresIn": 3600}`; wrong
/// credentials answer 401) and a session check on queries (header
/// [`ManusFront::SESSION_HEADER`]; missing, unknown or expired sessions answer 401). It
/// forwards [`ManusFront::QUERY_RANGE_PATH`] to the real Prometheus with status and body
/// passed through.
#[derive(Debug)]
pub struct ManusFront {
    server: Server,
    state: Arc<ManusState>,
    log: RequestLog,
}

#[derive(Debug)]
struct ManusState {
    target: String,
    upstream: Upstream,
    username: SecretString,
    password: SecretString,
    sessions: Mutex<HashSet<String>>,
    issued: AtomicU64,
    forbidden: AtomicBool,
    faults: FaultControl,
    login_faults: FaultControl,
}

#[derive(Deserialize)]
struct Login {
    username: String,
    password: String,
}

impl ManusFront {
    /// The session bootstrap path (`POST`, JSON body).
    pub const LOGIN_PATH: &'static str = "/api/v1/session";
    /// The query path (`GET` or `POST` form), with the session header.
    pub const QUERY_RANGE_PATH: &'static str = "/prometheus/api/v1/query_range";
    /// The metadata path beside it (`GET`), with the session header; forwarded to
    /// Prometheus' global `/api/v1/metadata`.
    pub const METADATA_PATH: &'static str = "/prometheus/api/v1/metadata";
    /// The header that carries the session token on queries.
    pub const SESSION_HEADER: &'static str = "x-manus-session";

    /// Starts a front for `target` on a free loopback port, forwarding to the Prometheus
    /// at `prometheus_url`, accepting exactly `username` and `password`.
    pub async fn start(
        target: &str,
        prometheus_url: &str,
        username: SecretString,
        password: SecretString,
    ) -> Result<Self, TestSupportError> {
        let state = Arc::new(ManusState {
            target: target.to_owned(),
            upstream: Upstream::new(prometheus_url)?,
            username,
            password,
            sessions: Mutex::new(HashSet::new()),
            issued: AtomicU64::new(0),
            forbidden: AtomicBool::new(false),
            faults: FaultControl::default(),
            login_faults: FaultControl::default(),
        });
        let router = Router::new()
            .route(Self::LOGIN_PATH, post(login))
            .route(Self::QUERY_RANGE_PATH, get(query_range).post(query_range))
            .route(Self::METADATA_PATH, get(metadata))
            .with_state(state.clone());
        let log = RequestLog::default();
        let server = Server::start(router, log.clone()).await?;
        Ok(ManusFront { server, state, log })
    }

    /// The target name this front serves.
    pub fn target(&self) -> &str {
        &self.state.target
    }

    /// The base URL, `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        self.server.url()
    }

    /// The address the front listens on.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// Fault modes of the query route.
    pub fn faults(&self) -> &FaultControl {
        &self.state.faults
    }

    /// Fault modes of the session bootstrap route.
    pub fn login_faults(&self) -> &FaultControl {
        &self.state.login_faults
    }

    /// When true, queries with a valid session get 403.
    pub fn set_forbidden(&self, forbidden: bool) {
        self.state.forbidden.store(forbidden, Ordering::SeqCst);
    }

    /// Invalidates every session issued so far (queries with them get 401).
    pub fn expire_sessions(&self) {
        self.state
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// How many sessions were issued so far.
    pub fn sessions_issued(&self) -> u64 {
        self.state.issued.load(Ordering::SeqCst)
    }

    /// Every request received so far (login bodies are JSON and never recorded).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.log.snapshot()
    }
}

async fn login(State(state): State<Arc<ManusState>>, body: Bytes) -> Response {
    if let Some(fault) = state.login_faults.apply().await {
        return fault;
    }
    let Ok(login) = serde_json::from_slice::<Login>(&body) else {
        return json_error(
            StatusCode::BAD_REQUEST,
            json!({"error": "bad_request", "message": "expected a JSON body with username and password"}),
        );
    };
    let ok = login.username.as_bytes() == state.username.expose_secret().as_bytes()
        && login.password.as_bytes() == state.password.expose_secret().as_bytes();
    if !ok {
        return json_error(
            StatusCode::UNAUTHORIZED,
            json!({"error": "invalid_credentials", "message": "invalid username or password"}),
        );
    }
    let token = hex::encode(rand::random::<[u8; 24]>());
    state
        .sessions
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(token.clone());
    state.issued.fetch_add(1, Ordering::SeqCst);
    axum::Json(json!({"session": token, "expiresIn": 3600})).into_response()
}

/// The session check and the forbidden switch, shared by both routes.
fn refusal(state: &ManusState, headers: &HeaderMap) -> Option<Response> {
    let valid = headers
        .get(ManusFront::SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|token| {
            state
                .sessions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(token)
        });
    if !valid {
        return Some(json_error(
            StatusCode::UNAUTHORIZED,
            json!({"error": "session_invalid", "message": "session is missing, expired or invalid; log in again"}),
        ));
    }
    if state.forbidden.load(Ordering::SeqCst) {
        return Some(json_error(
            StatusCode::FORBIDDEN,
            json!({"error": "forbidden", "message": format!("user may not query target {}", state.target)}),
        ));
    }
    None
}

async fn metadata(State(state): State<Arc<ManusState>>, uri: Uri, headers: HeaderMap) -> Response {
    if let Some(refused) = refusal(&state, &headers) {
        return refused;
    }
    state.upstream.forward_metadata(uri.query(), &headers).await
}

async fn query_range(
    State(state): State<Arc<ManusState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = refusal(&state, &headers) {
        return refused;
    }
    if let Some(fault) = state.faults.apply().await {
        return fault;
    }
    state
        .upstream
        .forward_query_range(&state.faults, method, uri.query(), &headers, body)
        .await
}

/// One Manus target: its real Prometheus and its test front.
#[derive(Debug)]
pub struct ManusTarget {
    /// The real Prometheus holding this target's fixture.
    pub prometheus: Prometheus,
    /// The test front in front of it.
    pub front: ManusFront,
}

/// Both Manus targets, `vida` and `monica`: two real Prometheus servers with different
/// data ([`Fixture::Vida`], [`Fixture::Monica`]), each behind its own [`ManusFront`]
/// with the same credentials, so each target has its own base URL.
#[derive(Debug)]
pub struct ManusTargets {
    /// The `vida` target.
    pub vida: ManusTarget,
    /// The `monica` target.
    pub monica: ManusTarget,
}

impl ManusTargets {
    /// Starts both Prometheus servers (concurrently) and both fronts.
    pub async fn start(
        username: &SecretString,
        password: &SecretString,
    ) -> Result<Self, TestSupportError> {
        let (vida, monica) = tokio::join!(
            Prometheus::start(Fixture::Vida),
            Prometheus::start(Fixture::Monica)
        );
        let (vida, monica) = (vida?, monica?);
        let vida_front =
            ManusFront::start("vida", &vida.url(), username.clone(), password.clone()).await?;
        let monica_front =
            ManusFront::start("monica", &monica.url(), username.clone(), password.clone()).await?;
        Ok(ManusTargets {
            vida: ManusTarget {
                prometheus: vida,
                front: vida_front,
            },
            monica: ManusTarget {
                prometheus: monica,
                front: monica_front,
            },
        })
    }

    /// The target by name (`vida` or `monica`).
    pub fn target(&self, name: &str) -> Option<&ManusTarget> {
        match name {
            "vida" => Some(&self.vida),
            "monica" => Some(&self.monica),
            _ => None,
        }
    }
}
