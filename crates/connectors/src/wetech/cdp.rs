//! A minimal client of the browser's own DevTools endpoint: one WebSocket to the
//! browser target (the `webSocketDebuggerUrl` of `/json/version` at the loopback
//! `debuggerAddress` ChromeDriver reports), commands sent one at a time and answered
//! by id. The warm browser needs it for what a page's DevTools session may not do:
//! ChromeDriver's `goog/cdp/execute` runs on the current page's session, where
//! `Target.createBrowserContext` answers "Not allowed".

use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How a DevTools command failed.
#[derive(Debug, thiserror::Error)]
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

/// The connection to the browser target, one command at a time.
#[derive(Debug)]
pub(crate) struct Cdp {
    socket: Mutex<(Socket, u64)>,
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
            Ok(Cdp {
                socket: Mutex::new((socket, 0)),
            })
        };
        tokio::time::timeout(limit, connect)
            .await
            .map_err(|_| CdpError::Timeout("the connection"))?
    }

    /// Sends `method` with `params` to the browser target and waits at most `limit`
    /// for its answer's `result`. Answers to commands given up on earlier (a call cut
    /// off while it waited) are skipped by their id; events are not subscribed to.
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
        let exchange = async {
            let mut guard = self.socket.lock().await;
            let (socket, next) = &mut *guard;
            *next += 1;
            let id = *next;
            let mut message = json!({"id": id, "method": method, "params": params});
            if let Some(session) = session {
                message["sessionId"] = json!(session);
            }
            socket
                .send(Message::text(message.to_string()))
                .await
                .map_err(|e| CdpError::Lost(e.to_string()))?;
            loop {
                let frame = socket
                    .next()
                    .await
                    .ok_or_else(|| CdpError::Lost("the connection closed".to_owned()))?
                    .map_err(|e| CdpError::Lost(e.to_string()))?;
                let Message::Text(text) = frame else {
                    continue;
                };
                let Ok(mut answer) = serde_json::from_str::<Value>(text.as_str()) else {
                    continue;
                };
                if answer.get("id").and_then(Value::as_u64) != Some(id) {
                    continue;
                }
                if let Some(error) = answer.get("error") {
                    let message = error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown error")
                        .to_owned();
                    return Err(CdpError::Refused { method, message });
                }
                return Ok(answer
                    .get_mut("result")
                    .map(Value::take)
                    .unwrap_or(Value::Null));
            }
        };
        tokio::time::timeout(limit, exchange)
            .await
            .map_err(|_| CdpError::Timeout(method))?
    }
}
