//! The fixture side of `benches/large_answer.py`: starts a real Prometheus over the
//! large TiKV thread-CPU data set of `evidence-test-support` (`--series N` threads, 241
//! points each over the hour), the Clinic test front before it, makes a deployable
//! Clinic v3 folder (loopback allowlist) around the given `clinic-tool` binary, signs one
//! trusted policy for `rate(tikv_thread_cpu_seconds_total[1m])` over that hour with a
//! throwaway key, and prints one JSON line: the front's `query_range` URL and token (for
//! `curl` of the same body), the packaged entrypoint, the model arguments, the
//! environment the entrypoint runs with, and the expected top series and peak. It keeps
//! everything running until its stdin closes.
//!
//! ```sh
//! cargo build --release -p evidence-tool --bin clinic-tool
//! cargo run --release --example large_answer_fixture -- --tool-binary target/release/clinic-tool --series 5000
//! ```

use std::error::Error;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use evidence_test_support as support;
use managed_evidence::policy::{KeyId, PolicySigner, TrustedPolicy};
use managed_evidence::tool::build_deployable;
use rand::RngCore as _;
use secrecy::SecretString;
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const KID: &str = "large-answer";

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("large_answer_fixture: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run()) {
        eprintln!("large_answer_fixture: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (binary, series) = match args.as_slice() {
        [flag, path, count, n] if flag == "--tool-binary" && count == "--series" => {
            (PathBuf::from(path), n.parse::<usize>()?)
        }
        _ => return Err("usage: large_answer_fixture --tool-binary PATH --series N".into()),
    };
    let data = support::TikvThreads::new(series);
    let prometheus = support::LargePrometheus::start(data).await?;
    let mut token_bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut token_bytes);
    let token = hex::encode(token_bytes);
    let front =
        support::ClinicFront::start(&prometheus.url(), SecretString::from(token.clone())).await?;

    let dir = tempfile::Builder::new().prefix("large-answer-").tempdir()?;
    let source = local_clinic_source(dir.path())?;
    let package_dir = dir.path().join("managed_auto_oncall_clinic");
    let package = build_deployable(&source, &binary, &package_dir)?;
    let digest = package.digest();
    let tool = package_dir.join(&package.manifest().entrypoint);
    let signer = PolicySigner::generate(KeyId::new(KID)?)?;
    let keys = signer.key_ring_entry();

    let query = support::TIKV_THREAD_CPU_RATE;
    let policy: TrustedPolicy = serde_json::from_value(policy(&query)?)?;
    let envelope = dir.path().join("envelope.json");
    std::fs::write(&envelope, signer.sign(&policy, digest)?.to_json()?)?;
    let hot = data.top_index();
    println!(
        "{}",
        json!({
            "prometheus_url": prometheus.url(),
            "query_range_url": front.query_range_url(support::TIKV_THREADS_CLUSTER),
            "token": token,
            "tool": tool,
            "series": series,
            "start": query.start,
            "end": query.end,
            "step_seconds": query.step_seconds,
            "args": {"queries": [{"queryId": query.name, "expr": query.expr,
                                  "step": format!("{}s", query.step_seconds), "unit": "cores"}]},
            "env": {
                "EVIDENCE_TRUSTED_CONTEXT": envelope,
                "EVIDENCE_POLICY_KEYS": keys,
                "EVIDENCE_AUDIT_LOG": dir.path().join("audit.jsonl"),
                "CLINIC_BASE_URL": front.base_url(),
                "CLINIC_API_TOKEN": token,
            },
            "expected": {"instance": data.instance(hot), "name": data.thread_name(hot),
                         "peak": support::TIKV_THREAD_PEAK},
        })
    );

    // Serve until the driver closes stdin.
    tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await??;
    drop(front);
    drop(prometheus);
    Ok(())
}

/// The trusted policy of the thread-CPU query: its cluster and exactly its window.
fn policy(query: &support::FixtureQuery) -> Result<Value, Box<dyn Error>> {
    let ts = |s: i64| -> Result<String, Box<dyn Error>> {
        Ok(jiff::Timestamp::from_second(s)?.to_string())
    };
    let now = jiff::Timestamp::now();
    Ok(json!({
        "policy_id": "pol-large-answer", "ticket": "TIKV-5000",
        "provider": "clinic", "package": "managed_auto_oncall_clinic", "account": "acct-bench",
        "cluster": {"id": support::TIKV_THREADS_CLUSTER, "tier": "dedicated"},
        "operation": "query_range",
        "window": {"start": ts(query.start)?, "end": ts(query.end)?},
        "lookback": 3600,
        "limits": {"max_points_per_series": 11000, "min_step": 15, "max_batch": 4,
                   "max_series_kept": 10, "max_calls_per_turn": 8},
        "issued_at": now.to_string(),
        "expires_at": (now + jiff::SignedDuration::from_hours(12)).to_string(),
    }))
}

/// A copy of the committed Clinic v3 source whose network allowlist is the loopback
/// address of the test front.
fn local_clinic_source(dir: &Path) -> Result<PathBuf, Box<dyn Error>> {
    let src = Path::new(ROOT).join("packages/managed_auto_oncall_clinic/v3");
    Ok(support::loopback_package_source(
        &src,
        &dir.join("managed_auto_oncall_clinic-src"),
    )?)
}
