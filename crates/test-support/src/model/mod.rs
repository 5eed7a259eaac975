//! The scripted model, an OpenAI-compatible `POST /v1/chat/completions` server on a
//! free loopback port: [`ScriptedModel`] answers every request from a [`Script`] as a
//! server-sent-event stream (text, or tool calls with their arguments split over
//! chunks), and records every request with who spoke and what was answered. It needs no
//! network and no model weights: a client such as OpenCode, configured with an
//! `@ai-sdk/openai-compatible` provider at [`ScriptedModel::base_url`], runs its real
//! agent loop against it. The crate's README shows a whole exchange.

mod reply;
mod request;
mod script;

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

pub use reply::{Reply, ToolCall};
pub use request::{ChatRequest, MadeCall, Message, OfferedTool, Role, ToolOutcome};
pub use script::{Play, Script, Speaker, Steps};

use crate::TestSupportError;
use crate::front::{RequestLog, Server, json_error};

/// One request and how it was answered.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The request.
    pub request: ChatRequest,
    /// Who the script answered as.
    pub speaker: Speaker,
    /// The reply (a [`Reply::Refuse`] went out as HTTP 400).
    pub reply: Reply,
}

#[derive(Debug)]
struct ModelState {
    script: Script,
    exchanges: Mutex<Vec<Exchange>>,
    next_id: AtomicU64,
}

/// A running scripted model; stopped on drop.
#[derive(Debug)]
pub struct ScriptedModel {
    server: Server,
    state: Arc<ModelState>,
}

impl ScriptedModel {
    /// The provider id of [`ScriptedModel::opencode_config`].
    pub const PROVIDER_ID: &'static str = "scripted";
    /// The model id it serves.
    pub const MODEL_ID: &'static str = "scripted-diagnosis";

    /// Starts the model on a free loopback port, answering from `script`.
    pub async fn start(script: Script) -> Result<Self, TestSupportError> {
        let state = Arc::new(ModelState {
            script,
            exchanges: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
        });
        let router = Router::new()
            .route("/v1/chat/completions", post(complete))
            .with_state(state.clone());
        let server = Server::start(router, RequestLog::default()).await?;
        Ok(Self { server, state })
    }

    /// The base URL of the API, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.url())
    }

    /// Every request so far with its answer, in arrival order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.state
            .exchanges
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The OpenCode configuration keys that make this model the default: `provider`
    /// (an `@ai-sdk/openai-compatible` provider [`Self::PROVIDER_ID`] at
    /// [`Self::base_url`] whose API key comes from OpenCode's environment variable
    /// `api_key_env`) and `model`.
    pub fn opencode_config(&self, api_key_env: &str) -> Value {
        json!({
            "provider": {Self::PROVIDER_ID: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted model",
                "options": {"baseURL": self.base_url(), "apiKey": format!("{{env:{api_key_env}}}")},
                "models": {Self::MODEL_ID: {"name": Self::MODEL_ID}},
            }},
            "model": format!("{}/{}", Self::PROVIDER_ID, Self::MODEL_ID),
        })
    }
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The text of a panic payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a play panicked".to_owned())
}

fn refusal(message: &str) -> Response {
    json_error(
        StatusCode::BAD_REQUEST,
        json!({"error": {"message": message, "type": "invalid_request_error"}}),
    )
}

async fn complete(
    State(state): State<Arc<ModelState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return refusal("the body is not JSON");
    };
    let Some(request) = ChatRequest::parse(
        body,
        header(&headers, "x-session-id"),
        header(&headers, "x-parent-session-id"),
    ) else {
        return refusal("the body is not a chat-completions request");
    };
    // A play that panics (a test's assertion) refuses the request instead of dropping
    // the connection, which a client would retry.
    let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        state.script.answer(&request)
    }));
    let (speaker, reply) = match answered {
        Ok(answer) => answer,
        Err(payload) => (Speaker::Unknown, Reply::refuse(panic_text(&*payload))),
    };
    let id = format!("chatcmpl-{}", state.next_id.fetch_add(1, Ordering::SeqCst));
    state
        .exchanges
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Exchange {
            request,
            speaker,
            reply: reply.clone(),
        });
    if let Reply::Refuse(message) = &reply {
        return refusal(message);
    }
    let events = reply::stream_payloads(&reply, ScriptedModel::MODEL_ID, &id)
        .into_iter()
        .map(|payload| Ok::<_, Infallible>(Event::default().data(payload)));
    Sse::new(futures::stream::iter(events)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_streamed_request_is_answered_as_sse_and_recorded() {
        let model =
            ScriptedModel::start(Script::new().agent("a", "You are `a`", |_: &ChatRequest| {
                Reply::call("c1", "read", json!({"filePath": "x"}))
            }))
            .await
            .unwrap();
        let answer = reqwest::Client::new()
            .post(format!("{}/chat/completions", model.base_url()))
            .header("x-session-id", "ses_1")
            .json(
                &json!({"model": ScriptedModel::MODEL_ID, "stream": true, "messages": [
                {"role": "system", "content": "You are `a`."},
                {"role": "user", "content": "go"}],
                "tools": [{"type": "function", "function": {"name": "read"}}]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        assert!(
            answer.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let text = answer.text().await.unwrap();
        assert!(text.contains("\"tool_calls\""), "{text}");
        assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
        let exchanges = model.exchanges();
        assert_eq!(exchanges.len(), 1);
        assert_eq!(exchanges[0].speaker, Speaker::Agent("a".into()));
        assert_eq!(exchanges[0].request.session_id(), Some("ses_1"));
    }

    #[tokio::test]
    async fn a_request_the_script_cannot_answer_is_refused_with_400() {
        let model = ScriptedModel::start(Script::new().agent(
            "a",
            "You are `a`",
            |_: &ChatRequest| -> Reply { panic!("unexpected") },
        ))
        .await
        .unwrap();
        let client = reqwest::Client::new();
        let url = format!("{}/chat/completions", model.base_url());
        for system in ["You are `a`.", "You are `b`."] {
            let answer = client
                .post(&url)
                .json(
                    &json!({"stream": true, "messages": [{"role": "system", "content": system}],
                              "tools": [{"type": "function", "function": {"name": "read"}}]}),
                )
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status(), 400);
        }
        let reasons: Vec<_> = model.exchanges().into_iter().map(|e| e.reply).collect();
        assert_eq!(reasons[0], Reply::refuse("unexpected"));
        assert!(matches!(reasons[1], Reply::Refuse(_)));
    }
}
