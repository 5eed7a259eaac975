//! Secrets given as files (`NAME_FILE`), as systemd's `LoadCredential=`, Kubernetes Secret
//! volumes and Docker secrets give them. Each package answers with every secret (and the
//! turn ledger's location) read from a file, one-shot, over stdio and over HTTP, against
//! real Prometheus behind the Clinic and Manus fronts and the Grafana front in real
//! Chromium; the serving process holds the paths, never the values, and ChromeDriver
//! and Chromium inherit neither. Each bad file is its own test: open to other users,
//! both forms at once, empty, unreadable; each is refused before anything is served or
//! sent, naming the path (and the mode) to the operator and nothing of it to the model.
//! A secret read from a file is still withheld by the output guard.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use evidence_policy::SessionToken;
use evidence_result::{FailureClass, Status, ToolResult};
use evidence_test_support as test_support;
use evidence_tool::context::SECRET_FILE_VARS;
use serde_json::{Value, json};
use support::*;

const CLINIC: &str = "managed_auto_oncall_clinic";
const MANUS: &str = "managed_auto_oncall_manus";
const WETECH: &str = "managed_auto_oncall_wetech";
const CLINIC_TOKEN: &str = "file-clinic-token-0001";
const MANUS_USER: &str = "file-manus-reader";
const MANUS_PASSWORD: &str = "file-manus-password-0001";
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Writes `value` to the new file `dir/name` with permission bits `mode`.
fn secret_file(dir: &Path, name: &str, value: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, value).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// The file form of the secret variable `name`.
fn file_form(name: &str) -> &'static str {
    SECRET_FILE_VARS
        .iter()
        .copied()
        .find(|f| f.strip_suffix("_FILE") == Some(name))
        .unwrap_or_else(|| panic!("{name} has no file form"))
}

/// `env` with every secret variable (and the turn ledger) replaced by its file form: the
/// value written, with a line end as `echo` leaves it, to a file of mode 0600 in `dir`.
fn as_files(dir: &Path, env: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let files = dir.join("credentials");
    std::fs::create_dir_all(&files).unwrap();
    env.iter()
        .map(|(name, value)| {
            if SECRET_FILE_VARS
                .iter()
                .any(|f| f.strip_suffix("_FILE") == Some(name))
            {
                let path = secret_file(&files, name, &format!("{value}\n"), 0o600);
                (file_form(name), path.display().to_string())
            } else {
                (*name, value.clone())
            }
        })
        .collect()
}

/// The values of `env`'s secret variables.
fn secret_values(env: &[(&'static str, String)]) -> Vec<String> {
    env.iter()
        .filter(|(name, _)| {
            [
                "CLINIC_API_TOKEN",
                "MANUS_USERNAME",
                "MANUS_PASSWORD",
                "MANUS_REF_KEYS",
                "WETECH_STORAGE_STATE",
            ]
            .contains(name)
        })
        .map(|(_, value)| value.clone())
        .collect()
}

/// The environment of process `pid`, as `NAME=value` entries.
fn environ(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap()
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect()
}

/// One deployed package with its environment (secrets as variables) and the arguments
/// of a call that answers `ok`.
struct Deployed {
    dir: tempfile::TempDir,
    package: PathBuf,
    provider: &'static str,
    identity: &'static str,
    extra: Value,
    env: Vec<(&'static str, String)>,
    args: Value,
}

impl Deployed {
    fn new(
        provider: &'static str,
        identity: &'static str,
        revision: &str,
        binary: &str,
        extra: Value,
        args: Value,
    ) -> Deployed {
        let dir = tempfile::tempdir().unwrap();
        let (package, _) = deploy(dir.path(), identity, revision, binary);
        let signed = sign(
            dir.path(),
            "envelope.json",
            &package,
            &policy(provider, identity, extra.clone()),
        );
        let env = runtime_env(&signed, &dir.path().join("audit.jsonl"));
        Deployed {
            dir,
            package,
            provider,
            identity,
            extra,
            env,
            args,
        }
    }

    fn audit(&self) -> Vec<Value> {
        audit_records(&self.dir.path().join("audit.jsonl"))
    }

    /// One one-shot call with `env`.
    async fn one_shot(&self, env: Vec<(&'static str, String)>) -> ToolResult {
        let bin = entrypoint(&self.package);
        let args = with_query_id(&self.args, "one_shot").to_string();
        let (code, out, err) = blocking(move || run(&bin, &[], &env, &args)).await;
        assert_eq!(code, 0, "{err}");
        ToolResult::from_json(out.trim()).unwrap()
    }

    /// One call over stdio with `env` (plus a stray variable, so that the server
    /// re-executes itself with its own variables only); the serving process's
    /// environment holds no secret value.
    async fn over_stdio(
        &self,
        mut env: Vec<(&'static str, String)>,
        secrets: &[String],
    ) -> ToolResult {
        env.push(("UNRELATED_SETTING", "1".to_owned()));
        let bin = entrypoint(&self.package);
        let (identity, args) = (self.identity, with_query_id(&self.args, "stdio"));
        let secrets = secrets.to_vec();
        blocking(move || {
            let mut wire = Wire::start_with(&bin, &env);
            wire.initialize();
            let held = environ(wire.pid());
            for secret in &secrets {
                assert!(
                    !held.iter().any(|e| e.contains(secret.as_str())),
                    "a secret value in the server's environment: {held:?}"
                );
            }
            assert!(
                !held.iter().any(|e| e.starts_with("UNRELATED_SETTING=")),
                "{held:?}"
            );
            let answer = wire.request(
                1,
                "tools/call",
                json!({"name": identity, "arguments": args}),
            );
            step_result(&answer["result"])
        })
        .await
    }

    /// One call over HTTP with `env`, in a session whose envelope is delivered to the
    /// operator listener.
    async fn over_http(&self, env: Vec<(&'static str, String)>) -> ToolResult {
        let server = HttpServer::start(&entrypoint(&self.package), &http_env(&env));
        let token = SessionToken::mint();
        let envelope = sign_session(
            &self.package,
            &session_policy_of(self.provider, self.identity, &token, self.extra.clone()),
        );
        assert_eq!(server.deliver(&envelope, None).0, 200);
        let id = raw::open_session(server.addr, LOOPBACK).await;
        let reply = raw::call_tool(
            server.addr,
            LOOPBACK,
            &id,
            Some(token.expose()),
            self.identity,
            with_query_id(&self.args, "http"),
        )
        .await;
        assert_eq!(reply.status, 200, "{reply:?}");
        step_result(&reply.message()["result"])
    }

    /// The package answers `ok` one-shot, over stdio and over HTTP with every secret from
    /// a file.
    async fn answers_in_every_shape(&self, env: &[(&'static str, String)]) {
        let secrets = secret_values(env);
        assert!(!secrets.is_empty());
        let files = as_files(self.dir.path(), env);
        assert!(
            files
                .iter()
                .all(|(name, _)| !secrets.iter().any(|s| s == name))
        );
        let one_shot = self.one_shot(files.clone()).await;
        assert_eq!(status_of(&one_shot), Status::Ok, "{}", one_shot.text());
        let stdio = self.over_stdio(files.clone(), &secrets).await;
        assert_eq!(status_of(&stdio), Status::Ok, "{}", stdio.text());
        let http = self.over_http(files).await;
        assert_eq!(status_of(&http), Status::Ok, "{}", http.text());
        for result in [&one_shot, &stdio, &http] {
            for secret in &secrets {
                assert!(!result.text().contains(secret.as_str()));
            }
        }
    }
}

/// The status of a result, or of its one batch item.
fn status_of(result: &ToolResult) -> Status {
    match result.details().items.first() {
        Some(item) => item.status,
        None => result.details().status,
    }
}

/// The arguments of a `tidb_cpu` query (in a batch for Clinic; with its unit where the
/// package takes one).
fn tidb_cpu(batch: bool, unit: bool) -> Value {
    let mut query = json!({"queryId": "tidb_cpu", "expr": test_support::TIDB_CPU.expr,
                           "step": "15s"});
    if unit {
        query["unit"] = json!("cores");
    }
    if batch {
        json!({"queries": [query]})
    } else {
        query
    }
}

/// `args` with its query's `queryId` given `suffix` (one objective per call of a turn).
fn with_query_id(args: &Value, suffix: &str) -> Value {
    let mut args = args.clone();
    let query = match args.get_mut("queries") {
        Some(queries) => &mut queries[0],
        None => &mut args,
    };
    query["queryId"] = json!(format!("tidb_cpu_{suffix}"));
    args
}

fn clinic(base_url: String) -> (Deployed, Vec<(&'static str, String)>) {
    let deployed = Deployed::new(
        "clinic",
        CLINIC,
        "v3",
        CLINIC_TOOL,
        json!({}),
        tidb_cpu(true, true),
    );
    let mut env = deployed.env.clone();
    env.extend(clinic_vars(base_url, CLINIC_TOKEN));
    (deployed, env)
}

#[tokio::test]
async fn clinic_reads_its_token_and_ledger_from_files_one_shot_over_stdio_and_over_http() {
    let providers = Providers::start(CLINIC_TOKEN, MANUS_USER, MANUS_PASSWORD).await;
    let (deployed, env) = clinic(providers.clinic_front.base_url());
    assert!(env.iter().any(|(name, _)| *name == "EVIDENCE_TURN_LEDGER"));
    deployed.answers_in_every_shape(&env).await;
    assert_eq!(
        providers.clinic_front.arrived(),
        3,
        "one provider request per call"
    );
    let calls = deployed
        .audit()
        .into_iter()
        .filter(|r| r.get("record").is_none())
        .count();
    assert_eq!(calls, 3, "one call record per call");
}

#[tokio::test]
async fn manus_reads_its_credentials_and_key_ring_from_files_one_shot_over_stdio_and_over_http() {
    let providers = Providers::start(CLINIC_TOKEN, MANUS_USER, MANUS_PASSWORD).await;
    let deployed = Deployed::new(
        "manus",
        MANUS,
        "v2",
        MANUS_TOOL,
        json!({"manus_target": "vida"}),
        tidb_cpu(false, false),
    );
    let mut env = deployed.env.clone();
    env.extend(providers.manus_vars());
    deployed.answers_in_every_shape(&env).await;
}

/// Wetech's storage state from a file; ChromeDriver (a wrapper that records its own
/// environment, then becomes the real one) and the Chromium it starts inherit neither the
/// value nor the variable that names the file.
#[tokio::test]
async fn wetech_reads_its_storage_state_from_a_file_and_its_browser_inherits_nothing_of_it() {
    let slot = test_support::BrowserSlot::acquire().await;
    let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
        .await
        .unwrap();
    let grafana = test_support::GrafanaFront::start(&prometheus.url())
        .await
        .unwrap();
    let deployed = Deployed::new(
        "wetech",
        WETECH,
        "v2",
        WETECH_TOOL,
        json!({"wetech_query_ids": ["tidb_cpu_one_shot", "tidb_cpu_stdio", "tidb_cpu_http"],
               "wetech_datasource": test_support::GrafanaFront::DATASOURCE_UID, "limits": limits(1)}),
        tidb_cpu(false, true),
    );
    let records = deployed.dir.path().join("environs");
    std::fs::create_dir_all(&records).unwrap();
    let driver = test_support::chromedriver_program()
        .unwrap_or_else(|e| panic!("{e}"))
        .display()
        .to_string();
    let recorder = secret_file(
        deployed.dir.path(),
        "chromedriver-recorder",
        &format!(
            "#!/bin/sh\ntr '\\0' '\\n' < /proc/$$/environ > {}/driver-$$\nexec {driver} \"$@\"\n",
            records.display()
        ),
        0o755,
    );
    let mut env = deployed.env.clone();
    env.push(("WETECH_GRAFANA_URL", grafana.base_url()));
    env.push(("WETECH_STORAGE_STATE", storage_state(&grafana)));
    env.push((
        "WETECH_CHROMIUM",
        test_support::Chromium::find()
            .unwrap()
            .path()
            .display()
            .to_string(),
    ));
    env.push(("WETECH_CHROMEDRIVER", recorder.display().to_string()));
    deployed.answers_in_every_shape(&env).await;
    drop(slot);
    let environs: Vec<String> = std::fs::read_dir(&records)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(!environs.is_empty(), "ChromeDriver never started");
    for environ in environs {
        for needle in [
            "WETECH_",
            "EVIDENCE_",
            test_support::GRAFANA_SESSION_COOKIE_VALUE,
            "/credentials/",
        ] {
            assert!(
                !environ.contains(needle),
                "ChromeDriver inherited {needle}: {environ}"
            );
        }
    }
}

fn storage_state(grafana: &test_support::GrafanaFront) -> String {
    json!({"cookies": [{"name": test_support::GRAFANA_SESSION_COOKIE_NAME,
        "value": test_support::GRAFANA_SESSION_COOKIE_VALUE, "domain": "127.0.0.1", "path": "/",
        "expires": -1, "httpOnly": true, "secure": false, "sameSite": "Lax"}],
        "origins": [{"origin": grafana.base_url(), "localStorage": []}]})
    .to_string()
}

/// The Clinic token given by `token` refused: the one-shot call answers
/// `secret_not_bound` with nothing sent, its audit record telling the operator every part
/// of `expected`, which the model-visible text leaves out; a server over HTTP exits
/// before it serves, saying the same on stderr.
async fn refused(token: Vec<(&'static str, String)>, expected: &[&str]) {
    let providers = ClinicProvider::start(CLINIC_TOKEN).await;
    let (deployed, env) = clinic(providers.front.base_url());
    let mut env: Vec<(&'static str, String)> = env
        .into_iter()
        .filter(|(name, _)| *name != "CLINIC_API_TOKEN")
        .collect();
    env.extend(token);
    let result = deployed.one_shot(env.clone()).await;
    let error = result
        .details()
        .error
        .clone()
        .unwrap_or_else(|| panic!("{}", result.text()));
    assert_eq!(error.code.as_str(), "secret_not_bound", "{}", result.text());
    let records = deployed.audit();
    let detail = records.last().unwrap()["operator_detail"]
        .as_str()
        .unwrap()
        .to_owned();
    for part in expected {
        assert!(detail.contains(part), "{part} not in {detail}");
        assert!(
            !result.text().contains(part),
            "{part} reached the model: {}",
            result.text()
        );
    }
    assert_eq!(providers.front.arrived(), 0, "a request was sent");

    let bin = entrypoint(&deployed.package);
    let env = http_env(&env);
    let (code, _, stderr) = blocking(move || {
        run(
            &bin,
            &["--mcp-http", "127.0.0.1:0", "--operator", "127.0.0.1:0"],
            &env,
            "",
        )
    })
    .await;
    assert_ne!(code, 0, "the server started: {stderr}");
    assert!(!stderr.contains("serving "), "{stderr}");
    for part in expected {
        assert!(stderr.contains(part), "{part} not in {stderr}");
    }
}

#[tokio::test]
async fn a_secret_file_other_users_can_read_is_refused_naming_its_path_and_mode() {
    let dir = tempfile::tempdir().unwrap();
    for (name, mode, shown) in [
        ("world", 0o644, "0644"),
        ("group", 0o640, "0640"),
        ("group-write", 0o620, "0620"),
    ] {
        let path = secret_file(dir.path(), name, CLINIC_TOKEN, mode);
        let path = path.display().to_string();
        refused(
            vec![("CLINIC_API_TOKEN_FILE", path.clone())],
            &[&path, shown],
        )
        .await;
    }
}

#[tokio::test]
async fn both_forms_of_one_secret_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = secret_file(dir.path(), "token", CLINIC_TOKEN, 0o600);
    refused(
        vec![
            ("CLINIC_API_TOKEN", CLINIC_TOKEN.to_owned()),
            ("CLINIC_API_TOKEN_FILE", path.display().to_string()),
        ],
        &["both CLINIC_API_TOKEN and CLINIC_API_TOKEN_FILE are set"],
    )
    .await;
}

#[tokio::test]
async fn an_empty_secret_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in [("empty", ""), ("line-end", "\n")] {
        let path = secret_file(dir.path(), name, content, 0o600)
            .display()
            .to_string();
        refused(
            vec![("CLINIC_API_TOKEN_FILE", path.clone())],
            &[&path, "is empty"],
        )
        .await;
    }
}

#[tokio::test]
async fn an_unreadable_secret_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing").display().to_string();
    refused(
        vec![("CLINIC_API_TOKEN_FILE", missing.clone())],
        &[&missing, "cannot be read"],
    )
    .await;
    let folder = dir.path().display().to_string();
    refused(
        vec![("CLINIC_API_TOKEN_FILE", folder.clone())],
        &[&folder, "is not a regular file"],
    )
    .await;
    refused(
        vec![("CLINIC_API_TOKEN_FILE", "relative/token".to_owned())],
        &["relative/token", "is not an absolute path"],
    )
    .await;
}

/// `label_replace(vector(1), "x", "<token>", "", "")` puts the token into a label; real
/// Prometheus returns it, and the guard, which knows the value read from the file,
/// blocks the result without showing it.
#[tokio::test]
async fn a_secret_read_from_a_file_is_withheld_by_the_output_guard() {
    let providers = ClinicProvider::start(CLINIC_TOKEN).await;
    let (mut deployed, env) = clinic(providers.front.base_url());
    deployed.args = json!({"queries": [{"queryId": "canary", "unit": "cores",
        "expr": format!(r#"label_replace(vector(1), "x", "{CLINIC_TOKEN}", "", "")"#)}]});
    let result = deployed.one_shot(as_files(deployed.dir.path(), &env)).await;
    let error = result
        .details()
        .items
        .first()
        .and_then(|item| item.error.clone())
        .or_else(|| result.details().error.clone())
        .unwrap_or_else(|| panic!("{}", result.text()));
    assert_eq!(
        error.class,
        FailureClass::OutputBlocked,
        "{}",
        result.text()
    );
    assert!(!result.text().contains(CLINIC_TOKEN));
    assert_eq!(deployed.audit().last().unwrap()["blocked"], true);
}

/// The signer's private key file (`sign-policy --key-file`) is a secret file too: one
/// that other users can read is refused, naming its path and mode, and nothing is
/// signed; the file `--generate-key` writes (mode 0600) signs.
#[test]
fn the_signers_key_file_open_to_other_users_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("signing.key");
    let key_arg = key.display().to_string();
    let (code, _, err) = run(
        Path::new(SIGN_POLICY),
        &["--generate-key", "--kid", KID, "--key-file", &key_arg],
        &[],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let package = deploy(dir.path(), CLINIC, "v3", CLINIC_TOOL).0;
    let package_arg = package.display().to_string();
    let policy = policy("clinic", CLINIC, json!({})).to_string();
    let sign_with_file = || {
        run(
            Path::new(SIGN_POLICY),
            &[
                "--package-dir",
                &package_arg,
                "--kid",
                KID,
                "--key-file",
                &key_arg,
            ],
            &[],
            &policy,
        )
    };
    let (code, envelope, err) = sign_with_file();
    assert_eq!(code, 0, "{err}");
    assert!(envelope.contains("\"signature\""), "{envelope}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, envelope, err) = sign_with_file();
    assert_ne!(code, 0, "signed with a key file open to others");
    assert!(envelope.is_empty(), "{envelope}");
    assert!(err.contains(&key_arg) && err.contains("0644"), "{err}");
}
