//! Deployment configuration of the Wetech connector: where Grafana is,
//! how the browser runs, limits.

use std::path::PathBuf;
use std::time::Duration;

use url::Url;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC};

use crate::HostAllowlist;
use crate::prometheus::ResponseLimits;

/// Characters escaped in the datasource uid path segment: all but unreserved ones.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Chromium arguments of every Wetech session: headless, no GPU, no background
/// networking, component updates, sync or first-run work. A fresh `--user-data-dir` and
/// the `--user-agent` derived from the running browser are added per call.
/// `--no-sandbox` is included because the tool sandbox runs the browser as root, where
/// Chromium refuses to start its own sandbox (it needs an unprivileged user or user
/// namespaces); the tool sandbox is then the isolation boundary, and the browser starts
/// with a cleared environment (no policy key, no secret). Where the tool runs as an
/// unprivileged user, drop it from [`BrowserConfig::args`] to keep Chromium's sandbox.
pub const DEFAULT_CHROMIUM_ARGS: [&str; 11] = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--password-store=basic",
];

/// How the connector reaches a WebDriver server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebDriverEndpoint {
    /// Start this `chromedriver` program for the call, on a free loopback port with
    /// `--allowed-ips=127.0.0.1`, and stop it (and anything it started) afterwards.
    /// This is the tool sandbox's mode.
    Spawn {
        /// Path of `chromedriver`.
        chromedriver: PathBuf,
    },
    /// Use an already running WebDriver server at this URL (for example one started by
    /// test support). The connector still opens and closes its own session.
    Attach {
        /// The WebDriver URL, e.g. `http://127.0.0.1:9515`.
        url: Url,
    },
}

/// The browser side of the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserConfig {
    /// Path of the Chromium program (Debian: `/usr/bin/chromium`).
    pub chromium: PathBuf,
    /// The WebDriver server.
    pub webdriver: WebDriverEndpoint,
    /// Launch arguments ([`DEFAULT_CHROMIUM_ARGS`] by default); `--user-data-dir` and
    /// `--user-agent` are added by the connector and must not be given here.
    pub args: Vec<String>,
    /// Folder in which each call's fresh profile folder is created (the system
    /// temporary folder when `None`). The profile folder is removed after the call.
    pub profile_parent: Option<PathBuf>,
    /// Time allowed to start ChromeDriver and open the browser session. (With an
    /// attached server, a session it creates only after this limit is the server's to
    /// reap; a spawned driver is stopped with everything it started.)
    pub start_timeout: Duration,
    /// Time allowed for one page navigation.
    pub page_load_timeout: Duration,
}

impl BrowserConfig {
    /// Debian's `chromium` and a `chromedriver` spawned per call, with the default
    /// arguments and timeouts (30 s to start, 30 s per page).
    pub fn debian() -> Self {
        BrowserConfig::new(
            "/usr/bin/chromium",
            WebDriverEndpoint::Spawn {
                chromedriver: PathBuf::from("/usr/bin/chromedriver"),
            },
        )
    }

    /// A browser configuration with the default arguments and timeouts.
    pub fn new(chromium: impl Into<PathBuf>, webdriver: WebDriverEndpoint) -> Self {
        BrowserConfig {
            chromium: chromium.into(),
            webdriver,
            args: DEFAULT_CHROMIUM_ARGS
                .iter()
                .map(|a| (*a).to_owned())
                .collect(),
            profile_parent: None,
            start_timeout: Duration::from_secs(30),
            page_load_timeout: Duration::from_secs(30),
        }
    }

    /// Creates each call's profile folder inside `parent`.
    pub fn with_profile_parent(mut self, parent: impl Into<PathBuf>) -> Self {
        self.profile_parent = Some(parent.into());
        self
    }
}

/// The Wetech connector's deployment configuration. Nothing here comes from the model.
#[derive(Debug, Clone, PartialEq)]
pub struct WetechConfig {
    /// The Grafana base URL (origin plus an optional sub-path), from deployment
    /// configuration.
    pub grafana_url: Url,
    /// The package's network allowlist. A Grafana URL whose host is not listed is
    /// refused before the browser starts.
    pub allowlist: HostAllowlist,
    /// The page opened with the session cookies to prove the session (`/` by default):
    /// a redirect to the login page there is an `authentication` failure.
    pub landing_path: String,
    /// The browser.
    pub browser: BrowserConfig,
    /// Body cap and time limit of the query.
    pub limits: ResponseLimits,
    /// Prometheus' server-side evaluation `timeout`. Every query sends one: this value
    /// when set (capped at `limits.timeout` and at what is left of the call's deadline),
    /// otherwise the shorter of those two minus a small
    /// margin (see [`ResponseLimits::evaluation_timeout`](crate::ResponseLimits::evaluation_timeout)).
    pub evaluation_timeout: Option<Duration>,
}

impl WetechConfig {
    /// A configuration for Grafana at `grafana_url` (checked against `allowlist` before
    /// every call), with default limits. The datasource comes with each locked request
    /// (the trusted policy names it).
    /// How many series the evidence keeps comes from the trusted policy
    /// (`max_series_kept`).
    pub fn new(grafana_url: Url, allowlist: HostAllowlist, browser: BrowserConfig) -> Self {
        WetechConfig {
            grafana_url,
            allowlist,
            landing_path: "/".to_owned(),
            browser,
            limits: ResponseLimits::default(),
            evaluation_timeout: None,
        }
    }

    /// Replaces the query limits.
    pub fn with_limits(mut self, limits: ResponseLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The Grafana URL of `path` (joined below the base URL's own path).
    pub(crate) fn url_of(&self, path: &str) -> Result<Url, url::ParseError> {
        let mut base = self.grafana_url.clone();
        if !base.path().ends_with('/') {
            let p = format!("{}/", base.path());
            base.set_path(&p);
        }
        base.join(path.trim_start_matches('/'))
    }

    /// The `query_range` URL of datasource `uid` through Grafana's datasource proxy.
    pub(crate) fn query_range_url(&self, uid: &str) -> Result<Url, url::ParseError> {
        let uid: String = percent_encoding::utf8_percent_encode(uid, SEGMENT).collect();
        self.url_of(&format!(
            "api/datasources/proxy/uid/{uid}/api/v1/query_range"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_stay_below_the_base_path() {
        let c = WetechConfig::new(
            Url::parse("https://g.example/grafana").unwrap(),
            HostAllowlist::new(["g.example"]).unwrap(),
            BrowserConfig::debian(),
        );
        assert_eq!(
            c.query_range_url("prom uid-1").unwrap().as_str(),
            "https://g.example/grafana/api/datasources/proxy/uid/prom%20uid-1/api/v1/query_range"
        );
        assert_eq!(
            c.url_of("/").unwrap().as_str(),
            "https://g.example/grafana/"
        );
        assert_eq!(
            c.url_of("api/health").unwrap().as_str(),
            "https://g.example/grafana/api/health"
        );
    }
}
