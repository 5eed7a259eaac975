//! Nothing of the infrastructure reaches the model. A runtime-context failure's
//! model-visible text (`details`, its `detail_error` included) names no host, port,
//! user, database or path, whatever part failed: a Redis turn ledger killed under a
//! running server and a one-shot call, a ledger directory that is missing or whose turn
//! file cannot be appended to, an envelope file that is not there, a CA file that cannot
//! be read, a binary outside any package folder. The model reads the code, the class
//! and a fixed sentence; the operator reads the detail in the call's audit record
//! (`operator_detail`) and on stderr. Two properties hold it over generated values:
//! for every runtime-failure kind, and through an embedder's sandbox with generated
//! Redis URLs (users, passwords, hosts, ports, databases) and file paths.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};

use evidence_package::{AuditRecord, Package};
use evidence_policy::TrustedPolicy;
use evidence_result::{
    FailureClass, Operation, Origin, PackageId, PolicySource, Provider, Status, ToolResult,
    mcp::McpCallToolResult,
};
use evidence_test_support::{self as test_support, RedisServer};
use evidence_tool::{ClinicTool, RuntimeContext, RuntimeFailure, RuntimeFailureKind, Sandbox};
use proptest::prelude::*;
use secrecy::SecretString;
use serde_json::{Value, json};
use support::*;

const CLINIC: &str = "managed_auto_oncall_clinic";
const TOKEN: &str = "infra-hidden-clinic-token-01";
const REDIS_ADMIN: &str = "infra-hidden-admin-pass-4c1e";
const LEDGER_USER: &str = "oncall-ledger-wq7z";
const LEDGER_PASSWORD: &str = "infra-hidden-user-pass-9b2d";
const LEDGER_DB: u16 = 13;
/// The folder name every path of the path cases goes through.
const OPS: &str = "ops-runtime-kq3v";

fn cpu(query_id: &str) -> Value {
    json!({"queries": [{"queryId": query_id, "expr": test_support::TIDB_CPU.expr,
                        "step": "15s", "unit": "cores"}]})
}

/// Real Prometheus behind the Clinic front, and the deployed Clinic folder.
struct World {
    _prometheus: test_support::Prometheus,
    front: test_support::ClinicFront,
    dir: tempfile::TempDir,
    folder: PathBuf,
}

async fn world() -> World {
    let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
        .await
        .unwrap();
    let front = test_support::ClinicFront::start(&prometheus.url(), SecretString::from(TOKEN))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (folder, _) = deploy(dir.path(), CLINIC, "v3", CLINIC_TOOL);
    World {
        _prometheus: prometheus,
        front,
        dir,
        folder,
    }
}

impl World {
    /// A folder of its own for one process (its envelopes, its audit log).
    fn host(&self, name: &str) -> PathBuf {
        let dir = self.dir.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The Clinic tool's environment on `host` under the envelope of `policy_id`, with
    /// the turn ledger `ledger`.
    fn env(&self, host: &Path, policy_id: &str, ledger: &str) -> Vec<(&'static str, String)> {
        let signed = sign(
            host,
            &format!("{policy_id}.envelope.json"),
            &self.folder,
            &policy("clinic", CLINIC, json!({"policy_id": policy_id})),
        );
        let mut env = runtime_env_sharing(&signed, &host.join("audit.jsonl"), Path::new(ledger));
        env.extend(clinic_vars(self.front.base_url(), TOKEN));
        env
    }
}

/// A process environment.
type Env = Vec<(&'static str, String)>;

/// Sets `name` in `env` to `value`.
fn set(env: &mut Env, name: &'static str, value: String) {
    env.retain(|(k, _)| *k != name);
    env.push((name, value));
}

/// One call of the one-shot entrypoint `bin`: its result and its stderr.
fn one_shot(bin: &Path, env: &[(&'static str, String)], args: &Value) -> (ToolResult, String) {
    let (code, out, err) = run(bin, &[], env, &args.to_string());
    assert_eq!(code, 0, "{err}");
    (ToolResult::from_json(out.trim()).unwrap(), err)
}

/// A Clinic server over stdio, past its handshake.
fn server(bin: &Path, env: &[(&'static str, String)]) -> Wire {
    let mut wire = Wire::start_with(bin, env);
    wire.initialize();
    wire
}

fn call(wire: &mut Wire, id: u64, args: &Value) -> ToolResult {
    let message = wire.request(id, "tools/call", json!({"name": CLINIC, "arguments": args}));
    let mcp: McpCallToolResult = serde_json::from_value(message["result"].clone())
        .unwrap_or_else(|e| panic!("{e}: {message}"));
    ToolResult::from_mcp(&mcp).unwrap()
}

/// The last call record (request records left out) of the audit log `audit`.
fn last_call_record(audit: &Path) -> Value {
    audit_records(audit)
        .into_iter()
        .rfind(|r| r.get("record").is_none())
        .unwrap_or_else(|| panic!("no call record in {}", audit.display()))
}

/// The operator's detail of a call record; fails when there is none.
fn operator_detail(record: &Value) -> String {
    record["operator_detail"]
        .as_str()
        .unwrap_or_else(|| panic!("the audit record carries no operator detail: {record}"))
        .to_owned()
}

/// Asserts that the model-visible `text` holds none of `values`.
fn assert_hidden(text: &str, values: &[String], case: &str) {
    for value in values {
        assert!(
            !text.contains(value.as_str()),
            "{case}: the model reads {value:?}: {text}"
        );
    }
}

/// A Redis turn ledger reached with a user of its own and a database other than 0,
/// killed under a running MCP server and before a one-shot call: each answers
/// `turn_ledger_unavailable` whose text names neither the host, the port, the user,
/// the database nor the URL; the call's audit record and the process' stderr do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_redis_ledger_shows_the_model_no_host_port_user_or_database() {
    let w = world().await;
    let mut redis = RedisServer::start_with_password(REDIS_ADMIN).unwrap();
    let mut admin = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(LEDGER_USER)
        .arg("on")
        .arg(format!(">{LEDGER_PASSWORD}"))
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query(&mut admin)
        .unwrap();
    let port = redis.port();
    let ledger = format!("redis://{LEDGER_USER}:{LEDGER_PASSWORD}@127.0.0.1:{port}/{LEDGER_DB}");
    let (server_host, shot_host) = (w.host("server"), w.host("one-shot"));
    let bin = entrypoint(&w.folder);
    let server_env = w.env(&server_host, "pol-infra-server", &ledger);
    let shot_env = w.env(&shot_host, "pol-infra-one-shot", &ledger);

    // Up: both run, admitted through that user in that database.
    let (mut wire, up, shot_up) = {
        let (bin, server_env, shot_env) = (bin.clone(), server_env.clone(), shot_env.clone());
        blocking(move || {
            let mut wire = server(&bin, &server_env);
            let up = call(&mut wire, 1, &cpu("before"));
            let (shot_up, _) = one_shot(&bin, &shot_env, &cpu("before"));
            (wire, up, shot_up)
        })
        .await
    };
    assert_eq!(up.details().status, Status::Ok, "{}", up.text());
    assert_eq!(shot_up.details().status, Status::Ok, "{}", shot_up.text());
    assert_eq!(redis_entries(&ledger, "pol-infra-one-shot").len(), 2);

    // Killed: a typed failure, nothing sent, nothing of the Redis in the model's text.
    redis.kill();
    let sent = w.front.requests().len();
    let (down, shot_down, stderr) = {
        let bin = bin.clone();
        blocking(move || {
            let down = call(&mut wire, 2, &cpu("down"));
            let (shot_down, stderr) = one_shot(&bin, &shot_env, &cpu("down"));
            (down, shot_down, stderr)
        })
        .await
    };
    assert_eq!(
        w.front.requests().len(),
        sent,
        "a call ran without admission"
    );
    let hidden: Vec<String> = vec![
        LEDGER_USER.to_owned(),
        LEDGER_PASSWORD.to_owned(),
        REDIS_ADMIN.to_owned(),
        "127.0.0.1".to_owned(),
        port.to_string(),
        "redis://".to_owned(),
        format!("/{LEDGER_DB}"),
        LEDGER_DB.to_string(),
    ];
    for (how, result, host) in [
        ("over MCP", &down, &server_host),
        ("one-shot", &shot_down, &shot_host),
    ] {
        assert_eq!(
            code_of(result),
            "turn_ledger_unavailable",
            "{how}: {}",
            result.text()
        );
        assert_hidden(result.text(), &hidden, how);
        let record = last_call_record(&host.join("audit.jsonl"));
        assert_eq!(record["error_codes"], json!(["turn_ledger_unavailable"]));
        let detail = operator_detail(&record);
        for shown in [
            format!("127.0.0.1:{port}"),
            LEDGER_USER.to_owned(),
            format!("/{LEDGER_DB}"),
        ] {
            assert!(detail.contains(&shown), "{how}: {shown} not in {detail}");
        }
        assert!(!detail.contains(LEDGER_PASSWORD), "{how}: {detail}");
    }
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(!stderr.contains(LEDGER_PASSWORD), "{stderr}");
}

/// The paths of the runtime context go to the operator, never to the model: a ledger
/// directory that is missing (one-shot, and removed under a running server), a turn
/// file that cannot be appended to, an envelope file that is not there, a CA file that
/// cannot be read, a binary that is not in a package folder. Each answers its code with
/// a text that names no part of the path, and an audit record and stderr that do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_context_paths_reach_the_operator_never_the_model() {
    let w = world().await;
    let ops = w.dir.path().join(OPS);
    std::fs::create_dir_all(&ops).unwrap();
    let bin = entrypoint(&w.folder);
    let hidden: Vec<String> = vec![
        OPS.to_owned(),
        w.dir.path().display().to_string(),
        "/tmp".to_owned(),
    ];

    // A server whose ledger directory is removed while it runs.
    let server_host = w.host("server");
    let server_ledger = ops.join("turns-of-the-server");
    std::fs::create_dir_all(&server_ledger).unwrap();
    let server_env = w.env(
        &server_host,
        "pol-paths-server",
        &server_ledger.display().to_string(),
    );
    let removed = {
        let (bin, server_ledger) = (bin.clone(), server_ledger.clone());
        blocking(move || {
            let mut wire = server(&bin, &server_env);
            std::fs::remove_dir(&server_ledger).unwrap();
            call(&mut wire, 1, &cpu("removed"))
        })
        .await
    };
    assert_eq!(
        code_of(&removed),
        "runtime_context_missing",
        "{}",
        removed.text()
    );
    assert_hidden(removed.text(), &hidden, "a ledger removed under a server");
    let detail = operator_detail(&last_call_record(&server_host.join("audit.jsonl")));
    assert!(
        detail.contains(&server_ledger.display().to_string()),
        "{detail}"
    );

    // One-shot calls, each with one part of its context pointing into `ops`.
    let shot_host = w.host("one-shot");
    let audit = shot_host.join("audit.jsonl");
    let base = |policy_id: &str| {
        let ledger = ops.join(format!("turns-{policy_id}"));
        std::fs::create_dir_all(&ledger).unwrap();
        (
            w.env(&shot_host, policy_id, &ledger.display().to_string()),
            ledger,
        )
    };
    let mut cases: Vec<(&str, PathBuf, Env, &str)> = Vec::new();

    let (mut env, _) = base("pol-paths-missing-ledger");
    let missing_ledger = ops.join("turns-that-are-not-there");
    set(
        &mut env,
        "EVIDENCE_TURN_LEDGER",
        missing_ledger.display().to_string(),
    );
    cases.push((
        "a missing ledger directory",
        missing_ledger,
        env,
        "runtime_context_missing",
    ));

    let (env, ledger) = base("pol-paths-blocked-turn");
    let turn_file = ledger.join("pol-paths-blocked-turn.jsonl");
    std::fs::create_dir(&turn_file).unwrap();
    cases.push((
        "a turn file that cannot be appended to",
        turn_file,
        env,
        "runtime_context_invalid",
    ));

    let (mut env, _) = base("pol-paths-missing-envelope");
    let missing_envelope = ops.join("envelope-not-written.json");
    set(
        &mut env,
        "EVIDENCE_TRUSTED_CONTEXT",
        missing_envelope.display().to_string(),
    );
    cases.push((
        "a missing envelope file",
        missing_envelope,
        env,
        "runtime_context_missing",
    ));

    let (mut env, _) = base("pol-paths-missing-ca");
    let missing_ca = ops.join("ledger-ca-not-there.pem");
    set(
        &mut env,
        "EVIDENCE_TURN_LEDGER",
        "rediss://127.0.0.1:9/0".to_owned(),
    );
    set(
        &mut env,
        "EVIDENCE_TURN_LEDGER_CA",
        missing_ca.display().to_string(),
    );
    cases.push((
        "a CA file that cannot be read",
        missing_ca,
        env,
        "runtime_context_invalid",
    ));

    for (case, path, env, code) in cases {
        let (result, stderr) = {
            let (bin, env) = (bin.clone(), env.clone());
            blocking(move || one_shot(&bin, &env, &cpu("paths"))).await
        };
        assert_eq!(code_of(&result), code, "{case}: {}", result.text());
        assert_hidden(result.text(), &hidden, case);
        let record = last_call_record(&audit);
        assert_eq!(record["error_codes"], json!([code]), "{case}");
        let detail = operator_detail(&record);
        let path = path.display().to_string();
        assert!(detail.contains(&path), "{case}: {path} not in {detail}");
        assert!(stderr.contains(&path), "{case}: {path} not in {stderr}");
    }

    // A binary outside any package folder: its package does not load.
    let stray = ops.join("not-a-package").join("clinic-tool");
    std::fs::create_dir_all(stray.parent().unwrap()).unwrap();
    std::fs::copy(&bin, &stray).unwrap();
    let (env, _) = base("pol-paths-stray-binary");
    let (result, stderr) = blocking(move || one_shot(&stray, &env, &cpu("stray"))).await;
    assert_eq!(code_of(&result), "package_load_failed", "{}", result.text());
    assert_hidden(result.text(), &hidden, "a binary outside a package folder");
    let record = last_call_record(&audit);
    assert_eq!(record["error_codes"], json!(["package_load_failed"]));
    assert!(operator_detail(&record).contains(OPS), "{record}");
    assert!(stderr.contains(OPS), "{stderr}");
}

/// Generated infrastructure: a Redis URL's user, password, host, port and database, and
/// the folders and file of a path. Each value has letters and digits mixed, so no word
/// of a fixed sentence can be one.
#[derive(Debug, Clone)]
struct Infra {
    user: String,
    password: String,
    host: [u8; 3],
    port: u16,
    db: u8,
    folders: Vec<String>,
    file: String,
}

impl Infra {
    fn host(&self) -> String {
        let [a, b, c] = self.host;
        format!("127.{a}.{b}.{c}")
    }

    fn url(&self, port: u16) -> String {
        format!(
            "redis://{}:{}@{}:{port}/{}",
            self.user,
            self.password,
            self.host(),
            self.db
        )
    }

    fn path(&self, root: &Path) -> PathBuf {
        let mut path = root.to_path_buf();
        path.extend(&self.folders);
        path.join(&self.file)
    }

    /// What the model must never read, for a URL on `port` and paths under `root`.
    fn values(&self, port: u16, root: &Path) -> Vec<String> {
        let mut values = vec![
            self.user.clone(),
            self.password.clone(),
            self.host(),
            format!(":{port}"),
            port.to_string(),
            format!("/{}", self.db),
            self.url(port),
            self.file.clone(),
            root.display().to_string(),
        ];
        values.extend(self.folders.iter().cloned());
        values
    }
}

fn infra() -> impl Strategy<Value = Infra> {
    (
        "u[a-z]{3,8}[0-9]{2,4}",
        "p[A-Za-z]{4,10}[0-9]{2,4}",
        (1u8..=254, 0u8..=255, 1u8..=254),
        1024u16..=65535,
        1u8..=15,
        proptest::collection::vec("d[a-z]{2,6}[0-9]{2,4}", 1..4),
        "f[a-z]{2,6}[0-9]{2,4}\\.(json|pem|jsonl)",
    )
        .prop_map(
            |(user, password, (a, b, c), port, db, folders, file)| Infra {
                user,
                password,
                host: [a, b, c],
                port,
                db,
                folders,
                file,
            },
        )
}

/// The messages a detail may hold: the Redis URL and each part of it, the path.
fn details_of(infra: &Infra, root: &Path) -> Vec<String> {
    let (url, path) = (infra.url(infra.port), infra.path(root));
    vec![
        format!("the turn ledger's Redis at {url} could not be connected to: refused"),
        format!(
            "user {} on {}:{} database {}",
            infra.user,
            infra.host(),
            infra.port,
            infra.db
        ),
        format!("cannot read {}: No such file or directory", path.display()),
        format!("{url} {}", path.display()),
    ]
}

fn origin() -> Origin {
    Origin {
        package: PackageId::new(CLINIC).unwrap(),
        provider: Provider::Clinic,
        operation: Operation::QueryRange,
        policy_source: Some(PolicySource::TrustedEnvelope),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    /// For every runtime-failure kind and any detail holding generated infrastructure
    /// (a Redis URL with user, password, host, port and database; a path), the
    /// model-visible text holds none of it, and keeps the kind's code and class.
    #[test]
    fn no_infrastructure_value_reaches_the_model_for_any_kind(
        infra in infra(),
        kind in proptest::sample::select(RuntimeFailureKind::ALL.to_vec()),
    ) {
        let root = Path::new("/srv/evidence-runtime-x9");
        for detail in details_of(&infra, root) {
            let result = RuntimeFailure::new(kind, detail.clone())
                .to_tool_result(origin())
                .unwrap();
            let error = result.details().error.clone().unwrap();
            prop_assert_eq!(error.code.as_str(), kind.code());
            prop_assert_eq!(error.class, kind.class());
            prop_assert!(error.class.is_shared());
            for value in infra.values(infra.port, root) {
                prop_assert!(
                    !result.text().contains(value.as_str()),
                    "{:?} reads {:?}: {}", kind, value, result.text()
                );
            }
            prop_assert!(!result.text().contains(&detail));
        }
    }
}

/// The record of `audit` as JSON.
fn record_json(audit: &AuditRecord) -> Value {
    serde_json::from_str(&audit.to_json_line().unwrap()).unwrap()
}

/// Through an embedder's sandbox, with generated infrastructure in its context: a Redis
/// turn ledger (user, password, a loopback host of its own, a closed port, a database)
/// that refuses the connection, the same URL given a CA although it is not `rediss://`,
/// a ledger directory and an envelope file under generated folders that are not there.
/// Each call answers its runtime-failure code; its text holds none of the generated
/// values; its audit record's operator detail holds the host or the path.
#[test]
fn no_generated_infrastructure_reaches_the_model_through_a_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, _) = deploy(dir.path(), CLINIC, "v3", CLINIC_TOOL);
    let package = Package::load(&folder).unwrap();
    let trusted: TrustedPolicy = serde_json::from_value(policy(
        "clinic",
        CLINIC,
        json!({"policy_id": "pol-generated"}),
    ))
    .unwrap();
    let signer = test_signer();
    let envelope = signer.sign(&trusted, package.digest()).unwrap();
    let base = || {
        RuntimeContext::new()
            .with_keys(signer.key_ring())
            .with_config("CLINIC_BASE_URL", "http://127.0.0.1:9")
            .with_config(
                "CLINIC_QUERY_PATH_TEMPLATE",
                test_support::ClinicFront::QUERY_RANGE_PATH_TEMPLATE,
            )
            .with_secret("CLINIC_API_TOKEN", SecretString::from(TOKEN))
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let args = cpu("generated").to_string();
    let config = ProptestConfig::with_cases(24);
    let mut runner = proptest::test_runner::TestRunner::new(config);
    runner
        .run(&infra(), |infra| {
            // A port on the generated loopback host that nothing listens on.
            let listener = std::net::TcpListener::bind((infra.host(), 0)).unwrap();
            let port = listener.local_addr().unwrap().port();
            drop(listener);
            let root = dir.path().join("generated");
            let url = infra.url(port);
            let cases: Vec<(&str, RuntimeContext, FailureClass, String)> = vec![
                (
                    "turn_ledger_unavailable",
                    base()
                        .with_envelope(envelope.clone())
                        .with_shared_turn_ledger(SecretString::from(url.clone()), None),
                    FailureClass::Readiness,
                    format!("{}:{port}", infra.host()),
                ),
                (
                    "runtime_context_invalid",
                    base()
                        .with_envelope(envelope.clone())
                        .with_shared_turn_ledger(SecretString::from(url), Some(b"x".to_vec())),
                    FailureClass::Authorization,
                    format!("{}:{port}", infra.host()),
                ),
                (
                    "runtime_context_missing",
                    base()
                        .with_envelope(envelope.clone())
                        .with_turn_ledger(infra.path(&root)),
                    FailureClass::Authorization,
                    infra.path(&root).display().to_string(),
                ),
                (
                    "runtime_context_missing",
                    base().with_envelope_file(infra.path(&root)),
                    FailureClass::Authorization,
                    infra.path(&root).display().to_string(),
                ),
            ];
            for (code, context, class, shown) in cases {
                let sandbox = Sandbox::<ClinicTool>::new(package.clone(), context).unwrap();
                let (result, audit) = runtime.block_on(sandbox.answer(&args)).unwrap();
                let error = result.details().error.clone().unwrap();
                prop_assert_eq!(error.code.as_str(), code, "{}", result.text());
                prop_assert_eq!(error.class, class);
                for value in infra.values(port, &root) {
                    prop_assert!(
                        !result.text().contains(value.as_str()),
                        "{} reads {:?}: {}",
                        code,
                        value,
                        result.text()
                    );
                }
                let record = record_json(&audit);
                let detail = record["operator_detail"].as_str().unwrap_or_default();
                prop_assert!(
                    detail.contains(&shown),
                    "{}: {} not in {}",
                    code,
                    shown,
                    record
                );
                prop_assert!(!detail.contains(&infra.password), "{}", detail);
            }
            Ok(())
        })
        .unwrap();
}
