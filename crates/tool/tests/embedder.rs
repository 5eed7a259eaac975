//! An embedder's sandbox: a `RuntimeContext` built in memory, without environment
//! variables, runs the same Clinic call as the packaged binary does with its
//! environment, against real Prometheus behind the Clinic front, and gives the same
//! result; its missing and invalid parts give the binary's failures; a package whose
//! manifest delivers policy as a static canary runs without envelope or keys and says so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use evidence_package::Package;
use evidence_policy::{KeyRing, SignedPolicy};
use evidence_result::{PolicySource, ToolResult};
use evidence_test_support as test_support;
use evidence_tool::{ClinicTool, RuntimeContext, RuntimeFailureKind, Sandbox, build_deployable};
use secrecy::SecretString;
use serde_json::{Value, json};
use support::*;

const TOKEN: &str = "embedder-clinic-token-0001";

fn args() -> String {
    json!({"queries": [{
        "queryId": "tidb_cpu",
        "expr": "sum by (instance) (rate(process_cpu_seconds_total{job=\"tidb\"}[1m]))",
        "step": "15s", "unit": "cores"
    }]})
    .to_string()
}

/// The context an embedder builds: the same parts the binary reads from its
/// environment, held in memory.
fn in_memory(signed: &Signed, base_url: &str, audit: &Path) -> RuntimeContext {
    let envelope =
        SignedPolicy::from_json(&std::fs::read_to_string(&signed.envelope).unwrap()).unwrap();
    clinic_context(base_url.to_owned())
        .with_envelope(envelope)
        .with_keys(signed.keys.parse::<KeyRing>().unwrap())
        .with_audit_log(audit)
}

/// The Clinic tool's configuration and token exactly as the binary gets them
/// ([`clinic_vars`]), held in memory.
fn clinic_context(base_url: String) -> RuntimeContext {
    clinic_vars(base_url, TOKEN).into_iter().fold(
        RuntimeContext::new(),
        |context, (name, value)| {
            if name == "CLINIC_API_TOKEN" {
                context.with_secret(name, SecretString::from(value))
            } else {
                context.with_config(name, value)
            }
        },
    )
}

/// Real Prometheus with the main fixture behind the Clinic front.
async fn clinic_front() -> (test_support::Prometheus, test_support::ClinicFront) {
    let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
        .await
        .unwrap();
    let front = test_support::ClinicFront::start(&prometheus.url(), SecretString::from(TOKEN))
        .await
        .unwrap();
    (prometheus, front)
}

fn code_of(result: &ToolResult) -> Option<String> {
    result
        .details()
        .error
        .as_ref()
        .map(|e| e.code.as_str().to_owned())
}

#[tokio::test]
async fn a_context_built_in_memory_runs_the_binary_s_call_and_fails_alike() {
    let (_prometheus, front) = clinic_front().await;
    let dir = tempfile::tempdir().unwrap();
    let (folder, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let signed = sign(
        dir.path(),
        "envelope.json",
        &folder,
        &policy("clinic", "managed_auto_oncall_clinic", json!({})),
    );
    let audit = dir.path().join("audit.jsonl");

    // The packaged binary, with its environment.
    let env = clinic_env(&signed, &audit, front.base_url(), TOKEN);
    let bin = entrypoint(&folder);
    let (code, out, err) = tokio::task::spawn_blocking({
        let (bin, env) = (bin.clone(), env.clone());
        move || run(&bin, &[], &env, &args())
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{err}");
    let from_binary = ToolResult::from_json(out.trim()).unwrap();
    assert_eq!(code_of(&from_binary), None, "{}", from_binary.text());

    // The embedder: the same package, the context in memory.
    let package = Package::load(&folder).unwrap();
    let sandbox =
        Sandbox::<ClinicTool>::new(package, in_memory(&signed, &front.base_url(), &audit)).unwrap();
    sandbox.readiness().unwrap();
    let (from_memory, record) = sandbox.answer(&args()).await.unwrap();
    assert_eq!(from_memory.text(), from_binary.text());
    assert_eq!(from_memory.details(), from_binary.details());
    let record: Value = serde_json::from_str(&record.to_json_line().unwrap()).unwrap();
    assert_eq!(record["status"], "ok");
    assert!(!record.to_string().contains(TOKEN));

    // Each part left out or broken fails as the binary fails without it.
    let cases: Vec<(&str, RuntimeContext, &str)> = vec![
        (
            "no keys",
            clinic_context(front.base_url()).with_envelope_file(&signed.envelope),
            "EVIDENCE_POLICY_KEYS",
        ),
        (
            "empty token",
            in_memory(&signed, &front.base_url(), &audit)
                .with_secret("CLINIC_API_TOKEN", SecretString::from("")),
            "CLINIC_API_TOKEN",
        ),
        (
            "no base URL",
            in_memory(&signed, &front.base_url(), &audit).with_config("CLINIC_BASE_URL", ""),
            "CLINIC_BASE_URL",
        ),
        (
            "no path template",
            in_memory(&signed, &front.base_url(), &audit)
                .with_config("CLINIC_QUERY_PATH_TEMPLATE", ""),
            "CLINIC_QUERY_PATH_TEMPLATE",
        ),
    ];
    for (case, context, dropped) in cases {
        let package = Package::load(&folder).unwrap();
        let sandbox = Sandbox::<ClinicTool>::new(package, context).unwrap();
        let not_ready = sandbox.readiness().unwrap_err();
        let (result, _) = sandbox.answer(&args()).await.unwrap();
        let env: Vec<(&str, String)> = env
            .iter()
            .filter(|(name, _)| *name != dropped)
            .cloned()
            .collect();
        let bin = bin.clone();
        let (code, out, _) = tokio::task::spawn_blocking(move || run(&bin, &[], &env, &args()))
            .await
            .unwrap();
        assert_eq!(code, 0, "{case}");
        let from_binary = ToolResult::from_json(out.trim()).unwrap();
        assert_eq!(code_of(&result), code_of(&from_binary), "{case}");
        assert_eq!(
            code_of(&result).as_deref(),
            Some(not_ready.kind.code()),
            "{case}"
        );
    }
}

#[tokio::test]
async fn a_static_canary_package_runs_without_envelope_or_keys_and_says_so() {
    let (_prometheus, front) = clinic_front().await;
    let dir = tempfile::tempdir().unwrap();
    let source = local_source(dir.path(), "managed_auto_oncall_clinic", "v3");
    let manifest_path = source.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest["policy_delivery"] = json!({"mode": "static_canary", "file": "canary-policy.json"});
    manifest["files"]
        .as_array_mut()
        .unwrap()
        .push(json!("canary-policy.json"));
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let canary = policy("clinic", "managed_auto_oncall_clinic", json!({}));
    std::fs::write(source.join("canary-policy.json"), canary.to_string()).unwrap();
    let out = dir.path().join("canary-package");
    let package = build_deployable(&source, Path::new(CLINIC_TOOL), &out).unwrap();

    let context = clinic_context(front.base_url());
    let sandbox = Sandbox::<ClinicTool>::new(package, context).unwrap();
    sandbox.readiness().unwrap();
    let (result, _) = sandbox.answer(&args()).await.unwrap();
    assert_eq!(code_of(&result), None, "{}", result.text());
    assert_eq!(
        result.details().origin().policy_source,
        Some(PolicySource::StaticCanary)
    );

    // A canary that no longer holds (expired) verifies nothing: no call runs.
    let source_expired = local_source(dir.path(), "managed_auto_oncall_clinic", "v3");
    std::fs::write(source_expired.join("manifest.json"), manifest.to_string()).unwrap();
    let mut expired = canary.clone();
    expired["issued_at"] = json!("2026-01-01T00:00:00Z");
    expired["expires_at"] = json!("2026-01-01T01:00:00Z");
    std::fs::write(
        source_expired.join("canary-policy.json"),
        expired.to_string(),
    )
    .unwrap();
    let package = build_deployable(
        &source_expired,
        Path::new(CLINIC_TOOL),
        &dir.path().join("expired"),
    )
    .unwrap();
    let context = clinic_context(front.base_url());
    let sandbox = Sandbox::<ClinicTool>::new(package, context).unwrap();
    let (result, _) = sandbox.answer(&args()).await.unwrap();
    assert_eq!(
        code_of(&result).as_deref(),
        Some(RuntimeFailureKind::PolicyVerificationFailed.code())
    );
}
