//! Where the connector's constant page scripts (`script.rs`) run: through WebDriver
//! (ChromeDriver's `execute` and `execute/async`), or in a DevTools session attached to
//! the page over the browser's own DevTools connection (`cdp.rs`), as
//! `Runtime.callFunctionOn` on the page's global object. Either way every value reaches
//! the script as an argument, never spliced into its text, and it runs in the page's
//! main world with the page's cookies.
//!
//! The DevTools session is how a query's body leaves the page: an answer of WebDriver's
//! crosses ChromeDriver, which decodes the browser's answer and encodes it again for its
//! HTTP client, and for a 41.6 MB body that was the largest share of the call's time
//! (BENCHMARKS.md, "Wetech with a warm browser").

use std::time::Duration;

use fantoccini::Client;
use fantoccini::error::CmdError;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::browser::CommandFailure;
use super::cdp::{Cdp, CdpError, Pending};

/// The longest attaching to the page may take.
const ATTACH_LIMIT: Duration = Duration::from_secs(5);

/// The longest sending the command that leaves the page may take.
const DETACH_SEND_LIMIT: Duration = Duration::from_millis(200);

/// A DevTools session attached to one page, with a handle on its global object. It is
/// bound to the document loaded when it was attached: a navigation after that ends
/// the handle (its scripts then fail as [`CommandFailure::Other`]).
#[derive(Debug)]
pub(crate) struct PageSession<'c> {
    cdp: &'c Cdp,
    session: String,
    global: String,
}

impl<'c> PageSession<'c> {
    /// Attaches to the page `target` (a target id: ChromeDriver's window handles are
    /// target ids) and takes a handle on its global object.
    pub(crate) async fn attach(cdp: &'c Cdp, target: &str) -> Result<Self, CommandFailure> {
        let attached = cdp
            .send(
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
                ATTACH_LIMIT,
            )
            .await
            .map_err(|e| failure(&e))?;
        let session = text_at(&attached, &["sessionId"])?;
        let global = cdp
            .send_in(
                Some(&session),
                "Runtime.evaluate",
                json!({"expression": "globalThis", "silent": true}),
                ATTACH_LIMIT,
            )
            .await
            .map_err(|e| failure(&e))?;
        let global = text_at(&global, &["result", "objectId"])?;
        // So that a crash of the page ends the commands waiting in the session.
        cdp.send_in(Some(&session), "Inspector.enable", json!({}), ATTACH_LIMIT)
            .await
            .map_err(|e| failure(&e))?;
        Ok(PageSession {
            cdp,
            session,
            global,
        })
    }

    /// Leaves the page: the session detached (which releases the handle). The command
    /// is sent, its answer not waited for, so that a call's answer never waits on it; a
    /// session left attached ends with its page (the call's context is disposed of, or
    /// the one-shot browser ended, next).
    pub(crate) async fn detach(self) {
        let detach = self.cdp.start(
            None,
            "Target.detachFromTarget",
            json!({"sessionId": self.session}),
        );
        let _ = tokio::time::timeout(DETACH_SEND_LIMIT, detach).await;
    }

    /// Starts `function` (a JavaScript function declaration) with `args` on the page's
    /// global object, sent by `deadline`; its value (that of the promise it returns) is
    /// read from the answer.
    async fn start(
        &self,
        function: &str,
        args: Vec<Value>,
        deadline: Instant,
    ) -> Result<Started, CommandFailure> {
        let arguments: Vec<Value> = args.into_iter().map(|v| json!({"value": v})).collect();
        let start = self.cdp.start(
            Some(&self.session),
            "Runtime.callFunctionOn",
            json!({
                    "functionDeclaration": function,
                    "objectId": self.global,
                    "arguments": arguments,
                    "awaitPromise": true,
                    "returnByValue": true,
                "silent": true,
            }),
        );
        match tokio::time::timeout_at(deadline, start).await {
            Ok(started) => started.map(Started).map_err(|e| failure(&e)),
            Err(_) => Err(late()),
        }
    }

    /// Starts an asynchronous script (see [`PageScripts::run_async`]) without waiting
    /// for it: the page runs it when the scripts started before it have answered
    /// if they wait on one another (as reads of one body do).
    pub(crate) async fn start_async(
        &self,
        script: &str,
        args: Vec<Value>,
        deadline: Instant,
    ) -> Result<Started, CommandFailure> {
        // The same body as WebDriver runs it: `arguments` are the call's, the callback
        // last, its value the promise's.
        let function = format!(
            "function(...args) {{ return new Promise((done) => {{ \
             (function() {{ {script} }}).apply(this, [...args, done]); }}); }}"
        );
        self.start(&function, args, deadline).await
    }
}

/// A page script started in a DevTools session, its value not yet read. Dropped, its
/// answer is dropped when it comes.
#[derive(Debug)]
pub(crate) struct Started(Pending);

impl Started {
    /// The script's value, waiting until `deadline`.
    pub(crate) async fn value(self, deadline: Instant) -> Result<Value, CommandFailure> {
        let limit = deadline.saturating_duration_since(Instant::now());
        let mut answer = self.0.answer(limit).await.map_err(|e| failure(&e))?;
        if let Some(details) = answer.get("exceptionDetails") {
            let message = details
                .pointer("/exception/description")
                .or_else(|| details.get("text"))
                .and_then(Value::as_str)
                .unwrap_or("the script threw");
            return Err(CommandFailure::Other(format!(
                "the page script failed: {message}"
            )));
        }
        Ok(answer
            .pointer_mut("/result/value")
            .map(Value::take)
            .unwrap_or(Value::Null))
    }
}

/// Where a page script runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PageScripts<'c> {
    /// Through WebDriver, in the session's current page.
    WebDriver(&'c Client),
    /// In a DevTools session attached to the page.
    DevTools(&'c PageSession<'c>),
}

impl PageScripts<'_> {
    /// Runs an asynchronous script (its last argument is the callback that answers) and
    /// answers what it passed to the callback, by `deadline`.
    pub(crate) async fn run_async(
        self,
        script: &str,
        args: Vec<Value>,
        deadline: Instant,
    ) -> Result<Value, CommandFailure> {
        match self {
            PageScripts::WebDriver(client) => {
                webdriver_by(deadline, client.execute_async(script, args)).await
            }
            PageScripts::DevTools(page) => {
                let started = page.start_async(script, args, deadline).await?;
                started.value(deadline).await
            }
        }
    }

    /// Runs a synchronous script and answers its value, within `limit`.
    pub(crate) async fn run(
        self,
        script: &str,
        args: Vec<Value>,
        limit: Duration,
    ) -> Result<Value, CommandFailure> {
        let deadline = Instant::now() + limit;
        match self {
            PageScripts::WebDriver(client) => {
                webdriver_by(deadline, client.execute(script, args)).await
            }
            PageScripts::DevTools(page) => {
                let function = format!("function() {{ {script} }}");
                let started = page.start(&function, args, deadline).await?;
                started.value(deadline).await
            }
        }
    }
}

/// A WebDriver command's outcome, by `deadline`.
async fn webdriver_by(
    deadline: Instant,
    command: impl Future<Output = Result<Value, CmdError>>,
) -> Result<Value, CommandFailure> {
    match tokio::time::timeout_at(deadline, command).await {
        Ok(outcome) => outcome.map_err(|e| CommandFailure::of(&e)),
        Err(_) => Err(late()),
    }
}

fn late() -> CommandFailure {
    CommandFailure::Timeout("the page script did not answer in time".to_owned())
}

fn failure(e: &CdpError) -> CommandFailure {
    match e {
        CdpError::Lost(_) => CommandFailure::Lost(e.to_string()),
        CdpError::Timeout(_) => CommandFailure::Timeout(e.to_string()),
        CdpError::Refused { .. } => CommandFailure::Other(e.to_string()),
    }
}

fn text_at(value: &Value, path: &[&str]) -> Result<String, CommandFailure> {
    path.iter()
        .try_fold(value, |v, name| v.get(name))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            CommandFailure::Lost(format!("the browser's answer has no {}", path.join(".")))
        })
}

#[cfg(test)]
mod tests {
    use super::super::cdp::tests::{connected, received, say};
    use super::super::script;
    use super::*;
    use proptest::prelude::*;

    /// Plays the page's DevTools side: attaches, hands out a global object, and answers
    /// the one script call with the message it received (returned by value).
    async fn one_call(args: Vec<Value>) -> Value {
        let cdp = connected(|mut peer| async move {
            let attach = received(&mut peer).await;
            say(
                &mut peer,
                json!({"id": attach["id"], "result": {"sessionId": "S"}}),
            )
            .await;
            let global = received(&mut peer).await;
            let object = json!({"result": {"objectId": "G"}});
            say(&mut peer, json!({"id": global["id"], "result": object})).await;
            let enable = received(&mut peer).await;
            say(&mut peer, json!({"id": enable["id"], "result": {}})).await;
            let call = received(&mut peer).await;
            let value = json!({"result": {"value": call.clone()}});
            say(&mut peer, json!({"id": call["id"], "result": value})).await;
            let _ = futures::StreamExt::next(&mut peer).await;
        })
        .await;
        let page = PageSession::attach(&cdp, "T").await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        PageScripts::DevTools(&page)
            .run_async(script::FETCH_OPEN, args, deadline)
            .await
            .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Through DevTools as through WebDriver, a value reaches a page script only as
        /// an argument: the function sent is the constant script's wrapper whatever the
        /// values hold (quotes, backticks, template and comment openers, line ends).
        #[test]
        fn values_reach_devtools_scripts_only_as_arguments(
            url in "[ -~]{1,60}",
            body in "(\\PC|[`'\"$\\{}\n]){0,80}",
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let args = vec![json!(url), json!("POST"), json!(body)];
            let sent = runtime.block_on(one_call(args.clone()));
            prop_assert_eq!(&sent["method"], "Runtime.callFunctionOn");
            prop_assert_eq!(&sent["sessionId"], "S");
            let params = &sent["params"];
            prop_assert_eq!(&params["objectId"], "G");
            let function = params["functionDeclaration"].as_str().unwrap();
            let expected = format!(
                "function(...args) {{ return new Promise((done) => {{ \
                 (function() {{ {} }}).apply(this, [...args, done]); }}); }}",
                script::FETCH_OPEN
            );
            prop_assert_eq!(function, expected.as_str());
            let carried: Vec<Value> = params["arguments"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["value"].clone())
                .collect();
            prop_assert_eq!(carried, args);
        }
    }
}
