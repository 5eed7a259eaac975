//! The main job: an offline replay of the seed incidents, end to end.
//!
//! ```text
//! cargo run --release --example replay            # offline, from committed recordings
//! cargo run --release --example replay -- --live  # against real Prometheus (and Chromium)
//! cargo run --release --example replay -- --record  # --live, and rewrite fixtures/recordings
//! ```
//!
//! Every call goes through the same library path a tool sandbox uses
//! (`evidence_tool::prepare`: verify the signed policy for the exact package digest and
//! lock the model's arguments; `PreparedCall::plan` for `evidence_materialize::Turn` to
//! admit; `PreparedCall::run`: the connector, the output guard, the audit record), and the
//! attempts are materialized into the child handoff. Each package is deployed in memory
//! with this replay's own binary as its entrypoint file, so the digest covers the code
//! that runs. Offline, the provider answers come from **recordings** of the real
//! Prometheus fixtures (`fixtures/recordings/*.json`), served on loopback behind the same
//! Clinic, Manus and Grafana test fronts; the corrected Wetech call, which needs a real
//! Chromium, is the recorded result of the recording run and is labeled as such.

mod backends;
mod deploy;
mod report;
mod scenarios;
mod session;

use std::error::Error;

use managed_evidence::materialize::Handoff;
use managed_evidence::policy::{KeyId, KeyRing, PolicySigner};

use crate::backends::{Backends, recordings_dir};
use crate::scenarios::Replay;

pub(crate) const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const POLICY_KID: &str = "replay-2026";

/// Where the provider answers come from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The committed recordings.
    Offline,
    /// Real Prometheus servers (and Chromium, when installed).
    Live,
    /// Live, rewriting the recordings.
    Record,
}

fn main() {
    let mode = match std::env::args().nth(1).as_deref() {
        None => Mode::Offline,
        Some("--live") => Mode::Live,
        Some("--record") => Mode::Record,
        Some(other) => {
            eprintln!("usage: replay [--live | --record] (unknown argument {other:?})");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("replay: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run(mode)) {
        eprintln!("replay failed: {e}");
        std::process::exit(1);
    }
}

/// The replay: each scenario in turn, each in its own turn, then the recordings (when
/// recording), the Investibook workspace with the evidence agent's output, and every
/// handoff as JSON.
async fn run(mode: Mode) -> Result<(), Box<dyn Error>> {
    println!(
        "== managed evidence tools: replay of the seed incidents ({}) ==",
        match mode {
            Mode::Offline => "offline: provider answers are RECORDINGS of real Prometheus fixtures",
            Mode::Live => "live: real Prometheus servers",
            Mode::Record => "live, recording fixtures/recordings",
        }
    );
    let backends = Backends::start(mode).await?;
    // Auto-oncall's Ed25519 key for this run; the tool sandboxes get only its public key.
    let signer = PolicySigner::generate(KeyId::new(POLICY_KID)?)?;
    let keys: KeyRing = signer.key_ring_entry().parse()?;
    let replay = Replay {
        mode,
        backends,
        signer,
        keys,
    };
    let mut handoffs: Vec<(&str, Handoff)> = Vec::new();

    let (_clinic_front, clinic) = scenarios::deploy_clinic(&replay).await?;
    handoffs.push(("APID-29213", scenarios::apid_29213(&replay, &clinic).await?));
    handoffs.push(("ST-2865", scenarios::st_2865(&replay, &clinic).await?));
    handoffs.push(("manus-vida", scenarios::manus_vida(&replay).await?));
    handoffs.push(("wetech", scenarios::wetech(&replay).await?));

    if mode == Mode::Record {
        replay.backends.write_recordings()?;
        println!("\nrecordings written to {}", recordings_dir().display());
    }
    if replay.backends.misses() > 0 {
        return Err(format!(
            "{} requests had no recording: re-record",
            replay.backends.misses()
        )
        .into());
    }

    scenarios::investibook_workspace(&handoffs)?;

    println!("\n== handoff JSON ==");
    for (title, h) in &handoffs {
        println!("--- {title} ---");
        println!("{}", h.to_json()?);
    }
    Ok(())
}
