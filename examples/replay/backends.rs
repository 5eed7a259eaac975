//! The Prometheus stand-ins of the replay: recorded servers offline, real servers behind
//! recording proxies live.

use std::error::Error;
use std::path::{Path, PathBuf};

use evidence_test_support as support;

use crate::{Mode, ROOT};

/// The committed recordings of the offline replay.
pub(crate) fn recordings_dir() -> PathBuf {
    Path::new(ROOT).join("fixtures/recordings")
}

/// The Prometheus stand-ins: recorded servers offline, real servers (behind recording
/// proxies) live.
pub(crate) enum Backends {
    Offline(Vec<support::RecordedPrometheus>),
    Live {
        _servers: Vec<support::Prometheus>,
        proxies: Vec<(&'static str, support::RecordingProxy)>,
    },
}

impl Backends {
    /// Starts the three stand-ins (`main`, `vida`, `monica`) for `mode`.
    pub(crate) async fn start(mode: Mode) -> Result<Self, Box<dyn Error>> {
        let names = ["main", "vida", "monica"];
        if mode == Mode::Offline {
            let mut servers = Vec::new();
            for name in names {
                let path = recordings_dir().join(format!("{name}.json"));
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    format!(
                        "{}: {e} (record with `cargo run --example replay -- --record`)",
                        path.display()
                    )
                })?;
                servers.push(
                    support::RecordedPrometheus::start(support::RecordingSet::from_json(&text)?)
                        .await?,
                );
            }
            return Ok(Backends::Offline(servers));
        }
        let mut servers = Vec::new();
        let mut proxies = Vec::new();
        for (name, fixture) in names.into_iter().zip([
            support::Fixture::Main,
            support::Fixture::Vida,
            support::Fixture::Monica,
        ]) {
            let server = support::Prometheus::start(fixture).await?;
            proxies.push((name, support::RecordingProxy::start(&server.url()).await?));
            servers.push(server);
        }
        Ok(Backends::Live {
            _servers: servers,
            proxies,
        })
    }

    /// The URL of stand-in `index` (0 `main`, 1 `vida`, 2 `monica`).
    pub(crate) fn url(&self, index: usize) -> Result<String, Box<dyn Error>> {
        match self {
            Backends::Offline(s) => s.get(index).map(|s| s.url()),
            Backends::Live { proxies, .. } => proxies.get(index).map(|(_, p)| p.url()),
        }
        .ok_or_else(|| "no such backend".into())
    }

    /// Writes what the recording proxies saw (a live run only).
    pub(crate) fn write_recordings(&self) -> Result<(), Box<dyn Error>> {
        if let Backends::Live { proxies, .. } = self {
            std::fs::create_dir_all(recordings_dir())?;
            for (name, proxy) in proxies {
                let label = format!(
                    "RECORDINGS, not a provider: query_range exchanges with a real Prometheus \
                     (Debian prometheus) serving the `{name}` fixture of evidence-test-support, \
                     made by `cargo run --example replay -- --record`"
                );
                std::fs::write(
                    recordings_dir().join(format!("{name}.json")),
                    proxy.recordings(label).to_json()?,
                )?;
            }
        }
        Ok(())
    }

    /// Requests the recordings had no answer for (an offline run only).
    pub(crate) fn misses(&self) -> usize {
        match self {
            Backends::Offline(s) => s.iter().map(|s| s.misses().len()).sum(),
            Backends::Live { .. } => 0,
        }
    }
}
