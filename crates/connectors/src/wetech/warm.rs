//! The warm browsers of a long-running server: a Chromium (with its ChromeDriver and
//! WebDriver session, started as a one-shot call starts its own) kept between calls,
//! each call served in a browser context of its own (`context.rs`).
//!
//! A call leases an idle browser, or starts one when none is idle, so calls that run at
//! once (`limits.concurrency` above 1) never share a browser, let alone a context: a
//! WebDriver session drives one page at a time. At lease, contexts an earlier call left
//! (cut off before it disposed of its own) are disposed of, which also proves the
//! browser answers; one that does not is ended and another started. At the end of a
//! call the browser goes back to the idle list unless the call lost it, or it has
//! served [`BrowserReuse::max_calls`] calls, or its process tree holds more than
//! [`BrowserReuse::max_pss_mib`]; then it is ended (session closed, ChromeDriver and
//! every Chromium process stopped, profile removed). [`WarmBrowsers::close`] ends them
//! all (a server told to stop); a browser still leased then is ended when its lease is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use fantoccini::Client;
use fantoccini::wd::{TimeoutConfiguration, WindowHandle};

use super::browser::{Browser, BrowserError, CLOSE_TIMEOUT};
use super::cdp::Cdp;
use super::config::BrowserConfig;
use super::context::{CONTEXT_COMMAND_LIMIT, sweep};
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

/// One warm browser: the running browser, its DevTools connection, the session's own
/// page (where the session waits between calls) and the calls it has served.
#[derive(Debug)]
pub(crate) struct WarmBrowser {
    pub(crate) browser: Browser,
    pub(crate) cdp: Cdp,
    pub(crate) home: WindowHandle,
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
                calls: 0,
            }),
            Err(e) => {
                let _ = browser.shutdown(CLOSE_TIMEOUT).await;
                Err(e)
            }
        }
    }

    async fn connect(browser: &Browser) -> Result<(Cdp, WindowHandle), BrowserError> {
        let address = browser.debugger_address().ok_or_else(|| {
            BrowserError::Start("the session reports no loopback DevTools address".to_owned())
        })?;
        let cdp = Cdp::connect(&address, CONTEXT_COMMAND_LIMIT)
            .await
            .map_err(|e| BrowserError::Start(e.to_string()))?;
        let home = browser
            .client()?
            .window()
            .await
            .map_err(|e| BrowserError::Start(format!("the session has no page: {e}")))?;
        Ok((cdp, home))
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
    closed: AtomicBool,
}

impl WarmBrowsers {
    pub(crate) fn new(reuse: BrowserReuse) -> Self {
        WarmBrowsers {
            reuse,
            idle: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        }
    }

    fn take_idle(&self) -> Option<WarmBrowser> {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    /// A browser for one call whose page scripts may run `script_timeout`: an idle one
    /// with no context left in it, or a new one.
    pub(crate) async fn lease(
        &self,
        config: &BrowserConfig,
        script_timeout: Duration,
    ) -> Result<Lease<'_>, BrowserError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(BrowserError::Start("the server is stopping".to_owned()));
        }
        while let Some(warm) = self.take_idle() {
            let ready = async {
                sweep(&warm.cdp).await?;
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

    fn leased(&self, warm: WarmBrowser) -> Lease<'_> {
        Lease {
            pool: self,
            warm: Some(warm),
        }
    }

    /// Takes a browser back after a call: idle again, or ended when the call lost it,
    /// the server is stopping, or it reached a bound of [`BrowserReuse`].
    async fn give_back(
        &self,
        mut warm: WarmBrowser,
        lost: bool,
        close_limit: Duration,
    ) -> Result<(), String> {
        warm.calls = warm.calls.saturating_add(1);
        let worn = warm.calls >= self.reuse.max_calls
            || warm
                .browser
                .process_id()
                .and_then(tree_pss_mib)
                .is_some_and(|mib| mib > u64::from(self.reuse.max_pss_mib));
        if lost || worn || self.closed.load(Ordering::SeqCst) {
            return warm.end(close_limit).await;
        }
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(warm);
        Ok(())
    }

    /// Ends every idle browser and refuses new leases; a browser still leased is ended
    /// when its call ends (or its lease is dropped).
    pub(crate) async fn close(&self) -> Result<(), String> {
        self.closed.store(true, Ordering::SeqCst);
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
    pool: &'p WarmBrowsers,
    warm: Option<WarmBrowser>,
}

impl Lease<'_> {
    /// The leased browser.
    pub(crate) fn warm(&self) -> Result<&WarmBrowser, BrowserError> {
        self.warm
            .as_ref()
            .ok_or_else(|| BrowserError::Lost("the browser was given back".to_owned()))
    }

    /// Gives the browser back after the call (see [`WarmBrowsers`]); `lost` when the call
    /// found it dead or not answering. The error says what of an ended browser could not
    /// be cleaned up.
    pub(crate) async fn release(mut self, lost: bool, close_limit: Duration) -> Result<(), String> {
        match self.warm.take() {
            Some(warm) => self.pool.give_back(warm, lost, close_limit).await,
            None => Ok(()),
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(warm) = self.warm.take()
            && !self.pool.closed.load(Ordering::SeqCst)
        {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(warm);
        }
    }
}
