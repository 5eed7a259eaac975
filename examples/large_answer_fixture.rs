//! The fixture side of `benches/large_answer.py`: starts a real Prometheus over the
//! large TiKV thread-CPU data set of `evidence-test-support` (`--series N` threads, 241
//! points each over the hour) and the provider's test front before it (`--provider
//! clinic`, the default: the Clinic front; `--provider wetech`: the Grafana front, whose
//! datasource proxy the tool's Chromium reaches), makes a deployable package folder
//! (Clinic v3 or Wetech v2, loopback allowlist) around the given tool binary, signs one
//! trusted policy for `rate(tikv_thread_cpu_seconds_total[1m])` over that hour with a
//! throwaway key, and prints one JSON line: the front's `query_range` URL and the header
//! that authorizes it (for `curl` of the same body), the packaged entrypoint, the model
//! arguments, the environment the entrypoint runs with, and the expected top series and
//! peak. It keeps everything running until its stdin closes.
//!
//! ```sh
//! cargo build --release -p evidence-tool --bin clinic-tool
//! cargo run --release --example large_answer_fixture -- --tool-binary target/release/clinic-tool --series 5000
//! cargo build --release -p evidence-tool --bin wetech-tool
//! cargo run --release --example large_answer_fixture -- --tool-binary target/release/wetech-tool --series 5000 --provider wetech
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
            eprintln!("large_answer_fixture: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run()) {
        eprintln!("large_answer_fixture: {e}");
        std::process::exit(1);
    }
}

/// The provider whose tool is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    Clinic,
    Wetech,
}

struct Options {
    binary: PathBuf,
    series: usize,
    provider: Provider,
    /// Clinic only: the front answers `N` series of one `BYTES`-byte label value each
    /// instead of forwarding to Prometheus (`--long-labels N,BYTES`).
    long_labels: Option<(usize, usize)>,
}

fn options() -> Result<Options, Box<dyn Error>> {
    let usage = "usage: large_answer_fixture --tool-binary PATH --series N [--provider clinic|wetech] [--long-labels N,BYTES]";
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut binary, mut series, mut provider) = (None, None, Provider::Clinic);
    let mut long_labels = None;
    for pair in args.chunks(2) {
        match pair {
            [flag, path] if flag == "--tool-binary" => binary = Some(PathBuf::from(path)),
            [flag, n] if flag == "--series" => series = Some(n.parse::<usize>()?),
            [flag, spec] if flag == "--long-labels" => {
                let (n, bytes) = spec.split_once(',').ok_or(usage)?;
                long_labels = Some((n.parse::<usize>()?, bytes.parse::<usize>()?));
            }
            [flag, name] if flag == "--provider" => {
                provider = match name.as_str() {
                    "clinic" => Provider::Clinic,
                    "wetech" => Provider::Wetech,
                    _ => return Err(usage.into()),
                }
            }
            _ => return Err(usage.into()),
        }
    }
    match (binary, series) {
        (Some(binary), Some(series)) => Ok(Options {
            binary,
            series,
            provider,
            long_labels,
        }),
        _ => Err(usage.into()),
    }
}

/// A provider's front before the Prometheus, and what a call and `curl` need from it.
struct Front {
    /// Keeps the front serving.
    _server: Box<dyn std::any::Any>,
    identity: &'static str,
    revision: &'static str,
    query_range_url: String,
    /// The header that authorizes `curl` of the same body.
    curl_header: String,
    /// The model arguments of the call.
    args: Value,
    /// The provider's part of the tool's environment.
    env: Vec<(&'static str, String)>,
    /// The provider's part of the trusted policy.
    policy: Value,
}

async fn clinic_front(
    prometheus: &support::LargePrometheus,
    long_labels: Option<(usize, usize)>,
) -> Result<Front, Box<dyn Error>> {
    let mut token_bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut token_bytes);
    let token = hex::encode(token_bytes);
    let front =
        support::ClinicFront::start(&prometheus.url(), SecretString::from(token.clone())).await?;
    if let Some((series, label_bytes)) = long_labels {
        front.faults().set_fault(support::Fault::LongLabels {
            series,
            label_bytes,
            filler: "select 1 ",
        });
    }
    let query = support::TIKV_THREAD_CPU_RATE;
    Ok(Front {
        identity: "managed_auto_oncall_clinic",
        revision: "v3",
        query_range_url: front.query_range_url(support::TIKV_THREADS_CLUSTER),
        curl_header: format!("Authorization: Bearer {token}"),
        args: json!({"queries": [{"queryId": query.name, "expr": query.expr,
                                  "step": format!("{}s", query.step_seconds), "unit": "cores"}]}),
        env: vec![
            ("CLINIC_BASE_URL", front.base_url()),
            (
                "CLINIC_QUERY_PATH_TEMPLATE",
                support::ClinicFront::QUERY_RANGE_PATH_TEMPLATE.to_owned(),
            ),
            ("CLINIC_API_TOKEN", token),
        ],
        policy: json!({"provider": "clinic", "package": "managed_auto_oncall_clinic",
                       "limits": {"max_batch": 4}, "discovery": {"max_items": 50}}),
        _server: Box::new(front),
    })
}

async fn wetech_front(prometheus: &support::LargePrometheus) -> Result<Front, Box<dyn Error>> {
    let front = support::GrafanaFront::start(&prometheus.url()).await?;
    let query = support::TIKV_THREAD_CPU_RATE;
    let cookie = format!(
        "{}={}",
        support::GRAFANA_SESSION_COOKIE_NAME,
        support::GRAFANA_SESSION_COOKIE_VALUE
    );
    let state = json!({
        "cookies": [{"name": support::GRAFANA_SESSION_COOKIE_NAME,
                     "value": support::GRAFANA_SESSION_COOKIE_VALUE, "domain": "127.0.0.1",
                     "path": "/", "expires": -1, "httpOnly": true, "secure": false,
                     "sameSite": "Lax"}],
        "origins": []
    });
    Ok(Front {
        identity: "managed_auto_oncall_wetech",
        revision: "v2",
        query_range_url: format!("{}{}", front.base_url(), front.query_range_path()),
        curl_header: format!("Cookie: {cookie}"),
        args: json!({"queryId": query.name, "expr": query.expr,
                     "step": format!("{}s", query.step_seconds), "unit": "cores"}),
        env: vec![
            ("WETECH_GRAFANA_URL", front.base_url()),
            ("WETECH_STORAGE_STATE", state.to_string()),
            (
                "WETECH_CHROMIUM",
                support::Chromium::find()?.path().display().to_string(),
            ),
            ("WETECH_CHROMEDRIVER", "/usr/bin/chromedriver".to_owned()),
        ],
        policy: json!({"provider": "wetech", "package": "managed_auto_oncall_wetech",
                       "wetech_query_ids": [query.name],
                       "wetech_datasource": support::GrafanaFront::DATASOURCE_UID,
                       "limits": {"max_batch": 1}}),
        _server: Box::new(front),
    })
}

async fn run() -> Result<(), Box<dyn Error>> {
    let Options {
        binary,
        series,
        provider,
        long_labels,
    } = options()?;
    let data = support::TikvThreads::new(series);
    let prometheus = support::LargePrometheus::start(data).await?;
    let front = match provider {
        Provider::Clinic => clinic_front(&prometheus, long_labels).await?,
        Provider::Wetech => wetech_front(&prometheus).await?,
    };

    let dir = tempfile::Builder::new().prefix("large-answer-").tempdir()?;
    let source = local_source(dir.path(), front.identity, front.revision)?;
    let package_dir = dir.path().join(front.identity);
    let package = build_deployable(&source, &binary, &package_dir)?;
    let digest = package.digest();
    let tool = package_dir.join(&package.manifest().entrypoint);
    let signer = PolicySigner::generate(KeyId::new(KID)?)?;
    let keys = signer.key_ring_entry();

    let query = support::TIKV_THREAD_CPU_RATE;
    let policy: TrustedPolicy = serde_json::from_value(policy(&query, &front.policy)?)?;
    let envelope = dir.path().join("envelope.json");
    std::fs::write(&envelope, signer.sign(&policy, digest)?.to_json()?)?;
    let hot = data.top_index();
    let mut env = json!({
        "EVIDENCE_TRUSTED_CONTEXT": envelope,
        "EVIDENCE_POLICY_KEYS": keys,
        "EVIDENCE_AUDIT_LOG": dir.path().join("audit.jsonl"),
    });
    for (name, value) in &front.env {
        env[*name] = json!(value);
    }
    println!(
        "{}",
        json!({
            "prometheus_url": prometheus.url(),
            "query_range_url": front.query_range_url,
            "curl_header": front.curl_header,
            "tool": tool,
            "series": series,
            "start": query.start,
            "end": query.end,
            "step_seconds": query.step_seconds,
            "args": front.args,
            "env": env,
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

/// The trusted policy of the thread-CPU query: its cluster and exactly its window, with
/// the provider's part (`provider`, `package`, the Wetech query ids and datasource, the
/// batch size) merged in.
fn policy(query: &support::FixtureQuery, provider: &Value) -> Result<Value, Box<dyn Error>> {
    let ts = |s: i64| -> Result<String, Box<dyn Error>> {
        Ok(jiff::Timestamp::from_second(s)?.to_string())
    };
    let mut policy = json!({
        "policy_id": "pol-large-answer", "ticket": "TIKV-5000", "account": "acct-bench",
        "cluster": {"id": support::TIKV_THREADS_CLUSTER, "tier": "dedicated"},
        "operation": "query_range",
        "window": {"start": ts(query.start)?, "end": ts(query.end)?},
        "lookback": 3600,
        "limits": {"max_points_per_series": 11000, "min_step": 15,
                   "max_series_kept": 10, "max_calls_per_turn": 8},
    });
    if let Some(fields) = provider.as_object() {
        for (key, value) in fields {
            match (key.as_str(), value.as_object()) {
                ("limits", Some(limits)) => {
                    for (name, limit) in limits {
                        policy["limits"][name] = limit.clone();
                    }
                }
                _ => policy[key] = value.clone(),
            }
        }
    }
    Ok(support::policy::issued(
        policy,
        jiff::Timestamp::now(),
        FIXTURE_VALIDITY,
    ))
}

/// A copy of the committed package source `identity`/`revision` whose network
/// allowlist is the loopback address of the test front.
fn local_source(dir: &Path, identity: &str, revision: &str) -> Result<PathBuf, Box<dyn Error>> {
    let src = Path::new(ROOT)
        .join("packages")
        .join(identity)
        .join(revision);
    Ok(support::loopback_package_source(
        &src,
        &dir.join(format!("{identity}-src")),
    )?)
}
