//! A real Prometheus server over backfilled fixture blocks.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use tempfile::TempDir;

use crate::front::{RequestLog, Server};
use crate::package_source::copy_tree;
use crate::process::{
    PROMETHEUS_INSTALL, Readiness, Spawned, find_program, free_loopback_port, log_files,
    start_on_free_port,
};
use crate::{Fixture, TestSupportError, TikvThreads};

/// The sources of the fixture generator (the fixtures and their OpenMetrics text), which
/// key the block cache.
const FIXTURE_GENERATOR_SOURCES: [&str; 2] = [
    include_str!("fixtures/mod.rs"),
    include_str!("fixtures/openmetrics.rs"),
];
/// The source of the large data set's generator, which keys its block cache too.
const LARGE_GENERATOR_SOURCE: &str = include_str!("large.rs");

/// How long a server may take to answer `/-/ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A real `prometheus` process (Debian 2.42) on a free `127.0.0.1` port, serving the
/// blocks that `promtool tsdb create-blocks-from openmetrics` built from a [`Fixture`].
///
/// Retention is 100 years so the past fixture blocks are kept. The process is killed
/// when the value is dropped; [`Prometheus::kill`] kills it earlier, mid-run.
#[derive(Debug)]
pub struct Prometheus {
    child: Mutex<Option<Child>>,
    addr: SocketAddr,
    /// `None` only inside a [`LargePrometheus`], which does not expose it.
    fixture: Option<Fixture>,
    dir: TempDir,
    /// The target it scrapes for metadata ([`Prometheus::start_with_metadata`]).
    exposition: Option<Server>,
}

/// A real `prometheus` process over the blocks of a [`TikvThreads`] data set (built once
/// per size and cached like the fixture blocks), otherwise as [`Prometheus`].
#[derive(Debug)]
pub struct LargePrometheus {
    server: Prometheus,
    data: TikvThreads,
}

impl LargePrometheus {
    /// Backfills `data` (cached), starts a server on a free loopback port and waits
    /// until `/-/ready` answers. The first start of a size generates and backfills it:
    /// a few seconds for 5,000 series, longer for 20,000.
    pub async fn start(data: TikvThreads) -> Result<Self, TestSupportError> {
        let blocks = tokio::task::spawn_blocking(move || {
            cached_blocks(&data.name(), |om| data.write_openmetrics(om))
        })
        .await
        .map_err(|e| TestSupportError::Task(e.to_string()))??;
        let server = Prometheus::start_on(blocks, None, None).await?;
        Ok(LargePrometheus { server, data })
    }

    /// The base URL, `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The loopback address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The data set this server holds.
    pub fn data(&self) -> TikvThreads {
        self.data
    }

    /// The server's log file.
    pub fn log_path(&self) -> PathBuf {
        self.server.log_path()
    }

    /// Kills the process now and reaps it. Idempotent.
    pub fn kill(&self) {
        self.server.kill();
    }
}

impl Prometheus {
    /// Backfills `fixture` (blocks are built once and cached, see the crate README),
    /// starts a server on a free loopback port and waits until `/-/ready` answers.
    ///
    /// Fails with the install command when `prometheus` or `promtool` is missing.
    pub async fn start(fixture: Fixture) -> Result<Self, TestSupportError> {
        let blocks = Self::blocks_of(fixture).await?;
        Self::start_on(blocks, Some(fixture), None).await
    }

    /// [`Prometheus::start`], scraping `target`'s `/metrics` every second as job
    /// `exposition` (a server's own metrics, for the tests of what it counts).
    pub async fn start_scraping(
        fixture: Fixture,
        target: SocketAddr,
    ) -> Result<Self, TestSupportError> {
        let blocks = Self::blocks_of(fixture).await?;
        Self::start_on(blocks, Some(fixture), Some(target)).await
    }

    /// The cached blocks of `fixture` (built on first use); fails with the install
    /// command when `prometheus` is missing.
    async fn blocks_of(fixture: Fixture) -> Result<PathBuf, TestSupportError> {
        find_program("prometheus", &["/usr/bin"], PROMETHEUS_INSTALL)?;
        tokio::task::spawn_blocking(move || fixture_blocks(fixture))
            .await
            .map_err(|e| TestSupportError::Task(e.to_string()))?
    }

    /// [`Prometheus::start`], and a loopback target serving `exposition` (the text
    /// format 0.0.4: `# HELP` and `# TYPE` lines, and samples) that the server scrapes
    /// every second as job `exposition`, so that its global `/api/v1/metadata` holds
    /// that metadata: Prometheus keeps metadata only from scrapes, never from backfilled
    /// blocks. Returns once the metadata of every `# HELP` name is served. The scraped
    /// samples carry no fixture label and lie at the current time, outside every
    /// fixture window.
    pub async fn start_with_metadata(
        fixture: Fixture,
        exposition: &str,
    ) -> Result<Self, TestSupportError> {
        let blocks = Self::blocks_of(fixture).await?;
        let text = exposition.to_owned();
        let router = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let text = text.clone();
                async move {
                    (
                        [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                        text,
                    )
                }
            }),
        );
        let target = Server::start(router, RequestLog::default()).await?;
        let addr = target.addr();
        let mut server = Self::start_on(blocks, Some(fixture), Some(addr)).await?;
        server.exposition = Some(target);
        let names: Vec<&str> = exposition
            .lines()
            .filter_map(|l| l.strip_prefix("# HELP "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        server.await_metadata(&names).await?;
        Ok(server)
    }

    /// Waits until `/api/v1/metadata` names each of `names`.
    async fn await_metadata(&self, names: &[&str]) -> Result<(), TestSupportError> {
        let client = reqwest::Client::new();
        let url = format!("{}/api/v1/metadata", self.url());
        let until = std::time::Instant::now() + READY_TIMEOUT;
        loop {
            let served: Option<serde_json::Value> = match client.get(&url).send().await {
                Ok(r) => r.json().await.ok(),
                Err(_) => None,
            };
            let data = served.as_ref().and_then(|v| v.get("data"));
            if names
                .iter()
                .all(|n| data.is_some_and(|d| d.get(*n).is_some()))
            {
                return Ok(());
            }
            if std::time::Instant::now() > until {
                return Err(TestSupportError::Front(format!(
                    "prometheus served no metadata of {names:?} within {READY_TIMEOUT:?}; see {}",
                    self.log_path().display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Starts a server over a copy of `blocks`, scraping `scrape` every second when set.
    async fn start_on(
        blocks: PathBuf,
        fixture: Option<Fixture>,
        scrape: Option<SocketAddr>,
    ) -> Result<Self, TestSupportError> {
        let program = find_program("prometheus", &["/usr/bin"], PROMETHEUS_INSTALL)?;
        start_on_free_port("prometheus", &["address already in use"], || {
            let dir = tempfile::Builder::new()
                .prefix("evidence-prometheus-")
                .tempdir()
                .map_err(|e| TestSupportError::io("creating a data directory", "$TMPDIR", e))?;
            let data = dir.path().join("data");
            copy_tree(&blocks, &data)?;
            let config = dir.path().join("prometheus.yml");
            let scrape_configs = match scrape {
                None => "scrape_configs: []\n".to_owned(),
                Some(target) => format!(
                    "scrape_configs:\n  - job_name: exposition\n    scrape_interval: 1s\n    \
                     static_configs: [{{targets: ['{target}']}}]\n"
                ),
            };
            std::fs::write(
                &config,
                format!("global: {{scrape_interval: 15s}}\n{scrape_configs}"),
            )
            .map_err(|e| TestSupportError::io("writing the configuration", &config, e))?;
            let port = free_loopback_port()?;
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            let (log, log_err) = log_files(&dir.path().join("prometheus.log"))?;
            let child = Command::new(&program)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", data.display()))
                .arg("--storage.tsdb.retention.time=100y")
                .arg(format!("--web.listen-address={addr}"))
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log_err)
                .spawn()
                .map_err(|e| TestSupportError::io("starting prometheus", &program, e))?;
            Ok(Prometheus {
                child: Mutex::new(Some(child)),
                addr,
                fixture,
                dir,
                exposition: None,
            })
        })
        .await
    }

    fn exit_status(&self) -> Option<std::process::ExitStatus> {
        let mut guard = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        guard.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// The base URL, `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The loopback address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The fixture this server holds.
    pub fn fixture(&self) -> Fixture {
        // Only a `LargePrometheus` holds no fixture, and it never hands out its server.
        self.fixture.unwrap_or(Fixture::Main)
    }

    /// The server's log file (stdout and stderr).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("prometheus.log")
    }

    /// True while the process runs.
    pub fn is_running(&self) -> bool {
        let mut guard = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        guard
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Kills the process now (SIGKILL) and reaps it: the "server killed mid-run" fault.
    /// Requests afterwards fail to connect. Idempotent.
    pub fn kill(&self) {
        let mut guard = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(mut child) = guard.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Spawned for Prometheus {
    fn log_path(&self) -> PathBuf {
        Prometheus::log_path(self)
    }

    async fn wait_ready(&self) -> Result<(), TestSupportError> {
        let log_path = self.log_path();
        Readiness {
            program: "prometheus",
            url: format!("{}/-/ready", self.url()),
            log_path: &log_path,
            timeout: READY_TIMEOUT,
            poll: Duration::from_millis(50),
        }
        .wait(|| self.exit_status(), |status, _| status.is_success())
        .await
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Per-process memo of the cache directories already checked, and the lock that keeps
/// two tests of one binary from building the same blocks at once.
static BLOCKS: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());

/// The directory of backfilled blocks for `fixture`, built on first use.
///
/// Blocks are cached in `$TMPDIR/evidence-test-support/<fixture>-<hash>` where the hash
/// covers the fixture generator's sources (`fixtures/`) and the fixture name, so any
/// change of a fixture builds new blocks. A cache entry is moved into place atomically
/// once complete.
pub(crate) fn fixture_blocks(fixture: Fixture) -> Result<PathBuf, TestSupportError> {
    cached_blocks(fixture.name(), |om| {
        std::fs::write(om, fixture.openmetrics().as_bytes())
            .map_err(|e| TestSupportError::io("writing the fixture", om, e))
    })
}

/// The directory of backfilled blocks of the data set `name`, whose OpenMetrics text
/// `write` writes to the path it is given, built on first use and cached as
/// [`fixture_blocks`] says. The generators live entirely in `fixtures/` and
/// `large.rs`: their sources and the name determine the text, so they key the cache
/// without generating the text first.
fn cached_blocks(
    name: &str,
    write: impl FnOnce(&Path) -> Result<(), TestSupportError>,
) -> Result<PathBuf, TestSupportError> {
    let mut memo = BLOCKS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, path)) = memo.iter().find(|(n, _)| n == name) {
        return Ok(path.clone());
    }
    let promtool = find_program("promtool", &["/usr/bin"], PROMETHEUS_INSTALL)?;
    let mut hasher = Sha256::new();
    for source in FIXTURE_GENERATOR_SOURCES {
        hasher.update(source.as_bytes());
    }
    if name.starts_with("tikv-threads-") {
        hasher.update(LARGE_GENERATOR_SOURCE.as_bytes());
    }
    hasher.update(name.as_bytes());
    let hash = hex::encode(&hasher.finalize()[..8]);
    let root = std::env::temp_dir().join("evidence-test-support");
    let entry = root.join(format!("{name}-{hash}"));
    let blocks = entry.join("blocks");
    if !entry.join("complete").is_file() {
        std::fs::create_dir_all(&root)
            .map_err(|e| TestSupportError::io("creating the block cache", &root, e))?;
        let staging = tempfile::Builder::new()
            .prefix(".building-")
            .tempdir_in(&root)
            .map_err(|e| TestSupportError::io("creating a staging directory", &root, e))?;
        let om = staging.path().join("fixture.om");
        write(&om)?;
        let output = Command::new(&promtool)
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(&om)
            .arg(staging.path().join("blocks"))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| TestSupportError::io("running promtool", &promtool, e))?;
        if !output.status.success() {
            return Err(TestSupportError::Backfill {
                fixture: name.to_owned(),
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ),
            });
        }
        // The OpenMetrics text is not needed any more; keep the cache small.
        let _ = std::fs::remove_file(&om);
        let marker = staging.path().join("complete");
        std::fs::write(&marker, b"ok\n")
            .map_err(|e| TestSupportError::io("writing the cache marker", &marker, e))?;
        let staged = staging.keep();
        if let Err(e) = std::fs::rename(&staged, &entry) {
            // Another process finished the same entry first; use theirs.
            let _ = std::fs::remove_dir_all(&staged);
            if !entry.join("complete").is_file() {
                return Err(TestSupportError::io(
                    "publishing the block cache",
                    &entry,
                    e,
                ));
            }
        }
    }
    memo.push((name.to_owned(), blocks.clone()));
    Ok(blocks)
}
