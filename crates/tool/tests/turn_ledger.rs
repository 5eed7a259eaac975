//! The turn rules over MCP, without OpenCode: the Clinic and Manus servers, each its own
//! process with only its own secrets, share the turn ledger the runtime names
//! (`EVIDENCE_TURN_LEDGER`), and the turn is the envelope's `policy_id`. Driven over the
//! wire against real Prometheus behind the Clinic and Manus fronts: calls of both
//! servers run at once; an unchanged retry is refused; a shared failure in Manus stops
//! Clinic's next call with nothing sent (its audit log shows the refusal); a new
//! envelope starts a new turn; a server killed between a call's admission and its answer
//! leaves a ledger the next server reads; a ledger that is missing or unusable fails
//! closed; without the variable the server does not start, and the one-shot entrypoint
//! runs as before. The rules and the crash are shown with both stores of the ledger: a
//! directory, and a real Redis (`EVIDENCE_TURN_LEDGER=redis://...`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use evidence_result::{Status, ToolResult, mcp::McpCallToolResult};
use evidence_test_support as test_support;

use serde_json::{Value, json};
use support::*;

const CLINIC: &str = "managed_auto_oncall_clinic";
const MANUS: &str = "managed_auto_oncall_manus";
const CLINIC_TOKEN: &str = "turn-ledger-clinic-token-01";
const MANUS_USER: &str = "turn-ledger-reader";
const MANUS_PASSWORD: &str = "turn-ledger-password-01";

fn clinic_args(query_id: &str, expr: &str) -> Value {
    json!({"queries": [{"queryId": query_id, "expr": expr, "step": "15s", "unit": "cores"}]})
}

fn manus_args(query_id: &str) -> Value {
    json!({"queryId": query_id, "expr": test_support::TIDB_CPU.expr, "step": "15s"})
}

fn call_message(id: u64, tool: &str, args: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args}})
}

fn result_of(message: &Value) -> ToolResult {
    let mcp: McpCallToolResult = serde_json::from_value(message["result"].clone())
        .unwrap_or_else(|e| panic!("{e}: {message}"));
    ToolResult::from_mcp(&mcp).unwrap()
}

fn call(wire: &mut Wire, id: u64, tool: &str, args: &Value) -> ToolResult {
    let message = call_message(id, tool, args);
    result_of(&wire.request(id, "tools/call", message["params"].clone()))
}

/// Where the servers' turn ledger is: a directory, or a real Redis.
enum Store {
    Dir(PathBuf),
    Redis(test_support::RedisServer),
}

impl Store {
    fn dir(fronts: &Fronts) -> Store {
        Store::Dir(new_ledger(fronts.dir.path()))
    }

    fn redis() -> Store {
        Store::Redis(test_support::RedisServer::start().unwrap())
    }

    /// What `EVIDENCE_TURN_LEDGER` says.
    fn value(&self) -> String {
        match self {
            Store::Dir(dir) => dir.display().to_string(),
            Store::Redis(server) => server.url(),
        }
    }

    /// The entries of the turn `policy_id`; each must parse.
    fn entries(&self, policy_id: &str) -> Vec<Value> {
        match self {
            Store::Dir(dir) => ledger_entries(dir, policy_id),
            Store::Redis(server) => redis_entries(&server.url(), policy_id),
        }
    }

    /// The refusals of the turn `policy_id`, counted by code.
    fn refusals(&self, policy_id: &str) -> BTreeMap<String, u64> {
        match self {
            Store::Dir(dir) => ledger_refusals(dir, policy_id),
            Store::Redis(server) => redis_refusals(&server.url(), policy_id),
        }
    }
}

/// The entries of the turn file of `policy_id` in `ledger`; each line must parse.
fn ledger_entries(ledger: &Path, policy_id: &str) -> Vec<Value> {
    std::fs::read_to_string(ledger.join(format!("{policy_id}.jsonl")))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Real Prometheus behind both fronts, the two deployable folders.
struct Fronts {
    providers: Providers,
    dir: tempfile::TempDir,
    clinic: PathBuf,
    manus: PathBuf,
}

async fn fronts() -> Fronts {
    let providers = Providers::start(CLINIC_TOKEN, MANUS_USER, MANUS_PASSWORD).await;
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy(dir.path(), CLINIC, "v3", CLINIC_TOOL);
    let (manus, _) = deploy(dir.path(), MANUS, "v2", MANUS_TOOL);
    Fronts {
        providers,
        dir,
        clinic,
        manus,
    }
}

impl Fronts {
    fn clinic_sent(&self) -> usize {
        self.providers.clinic_front.requests().len()
    }

    /// The Clinic server's environment under the envelope of `policy_id`, with `ledger`
    /// (`None`: without the variable).
    fn clinic_env(&self, policy_id: &str, ledger: Option<&str>) -> Vec<(&'static str, String)> {
        let signed = sign(
            self.dir.path(),
            "clinic-envelope.json",
            &self.clinic,
            &policy("clinic", CLINIC, json!({"policy_id": policy_id})),
        );
        let mut env = with_ledger(
            runtime_env(&signed, &self.dir.path().join("clinic-audit.jsonl")),
            ledger,
        );
        env.extend(clinic_vars(
            self.providers.clinic_front.base_url(),
            CLINIC_TOKEN,
        ));
        env
    }

    fn manus_env(&self, policy_id: &str, ledger: &str) -> Vec<(&'static str, String)> {
        let signed = sign(
            self.dir.path(),
            "manus-envelope.json",
            &self.manus,
            &policy(
                "manus",
                MANUS,
                json!({"policy_id": policy_id, "manus_target": "vida"}),
            ),
        );
        let mut env = with_ledger(
            runtime_env(&signed, &self.dir.path().join("manus-audit.jsonl")),
            Some(ledger),
        );
        env.extend(self.providers.manus_vars());
        env
    }

    fn clinic_audit(&self) -> Vec<Value> {
        audit_records(&self.dir.path().join("clinic-audit.jsonl"))
    }
}

/// `env` with its turn ledger replaced by `ledger` (removed for `None`).
fn with_ledger(
    mut env: Vec<(&'static str, String)>,
    ledger: Option<&str>,
) -> Vec<(&'static str, String)> {
    env.retain(|(k, _)| *k != "EVIDENCE_TURN_LEDGER");
    if let Some(ledger) = ledger {
        env.push(("EVIDENCE_TURN_LEDGER", ledger.to_owned()));
    }
    env
}

fn started(bin: &Path, env: &[(&'static str, String)]) -> Wire {
    let mut wire = Wire::start_with(bin, env);
    wire.initialize();
    wire
}

/// Reads `wire`'s answers until the one of request `id`.
fn answer_of(wire: &mut Wire, id: u64) -> ToolResult {
    loop {
        let message = wire.next_message();
        if message["id"] == id {
            return result_of(&message);
        }
    }
}

#[tokio::test]
async fn the_package_servers_of_one_turn_share_its_rules_in_a_directory() {
    let fronts = fronts().await;
    let store = Store::dir(&fronts);
    shared_rules(fronts, store).await;
}

#[tokio::test]
async fn the_package_servers_of_one_turn_share_its_rules_in_redis() {
    shared_rules(fronts().await, Store::redis()).await;
}

async fn shared_rules(fronts: Fronts, store: Store) {
    let ledger = store.value();
    let turn = "pol-shared-turn";
    let clinic_env = fronts.clinic_env(turn, Some(&ledger));
    let manus_env = fronts.manus_env(turn, &ledger);
    let (clinic_bin, manus_bin) = (entrypoint(&fronts.clinic), entrypoint(&fronts.manus));
    let delay = Duration::from_millis(2000);
    fronts.providers.clinic_front.faults().set_delay(delay);
    fronts.providers.manus_front.faults().set_delay(delay);

    // Both servers' calls at once: each is admitted under the ledger's lock and runs
    // without it, so they overlap.
    let (mut clinic, mut manus, concurrent) = {
        let (clinic_env, manus_env, clinic_bin, manus_bin) = (
            clinic_env.clone(),
            manus_env.clone(),
            clinic_bin.clone(),
            manus_bin.clone(),
        );
        blocking(move || {
            let mut clinic = started(&clinic_bin, &clinic_env);
            let mut manus = started(&manus_bin, &manus_env);
            let begun = Instant::now();
            clinic.send(call_message(
                1,
                CLINIC,
                &clinic_args("tidb_cpu", test_support::TIDB_CPU.expr),
            ));
            manus.send(call_message(1, MANUS, &manus_args("vida_cpu")));
            let results = [answer_of(&mut clinic, 1), answer_of(&mut manus, 1)];
            (clinic, manus, (begun.elapsed(), results))
        })
        .await
    };
    let (elapsed, [clinic_ok, manus_ok]) = concurrent;
    assert_eq!(
        clinic_ok.details().status,
        Status::Ok,
        "{}",
        clinic_ok.text()
    );
    assert_eq!(manus_ok.details().status, Status::Ok, "{}", manus_ok.text());
    assert!(
        elapsed < delay * 2 - Duration::from_millis(200),
        "the two servers' calls did not overlap: {elapsed:?}"
    );
    let entries = store.entries(turn);
    let admitted = entries_of(&entries, "admitted");
    assert_eq!(admitted.len(), 2, "{entries:?}");
    assert_ne!(admitted[0]["call"], admitted[1]["call"]);
    assert_eq!(entries_of(&entries, "answered").len(), 2, "{entries:?}");
    let packages: Vec<&Value> = admitted.iter().map(|e| &e["package"]).collect();
    assert!(packages.contains(&&json!(CLINIC)) && packages.contains(&&json!(MANUS)));
    fronts
        .providers
        .clinic_front
        .faults()
        .set_delay(Duration::ZERO);
    fronts
        .providers
        .manus_front
        .faults()
        .set_delay(Duration::ZERO);

    // An unchanged retry of a failed request is refused, nothing sent.
    let m2m = clinic_args("tidb_m2m", test_support::TIDB_MANY_TO_MANY.expr);
    let (rejected, retried, sent_between, clinic_back) = {
        let sent_before = fronts.clinic_sent();
        let m2m = m2m.clone();
        let (rejected, retried, clinic_back) = blocking(move || {
            let rejected = call(&mut clinic, 2, CLINIC, &m2m);
            let retried = call(&mut clinic, 3, CLINIC, &m2m);
            (rejected, retried, clinic)
        })
        .await;
        (
            rejected,
            retried,
            fronts.clinic_sent() - sent_before,
            clinic_back,
        )
    };
    clinic = clinic_back;
    assert!(rejected.is_failed(), "{}", rejected.text());
    assert_eq!(code_of(&retried), "unchanged_retry", "{}", retried.text());
    assert_eq!(sent_between, 1, "the unchanged retry reached the front");

    // A shared failure in Manus (the target refuses the reader) stops the turn: Clinic's
    // next call, on a new question, is refused with nothing sent, and its audit log
    // records the refusal.
    fronts.providers.manus_front.set_forbidden(true);
    let audit_before = fronts.clinic_audit().len();
    let sent_before = fronts.clinic_sent();
    let (shared, stopped, clinic_back) = blocking(move || {
        let shared = call(&mut manus, 2, MANUS, &manus_args("vida_mem"));
        let stopped = call(
            &mut clinic,
            4,
            CLINIC,
            &clinic_args("tidb_cpu_again", test_support::TIDB_CPU.expr),
        );
        drop(manus);
        (shared, stopped, clinic)
    })
    .await;
    clinic = clinic_back;
    let class = shared.details().error.as_ref().map(|e| e.class).unwrap();
    assert!(class.is_shared(), "{}", shared.text());
    assert_eq!(code_of(&stopped), "turn_stopped", "{}", stopped.text());
    assert_eq!(
        fronts.clinic_sent(),
        sent_before,
        "a stopped turn sent a call"
    );
    let audit = fronts.clinic_audit();
    assert_eq!(audit.len(), audit_before + 1);
    let record = audit.last().unwrap();
    assert_eq!(record["policy_id"], turn, "{record}");
    assert_eq!(record["failure_class"], "policy_violation", "{record}");
    assert_eq!(record["query_ids"], json!(["tidb_cpu_again"]), "{record}");
    // The two refusals are counted, not appended: the turn holds its admitted calls.
    assert_eq!(
        store.refusals(turn),
        BTreeMap::from([
            ("unchanged_retry".to_owned(), 1),
            ("turn_stopped".to_owned(), 1)
        ])
    );
    assert_eq!(store.entries(turn).len(), 8);

    // A new envelope is a new turn: the runtime writes it, and Clinic runs again.
    // (The envelope is rewritten at the path the running server reads.)
    fronts.clinic_env("pol-next-turn", Some(&ledger));
    let again = blocking(move || {
        call(
            &mut clinic,
            5,
            CLINIC,
            &clinic_args("tidb_cpu", test_support::TIDB_CPU.expr),
        )
    })
    .await;
    assert_eq!(again.details().status, Status::Ok, "{}", again.text());
    assert_eq!(store.entries("pol-next-turn").len(), 2);
}

#[tokio::test]
async fn a_server_killed_between_admission_and_answer_leaves_a_ledger_the_next_one_reads() {
    let fronts = fronts().await;
    let store = Store::dir(&fronts);
    killed_mid_call(fronts, store, None).await;
}

/// The Redis store learns of the end of a killed server's call when its lease (the
/// call's deadline and margin) runs out: a package of a short `timeout_ms` here.
#[tokio::test]
async fn a_replica_killed_mid_call_leaves_the_call_abandoned_in_redis() {
    let fronts = fronts().await;
    let apart = fronts.dir.path().join("short-timeout");
    std::fs::create_dir_all(&apart).unwrap();
    let (short, _) = deploy_with_timeout(&apart, CLINIC, "v3", CLINIC_TOOL, 5_000);
    killed_mid_call(fronts, Store::redis(), Some(short)).await;
}

async fn killed_mid_call(mut fronts: Fronts, store: Store, package: Option<PathBuf>) {
    if let Some(package) = package {
        fronts.clinic = package;
    }
    let ledger = store.value();
    let turn = "pol-crash-turn";
    let env = fronts.clinic_env(turn, Some(&ledger));
    let bin = entrypoint(&fronts.clinic);
    fronts
        .providers
        .clinic_front
        .faults()
        .set_delay(Duration::from_millis(4000));
    let cpu = clinic_args("tidb_cpu", test_support::TIDB_CPU.expr);
    let on_redis = matches!(store, Store::Redis(_));
    let store = std::sync::Arc::new(store);
    let (store_in, cpu_in) = (store.clone(), cpu.clone());
    let (first, in_flight, second, changed) = blocking(move || {
        let mut doomed = started(&bin, &env);
        doomed.send(call_message(1, CLINIC, &cpu_in));
        let deadline = Instant::now() + Duration::from_secs(10);
        while entries_of(&store_in.entries(turn), "admitted").is_empty() {
            assert!(Instant::now() < deadline, "the call was never admitted");
            std::thread::sleep(Duration::from_millis(20));
        }
        let admitted_at = Instant::now();
        // Killed after the admission was appended, before its answer.
        doomed.child.kill().unwrap();
        doomed.child.wait().unwrap();
        let mut next = started(&bin, &env);
        let first = call(
            &mut next,
            1,
            CLINIC,
            &clinic_args("tidb_other", test_support::TIDB_CPU.expr),
        );
        // In Redis, the killed call is in flight until its lease ends (5 s of
        // timeout_ms: the rest of the deadline and the margin).
        let in_flight = on_redis.then(|| call(&mut next, 2, CLINIC, &cpu_in));
        if on_redis {
            std::thread::sleep(Duration::from_millis(5_300).saturating_sub(admitted_at.elapsed()));
        }
        let second = call(&mut next, 3, CLINIC, &cpu_in);
        let changed = call(
            &mut next,
            4,
            CLINIC,
            &json!({"queries": [{"queryId": "tidb_cpu", "expr": test_support::TIDB_CPU.expr,
                                 "step": "30s", "unit": "cores"}]}),
        );
        (first, in_flight, second, changed)
    })
    .await;
    // Other questions run; the killed call's question is ended: its request is not run
    // again, and no change of it fixes a crash.
    assert_eq!(first.details().status, Status::Ok, "{}", first.text());
    if let Some(in_flight) = &in_flight {
        assert_eq!(
            code_of(in_flight),
            "query_in_flight",
            "{}",
            in_flight.text()
        );
    }
    assert_eq!(code_of(&second), "unchanged_retry", "{}", second.text());
    assert_eq!(code_of(&changed), "objective_failed", "{}", changed.text());
    // The refusals are counted by code, not appended.
    let entries = store.entries(turn);
    assert_eq!(entries_of(&entries, "abandoned").len(), 1, "{entries:?}");
    assert_eq!(entries_of(&entries, "admitted").len(), 2, "{entries:?}");
    assert_eq!(entries_of(&entries, "answered").len(), 1, "{entries:?}");
    assert_eq!(entries.len(), 4, "{entries:?}");
    let mut refused = BTreeMap::from([
        ("unchanged_retry".to_owned(), 1),
        ("objective_failed".to_owned(), 1),
    ]);
    if in_flight.is_some() {
        refused.insert("query_in_flight".to_owned(), 1);
    }
    assert_eq!(store.refusals(turn), refused);
}

#[tokio::test]
async fn without_a_usable_ledger_a_server_fails_closed() {
    let fronts = fronts().await;
    let bin = entrypoint(&fronts.clinic);
    let cpu = clinic_args("tidb_cpu", test_support::TIDB_CPU.expr);

    // Without the variable, with a directory that is not there or a Redis that cannot be
    // reached, the server refuses the session at `initialize`, naming the variable.
    let missing = fronts
        .dir
        .path()
        .join("no-such-ledger")
        .display()
        .to_string();
    // A Redis that nothing answers for (port 1) does not start a server either, nor one
    // that may evict the turn's keys (managed services' usual default).
    let unreachable = "redis://127.0.0.1:1/0".to_owned();
    let evicting =
        test_support::RedisServer::start_with_config(&[("maxmemory-policy", "volatile-lru")])
            .unwrap();
    for ledger in [None, Some(missing), Some(unreachable), Some(evicting.url())] {
        let env = fronts.clinic_env("pol-no-ledger", ledger.as_deref());
        let bin = bin.clone();
        let init = blocking(move || {
            let mut wire = Wire::start_with(&bin, &env);
            wire.request(
                0,
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "turn-ledger-test", "version": "1"}}),
            )
        })
        .await;
        let message = init["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("EVIDENCE_TURN_LEDGER"),
            "{ledger:?}: {init}"
        );
        if ledger.as_deref() == Some(evicting.url().as_str()) {
            assert!(
                message.contains("maxmemory-policy is volatile-lru")
                    && message.contains("noeviction"),
                "{init}"
            );
        }
    }

    // A ledger directory removed after start, or whose turn file cannot be appended to:
    // each call is a typed runtime-context failure, nothing sent, one audit record.
    let ledger = new_ledger(fronts.dir.path());
    let env = fronts.clinic_env("pol-broken-ledger", Some(&ledger.display().to_string()));
    let (ledger_in, bin_in, cpu_in) = (ledger.clone(), bin.clone(), cpu.clone());
    let (removed, blocked) = blocking(move || {
        let mut wire = started(&bin_in, &env);
        std::fs::remove_dir(&ledger_in).unwrap();
        let removed = call(&mut wire, 1, CLINIC, &cpu_in);
        std::fs::create_dir(&ledger_in).unwrap();
        std::fs::create_dir(ledger_in.join("pol-broken-ledger.jsonl")).unwrap();
        let blocked = call(&mut wire, 2, CLINIC, &cpu_in);
        (removed, blocked)
    })
    .await;
    assert_eq!(
        code_of(&removed),
        "runtime_context_missing",
        "{}",
        removed.text()
    );
    assert_eq!(
        code_of(&blocked),
        "runtime_context_invalid",
        "{}",
        blocked.text()
    );
    assert_eq!(fronts.clinic_sent(), 0, "a call ran without the ledger");
    // The ledger's path is the operator's: in each audit record, never in the text.
    let records = fronts.clinic_audit();
    assert_eq!(records.len(), 2);
    let path = ledger.display().to_string();
    for (result, record) in [&removed, &blocked].into_iter().zip(&records) {
        assert!(!result.text().contains(&path), "{}", result.text());
        let detail = record["operator_detail"].as_str().unwrap_or_default();
        assert!(detail.contains(&path), "{record}");
    }

    // The one-shot entrypoint without the variable runs as before: the runtime owns the
    // turn, so the same question runs twice.
    let env = fronts.clinic_env("pol-one-shot", None);
    let answers = blocking(move || {
        (0..2)
            .map(|_| {
                let (code, out, err) = run(&bin, &[], &env, &cpu.to_string());
                assert_eq!(code, 0, "{err}");
                ToolResult::from_json(out.trim()).unwrap()
            })
            .collect::<Vec<_>>()
    })
    .await;
    for answer in &answers {
        assert_eq!(answer.details().status, Status::Ok, "{}", answer.text());
    }
    assert_eq!(fronts.clinic_sent(), 2);
}
