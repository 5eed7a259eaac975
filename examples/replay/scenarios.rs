//! The replay's scenarios, one function each: the Clinic incidents APID-29213 and
//! ST-2865, Manus target vida with opaque references, the Wetech `unit` rejection
//! corrected in the same turn, and the Investibook workspace that takes their handoffs.

use std::error::Error;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use evidence_test_support as support;
use managed_evidence::connectors::{
    BrowserConfig, ClinicConfig, ClinicConnector, ClinicSecrets, HostAllowlist, ManusConfig,
    ManusConnector, ManusSecrets, ReferenceKeyRing, WebDriverEndpoint, WetechConfig,
    WetechConnector, WetechSecrets,
};
use managed_evidence::materialize::Handoff;
use managed_evidence::package::Package;
use managed_evidence::policy::{KeyRing, ManusTarget, PolicySigner, TrustedPolicy};
use managed_evidence::result::{RequestDigest, ToolResult};
use managed_evidence::tool::{PolicyInput, SandboxCall, prepare};
use managed_evidence::workspace::{
    ChildOutputReader, GenerateOptions, Generator, SkillCatalog, SkillsTree,
};
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::backends::{Backends, recordings_dir};
use crate::deploy::{bind, local_package, policy, rand_key};
use crate::report::{describe, evidence_agent_output};
use crate::session::{Deployed, Session};
use crate::{Mode, ROOT};

const CLINIC_TOKEN: &str = "replay-clinic-token-5b1e0c7d";
const MANUS_USER: &str = "replay-evidence-reader";
const MANUS_PASSWORD: &str = "replay-manus-password-93c2";
const WETECH_RESULT: &str = "wetech_corrected_result.json";
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// What every scenario shares: the mode, the Prometheus stand-ins, and Auto-oncall's
/// signing key with the verification keys the tool sandboxes hold.
pub(crate) struct Replay {
    pub(crate) mode: Mode,
    pub(crate) backends: Backends,
    pub(crate) signer: PolicySigner,
    pub(crate) keys: KeyRing,
}

impl Replay {
    /// A new turn of this replay.
    fn session(&self) -> Session<'_> {
        Session::new(&self.keys, &self.signer)
    }
}

/// The Clinic package (v3) deployed in front of the `main` stand-in; the front lives as
/// long as the returned handle.
pub(crate) async fn deploy_clinic(
    replay: &Replay,
) -> Result<(support::ClinicFront, Deployed<ClinicConnector>), Box<dyn Error>> {
    let package = local_package("managed_auto_oncall_clinic", "v3")?;
    let binding = bind(&package, &[("clinic_api_token", CLINIC_TOKEN)])?;
    let front = support::ClinicFront::start(
        &replay.backends.url(0)?,
        SecretString::from(CLINIC_TOKEN.to_owned()),
    )
    .await?;
    let config = ClinicConfig::new(
        url::Url::parse(&front.base_url())?,
        HostAllowlist::from_network(&package.manifest().network)?,
    );
    println!(
        "\nClinic package {} {} digest {}",
        package.identity(),
        package.revision(),
        package.digest()
    );
    let deployed = Deployed {
        connector: ClinicConnector::new()?,
        config,
        secrets: ClinicSecrets::new(SecretString::from(CLINIC_TOKEN.to_owned())),
        package,
        binding,
    };
    Ok((front, deployed))
}

/// The trusted policy of APID-29213 (SaaS01, 2026-07-21 21:50–22:05 UTC+8) for `package`,
/// with `extra` fields added.
fn apid_29213_policy(
    id: &str,
    package: &Package,
    extra: Value,
) -> Result<TrustedPolicy, Box<dyn Error>> {
    policy(
        id,
        "APID-29213",
        package,
        "SaaS01",
        support::APID_29213_START,
        support::APID_29213_END,
        extra,
    )
}

/// APID-29213: SaaS01 TiDB CPU per instance over the incident window, one Clinic call.
pub(crate) async fn apid_29213(
    replay: &Replay,
    clinic: &Deployed<ClinicConnector>,
) -> Result<Handoff, Box<dyn Error>> {
    println!("\n-- APID-29213: SaaS01 TiDB CPU, 2026-07-21 21:50-22:05 UTC+8 (Clinic v3) --");
    let p = apid_29213_policy("pol-APID-29213", &clinic.package, json!({}))?;
    let mut session = replay.session();
    let r = session.call(clinic, &p, json!({
        "queries": [{"queryId": "tidb_cpu", "expr": "sum by (instance) (rate(process_cpu_seconds_total{job=\"tidb\"}[1m]))", "step": "15s", "unit": "cores"}]
    })).await?;
    println!("  call 1: {}", describe(&r));
    session.finish()
}

/// ST-2865: SaaS02 memory over a bounded 60-minute window, then a TiKV query that has no
/// series for the cluster (`no_data`, never zero), then a discovery of the TiKV metric
/// names the cluster has in its window (the policy grants discovery): three Clinic calls.
pub(crate) async fn st_2865(
    replay: &Replay,
    clinic: &Deployed<ClinicConnector>,
) -> Result<Handoff, Box<dyn Error>> {
    println!("\n-- ST-2865: SaaS02 memory, bounded 60-minute window on 2026-08-05 (Clinic v3) --");
    let p = policy(
        "pol-ST-2865",
        "ST-2865",
        &clinic.package,
        "SaaS02",
        support::ST_2865_START,
        support::ST_2865_END,
        json!({"discovery": {"max_items": 20}}),
    )?;
    let mut session = replay.session();
    let r = session.call(clinic, &p, json!({
        "queries": [{"queryId": "mem_used_pct", "expr": "100 * (1 - node_memory_MemAvailable_bytes{job=\"node\"} / node_memory_MemTotal_bytes{job=\"node\"})", "step": "15s", "unit": "%"}]
    })).await?;
    println!("  call 1: {}", describe(&r));
    let r = session.call(clinic, &p, json!({
        "queries": [{"queryId": "tikv_engine_size", "expr": "sum by (instance) (tikv_engine_size_bytes{job=\"tikv\"})", "step": "15s", "unit": "bytes"}]
    })).await?;
    println!("  call 2: {}", describe(&r));
    // After no_data: which TiKV metrics does the cluster have in its window?
    let r = session.call(clinic, &p, json!({
        "queries": [{"queryId": "tikv_metric_names", "discover": "metric_names", "pattern": "tikv_.*"}]
    })).await?;
    println!("  call 3: {}", describe(&r));
    session.finish()
}

/// The Manus package (v2) deployed in front of the `vida` and `monica` stand-ins, with a
/// fresh reference key; the fronts live as long as the returned handles.
async fn deploy_manus(
    replay: &Replay,
) -> Result<(Vec<support::ManusFront>, Deployed<ManusConnector>), Box<dyn Error>> {
    let package = local_package("managed_auto_oncall_manus", "v2")?;
    let ref_keys = format!(
        "ref-1:{}",
        base64::engine::general_purpose::STANDARD.encode(rand_key())
    );
    let binding = bind(
        &package,
        &[
            ("manus_username", MANUS_USER),
            ("manus_password", MANUS_PASSWORD),
            ("manus_reference_keys", &ref_keys),
        ],
    )?;
    let mut fronts = Vec::new();
    for (target, backend) in [("vida", 1), ("monica", 2)] {
        fronts.push(
            support::ManusFront::start(
                target,
                &replay.backends.url(backend)?,
                SecretString::from(MANUS_USER.to_owned()),
                SecretString::from(MANUS_PASSWORD.to_owned()),
            )
            .await?,
        );
    }
    let [vida, monica] = fronts.as_slice() else {
        return Err("two Manus fronts".into());
    };
    let config = ManusConfig::new(HostAllowlist::from_network(&package.manifest().network)?)
        .with_target(ManusTarget::Vida, url::Url::parse(&vida.base_url())?)
        .with_target(ManusTarget::Monica, url::Url::parse(&monica.base_url())?);
    let secrets = ManusSecrets::new(
        SecretString::from(MANUS_USER.to_owned()),
        SecretString::from(MANUS_PASSWORD.to_owned()),
        ReferenceKeyRing::parse_secret(&SecretString::from(ref_keys.clone()))?,
    );
    let deployed = Deployed {
        connector: ManusConnector::new()?,
        config,
        secrets,
        package,
        binding,
    };
    Ok((fronts, deployed))
}

/// The instance label of a result's top row, as the model sees it (a reference).
fn top_instance(r: &ToolResult) -> Option<String> {
    r.details()
        .evidence
        .as_ref()
        .and_then(|e| e.series.first())
        .and_then(|s| s.labels.get("instance"))
        .cloned()
}

/// Manus target vida: SaaS01 TiDB CPU, whose instance addresses reach the model only as
/// opaque references; the top row's reference, passed back as `instanceRef`, names the
/// same instance under the same reference.
pub(crate) async fn manus_vida(replay: &Replay) -> Result<Handoff, Box<dyn Error>> {
    println!("\n-- Manus target vida: SaaS01 TiDB CPU, instance addresses as opaque references --");
    let (_fronts, manus) = deploy_manus(replay).await?;
    let p = apid_29213_policy(
        "pol-APID-29213-vida",
        &manus.package,
        json!({"manus_target": "vida"}),
    )?;
    let mut session = replay.session();
    let r = session.call(&manus, &p, json!({
        "queryId": "vida_tidb_cpu", "expr": "sum by (instance) (rate(process_cpu_seconds_total{job=\"tidb\"}[1m]))", "step": "15s"
    })).await?;
    println!("  call 1: {}", describe(&r));
    let reference = top_instance(&r).ok_or("the vida result carries no instance reference")?;
    let shown: String = reference.chars().take(24).collect();
    println!(
        "  instance label as the model sees it: {shown}... (sealed, {} chars; no address)",
        reference.len()
    );
    let r = session.call(&manus, &p, json!({
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
    session.finish()
}

/// The Wetech package (v2) deployed in front of a Grafana front over the `main`
/// stand-in, with a storage state holding the front's session cookie.
async fn deploy_wetech(
    replay: &Replay,
) -> Result<(support::GrafanaFront, Deployed<WetechConnector>), Box<dyn Error>> {
    let package = local_package("managed_auto_oncall_wetech", "v2")?;
    let storage_state = json!({
        "cookies": [{"name": support::GRAFANA_SESSION_COOKIE_NAME, "value": support::GRAFANA_SESSION_COOKIE_VALUE,
                     "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": true, "secure": false, "sameSite": "Lax"}],
        "origins": []
    })
    .to_string();
    let binding = bind(&package, &[("wetech_storage_state", &storage_state)])?;
    let grafana = support::GrafanaFront::start(&replay.backends.url(0)?).await?;
    let browser = BrowserConfig::new(
        CHROMIUM,
        WebDriverEndpoint::Spawn {
            chromedriver: PathBuf::from(CHROMEDRIVER),
        },
    );
    let config = WetechConfig::new(
        url::Url::parse(&grafana.base_url())?,
        HostAllowlist::from_network(&package.manifest().network)?,
        browser,
    );
    let deployed = Deployed {
        connector: WetechConnector::new(),
        config,
        secrets: WetechSecrets::new(SecretString::from(storage_state)),
        package,
        binding,
    };
    Ok((grafana, deployed))
}

/// Wetech: a `unit` that is not a short label is rejected before any browser starts,
/// and the corrected call runs in the same turn (in real Chromium when live and
/// installed, else as the recorded result of a real run).
pub(crate) async fn wetech(replay: &Replay) -> Result<Handoff, Box<dyn Error>> {
    println!("\n-- Wetech: a `unit` rejection corrected in the same turn --");
    let (grafana, wetech) = deploy_wetech(replay).await?;
    let p = apid_29213_policy(
        "pol-APID-29213-wetech",
        &wetech.package,
        json!({"wetech_query_ids": ["tidb_cpu"], "wetech_datasource": grafana.datasource_uid()}),
    )?;
    let mut session = replay.session();
    let expr = "sum by (instance) (rate(process_cpu_seconds_total{job=\"tidb\"}[1m]))";
    let r = session.call(&wetech, &p, json!({
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
    let browser_present = Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if replay.mode != Mode::Offline && browser_present {
        let r = session.call(&wetech, &p, corrected_args).await?;
        println!("  call 2 (real Chromium): {}", describe(&r));
        if replay.mode == Mode::Record {
            std::fs::create_dir_all(recordings_dir())?;
            std::fs::write(recordings_dir().join(WETECH_RESULT), r.to_json()? + "\n")?;
        }
    } else {
        if replay.mode != Mode::Offline {
            println!(
                "  Chromium is not installed: the corrected call uses the recorded browser result"
            );
        }
        record_corrected_wetech(replay, &mut session, &wetech, &p, &corrected_args)?;
    }
    session.finish()
}

/// The corrected Wetech call from its recording: prepared (verified and locked) exactly
/// as a live one, then recorded with the recorded result, which must answer its request
/// digest.
fn record_corrected_wetech(
    replay: &Replay,
    session: &mut Session<'_>,
    wetech: &Deployed<WetechConnector>,
    policy: &TrustedPolicy,
    corrected_args: &Value,
) -> Result<(), Box<dyn Error>> {
    let text = std::fs::read_to_string(recordings_dir().join(WETECH_RESULT))?;
    let recorded = ToolResult::from_json(&text)?;
    let envelope = replay.signer.sign(policy, wetech.package.digest())?;
    let args = corrected_args.to_string();
    let prepared = prepare(SandboxCall {
        package: &wetech.package,
        binding: &wetech.binding,
        policy: PolicyInput::Envelope {
            envelope: &envelope,
            keys: &replay.keys,
            session: None,
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
    Ok(())
}

/// The Investibook workspace: generated into a temporary folder, with the evidence
/// agent's output and the scenarios' handoffs written where the child reads them, and
/// the output checked against its schema.
pub(crate) fn investibook_workspace(handoffs: &[(&str, Handoff)]) -> Result<(), Box<dyn Error>> {
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
    let output = evidence_agent_output(handoffs)?;
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
    Ok(())
}
