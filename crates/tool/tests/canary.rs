//! The rollout canary against the local fronts, real Prometheus and real Chromium: the
//! `canary` binary over deployable folders made by `package-tool`, every call a process
//! of the package's own binary under a signed envelope and the turn ledger. All
//! providers verified; then the Clinic front stopped, which leaves Clinic unverified with
//! its failure class and the command failing; envelopes signed ahead; deployments it
//! refuses; and the committed schemas of the report and the deployment file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod support;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use evidence_test_support as test_support;
use evidence_tool::rollout::{DeploymentFile, RolloutReport};
use secrecy::SecretString;
use serde_json::{Value, json};
use support::{CLINIC_TOOL, MANUS_TOOL, SIGN_POLICY, WETECH_TOOL, blocking, deploy, run};

/// Environment variables given to a process.
type Env = Vec<(&'static str, String)>;

const CANARY: &str = env!("CARGO_BIN_EXE_canary");
const CLINIC_TOKEN: &str = "canary-clinic-token-7f3a9c01";
const MANUS_USER: &str = "canary-manus-reader";
const MANUS_PASSWORD: &str = "canary-manus-password-5d2e8b44";

fn schema_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schemas")
        .join(name)
}

/// The three deployable folders, made once per test in `dir`.
fn deploy_all(dir: &Path) -> [PathBuf; 3] {
    [
        deploy(dir, "managed_auto_oncall_clinic", "v3", CLINIC_TOOL).0,
        deploy(dir, "managed_auto_oncall_manus", "v2", MANUS_TOOL).0,
        deploy(dir, "managed_auto_oncall_wetech", "v2", WETECH_TOOL).0,
    ]
}

/// A signing key file for the canary's signer, closed to other users (mode 0600).
fn key_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("signing.key");
    std::fs::write(&path, support::signing_key() + "\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// The local fronts before real Prometheus servers.
struct Fronts {
    _main: test_support::Prometheus,
    clinic: Option<test_support::ClinicFront>,
    manus: test_support::ManusTargets,
    grafana: test_support::GrafanaFront,
}

async fn start_fronts() -> Fronts {
    let main = test_support::Prometheus::start(test_support::Fixture::Main)
        .await
        .unwrap();
    let clinic =
        test_support::ClinicFront::start(&main.url(), SecretString::from(CLINIC_TOKEN.to_owned()))
            .await
            .unwrap();
    let manus = test_support::ManusTargets::start(
        &SecretString::from(MANUS_USER.to_owned()),
        &SecretString::from(MANUS_PASSWORD.to_owned()),
    )
    .await
    .unwrap();
    let grafana = test_support::GrafanaFront::start(&main.url())
        .await
        .unwrap();
    Fronts {
        _main: main,
        clinic: Some(clinic),
        manus,
        grafana,
    }
}

fn reference_keys() -> String {
    format!(
        "canary:{}",
        base64::engine::general_purpose::STANDARD.encode([7u8; 32])
    )
}

/// The secrets, as the canary's environment holds them.
fn secrets(fronts: &Fronts) -> Vec<(&'static str, String)> {
    vec![
        ("CLINIC_API_TOKEN", CLINIC_TOKEN.to_owned()),
        ("MANUS_USERNAME", MANUS_USER.to_owned()),
        ("MANUS_PASSWORD", MANUS_PASSWORD.to_owned()),
        ("MANUS_REF_KEYS", reference_keys()),
        ("WETECH_STORAGE_STATE", fronts.grafana.storage_state()),
    ]
}

/// The deployment file of the three packages in front of `fronts`, envelopes signed by
/// the canary with `key_file`.
fn deployment(
    packages: &[PathBuf; 3],
    fronts: &Fronts,
    clinic_url: &str,
    envelopes: Value,
) -> Value {
    json!({
        "account": "acct-canary",
        "envelopes": envelopes,
        "policy_keys": support::policy_keys(),
        "packages": [
            {"dir": packages[0], "config": {
                "CLINIC_BASE_URL": clinic_url,
                "CLINIC_QUERY_PATH_TEMPLATE": test_support::ClinicFront::QUERY_RANGE_PATH_TEMPLATE}},
            {"dir": packages[1], "config": {
                "MANUS_VIDA_URL": fronts.manus.vida.front.base_url(),
                "MANUS_MONICA_URL": fronts.manus.monica.front.base_url()}},
            {"dir": packages[2], "config": {"WETECH_GRAFANA_URL": fronts.grafana.base_url()},
             "wetech_datasource": fronts.grafana.datasource_uid()},
        ]
    })
}

async fn canary(args: Vec<String>, env: Vec<(&'static str, String)>) -> (i32, String, String) {
    blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(Path::new(CANARY), &args, &env, "")
    })
    .await
}

/// `canary --deployment FILE --out OUT` with `env`.
async fn run_canary(file: &Path, out: &Path, env: Env) -> (i32, String, String) {
    let args = vec![
        "--deployment".to_owned(),
        file.display().to_string(),
        "--out".to_owned(),
        out.display().to_string(),
    ];
    canary(args, env).await
}

/// `canary policies --deployment FILE --out OUT` with `env`.
async fn canary_policies(file: &Path, out: &Path, env: Env) -> (i32, String, String) {
    let args = vec![
        "policies".to_owned(),
        "--deployment".to_owned(),
        file.display().to_string(),
        "--out".to_owned(),
        out.display().to_string(),
    ];
    canary(args, env).await
}

fn write_json(path: &Path, value: &Value) -> PathBuf {
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    path.to_owned()
}

/// Reads the report, checks it against the committed schema and reads it back typed.
fn read_report(out: &Path) -> (Value, RolloutReport) {
    let text = std::fs::read_to_string(out.join("rollout-evidence.json")).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(schema_path("rollout-evidence.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "the report does not validate: {errors:?}"
    );
    (value.clone(), serde_json::from_value(value).unwrap())
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn assert_no_secret(env: &[(&'static str, String)], out: &Path, printed: &[&str]) {
    let secret_values: Vec<&str> = env
        .iter()
        .map(|(_, v)| v.as_str())
        .chain([test_support::GRAFANA_SESSION_COOKIE_VALUE, MANUS_PASSWORD])
        .collect();
    for file in files(out) {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        for secret in &secret_values {
            assert!(!text.contains(secret), "{} holds a secret", file.display());
        }
    }
    for text in printed {
        for secret in &secret_values {
            assert!(!text.contains(secret), "the canary printed a secret");
        }
    }
}

fn target<'a>(report: &'a RolloutReport, target: &str) -> &'a evidence_tool::rollout::TargetReport {
    report
        .targets
        .iter()
        .find(|t| t.target == target)
        .unwrap_or_else(|| panic!("no target {target}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_provider_verified_then_the_stopped_front_unverified() {
    let dir = tempfile::tempdir().unwrap();
    let packages = deploy_all(dir.path());
    let mut fronts = start_fronts().await;
    let clinic_url = fronts.clinic.as_ref().unwrap().base_url();
    let key = key_file(dir.path());
    let file = write_json(
        &dir.path().join("deployment.json"),
        &deployment(
            &packages,
            &fronts,
            &clinic_url,
            json!({"signer": {"kid": support::KID, "key_file": key}}),
        ),
    );
    let env = secrets(&fronts);

    // All fronts up: every provider and target verified, exit 0.
    let out = dir.path().join("run-1");
    let (code, stdout, stderr) = run_canary(&file, &out, env.clone()).await;
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    let (_, report) = read_report(&out);
    assert!(report.verified, "{report:#?}");
    assert_eq!(report.providers.len(), 3);
    assert!(report.providers.iter().all(|p| p.verified));
    let names: Vec<&str> = report.targets.iter().map(|t| t.target.as_str()).collect();
    assert_eq!(names, ["SaaS01", "SaaS02", "vida", "monica", "grafana"]);
    // The fixture's figures, through each provider.
    let saas01 = &target(&report, "SaaS01").calls[0];
    assert_eq!(saas01.series_count, Some(56));
    assert_eq!(saas01.peak.map(f64::from), Some(22.84));
    let saas02 = &target(&report, "SaaS02").calls;
    assert!(saas02[0].series_count.unwrap() > 0);
    assert_eq!(saas02[1].series_count, Some(0), "{:?}", saas02[1]);
    for manus in ["vida", "monica"] {
        let calls = &target(&report, manus).calls;
        assert_eq!(calls.len(), 2);
        assert!(calls.iter().all(|c| c.met), "{calls:?}");
    }
    assert_eq!(target(&report, "monica").calls[0].series_count, Some(24));
    let wetech = &target(&report, "grafana").calls;
    let rejected = wetech[0].failure.as_ref().unwrap();
    assert_eq!(rejected.code, "invalid_unit");
    assert_eq!(wetech[1].series_count, Some(56));
    // The digests used are the deployable folders'.
    for (p, folder) in report.packages.iter().zip(&packages) {
        let loaded = evidence_package::Package::load(folder).unwrap();
        assert_eq!(p.digest, loaded.digest());
    }
    // Every call ran as its own process and left one audit record.
    let audit = std::fs::read_to_string(out.join("audit.jsonl")).unwrap();
    let calls: usize = report.targets.iter().map(|t| t.calls.len()).sum();
    assert_eq!(calls, 9);
    assert_eq!(audit.lines().count(), calls);
    let markdown = std::fs::read_to_string(out.join("rollout-evidence.md")).unwrap();
    assert!(
        markdown.starts_with("# Rollout evidence: VERIFIED"),
        "{markdown}"
    );
    assert_no_secret(&env, &out, &[&stdout, &stderr]);

    // The Clinic front stopped: Clinic unverified with its failure class, exit 1; the
    // other providers still verified.
    drop(fronts.clinic.take());
    let out = dir.path().join("run-2");
    let (code, stdout, stderr) = run_canary(&file, &out, env.clone()).await;
    assert_eq!(code, 1, "stdout: {stdout}\nstderr: {stderr}");
    assert!(
        stdout.contains("clinic: NOT verified (not verified: SaaS01, SaaS02)"),
        "{stdout}"
    );
    let (_, report) = read_report(&out);
    assert!(!report.verified);
    let clinic = report
        .providers
        .iter()
        .find(|p| p.package.as_str() == "managed_auto_oncall_clinic")
        .unwrap();
    assert!(!clinic.verified);
    assert_eq!(clinic.targets_unverified, ["SaaS01", "SaaS02"]);
    for c in &target(&report, "SaaS01").calls {
        let failure = c.failure.as_ref().expect("a failure");
        assert_eq!(
            failure.class,
            Some(evidence_result::FailureClass::ProviderUnavailable),
            "{c:?}"
        );
        assert!(!c.met);
    }
    assert!(
        report
            .providers
            .iter()
            .filter(|p| p.package.as_str() != "managed_auto_oncall_clinic")
            .all(|p| p.verified)
    );
    let markdown = std::fs::read_to_string(out.join("rollout-evidence.md")).unwrap();
    assert!(
        markdown.starts_with("# Rollout evidence: NOT VERIFIED"),
        "{markdown}"
    );
    assert!(markdown.contains("provider_unavailable"), "{markdown}");
    assert_no_secret(&env, &out, &[&stdout, &stderr]);
}

#[tokio::test(flavor = "multi_thread")]
async fn envelopes_signed_ahead_from_the_written_policies() {
    let dir = tempfile::tempdir().unwrap();
    let packages = deploy_all(dir.path());
    let fronts = start_fronts().await;
    let clinic_url = fronts.clinic.as_ref().unwrap().base_url();
    let ahead = dir.path().join("ahead");
    let mut file = deployment(
        &packages,
        &fronts,
        &clinic_url,
        json!({"signed_ahead": {"dir": ahead}}),
    );
    // Clinic only: the other providers are not part of this deployment.
    file["packages"].as_array_mut().unwrap().truncate(1);
    let file = write_json(&dir.path().join("deployment.json"), &file);
    let env = vec![("CLINIC_API_TOKEN", CLINIC_TOKEN.to_owned())];

    // `canary policies` writes the policies and the commands that sign them.
    let (code, stdout, stderr) = canary_policies(&file, &ahead, env.clone()).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    for key in ["clinic-SaaS01", "clinic-SaaS02"] {
        assert!(stdout.contains(&format!("{key}.envelope")), "{stdout}");
        let policy = std::fs::read_to_string(ahead.join(format!("{key}.policy.json"))).unwrap();
        let (code, envelope, stderr) = run(
            Path::new(SIGN_POLICY),
            &[
                "--package-dir",
                packages[0].to_str().unwrap(),
                "--kid",
                support::KID,
            ],
            &[("EVIDENCE_SIGNING_KEY", support::signing_key())],
            &policy,
        );
        assert_eq!(code, 0, "{stderr}");
        std::fs::write(ahead.join(format!("{key}.envelope")), envelope).unwrap();
    }
    let out = dir.path().join("run");
    let (code, stdout, stderr) = run_canary(&file, &out, env.clone()).await;
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    let (_, report) = read_report(&out);
    assert!(report.verified);
    assert_eq!(report.providers.len(), 1);
    let policy_ids: Vec<&str> = report
        .targets
        .iter()
        .map(|t| t.policy_id.as_deref().unwrap())
        .collect();
    assert!(
        policy_ids.iter().all(|id| id.starts_with("canary-")),
        "{policy_ids:?}"
    );

    // An envelope signed ahead that is gone: that target unverified, not a crash.
    std::fs::remove_file(ahead.join("clinic-SaaS02.envelope")).unwrap();
    let out = dir.path().join("run-missing");
    let (code, stdout, _) = run_canary(&file, &out, env).await;
    assert_eq!(code, 1, "{stdout}");
    let (_, report) = read_report(&out);
    let saas02 = target(&report, "SaaS02");
    assert!(!saas02.verified && saas02.policy_id.is_none());
    assert!(target(&report, "SaaS01").verified);
}

#[tokio::test(flavor = "multi_thread")]
async fn refuses_a_deployment_it_cannot_use() {
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let key = key_file(dir.path());
    let base = json!({
        "account": "acct-canary",
        "envelopes": {"signer": {"kid": support::KID, "key_file": key}},
        "packages": [{"dir": clinic, "config": {
            "CLINIC_BASE_URL": "http://127.0.0.1:9",
            "CLINIC_QUERY_PATH_TEMPLATE": "/api/{cluster_id}/query_range"}}]
    });
    let token_file = |name: &str, mode: u32| {
        use std::os::unix::fs::PermissionsExt as _;
        let path = dir.path().join(name);
        std::fs::write(&path, format!("{CLINIC_TOKEN}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.display().to_string()
    };
    let private = token_file("token-private", 0o600);
    let open = token_file("token-open", 0o644);
    let cases: Vec<(Value, Env, &str)> = vec![
        // The secret given both ways.
        (
            base.clone(),
            vec![
                ("CLINIC_API_TOKEN", CLINIC_TOKEN.to_owned()),
                ("CLINIC_API_TOKEN_FILE", private.clone()),
            ],
            "both CLINIC_API_TOKEN and CLINIC_API_TOKEN_FILE are set",
        ),
        // The secret in a file other users can read.
        (
            base.clone(),
            vec![("CLINIC_API_TOKEN_FILE", open.clone())],
            "token-open is open to other users (mode 0644",
        ),
        // A secret written into the file.
        (
            {
                let mut v = base.clone();
                v["packages"][0]["config"]["CLINIC_API_TOKEN"] = json!(CLINIC_TOKEN);
                v
            },
            vec![("CLINIC_API_TOKEN", CLINIC_TOKEN.to_owned())],
            "CLINIC_API_TOKEN is a secret: export it in the canary's environment",
        ),
        // The secret missing from the environment.
        (
            base.clone(),
            vec![],
            "export CLINIC_API_TOKEN (or CLINIC_API_TOKEN_FILE, a file) in the canary's environment",
        ),
        // Another tool's variable.
        (
            {
                let mut v = base.clone();
                v["packages"][0]["config"]["WETECH_GRAFANA_URL"] = json!("http://127.0.0.1:9");
                v
            },
            vec![("CLINIC_API_TOKEN", CLINIC_TOKEN.to_owned())],
            "WETECH_GRAFANA_URL is not a deployment variable of clinic-tool",
        ),
        // A required variable missing.
        (
            {
                let mut v = base.clone();
                v["packages"][0]["config"]
                    .as_object_mut()
                    .unwrap()
                    .remove("CLINIC_QUERY_PATH_TEMPLATE");
                v
            },
            vec![("CLINIC_API_TOKEN", CLINIC_TOKEN.to_owned())],
            "clinic-tool needs CLINIC_QUERY_PATH_TEMPLATE",
        ),
        // A target the plan does not have.
        (
            {
                let mut v = base.clone();
                v["targets"] = json!({"clinic-SaaS09": {"cluster": "SaaS09"}});
                v
            },
            vec![("CLINIC_API_TOKEN", CLINIC_TOKEN.to_owned())],
            "targets: no target \"clinic-SaaS09\"",
        ),
        // A window with one end, and one that ends before it starts.
        (
            {
                let mut v = base.clone();
                v["targets"] = json!({"clinic-SaaS01": {"start": "2026-11-30T10:00:00Z"}});
                v
            },
            vec![("CLINIC_API_TOKEN", CLINIC_TOKEN.to_owned())],
            "targets.clinic-SaaS01: give both start and end, or neither",
        ),
        (
            {
                let mut v = base.clone();
                v["targets"] = json!({"clinic-SaaS01": {"start": "2026-11-30T10:00:00Z", "end": "2026-11-30T09:00:00Z"}});
                v
            },
            vec![("CLINIC_API_TOKEN", CLINIC_TOKEN.to_owned())],
            "ends (2026-11-30T09:00:00Z) before it starts",
        ),
        // An unknown field.
        (
            {
                let mut v = base.clone();
                v["secrets"] = json!({"CLINIC_API_TOKEN": CLINIC_TOKEN});
                v
            },
            vec![("CLINIC_API_TOKEN", CLINIC_TOKEN.to_owned())],
            "unknown field `secrets`",
        ),
    ];
    for (i, (file, env, message)) in cases.into_iter().enumerate() {
        let file = write_json(&dir.path().join(format!("deployment-{i}.json")), &file);
        let out = dir.path().join(format!("out-{i}"));
        let (code, stdout, stderr) = run_canary(&file, &out, env).await;
        assert_eq!(code, 2, "case {i}: {stdout}{stderr}");
        assert!(stderr.contains(message), "case {i}: {stderr}");
        assert!(
            !stderr.contains(CLINIC_TOKEN),
            "case {i} printed the secret"
        );
        assert!(!out.join("rollout-evidence.json").exists());
    }
}

/// A target's cluster and window from the deployment file: the policy names them, and
/// a window without the seed's data leaves that target unverified while the others
/// keep the seed's.
#[tokio::test(flavor = "multi_thread")]
async fn a_target_can_name_another_cluster_and_window() {
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let fronts = start_fronts().await;
    let key = key_file(dir.path());
    let file = write_json(
        &dir.path().join("deployment.json"),
        &json!({
            "account": "acct-canary",
            "envelopes": {"signer": {"kid": support::KID, "key_file": key}},
            "packages": [{"dir": clinic, "config": {
                "CLINIC_BASE_URL": fronts.clinic.as_ref().unwrap().base_url(),
                "CLINIC_QUERY_PATH_TEMPLATE": test_support::ClinicFront::QUERY_RANGE_PATH_TEMPLATE}}],
            "targets": {"clinic-SaaS01": {"cluster": "SaaS01",
                                          "start": "2026-01-05T10:00:00Z", "end": "2026-01-05T10:15:00Z"}}
        }),
    );
    // The token from a file, as systemd's credentials give it.
    let token = dir.path().join("clinic_api_token");
    std::fs::write(&token, format!("{CLINIC_TOKEN}\n")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let env = vec![("CLINIC_API_TOKEN_FILE", token.display().to_string())];
    let ahead = dir.path().join("policies");
    let (code, _, stderr) = canary_policies(&file, &ahead, env.clone()).await;
    assert_eq!(code, 0, "{stderr}");
    let policy: Value = serde_json::from_str(
        &std::fs::read_to_string(ahead.join("clinic-SaaS01.policy.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(policy["window"]["start"], "2026-01-05T10:00:00Z");
    assert_eq!(policy["window"]["end"], "2026-01-05T10:15:00Z");
    assert_eq!(policy["cluster"]["id"], "SaaS01");
    let seed: Value = serde_json::from_str(
        &std::fs::read_to_string(ahead.join("clinic-SaaS02.policy.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        seed["cluster"]["id"], "SaaS02",
        "a target not named keeps the seed's"
    );

    let out = dir.path().join("run");
    let (code, stdout, _) = run_canary(&file, &out, env).await;
    assert_eq!(code, 1, "{stdout}");
    let (_, report) = read_report(&out);
    let saas01 = target(&report, "SaaS01");
    assert!(!saas01.verified);
    assert_eq!(
        saas01.calls[0].note.as_deref(),
        Some("no series where data was expected")
    );
    assert!(target(&report, "SaaS02").verified);
}

/// The canary's seed windows are the windows the test fixtures hold data for: the
/// product's constants and the fixtures' cannot drift apart.
#[test]
fn the_seed_windows_are_the_fixture_windows() {
    use evidence_tool::rollout;
    assert_eq!(
        (rollout::APID_29213_START, rollout::APID_29213_END),
        (test_support::APID_29213_START, test_support::APID_29213_END)
    );
    assert_eq!(
        (rollout::ST_2865_START, rollout::ST_2865_END),
        (test_support::ST_2865_START, test_support::ST_2865_END)
    );
}

#[test]
fn committed_schemas_are_current() {
    let schemas = [
        ("rollout-evidence.schema.json", RolloutReport::json_schema()),
        (
            "canary-deployment.schema.json",
            schemars::schema_for!(DeploymentFile),
        ),
    ];
    for (name, schema) in schemas {
        let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        let path = schema_path(name);
        if std::env::var_os("UPDATE_SCHEMAS").is_some_and(|v| v == "1") {
            std::fs::write(&path, &text).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(&path).unwrap_or_default(),
            text,
            "schemas/{name} is stale: run `UPDATE_SCHEMAS=1 cargo test -p evidence-tool --test canary committed_schemas_are_current`"
        );
    }
}
