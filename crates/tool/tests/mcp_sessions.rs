//! A package's MCP server over a session's life, on the wire against real Prometheus
//! behind the Clinic front: each call runs under exactly one policy, the one envelope it
//! read when it started, however the runtime replaces the file meanwhile; no call is
//! left without its audit record when the client cancels it or ends the session; a call
//! the client cancels stops at once and is recorded cancelled while the server goes on;
//! and a server that finds the policy signing key in its environment does not start.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use evidence_result::{ToolResult, mcp::McpCallToolResult};
use evidence_test_support as test_support;
use secrecy::SecretString;
use serde_json::{Value, json};
use support::*;

const TOKEN: &str = "mcp-sessions-clinic-token-01";

fn args(query_id: &str) -> Value {
    json!({"queries": [{"queryId": query_id, "expr": test_support::TIDB_CPU.expr,
                        "step": "15s", "unit": "cores"}]})
}

fn call_message(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "managed_auto_oncall_clinic", "arguments": args(&format!("q{id}"))}})
}

struct Setup {
    _prometheus: test_support::Prometheus,
    front: test_support::ClinicFront,
    dir: tempfile::TempDir,
    clinic: std::path::PathBuf,
}

async fn setup(delay: Duration) -> Setup {
    let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
        .await
        .unwrap();
    let front =
        test_support::ClinicFront::start(&prometheus.url(), SecretString::from(TOKEN.to_owned()))
            .await
            .unwrap();
    front.faults().set_delay(delay);
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    Setup {
        _prometheus: prometheus,
        front,
        dir,
        clinic,
    }
}

impl Setup {
    fn env(&self, envelope: &Path) -> Vec<(&'static str, String)> {
        let signed = Signed {
            envelope: envelope.to_path_buf(),
            keys: policy_keys(),
        };
        clinic_env(
            &signed,
            &self.dir.path().join("audit.jsonl"),
            self.front.base_url(),
            TOKEN,
        )
    }

    fn audit(&self) -> Vec<Value> {
        audit_records(&self.dir.path().join("audit.jsonl"))
    }
}

/// The policy `id` whose window starts `shift` seconds before APID-29213's.
fn shifted_policy(id: &str, shift: i64) -> Value {
    let ts = |s: i64| jiff::Timestamp::from_second(s).unwrap().to_string();
    policy(
        "clinic",
        "managed_auto_oncall_clinic",
        json!({"policy_id": id, "window": {
            "start": ts(test_support::APID_29213_START - shift),
            "end": ts(test_support::APID_29213_END - shift)}}),
    )
}

fn result_of(message: &Value) -> ToolResult {
    let mcp: McpCallToolResult = serde_json::from_value(message["result"].clone()).unwrap();
    ToolResult::from_mcp(&mcp).unwrap()
}

/// A server process of `bin` with exactly `env`, initialized over its stdin; its stdout
/// is read on a thread to the end (answers are not looked at).
fn started(bin: &Path, env: &[(&'static str, String)]) -> (Child, ChildStdin) {
    let mut child = Command::new(bin)
        .arg("--mcp")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "mcp-sessions-test", "version": "1"}}})
    )
    .unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    (child, stdin)
}

/// The runtime replaces the envelope (write a new file, rename it over) while calls are
/// in flight: a call keeps the policy it read when it started, to its result and its
/// audit record, and a call that starts after the rename reads the new one.
#[tokio::test]
async fn each_call_runs_under_the_one_policy_it_read_at_its_start() {
    let s = setup(Duration::from_millis(1500)).await;
    let first = sign(
        s.dir.path(),
        "envelope.json",
        &s.clinic,
        &shifted_policy("pol-first", 0),
    );
    let second = sign(
        s.dir.path(),
        "next.json",
        &s.clinic,
        &shifted_policy("pol-second", 60),
    );
    let (env, bin) = (s.env(&first.envelope), entrypoint(&s.clinic));
    let (live, replacement) = (first.envelope.clone(), second.envelope.clone());
    let answers = blocking(move || {
        let mut wire = Wire::start_with(&bin, &env);
        wire.initialize();
        // Four calls take the four slots and read the first envelope; then the file is
        // replaced while they wait for the provider; four more calls start only when
        // slots free up, after the rename.
        for id in 1..=4 {
            wire.send(call_message(id));
        }
        std::thread::sleep(Duration::from_millis(500));
        std::fs::rename(&replacement, &live).unwrap();
        for id in 5..=8 {
            wire.send(call_message(id));
        }
        let mut answers = std::collections::BTreeMap::new();
        while answers.len() < 8 {
            let message = wire.next_message();
            if let Some(id) = message["id"].as_u64() {
                answers.insert(id, result_of(&message));
            }
        }
        answers
    })
    .await;
    let records = s.audit();
    assert_eq!(records.len(), 8);
    let start_of = |id: &str| match id {
        "pol-first" => test_support::APID_29213_START,
        "pol-second" => test_support::APID_29213_START - 60,
        other => panic!("an audit record names policy {other}"),
    };
    for (id, result) in &answers {
        let details = serde_json::to_value(result.details()).unwrap();
        let item = &details["items"][0];
        let digest = item["request_digest"].as_str().unwrap();
        let record = records
            .iter()
            .find(|r| r["request_digests"][0] == digest)
            .unwrap_or_else(|| panic!("call {id} has no audit record: {details}"));
        let policy_id = record["policy_id"].as_str().unwrap();
        // The window the call queried is its recorded policy's.
        assert_eq!(
            item["evidence"]["window"]["start"],
            start_of(policy_id),
            "call {id} under {policy_id}: {details}"
        );
        let expected = if *id <= 4 { "pol-first" } else { "pol-second" };
        assert_eq!(policy_id, expected, "call {id}");
    }
}

/// The client cancels one call and then ends the session (closes stdin) while both are
/// still waiting for the provider: the cancelled call stops at once and is recorded
/// cancelled; the other runs to its answer; the server appends both audit records, and
/// only then exits.
#[tokio::test]
async fn ending_the_session_leaves_no_call_without_its_record() {
    let s = setup(Duration::from_millis(2000)).await;
    let signed = sign(
        s.dir.path(),
        "envelope.json",
        &s.clinic,
        &shifted_policy("pol-session", 0),
    );
    let (env, bin) = (s.env(&signed.envelope), entrypoint(&s.clinic));
    let status = blocking(move || {
        let (mut child, mut stdin) = started(&bin, &env);
        let mut send = |message: Value| writeln!(stdin, "{message}").unwrap();
        send(call_message(1));
        send(call_message(2));
        std::thread::sleep(Duration::from_millis(300));
        send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 2, "reason": "the user stopped it"}}),
        );
        drop(stdin);
        let started = std::time::Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the server did not exit after the session ended"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await;
    assert!(status.success(), "{status:?}");
    let records = s.audit();
    let ids: std::collections::BTreeSet<&str> = records
        .iter()
        .map(|r| r["query_ids"][0].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["q1", "q2"].into_iter().collect(), "{records:?}");
    for record in &records {
        let cancelled = record["query_ids"][0] == "q2";
        assert_eq!(record.get("cancelled").is_some(), cancelled, "{record}");
    }
    // Only the call that was not cancelled waited for the provider's answer.
    assert_eq!(s.front.requests().len(), 1);
}

/// As the entrypoint refuses to run, the server refuses to start when the policy
/// signing key is in its environment, and says why; it does not silently drop it.
#[tokio::test]
async fn a_server_given_the_signing_key_does_not_start() {
    let s = setup(Duration::ZERO).await;
    let signed = sign(
        s.dir.path(),
        "envelope.json",
        &s.clinic,
        &shifted_policy("pol-key", 0),
    );
    let mut env = s.env(&signed.envelope);
    env.push(("EVIDENCE_SIGNING_KEY", signing_key()));
    let bin = entrypoint(&s.clinic);
    let (code, out, err) = blocking(move || {
        let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (*k, v.clone())).collect();
        run(&bin, &["--mcp"], &env, "")
    })
    .await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.contains("EVIDENCE_SIGNING_KEY is set"), "{err}");
    assert!(!err.contains(&signing_key()), "the key itself was printed");
}

/// An MCP client that closes a session waits a moment for its server, then sends
/// SIGTERM (the official Python SDK waits 2 s). A call still waiting for the provider
/// then is recorded as cancelled, with its query id, and the server exits at once.
#[tokio::test]
async fn a_stopped_server_records_each_running_call_as_cancelled() {
    let s = setup(Duration::from_millis(10_000)).await;
    let signed = sign(
        s.dir.path(),
        "envelope.json",
        &s.clinic,
        &shifted_policy("pol-stop", 0),
    );
    let (env, bin) = (s.env(&signed.envelope), entrypoint(&s.clinic));
    let (status, took) = blocking(move || {
        let (mut child, mut stdin) = started(&bin, &env);
        let mut send = |message: Value| writeln!(stdin, "{message}").unwrap();
        send(call_message(7));
        std::thread::sleep(Duration::from_millis(500));
        drop(stdin);
        std::thread::sleep(Duration::from_millis(300));
        let stopped = std::time::Instant::now();
        let kill = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let status = child.wait().unwrap();
        (status, stopped.elapsed())
    })
    .await;
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_secs(3),
        "the server took {took:?} to stop"
    );
    let records = s.audit();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["cancelled"], true, "{}", records[0]);
    assert_eq!(records[0]["query_ids"], json!(["q7"]));
    assert_eq!(records[0]["status"], "error");
}

/// The client cancels a call whose provider never answers (`notifications/cancelled`):
/// the call's work stops at once, well before its 60 s deadline, its one audit record is
/// written marked `cancelled` with its query id, no answer is sent for it, and the
/// server goes on answering the next call.
#[tokio::test]
async fn a_cancelled_call_stops_at_once_and_is_recorded_cancelled() {
    let s = setup(Duration::from_secs(3_600)).await;
    let signed = sign(
        s.dir.path(),
        "envelope.json",
        &s.clinic,
        &shifted_policy("pol-cancel", 0),
    );
    let (env, bin) = (s.env(&signed.envelope), entrypoint(&s.clinic));
    let audit = s.dir.path().join("audit.jsonl");
    let front = s.front.faults().clone();
    let (recorded_after, next) = blocking(move || {
        let mut wire = Wire::start_with(&bin, &env);
        wire.initialize();
        wire.send(call_message(3));
        std::thread::sleep(Duration::from_millis(500));
        let cancelled = std::time::Instant::now();
        wire.send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": 3, "reason": "the user stopped it"}}),
        );
        while audit_records(&audit).is_empty() {
            assert!(
                cancelled.elapsed() < Duration::from_secs(5),
                "the cancelled call was not recorded"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let recorded_after = cancelled.elapsed();
        // The provider answers again: the same server answers the next call (the first
        // message with an id is its answer: none came for the cancelled call).
        front.set_delay(Duration::ZERO);
        wire.send(call_message(4));
        loop {
            let message = wire.next_message();
            assert_ne!(
                message["id"], 3,
                "the cancelled call was answered: {message}"
            );
            if message["id"] == 4 {
                break (recorded_after, message);
            }
        }
    })
    .await;
    assert!(
        recorded_after < Duration::from_secs(2),
        "recorded {recorded_after:?} after the cancellation"
    );
    assert_eq!(next["id"], 4, "{next}");
    let result = result_of(&next);
    assert_eq!(
        result.details().status,
        evidence_result::Status::Ok,
        "{}",
        result.text()
    );
    let records = s.audit();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["cancelled"], true, "{}", records[0]);
    assert_eq!(records[0]["query_ids"], json!(["q3"]));
    assert_eq!(records[0]["status"], "error");
    assert!(records[1].get("cancelled").is_none(), "{}", records[1]);
}
