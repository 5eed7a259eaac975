//! Recordings of real Prometheus `query_range` exchanges, and two loopback servers that
//! stand where Prometheus stands: [`RecordingProxy`] forwards to a real Prometheus and
//! keeps every exchange; [`RecordedPrometheus`] answers from recordings only, so a
//! replay needs no Prometheus at all. Both are test/replay infrastructure, clearly not a
//! provider.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::TestSupportError;
use crate::front::{RequestLog, Server, Upstream};

/// The path both servers serve.
pub const QUERY_RANGE_PATH: &str = "/api/v1/query_range";

/// One recorded `query_range` exchange: the request parameters as the client sent them,
/// and the real server's status, content type and body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recording {
    /// Request parameters (query string and form), sorted by name then value.
    pub params: Vec<(String, String)>,
    /// HTTP status the real server answered.
    pub status: u16,
    /// Its `Content-Type`.
    pub content_type: String,
    /// Its body, verbatim.
    pub body: String,
    /// `sha256:` + hex of the body, so an edited recording is detected.
    pub body_sha256: String,
}

/// A set of recordings from one real server, labeled as recordings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordingSet {
    /// Says what this is: recordings, of which server, made by which command.
    pub label: String,
    /// The recordings, in the order they were made (duplicates removed).
    pub recordings: Vec<Recording>,
}

impl RecordingSet {
    /// Reads a set from JSON and checks every body against its digest.
    pub fn from_json(text: &str) -> Result<Self, TestSupportError> {
        let set: RecordingSet = serde_json::from_str(text)
            .map_err(|e| TestSupportError::Front(format!("invalid recording set: {e}")))?;
        for r in &set.recordings {
            if body_digest(r.body.as_bytes()) != r.body_sha256 {
                return Err(TestSupportError::Front(format!(
                    "recording for {:?} does not match its body digest",
                    r.params
                )));
            }
        }
        Ok(set)
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> Result<String, TestSupportError> {
        serde_json::to_string_pretty(self)
            .map(|s| s + "\n")
            .map_err(|e| TestSupportError::Front(e.to_string()))
    }
}

fn body_digest(body: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(body)))
}

fn sorted_params(request_params: &[(String, String)]) -> Vec<(String, String)> {
    let mut params = request_params.to_vec();
    params.sort();
    params
}

async fn read_params(request: Request) -> Result<Vec<(String, String)>, Response> {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .map_err(|_| (StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n").into_response())?;
    let mut params: Vec<(String, String)> = parts
        .uri
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    if parts.method == Method::POST {
        params.extend(url::form_urlencoded::parse(&bytes).into_owned());
    }
    Ok(sorted_params(&params))
}

fn form_body(params: &[(String, String)]) -> Bytes {
    let mut ser = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in params {
        ser.append_pair(k, v);
    }
    Bytes::from(ser.finish())
}

type Store = Arc<Mutex<Vec<Recording>>>;
/// Sorted request parameters: the key a recording is found by.
type Params = Vec<(String, String)>;
type Misses = Arc<Mutex<Vec<Params>>>;
type Recorded = Arc<BTreeMap<Params, Recording>>;

/// Forwards `query_range` to a real Prometheus and records every exchange.
#[derive(Debug)]
pub struct RecordingProxy {
    server: Server,
    store: Store,
}

impl RecordingProxy {
    /// Starts a proxy on a free loopback port in front of `prometheus_url`.
    pub async fn start(prometheus_url: &str) -> Result<Self, TestSupportError> {
        let upstream = Upstream::new(prometheus_url)?;
        let store: Store = Arc::default();
        let state = (upstream, store.clone());
        let router = Router::new()
            .route(
                QUERY_RANGE_PATH,
                any(
                    |State((upstream, store)): State<(Upstream, Store)>, request: Request| async move {
                        let params = match read_params(request).await {
                            Ok(p) => p,
                            Err(r) => return r,
                        };
                        let mut headers = axum::http::HeaderMap::new();
                        headers.insert(
                            CONTENT_TYPE,
                            HeaderValue::from_static("application/x-www-form-urlencoded"),
                        );
                        let response = upstream
                            .forward(Method::POST, QUERY_RANGE_PATH, None, &headers, form_body(&params))
                            .await;
                        let (parts, body) = response.into_parts();
                        let Ok(bytes) = axum::body::to_bytes(body, 256 << 20).await else {
                            return StatusCode::BAD_GATEWAY.into_response();
                        };
                        let content_type = parts
                            .headers
                            .get(CONTENT_TYPE)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("application/json")
                            .to_owned();
                        let recording = Recording {
                            params,
                            status: parts.status.as_u16(),
                            content_type,
                            body: String::from_utf8_lossy(&bytes).into_owned(),
                            body_sha256: body_digest(&bytes),
                        };
                        let mut store = store.lock().unwrap_or_else(PoisonError::into_inner);
                        if !store.iter().any(|r| r.params == recording.params) {
                            store.push(recording);
                        }
                        Response::from_parts(parts, axum::body::Body::from(bytes))
                    },
                ),
            )
            .route("/-/ready", get(|| async { "Prometheus recording proxy is Ready.\n" }))
            .with_state(state);
        let server = Server::start(router, RequestLog::default()).await?;
        Ok(RecordingProxy { server, store })
    }

    /// The proxy's base URL (stands where the Prometheus URL would).
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// What was recorded so far, labeled.
    pub fn recordings(&self, label: impl Into<String>) -> RecordingSet {
        RecordingSet {
            label: label.into(),
            recordings: self
                .store
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }
}

/// Answers `query_range` from recordings only: a request whose parameters were recorded
/// gets the recorded status, content type and body; any other gets 404 with a
/// Prometheus-style error saying there is no recording for it.
#[derive(Debug)]
pub struct RecordedPrometheus {
    server: Server,
    misses: Misses,
}

impl RecordedPrometheus {
    /// Starts the server on a free loopback port.
    pub async fn start(set: RecordingSet) -> Result<Self, TestSupportError> {
        let map: Recorded = Arc::new(
            set.recordings
                .into_iter()
                .map(|r| (r.params.clone(), r))
                .collect(),
        );
        let misses: Misses = Arc::default();
        let state = (map, misses.clone());
        type S = (Recorded, Misses);
        let router = Router::new()
            .route(
                QUERY_RANGE_PATH,
                any(
                    |State((map, misses)): State<S>, request: Request| async move {
                        let params = match read_params(request).await {
                            Ok(p) => p,
                            Err(r) => return r,
                        };
                        match map.get(&params) {
                            Some(r) => {
                                let status = StatusCode::from_u16(r.status)
                                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                                let ct = HeaderValue::from_str(&r.content_type)
                                    .unwrap_or(HeaderValue::from_static("application/json"));
                                (status, [(CONTENT_TYPE, ct)], r.body.clone()).into_response()
                            }
                            None => {
                                misses
                                    .lock()
                                    .unwrap_or_else(PoisonError::into_inner)
                                    .push(params);
                                (
                                StatusCode::NOT_FOUND,
                                axum::Json(serde_json::json!({
                                    "status": "error",
                                    "errorType": "replay_miss",
                                    "error": "no recording for this request: re-record the fixtures"
                                })),
                            )
                                .into_response()
                            }
                        }
                    },
                ),
            )
            .route(
                "/-/ready",
                get(|| async { "Recorded Prometheus is Ready.\n" }),
            )
            .with_state(state);
        let server = Server::start(router, RequestLog::default()).await?;
        Ok(RecordedPrometheus { server, misses })
    }

    /// The server's base URL (stands where the Prometheus URL would).
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Requests that had no recording.
    pub fn misses(&self) -> Vec<Params> {
        self.misses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
