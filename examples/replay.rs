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

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use evidence_test_support as support;
use managed_evidence::connectors::{
    BrowserConfig, ClinicConfig, ClinicConnector, ClinicSecrets, Connector, HostAllowlist,
    ManusConfig, ManusConnector, ManusSecrets, ReferenceKeyRing, WebDriverEndpoint, WetechConfig,
    WetechConnector, WetechSecrets,
};
use managed_evidence::materialize::{Admission, Call, Handoff, Outcome, Turn, TurnLimits};
use managed_evidence::package::{Manifest, Package, PackageFile, SecretBinding, SecretValues};
use managed_evidence::policy::{KeyId, KeyRing, ManusTarget, PolicySigner, TrustedPolicy};
use managed_evidence::result::{RequestDigest, ToolResult};
use managed_evidence::tool::{PolicyInput, SandboxCall, prepare};
use managed_evidence::workspace::{
    ChildOutputReader, GenerateOptions, Generator, SkillCatalog, SkillsTree,
};
use secrecy::SecretString;
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const CLINIC_TOKEN: &str = "replay-clinic-token-5b1e0c7d";
const MANUS_USER: &str = "replay-evidence-reader";
const MANUS_PASSWORD: &str = "replay-manus-password-93c2";
const POLICY_KID: &str = "replay-2026";
const WETECH_RESULT: &str = "wetech_corrected_result.json";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Offline,
    Live,
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

fn recordings_dir() -> PathBuf {
    Path::new(ROOT).join("fixtures/recordings")
}

/// The Prometheus stand-ins: recorded servers offline, real servers (behind recording
/// proxies) live.
enum Backends {
    Offline(Vec<support::RecordedPrometheus>),
    Live {
        _servers: Vec<support::Prometheus>,
        proxies: Vec<(&'static str, support::RecordingProxy)>,
    },
}

impl Backends {
    async fn start(mode: Mode) -> Result<Self, Box<dyn Error>> {
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

    fn url(&self, index: usize) -> Result<String, Box<dyn Error>> {
        match self {
            Backends::Offline(s) => s.get(index).map(|s| s.url()),
            Backends::Live { proxies, .. } => proxies.get(index).map(|(_, p)| p.url()),
        }
        .ok_or_else(|| "no such backend".into())
    }

    fn write_recordings(&self) -> Result<(), Box<dyn Error>> {
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

    fn misses(&self) -> usize {
        match self {
            Backends::Offline(s) => s.iter().map(|s| s.misses().len()).sum(),
            Backends::Live { .. } => 0,
        }
    }
}

/// A committed package revision as deployed locally: the same manifest and source files,
/// with the network allowlist naming the loopback address the local stand-ins listen on
/// (the package digest covers the allowlist, so this is a package of its own), and this
/// replay's own binary as the entrypoint file (the code that runs the calls here).
fn local_package(identity: &str, revision: &str) -> Result<Package, Box<dyn Error>> {
    let dir = Path::new(ROOT)
        .join("packages")
        .join(identity)
        .join(revision);
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json"))?)?;
    manifest["network"] = json!({"mode": "restricted", "hosts": ["127.0.0.1"]});
    let manifest = Manifest::from_json(&manifest.to_string())?;
    let source = Package::load_source(&dir)?;
    let mut files: Vec<PackageFile> = source.files().to_vec();
    files.push(PackageFile::new(
        manifest.entrypoint.clone(),
        true,
        std::fs::read(std::env::current_exe()?)?,
    ));
    Ok(Package::new(&manifest, files)?)
}

fn bind(package: &Package, values: &[(&str, &str)]) -> Result<SecretBinding, Box<dyn Error>> {
    let mut secrets = SecretValues::new();
    for (name, value) in values {
        secrets.insert(*name, SecretString::from((*value).to_owned()));
    }
    Ok(SecretBinding::bind(package, secrets)?)
}

fn policy(
    id: &str,
    ticket: &str,
    package: &Package,
    cluster: &str,
    start: i64,
    end: i64,
    extra: Value,
) -> Result<TrustedPolicy, Box<dyn Error>> {
    let now = jiff::Timestamp::now();
    let ts = |s: i64| jiff::Timestamp::from_second(s).map(|t| t.to_string());
    let mut value = json!({
        "policy_id": id,
        "ticket": ticket,
        "provider": package.manifest().provider,
        "package": package.identity(),
        "account": "acct-replay",
        "cluster": {"id": cluster, "tier": "dedicated"},
        "operation": "query_range",
        "window": {"start": ts(start)?, "end": ts(end)?},
        "lookback": 3600,
        "limits": {"max_points_per_series": 11000, "min_step": 15, "max_batch": 4,
                   "max_series_kept": 10, "max_calls_per_turn": 8},
        "issued_at": now.to_string(),
        "expires_at": (now + jiff::SignedDuration::from_hours(1)).to_string(),
    });
    if let (Some(obj), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            obj.insert(k.clone(), v.clone());
        }
    }
    Ok(serde_json::from_value(value)?)
}

/// One package as deployed locally: its connector, configuration, secrets and binding.
struct Deployed<'a, C: Connector> {
    connector: &'a C,
    config: &'a C::Config,
    secrets: &'a C::Secrets,
    package: &'a Package,
    binding: &'a SecretBinding,
}

/// One Evidence Agent turn: each call is locked locally for its request digest, asked
/// of the turn, run through the sandbox path, and recorded.
struct Session<'a> {
    keys: &'a KeyRing,
    signer: &'a PolicySigner,
    turn: Turn,
}

impl<'a> Session<'a> {
    /// A new turn of at most 8 calls.
    fn new(keys: &'a KeyRing, signer: &'a PolicySigner) -> Self {
        Session {
            keys,
            signer,
            turn: Turn::new(TurnLimits::new(8)),
        }
    }

    /// Ends the turn: materializes it, prints its summary and returns the handoff.
    fn finish(self) -> Result<Handoff, Box<dyn Error>> {
        let handoff = self.turn.into_handoff()?;
        print_handoff(&handoff)?;
        Ok(handoff)
    }

    async fn call<C: Connector>(
        &mut self,
        deployed: &Deployed<'_, C>,
        policy: &TrustedPolicy,
        args: Value,
    ) -> Result<ToolResult, Box<dyn Error>> {
        let package = deployed.package;
        let envelope = self.signer.sign(policy, package.digest())?;
        let args = args.to_string();
        let prepared = prepare(SandboxCall {
            package,
            binding: deployed.binding,
            policy: PolicyInput::Envelope {
                envelope: &envelope,
                keys: self.keys,
            },
            args: &args,
            now: jiff::Timestamp::now(),
        })?;
        let ticket = match self.turn.admit(&prepared.plan())? {
            Admission::Admit(ticket) => ticket,
            Admission::Refuse(refusal) => return Ok(refusal.result),
        };
        let started = Instant::now();
        let outcome = prepared
            .run(deployed.connector, deployed.config, deployed.secrets)
            .await?;
        self.turn
            .record(ticket, outcome.result.clone(), started.elapsed())?;
        Ok(outcome.result)
    }

    /// Records a result made elsewhere (the recorded Wetech browser result) as the
    /// outcome of an admitted call.
    fn record_external(&mut self, call: Call, result: ToolResult) -> Result<(), Box<dyn Error>> {
        match self.turn.admit(&call)? {
            Admission::Admit(ticket) => Ok(self.turn.record(ticket, result, Duration::ZERO)?),
            Admission::Refuse(refusal) => Err(format!("refused: {}", refusal.result.text()).into()),
        }
    }
}

fn describe(result: &ToolResult) -> String {
    let d = result.details();
    let one = |status: &str,
               evidence: Option<&managed_evidence::result::Evidence>,
               error: Option<&managed_evidence::result::ErrorInfo>|
     -> String {
        match (evidence, error) {
            (Some(e), _) if e.is_no_data() => {
                "no_data (no series; kept unverified, never zero)".to_owned()
            }
            (Some(e), _) => format!(
                "{status}: {} series, {} points, top peak {} {}; peaks of all series min/p50/p90/max {}; non-finite points {}",
                e.series_count,
                e.point_count,
                e.top_peak().map_or("n/a".to_owned(), |p| p.to_string()),
                e.unit.as_deref().unwrap_or(""),
                e.peak_spread.map_or("n/a".to_owned(), |s| format!(
                    "{}/{}/{}/{}",
                    s.min, s.p50, s.p90, s.max
                )),
                e.non_finite.map_or(0, |n| n.points)
            ),
            (None, Some(err)) => format!("{status}: {} ({})", err.code, err.class),
            _ => status.to_owned(),
        }
    };
    if d.items.is_empty() {
        let status = serde_json::to_value(d.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        one(&status, d.evidence.as_deref(), d.error.as_ref())
    } else {
        d.items
            .iter()
            .map(|i| {
                format!(
                    "[{}] {}",
                    i.query_id,
                    one(
                        if i.is_failed() { "error" } else { "ok" },
                        i.evidence.as_deref(),
                        i.error.as_ref()
                    )
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn print_handoff(handoff: &Handoff) -> Result<(), Box<dyn Error>> {
    println!("  acquisition: {:?}", handoff.acquisition);
    for p in &handoff.providers {
        println!("  provider {}: capability {:?}", p.provider, p.capability);
    }
    for o in &handoff.objectives {
        println!(
            "  objective {} ({}): {:?}, verified={}, attempts total={} admitted={} refused={}",
            o.query_id,
            o.package,
            o.outcome,
            o.verified,
            o.attempts.total,
            o.attempts.admitted,
            o.attempts.refused
        );
    }
    Ok(())
}

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
    let mut handoffs: Vec<(&str, Handoff)> = Vec::new();

    // ---- Clinic: APID-29213 and ST-2865 ----
    let clinic_pkg = local_package("managed_auto_oncall_clinic", "v3")?;
    let clinic_binding = bind(&clinic_pkg, &[("clinic_api_token", CLINIC_TOKEN)])?;
    let clinic_front = support::ClinicFront::start(
        &backends.url(0)?,
        SecretString::from(CLINIC_TOKEN.to_owned()),
    )
    .await?;
    let clinic_config = ClinicConfig::new(
        url::Url::parse(&clinic_front.base_url())?,
        HostAllowlist::from_network(&clinic_pkg.manifest().network)?,
    );
    let clinic_secrets = ClinicSecrets::new(SecretString::from(CLINIC_TOKEN.to_owned()));
    let clinic = ClinicConnector::new()?;
    let clinic_d = Deployed {
        connector: &clinic,
        config: &clinic_config,
        secrets: &clinic_secrets,
        package: &clinic_pkg,
        binding: &clinic_binding,
    };
    println!(
        "\nClinic package {} {} digest {}",
        clinic_pkg.identity(),
        clinic_pkg.revision(),
        clinic_pkg.digest()
    );

    println!("\n-- APID-29213: SaaS01 TiDB CPU, 2026-07-21 21:50-22:05 UTC+8 (Clinic v3) --");
    let p = policy(
        "pol-APID-29213",
        "APID-29213",
        &clinic_pkg,
        "SaaS01",
        support::APID_29213_START,
        support::APID_29213_END,
        json!({}),
    )?;
    let mut session = Session::new(&keys, &signer);
    let r = session.call(&clinic_d, &p, json!({
        "queries": [{"queryId": "tidb_cpu", "expr": "sum by (instance) (rate(process_cpu_seconds_total{job=\"tidb\"}[1m]))", "step": "15s", "unit": "cores"}]
    })).await?;
    println!("  call 1: {}", describe(&r));
    handoffs.push(("APID-29213", session.finish()?));

    println!("\n-- ST-2865: SaaS02 memory, bounded 60-minute window on 2026-08-05 (Clinic v3) --");
    let p = policy(
        "pol-ST-2865",
        "ST-2865",
        &clinic_pkg,
        "SaaS02",
        support::ST_2865_START,
        support::ST_2865_END,
        json!({}),
    )?;
    let mut session = Session::new(&keys, &signer);
    let r = session.call(&clinic_d, &p, json!({
        "queries": [{"queryId": "mem_used_pct", "expr": "100 * (1 - node_memory_MemAvailable_bytes{job=\"node\"} / node_memory_MemTotal_bytes{job=\"node\"})", "step": "15s", "unit": "%"}]
    })).await?;
    println!("  call 1: {}", describe(&r));
    let r = session.call(&clinic_d, &p, json!({
        "queries": [{"queryId": "tikv_engine_size", "expr": "sum by (instance) (tikv_engine_size_bytes{job=\"tikv\"})", "step": "15s", "unit": "bytes"}]
    })).await?;
    println!("  call 2: {}", describe(&r));
    handoffs.push(("ST-2865", session.finish()?));

    // ---- Manus vida: opaque references ----
    println!("\n-- Manus target vida: SaaS01 TiDB CPU, instance addresses as opaque references --");
    let manus_pkg = local_package("managed_auto_oncall_manus", "v2")?;
    let ref_keys = format!(
        "ref-1:{}",
        base64::engine::general_purpose::STANDARD.encode(rand_key())
    );
    let manus_binding = bind(
        &manus_pkg,
        &[
            ("manus_username", MANUS_USER),
            ("manus_password", MANUS_PASSWORD),
            ("manus_reference_keys", &ref_keys),
        ],
    )?;
    let vida_front = support::ManusFront::start(
        "vida",
        &backends.url(1)?,
        SecretString::from(MANUS_USER.to_owned()),
        SecretString::from(MANUS_PASSWORD.to_owned()),
    )
    .await?;
    let monica_front = support::ManusFront::start(
        "monica",
        &backends.url(2)?,
        SecretString::from(MANUS_USER.to_owned()),
        SecretString::from(MANUS_PASSWORD.to_owned()),
    )
    .await?;
    let manus_config =
        ManusConfig::new(HostAllowlist::from_network(&manus_pkg.manifest().network)?)
            .with_target(ManusTarget::Vida, url::Url::parse(&vida_front.base_url())?)
            .with_target(
                ManusTarget::Monica,
                url::Url::parse(&monica_front.base_url())?,
            );
    let manus_secrets = ManusSecrets::new(
        SecretString::from(MANUS_USER.to_owned()),
        SecretString::from(MANUS_PASSWORD.to_owned()),
        ReferenceKeyRing::parse_secret(&SecretString::from(ref_keys.clone()))?,
    );
    let manus = ManusConnector::new()?;
    let manus_d = Deployed {
        connector: &manus,
        config: &manus_config,
        secrets: &manus_secrets,
        package: &manus_pkg,
        binding: &manus_binding,
    };
    let p = policy(
        "pol-APID-29213-vida",
        "APID-29213",
        &manus_pkg,
        "SaaS01",
        support::APID_29213_START,
        support::APID_29213_END,
        json!({"manus_target": "vida"}),
    )?;
    let mut session = Session::new(&keys, &signer);
    let r = session.call(&manus_d, &p, json!({
        "queryId": "vida_tidb_cpu", "expr": "sum by (instance) (rate(process_cpu_seconds_total{job=\"tidb\"}[1m]))", "step": "15s"
    })).await?;
    println!("  call 1: {}", describe(&r));
    // The instance label of a result's top row, as the model sees it (a reference).
    let top_instance = |r: &ToolResult| {
        r.details()
            .evidence
            .as_ref()
            .and_then(|e| e.series.first())
            .and_then(|s| s.labels.get("instance"))
            .cloned()
    };
    let reference = top_instance(&r).ok_or("the vida result carries no instance reference")?;
    let shown: String = reference.chars().take(24).collect();
    println!(
        "  instance label as the model sees it: {shown}... (sealed, {} chars; no address)",
        reference.len()
    );
    let r = session.call(&manus_d, &p, json!({
        "queryId": "vida_top_instance_cpu", "expr": "rate(process_cpu_seconds_total{job=\"tidb\"}[1m])", "step": "15s", "instanceRef": reference
    })).await?;
    println!("  call 2 (instanceRef passed back): {}", describe(&r));
    let named = top_instance(&r).ok_or("the follow-up carries no instance reference")?;
    if named != reference {
        return Err("the follow-up names the instance under another reference".into());
    }
    println!(
        "  call 2 names its instance {}... : the same reference as call 1 (deterministic sealing)",
        named.chars().take(24).collect::<String>()
    );
    handoffs.push(("manus-vida", session.finish()?));

    // ---- Wetech: unit rejection corrected in the same turn ----
    println!("\n-- Wetech: a `unit` rejection corrected in the same turn --");
    let wetech_pkg = local_package("managed_auto_oncall_wetech", "v2")?;
    let storage_state = json!({
        "cookies": [{"name": support::GRAFANA_SESSION_COOKIE_NAME, "value": support::GRAFANA_SESSION_COOKIE_VALUE,
                     "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": true, "secure": false, "sameSite": "Lax"}],
        "origins": []
    })
    .to_string();
    let wetech_binding = bind(&wetech_pkg, &[("wetech_storage_state", &storage_state)])?;
    let grafana = support::GrafanaFront::start(&backends.url(0)?).await?;
    let browser = BrowserConfig::new(
        "/usr/bin/chromium",
        WebDriverEndpoint::Spawn {
            chromedriver: PathBuf::from("/usr/bin/chromedriver"),
        },
    );
    let wetech_config = WetechConfig::new(
        url::Url::parse(&grafana.base_url())?,
        HostAllowlist::from_network(&wetech_pkg.manifest().network)?,
        browser,
    );
    let wetech_secrets = WetechSecrets::new(SecretString::from(storage_state.clone()));
    let wetech = WetechConnector::new();
    let wetech_d = Deployed {
        connector: &wetech,
        config: &wetech_config,
        secrets: &wetech_secrets,
        package: &wetech_pkg,
        binding: &wetech_binding,
    };
    let p = policy(
        "pol-APID-29213-wetech",
        "APID-29213",
        &wetech_pkg,
        "SaaS01",
        support::APID_29213_START,
        support::APID_29213_END,
        json!({"wetech_query_ids": ["tidb_cpu"], "wetech_datasource": grafana.datasource_uid()}),
    )?;
    let mut session = Session::new(&keys, &signer);
    let expr = "sum by (instance) (rate(process_cpu_seconds_total{job=\"tidb\"}[1m]))";
    let r = session.call(&wetech_d, &p, json!({
        "queryId": "tidb_cpu", "expr": expr, "step": "15s", "unit": "CPU cores, summed over all TiDB instances"
    })).await?;
    println!(
        "  call 1 (answered before any browser start): {}",
        describe(&r)
    );
    if let Some(c) = &r.details().correction {
        println!("  correction: allowed={} keep={:?}", c.allowed, c.keep);
    }
    let corrected_args =
        json!({"queryId": "tidb_cpu", "expr": expr, "step": "15s", "unit": "cores"});
    let browser_present =
        Path::new("/usr/bin/chromium").exists() && Path::new("/usr/bin/chromedriver").exists();
    if mode != Mode::Offline && browser_present {
        let r = session.call(&wetech_d, &p, corrected_args).await?;
        println!("  call 2 (real Chromium): {}", describe(&r));
        if mode == Mode::Record {
            std::fs::create_dir_all(recordings_dir())?;
            std::fs::write(recordings_dir().join(WETECH_RESULT), r.to_json()? + "\n")?;
        }
    } else {
        if mode != Mode::Offline {
            println!(
                "  Chromium is not installed: the corrected call uses the recorded browser result"
            );
        }
        let text = std::fs::read_to_string(recordings_dir().join(WETECH_RESULT))?;
        let recorded = ToolResult::from_json(&text)?;
        // The corrected call is prepared (verified and locked) exactly as a live one; the
        // recorded result must answer its request digest.
        let envelope = signer.sign(&p, wetech_pkg.digest())?;
        let args = corrected_args.to_string();
        let prepared = prepare(SandboxCall {
            package: &wetech_pkg,
            binding: &wetech_binding,
            policy: PolicyInput::Envelope {
                envelope: &envelope,
                keys: &keys,
            },
            args: &args,
            now: jiff::Timestamp::now(),
        })?;
        let call = prepared.plan();
        let digest: Option<RequestDigest> = call.queries.first().and_then(|q| q.request_digest);
        if digest.is_none() || recorded.details().request_digest != digest {
            return Err("the recorded Wetech result is for another request: re-record".into());
        }
        session.record_external(call, recorded.clone())?;
        println!(
            "  call 2 (RECORDED result of a real Chromium run): {}",
            describe(&recorded)
        );
    }
    handoffs.push(("wetech", session.finish()?));

    if mode == Mode::Record {
        backends.write_recordings()?;
        println!("\nrecordings written to {}", recordings_dir().display());
    }
    if backends.misses() > 0 {
        return Err(format!("{} requests had no recording: re-record", backends.misses()).into());
    }

    // ---- Investibook workspace and the evidence agent's output ----
    println!("\n-- Investibook workspace --");
    let dir = tempfile::tempdir()?;
    let skills = SkillsTree::load(
        Path::new(ROOT).join("crates/opencode-workspace/tests/fixtures/agentkit/skills"),
    )?;
    let generator = Generator::new(
        &SkillCatalog::investibook()?,
        &skills,
        GenerateOptions::default(),
    )?;
    let report = generator.write(dir.path())?;
    println!(
        "  generated {} files into {} (mode {:?})",
        report.files.len(),
        dir.path().display(),
        report.mode
    );
    let output = evidence_agent_output(&handoffs)?;
    let out_path = dir.path().join("evidences/agent-runs/evidence-agent.json");
    std::fs::write(&out_path, serde_json::to_string_pretty(&output)? + "\n")?;
    std::fs::write(
        dir.path().join("evidences/metrics.json"),
        serde_json::to_string_pretty(
            &handoffs
                .iter()
                .map(|(t, h)| json!({"scenario": t, "handoff": h}))
                .collect::<Vec<_>>(),
        )? + "\n",
    )?;
    let reader = ChildOutputReader::new()?;
    reader.read_evidence(dir.path())?;
    println!("  evidences/agent-runs/evidence-agent.json validates against its schema");

    println!("\n== handoff JSON ==");
    for (title, h) in &handoffs {
        println!("--- {title} ---");
        println!("{}", h.to_json()?);
    }
    Ok(())
}

fn evidence_agent_output(handoffs: &[(&str, Handoff)]) -> Result<Value, Box<dyn Error>> {
    let mut missing = Vec::new();
    let mut summary = Vec::new();
    let mut all_ok = true;
    for (title, h) in handoffs {
        for o in &h.objectives {
            match o.outcome {
                Outcome::Ok => summary.push(format!("{title}/{}: ok", o.query_id)),
                Outcome::NoData => missing.push(format!(
                    "{title}/{}: no series returned (unverified, not zero)",
                    o.query_id
                )),
                _ => {
                    all_ok = false;
                    missing.push(format!("{title}/{}: {:?}", o.query_id, o.outcome));
                }
            }
        }
    }
    Ok(json!({
        "agent": "evidence-agent",
        "status": if all_ok { "ok" } else { "partial" },
        "summary": format!("Replayed seed incidents: {}.", summary.join(", ")),
        "scope": {"cluster_id": "SaaS01", "time_range": {"start": "2026-07-21T21:50:00+08:00", "end": "2026-07-21T22:05:00+08:00", "timezone": "Asia/Shanghai"},
                  "tier": "dedicated", "parent_id": "", "keyspace_id": ""},
        "evidence_files": ["evidences/metrics.json"],
        "missing_evidence": missing,
        "warnings": [],
        "next_recommended_skills": ["tidb-clinic-diagnosis"]
    }))
}

fn rand_key() -> [u8; 32] {
    use rand::RngCore as _;
    let mut key = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut key);
    key
}
