//! One turn across hosts: tool servers that share no disk keep the turn rules through a
//! real Redis (`EVIDENCE_TURN_LEDGER=redis://...`, started by each test on loopback with
//! `appendonly yes` and `appendfsync always`), against real Prometheus behind the
//! Clinic and Manus fronts.
//!
//! - Two replicas of the Clinic server and a Manus server, each over Streamable HTTP
//!   with its own audit log and no directory in common: an unchanged retry sent to the
//!   other replica is refused, a Manus 403 stops both Clinic replicas' next calls, and a
//!   policy delivered to one replica is the session's current one at the other, where
//!   the earlier one is refused (409). The Redis password is in no result, audit record
//!   or answer.
//! - A stress run: sessions x calls spread over three replicas at once, some sent in long
//!   runs (a model retrying in a loop), then each turn's entries replayed through one
//!   in-process `Turn`: what the replicas admitted is exactly what that `Turn` admits, no
//!   turn runs more than `max_calls_per_turn`, nothing runs after a shared failure, every
//!   admitted call reached the provider once, the refusals are counted by code exactly as
//!   the sessions received them, and a turn holds its admitted calls' entries only.
//! - Redis killed and started again between calls: a stopped turn stays stopped and a
//!   turn's call count is kept. Redis stopped (SIGSTOP), killed and restarted mid-run:
//!   each call answers a typed failure with nothing sent and one audit record, and
//!   nothing logged before is lost. A Redis answering nonsense, one that does not fsync,
//!   one that may evict keys (`maxmemory-policy` other than `noeviction`), a wrong
//!   password: each fails closed. TLS (`rediss://`) with a private CA.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use evidence_materialize::{Admission, Call, Turn, TurnLimits};
use evidence_policy::SessionToken;
use evidence_result::{
    Correction, Details, ErrorCode, Evidence, Failure, FailureClass, Item, Operation, Origin,
    PackageId, Provider, QueryId, RequestDigest, Status, ToolResult,
};
use evidence_test_support::{self as test_support, Fault, RedisServer};
use serde_json::{Value, json};
use support::*;

const CLINIC: &str = "managed_auto_oncall_clinic";
const MANUS: &str = "managed_auto_oncall_manus";
const CLINIC_TOKEN: &str = "redis-ledger-clinic-token-01";
const MANUS_USER: &str = "redis-ledger-reader";
const MANUS_PASSWORD: &str = "redis-ledger-password-01";
const REDIS_PASSWORD: &str = "redis-ledger-pass-7f3a9c";

fn clinic_args(query_id: &str, expr: &str, step: &str) -> Value {
    json!({"queries": [{"queryId": query_id, "expr": expr, "step": step, "unit": "cores"}]})
}

fn cpu(query_id: &str) -> Value {
    clinic_args(query_id, test_support::TIDB_CPU.expr, "15s")
}

fn manus_args(query_id: &str) -> Value {
    json!({"queryId": query_id, "expr": test_support::TIDB_CPU.expr, "step": "15s"})
}

/// The tests' limits with `max_calls` calls to a turn.
fn limits_with(max_calls: u32) -> Value {
    let mut limits = limits(4);
    limits["max_calls_per_turn"] = json!(max_calls);
    limits
}

/// Real Prometheus behind both fronts, the deployed folders, and a Redis.
struct World {
    providers: Providers,
    dir: tempfile::TempDir,
    clinic: PathBuf,
    manus: PathBuf,
    redis: RedisServer,
}

async fn world(redis: RedisServer, clinic_timeout_ms: Option<u64>) -> World {
    let providers = Providers::start(CLINIC_TOKEN, MANUS_USER, MANUS_PASSWORD).await;
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = match clinic_timeout_ms {
        Some(ms) => deploy_with_timeout(dir.path(), CLINIC, "v3", CLINIC_TOOL, ms),
        None => deploy(dir.path(), CLINIC, "v3", CLINIC_TOOL),
    };
    let (manus, _) = deploy(dir.path(), MANUS, "v2", MANUS_TOOL);
    World {
        providers,
        dir,
        clinic,
        manus,
        redis,
    }
}

impl World {
    /// A folder of its own for one server (its audit log, its envelope): the servers
    /// share nothing on disk.
    fn host(&self, name: &str) -> PathBuf {
        let dir = self.dir.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The runtime's variables of a server on `host` with the envelope of `policy`
    /// (signed for `package_dir`) and the Redis ledger `ledger`.
    fn runtime(
        &self,
        host: &Path,
        package_dir: &Path,
        policy: &Value,
        ledger: &str,
    ) -> Vec<(&'static str, String)> {
        let signed = sign(host, "envelope.json", package_dir, policy);
        let mut env = runtime_env(&signed, &host.join("audit.jsonl"));
        env.retain(|(k, _)| *k != "EVIDENCE_TURN_LEDGER");
        env.push(("EVIDENCE_TURN_LEDGER", ledger.to_owned()));
        env
    }

    fn clinic_env(&self, host: &Path, policy: &Value, ledger: &str) -> Vec<(&'static str, String)> {
        let mut env = self.runtime(host, &self.clinic, policy, ledger);
        env.extend(clinic_vars(
            self.providers.clinic_front.base_url(),
            CLINIC_TOKEN,
        ));
        env
    }

    fn manus_env(&self, host: &Path, policy: &Value, ledger: &str) -> Vec<(&'static str, String)> {
        let mut env = self.runtime(host, &self.manus, policy, ledger);
        env.extend(self.providers.manus_vars());
        env
    }

    fn clinic_sent(&self) -> usize {
        self.providers.clinic_front.requests().len()
    }
}

/// The call records (request records left out) of the audit log on `host`.
fn calls_on(host: &Path) -> Vec<Value> {
    audit_records(&host.join("audit.jsonl"))
        .into_iter()
        .filter(|r| r.get("record").is_none())
        .collect()
}

/// One SDK session per `(label, url, token, calls)`, all at once, each sending its
/// calls at once; the results by session label, in call order.
fn run_sessions(
    tool: &str,
    sessions: &[(String, String, &SessionToken, Vec<Value>)],
) -> BTreeMap<String, Vec<ToolResult>> {
    let plan = json!({
        "concurrent": true,
        "sessions": sessions.iter().map(|(label, url, token, calls)| {
            let parallel: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, args)| tool_call(&format!("c{i}"), tool, args.clone()))
                .collect();
            http_session(label, url, session_headers(token), "2025-11-25",
                         vec![json!({"label": "all", "parallel": parallel})])
        }).collect::<Vec<_>>(),
    });
    let output = run_client(&plan);
    sessions
        .iter()
        .map(|(label, ..)| {
            let steps = session_of(&output, label)["steps"][0]["parallel"]
                .as_array()
                .unwrap()
                .iter()
                .map(step_result)
                .collect();
            (label.clone(), steps)
        })
        .collect()
}

/// One call over HTTP in a session of its own.
fn http_call(url: &str, tool: &str, token: &SessionToken, args: Value) -> ToolResult {
    run_sessions(
        tool,
        &[("one".to_owned(), url.to_owned(), token, vec![args])],
    )
    .remove("one")
    .unwrap()
    .remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clinic_replicas_and_a_manus_server_keep_one_turn_through_redis() {
    let w = world(
        RedisServer::start_with_password(REDIS_PASSWORD).unwrap(),
        None,
    )
    .await;
    let ledger = w.redis.url();
    let token = SessionToken::mint();
    let turn = "pol-replicated-turn";
    let issued =
        |secs: i64| (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(secs)).to_string();
    let clinic_policy = |policy_id: &str, age: i64| {
        session_policy_of(
            "clinic",
            CLINIC,
            &token,
            json!({"policy_id": policy_id, "issued_at": issued(age)}),
        )
    };
    let manus_policy = session_policy_of(
        "manus",
        MANUS,
        &token,
        json!({"policy_id": turn, "manus_target": "vida"}),
    );
    let (host_a, host_b, host_m) = (w.host("clinic-a"), w.host("clinic-b"), w.host("manus"));
    let replica = |host: &Path| {
        HttpServer::start(
            &entrypoint(&w.clinic),
            &http_env(&w.clinic_env(host, &clinic_policy(turn, 30), &ledger)),
        )
    };
    let (a, b) = (replica(&host_a), replica(&host_b));
    let manus = HttpServer::start(
        &entrypoint(&w.manus),
        &http_env(&w.manus_env(&host_m, &manus_policy, &ledger)),
    );
    let first = sign_session(&w.clinic, &clinic_policy(turn, 30));
    // Delivered to one replica, current at both: the session store is in Redis.
    assert_eq!(a.deliver(&first, None).0, 200);
    let (status, answer) = b.deliver(&first, None);
    assert_eq!(
        (status, &answer["delivered"]),
        (200, &json!("unchanged")),
        "{answer}"
    );
    assert_eq!(
        manus
            .deliver(&sign_session(&w.manus, &manus_policy), None)
            .0,
        200
    );
    let (url_a, url_b, url_m) = (a.url(), b.url(), manus.url());

    // A failed request on replica A; its unchanged retry, sent to replica B, is refused
    // with nothing sent.
    let m2m = clinic_args("tidb_m2m", test_support::TIDB_MANY_TO_MANY.expr, "15s");
    let (rejected, retried) = {
        let (token, m2m, url_a, url_b) = (token.clone(), m2m.clone(), url_a.clone(), url_b.clone());
        blocking(move || {
            (
                http_call(&url_a, CLINIC, &token, m2m.clone()),
                http_call(&url_b, CLINIC, &token, m2m),
            )
        })
        .await
    };
    assert!(rejected.is_failed(), "{}", rejected.text());
    assert_eq!(code_of(&retried), "unchanged_retry", "{}", retried.text());
    assert_eq!(
        w.clinic_sent(),
        1,
        "the unchanged retry reached the provider"
    );

    // A shared failure in Manus (its target refuses the reader) stops the turn: the next
    // call on either Clinic replica is refused, nothing sent, each with its audit record.
    w.providers.manus_front.set_forbidden(true);
    let (shared, stopped_a, stopped_b) = {
        let (token, url_a, url_b, url_m) =
            (token.clone(), url_a.clone(), url_b.clone(), url_m.clone());
        blocking(move || {
            let shared = http_call(&url_m, MANUS, &token, manus_args("vida_mem"));
            (
                shared,
                http_call(&url_a, CLINIC, &token, cpu("tidb_cpu_a")),
                http_call(&url_b, CLINIC, &token, cpu("tidb_cpu_b")),
            )
        })
        .await
    };
    let class = shared.details().error.as_ref().map(|e| e.class).unwrap();
    assert!(class.is_shared(), "{}", shared.text());
    assert_eq!(code_of(&stopped_a), "turn_stopped", "{}", stopped_a.text());
    assert_eq!(code_of(&stopped_b), "turn_stopped", "{}", stopped_b.text());
    assert_eq!(w.clinic_sent(), 1, "a stopped turn sent a call");
    assert_eq!(calls_on(&host_a).len(), 2);
    assert_eq!(calls_on(&host_b).len(), 2);
    let entries = redis_entries(&ledger, turn);
    assert_eq!(entries_of(&entries, "admitted").len(), 2, "{entries:?}");
    assert_eq!(entries.len(), 4, "{entries:?}");
    assert_eq!(
        redis_refusals(&ledger, turn),
        BTreeMap::from([
            ("unchanged_retry".to_owned(), 1),
            ("turn_stopped".to_owned(), 2)
        ])
    );

    // The runtime's next pass: a newer envelope delivered to replica B is current at A
    // too, a new turn that runs; the earlier one is refused at A.
    let next = sign_session(&w.clinic, &clinic_policy("pol-replicated-next", 10));
    let (status, answer) = b.deliver(&next, None);
    assert_eq!(
        (status, &answer["replaced"]),
        (200, &json!(turn)),
        "{answer}"
    );
    let (status, answer) = a.deliver(&first, None);
    assert_eq!(
        (status, &answer["current"]),
        (409, &json!("pol-replicated-next")),
        "{answer}"
    );
    let again = {
        let (token, url_a) = (token.clone(), url_a.clone());
        blocking(move || http_call(&url_a, CLINIC, &token, cpu("tidb_cpu_next"))).await
    };
    assert_eq!(again.details().status, Status::Ok, "{}", again.text());
    assert_eq!(
        calls_on(&host_a).last().unwrap()["policy_id"],
        "pol-replicated-next"
    );

    // The Redis password is in no result, record or log of any server.
    for text in [
        rejected.text(),
        retried.text(),
        stopped_a.text(),
        again.text(),
    ] {
        assert!(!text.contains(REDIS_PASSWORD));
    }
    for host in [&host_a, &host_b, &host_m] {
        let audit = std::fs::read_to_string(host.join("audit.jsonl")).unwrap();
        assert!(!audit.contains(REDIS_PASSWORD), "{}", host.display());
    }
}

/// A deterministic sequence of pseudo-random numbers (the stress run's order).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from((self.0 >> 33) % n as u64).unwrap()
    }
}

/// The stress run: `SESSIONS` sessions, each its own turn, each sending `CALLS` drawn
/// calls at once (one in five sent again and again, a run of 5 to 14), each call to one
/// of `REPLICAS` Clinic replicas at random, the questions and requests drawn so that some
/// fail, some repeat, some are shared failures and the turns run into their call limit.
const SESSIONS: usize = 6;
const CALLS: usize = 10;
const REPLICAS: usize = 3;
const MAX_CALLS: u32 = 6;

/// The marker of a query the Clinic front refuses with 403 (a shared failure).
const FORBIDDEN_MARKER: &str = "stress_forbidden_metric";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stress_run_over_three_replicas_admits_exactly_what_one_turn_admits() {
    let w = world(RedisServer::start().unwrap(), None).await;
    w.providers
        .clinic_front
        .faults()
        .set_fault(Fault::Status(403));
    w.providers
        .clinic_front
        .faults()
        .set_only_for(Some(FORBIDDEN_MARKER));
    let ledger = w.redis.url();
    let tokens: Vec<SessionToken> = (0..SESSIONS).map(|_| SessionToken::mint()).collect();
    let turn_of = |s: usize| format!("pol-stress-{s}");
    let hosts: Vec<PathBuf> = (0..REPLICAS)
        .map(|r| w.host(&format!("replica-{r}")))
        .collect();
    let placeholder = policy("clinic", CLINIC, json!({}));
    let replicas: Vec<HttpServer> = hosts
        .iter()
        .map(|host| {
            HttpServer::start(
                &entrypoint(&w.clinic),
                &http_env(&w.clinic_env(host, &placeholder, &ledger)),
            )
        })
        .collect();
    for (s, token) in tokens.iter().enumerate() {
        let envelope = sign_session(
            &w.clinic,
            &session_policy_of(
                "clinic",
                CLINIC,
                token,
                json!({"policy_id": turn_of(s), "limits": limits_with(MAX_CALLS)}),
            ),
        );
        // Delivered once: the session store is shared.
        assert_eq!(replicas[s % REPLICAS].deliver(&envelope, None).0, 200);
    }
    let mut rng = Lcg(0x5eed_2865);
    let requests = [
        (test_support::TIDB_CPU.expr.to_owned(), "15s"),
        (test_support::TIDB_CPU.expr.to_owned(), "30s"),
        (test_support::TIDB_MANY_TO_MANY.expr.to_owned(), "15s"),
        (FORBIDDEN_MARKER.to_owned(), "15s"),
    ];
    let mut sessions = Vec::new();
    for (s, token) in tokens.iter().enumerate() {
        let mut per_replica: Vec<Vec<Value>> = vec![Vec::new(); REPLICAS];
        for _ in 0..CALLS {
            let query = format!("q{}", rng.below(4));
            // Shared failures are rarer than the others.
            let request = match rng.below(10) {
                0 => 3,
                n => [0, 1, 2][n % 3],
            };
            let (expr, step) = &requests[request];
            let run = match rng.below(5) {
                0 => 5 + rng.below(10),
                _ => 1,
            };
            for _ in 0..run {
                per_replica[rng.below(REPLICAS)].push(clinic_args(&query, expr, step));
            }
        }
        for (r, calls) in per_replica.into_iter().enumerate() {
            if !calls.is_empty() {
                sessions.push((format!("s{s}-r{r}"), replicas[r].url(), token, calls));
            }
        }
    }
    let sent: usize = sessions.iter().map(|(.., calls)| calls.len()).sum();
    let begun = Instant::now();
    let sessions: Vec<(String, String, SessionToken, Vec<Value>)> = sessions
        .into_iter()
        .map(|(l, u, t, c)| (l, u, t.clone(), c))
        .collect();
    let results = blocking(move || {
        let borrowed: Vec<(String, String, &SessionToken, Vec<Value>)> = sessions
            .iter()
            .map(|(l, u, t, c)| (l.clone(), u.clone(), t, c.clone()))
            .collect();
        run_sessions(CLINIC, &borrowed)
    })
    .await;
    let elapsed = begun.elapsed();
    assert!(
        elapsed < Duration::from_secs(120),
        "the stress run took {elapsed:?}"
    );
    let answered: usize = results.values().map(Vec::len).sum();
    assert_eq!(answered, sent);

    let refusal_codes: Vec<&str> = evidence_materialize::RefusalCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    let (mut admitted_total, mut stopped_turns) = (0, 0);
    let mut refusals: BTreeMap<String, u64> = BTreeMap::new();
    for s in 0..SESSIONS {
        let entries = redis_entries(&ledger, &turn_of(s));
        let (admitted, stopped) = replay(&entries, MAX_CALLS);
        assert!(
            admitted <= MAX_CALLS as usize,
            "turn {s} ran {admitted} calls"
        );
        // Its admissions and their answers, nothing per refusal.
        assert_eq!(entries.len(), 2 * admitted, "{entries:?}");
        admitted_total += admitted;
        stopped_turns += usize::from(stopped);
        // The turn counted each refusal its session received, by code.
        let mut received: BTreeMap<String, u64> = BTreeMap::new();
        for (label, answers) in &results {
            if label.starts_with(&format!("s{s}-")) {
                for answer in answers {
                    let code = code_of(answer);
                    if refusal_codes.contains(&code.as_str()) {
                        *received.entry(code).or_default() += 1;
                    }
                }
            }
        }
        let counted = redis_refusals(&ledger, &turn_of(s));
        assert_eq!(counted, received, "turn {s}");
        for (code, n) in counted {
            *refusals.entry(code).or_default() += n;
        }
    }
    // The run did exercise the rules: shared failures, refusals of several kinds.
    assert!(stopped_turns > 0, "no turn was stopped");
    assert!(refusals.len() >= 2, "{refusals:?}");
    eprintln!(
        "stress: {admitted_total} admitted, {stopped_turns} turns stopped, refusals {refusals:?}, {elapsed:?}"
    );
    // Every admitted call reached the provider once; no refused call did.
    assert_eq!(w.providers.clinic_front.arrived(), admitted_total);
    let records: usize = hosts.iter().map(|h| calls_on(h).len()).sum();
    assert_eq!(records, sent, "one audit record per call");
}

/// Replays a turn's entries, in the ledger's order, through one in-process `Turn`:
/// every logged admission must be one that `Turn` admits, and nothing is admitted after
/// a shared failure (refusals are counted apart, never logged). Returns the number of
/// admitted calls and whether the turn stopped.
fn replay(entries: &[Value], max_calls: u32) -> (usize, bool) {
    let mut turn = Turn::new(TurnLimits::new(max_calls));
    let mut open = BTreeMap::new();
    let mut admitted = 0;
    let mut stopped = false;
    for entry in entries {
        match entry["entry"].as_str().unwrap() {
            "admitted" => {
                let call = logged_call(entry);
                assert!(!stopped, "admitted after a shared failure: {entry}");
                match turn.admit(&call).unwrap() {
                    Admission::Admit(ticket) => {
                        open.insert(entry["call"].as_u64().unwrap(), (ticket, call));
                    }
                    Admission::Refuse(r) => {
                        panic!(
                            "the replicas admitted what Turn refuses ({}): {entry}",
                            r.code.as_str()
                        )
                    }
                }
                admitted += 1;
            }
            "answered" => {
                let (ticket, call) = open.remove(&entry["call"].as_u64().unwrap()).unwrap();
                let result = logged_result(&call, entry);
                stopped |= result
                    .details()
                    .items
                    .iter()
                    .filter_map(|i| i.error.as_ref())
                    .chain(result.details().error.as_ref())
                    .any(|e| e.class.is_shared());
                turn.record(ticket, result, Duration::ZERO).unwrap();
            }
            other => panic!("an entry the stress run cannot make: {other}"),
        }
    }
    assert!(open.is_empty(), "calls left without an answer: {open:?}");
    (admitted, stopped)
}

fn logged_call(entry: &Value) -> Call {
    let package = PackageId::new(entry["package"].as_str().unwrap()).unwrap();
    let provider: Provider = serde_json::from_value(entry["provider"].clone()).unwrap();
    entry["queries"]
        .as_array()
        .unwrap()
        .iter()
        .fold(Call::new(package, provider), |call, q| {
            call.with_query(
                QueryId::new(q["queryId"].as_str().unwrap()).unwrap(),
                q.get("requestDigest")
                    .map(|d| d.as_str().unwrap().parse::<RequestDigest>().unwrap()),
            )
        })
}

/// The result an `answered` entry stands for (its attempts; stand-in evidence).
fn logged_result(call: &Call, entry: &Value) -> ToolResult {
    let origin = Origin {
        package: call.package.clone(),
        provider: call.provider,
        operation: Operation::QueryRange,
        policy_source: None,
    };
    let items = entry["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let query_id = QueryId::new(a["queryId"].as_str().unwrap_or("whole")).unwrap();
            let digest = a
                .get("requestDigest")
                .map(|d| d.as_str().unwrap().parse::<RequestDigest>().unwrap());
            if a["outcome"] == "failed" {
                let class: FailureClass = serde_json::from_value(a["class"].clone()).unwrap();
                let code = ErrorCode::new(a["code"].as_str().unwrap()).unwrap();
                Item::failure(
                    query_id,
                    digest,
                    Failure::new(code, class, String::new())
                        .with_correction(Correction::for_class(class, None, Vec::new())),
                )
            } else {
                Item::success(query_id, digest, Evidence::no_data(None, 0))
            }
        })
        .collect();
    if entry["batch"] == true {
        return ToolResult::new(Details::batch(origin, items).unwrap()).unwrap();
    }
    // A call that failed as a whole: one attempt, whatever it names.
    let a = &entry["attempts"][0];
    let class: FailureClass = serde_json::from_value(a["class"].clone()).unwrap();
    let code = ErrorCode::new(a["code"].as_str().unwrap()).unwrap();
    ToolResult::new(Details::failure(
        origin,
        a.get("queryId")
            .map(|q| QueryId::new(q.as_str().unwrap()).unwrap()),
        a.get("requestDigest")
            .map(|d| d.as_str().unwrap().parse().unwrap()),
        Failure::new(code, class, String::new()).with_correction(Correction::for_class(
            class,
            None,
            Vec::new(),
        )),
    ))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_keeps_a_stopped_turn_stopped_and_a_turns_call_count() {
    let mut w = world(RedisServer::start().unwrap(), None).await;
    let ledger = w.redis.url();
    let host = w.host("clinic");
    let turn = |id: &str| {
        policy(
            "clinic",
            CLINIC,
            json!({"policy_id": id, "limits": limits_with(3)}),
        )
    };
    let bin = entrypoint(&w.clinic);
    let counted = w.clinic_env(&host, &turn("pol-counted"), &ledger);
    let one = |env: &[(&'static str, String)], args: &Value| {
        let (code, out, err) = run(&bin, &[], env, &args.to_string());
        assert_eq!(code, 0, "{err}");
        ToolResult::from_json(out.trim()).unwrap()
    };

    // Two calls of three, Redis killed (SIGKILL: only what was fsynced survives) and
    // started again: the third runs, the fourth is over the limit.
    for q in ["a", "b"] {
        assert_eq!(one(&counted, &cpu(q)).details().status, Status::Ok);
    }
    w.redis.restart().unwrap();
    assert_eq!(one(&counted, &cpu("c")).details().status, Status::Ok);
    let over = one(&counted, &cpu("d"));
    assert_eq!(code_of(&over), "turn_call_limit", "{}", over.text());

    // A turn stopped by a shared failure, Redis killed and started again between two
    // calls: the second stays refused, nothing sent.
    let stopped = w.clinic_env(&host, &turn("pol-stopped"), &ledger);
    w.providers.clinic_front.set_forbidden(true);
    let shared = one(&stopped, &cpu("a"));
    assert!(
        shared.details().items[0]
            .error
            .as_ref()
            .unwrap()
            .class
            .is_shared(),
        "{}",
        shared.text()
    );
    w.providers.clinic_front.set_forbidden(false);
    w.redis.kill();
    w.redis.restart().unwrap();
    let sent = w.clinic_sent();
    let refused = one(&stopped, &cpu("b"));
    assert_eq!(code_of(&refused), "turn_stopped", "{}", refused.text());
    assert_eq!(
        w.clinic_sent(),
        sent,
        "a stopped turn sent a call after the restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_killed_and_restarted_mid_run_fails_each_call_closed_and_loses_nothing() {
    // timeout_ms 3 s: a call waits for a stopped Redis no longer than its deadline.
    let mut w = world(RedisServer::start().unwrap(), Some(3_000)).await;
    let ledger = w.redis.url();
    let host = w.host("clinic");
    let env = w.clinic_env(
        &host,
        &policy("clinic", CLINIC, json!({"policy_id": "pol-faults"})),
        &ledger,
    );
    let bin = entrypoint(&w.clinic);
    let mut wire = {
        let (bin, env) = (bin.clone(), env.clone());
        blocking(move || {
            let mut wire = Wire::start_with(&bin, &env);
            wire.initialize();
            wire
        })
        .await
    };
    let call = |wire: &mut Wire, id: u64, args: Value| -> (ToolResult, Duration) {
        let begun = Instant::now();
        let message = wire.request(id, "tools/call", json!({"name": CLINIC, "arguments": args}));
        let mcp = serde_json::from_value(message["result"].clone()).unwrap();
        (ToolResult::from_mcp(&mcp).unwrap(), begun.elapsed())
    };
    let (first, _) = call(&mut wire, 1, cpu("before"));
    assert_eq!(first.details().status, Status::Ok, "{}", first.text());
    let sent = w.clinic_sent();

    // Stopped: the call answers within its deadline, a typed failure, nothing sent.
    w.redis.pause().unwrap();
    let (paused, took) = call(&mut wire, 2, cpu("paused"));
    w.redis.resume().unwrap();
    assert_eq!(
        code_of(&paused),
        "turn_ledger_unavailable",
        "{}",
        paused.text()
    );
    assert!(
        took < Duration::from_millis(3_000),
        "answered after {took:?}"
    );
    // Going on, the next call runs.
    let (resumed, _) = call(&mut wire, 3, cpu("resumed"));
    assert_eq!(resumed.details().status, Status::Ok, "{}", resumed.text());

    // Stopped while a call runs (between its admission and its answer): the answer
    // reaches the model; the ledger, if it missed it, finds the call abandoned once its
    // lease (deadline and margin) is over.
    w.providers
        .clinic_front
        .faults()
        .set_delay(Duration::from_millis(800));
    wire.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                     "params": {"name": CLINIC, "arguments": cpu("mid_call")}}));
    let started = Instant::now();
    while entries_of(&redis_entries(&ledger, "pol-faults"), "admitted").len() < 3 {
        assert!(started.elapsed() < Duration::from_secs(5), "never admitted");
        std::thread::sleep(Duration::from_millis(10));
    }
    w.redis.pause().unwrap();
    let answer = wire.next_message();
    // Logging the answer waits a quarter of the margin (75 ms here), then gives up.
    std::thread::sleep(Duration::from_millis(300));
    w.redis.resume().unwrap();
    w.providers.clinic_front.faults().set_delay(Duration::ZERO);
    let mcp = serde_json::from_value(answer["result"].clone()).unwrap();
    let mid = ToolResult::from_mcp(&mcp).unwrap();
    assert_eq!(mid.details().status, Status::Ok, "{}", mid.text());

    // Killed: a typed failure, nothing sent.
    w.redis.kill();
    let before = w.clinic_sent();
    let (down, _) = call(&mut wire, 5, cpu("down"));
    assert_eq!(code_of(&down), "turn_ledger_unavailable", "{}", down.text());
    assert_eq!(w.clinic_sent(), before, "a call ran without its admission");

    // Started again on its append-only file: everything logged is there, the call that
    // missed its answer is found abandoned, the turn goes on.
    w.redis.restart().unwrap();
    std::thread::sleep(Duration::from_millis(3_100).saturating_sub(started.elapsed()));
    let (after, _) = call(&mut wire, 6, cpu("after"));
    assert_eq!(after.details().status, Status::Ok, "{}", after.text());
    let (retry, _) = call(&mut wire, 7, cpu("mid_call"));
    let entries = redis_entries(&ledger, "pol-faults");
    assert_eq!(entries_of(&entries, "admitted").len(), 4, "{entries:?}");
    // A write given up on may still reach Redis when it goes on (it was sent): the
    // answer is then logged late, else the call is found abandoned. Either way the
    // ledger is consistent and the question is not run again.
    let (answered, abandoned) = (
        entries_of(&entries, "answered").len(),
        entries_of(&entries, "abandoned").len(),
    );
    match code_of(&retry).as_str() {
        "unchanged_retry" => assert_eq!((answered, abandoned), (3, 1), "{entries:?}"),
        "objective_answered" => assert_eq!((answered, abandoned), (4, 0), "{entries:?}"),
        other => panic!(
            "the killed call's question ran again or was refused as {other}: {}",
            retry.text()
        ),
    }
    // One provider request per call that ran (before, resumed, mid_call, after), one
    // audit record per call.
    assert_eq!(w.clinic_sent(), sent + 3);
    assert_eq!(calls_on(&host).len(), 7);
}

/// A fake Redis on loopback that answers every command with `answer`, except the
/// connection checks (`INFO`, `CONFIG`, `CLIENT`, `PING`), which it answers well.
fn nonsense_redis(answer: &'static [u8]) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buf[..n]).to_uppercase();
                    let reply: Vec<u8> = if text.contains("CLIENT") {
                        b"+OK\r\n+OK\r\n".to_vec()
                    } else if text.contains("INFO") {
                        let body = "# Persistence\r\naof_enabled:1\r\n\
                                    # Memory\r\nmaxmemory_policy:noeviction\r\n";
                        format!("${}\r\n{body}\r\n", body.len()).into_bytes()
                    } else if text.contains("CONFIG") {
                        b"*2\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n".to_vec()
                    } else if text.contains("PING") {
                        b"+PONG\r\n".to_vec()
                    } else {
                        answer.to_vec()
                    };
                    if stream.write_all(&reply).is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_answering_nonsense_not_durable_evicting_or_with_a_wrong_password_fails_closed() {
    let w = world(
        RedisServer::start_with_password(REDIS_PASSWORD).unwrap(),
        None,
    )
    .await;
    let host = w.host("clinic");
    let bin = entrypoint(&w.clinic);
    let one = |ledger: &str| {
        let env = w.clinic_env(
            &host,
            &policy("clinic", CLINIC, json!({"policy_id": "pol-bad-redis"})),
            ledger,
        );
        let (code, out, err) = run(&bin, &[], &env, &cpu("q").to_string());
        assert_eq!(code, 0, "{err}");
        (ToolResult::from_json(out.trim()).unwrap(), err)
    };
    let wrong = w.redis.url().replace(REDIS_PASSWORD, "not-the-password-1");
    let mut cases = vec![
        (
            "an integer for a list",
            format!("redis://127.0.0.1:{}/0", nonsense_redis(b":7\r\n")),
        ),
        (
            "bytes that are not RESP",
            format!(
                "redis://127.0.0.1:{}/0",
                nonsense_redis(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            ),
        ),
        ("a wrong password", wrong.clone()),
    ];
    // A Redis that does not fsync each write could lose an acknowledged stop.
    let mut admin = redis::Client::open(w.redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendfsync")
        .arg("everysec")
        .query(&mut admin)
        .unwrap();
    cases.push(("appendfsync everysec", w.redis.url()));
    // A Redis that may evict keys with a time to live (every ledger key has one) could
    // drop a stopped turn: the policies of managed services' defaults are refused.
    let evicting: Vec<RedisServer> = ["allkeys-lru", "volatile-lru"]
        .iter()
        .map(|policy| RedisServer::start_with_config(&[("maxmemory-policy", policy)]).unwrap())
        .collect();
    cases.push(("maxmemory-policy allkeys-lru", evicting[0].url()));
    cases.push(("maxmemory-policy volatile-lru", evicting[1].url()));
    for (why, ledger) in &cases {
        let (result, stderr) = one(ledger);
        assert_eq!(
            code_of(&result),
            "turn_ledger_unavailable",
            "{why}: {}",
            result.text()
        );
        for text in [result.text(), stderr.as_str()] {
            assert!(
                !text.contains(REDIS_PASSWORD) && !text.contains("not-the-password-1"),
                "{why}: {text}"
            );
        }
        // The operator is told which setting to change (in the audit record and on
        // stderr), the model nothing of the Redis.
        if *why == "appendfsync everysec" {
            let record = calls_on(&host).pop().unwrap();
            let detail = record["operator_detail"].as_str().unwrap_or_default();
            for told in [detail, stderr.as_str()] {
                assert!(told.contains("appendfsync always"), "{told}");
            }
        }
        if let Some(policy) = why.strip_prefix("maxmemory-policy ") {
            let record = calls_on(&host).pop().unwrap();
            let detail = record["operator_detail"].as_str().unwrap_or_default();
            for told in [detail, stderr.as_str()] {
                assert!(
                    told.contains(&format!("maxmemory-policy is {policy}"))
                        && told.contains("CONFIG SET maxmemory-policy noeviction"),
                    "{told}"
                );
            }
        }
        assert!(!result.text().contains("127.0.0.1"), "{}", result.text());
    }
    assert_eq!(w.clinic_sent(), 0, "a call ran without its admission");
    let audit = std::fs::read_to_string(host.join("audit.jsonl")).unwrap();
    assert_eq!(
        audit.lines().count(),
        cases.len(),
        "one audit record per call"
    );
    assert!(!audit.contains(REDIS_PASSWORD) && !audit.contains("not-the-password-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rediss_ledger_is_reached_over_tls_with_a_private_ca() {
    let certs = tempfile::tempdir().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    let path = |name: &str| certs.path().join(name);
    std::fs::write(path("ca.pem"), ca.pem()).unwrap();
    std::fs::write(path("cert.pem"), cert.pem()).unwrap();
    std::fs::write(path("key.pem"), key.serialize_pem()).unwrap();
    let redis = RedisServer::start_tls(test_support::RedisTls {
        cert: path("cert.pem"),
        key: path("key.pem"),
        ca: path("ca.pem"),
    })
    .unwrap();
    assert!(redis.url().starts_with("rediss://"));
    let w = world(redis, None).await;
    let host = w.host("clinic");
    let bin = entrypoint(&w.clinic);
    let mut env = w.clinic_env(
        &host,
        &policy("clinic", CLINIC, json!({"policy_id": "pol-tls"})),
        &w.redis.url(),
    );
    // Without the CA the server's certificate is not trusted: nothing runs.
    let (code, out, err) = run(&bin, &[], &env, &cpu("q").to_string());
    assert_eq!(code, 0, "{err}");
    let untrusted = ToolResult::from_json(out.trim()).unwrap();
    assert_eq!(
        code_of(&untrusted),
        "turn_ledger_unavailable",
        "{}",
        untrusted.text()
    );
    env.push((
        "EVIDENCE_TURN_LEDGER_CA",
        path("ca.pem").display().to_string(),
    ));
    let (code, out, err) = run(&bin, &[], &env, &cpu("q").to_string());
    assert_eq!(code, 0, "{err}");
    let trusted = ToolResult::from_json(out.trim()).unwrap();
    assert_eq!(trusted.details().status, Status::Ok, "{}", trusted.text());
    assert_eq!(
        redis_entries_tls(&w.redis, &path("ca.pem"), "pol-tls").len(),
        2
    );
    assert_eq!(w.clinic_sent(), 1);
}

/// The entries of a turn in the TLS Redis `redis`, trusting `ca`.
fn redis_entries_tls(redis: &RedisServer, ca: &Path, policy_id: &str) -> Vec<String> {
    // This test process links two rustls providers: it names one.
    let _chosen = rustls::crypto::ring::default_provider().install_default();
    let client = redis::Client::build_with_tls(
        redis.url(),
        redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(std::fs::read(ca).unwrap()),
        },
    )
    .unwrap();
    let mut conn = client.get_connection().unwrap();
    redis::cmd("LRANGE")
        .arg(format!("evidence:turn:{{{policy_id}}}:entries"))
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap()
}
