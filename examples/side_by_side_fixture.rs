//! The fixture side of `benches/side_by_side.py`: starts a real Prometheus over the
//! `Main` fixture of `evidence-test-support` and the Clinic test front before it, makes
//! a deployable Clinic v3 folder (loopback allowlist) around the given `clinic-tool`
//! binary, signs one trusted policy per query of `SIDE_BY_SIDE_QUERIES` with a throwaway
//! key, and prints one JSON line: the Prometheus URL, the packaged entrypoint and, per
//! query, the expression, window, the Clinic front's `query_range` URL and token (for a
//! bare HTTP request of the same query), model arguments and the environment the
//! entrypoint runs with; and for a server over HTTP (`benches/remote_mcp.py`) the same
//! policy signed for a session of its own (`session`: token, envelope, policy id) and,
//! with `--sessions N`, N more sessions each under its own policy id (`sessions`). With
//! `--front-delay-ms MS` the Clinic front waits that long before each answer (a slow
//! provider). It keeps everything running until its stdin closes.
//!
//! ```sh
//! cargo build --release -p evidence-tool --bin clinic-tool
//! cargo run --release --example side_by_side_fixture -- --tool-binary target/release/clinic-tool
//! ```

use std::error::Error;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use evidence_test_support as support;
use managed_evidence::policy::{KeyId, PolicySigner, SessionToken, TrustedPolicy};
use managed_evidence::tool::build_deployable;
use rand::RngCore as _;
use secrecy::SecretString;
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const KID: &str = "side-by-side";
/// How long the fixture's policies stay valid: twelve hours, longer than any run of the
/// driver it serves.
const FIXTURE_VALIDITY: jiff::SignedDuration = jiff::SignedDuration::from_hours(12);

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("side_by_side_fixture: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run()) {
        eprintln!("side_by_side_fixture: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn Error>> {
    let prometheus = support::Prometheus::start(support::Fixture::Main).await?;
    let mut token_bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut token_bytes);
    let token = hex::encode(token_bytes);
    let front =
        support::ClinicFront::start(&prometheus.url(), SecretString::from(token.clone())).await?;

    let usage =
        "usage: side_by_side_fixture --tool-binary PATH [--sessions N] [--front-delay-ms MS]";
    let (mut binary, mut sessions, mut front_delay_ms) = (None, 0_usize, 0_u64);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(usage)?;
        match flag.as_str() {
            "--tool-binary" if binary.is_none() => binary = Some(PathBuf::from(value)),
            "--sessions" => sessions = value.parse().map_err(|_| usage)?,
            "--front-delay-ms" => front_delay_ms = value.parse().map_err(|_| usage)?,
            _ => return Err(usage.into()),
        }
    }
    let binary = binary.ok_or(usage)?;
    // A slow provider (`benches/hostile_http.py`): every answer of the front waits this long.
    front
        .faults()
        .set_delay(std::time::Duration::from_millis(front_delay_ms));
    let dir = tempfile::Builder::new().prefix("side-by-side-").tempdir()?;
    let source = local_clinic_source(dir.path())?;
    let package_dir = dir.path().join("managed_auto_oncall_clinic");
    let package = build_deployable(&source, &binary, &package_dir)?;
    let digest = package.digest();
    let tool = package_dir.join(&package.manifest().entrypoint);
    // The tool process gets only the public key of this run's signing key.
    let signer = PolicySigner::generate(KeyId::new(KID)?)?;
    let keys = signer.key_ring_entry();

    let mut queries = Vec::new();
    for (query, unit, cluster) in support::SIDE_BY_SIDE_QUERIES {
        let ticket = if cluster == support::MEMORY_CLUSTER {
            "ST-2865"
        } else {
            "APID-29213"
        };
        let fields = policy(ticket, cluster, &query)?;
        let policy: TrustedPolicy = serde_json::from_value(fields.clone())?;
        let envelope = dir.path().join(format!("{}.envelope.json", query.name));
        std::fs::write(&envelope, signer.sign(&policy, digest)?.to_json()?)?;
        // For a server over HTTP: the same policy signed for a session of its own, and
        // `sessions` more, each under its own policy id (its own turn).
        let for_session = |suffix: &str| -> Result<Value, Box<dyn Error>> {
            let token = SessionToken::mint();
            let policy_id = format!("pol-side-by-side-{}{suffix}", query.name);
            let mut fields = fields.clone();
            fields["policy_id"] = json!(policy_id);
            fields["session"] = json!(token.digest().to_string());
            let policy: TrustedPolicy = serde_json::from_value(fields)?;
            let path = dir.path().join(format!("{policy_id}.envelope.json"));
            std::fs::write(&path, signer.sign(&policy, digest)?.to_json()?)?;
            Ok(json!({"token": token.expose(), "envelope": path, "policy_id": policy_id}))
        };
        let session = for_session("-session")?;
        let more = (0..sessions)
            .map(|i| for_session(&format!("-session-{i}")))
            .collect::<Result<Vec<_>, _>>()?;
        queries.push(json!({
            "session": session,
            "sessions": more,
            "name": query.name,
            "expr": query.expr,
            "start": query.start,
            "end": query.end,
            "step_seconds": query.step_seconds,
            "unit": unit,
            "query_range_url": front.query_range_url(cluster),
            "token": token,
            "args": {"queries": [{"queryId": query.name, "expr": query.expr,
                                  "step": format!("{}s", query.step_seconds), "unit": unit}]},
            "env": {
                "EVIDENCE_TRUSTED_CONTEXT": envelope,
                "EVIDENCE_POLICY_KEYS": keys,
                "EVIDENCE_AUDIT_LOG": dir.path().join("audit.jsonl"),
                "CLINIC_BASE_URL": front.base_url(),
                "CLINIC_QUERY_PATH_TEMPLATE": support::ClinicFront::QUERY_RANGE_PATH_TEMPLATE,
                "CLINIC_API_TOKEN": token,
            },
        }));
    }
    println!(
        "{}",
        json!({"prometheus_url": prometheus.url(), "tool": tool, "queries": queries})
    );

    // Serve until the driver closes stdin.
    tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await??;
    drop(front);
    drop(prometheus);
    Ok(())
}

/// The trusted policy of one query: its cluster and exactly its window, top 10 kept,
/// discovery granted (at most 50 items).
fn policy(
    ticket: &str,
    cluster: &str,
    query: &support::FixtureQuery,
) -> Result<Value, Box<dyn Error>> {
    let ts = |s: i64| -> Result<String, Box<dyn Error>> {
        Ok(jiff::Timestamp::from_second(s)?.to_string())
    };
    let policy = json!({
        "policy_id": format!("pol-side-by-side-{}", query.name), "ticket": ticket,
        "provider": "clinic", "package": "managed_auto_oncall_clinic", "account": "acct-bench",
        "cluster": {"id": cluster, "tier": "dedicated"}, "operation": "query_range",
        "window": {"start": ts(query.start)?, "end": ts(query.end)?},
        "lookback": 3600,
        "limits": {"max_points_per_series": 11000, "min_step": 15, "max_batch": 4,
                   "max_series_kept": 10, "max_calls_per_turn": 8},
        "discovery": {"max_items": 50},
    });
    Ok(support::policy::issued(
        policy,
        jiff::Timestamp::now(),
        FIXTURE_VALIDITY,
    ))
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
