//! The Clinic test front: a bearer-token check and a cluster-scoped path in front of a
//! real Prometheus.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::get;
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use crate::TestSupportError;
use crate::front::{FaultControl, RecordedRequest, RequestLog, Server, Upstream, json_error};

/// **Test front** standing in for the Clinic API. It adds only what Prometheus lacks:
/// a bearer-token check (401 otherwise) and a cluster-scoped path
/// ([`ClinicFront::QUERY_RANGE_PATH_TEMPLATE`]); it forwards `query_range` to the real
/// Prometheus and passes its status and body through, and a `GET` of the `metadata`
/// path beside it ([`ClinicFront::METADATA_PATH_TEMPLATE`], same token check) to
/// Prometheus' global `/api/v1/metadata`. It does not rewrite the query: the
/// `cluster_id` in the path is recorded for tests to check.
#[derive(Debug)]
pub struct ClinicFront {
    server: Server,
    state: Arc<ClinicState>,
    log: RequestLog,
}

#[derive(Debug)]
struct ClinicState {
    upstream: Upstream,
    token: SecretString,
    forbidden: AtomicBool,
    faults: FaultControl,
}

impl ClinicFront {
    /// The cluster-scoped `query_range` path; `{cluster_id}` is the policy's cluster.
    pub const QUERY_RANGE_PATH_TEMPLATE: &'static str =
        "/api/v1/clusters/{cluster_id}/prometheus/api/v1/query_range";

    /// The `metadata` path beside it (`GET` only).
    pub const METADATA_PATH_TEMPLATE: &'static str =
        "/api/v1/clusters/{cluster_id}/prometheus/api/v1/metadata";

    /// Starts the front on a free loopback port, forwarding to the Prometheus at
    /// `prometheus_url`, accepting `Authorization: Bearer <token>`.
    pub async fn start(
        prometheus_url: &str,
        token: SecretString,
    ) -> Result<Self, TestSupportError> {
        let state = Arc::new(ClinicState {
            upstream: Upstream::new(prometheus_url)?,
            token,
            forbidden: AtomicBool::new(false),
            faults: FaultControl::default(),
        });
        let router = Router::new()
            .route(
                Self::QUERY_RANGE_PATH_TEMPLATE,
                get(query_range).post(query_range),
            )
            .route(Self::METADATA_PATH_TEMPLATE, get(metadata))
            .with_state(state.clone());
        let log = RequestLog::default();
        let server = Server::start(router, log.clone()).await?;
        Ok(ClinicFront { server, state, log })
    }

    /// The base URL, `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        self.server.url()
    }

    /// The address the front listens on.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The full `query_range` URL for a cluster.
    pub fn query_range_url(&self, cluster_id: &str) -> String {
        format!(
            "{}{}",
            self.base_url(),
            Self::QUERY_RANGE_PATH_TEMPLATE.replace("{cluster_id}", cluster_id)
        )
    }

    /// Fault modes of the `query_range` route.
    pub fn faults(&self) -> &FaultControl {
        &self.state.faults
    }

    /// When true, a valid token gets 403 (the token may not read the cluster).
    pub fn set_forbidden(&self, forbidden: bool) {
        self.state.forbidden.store(forbidden, Ordering::SeqCst);
    }

    /// Every request received and answered so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.log.snapshot()
    }

    /// How many requests arrived so far, also those still unanswered (a stalled one).
    pub fn arrived(&self) -> usize {
        self.log.arrived()
    }
}

/// The token check and the forbidden switch, shared by both routes.
fn refusal(state: &ClinicState, headers: &HeaderMap, cluster_id: &str) -> Option<Response> {
    let expected = format!("Bearer {}", state.token.expose_secret());
    let authorized = headers
        .get(AUTHORIZATION)
        .is_some_and(|v| v.as_bytes() == expected.as_bytes());
    if !authorized {
        return Some(json_error(
            StatusCode::UNAUTHORIZED,
            json!({"code": 401, "message": "missing or invalid bearer token"}),
        ));
    }
    if state.forbidden.load(Ordering::SeqCst) {
        return Some(json_error(
            StatusCode::FORBIDDEN,
            json!({"code": 403, "message": format!("token may not read cluster {cluster_id}")}),
        ));
    }
    None
}

async fn metadata(
    State(state): State<Arc<ClinicState>>,
    Path(cluster_id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refusal(&state, &headers, &cluster_id) {
        return refused;
    }
    state.upstream.forward_metadata(uri.query(), &headers).await
}

async fn query_range(
    State(state): State<Arc<ClinicState>>,
    Path(cluster_id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = refusal(&state, &headers, &cluster_id) {
        return refused;
    }
    if let Some(fault) = state.faults.apply_to(&body).await {
        return fault;
    }
    state
        .upstream
        .forward_query_range(&state.faults, method, uri.query(), &headers, body)
        .await
}
