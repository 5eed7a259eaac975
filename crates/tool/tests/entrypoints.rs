//! The tool binaries and the signer run as processes with the documented environment,
//! from deployable package folders made by `package-tool`, against real Prometheus behind
//! the Clinic and Manus test fronts: success, rejections, the digest covering the binary
//! that runs, and every runtime-context failure as a result.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use evidence_result::{FailureClass, ToolResult};
use evidence_test_support as test_support;
use secrecy::SecretString;
use serde_json::{Value, json};
use support::*;

/// An environment of a tool process.
type Env = Vec<(&'static str, String)>;

const TIDB_CPU_ARGS: &str =
    r#"sum by (instance) (rate(process_cpu_seconds_total{job=\"tidb\"}[1m]))"#;

fn clinic_args() -> String {
    format!(
        r#"{{"queries":[{{"queryId":"tidb_cpu","expr":"{TIDB_CPU_ARGS}","step":"15s","unit":"cores"}}]}}"#
    )
}

/// The one failure of a result: its code and class.
fn failure_of(result: &ToolResult) -> (String, FailureClass) {
    let error = result.details().error.as_ref().unwrap();
    (error.code.as_str().to_owned(), error.class)
}

/// A Clinic deployment: real Prometheus, the Clinic front, the v3 package deployed and a
/// signed policy for it.
struct Clinic {
    _prometheus: test_support::Prometheus,
    front: test_support::ClinicFront,
    dir: tempfile::TempDir,
    package: std::path::PathBuf,
    signed: Signed,
    token: &'static str,
}

impl Clinic {
    async fn start() -> Self {
        let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
            .await
            .unwrap();
        let token = "entrypoint-clinic-token-01";
        let front = test_support::ClinicFront::start(
            &prometheus.url(),
            SecretString::from(token.to_owned()),
        )
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (package, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
        let signed = sign(
            dir.path(),
            "envelope.json",
            &package,
            &policy("clinic", "managed_auto_oncall_clinic", json!({})),
        );
        Clinic {
            _prometheus: prometheus,
            front,
            dir,
            package,
            signed,
            token,
        }
    }

    fn audit(&self) -> std::path::PathBuf {
        self.dir.path().join("audit.jsonl")
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        clinic_env(
            &self.signed,
            &self.audit(),
            self.front.base_url(),
            self.token,
        )
    }

    /// Runs `bin` with `env` and the Clinic arguments; exit 0 and one parsed result.
    async fn call(&self, bin: &Path, env: Vec<(&'static str, String)>) -> ToolResult {
        self.call_with(bin, env, clinic_args()).await
    }

    async fn call_with(
        &self,
        bin: &Path,
        env: Vec<(&'static str, String)>,
        args: String,
    ) -> ToolResult {
        let bin = bin.to_owned();
        let (code, out, err) = blocking(move || run(&bin, &[], &env, &args)).await;
        assert_eq!(code, 0, "a result is written with exit 0: {err}");
        ToolResult::from_json(out.trim()).unwrap()
    }
}

#[tokio::test]
async fn clinic_tool_from_a_deployable_folder() {
    let clinic = Clinic::start().await;
    let bin = entrypoint(&clinic.package);
    let result = clinic.call(&bin, clinic.env()).await;
    let evidence = result.details().items[0].evidence.as_ref().unwrap();
    assert_eq!(evidence.series_count, 56);
    assert!((evidence.top_peak().unwrap() - 22.84).abs() < 0.005);
    let records = audit_records(&clinic.audit());
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["status"], "ok");
    assert_eq!(records[0]["revision"], "v3");
    assert_eq!(records[0]["query_ids"], json!(["tidb_cpu"]));
    let audit_text = std::fs::read_to_string(clinic.audit()).unwrap();
    assert!(!audit_text.contains(clinic.token) && !audit_text.contains("process_cpu_seconds"));
    assert!(!result.to_json().unwrap().contains(clinic.token));

    // A `provider` argument is a result (exit 0), not a crash.
    let env = clinic.env();
    let (code, out, _) = blocking(move || {
        run(
            &bin,
            &[],
            &env,
            r#"{"queries":[{"queryId":"q","expr":"up"}],"provider":"manus"}"#,
        )
    })
    .await;
    assert_eq!(code, 0);
    let result = ToolResult::from_json(out.trim()).unwrap();
    assert_eq!(failure_of(&result).1, FailureClass::PolicyViolation);
}

/// A Clinic API answering series whose label values are long (a trace list or SQL text
/// in a label): every one-query result is `ok` within 4 KiB with its labels cut and
/// marked, and its audit record names no secret. Before label values were bounded (on
/// `0ff61d2`), 3 series of 100 KiB labels of one repeated letter were `output_blocked` by
/// the scan's decoding budget, with a correction about "a protected value" and every
/// guarded secret (`clinic_api_token`) named in the audit record; 3 series of 100 KiB of
/// words gave 308 KB of text, and 3 series of 10 KiB gave `ok` with 31.6 KB of text.
#[tokio::test]
async fn long_label_values_give_a_bounded_result_naming_no_secret() {
    let clinic = Clinic::start().await;
    let bin = entrypoint(&clinic.package);
    for (n, label_bytes, filler) in [
        (3, 100 << 10, "l"),
        (3, 100 << 10, "select 1 "),
        (3, 10 << 10, "select 1 "),
    ] {
        clinic
            .front
            .faults()
            .set_fault(test_support::Fault::LongLabels {
                series: n,
                label_bytes,
                filler,
            });
        let result = clinic.call(&bin, clinic.env()).await;
        let details = result.details();
        assert!(!result.is_failed(), "{label_bytes}: {}", result.text());
        assert!(
            result.text().len() <= 4096,
            "{label_bytes}: {} bytes",
            result.text().len()
        );
        let evidence = details.items[0].evidence.as_ref().unwrap();
        assert_eq!(evidence.series_count, n as u64);
        assert!(
            evidence.series[0].labels["sql"].ends_with(evidence_connectors::limits::CUT_MARK),
            "{label_bytes}"
        );
        let records = audit_records(&clinic.audit());
        let last = records.last().unwrap();
        assert_eq!(last["status"], "ok");
        assert!(last.get("blocked_secrets").is_none(), "{last}");
    }
}

/// One changed byte of the packaged tool binary changes the digest the process computes
/// from itself, so the envelope signed for the folder's digest does not verify: the call
/// is `policy_verification_failed` (class `authorization`) with one audit record and
/// nothing sent to Clinic.
#[tokio::test]
async fn one_changed_byte_of_the_packaged_binary_is_refused_before_any_request() {
    let clinic = Clinic::start().await;
    let bin = entrypoint(&clinic.package);
    with_one_byte_changed(&bin, &bin);
    let result = clinic.call(&bin, clinic.env()).await;
    assert_eq!(
        failure_of(&result),
        (
            "policy_verification_failed".to_owned(),
            FailureClass::Authorization
        )
    );
    assert!(
        clinic.front.requests().is_empty(),
        "nothing was sent for a changed binary"
    );
    let records = audit_records(&clinic.audit());
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["failure_class"], "authorization");
}

/// Clinic v2 and v3, each from its own deployable folder, run their own binary under
/// their own revision and digest (as their audit records show); v3's binary refuses v2's
/// envelope (`policy_verification_failed`), and the built binary started outside any
/// package folder runs nothing (`package_load_failed`, nothing sent).
#[tokio::test]
async fn clinic_v2_and_v3_each_run_their_own_binary() {
    let clinic = Clinic::start().await;
    let dir = clinic.dir.path();
    let (v2, v2_digest) = deploy(dir, "managed_auto_oncall_clinic", "v2", CLINIC_TOOL);
    let v2_signed = sign(
        dir,
        "v2-envelope.json",
        &v2,
        &policy("clinic", "managed_auto_oncall_clinic", json!({})),
    );
    let v2_audit = dir.join("v2-audit.jsonl");
    let v2_env = clinic_env(&v2_signed, &v2_audit, clinic.front.base_url(), clinic.token);

    // Each folder's own binary runs under its own revision and digest.
    let v2_result = clinic.call(&entrypoint(&v2), v2_env.clone()).await;
    assert!(!v2_result.is_failed(), "{}", v2_result.text());
    let v3_result = clinic
        .call(&entrypoint(&clinic.package), clinic.env())
        .await;
    assert!(!v3_result.is_failed(), "{}", v3_result.text());
    let v2_record = &audit_records(&v2_audit)[0];
    let v3_record = &audit_records(&clinic.audit())[0];
    assert_eq!(v2_record["revision"], "v2");
    assert_eq!(v2_record["digest"], v2_digest);
    assert_eq!(v3_record["revision"], "v3");
    assert_ne!(v2_record["digest"], v3_record["digest"]);

    // v3's binary with v2's envelope: the package it runs in is v3, so v2's policy does
    // not verify.
    let result = clinic
        .call(&entrypoint(&clinic.package), v2_env.clone())
        .await;
    assert_eq!(failure_of(&result).0, "policy_verification_failed");

    // The built binary outside any package folder runs nothing.
    let before = clinic.front.requests().len();
    let result = clinic.call(Path::new(CLINIC_TOOL), clinic.env()).await;
    assert_eq!(
        failure_of(&result),
        ("package_load_failed".to_owned(), FailureClass::Readiness)
    );
    assert_eq!(clinic.front.requests().len(), before);
}

/// Every runtime-context failure is a result of a shared class, with one audit record,
/// no Clinic token in it and nothing sent: the envelope or the verification keys unset or
/// malformed, the policy signing key (`EVIDENCE_SIGNING_KEY`) present in the sandbox, a
/// secret unset or too short to guard, the deployment configuration incomplete. A package
/// folder that does not load is a result too, with the audit record of an unloaded
/// package (no digest).
#[tokio::test]
async fn runtime_context_failures_are_results_with_one_audit_record_each() {
    let clinic = Clinic::start().await;
    let bin = entrypoint(&clinic.package);
    let malformed = clinic.dir.path().join("malformed.json");
    std::fs::write(&malformed, "{\"not\": \"an envelope\"}").unwrap();
    let set = |name: &'static str, value: &str| {
        let mut env: Vec<(&'static str, String)> = clinic
            .env()
            .into_iter()
            .filter(|(k, _)| *k != name)
            .collect();
        env.push((name, value.to_owned()));
        env
    };
    let unset = |name: &str| -> Vec<(&'static str, String)> {
        clinic
            .env()
            .into_iter()
            .filter(|(k, _)| *k != name)
            .collect()
    };
    let cases: Vec<(&str, Env, &str, FailureClass)> = vec![
        (
            "envelope file missing",
            set("EVIDENCE_TRUSTED_CONTEXT", "/nonexistent/envelope.json"),
            "runtime_context_missing",
            FailureClass::Authorization,
        ),
        (
            "envelope unset",
            unset("EVIDENCE_TRUSTED_CONTEXT"),
            "runtime_context_missing",
            FailureClass::Authorization,
        ),
        (
            "envelope malformed",
            set("EVIDENCE_TRUSTED_CONTEXT", malformed.to_str().unwrap()),
            "runtime_context_invalid",
            FailureClass::Authorization,
        ),
        (
            "keys unset",
            unset("EVIDENCE_POLICY_KEYS"),
            "runtime_context_missing",
            FailureClass::Authorization,
        ),
        (
            "keys malformed",
            set("EVIDENCE_POLICY_KEYS", "no-colon-here"),
            "runtime_context_invalid",
            FailureClass::Authorization,
        ),
        (
            "signing key in the sandbox",
            set("EVIDENCE_SIGNING_KEY", &signing_key()),
            "runtime_context_invalid",
            FailureClass::Authorization,
        ),
        (
            "secret unset",
            unset("CLINIC_API_TOKEN"),
            "secret_not_bound",
            FailureClass::Authentication,
        ),
        (
            "secret too short to guard",
            set("CLINIC_API_TOKEN", "short"),
            "secret_not_bound",
            FailureClass::Authentication,
        ),
        (
            "base URL unset",
            unset("CLINIC_BASE_URL"),
            "tool_config_invalid",
            FailureClass::Readiness,
        ),
        (
            // No default path: the deployment names Clinic's path.
            "path template unset",
            unset("CLINIC_QUERY_PATH_TEMPLATE"),
            "tool_config_invalid",
            FailureClass::Readiness,
        ),
    ];
    let mut expected_records = 0;
    for (case, env, code, class) in cases {
        let result = clinic.call(&bin, env).await;
        assert_eq!(failure_of(&result), (code.to_owned(), class), "{case}");
        assert!(class.is_shared(), "{case}: stops the turn");
        assert!(
            !result.details().correction.as_ref().unwrap().allowed,
            "{case}"
        );
        assert!(!result.text().contains(clinic.token), "{case}");
        expected_records += 1;
        let records = audit_records(&clinic.audit());
        assert_eq!(records.len(), expected_records, "{case}: one audit record");
        assert_eq!(records.last().unwrap()["status"], "error", "{case}");
    }
    assert!(clinic.front.requests().is_empty(), "nothing was sent");

    // A package folder that does not load (an unlisted file): a result, with the audit
    // record of an unloaded package.
    std::fs::write(clinic.package.join("extra.sh"), "env\n").unwrap();
    let result = clinic.call(&bin, clinic.env()).await;
    assert_eq!(
        failure_of(&result),
        ("package_load_failed".to_owned(), FailureClass::Readiness)
    );
    let records = audit_records(&clinic.audit());
    let last: &Value = records.last().unwrap();
    assert_eq!(last["package"], "managed_auto_oncall_clinic");
    assert!(last.get("digest").is_none(), "{last}");
}

#[tokio::test]
async fn manus_tool_from_a_deployable_folder() {
    let (user, password) = ("entrypoint-reader", "entrypoint-password-01");
    let vida = test_support::Prometheus::start(test_support::Fixture::Vida)
        .await
        .unwrap();
    let front = test_support::ManusFront::start(
        "vida",
        &vida.url(),
        SecretString::from(user.to_owned()),
        SecretString::from(password.to_owned()),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (package, _) = deploy(dir.path(), "managed_auto_oncall_manus", "v2", MANUS_TOOL);
    let signed = sign(
        dir.path(),
        "envelope.json",
        &package,
        &policy(
            "manus",
            "managed_auto_oncall_manus",
            json!({"manus_target": "vida"}),
        ),
    );
    let audit = dir.path().join("audit.jsonl");
    let ref_keys = {
        use base64::Engine as _;
        format!(
            "k1:{}",
            base64::engine::general_purpose::STANDARD.encode([7u8; 32])
        )
    };
    let mut env = runtime_env(&signed, &audit);
    env.push(("MANUS_VIDA_URL", front.base_url()));
    env.push(("MANUS_USERNAME", user.to_owned()));
    env.push(("MANUS_PASSWORD", password.to_owned()));
    env.push(("MANUS_REF_KEYS", ref_keys));
    let bin = entrypoint(&package);
    let args = format!(r#"{{"queryId":"vida_cpu","expr":"{TIDB_CPU_ARGS}","step":"15s"}}"#);
    let (code, out, err) = blocking(move || run(&bin, &[], &env, &args)).await;
    assert_eq!(code, 0, "{err}");
    let result = ToolResult::from_json(out.trim()).unwrap();
    let evidence = result.details().evidence.as_ref().unwrap();
    assert!(evidence.series_count > 0);
    let instance = evidence.series[0].labels.get("instance").unwrap();
    assert!(
        !instance.contains(':') && !instance.contains("10.21."),
        "address leaked: {instance}"
    );
    assert!(!out.contains("10.21."), "an address reached the output");
    assert_eq!(audit_records(&audit).len(), 1);
}

/// `sign-policy --package-dir` refuses a source folder (exit 2, naming the entrypoint
/// `bin/clinic-tool` it lacks); the envelope for a deployable folder carries exactly the
/// digest packaging printed; `package-tool` refuses to write into a folder that is not
/// empty.
#[test]
fn the_signer_signs_only_a_deployable_folder() {
    let dir = tempfile::tempdir().unwrap();
    let source = local_source(dir.path(), "managed_auto_oncall_clinic", "v3");
    let (code, _, err) = run(
        Path::new(SIGN_POLICY),
        &["--package-dir", source.to_str().unwrap()],
        &[
            ("EVIDENCE_SIGNING_KID", KID.into()),
            ("EVIDENCE_SIGNING_KEY", signing_key()),
        ],
        &policy("clinic", "managed_auto_oncall_clinic", json!({})).to_string(),
    );
    assert_eq!(code, 2);
    assert!(err.contains("bin/clinic-tool"), "{err}");

    // The deployable folder's digest is what packaging printed and what is signed.
    let (package, digest) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let signed = sign(
        dir.path(),
        "envelope.json",
        &package,
        &policy("clinic", "managed_auto_oncall_clinic", json!({})),
    );
    let envelope: Value =
        serde_json::from_str(&std::fs::read_to_string(&signed.envelope).unwrap()).unwrap();
    assert_eq!(
        envelope.to_string().matches(&digest).count(),
        1,
        "{envelope}"
    );

    // Packaging refuses an occupied output folder.
    let (code, _, err) = run(
        Path::new(PACKAGE_TOOL),
        &[
            "--source",
            source.to_str().unwrap(),
            "--out",
            package.to_str().unwrap(),
            "--binary",
            CLINIC_TOOL,
        ],
        &[],
        "",
    );
    assert_eq!(code, 2);
    assert!(err.contains("not empty"), "{err}");
}

/// The secrets each committed package's auth binding injects are exactly the
/// auth-binding variables its tool reads (`CONTEXT_VARS`): the binding and the connector
/// name the same variables.
#[test]
fn auth_bindings_inject_exactly_what_the_tools_read() {
    use evidence_tool::context::{CONTEXT_VARS, ReadBy, SetBy};
    for (identity, revision, read_by) in [
        ("managed_auto_oncall_clinic", "v3", ReadBy::Clinic),
        ("managed_auto_oncall_clinic", "v2", ReadBy::Clinic),
        ("managed_auto_oncall_manus", "v2", ReadBy::Manus),
        ("managed_auto_oncall_wetech", "v2", ReadBy::Wetech),
    ] {
        let package =
            evidence_package::Package::load_source(&source_dir(identity, revision)).unwrap();
        let mut injected: Vec<&str> = package
            .manifest()
            .auth
            .secrets
            .iter()
            .map(|s| s.env.as_str())
            .collect();
        injected.sort_unstable();
        let mut read: Vec<&str> = CONTEXT_VARS
            .iter()
            .filter(|v| v.read_by == read_by && v.set_by == SetBy::AuthBinding)
            .map(|v| v.name)
            .collect();
        read.sort_unstable();
        assert_eq!(injected, read, "{identity} {revision}");
    }
}

/// `absent()` under the injected scope, against real Prometheus: the scope matcher the
/// lock adds to every selector (`cluster_id="SaaS01"`) becomes a label of `absent`'s
/// output series, as it does behind prom-label-proxy. So `absent(x)` through the tool
/// answers "x is absent in the policy's cluster" with one series labelled with that
/// cluster (Prometheus itself would give one series without labels), and nothing of any
/// other cluster. The behaviour is kept and stated in the README's scope rule.
#[tokio::test]
async fn absent_carries_the_injected_scope_label_as_behind_prom_label_proxy() {
    let clinic = Clinic::start().await;
    let bin = entrypoint(&clinic.package);
    let args = json!({"queries": [{"queryId": "gone", "step": "15s",
                                   "expr": "absent(tidb_no_such_metric_total)"}]});
    let result = clinic.call_with(&bin, clinic.env(), args.to_string()).await;
    let details = serde_json::to_value(result.details()).unwrap();
    let item = &details["items"][0];
    assert_eq!(item["status"], "ok", "{details}");
    let evidence = &item["evidence"];
    assert_eq!(evidence["series_count"], 1, "{details}");
    assert_eq!(
        evidence["common_labels"],
        json!({"cluster_id": "SaaS01"}),
        "{details}"
    );
    assert!(
        evidence["expr"]
            .as_str()
            .unwrap()
            .contains(r#"tidb_no_such_metric_total{cluster_id="SaaS01"}"#),
        "{details}"
    );
}

/// `sign-policy` refuses a policy that has already expired (no sandbox would accept it)
/// and says why; a tool binary's `--help` prints its usage and exits 0, where any other
/// argument is a usage error (exit 2).
#[test]
fn the_signer_refuses_an_expired_policy_and_help_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (package, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let past =
        |hours: i64| (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(hours)).to_string();
    let expired = policy(
        "clinic",
        "managed_auto_oncall_clinic",
        json!({"issued_at": past(2), "expires_at": past(1)}),
    );
    let (code, out, err) = run(
        Path::new(SIGN_POLICY),
        &["--package-dir", package.to_str().unwrap()],
        &[
            ("EVIDENCE_SIGNING_KID", KID.into()),
            ("EVIDENCE_SIGNING_KEY", signing_key()),
        ],
        &expired.to_string(),
    );
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("expired"), "{err}");

    for bin in [CLINIC_TOOL, MANUS_TOOL, WETECH_TOOL] {
        let (code, out, _) = run(Path::new(bin), &["--help"], &[], "");
        assert_eq!(code, 0, "{bin}");
        assert!(out.starts_with("usage: ") && out.contains("--mcp"), "{out}");
        let (code, out, err) = run(Path::new(bin), &["--bogus"], &[], "");
        assert_eq!((code, out.as_str()), (2, ""), "{err}");
    }
}
