//! The tool-sandbox entrypoints and `sign_policy`, run as processes with the documented
//! environment, against real Prometheus behind the Clinic and Manus test fronts.
//! `cargo test` builds the examples first; these tests run the built binaries.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use evidence_test_support as support;
use managed_evidence::result::ToolResult;
use secrecy::SecretString;
use serde_json::{Value, json};

fn example(name: &str) -> PathBuf {
    // target/debug/deps/entrypoints-HASH -> target/debug/examples/NAME
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} is not built: run `cargo test` (it builds examples)",
        path.display()
    );
    path
}

/// A local deployment of a committed package: same files, loopback allowlist.
fn local_package(dir: &Path, identity: &str, revision: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("packages")
        .join(identity)
        .join(revision);
    let dst = dir.join(identity);
    let status = Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(&dst)
        .status()
        .unwrap();
    assert!(status.success());
    let manifest_path = dst.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest["network"] = json!({"mode": "restricted", "hosts": ["127.0.0.1"]});
    std::fs::write(
        &manifest_path,
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
    dst
}

fn policy(provider: &str, package: &str, extra: Value) -> Value {
    let now = jiff::Timestamp::now();
    let ts = |s: i64| jiff::Timestamp::from_second(s).unwrap().to_string();
    let mut p = json!({
        "policy_id": "pol-entrypoint-test", "ticket": "APID-29213", "provider": provider,
        "package": package, "account": "acct-test",
        "cluster": {"id": "SaaS01", "tier": "dedicated"}, "operation": "query_range",
        "window": {"start": ts(support::APID_29213_START), "end": ts(support::APID_29213_END)},
        "lookback": 3600,
        "limits": {"max_points_per_series": 11000, "min_step": 15, "max_batch": 4,
                   "max_series_kept": 5, "max_calls_per_turn": 8},
        "issued_at": now.to_string(),
        "expires_at": (now + jiff::SignedDuration::from_hours(1)).to_string(),
    });
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

fn run(bin: &Path, args: &[&str], env: &[(&str, String)], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(bin)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

struct Signed {
    envelope: PathBuf,
    keys: String,
}

fn sign(dir: &Path, package_dir: &Path, policy: &Value) -> Signed {
    let key = base64::engine::general_purpose::STANDARD.encode([42u8; 32]);
    let (code, out, err) = run(
        &example("sign_policy"),
        &["--package-dir", package_dir.to_str().unwrap()],
        &[
            ("EVIDENCE_SIGNING_KID", "test-2026".into()),
            ("EVIDENCE_SIGNING_KEY", key.clone()),
        ],
        &policy.to_string(),
    );
    assert_eq!(code, 0, "{err}");
    let envelope = dir.join("envelope.json");
    std::fs::write(&envelope, out).unwrap();
    Signed {
        envelope,
        keys: format!("test-2026:{key}"),
    }
}

fn common_env(signed: &Signed, package_dir: &Path, audit: &Path) -> Vec<(&'static str, String)> {
    vec![
        (
            "EVIDENCE_TRUSTED_CONTEXT",
            signed.envelope.display().to_string(),
        ),
        ("EVIDENCE_POLICY_KEYS", signed.keys.clone()),
        ("EVIDENCE_PACKAGE_DIR", package_dir.display().to_string()),
        ("EVIDENCE_AUDIT_LOG", audit.display().to_string()),
    ]
}

const TIDB_CPU_ARGS: &str =
    r#"sum by (instance) (rate(process_cpu_seconds_total{job=\"tidb\"}[1m]))"#;

#[tokio::test]
async fn clinic_tool_from_a_shell() {
    let prometheus = support::Prometheus::start(support::Fixture::Main)
        .await
        .unwrap();
    let token = "entrypoint-clinic-token-01";
    let front =
        support::ClinicFront::start(&prometheus.url(), SecretString::from(token.to_owned()))
            .await
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let package = local_package(dir.path(), "managed_auto_oncall_clinic", "v3");
    let signed = sign(
        dir.path(),
        &package,
        &policy("clinic", "managed_auto_oncall_clinic", json!({})),
    );
    let audit = dir.path().join("audit.jsonl");
    let mut env = common_env(&signed, &package, &audit);
    env.push(("CLINIC_BASE_URL", front.base_url()));
    env.push(("CLINIC_API_TOKEN", token.to_owned()));
    let bin = example("clinic_tool");
    let args = format!(
        r#"{{"queries":[{{"queryId":"tidb_cpu","expr":"{TIDB_CPU_ARGS}","step":"15s","unit":"cores"}}]}}"#
    );
    let (code, out, err) = tokio::task::spawn_blocking({
        let (bin, env, args) = (bin.clone(), env.clone(), args.clone());
        move || run(&bin, &[], &env, &args)
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{err}");
    let result = ToolResult::from_json(out.trim()).unwrap();
    let evidence = result.details().items[0].evidence.as_ref().unwrap();
    assert_eq!(evidence.series_count, 56);
    assert!((evidence.top_peak().unwrap() - 22.84).abs() < 0.005);
    let record: Value = serde_json::from_str(
        std::fs::read_to_string(&audit)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(record["status"], "ok");
    assert_eq!(record["query_ids"], json!(["tidb_cpu"]));
    let audit_text = std::fs::read_to_string(&audit).unwrap();
    assert!(!audit_text.contains(token) && !audit_text.contains("process_cpu_seconds_total"));
    assert!(!out.contains(token));

    // A `provider` argument is a result (exit 0), not a crash.
    let (code, out, _) = tokio::task::spawn_blocking({
        let (bin, env) = (bin.clone(), env.clone());
        move || {
            run(
                &bin,
                &[],
                &env,
                r#"{"queries":[{"queryId":"q","expr":"up"}],"provider":"manus"}"#,
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(code, 0);
    let result = ToolResult::from_json(out.trim()).unwrap();
    assert!(result.is_failed());
    assert_eq!(
        result.details().error.as_ref().unwrap().class.as_str(),
        "policy_violation"
    );

    // The envelope is bound to the package digest: one changed byte in the package and
    // the tool refuses to run the query.
    let readme = package.join("README.md");
    let mut text = std::fs::read_to_string(&readme).unwrap();
    text.push(' ');
    std::fs::write(&readme, text).unwrap();
    let before = front.requests().len();
    let (code, out, _) = tokio::task::spawn_blocking(move || run(&bin, &[], &env, &args))
        .await
        .unwrap();
    assert_eq!(code, 0);
    let result = ToolResult::from_json(out.trim()).unwrap();
    assert_eq!(
        result.details().error.as_ref().unwrap().code.as_str(),
        "policy_verification_failed"
    );
    assert_eq!(front.requests().len(), before, "nothing was sent");
}

#[tokio::test]
async fn manus_tool_from_a_shell() {
    let (user, password) = ("entrypoint-reader", "entrypoint-password-01");
    let vida = support::Prometheus::start(support::Fixture::Vida)
        .await
        .unwrap();
    let front = support::ManusFront::start(
        "vida",
        &vida.url(),
        SecretString::from(user.to_owned()),
        SecretString::from(password.to_owned()),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let package = local_package(dir.path(), "managed_auto_oncall_manus", "v2");
    let signed = sign(
        dir.path(),
        &package,
        &policy(
            "manus",
            "managed_auto_oncall_manus",
            json!({"manus_target": "vida"}),
        ),
    );
    let audit = dir.path().join("audit.jsonl");
    let ref_keys = format!(
        "k1:{}",
        base64::engine::general_purpose::STANDARD.encode([7u8; 32])
    );
    let mut env = common_env(&signed, &package, &audit);
    env.push(("MANUS_VIDA_URL", front.base_url()));
    env.push(("MANUS_USERNAME", user.to_owned()));
    env.push(("MANUS_PASSWORD", password.to_owned()));
    env.push(("MANUS_REF_KEYS", ref_keys));
    let bin = example("manus_tool");
    let args = format!(r#"{{"queryId":"vida_cpu","expr":"{TIDB_CPU_ARGS}","step":"15s"}}"#);
    let (code, out, err) = tokio::task::spawn_blocking(move || run(&bin, &[], &env, &args))
        .await
        .unwrap();
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
}
