//! The warm browsers of a long-running server: a Chromium (with its ChromeDriver and
//! WebDriver session, started as a one-shot call starts its own) kept between calls,
//! each call served in a browser context of its own (`context.rs`).
//!
//! A call leases an idle browser, or starts one when none is idle (nor being readied),
//! so calls that run at once (`limits.concurrency` above 1) never share a browser, let
//! alone a context: a WebDriver session drives one page at a time. At lease, contexts an
//! earlier call left (cut off before it disposed of its own) are disposed of, which also
//! proves the browser answers; one that does not is ended and another started. At the
//! end of a call, once its own context is disposed of, the browser is ended when the
//! call lost it or it has served [`BrowserReuse::max_calls`] calls; otherwise it is
//! readied for the next call in the background (after the result has left): its memory
//! checked (over [`BrowserReuse::max_pss_mib`] it is ended) and the next call's context
//! made, the session switched to its page (ChromeDriver takes most of a context's cost
//! there) and that page opened on Grafana's health page, the first page a call opens
//! (no storage state is in the context: the call adds it), then it goes back to the
//! idle list. Ending a browser closes
//! its session, stops ChromeDriver and every Chromium process, removes its profile.
//! [`WarmBrowsers::close`] ends them all (a server told to stop); a browser still
//! leased, or being readied, then is ended when that is done.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fantoccini::Client;
use fantoccini::wd::{TimeoutConfiguration, WindowHandle};
use tokio::sync::Notify;
use url::Url;

use super::browser::{Browser, BrowserError, CLOSE_TIMEOUT};
use super::cdp::Cdp;
use super::config::BrowserConfig;
use super::context::{CONTEXT_COMMAND_LIMIT, CallContext, sweep};
use super::memory::tree_pss_mib;

/// When a warm browser is replaced by a fresh one, besides when it died or stopped
/// answering: after a number of calls, or when its memory passes a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrowserReuse {
    /// The calls one browser serves before it is replaced.
    pub max_calls: u32,
    /// The summed proportional set size (`Pss`) of the browser's process tree, in MiB,
    /// past which it is replaced after the call that found it.
    pub max_pss_mib: u32,
}

impl BrowserReuse {
    /// The default number of calls a browser serves: 1,000.
    pub const DEFAULT_MAX_CALLS: u32 = 1000;
    /// The default memory bound: 2,048 MiB of `Pss` (a fresh headless Chromium 156
    /// holds about 400 MiB; a 166 MB answer took it to about 710 MiB).
    pub const DEFAULT_MAX_PSS_MIB: u32 = 2048;
}

impl Default for BrowserReuse {
    fn default() -> Self {
        BrowserReuse {
            max_calls: Self::DEFAULT_MAX_CALLS,
            max_pss_mib: Self::DEFAULT_MAX_PSS_MIB,
        }
    }
}

/// What decides whether a browser serves another call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// The last call found it dead or not answering.
    pub(crate) lost: bool,
    /// The server is stopping.
    pub(crate) closed: bool,
    /// The calls it has served.
    pub(crate) calls: u32,
    /// The summed `Pss` of its process tree, when measured.
    pub(crate) pss_mib: Option<u64>,
}

impl Verdict {
    /// Whether the browser may serve another call under `reuse`: never once lost, once
    /// the server is stopping, at its call bound or over its memory bound.
    pub(crate) fn keeps(self, reuse: BrowserReuse) -> bool {
        !self.lost
            && !self.closed
            && self.calls < reuse.max_calls
            && self
                .pss_mib
                .is_none_or(|mib| mib <= u64::from(reuse.max_pss_mib))
    }
}

/// One warm browser: the running browser, its DevTools connection, the session's own
/// page (where the session waits between calls) and the calls it has served.
#[derive(Debug)]
pub(crate) struct WarmBrowser {
    pub(crate) browser: Browser,
    pub(crate) cdp: Cdp,
    pub(crate) home: WindowHandle,
    /// The next call's context, made when the browser was readied (the session already
    /// on its blank page); no page has been opened in it.
    ready: Option<CallContext>,
    calls: u32,
}

impl WarmBrowser {
    /// The WebDriver session.
    pub(crate) fn client(&self) -> Result<&Client, BrowserError> {
        self.browser.client()
    }

    async fn start(
        config: &BrowserConfig,
        script_timeout: Duration,
    ) -> Result<WarmBrowser, BrowserError> {
        let mut browser = Browser::launch(config, script_timeout).await?;
        match Self::connect(&browser).await {
            Ok((cdp, home)) => Ok(WarmBrowser {
                browser,
                cdp,
                home,
                ready: None,
                calls: 0,
            }),
            Err(e) => {
                let _ = browser.shutdown(CLOSE_TIMEOUT).await;
                Err(e)
            }
        }
    }

    async fn connect(browser: &Browser) -> Result<(Cdp, WindowHandle), BrowserError> {
        let cdp = browser.devtools(CONTEXT_COMMAND_LIMIT).await?;
        let home = browser
            .client()?
            .window()
            .await
            .map_err(|e| BrowserError::Start(format!("the session has no page: {e}")))?;
        Ok((cdp, home))
    }

    /// The context readied for this call, if there is one (then the session is on its
    /// page).
    pub(crate) fn take_ready(&mut self) -> Option<CallContext> {
        self.ready.take()
    }

    /// Ends the browser: the session closed, the driver and every browser process
    /// stopped, the profile removed.
    async fn end(mut self, close_limit: Duration) -> Result<(), String> {
        self.browser.shutdown(close_limit).await
    }
}

/// The warm browsers of one server (see the module documentation).
#[derive(Debug)]
pub(crate) struct WarmBrowsers {
    reuse: BrowserReuse,
    idle: Mutex<Vec<WarmBrowser>>,
    /// Browsers being readied in the background, and the signal each sends when done.
    readying: AtomicUsize,
    readied: Notify,
    closed: AtomicBool,
}

impl WarmBrowsers {
    pub(crate) fn new(reuse: BrowserReuse) -> Self {
        WarmBrowsers {
            reuse,
            idle: Mutex::new(Vec::new()),
            readying: AtomicUsize::new(0),
            readied: Notify::new(),
            closed: AtomicBool::new(false),
        }
    }

    fn take_idle(&self) -> Option<WarmBrowser> {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    fn put_idle(&self, warm: WarmBrowser) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(warm);
    }

    /// An idle browser; when none is idle but one is being readied, waits for it
    /// (at most [`CONTEXT_COMMAND_LIMIT`]).
    async fn next_idle(&self) -> Option<WarmBrowser> {
        let until = tokio::time::Instant::now() + CONTEXT_COMMAND_LIMIT;
        loop {
            let readied = self.readied.notified();
            if let Some(warm) = self.take_idle() {
                return Some(warm);
            }
            if self.readying.load(Ordering::SeqCst) == 0 {
                return None;
            }
            if tokio::time::timeout_at(until, readied).await.is_err() {
                return self.take_idle();
            }
        }
    }

    /// A browser for one call whose page scripts may run `script_timeout`: an idle one
    /// with no context left in it, or a new one.
    pub(crate) async fn lease(
        self: &Arc<Self>,
        config: &BrowserConfig,
        script_timeout: Duration,
    ) -> Result<Lease<'_>, BrowserError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(BrowserError::Start("the server is stopping".to_owned()));
        }
        while let Some(warm) = self.next_idle().await {
            let ready = async {
                let keep = warm.ready.as_ref().map(CallContext::id);
                sweep(&warm.cdp, keep).await?;
                let timeouts = TimeoutConfiguration::new(
                    Some(script_timeout),
                    Some(config.page_load_timeout),
                    Some(Duration::ZERO),
                );
                warm.client()?
                    .update_timeouts(timeouts)
                    .await
                    .map_err(|e| BrowserError::Lost(e.to_string()))
            };
            match ready.await {
                Ok(()) => return Ok(self.leased(warm)),
                // It does not answer: ended, and the next idle one (or a new one) serves.
                Err(_) => {
                    let _ = warm.end(Duration::from_secs(1)).await;
                }
            }
        }
        let warm = WarmBrowser::start(config, script_timeout).await?;
        Ok(self.leased(warm))
    }

    fn leased(self: &Arc<Self>, warm: WarmBrowser) -> Lease<'_> {
        Lease {
            pool: self,
            warm: Some(warm),
        }
    }

    /// Takes a browser back after a call (its context disposed of): ended when the
    /// call lost it, the server is stopping, or it served [`BrowserReuse::max_calls`];
    /// otherwise readied for the next call in the background ([`WarmBrowsers::ready`]).
    async fn give_back(
        self: &Arc<Self>,
        mut warm: WarmBrowser,
        lost: bool,
        close_limit: Duration,
        first_page: Option<Url>,
    ) -> Result<(), String> {
        warm.calls = warm.calls.saturating_add(1);
        let verdict = Verdict {
            lost,
            closed: self.closed.load(Ordering::SeqCst),
            calls: warm.calls,
            pss_mib: None,
        };
        if !verdict.keeps(self.reuse) {
            return warm.end(close_limit).await;
        }
        self.readying.fetch_add(1, Ordering::SeqCst);
        let pool = Arc::clone(self);
        tokio::spawn(async move { pool.ready(warm, first_page).await });
        Ok(())
    }

    /// Readies a browser for the next call: its memory checked, the next call's
    /// context made. A browser over its memory bound, one that cannot make a context
    /// and every browser readied after [`WarmBrowsers::close`] is ended instead.
    async fn ready(self: Arc<Self>, mut warm: WarmBrowser, first_page: Option<Url>) {
        // Reading every process's `smaps_rollup` is file work: off the runtime's threads.
        let pss_mib = match warm.browser.process_id() {
            Some(pid) => tokio::task::spawn_blocking(move || tree_pss_mib(pid))
                .await
                .ok()
                .flatten(),
            None => None,
        };
        let verdict = Verdict {
            lost: false,
            closed: self.closed.load(Ordering::SeqCst),
            calls: warm.calls,
            pss_mib,
        };
        let mut keep = verdict.keeps(self.reuse);
        if keep {
            let opened = match warm.client() {
                Ok(client) => CallContext::open(&warm.cdp, client).await,
                Err(e) => Err(e),
            };
            match opened {
                Ok(context) => {
                    // Best effort: a page that did not load is opened again by the call.
                    if let (Some(url), Ok(client)) = (&first_page, warm.client()) {
                        let _ = client.goto(url.as_str()).await;
                    }
                    warm.ready = Some(context);
                }
                Err(_) => keep = false,
            }
        }
        if keep && !self.closed.load(Ordering::SeqCst) {
            self.put_idle(warm);
        } else {
            let _ = warm.end(CLOSE_TIMEOUT).await;
        }
        self.readying.fetch_sub(1, Ordering::SeqCst);
        self.readied.notify_waiters();
    }

    /// Ends every idle browser and refuses new leases; a browser still leased is ended
    /// when its call ends (or its lease is dropped).
    pub(crate) async fn close(&self) -> Result<(), String> {
        self.closed.store(true, Ordering::SeqCst);
        // Browsers being readied are ended by their readying, which sees the flag;
        // wait for that (bounded), so that none outlives the server.
        let until = tokio::time::Instant::now() + CLOSE_TIMEOUT;
        while self.readying.load(Ordering::SeqCst) > 0 {
            let readied = self.readied.notified();
            if self.readying.load(Ordering::SeqCst) == 0
                || tokio::time::timeout_at(until, readied).await.is_err()
            {
                break;
            }
        }
        let idle: Vec<WarmBrowser> =
            std::mem::take(&mut *self.idle.lock().unwrap_or_else(PoisonError::into_inner));
        let mut problems = Vec::new();
        for warm in idle {
            if let Err(e) = warm.end(CLOSE_TIMEOUT).await {
                problems.push(e);
            }
        }
        match problems.into_iter().next() {
            Some(problem) => Err(problem),
            None => Ok(()),
        }
    }
}

/// A browser leased for one call. [`Lease::release`] ends every use; a lease dropped
/// instead (a call cut off) puts its browser back as it is, and the next lease disposes
/// of the context left in it; after [`WarmBrowsers::close`] the browser is dropped,
/// which stops its driver with every browser process and removes its profile.
#[derive(Debug)]
pub(crate) struct Lease<'p> {
    pool: &'p Arc<WarmBrowsers>,
    warm: Option<WarmBrowser>,
}

impl Lease<'_> {
    /// The leased browser.
    pub(crate) fn warm(&self) -> Result<&WarmBrowser, BrowserError> {
        self.warm
            .as_ref()
            .ok_or_else(|| BrowserError::Lost("the browser was given back".to_owned()))
    }

    /// The leased browser, to take its readied context.
    pub(crate) fn warm_mut(&mut self) -> Result<&mut WarmBrowser, BrowserError> {
        self.warm
            .as_mut()
            .ok_or_else(|| BrowserError::Lost("the browser was given back".to_owned()))
    }

    /// Gives the browser back after the call (see [`WarmBrowsers`]); `lost` when the call
    /// found it dead or not answering. The error says what of an ended browser could not
    /// be cleaned up.
    ///
    /// `first_page` is the page the next call opens first (Grafana's health page): the
    /// readied context's page is opened there already, without any storage state.
    pub(crate) async fn release(
        mut self,
        lost: bool,
        close_limit: Duration,
        first_page: Option<Url>,
    ) -> Result<(), String> {
        match self.warm.take() {
            Some(warm) => {
                self.pool
                    .give_back(warm, lost, close_limit, first_page)
                    .await
            }
            None => Ok(()),
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(warm) = self.warm.take()
            && !self.pool.closed.load(Ordering::SeqCst)
        {
            self.pool.put_idle(warm);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Security rule 60: a browser a call lost, one at its call bound or over its
        /// memory bound, and every browser of a stopping server never serves another
        /// call; any other does.
        #[test]
        fn a_browser_lost_worn_or_of_a_stopping_server_never_serves_again(
            lost in any::<bool>(),
            closed in any::<bool>(),
            calls in 0u32..3000,
            pss_mib in proptest::option::of(0u64..5000),
            max_calls in 1u32..2000,
            max_pss_mib in 1u32..4000,
        ) {
            let reuse = BrowserReuse { max_calls, max_pss_mib };
            let verdict = Verdict { lost, closed, calls, pss_mib };
            let over_memory = pss_mib.is_some_and(|m| m > u64::from(max_pss_mib));
            let expected = !lost && !closed && calls < max_calls && !over_memory;
            prop_assert_eq!(verdict.keeps(reuse), expected);
        }
    }
}
