//! Finding programs, free loopback ports and log tails.

use std::fs::File;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use crate::TestSupportError;

/// The install command for Prometheus and promtool.
pub(crate) const PROMETHEUS_INSTALL: &str = "apt-get install -y prometheus";
/// The install command for Chromium and ChromeDriver.
pub(crate) const CHROMIUM_INSTALL: &str = "apt-get install -y chromium chromium-driver";

/// Finds `program` on `PATH`, then in the given extra directories.
pub(crate) fn find_program(
    program: &'static str,
    extra_dirs: &[&str],
    install: &'static str,
) -> Result<PathBuf, TestSupportError> {
    let path_dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    path_dirs
        .into_iter()
        .chain(extra_dirs.iter().map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .ok_or(TestSupportError::MissingProgram { program, install })
}

/// A loopback port that was free a moment ago. The caller must cope with losing a race
/// for it (the starters retry with a new port when the process cannot bind).
pub(crate) fn free_loopback_port() -> Result<u16, TestSupportError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| TestSupportError::io("binding a free loopback port", "127.0.0.1:0", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| TestSupportError::io("reading a bound port", "127.0.0.1:0", e))?
        .port();
    Ok(port)
}

/// How many times a starter tries a new free port when the process could not bind its
/// port (another process took it between choosing and binding).
const PORT_ATTEMPTS: usize = 5;

/// A server process that has been spawned and may not be ready yet.
pub(crate) trait Spawned {
    /// Its log file (stdout and stderr).
    fn log_path(&self) -> PathBuf;
    /// Waits until it answers as ready.
    async fn wait_ready(&self) -> Result<(), TestSupportError>;
}

/// Spawns a server with `spawn` (which picks its port with [`free_loopback_port`] as
/// late as it can) and waits until it is ready. When it is not, and its log tail shows
/// one of `port_taken` (it lost the race for the port), it is dropped and spawned again,
/// up to [`PORT_ATTEMPTS`] times; any other failure is returned at once.
pub(crate) async fn start_on_free_port<S: Spawned>(
    program: &'static str,
    port_taken: &[&str],
    mut spawn: impl FnMut() -> Result<S, TestSupportError>,
) -> Result<S, TestSupportError> {
    let mut last_error = None;
    for _ in 0..PORT_ATTEMPTS {
        let server = spawn()?;
        match server.wait_ready().await {
            Ok(()) => return Ok(server),
            Err(e) => {
                let tail = log_tail(&server.log_path(), 4096);
                if !port_taken.iter().any(|taken| tail.contains(taken)) {
                    return Err(e);
                }
                last_error = Some(e);
            }
        }
    }
    Err(last_error.unwrap_or(TestSupportError::NotReady {
        program,
        detail: "no free port".to_owned(),
    }))
}

/// A new log file at `path`, opened twice: for a child's stdout and its stderr.
pub(crate) fn log_files(path: &Path) -> Result<(File, File), TestSupportError> {
    let log = File::create(path).map_err(|e| TestSupportError::io("creating the log", path, e))?;
    let log_err = log
        .try_clone()
        .map_err(|e| TestSupportError::io("opening the log", path, e))?;
    Ok((log, log_err))
}

/// The last `max` bytes of a log file, for error messages.
pub(crate) fn log_tail(path: &Path, max: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let start = bytes.len().saturating_sub(max);
            String::from_utf8_lossy(&bytes[start..]).into_owned()
        }
        Err(e) => format!("(no log at {}: {e})", path.display()),
    }
}

/// How to tell that a started process is ready: poll `url` until `ready` accepts the
/// answer, failing early (with the log tail) when the process exits and failing after
/// `timeout` otherwise.
pub(crate) struct Readiness<'a> {
    /// The program, for error messages.
    pub(crate) program: &'static str,
    /// The URL polled.
    pub(crate) url: String,
    /// The process's log file.
    pub(crate) log_path: &'a Path,
    /// How long to wait in all.
    pub(crate) timeout: Duration,
    /// Pause between polls.
    pub(crate) poll: Duration,
}

impl Readiness<'_> {
    /// Polls until ready. `exit_status` reports whether the process has exited; `ready`
    /// judges an answer by its status and body.
    pub(crate) async fn wait(
        &self,
        exit_status: impl Fn() -> Option<ExitStatus>,
        ready: impl Fn(reqwest::StatusCode, &[u8]) -> bool,
    ) -> Result<(), TestSupportError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| TestSupportError::Task(e.to_string()))?;
        let deadline = Instant::now() + self.timeout;
        loop {
            if let Some(status) = exit_status() {
                return Err(TestSupportError::NotReady {
                    program: self.program,
                    detail: format!(
                        "exited with {status}; log: {}",
                        log_tail(self.log_path, 2048)
                    ),
                });
            }
            if let Ok(resp) = client.get(&self.url).send().await {
                let status = resp.status();
                if let Ok(body) = resp.bytes().await
                    && ready(status, &body)
                {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(TestSupportError::NotReady {
                    program: self.program,
                    detail: format!(
                        "no answer from {} within {:?}; log: {}",
                        self.url,
                        self.timeout,
                        log_tail(self.log_path, 2048)
                    ),
                });
            }
            tokio::time::sleep(self.poll).await;
        }
    }
}
