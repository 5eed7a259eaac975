//! A browser context of one call in the warm browser: created over the browser's
//! DevTools endpoint (`Target.createBrowserContext`, incognito-like: its own cookies,
//! storage, cache and service workers), one page in it (`Target.createTarget`), the
//! WebDriver session switched to that page (ChromeDriver's window handles are target
//! ids), and disposed of (`Target.disposeBrowserContext`, which closes its pages) before
//! the call's result leaves. A context a call left behind (its future dropped at its
//! deadline) is swept before the next call starts.

use std::time::Duration;

use fantoccini::Client;
use fantoccini::wd::WindowHandle;
use serde_json::{Value, json};

use super::browser::{BrowserError, CommandFailure};
use super::cdp::{Cdp, CdpError};

/// The longest a DevTools command of a context may take.
pub(crate) const CONTEXT_COMMAND_LIMIT: Duration = Duration::from_secs(5);

fn lost(e: &CdpError) -> BrowserError {
    BrowserError::Lost(e.to_string())
}

/// One call's browser context, with the page the WebDriver session is switched to.
#[derive(Debug)]
pub(crate) struct CallContext {
    id: String,
}

impl CallContext {
    /// The browser's id of the context.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// A new context with one blank page, the session switched to it.
    pub(crate) async fn open(cdp: &Cdp, client: &Client) -> Result<Self, BrowserError> {
        let created = cdp
            .send(
                "Target.createBrowserContext",
                json!({"disposeOnDetach": true}),
                CONTEXT_COMMAND_LIMIT,
            )
            .await
            .map_err(|e| lost(&e))?;
        let id = text_field(&created, "browserContextId")?;
        let context = CallContext { id };
        let target = cdp
            .send(
                "Target.createTarget",
                json!({"url": "about:blank", "browserContextId": context.id}),
                CONTEXT_COMMAND_LIMIT,
            )
            .await
            .map_err(|e| lost(&e))?;
        let target = text_field(&target, "targetId")?;
        client
            .switch_to_window(WindowHandle::try_from(target).map_err(|e| {
                BrowserError::Lost(format!("the new page has no usable handle: {e}"))
            })?)
            .await
            .map_err(|e| match CommandFailure::of(&e) {
                CommandFailure::Lost(m) | CommandFailure::Other(m) | CommandFailure::Timeout(m) => {
                    BrowserError::Lost(format!("cannot switch to the call's page: {m}"))
                }
                CommandFailure::Navigation(m) => BrowserError::Lost(m),
            })?;
        Ok(context)
    }

    /// Disposes of the context and everything in it (pages, cookies, storage, cache,
    /// service workers), then switches the session back to `home` (the session's own
    /// blank page in the default context, which no call uses).
    pub(crate) async fn dispose(
        self,
        cdp: &Cdp,
        client: &Client,
        home: &WindowHandle,
    ) -> Result<(), BrowserError> {
        cdp.send(
            "Target.disposeBrowserContext",
            json!({"browserContextId": self.id}),
            CONTEXT_COMMAND_LIMIT,
        )
        .await
        .map_err(|e| lost(&e))?;
        client
            .switch_to_window(home.clone())
            .await
            .map_err(|e| BrowserError::Lost(format!("cannot return to the home page: {e}")))
    }
}

/// Disposes of every browser context but the default one and `keep` (a context
/// readied for the next call): what a call cut off before its own disposal left.
/// Answers how many there were.
pub(crate) async fn sweep(cdp: &Cdp, keep: Option<&str>) -> Result<usize, BrowserError> {
    let listed = cdp
        .send(
            "Target.getBrowserContexts",
            json!({}),
            CONTEXT_COMMAND_LIMIT,
        )
        .await
        .map_err(|e| lost(&e))?;
    let ids: Vec<String> = listed
        .get("browserContextIds")
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(Value::as_str)
                .filter(|id| Some(*id) != keep)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for id in &ids {
        cdp.send(
            "Target.disposeBrowserContext",
            json!({"browserContextId": id}),
            CONTEXT_COMMAND_LIMIT,
        )
        .await
        .map_err(|e| lost(&e))?;
    }
    Ok(ids.len())
}

fn text_field(value: &Value, name: &str) -> Result<String, BrowserError> {
    value
        .get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| BrowserError::Lost(format!("the browser's answer has no {name}")))
}
