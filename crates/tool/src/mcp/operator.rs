//! The operator listener of a package's server over HTTP (`--operator ADDR`): where the
//! runtime delivers each session's envelopes (`POST` [`ENVELOPES_PATH`]), apart from the
//! agent's port. The network can let only the runtime (and monitoring) reach it, and no
//! flood of the agent's port delays a delivery: it has its own socket and connection
//! bound. The same `Host` rule as the agent's listener applies (the bound address's
//! forms and the `--allow-host` names); a request that carries any `Origin` is refused,
//! since no browser page has anything to send here. Every request leaves its request
//! record, as on the agent's listener.

use std::net::IpAddr;
use std::sync::Arc;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use evidence_policy::envelope::MAX_ENVELOPE_BYTES;

use crate::mcp::connection::{Route, Routed, Seen, read_body};
use crate::mcp::host_check::check_host_and_origin;
use crate::mcp::session::{DeliveryAnswer, ENVELOPES_PATH};

/// The delivery of one envelope (its body) to the session store.
pub(crate) type Deliver = dyn Fn(&[u8]) -> DeliveryAnswer + Send + Sync;

/// Writes one request record.
pub(crate) type Record = dyn Fn(Seen) + Send + Sync;

/// The routes of the operator listener.
#[derive(Clone)]
pub(crate) struct OperatorRoute {
    /// Takes one delivered envelope (the body) and answers it; blocking work.
    pub(crate) deliver: Arc<Deliver>,
    /// Writes the request record of each request.
    pub(crate) record: Arc<Record>,
    /// The allowed `Host` values.
    pub(crate) hosts: Vec<String>,
}

impl Route for OperatorRoute {
    async fn route(&self, request: Request<Incoming>, _peer: IpAddr) -> Routed {
        if let Err(refused) = check_host_and_origin(&request, &self.hosts, &[]) {
            return Routed::refused(StatusCode::FORBIDDEN, refused);
        }
        if request.uri().path() == ENVELOPES_PATH {
            return deliver_envelope(request, &self.deliver).await;
        }
        Routed::refused(StatusCode::NOT_FOUND, "not_found")
    }

    fn record(&self, seen: Seen) {
        (self.record)(seen);
    }
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
