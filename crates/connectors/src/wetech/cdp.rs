//! A minimal client of the browser's own DevTools endpoint: one WebSocket to the
//! browser target (the `webSocketDebuggerUrl` of `/json/version` at the loopback
//! `debuggerAddress` ChromeDriver reports), commands answered by id. A task reads the
//! connection and hands each answer to the command waiting for it, so several commands
//! may be in flight at once (a page read asks for its next chunk while the last one
//! crosses). Events are dropped, but for two that end a page's session: its page
//! crashed (`Inspector.targetCrashed`, once `Inspector.enable` was sent in the session)
//! or the session ended (`Target.detachedFromTarget`); the commands waiting in that
//! session then learn that the page is lost, instead of waiting out their limit.
//!
//! The warm browser needs it for what a page's DevTools session may not do:
//! ChromeDriver's `goog/cdp/execute` runs on the current page's session, where
//! `Target.createBrowserContext` answers "Not allowed". Every call needs it for reading
//! a body out of the page without ChromeDriver (`page_scripts.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, oneshot};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How a DevTools command failed.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CdpError {
    /// The endpoint could not be reached, or the connection broke.
    #[error("the browser's DevTools endpoint is gone: {0}")]
    Lost(String),
    /// No answer within the command's limit.
    #[error("the browser's DevTools endpoint did not answer {0} in time")]
    Timeout(&'static str),
    /// The browser refused the command.
    #[error("the browser refused {method}: {message}")]
    Refused {
        /// The command.
        method: &'static str,
        /// The browser's message.
        message: String,
    },
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A command waiting for its answer.
#[derive(Debug)]
struct Waiter {
    tell: oneshot::Sender<Result<Value, CdpError>>,
    method: &'static str,
    /// The page session it was sent in, if any.
    session: Option<String>,
}

/// The commands waiting for their answers, by id.
#[derive(Debug, Default)]
struct Waiting {
    next: u64,
    answers: HashMap<u64, Waiter>,
    /// Why the connection ended, once it has: no command waits after that.
    ended: Option<String>,
}

type Shared = Arc<StdMutex<Waiting>>;

fn waiting(shared: &Shared) -> std::sync::MutexGuard<'_, Waiting> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The connection to the browser target.
#[derive(Debug)]
pub(crate) struct Cdp {
    sink: Mutex<SplitSink<Socket, Message>>,
    waiting: Shared,
    reader: JoinHandle<()>,
}

impl Drop for Cdp {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// A command sent, its answer not yet read. Dropped, the answer is dropped when it
/// comes.
#[derive(Debug)]
pub(crate) struct Pending {
    id: u64,
    method: &'static str,
    answer: oneshot::Receiver<Result<Value, CdpError>>,
    waiting: Shared,
}

impl Drop for Pending {
    fn drop(&mut self) {
        waiting(&self.waiting).answers.remove(&self.id);
    }
}

impl Pending {
    /// The command's `result`, waiting at most `limit`.
    pub(crate) async fn answer(mut self, limit: Duration) -> Result<Value, CdpError> {
        match tokio::time::timeout(limit, &mut self.answer).await {
            Err(_) => Err(CdpError::Timeout(self.method)),
            Ok(Err(_)) => Err(CdpError::Lost(
                waiting(&self.waiting)
                    .ended
                    .clone()
                    .unwrap_or_else(|| "the connection closed".to_owned()),
            )),
            Ok(Ok(answered)) => answered,
        }
    }
}

impl Cdp {
    /// Connects to the browser at `debugger_address` (`host:port`, loopback), within
    /// `limit`.
    pub(crate) async fn connect(debugger_address: &str, limit: Duration) -> Result<Self, CdpError> {
        let lost = |e: String| CdpError::Lost(e);
        let connect = async {
            let http = crate::tls::client_builder()
                .map_err(|e| lost(e.to_string()))?
                .no_proxy()
                .build()
                .map_err(|e| lost(e.to_string()))?;
            let version: Value = http
                .get(format!("http://{debugger_address}/json/version"))
                .send()
                .await
                .map_err(|e| lost(e.to_string()))?
                .json()
                .await
                .map_err(|e| lost(e.to_string()))?;
            let url = version
                .get("webSocketDebuggerUrl")
                .and_then(Value::as_str)
                .filter(|u| u.starts_with("ws://"))
                .ok_or_else(|| lost("no webSocketDebuggerUrl in /json/version".to_owned()))?;
            let (socket, _) = tokio_tungstenite::connect_async(url)
                .await
                .map_err(|e| lost(e.to_string()))?;
            Ok(Cdp::over(socket))
        };
        tokio::time::timeout(limit, connect)
            .await
            .map_err(|_| CdpError::Timeout("the connection"))?
    }

    /// The client of a connected socket: its answers read by a task of their own.
    fn over(socket: Socket) -> Self {
        let (sink, stream) = socket.split();
        let waiting = Shared::default();
        let reader = tokio::spawn(read_answers(stream, waiting.clone()));
        Cdp {
            sink: Mutex::new(sink),
            waiting,
            reader,
        }
    }

    /// Sends `method` with `params` to the browser target and waits at most `limit`
    /// for its answer's `result`.
    pub(crate) async fn send(
        &self,
        method: &'static str,
        params: Value,
        limit: Duration,
    ) -> Result<Value, CdpError> {
        self.send_in(None, method, params, limit).await
    }

    /// As [`Cdp::send`], to the target a flattened session (`Target.attachToTarget`
    /// with `flatten`) is attached to when `session` is given.
    pub(crate) async fn send_in(
        &self,
        session: Option<&str>,
        method: &'static str,
        params: Value,
        limit: Duration,
    ) -> Result<Value, CdpError> {
        let started = tokio::time::Instant::now();
        let pending = tokio::time::timeout(limit, self.start(session, method, params))
            .await
            .map_err(|_| CdpError::Timeout(method))??;
        pending
            .answer(limit.saturating_sub(started.elapsed()))
            .await
    }

    /// Sends `method` with `params` (to `session`'s target when given) without waiting
    /// for its answer.
    pub(crate) async fn start(
        &self,
        session: Option<&str>,
        method: &'static str,
        params: Value,
    ) -> Result<Pending, CdpError> {
        let (tell, answer) = oneshot::channel();
        let id = {
            let mut waiting = waiting(&self.waiting);
            if let Some(why) = &waiting.ended {
                return Err(CdpError::Lost(why.clone()));
            }
            waiting.next += 1;
            let id = waiting.next;
            let session = session.map(str::to_owned);
            waiting.answers.insert(
                id,
                Waiter {
                    tell,
                    method,
                    session,
                },
            );
            id
        };
        // From here the entry is removed with the pending command, whatever happens.
        let pending = Pending {
            id,
            method,
            answer,
            waiting: self.waiting.clone(),
        };
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        self.sink
            .lock()
            .await
            .send(Message::text(message.to_string()))
            .await
            .map_err(|e| CdpError::Lost(e.to_string()))?;
        Ok(pending)
    }
}

/// Reads the connection to its end, handing each answer to the command that waits for
/// it; at the end every waiting command learns why.
async fn read_answers(mut stream: SplitStream<Socket>, shared: Shared) {
    let why = loop {
        let text = match stream.next().await {
            None => break "the connection closed".to_owned(),
            Some(Err(e)) => break e.to_string(),
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(_)) => continue,
        };
        let Ok(mut message) = serde_json::from_str::<Value>(text.as_str()) else {
            continue;
        };
        let Some(id) = message.get("id").and_then(Value::as_u64) else {
            if let Some((session, why)) = session_ended(&message) {
                let ended: Vec<Waiter> = {
                    let mut state = waiting(&shared);
                    let ids: Vec<u64> = state
                        .answers
                        .iter()
                        .filter(|(_, w)| w.session.as_deref() == Some(session))
                        .map(|(id, _)| *id)
                        .collect();
                    ids.iter()
                        .filter_map(|id| state.answers.remove(id))
                        .collect()
                };
                for waiter in ended {
                    let _ = waiter.tell.send(Err(CdpError::Lost(why.to_owned())));
                }
            }
            continue;
        };
        let Some(waiter) = waiting(&shared).answers.remove(&id) else {
            continue;
        };
        let answered = match message.get("error") {
            Some(error) => Err(CdpError::Refused {
                method: waiter.method,
                message: error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error")
                    .to_owned(),
            }),
            None => Ok(message
                .get_mut("result")
                .map(Value::take)
                .unwrap_or(Value::Null)),
        };
        let _ = waiter.tell.send(answered);
    };
    let mut state = waiting(&shared);
    state.ended = Some(why);
    // Dropping the senders wakes every waiting command.
    state.answers.clear();
}

/// The page session an event ends, and why: its page crashed, or it was detached.
fn session_ended(event: &Value) -> Option<(&str, &'static str)> {
    match event.get("method").and_then(Value::as_str)? {
        "Inspector.targetCrashed" => Some((
            event.get("sessionId").and_then(Value::as_str)?,
            "the page crashed",
        )),
        "Target.detachedFromTarget" => Some((
            event.pointer("/params/sessionId").and_then(Value::as_str)?,
            "the page's DevTools session ended",
        )),
        _ => None,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use tokio::net::TcpListener;

    const LIMIT: Duration = Duration::from_secs(5);

    /// A client connected to a loopback WebSocket peer that `peer` plays.
    pub(in crate::wetech) async fn connected<F, Fut>(peer: F) -> Cdp
    where
        F: FnOnce(WebSocketStream<TcpStream>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            peer(tokio_tungstenite::accept_async(stream).await.unwrap()).await;
        });
        let (socket, _) = tokio_tungstenite::connect_async(format!("ws://{address}"))
            .await
            .unwrap();
        Cdp::over(socket)
    }

    /// The next text message the peer received, parsed.
    pub(in crate::wetech) async fn received(peer: &mut WebSocketStream<TcpStream>) -> Value {
        loop {
            if let Message::Text(text) = peer.next().await.unwrap().unwrap() {
                return serde_json::from_str(text.as_str()).unwrap();
            }
        }
    }

    /// Sends `message` from the peer.
    pub(in crate::wetech) async fn say(peer: &mut WebSocketStream<TcpStream>, message: Value) {
        peer.send(Message::text(message.to_string())).await.unwrap();
    }

    #[tokio::test]
    async fn answers_in_any_order_reach_their_commands_and_events_are_dropped() {
        let cdp = connected(|mut peer| async move {
            let mut asked = Vec::new();
            for _ in 0..3 {
                asked.push(received(&mut peer).await);
            }
            say(&mut peer, json!({"method": "Target.targetCreated", "params": {}})).await;
            say(&mut peer, json!({"id": 999, "result": {"stray": true}})).await;
            for message in asked.iter().rev() {
                let id = message["id"].clone();
                let answer = match message["method"].as_str().unwrap() {
                    "Fails.now" => json!({"id": id, "error": {"message": "no such thing"}}),
                    _ => json!({"id": id, "result": {"echo": message["params"], "session": message["sessionId"]}}),
                };
                say(&mut peer, answer).await;
            }
            // Held open until the client is done.
            let _ = peer.next().await;
        })
        .await;
        let first = cdp.start(None, "A.first", json!({"n": 1})).await.unwrap();
        let second = cdp
            .start(Some("S1"), "B.second", json!({"n": 2}))
            .await
            .unwrap();
        let third = cdp.start(None, "Fails.now", json!({})).await.unwrap();
        match third.answer(LIMIT).await {
            Err(CdpError::Refused { method, message }) => {
                assert_eq!(method, "Fails.now");
                assert_eq!(message, "no such thing");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        let second = second.answer(LIMIT).await.unwrap();
        assert_eq!(second, json!({"echo": {"n": 2}, "session": "S1"}));
        let first = first.answer(LIMIT).await.unwrap();
        assert_eq!(first, json!({"echo": {"n": 1}, "session": null}));
        assert!(waiting(&cdp.waiting).answers.is_empty());
    }

    #[tokio::test]
    async fn a_command_given_up_leaves_nothing_waiting_and_its_late_answer_is_dropped() {
        let cdp = connected(|mut peer| async move {
            let slow = received(&mut peer).await;
            let next = received(&mut peer).await;
            say(
                &mut peer,
                json!({"id": slow["id"], "result": {"late": true}}),
            )
            .await;
            say(
                &mut peer,
                json!({"id": next["id"], "result": {"next": true}}),
            )
            .await;
            let _ = peer.next().await;
        })
        .await;
        let slow = cdp.start(None, "Slow.one", json!({})).await.unwrap();
        assert!(matches!(
            slow.answer(Duration::from_millis(1)).await,
            Err(CdpError::Timeout("Slow.one"))
        ));
        assert!(waiting(&cdp.waiting).answers.is_empty());
        let next = cdp.send("Next.one", json!({}), LIMIT).await.unwrap();
        assert_eq!(next, json!({"next": true}));
    }

    #[tokio::test]
    async fn a_crashed_or_detached_page_ends_the_commands_of_its_session_only() {
        let cdp = connected(|mut peer| async move {
            let mut asked = Vec::new();
            for _ in 0..3 {
                asked.push(received(&mut peer).await);
            }
            say(
                &mut peer,
                json!({"method": "Inspector.targetCrashed", "params": {}, "sessionId": "S1"}),
            )
            .await;
            let detached =
                json!({"method": "Target.detachedFromTarget", "params": {"sessionId": "S2"}});
            say(&mut peer, detached).await;
            say(
                &mut peer,
                json!({"id": asked[2]["id"], "result": {"fine": true}}),
            )
            .await;
            let _ = peer.next().await;
        })
        .await;
        let crashed = cdp
            .start(Some("S1"), "Runtime.callFunctionOn", json!({}))
            .await
            .unwrap();
        let detached = cdp
            .start(Some("S2"), "Runtime.callFunctionOn", json!({}))
            .await
            .unwrap();
        let other = cdp
            .start(Some("S3"), "Runtime.callFunctionOn", json!({}))
            .await
            .unwrap();
        match crashed.answer(LIMIT).await {
            Err(CdpError::Lost(why)) => assert_eq!(why, "the page crashed"),
            other => panic!("expected the page lost, got {other:?}"),
        }
        assert!(matches!(
            detached.answer(LIMIT).await,
            Err(CdpError::Lost(_))
        ));
        assert_eq!(other.answer(LIMIT).await.unwrap(), json!({"fine": true}));
    }

    #[tokio::test]
    async fn a_closed_connection_ends_every_waiting_command_and_refuses_new_ones() {
        let cdp = connected(|mut peer| async move {
            let _ = received(&mut peer).await;
            let _ = received(&mut peer).await;
            peer.close(None).await.unwrap();
        })
        .await;
        let one = cdp.start(None, "One.cmd", json!({})).await.unwrap();
        let two = cdp.start(None, "Two.cmd", json!({})).await.unwrap();
        assert!(matches!(one.answer(LIMIT).await, Err(CdpError::Lost(_))));
        assert!(matches!(two.answer(LIMIT).await, Err(CdpError::Lost(_))));
        assert!(matches!(
            cdp.send("Three.cmd", json!({}), LIMIT).await,
            Err(CdpError::Lost(_))
        ));
    }
}
