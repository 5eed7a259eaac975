//! The operator listener of a package's server over HTTP (`--operator ADDR`): where the
//! runtime delivers each session's envelopes (`POST` [`ENVELOPES_PATH`]), and where
//! operators ask `GET /healthz` (the process serves: `200`), `GET /readyz` (`200` when
//! every check of [`crate::readiness`] passes, else `503` naming the failing checks in
//! JSON) and `GET /metrics` (the Prometheus text exposition of [`crate::metrics`]),
//! apart from the agent's port. The network can let only the runtime (and monitoring) reach it, and no
//! flood of the agent's port delays a delivery: it has its own socket and connection
//! bound. The same `Host` rule as the agent's listener applies (the bound address's
//! forms and the `--allow-host` names); a request that carries any `Origin` is refused,
//! since no browser page has anything to send here. Every request leaves its request
//! record, as on the agent's listener.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use evidence_policy::envelope::MAX_ENVELOPE_BYTES;

use crate::mcp::connection::{Answer, Route, Routed, Seen, read_body};
use crate::mcp::host_check::check_host_and_origin;
use crate::mcp::listen::ENVELOPES_PATH;
use crate::mcp::session::DeliveryAnswer;

/// The delivery of one envelope (its body) to the session store.
pub(crate) type Deliver = dyn Fn(&[u8]) -> DeliveryAnswer + Send + Sync;

/// Writes one request record.
pub(crate) type Record = dyn Fn(Seen) + Send + Sync;

/// Runs the readiness checks: each check's name and outcome, and the failures'
/// reasons; blocking work.
pub(crate) type Ready = dyn Fn() -> (Vec<(&'static str, bool)>, Vec<String>) + Send + Sync;

/// The path of the liveness answer.
pub const HEALTHZ_PATH: &str = "/healthz";
/// The path of the readiness answer.
pub const READYZ_PATH: &str = "/readyz";
/// The path of the metrics.
pub const METRICS_PATH: &str = "/metrics";

/// The routes of the operator listener.
#[derive(Clone)]
pub(crate) struct OperatorRoute {
    /// Takes one delivered envelope (the body) and answers it; blocking work.
    pub(crate) deliver: Arc<Deliver>,
    /// Writes the request record of each request.
    pub(crate) record: Arc<Record>,
    /// The allowed `Host` values.
    pub(crate) hosts: Vec<String>,
    /// The readiness checks.
    pub(crate) ready: Arc<Ready>,
    /// The package served, as metrics name it.
    pub(crate) package: Arc<str>,
}

impl OperatorRoute {
    /// Runs the readiness checks off the async workers, reports them as metrics and
    /// their failures on stderr; the failing checks' names.
    async fn failing(&self) -> Vec<&'static str> {
        let ready = self.ready.clone();
        let Ok((checks, why)) = tokio::task::spawn_blocking(move || ready()).await else {
            return vec!["internal"];
        };
        crate::metrics::global().ready(&self.package, &checks);
        for reason in why {
            crate::log::warn(
                "not_ready",
                &format!("{}: not ready: {reason}", self.package),
            );
        }
        checks
            .into_iter()
            .filter(|(_, passed)| !passed)
            .map(|(name, _)| name)
            .collect()
    }
}

impl Route for OperatorRoute {
    async fn route(&self, request: Request<Incoming>, _peer: IpAddr) -> Routed {
        if let Err(refused) = check_host_and_origin(&request, &self.hosts, &[]) {
            return Routed::refused(StatusCode::FORBIDDEN, refused);
        }
        let path = request.uri().path();
        if path == ENVELOPES_PATH {
            return deliver_envelope(request, &self.deliver).await;
        }
        if ![HEALTHZ_PATH, READYZ_PATH, METRICS_PATH].contains(&path) {
            return Routed::refused(StatusCode::NOT_FOUND, "not_found");
        }
        if request.method() != Method::GET {
            return Routed::refused(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
        }
        match path {
            HEALTHZ_PATH => Routed::answered(text(StatusCode::OK, "text/plain", "ok\n".into())),
            READYZ_PATH => {
                let failing = self.failing().await;
                let status = if failing.is_empty() {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                let body = json!({"ready": failing.is_empty(), "failing": failing});
                Routed::answered(text(status, "application/json", body.to_string()))
            }
            _ => {
                // The scrape also refreshes the readiness gauges.
                let _failing = self.failing().await;
                let exposition = crate::metrics::global().encode();
                Routed::answered(text(
                    StatusCode::OK,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    exposition,
                ))
            }
        }
    }

    fn record(&self, seen: Seen) {
        (self.record)(seen);
    }
}

/// An answer of `status` with `body` of `content_type`.
fn text(status: StatusCode, content_type: &'static str, body: String) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

/// Answers a delivery (`POST`, the envelope as the body) with the session store's
/// answer: its status and JSON.
pub(crate) async fn deliver_envelope(request: Request<Incoming>, deliver: &Arc<Deliver>) -> Routed {
    if request.method() != Method::POST {
        return Routed::refused(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    }
    let body = match read_body(request.into_body(), MAX_ENVELOPE_BYTES).await {
        Ok(body) => body,
        Err((status, refused)) => return Routed::refused(status, refused),
    };
    let deliver = deliver.clone();
    let Ok(answer) = tokio::task::spawn_blocking(move || deliver(&body)).await else {
        return Routed::refused(StatusCode::INTERNAL_SERVER_ERROR, "delivery_failed");
    };
    let mut response = Response::new(Full::new(answer.bytes()).boxed());
    *response.status_mut() = answer.status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Routed {
        refused: answer.refused,
        policy_id: answer.policy_id.clone(),
        ..Routed::answered(response)
    }
}
