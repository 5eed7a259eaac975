//! One browser per call: a fresh profile, ChromeDriver (spawned or attached), a
//! WebDriver session whose User-Agent matches the running Chromium, and a shutdown that
//! always closes the session, stops what was started and removes the profile.

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::error::{CmdError, ErrorStatus, NewSessionError};
use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tempfile::TempDir;

use super::cdp::Cdp;
use super::config::{BrowserConfig, WebDriverEndpoint};

/// The User-Agent of a Chromium with this major version, in Chrome's reduced form
/// (`Chrome/<major>.0.0.0`), as the desktop browser on Linux sends it. Unlike the headless
/// default it does not say `HeadlessChrome`, and its major version is the one the
/// browser's own client hints (`navigator.userAgentData.brands`) report.
pub fn user_agent_for(major: u32) -> String {
    format!(
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
         Chrome/{major}.0.0.0 Safari/537.36"
    )
}

/// Why the browser could not serve the call. Both are `browser_runtime` failures.
#[derive(Debug)]
pub(crate) enum BrowserError {
    /// ChromeDriver or Chromium did not start.
    Start(String),
    /// The browser or its driver died or stopped answering during the call.
    Lost(String),
}

/// How a WebDriver command failed.
#[derive(Debug)]
pub(crate) enum CommandFailure {
    /// The page could not load the URL (`net::ERR_...`).
    Navigation(String),
    /// A WebDriver time limit passed.
    Timeout(String),
    /// The session, the browser or the driver is gone.
    Lost(String),
    /// Anything else the driver refused.
    Other(String),
}

impl CommandFailure {
    pub(crate) fn of(err: &CmdError) -> Self {
        let message = err.to_string();
        match err {
            CmdError::Standard(w) => match w.error {
                ErrorStatus::Timeout | ErrorStatus::ScriptTimeout => {
                    CommandFailure::Timeout(message)
                }
                ErrorStatus::InvalidSessionId | ErrorStatus::NoSuchWindow => {
                    CommandFailure::Lost(message)
                }
                ErrorStatus::UnknownError if w.message.contains("net::ERR_") => {
                    CommandFailure::Navigation(message)
                }
                ErrorStatus::UnknownError
                    if ["not reachable", "disconnected", "crash", "session deleted"]
                        .iter()
                        .any(|m| w.message.contains(m)) =>
                {
                    CommandFailure::Lost(message)
                }
                _ => CommandFailure::Other(message),
            },
            CmdError::Failed(_) | CmdError::FailedC(_) | CmdError::Lost(_) => {
                CommandFailure::Lost(message)
            }
            _ => CommandFailure::Other(message),
        }
    }
}

/// The version in `chromium --version` output (`Chromium 156.0.8078.108 built on ...`):
/// the first word of four dot-separated numbers.
pub(crate) fn parse_version(output: &str) -> Option<String> {
    output
        .split_whitespace()
        .find(|w| {
            w.split('.').count() == 4
                && w.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_owned)
}

/// The major of a version string such as `156.0.8078.108`.
pub(crate) fn major_of(version: &str) -> Option<u32> {
    version.split('.').next()?.parse().ok()
}

/// The longest wait for the WebDriver session to close.
pub(crate) const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// The whole environment of every process this connector starts (ChromeDriver, and
/// through it Chromium; the `--version` probe): nothing of the tool sandbox's own
/// environment, which holds the policy keys and the injected secrets, only a search path
/// and a home inside the call's own profile folder.
const CHILD_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A command for a child process with a cleared environment (see [`CHILD_PATH`]).
fn child_command(program: &Path, home: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program);
    command
        .env_clear()
        .env("PATH", CHILD_PATH)
        .env("HOME", home)
        .env("TMPDIR", home)
        .env("LANG", "C.UTF-8");
    command
}

/// Asks the browser program for its version (`chromium --version`; Debian's wrapper
/// prints a harmless warning on stderr, which is ignored).
async fn program_version(chromium: &Path, home: &Path, limit: Duration) -> Result<String, String> {
    let run = child_command(chromium, home)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(limit, run)
        .await
        .map_err(|_| format!("`{} --version` did not answer in time", chromium.display()))?
        .map_err(|e| format!("cannot run `{} --version`: {e}", chromium.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    parse_version(&stdout).ok_or_else(|| {
        format!(
            "`{} --version` printed no version: {:?}",
            chromium.display(),
            stdout.trim()
        )
    })
}

/// A `chromedriver` started for one call, in its own process group, so that stopping
/// it also stops every browser process it started.
#[derive(Debug)]
struct SpawnedDriver {
    child: Option<tokio::process::Child>,
    url: String,
}

impl SpawnedDriver {
    async fn start(program: &Path, log: &Path, deadline: Instant) -> Result<Self, String> {
        let mut last = String::new();
        for _ in 0..3 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("cannot find a free loopback port: {e}"))?
                .port();
            let log_file = std::fs::File::create(log)
                .map_err(|e| format!("cannot create the chromedriver log: {e}"))?;
            let log_err = log_file
                .try_clone()
                .map_err(|e| format!("cannot open the chromedriver log: {e}"))?;
            let home = log.parent().unwrap_or(log);
            let child = child_command(program, home)
                .arg(format!("--port={port}"))
                .arg("--allowed-ips=127.0.0.1")
                .stdin(Stdio::null())
                .stdout(log_file)
                .stderr(log_err)
                .process_group(0)
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot start `{}`: {e}", program.display()))?;
            let mut driver = SpawnedDriver {
                child: Some(child),
                url: format!("http://127.0.0.1:{port}"),
            };
            match driver.wait_ready(deadline).await {
                Ok(()) => return Ok(driver),
                Err(e) => {
                    driver.stop();
                    let tail = log_tail(log);
                    last = format!("{e}; log: {tail}");
                    if !(tail.contains("bind") || tail.contains("in use")) {
                        break;
                    }
                }
            }
        }
        Err(format!("chromedriver did not start: {last}"))
    }

    async fn wait_ready(&mut self, deadline: Instant) -> Result<(), String> {
        let http = crate::tls::client_builder()
            .map_err(|e| e.to_string())?
            .timeout(Duration::from_secs(2))
            .no_proxy()
            .build()
            .map_err(|e| e.to_string())?;
        let status = format!("{}/status", self.url);
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(exit)) = child.try_wait()
            {
                return Err(format!("chromedriver exited with {exit}"));
            }
            if let Ok(resp) = http.get(&status).send().await
                && let Ok(body) = resp.json::<Value>().await
                && body["value"]["ready"] == Value::Bool(true)
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err("chromedriver was not ready in time".to_owned());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Kills the driver's whole process group (the driver and any browser it started)
    /// and reaps the driver. Idempotent.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                // The group id is the driver's pid (process_group(0)).
                // A child like the others: a cleared environment and the fixed search
                // path, never the sandbox's (its secrets, its PATH).
                let _ = std::process::Command::new("kill")
                    .env_clear()
                    .env("PATH", CHILD_PATH)
                    .args(["-KILL", "--", &format!("-{pid}")])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
            let _ = child.start_kill();
            let deadline = Instant::now() + Duration::from_secs(2);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

impl Drop for SpawnedDriver {
    fn drop(&mut self) {
        self.stop();
    }
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let start = text.len().saturating_sub(1024);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    text[start..].trim().to_owned()
}

/// What the session reported about the browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launched {
    /// The `browserVersion` capability of the session.
    pub(crate) browser_version: String,
    /// The User-Agent the session was started with.
    pub(crate) user_agent: String,
}

/// A running browser for one call. [`Browser::shutdown`] must end every use; dropping
/// it instead still stops a spawned driver (and its browsers) and removes the profile,
/// and fantoccini closes the session from its own task.
#[derive(Debug)]
pub(crate) struct Browser {
    client: Option<Client>,
    driver: Option<SpawnedDriver>,
    run_dir: Option<TempDir>,
    launched: Option<Launched>,
}

impl Browser {
    /// Starts a browser: [`Browser::create`], then [`Browser::start`]; whatever started
    /// is stopped and the profile removed when the start fails.
    pub(crate) async fn launch(
        config: &BrowserConfig,
        script_timeout: Duration,
    ) -> Result<Self, BrowserError> {
        let mut browser = Browser::create(config)?;
        match browser.start(config, script_timeout).await {
            Ok(()) => Ok(browser),
            Err(e) => {
                // Whatever started is stopped and the profile removed; the start error
                // is what the caller needs.
                let _ = browser.shutdown(CLOSE_TIMEOUT).await;
                Err(e)
            }
        }
    }

    /// A browser not started yet: only its fresh profile folder. Its owner starts it
    /// with [`Browser::start`] and ends every use with [`Browser::shutdown`], also when
    /// the start was cut off (a call's deadline dropping it half way).
    pub(crate) fn create(config: &BrowserConfig) -> Result<Self, BrowserError> {
        let run_dir = match &config.profile_parent {
            Some(parent) => tempfile::Builder::new()
                .prefix("wetech-run-")
                .tempdir_in(parent),
            None => tempfile::Builder::new().prefix("wetech-run-").tempdir(),
        }
        .map_err(|e| BrowserError::Start(format!("cannot create a fresh profile folder: {e}")))?;
        Ok(Browser {
            client: None,
            driver: None,
            run_dir: Some(run_dir),
            launched: None,
        })
    }

    /// Starts the driver and a session whose `--user-agent` carries the running
    /// Chromium's major version, within the configuration's start limit. The version
    /// comes from the browser program (`--version`); when it cannot say, from a short
    /// probe session. The session's own `browserVersion` is checked against it, and on
    /// a mismatch the session is started once more with the reported major. A driver
    /// started before this future is dropped is held by the browser (or stopped with
    /// the future), so [`Browser::shutdown`] ends it.
    pub(crate) async fn start(
        &mut self,
        config: &BrowserConfig,
        script_timeout: Duration,
    ) -> Result<(), BrowserError> {
        let deadline = Instant::now() + config.start_timeout;
        self.start_by(config, script_timeout, deadline).await
    }

    async fn start_by(
        &mut self,
        config: &BrowserConfig,
        script_timeout: Duration,
        deadline: Instant,
    ) -> Result<(), BrowserError> {
        let run_dir = self
            .run_dir
            .as_ref()
            .map(|d| d.path().to_owned())
            .ok_or_else(|| BrowserError::Start("no profile folder".to_owned()))?;
        let remaining = || deadline.saturating_duration_since(Instant::now());
        let version = program_version(
            &config.chromium,
            &run_dir,
            remaining().min(Duration::from_secs(10)),
        )
        .await
        .ok();
        let webdriver = match &config.webdriver {
            WebDriverEndpoint::Spawn { chromedriver } => {
                let driver =
                    SpawnedDriver::start(chromedriver, &run_dir.join("chromedriver.log"), deadline)
                        .await
                        .map_err(BrowserError::Start)?;
                let url = driver.url.clone();
                self.driver = Some(driver);
                url
            }
            WebDriverEndpoint::Attach { url } => url.as_str().trim_end_matches('/').to_owned(),
        };
        let mut major = version.as_deref().and_then(major_of);
        if major.is_none() {
            // The program could not say: ask a short probe session.
            let probe_profile = run_dir.join("probe-profile");
            let probe = open_session(
                config,
                &webdriver,
                &probe_profile,
                None,
                script_timeout,
                remaining(),
            )
            .await?;
            let reported = browser_version(&probe);
            let _ = tokio::time::timeout(Duration::from_secs(10), probe.close()).await;
            major = reported.as_deref().and_then(major_of);
        }
        let mut major = major.ok_or_else(|| {
            BrowserError::Start(
                "neither the browser program nor a session reported a version".into(),
            )
        })?;
        let profile = run_dir.join("profile");
        for attempt in 0..2 {
            let user_agent = user_agent_for(major);
            let client = open_session(
                config,
                &webdriver,
                &profile,
                Some(&user_agent),
                script_timeout,
                remaining(),
            )
            .await?;
            let reported = browser_version(&client).unwrap_or_default();
            match major_of(&reported) {
                Some(m) if m == major => {
                    self.client = Some(client);
                    self.launched = Some(Launched {
                        browser_version: reported,
                        user_agent,
                    });
                    return Ok(());
                }
                Some(m) if attempt == 0 => {
                    // The browser changed under us: start again with its own major.
                    let _ = tokio::time::timeout(Duration::from_secs(10), client.close()).await;
                    major = m;
                }
                _ => {
                    let _ = tokio::time::timeout(Duration::from_secs(10), client.close()).await;
                    return Err(BrowserError::Start(format!(
                        "the session reports browser version {reported:?}, which does not match Chrome/{major}"
                    )));
                }
            }
        }
        Err(BrowserError::Start("no session".to_owned()))
    }

    /// The session.
    pub(crate) fn client(&self) -> Result<&Client, BrowserError> {
        self.client
            .as_ref()
            .ok_or_else(|| BrowserError::Lost("the session is closed".to_owned()))
    }

    /// The browser version and User-Agent of the session.
    pub(crate) fn launched(&self) -> Option<&Launched> {
        self.launched.as_ref()
    }

    /// The browser's own DevTools endpoint as the session reports it
    /// (`goog:chromeOptions.debuggerAddress`, `host:port`), when it is on loopback.
    pub(crate) fn debugger_address(&self) -> Option<String> {
        let address = self
            .client
            .as_ref()?
            .capabilities()?
            .get("goog:chromeOptions")?
            .get("debuggerAddress")?
            .as_str()?;
        let (host, port) = address.rsplit_once(':')?;
        let loopback = matches!(host, "localhost" | "127.0.0.1" | "[::1]");
        (loopback && port.parse::<u16>().is_ok()).then(|| address.to_owned())
    }

    /// A connection to the browser's own DevTools endpoint (see `cdp.rs`), within
    /// `limit`.
    pub(crate) async fn devtools(&self, limit: Duration) -> Result<Cdp, BrowserError> {
        let address = self.debugger_address().ok_or_else(|| {
            BrowserError::Start("the session reports no loopback DevTools address".to_owned())
        })?;
        Cdp::connect(&address, limit)
            .await
            .map_err(|e| BrowserError::Start(e.to_string()))
    }

    /// The browser process id as the session reports it (`goog:processID`).
    pub(crate) fn process_id(&self) -> Option<u32> {
        let pid = self
            .client
            .as_ref()?
            .capabilities()?
            .get("goog:processID")?
            .as_u64()?;
        u32::try_from(pid).ok()
    }

    /// Closes the session (waiting at most `close_limit` for the driver: a session
    /// still busy with a page that never finishes loading is ended with the driver
    /// instead), stops a spawned driver and everything it started, and removes the
    /// profile folder. Runs every step even when an earlier one fails; the error says
    /// what could not be cleaned up.
    pub(crate) async fn shutdown(&mut self, close_limit: Duration) -> Result<(), String> {
        let mut problems = Vec::new();
        if let Some(client) = self.client.take() {
            match tokio::time::timeout(close_limit.min(CLOSE_TIMEOUT), client.close()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => problems.push(format!("closing the WebDriver session: {e}")),
                Err(_) => problems.push("closing the WebDriver session timed out".to_owned()),
            }
        }
        if let Some(mut driver) = self.driver.take() {
            driver.stop();
        }
        if let Some(dir) = self.run_dir.take() {
            if let Err(e) = remove_dir(dir.path()).await {
                problems.push(format!("removing the profile folder: {e}"));
                // TempDir's own drop tries once more.
            }
            drop(dir);
        }
        // A session that could not be closed is gone with the driver (spawned mode) or
        // stays the attached driver's to reap; only leftovers on disk are an error.
        match problems.iter().find(|p| p.starts_with("removing")) {
            Some(p) => Err(p.clone()),
            None => Ok(()),
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(mut driver) = self.driver.take() {
            driver.stop();
        }
    }
}

/// Removes a folder, retrying briefly while a just-stopped browser still writes to it.
async fn remove_dir(path: &Path) -> std::io::Result<()> {
    let mut last = None;
    for _ in 0..40 {
        match std::fs::remove_dir_all(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("cannot remove")))
}

fn browser_version(client: &Client) -> Option<String> {
    client
        .capabilities()
        .and_then(|c| c.get("browserVersion"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

async fn open_session(
    config: &BrowserConfig,
    webdriver: &str,
    profile: &Path,
    user_agent: Option<&str>,
    script_timeout: Duration,
    limit: Duration,
) -> Result<Client, BrowserError> {
    std::fs::create_dir_all(profile)
        .map_err(|e| BrowserError::Start(format!("cannot create the profile folder: {e}")))?;
    let mut args: Vec<String> = config
        .args
        .iter()
        .filter(|a| !a.starts_with("--user-data-dir") && !a.starts_with("--user-agent"))
        .cloned()
        .collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    if let Some(ua) = user_agent {
        args.push(format!("--user-agent={ua}"));
    }
    let caps = json!({
        "browserName": "chrome",
        "pageLoadStrategy": "normal",
        "timeouts": {
            "pageLoad": millis(config.page_load_timeout),
            "script": millis(script_timeout),
            "implicit": 0,
        },
        "goog:chromeOptions": {
            "binary": path_text(&config.chromium),
            "args": args,
        },
    });
    let Value::Object(caps) = caps else {
        return Err(BrowserError::Start("invalid capabilities".to_owned()));
    };
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let mut builder = ClientBuilder::new(connector);
    builder.capabilities(caps);
    match tokio::time::timeout(limit, builder.connect(webdriver)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(BrowserError::Start(new_session_message(&e))),
        Err(_) => Err(BrowserError::Start(format!(
            "no browser session within {} ms",
            limit.as_millis()
        ))),
    }
}

fn new_session_message(e: &NewSessionError) -> String {
    match e {
        NewSessionError::SessionNotCreated(w) => {
            format!(
                "the WebDriver server could not start the browser: {}",
                w.message
            )
        }
        other => format!("cannot open a WebDriver session: {other}"),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn path_text(p: &Path) -> String {
    PathBuf::from(p).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_user_agent() {
        let out = "Chromium 156.0.8078.108 built on Debian GNU/Linux 12 (bookworm)\n";
        assert_eq!(parse_version(out).as_deref(), Some("156.0.8078.108"));
        assert_eq!(major_of("156.0.8078.108"), Some(156));
        assert_eq!(parse_version("no version here 1.2.3"), None);
        let ua = user_agent_for(156);
        assert!(ua.contains("Chrome/156.0.0.0 "), "{ua}");
        assert!(!ua.contains("Headless"));
    }
}
