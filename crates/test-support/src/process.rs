//! Finding programs, free loopback ports and log tails.

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
