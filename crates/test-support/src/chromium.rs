//! Chromium and ChromeDriver for the Wetech tests: finding the programs, one browser at
//! a time across the test binary, a real ChromeDriver process, and counting browsers.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tempfile::TempDir;

use crate::TestSupportError;
use crate::process::{
    CHROMIUM_INSTALL, Readiness, Spawned, find_program, free_loopback_port, log_files,
    start_on_free_port,
};

/// How long ChromeDriver may take to answer `/status` with `ready: true`.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// Chromium launch arguments that work headless as root on a 2-core machine (checked
/// with Debian's Chromium 156). A fresh `--user-data-dir` must be added per session.
pub const CHROMIUM_LAUNCH_ARGS: [&str; 7] = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
];

/// The Debian `chromium` browser.
#[derive(Debug, Clone)]
pub struct Chromium {
    path: PathBuf,
}

impl Chromium {
    /// Finds `chromium` on `PATH` (or `/usr/bin`); fails with the install command when
    /// missing.
    pub fn find() -> Result<Self, TestSupportError> {
        let path = find_program("chromium", &["/usr/bin"], CHROMIUM_INSTALL)?;
        Ok(Chromium { path })
    }

    /// The path of the browser program.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The version `chromium --version` reports, e.g. `156.0.8078.108`. The Debian
    /// wrapper's shell warning on stderr is ignored.
    pub fn version(&self) -> Result<String, TestSupportError> {
        let output = Command::new(&self.path)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| TestSupportError::io("running chromium --version", &self.path, e))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        stdout
            .split_whitespace()
            .find(|word| word.split('.').count() == 4 && word.split('.').all(is_number))
            .map(str::to_owned)
            .ok_or_else(|| TestSupportError::NotReady {
                program: "chromium",
                detail: format!("no version in `chromium --version` output: {stdout:?}"),
            })
    }

    /// The major version, e.g. 156.
    pub fn major_version(&self) -> Result<u32, TestSupportError> {
        let version = self.version()?;
        version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .ok_or_else(|| TestSupportError::NotReady {
                program: "chromium",
                detail: format!("unreadable version {version:?}"),
            })
    }

    /// The launch arguments for a session with the given fresh profile directory.
    pub fn launch_args(profile_dir: &Path) -> Vec<String> {
        CHROMIUM_LAUNCH_ARGS
            .iter()
            .map(|a| (*a).to_owned())
            .chain([format!("--user-data-dir={}", profile_dir.display())])
            .collect()
    }
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The one browser slot of the machine. Holding it means no other test, of this binary
/// or of any other test process using this crate (two `cargo test` runs side by side),
/// runs a browser or counts browser processes at the same time: inside the binary a
/// mutex, across processes an exclusive lock on `evidence-test-support-browser.lock` in the
/// temporary folder. Released on drop.
#[derive(Debug)]
pub struct BrowserSlot {
    _machine: Option<std::fs::File>,
    _guard: tokio::sync::MutexGuard<'static, ()>,
}

static BROWSER_SLOT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The file whose exclusive lock is the machine-wide part of the [`BrowserSlot`].
fn browser_lock_path() -> PathBuf {
    std::env::temp_dir().join("evidence-test-support-browser.lock")
}

impl BrowserSlot {
    /// Waits for the browser slot. Works across the separate runtimes of
    /// `#[tokio::test]` functions and across test processes. When the lock file cannot
    /// be opened (a read-only temporary folder), only the in-process part holds; the
    /// counts are then exact only while one test process runs browsers.
    pub async fn acquire() -> Self {
        let guard = BROWSER_SLOT.lock().await;
        let machine = tokio::task::spawn_blocking(|| {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(browser_lock_path())
                .ok()?;
            file.lock().ok()?;
            Some(file)
        })
        .await
        .ok()
        .flatten();
        BrowserSlot {
            _machine: machine,
            _guard: guard,
        }
    }
}

/// A real `chromedriver` process on a free loopback port, started with
/// `--allowed-ips=127.0.0.1`; killed on drop. Starting one requires holding the
/// [`BrowserSlot`].
#[derive(Debug)]
pub struct ChromeDriver {
    child: Mutex<Option<Child>>,
    addr: SocketAddr,
    chromium: Chromium,
    dir: TempDir,
}

impl ChromeDriver {
    /// Finds `chromedriver` and `chromium` (failing with the install command when either
    /// is missing), starts the driver and waits until `/status` reports ready.
    pub async fn start(_slot: &BrowserSlot) -> Result<Self, TestSupportError> {
        let program = chromedriver_program()?;
        let chromium = Chromium::find()?;
        start_on_free_port("chromedriver", &["bind", "in use"], || {
            let dir = tempfile::Builder::new()
                .prefix("evidence-chromedriver-")
                .tempdir()
                .map_err(|e| TestSupportError::io("creating a log directory", "$TMPDIR", e))?;
            let (log, log_err) = log_files(&dir.path().join("chromedriver.log"))?;
            let port = free_loopback_port()?;
            let child = Command::new(&program)
                .arg(format!("--port={port}"))
                .arg("--allowed-ips=127.0.0.1")
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log_err)
                .spawn()
                .map_err(|e| TestSupportError::io("starting chromedriver", &program, e))?;
            Ok(ChromeDriver {
                child: Mutex::new(Some(child)),
                addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                chromium: chromium.clone(),
                dir,
            })
        })
        .await
    }

    fn exit_status(&self) -> Option<std::process::ExitStatus> {
        let mut guard = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        guard.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// The driver's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        let guard = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        guard.as_ref().map(Child::id)
    }

    /// The WebDriver URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The loopback address the driver listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The browser the driver will start.
    pub fn chromium(&self) -> &Chromium {
        &self.chromium
    }

    /// The driver's log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("chromedriver.log")
    }

    /// The number of WebDriver sessions the driver holds open (its `GET /sessions`).
    pub async fn session_count(&self) -> Result<usize, TestSupportError> {
        #[derive(serde::Deserialize)]
        struct Sessions {
            value: Vec<serde_json::Value>,
        }
        let url = format!("{}/sessions", self.url());
        let failed = |e: reqwest::Error| TestSupportError::NotReady {
            program: "chromedriver",
            detail: format!("GET {url} did not answer: {e}"),
        };
        let sessions: Sessions = reqwest::Client::new()
            .get(&url)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(failed)?
            .json()
            .await
            .map_err(failed)?;
        Ok(sessions.value.len())
    }

    /// Kills the driver now, and every browser process it started (a session left
    /// open by a failing test included). Idempotent.
    pub fn kill(&self) {
        let mut guard = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(mut child) = guard.take() {
            let browsers = descendants(child.id());
            let _ = child.kill();
            let _ = child.wait();
            kill_all(&browsers);
        }
    }
}

/// Where `chromedriver` is (on `PATH`, then `/usr/bin` and `/usr/lib/chromium`), or the
/// command that installs it.
pub fn chromedriver_program() -> Result<PathBuf, TestSupportError> {
    find_program(
        "chromedriver",
        &["/usr/bin", "/usr/lib/chromium"],
        CHROMIUM_INSTALL,
    )
}

/// The flag of a Chromium renderer process.
const TYPE_RENDERER: &[u8] = b"--type=renderer";

impl ChromeDriver {
    /// Kills every renderer process (`--type=renderer`) of the browsers the driver
    /// started, leaving the browser processes running (a page's renderer crashing);
    /// answers how many there were.
    pub fn kill_renderers(&self) -> usize {
        let Some(driver) = self.pid() else {
            return 0;
        };
        let renderers: Vec<u32> = descendants(driver)
            .into_iter()
            .filter(|pid| {
                // Chromium rewrites its helpers' command lines into one string, so the
                // flag is looked for as text, not as an argument of its own.
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|line| {
                    line.windows(TYPE_RENDERER.len())
                        .any(|w| w == TYPE_RENDERER)
                })
            })
            .collect();
        kill_all(&renderers);
        renderers.len()
    }
}

impl Spawned for ChromeDriver {
    fn log_path(&self) -> PathBuf {
        ChromeDriver::log_path(self)
    }

    async fn wait_ready(&self) -> Result<(), TestSupportError> {
        let log_path = self.log_path();
        Readiness {
            program: "chromedriver",
            url: format!("{}/status", self.url()),
            log_path: &log_path,
            timeout: READY_TIMEOUT,
            poll: Duration::from_millis(25),
        }
        .wait(|| self.exit_status(), |_, body| is_ready(body))
        .await
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        self.kill();
    }
}

fn is_ready(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Status {
        value: Value,
    }
    #[derive(serde::Deserialize)]
    struct Value {
        ready: bool,
    }
    serde_json::from_slice::<Status>(body).is_ok_and(|s| s.value.ready)
}

/// `(pid, parent pid)` of every process, from `/proc/PID/stat`.
fn process_table() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // "PID (COMM) STATE PPID ..."; COMM may hold spaces and parens.
            let rest = &stat[stat.rfind(')')? + 1..];
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// Every descendant of `root`, children first.
fn descendants(root: u32) -> Vec<u32> {
    let table = process_table();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid) in &table {
            if ppid == parent && !out.contains(&pid) {
                out.push(pid);
                frontier.push(pid);
            }
        }
    }
    out
}

/// Sends SIGKILL to the given processes (those already gone are ignored).
fn kill_all(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .arg("-KILL")
        .args(pids.iter().map(u32::to_string))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The number of live (not zombie) processes whose name matches, read from `/proc`.
fn count_processes(matches: impl Fn(&str) -> bool) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                return false;
            };
            // /proc/PID/stat: "PID (COMM) STATE ..."; COMM may hold spaces and parens.
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                return false;
            };
            let comm = &stat[open + 1..close];
            let state = stat[close + 1..].split_whitespace().next().unwrap_or("Z");
            state != "Z" && state != "X" && matches(comm)
        })
        .count()
}

/// The number of running Chromium processes (browser, renderers, helpers) on the
/// machine. Hold the [`BrowserSlot`] while comparing counts, so that no other test of
/// the binary starts a browser meanwhile.
pub fn chromium_process_count() -> usize {
    count_processes(|comm| {
        comm == "chrome" || comm.starts_with("chromium") || comm.starts_with("chrome_")
    })
}

/// Waits up to 10 s until at most `at_most` Chromium processes run (a closed
/// session's processes take a moment to go); the count when it returns. Hold the
/// [`BrowserSlot`].
pub async fn wait_for_chromium_count(at_most: usize) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let n = chromium_process_count();
        if n <= at_most || std::time::Instant::now() > deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The number of running ChromeDriver processes on the machine.
pub fn chromedriver_process_count() -> usize {
    count_processes(|comm| comm == "chromedriver")
}
