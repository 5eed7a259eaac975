//! A request run as a `fetch` inside the Grafana page (so the session cookies apply),
//! and its body handed to the connector in bounded chunks, one script answer each (see
//! `script.rs`; run through WebDriver or the page's DevTools session, `page_scripts.rs`),
//! under the call's total byte bound and time limit.

use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::time::Instant;
use url::Url;

use super::browser::CommandFailure;
use super::page_scripts::{PageScripts, Started};
use super::script;
use crate::ConnectorError;
use crate::prometheus::RawResponse;

/// Extra time the WebDriver script limit gives a page fetch beyond its own limit.
pub(super) const SCRIPT_MARGIN: Duration = Duration::from_secs(5);

/// The most body bytes one script answer carries: 1 MiB (1.33 MiB as base64).
/// Measured through WebDriver on the 5,000-thread answer (37 MB, `tests/wetech_large.rs`,
/// two runs each): 4.5-5.5 s with 256 KiB chunks, 4.5-4.6 s with 1 MiB, 4.8-9.4 s with
/// 4 MiB. The time is in the bytes crossing, not in the round trips, so 1 MiB keeps them
/// to about 40 for 40 MB while holding little at once in the page and in the connector
/// (see BENCHMARKS.md).
pub(super) const PAGE_CHUNK_BYTES: usize = 1 << 20;

/// The time a cancellation of a read left before its end may take; past it the read
/// ends with the session, which the call closes next.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// One request from the page.
#[derive(Debug, Clone)]
pub(super) struct PageRequest<'a> {
    /// The URL, on the page's origin.
    pub(super) url: &'a Url,
    /// `GET` or `POST`.
    pub(super) method: &'static str,
    /// The request body, if any.
    pub(super) body: Option<String>,
    /// The body's content type, if any.
    pub(super) content_type: Option<&'a str>,
    /// The total bound on the answer's body.
    pub(super) max_bytes: usize,
    /// The time limit of the whole read: the request and every chunk of the body.
    pub(super) timeout: Duration,
}

/// What a page fetch read whole brought back.
#[derive(Debug)]
pub(super) enum Fetched {
    Response(RawResponse),
    Redirect,
    Failed(ConnectorError),
}

/// What opening a page fetch brought back.
#[derive(Debug)]
pub(super) enum Opened<'c> {
    /// An answer whose body waits in the page.
    Response(PageBody<'c>),
    /// A redirect, not followed.
    Redirect,
    /// No answer (time limit, network, declared length over the bound).
    Failed(ConnectorError),
}

/// Why reading a body stopped before its end.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The provider's side: time limit, broken body, total bound.
    Provider(ConnectorError),
    /// The browser's side: the session or a command failed.
    Browser(CommandFailure),
}

/// The body of an answer, held in the page and read chunk by chunk. End every use
/// with [`PageBody::close`], which cancels the read in the page unless it ended.
#[derive(Debug)]
pub(super) struct PageBody<'c> {
    scripts: PageScripts<'c>,
    handle: u64,
    /// The HTTP status.
    pub(super) status: u16,
    /// The `Content-Type` header, when there was one.
    pub(super) content_type: Option<String>,
    max_bytes: usize,
    timeout: Duration,
    deadline: Instant,
    /// The page still holds the read.
    open: bool,
    /// The read of the next chunk, asked for before the last one was read (DevTools
    /// only).
    ahead: Option<Started>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    kind: String,
    #[serde(default)]
    handle: Option<u64>,
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    base64: Option<String>,
    #[serde(default)]
    last: bool,
    #[serde(default)]
    message: Option<String>,
}

fn timeout_error(timeout: Duration) -> ConnectorError {
    ConnectorError::Timeout(format!(
        "no complete answer within {} ms",
        timeout.as_millis()
    ))
}

/// Runs one async page script by `deadline`: its answer, or why there is none.
async fn run_script(
    scripts: PageScripts<'_>,
    script: &str,
    args: Vec<Value>,
    deadline: Instant,
    timeout: Duration,
) -> Result<Answer, ReadError> {
    answer_of(scripts.run_async(script, args, deadline).await, timeout)
}

/// Why a page script of a read with `timeout` failed: a time limit passed (in the
/// page or here) is the provider's, anything else the browser's.
fn read_error(failure: CommandFailure, timeout: Duration) -> ReadError {
    match failure {
        CommandFailure::Timeout(_) => ReadError::Provider(timeout_error(timeout)),
        other => ReadError::Browser(other),
    }
}

/// The answer a page script's outcome carries, or why there is none.
fn answer_of(
    outcome: Result<Value, CommandFailure>,
    timeout: Duration,
) -> Result<Answer, ReadError> {
    let value = outcome.map_err(|f| read_error(f, timeout))?;
    serde_json::from_value(value).map_err(|e| {
        ReadError::Browser(CommandFailure::Other(format!(
            "unreadable fetch answer: {e}"
        )))
    })
}

/// The provider's failure an answer of the page stands for.
fn answer_failure(answer: Answer, max_bytes: usize, timeout: Duration) -> ConnectorError {
    match answer.kind.as_str() {
        "too_large" => ConnectorError::BodyTooLarge { limit: max_bytes },
        "timeout" => timeout_error(timeout),
        _ => ConnectorError::Unreachable(
            answer
                .message
                .unwrap_or_else(|| "the fetch failed".to_owned()),
        ),
    }
}

/// Sends `request` from the page `scripts` run in ([`script::FETCH_OPEN`]). Its body
/// waits in the page to be read with [`PageBody::next`].
pub(super) async fn open<'c>(
    scripts: PageScripts<'c>,
    request: &PageRequest<'_>,
) -> Result<Opened<'c>, CommandFailure> {
    let deadline = Instant::now() + request.timeout + SCRIPT_MARGIN;
    let args = vec![
        json!(request.url.as_str()),
        json!(request.method),
        request.body.clone().map_or(Value::Null, Value::String),
        request.content_type.map_or(Value::Null, |c| json!(c)),
        json!(request.max_bytes),
        json!(u64::try_from(request.timeout.as_millis()).unwrap_or(u64::MAX)),
        json!("same-origin"),
    ];
    let answer =
        match run_script(scripts, script::FETCH_OPEN, args, deadline, request.timeout).await {
            Ok(a) => a,
            Err(ReadError::Provider(e)) => return Ok(Opened::Failed(e)),
            Err(ReadError::Browser(f)) => return Err(f),
        };
    Ok(match (answer.kind.as_str(), answer.handle) {
        ("response", Some(handle)) => Opened::Response(PageBody {
            scripts,
            handle,
            status: answer.status.unwrap_or(0),
            content_type: answer.content_type,
            max_bytes: request.max_bytes,
            timeout: request.timeout,
            deadline,
            open: true,
            ahead: None,
        }),
        ("redirect", _) => Opened::Redirect,
        _ => Opened::Failed(answer_failure(answer, request.max_bytes, request.timeout)),
    })
}

impl PageBody<'_> {
    /// The next chunk of the body ([`script::FETCH_READ`], at most [`PAGE_CHUNK_BYTES`]),
    /// `None` after its end.
    pub(super) async fn next(&mut self) -> Result<Option<Vec<u8>>, ReadError> {
        if !self.open {
            return Ok(None);
        }
        let answer = match self.read().await {
            Ok(answer) => answer,
            Err(e) => {
                self.ahead = None;
                return Err(e);
            }
        };
        if answer.kind != "chunk" || answer.last {
            self.ahead = None;
        }
        if answer.kind != "chunk" {
            // The page dropped the read with this answer.
            self.open = false;
            return Err(ReadError::Provider(answer_failure(
                answer,
                self.max_bytes,
                self.timeout,
            )));
        }
        self.open = !answer.last;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(answer.base64.unwrap_or_default())
            .map_err(|e| {
                ReadError::Browser(CommandFailure::Other(format!("unreadable chunk: {e}")))
            })?;
        Ok(Some(bytes))
    }

    /// The page's answer to the read of the next chunk. Through DevTools the chunk after
    /// it is asked for first, so that its reading and encoding in the page overlap this
    /// one's crossing and folding (two reads in flight; the page runs them in order).
    async fn read(&mut self) -> Result<Answer, ReadError> {
        let args = || vec![json!(self.handle), json!(PAGE_CHUNK_BYTES)];
        let page = match self.scripts {
            PageScripts::DevTools(page) => page,
            PageScripts::WebDriver(_) => {
                let read = script::FETCH_READ;
                return run_script(self.scripts, read, args(), self.deadline, self.timeout).await;
            }
        };
        let current = match self.ahead.take() {
            Some(started) => started,
            None => page
                .start_async(script::FETCH_READ, args(), self.deadline)
                .await
                .map_err(|f| read_error(f, self.timeout))?,
        };
        self.ahead = Some(
            page.start_async(script::FETCH_READ, args(), self.deadline)
                .await
                .map_err(|f| read_error(f, self.timeout))?,
        );
        answer_of(current.value(self.deadline).await, self.timeout)
    }

    /// Reads the rest of the body whole, refusing it past `cap` bytes.
    pub(super) async fn read_whole(&mut self, cap: usize) -> Result<Vec<u8>, ReadError> {
        let mut body = Vec::new();
        while let Some(chunk) = self.next().await? {
            if body.len() + chunk.len() > cap {
                return Err(ReadError::Provider(ConnectorError::BodyTooLarge {
                    limit: cap,
                }));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// Ends the read: a read left before its end is cancelled in the page
    /// ([`script::FETCH_CANCEL`]: the stream cancelled, the request aborted). Best
    /// effort within [`CANCEL_TIMEOUT`]: a page that does not answer loses the read
    /// with the session, which the call closes next.
    pub(super) async fn close(&mut self) {
        self.ahead = None;
        if !self.open {
            return;
        }
        self.open = false;
        let _ = self
            .scripts
            .run(
                script::FETCH_CANCEL,
                vec![json!(self.handle)],
                CANCEL_TIMEOUT,
            )
            .await;
    }
}

/// One request from the page with its whole body (for small answers: health, the
/// session's user, metadata), at most `request.max_bytes`.
pub(super) async fn page_fetch(
    scripts: PageScripts<'_>,
    request: &PageRequest<'_>,
) -> Result<Fetched, CommandFailure> {
    let mut body = match open(scripts, request).await? {
        Opened::Response(body) => body,
        Opened::Redirect => return Ok(Fetched::Redirect),
        Opened::Failed(e) => return Ok(Fetched::Failed(e)),
    };
    let read = body.read_whole(request.max_bytes).await;
    body.close().await;
    match read {
        Ok(bytes) => Ok(Fetched::Response(RawResponse::new(
            body.status,
            body.content_type.take(),
            bytes,
        ))),
        Err(ReadError::Provider(e)) => Ok(Fetched::Failed(e)),
        Err(ReadError::Browser(f)) => Err(f),
    }
}
