//! What the `evidence-tool` process tests share: the built binaries, deployable package
//! folders made by `package-tool` from the committed sources (with a loopback
//! allowlist), policies signed by `sign-policy`, and running a binary with exactly the
//! environment given.
#![allow(dead_code, unreachable_pub)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use evidence_test_support as test_support;
use serde_json::{Value, json};

mod http_server;
mod providers;
pub mod raw;
mod sdk;
mod sessions;
mod stop;
mod wire;
#[allow(unused_imports)]
pub use http_server::{HttpServer, deliver_to};
#[allow(unused_imports)]
pub use providers::{ClinicProvider, Providers};
#[allow(unused_imports)]
pub use sdk::{python, run_client};
#[allow(unused_imports)]
pub use sessions::{
    http_env, http_session, session_headers, session_of, session_policy_of, sign_session,
    step_result, tool_call,
};
#[allow(unused_imports)]
pub use wire::Wire;

pub const CLINIC_TOOL: &str = env!("CARGO_BIN_EXE_clinic-tool");
pub const MANUS_TOOL: &str = env!("CARGO_BIN_EXE_manus-tool");
pub const WETECH_TOOL: &str = env!("CARGO_BIN_EXE_wetech-tool");
pub const SIGN_POLICY: &str = env!("CARGO_BIN_EXE_sign-policy");
pub const PACKAGE_TOOL: &str = env!("CARGO_BIN_EXE_package-tool");

/// The key id of the tests' signing key.
pub const KID: &str = "test-2026";

/// The tests' Ed25519 private key (a fixed seed), base64: only `sign-policy` gets it.
pub fn signing_key() -> String {
    base64::engine::general_purpose::STANDARD.encode([42u8; 32])
}

/// The tests' signer (the private key of [`signing_key`]).
pub fn test_signer() -> evidence_policy::PolicySigner {
    evidence_policy::PolicySigner::from_base64(
        evidence_policy::KeyId::new(KID).unwrap(),
        &secrecy::SecretString::from(signing_key()),
    )
    .unwrap()
}

/// What a tool sandbox gets in `EVIDENCE_POLICY_KEYS`: the public key only.
pub fn policy_keys() -> String {
    test_signer().key_ring_entry()
}

/// The committed source folder of a package revision.
pub fn source_dir(identity: &str, revision: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../packages")
        .join(identity)
        .join(revision)
}

/// The committed source of a package revision with the network allowlist naming
/// loopback (the digest covers the allowlist, so this is a package of its own), written
/// to `dir/<identity>-<revision>-src`.
pub fn local_source(dir: &Path, identity: &str, revision: &str) -> PathBuf {
    test_support::loopback_package_source(
        &source_dir(identity, revision),
        &dir.join(format!("{identity}-{revision}-src")),
    )
    .unwrap()
}

/// A deployable folder of a package revision, made by `package-tool` from the loopback
/// source and the built `binary`; returns its folder and the digest `package-tool`
/// printed.
pub fn deploy(dir: &Path, identity: &str, revision: &str, binary: &str) -> (PathBuf, String) {
    deploy_edited(dir, identity, revision, binary, |_| {})
}

/// [`deploy`] with the loopback source's manifest changed by `edit` first (a package of
/// its own: the digest covers the manifest).
pub fn deploy_edited(
    dir: &Path,
    identity: &str,
    revision: &str,
    binary: &str,
    edit: impl FnOnce(&mut Value),
) -> (PathBuf, String) {
    let source = local_source(dir, identity, revision);
    let manifest_path = source.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    edit(&mut manifest);
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let out = dir.join(format!("{identity}-{revision}"));
    let (code, stdout, stderr) = run(
        Path::new(PACKAGE_TOOL),
        &[
            "--source",
            source.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--binary",
            binary,
        ],
        &[],
        "",
    );
    assert_eq!(code, 0, "{stderr}");
    let summary: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["identity"], identity);
    assert_eq!(summary["revision"], revision);
    (out, summary["digest"].as_str().unwrap().to_owned())
}

/// [`deploy`] of a package whose manifest's `limits.timeout_ms` is `timeout_ms`.
pub fn deploy_with_timeout(
    dir: &Path,
    identity: &str,
    revision: &str,
    binary: &str,
    timeout_ms: u64,
) -> (PathBuf, String) {
    deploy_edited(dir, identity, revision, binary, |manifest| {
        manifest["limits"]["timeout_ms"] = json!(timeout_ms);
    })
}

/// The entrypoint binary inside a deployable folder.
pub fn entrypoint(package_dir: &Path) -> PathBuf {
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(package_dir.join("manifest.json")).unwrap())
            .unwrap();
    package_dir.join(manifest["entrypoint"].as_str().unwrap())
}

/// The limits of the tests' policies, with `max_batch` queries to a call.
pub fn limits(max_batch: u32) -> Value {
    json!({"max_points_per_series": 11000, "min_step": 15, "max_batch": max_batch,
           "max_series_kept": 5, "max_calls_per_turn": 8})
}

/// A trusted policy for the APID-29213 window, valid for an hour from now: the
/// committed APID-29213 policy as `pol-entrypoint-test` of `acct-test` with
/// [`limits`]`(4)`, with the fields of `extra` put over it.
pub fn policy(provider: &str, package: &str, extra: Value) -> Value {
    let mut fields = json!({"policy_id": "pol-entrypoint-test", "account": "acct-test",
                            "limits": limits(4)});
    fields
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    test_support::policy::apid_29213_now(provider, package, fields)
}

/// Runs `bin` with exactly `env` (plus `PATH`), `stdin` as its input; returns the exit
/// code, stdout and stderr.
pub fn run(
    bin: &Path,
    args: &[&str],
    env: &[(&str, String)],
    stdin: &str,
) -> (i32, String, String) {
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
    // A process may answer before reading its input (a refused `--package-dir`).
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.unwrap(),
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A signed envelope on disk and the verification keys (public) of the sandbox.
pub struct Signed {
    pub envelope: PathBuf,
    pub keys: String,
}

/// Signs `policy` with `sign-policy --package-dir` (the digest recomputed from the
/// deployable folder), writing the envelope to `dir/<name>`.
pub fn sign(dir: &Path, name: &str, package_dir: &Path, policy: &Value) -> Signed {
    let (code, out, err) = run(
        Path::new(SIGN_POLICY),
        &["--package-dir", package_dir.to_str().unwrap()],
        &[
            ("EVIDENCE_SIGNING_KID", KID.into()),
            ("EVIDENCE_SIGNING_KEY", signing_key()),
        ],
        &policy.to_string(),
    );
    assert_eq!(code, 0, "{err}");
    let envelope = dir.join(name);
    std::fs::write(&envelope, out).unwrap();
    Signed {
        envelope,
        keys: policy_keys(),
    }
}

/// Signs `policy` with `sign-policy --package-digest` for a stated digest; returns the
/// envelope's JSON.
pub fn sign_for_digest(policy: &Value, digest: &str) -> String {
    let (code, out, err) = run(
        Path::new(SIGN_POLICY),
        &["--package-digest", digest],
        &[
            ("EVIDENCE_SIGNING_KID", KID.into()),
            ("EVIDENCE_SIGNING_KEY", signing_key()),
        ],
        &policy.to_string(),
    );
    assert_eq!(code, 0, "{err}");
    out
}

/// Writes to `out` the binary `bin` with one byte of its `.comment` section (the
/// compiler's note, never loaded) changed: it still runs, and its digest differs.
/// `out` may be `bin`.
pub fn with_one_byte_changed(bin: &Path, out: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let mut bytes = std::fs::read(bin).unwrap();
    let marker = b"rustc version";
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("the binary carries the compiler's .comment note");
    bytes[at] = b'R';
    std::fs::write(out, &bytes).unwrap();
    std::fs::set_permissions(out, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The runtime-context variables every tool reads, with a turn ledger of its own (a new
/// directory next to the audit log for each call of this function: servers started with
/// one such environment share one ledger).
pub fn runtime_env(signed: &Signed, audit: &Path) -> Vec<(&'static str, String)> {
    let dir = audit.parent().unwrap_or(Path::new("/tmp"));
    runtime_env_sharing(signed, audit, &new_ledger(dir))
}

/// The runtime-context variables every tool reads, with the turn ledger `ledger`: the
/// servers of one evidence turn, each started with its own envelope and audit log, name
/// the same one.
pub fn runtime_env_sharing(
    signed: &Signed,
    audit: &Path,
    ledger: &Path,
) -> Vec<(&'static str, String)> {
    vec![
        (
            "EVIDENCE_TRUSTED_CONTEXT",
            signed.envelope.display().to_string(),
        ),
        ("EVIDENCE_POLICY_KEYS", signed.keys.clone()),
        ("EVIDENCE_AUDIT_LOG", audit.display().to_string()),
        ("EVIDENCE_TURN_LEDGER", ledger.display().to_string()),
    ]
}

/// What the Clinic tool needs besides the runtime's variables: the base URL, the test
/// front's query path template and the bearer token.
pub fn clinic_vars(base_url: String, token: &str) -> [(&'static str, String); 3] {
    [
        ("CLINIC_BASE_URL", base_url),
        (
            "CLINIC_QUERY_PATH_TEMPLATE",
            test_support::ClinicFront::QUERY_RANGE_PATH_TEMPLATE.to_owned(),
        ),
        ("CLINIC_API_TOKEN", token.to_owned()),
    ]
}

/// The whole environment of a Clinic tool against `base_url`: [`runtime_env`] and
/// [`clinic_vars`].
pub fn clinic_env(
    signed: &Signed,
    audit: &Path,
    base_url: String,
    token: &str,
) -> Vec<(&'static str, String)> {
    let mut env = runtime_env(signed, audit);
    env.extend(clinic_vars(base_url, token));
    env
}

/// A new, empty turn-ledger directory under `dir`.
pub fn new_ledger(dir: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let ledger = dir.join(format!("turn-ledger-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&ledger).unwrap();
    ledger
}

/// The audit records written so far.
pub fn audit_records(audit: &Path) -> Vec<Value> {
    std::fs::read_to_string(audit)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs a blocking closure off the async runtime (the test fronts run on it).
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// The turn ledger of [`ready_env`]: one directory for every test, which stays empty
/// (no call there has a policy that verifies, so none names a turn).
fn ready_ledger() -> PathBuf {
    let dir = std::env::temp_dir().join("evidence-tool-tests-ready-ledger");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A complete runtime context for the server of `identity` that reaches no provider:
/// valid verification keys, the envelope named at a path that does not exist (so each
/// call answers `runtime_context_missing`, nothing sent), a turn ledger, its secrets and its
/// configuration pointing at a closed loopback port. A server started with less refuses
/// to start.
pub fn ready_env(identity: &str) -> Vec<(&'static str, String)> {
    let mut env = vec![
        (
            "EVIDENCE_TRUSTED_CONTEXT",
            "/nonexistent/evidence/envelope.json".to_owned(),
        ),
        ("EVIDENCE_POLICY_KEYS", policy_keys()),
        ("EVIDENCE_TURN_LEDGER", ready_ledger().display().to_string()),
    ];
    match identity {
        "managed_auto_oncall_clinic" => {
            env.push(("CLINIC_BASE_URL", "http://127.0.0.1:9".to_owned()));
            env.push((
                "CLINIC_QUERY_PATH_TEMPLATE",
                test_support::ClinicFront::QUERY_RANGE_PATH_TEMPLATE.to_owned(),
            ));
            env.push(("CLINIC_API_TOKEN", "ready-clinic-token-0001".to_owned()));
        }
        "managed_auto_oncall_manus" => {
            env.push(("MANUS_VIDA_URL", "http://127.0.0.1:9".to_owned()));
            env.push(("MANUS_USERNAME", "ready-manus-user-0001".to_owned()));
            env.push(("MANUS_PASSWORD", "ready-manus-password-0001".to_owned()));
            env.push((
                "MANUS_REF_KEYS",
                format!(
                    "k1:{}",
                    base64::engine::general_purpose::STANDARD.encode([7u8; 32])
                ),
            ));
        }
        "managed_auto_oncall_wetech" => {
            env.push(("WETECH_GRAFANA_URL", "http://127.0.0.1:9".to_owned()));
            env.push((
                "WETECH_STORAGE_STATE",
                json!({"cookies": [{"name": "grafana_session",
                    "value": "0123456789abcdef0123456789abcdef", "domain": "127.0.0.1",
                    "path": "/", "httpOnly": true}], "origins": []})
                .to_string(),
            ));
        }
        other => panic!("no ready context for {other}"),
    }
    env
}

/// The entries of the turn `policy_id` in the Redis turn ledger at `url`, parsed.
pub fn redis_entries(url: &str, policy_id: &str) -> Vec<Value> {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let raw: Vec<String> = redis::cmd("LRANGE")
        .arg(format!("evidence:turn:{{{policy_id}}}:entries"))
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    raw.iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The refusals the Redis ledger at `url` counted for the turn `policy_id`, by code
/// (refusals are counted, not appended as entries).
pub fn redis_refusals(url: &str, policy_id: &str) -> std::collections::BTreeMap<String, u64> {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    redis::cmd("HGETALL")
        .arg(format!("evidence:turn:{{{policy_id}}}:refusals"))
        .query(&mut conn)
        .unwrap()
}

/// The refusals the ledger directory `ledger` counted for the turn `policy_id`, by code.
pub fn ledger_refusals(ledger: &Path, policy_id: &str) -> std::collections::BTreeMap<String, u64> {
    match std::fs::read(ledger.join(format!("{policy_id}.refusals.json"))) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap(),
        Err(_) => std::collections::BTreeMap::new(),
    }
}

/// The error code of a call that failed as a whole (empty for any other result).
pub fn code_of(result: &evidence_result::ToolResult) -> String {
    result
        .details()
        .error
        .as_ref()
        .map(|e| e.code.as_str().to_owned())
        .unwrap_or_default()
}

/// The ledger entries of `kind` (`admitted`, `answered`, `abandoned`).
pub fn entries_of<'a>(entries: &'a [Value], kind: &str) -> Vec<&'a Value> {
    entries.iter().filter(|e| e["entry"] == kind).collect()
}
