//! What operators see of a running server, with the real parts: a real Prometheus
//! scrapes the packaged Clinic server's `/metrics` on its operator listener and PromQL
//! over the scraped series counts exactly the calls made; `/healthz` and `/readyz`
//! follow a real Redis stopped and started again and an audit log that cannot be
//! written; a W3C `traceparent` sent by the official Python SDK reaches the call's audit
//! record, and a malformed one is ignored and counted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use evidence_policy::SessionToken;
use evidence_test_support as test_support;
use evidence_tool::mcp::{HEALTHZ_PATH, MCP_HTTP_FLAG, METRICS_PATH, OPERATOR_FLAG, READYZ_PATH};
use serde_json::{Value, json};
use support::raw::{self, Reply};
use support::*;

const TOKEN: &str = "operations-clinic-token-0001";
const CLINIC: &str = "managed_auto_oncall_clinic";
const HERE: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn args(query_id: &str, expr: &str) -> Value {
    json!({"queries": [{"queryId": query_id, "expr": expr, "step": "15s", "unit": "cores"}]})
}

/// The Clinic provider, a deployed package and the environment of its server, with the
/// turn ledger `ledger` (a directory, or a Redis URL) and the audit log `audit`.
struct Setup {
    provider: ClinicProvider,
    dir: tempfile::TempDir,
    clinic: PathBuf,
}

impl Setup {
    async fn new() -> Setup {
        let provider = ClinicProvider::start(TOKEN).await;
        let dir = tempfile::tempdir().unwrap();
        let (clinic, _) = deploy(dir.path(), CLINIC, "v3", CLINIC_TOOL);
        Setup {
            provider,
            dir,
            clinic,
        }
    }

    fn env(&self, audit: &std::path::Path, ledger: Option<String>) -> Vec<(&'static str, String)> {
        let signed = sign(
            self.dir.path(),
            "unused-envelope.json",
            &self.clinic,
            &policy("clinic", CLINIC, json!({})),
        );
        let mut env = http_env(&clinic_env(
            &signed,
            audit,
            self.provider.front.base_url(),
            TOKEN,
        ));
        if let Some(ledger) = ledger {
            env.retain(|(name, _)| *name != "EVIDENCE_TURN_LEDGER");
            env.push(("EVIDENCE_TURN_LEDGER", ledger));
        }
        env
    }

    fn start(&self, env: &[(&'static str, String)]) -> HttpServer {
        HttpServer::start_with(
            &entrypoint(&self.clinic),
            &[MCP_HTTP_FLAG, "127.0.0.1:0", OPERATOR_FLAG, "127.0.0.1:0"],
            env,
        )
    }

    fn session(&self, server: &HttpServer) -> SessionToken {
        let token = SessionToken::mint();
        let policy = session_policy_of("clinic", CLINIC, &token, json!({}));
        let (status, answer) = server.deliver(&sign_session(&self.clinic, &policy), None);
        assert_eq!(status, 200, "{answer}");
        token
    }
}

/// `GET path` on the operator listener.
async fn operator_get(server: &HttpServer, path: &str) -> Reply {
    raw::request(server.operator.unwrap(), HERE, "GET", path, &[], b"").await
}

/// A raw call on a protocol session of its own.
async fn call(server: SocketAddr, token: Option<&str>, query_id: &str, expr: &str) -> Reply {
    let id = raw::open_session(server, HERE).await;
    raw::call_tool(server, HERE, &id, token, CLINIC, args(query_id, expr)).await
}

/// The value of the one series `query` answers at Prometheus `addr` now (0 when none).
async fn instant(addr: SocketAddr, query: &str) -> f64 {
    let encoded = percent_encoding::utf8_percent_encode(query, percent_encoding::NON_ALPHANUMERIC);
    let reply = raw::request(
        addr,
        HERE,
        "GET",
        &format!("/api/v1/query?query={encoded}"),
        &[],
        b"",
    )
    .await;
    let answer: Value = serde_json::from_str(&reply.body).unwrap();
    answer["data"]["result"][0]["value"][1]
        .as_str()
        .map_or(0.0, |v| v.parse().unwrap())
}

/// A known mix of calls (ok, no_data, a scope violation, a session missing, a provider
/// 422) through the packaged server; a real Prometheus scraping its `/metrics` every
/// second answers exactly those counts in PromQL, and the build and the readiness are
/// there too.
#[tokio::test]
async fn a_real_prometheus_scraping_the_server_counts_exactly_the_calls_made() {
    let s = Setup::new().await;
    let env = s.env(&s.dir.path().join("audit.jsonl"), None);
    let server = s.start(&env);
    let token = s.session(&server);
    let scraper = test_support::Prometheus::start_scraping(
        test_support::Fixture::Main,
        server.operator.unwrap(),
    )
    .await
    .unwrap();
    let t = Some(token.expose());
    let cpu = test_support::TIDB_CPU.expr;
    let cases = [
        (t, "q_cpu_alpha", cpu.to_owned(), "success"),
        (
            t,
            "q_absent_beta",
            "absent_metric_for_the_test{cluster_id=\"SaaS01\"}".to_owned(),
            "success",
        ),
        (
            t,
            "q_wide_gamma",
            "up{cluster_id=\"SaaS99\"}".to_owned(),
            "scope_violation",
        ),
        (None, "q_anon_delta", cpu.to_owned(), "session_missing"),
        (
            t,
            "q_many_epsilon",
            "process_cpu_seconds_total{cluster_id=\"SaaS01\"} / on(cluster_id) \
             process_cpu_seconds_total{cluster_id=\"SaaS01\"}"
                .to_owned(),
            "clinic_http_422",
        ),
    ];
    for (token, query_id, expr, expected) in &cases {
        let reply = call(server.addr, *token, query_id, expr).await;
        let text = reply.message()["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        let details: Value = serde_json::from_str(&text).unwrap();
        // A Clinic batch of one: its item's error, or the whole call's.
        let code = details["items"][0]["error"]["code"]
            .as_str()
            .or(details["error"]["code"].as_str())
            .unwrap_or("success");
        assert_eq!(code, *expected, "{text}");
    }
    let url = scraper.addr();
    let expected = [
        (
            "sum(evidence_calls_total{status=\"ok\",code=\"none\"})",
            2.0,
        ),
        ("sum(evidence_no_data_answers_total)", 1.0),
        (
            "sum(evidence_calls_total{code=\"scope_violation\",class=\"policy_violation\"})",
            1.0,
        ),
        (
            "sum(evidence_calls_total{code=\"session_missing\",class=\"authorization\"})",
            1.0,
        ),
        (
            "sum(evidence_calls_total{code=\"clinic_http_422\",class=\"query_rejected\"})",
            1.0,
        ),
        ("sum(evidence_calls_total)", 5.0),
        ("sum(evidence_deliveries_total{outcome=\"stored\"})", 1.0),
        (
            "sum(evidence_build_info{package=\"managed_auto_oncall_clinic\"})",
            1.0,
        ),
        ("evidence_ready{check=\"all\"}", 1.0),
        // Four calls reached their connector: the Clinic batch whose one item the lock
        // refused passes through it too, sending nothing; the call without a session
        // did not.
        (
            "sum(evidence_call_phase_seconds_count{phase=\"provider\"})",
            4.0,
        ),
        (
            "sum(evidence_call_phase_seconds_count{phase=\"verify_lock\"})",
            4.0,
        ),
        (
            "sum(evidence_call_phase_seconds_count{phase=\"audit\"})",
            5.0,
        ),
    ];
    // The counts are final once a scrape after the last call is in.
    let until = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        seen.clear();
        for (query, value) in &expected {
            seen.push((*query, instant(url, query).await, *value));
        }
        if seen.iter().all(|(_, got, want)| got == want) {
            break;
        }
        assert!(
            Instant::now() < until,
            "PromQL over the scraped series: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Every series' labels come from fixed lists: no query id, expression or policy id.
    let exposition = operator_get(&server, METRICS_PATH).await;
    assert_eq!(exposition.status, 200);
    for (_, query_id, _, _) in &cases {
        assert!(!exposition.body.contains(query_id), "{query_id}");
    }
    assert!(!exposition.body.contains("pol-entrypoint-test"));
    assert!(!exposition.body.contains("SaaS"));
}

/// `/healthz` answers while the process serves; `/readyz` is `200` with every check
/// passing, `503` naming `turn_ledger` and `session_store` while the real Redis they use
/// is stopped, `200` again once it is back, and `503` naming `audit_log` while the audit
/// log cannot be written.
#[tokio::test]
async fn readiness_follows_the_redis_and_the_audit_log() {
    let s = Setup::new().await;
    let mut redis = test_support::RedisServer::start().unwrap();
    let audit_dir = s.dir.path().join("audit");
    std::fs::create_dir_all(&audit_dir).unwrap();
    let env = s.env(&audit_dir.join("audit.jsonl"), Some(redis.url()));
    let server = s.start(&env);
    let ready = |server: &HttpServer| {
        let server = server.operator.unwrap();
        async move {
            let reply = raw::request(server, HERE, "GET", READYZ_PATH, &[], b"").await;
            let body: Value = serde_json::from_str(&reply.body).unwrap();
            (reply.status, body["failing"].clone())
        }
    };
    assert_eq!(operator_get(&server, HEALTHZ_PATH).await.status, 200);
    assert_eq!(ready(&server).await, (200, json!([])));
    redis.kill();
    assert_eq!(
        ready(&server).await,
        (503, json!(["turn_ledger", "session_store"]))
    );
    assert_eq!(operator_get(&server, HEALTHZ_PATH).await.status, 200);
    redis.restart().unwrap();
    assert_eq!(ready(&server).await, (200, json!([])));
    std::fs::remove_dir_all(&audit_dir).unwrap();
    assert_eq!(ready(&server).await, (503, json!(["audit_log"])));
    std::fs::create_dir_all(&audit_dir).unwrap();
    assert_eq!(ready(&server).await, (200, json!([])));
    // Anything but GET, and any other path, is refused.
    let post = raw::request(
        server.operator.unwrap(),
        HERE,
        "POST",
        READYZ_PATH,
        &[],
        b"",
    )
    .await;
    assert_eq!(post.status, 405);
    assert_eq!(operator_get(&server, "/other").await.status, 404);
    // Its stderr is one JSON object per line, with time, level, event and package, and
    // no line holds the provider's token.
    let lines = server.lines.lock().unwrap().clone();
    assert!(lines.len() >= 4, "{lines:?}");
    for line in &lines {
        let object: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        for key in ["time", "level", "event", "package", "message"] {
            assert!(object.get(key).is_some(), "{key} in {line}");
        }
        assert!(!line.contains(TOKEN), "{line}");
    }
    assert!(
        lines.iter().any(|l| l.contains("\"event\":\"not_ready\"")),
        "{lines:?}"
    );
}

/// The official SDK sends a `traceparent` in its call's `_meta`: the call's audit record
/// carries it. A call whose `traceparent` header is malformed is served all the same,
/// its record carries none, and the malformed one is counted.
#[tokio::test]
async fn a_traceparent_from_the_sdk_reaches_the_audit_record() {
    const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let s = Setup::new().await;
    let audit = s.dir.path().join("audit.jsonl");
    let env = s.env(&audit, None);
    let server = s.start(&env);
    let token = s.session(&server);
    let mut step = tool_call(
        "traced",
        CLINIC,
        args("traced", test_support::TIDB_CPU.expr),
    );
    step["meta"] = json!({"traceparent": TRACEPARENT});
    let plan = json!({"sessions": [http_session("traced", &server.url(),
        session_headers(&token), "2025-11-25", vec![step])]});
    let output = blocking(move || run_client(&plan)).await;
    let result = step_result(&session_of(&output, "traced")["steps"][0]);
    assert_eq!(result.details().status, evidence_result::Status::Ok);
    let id = raw::open_session(server.addr, HERE).await;
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": CLINIC, "arguments": args("untraced", test_support::TIDB_CPU.expr)}});
    let mut headers = raw::mcp_headers(Some(&id), Some(token.expose()));
    headers.push(("traceparent", "00-not-a-trace-01"));
    let reply = raw::request(
        server.addr,
        HERE,
        "POST",
        "/mcp",
        &headers,
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let records: Vec<Value> = audit_records(&audit)
        .into_iter()
        .filter(|r| r.get("record").is_none())
        .collect();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["query_ids"], json!(["traced"]));
    assert_eq!(records[0]["traceparent"], TRACEPARENT);
    assert_eq!(records[1]["query_ids"], json!(["untraced"]));
    assert!(records[1].get("traceparent").is_none(), "{}", records[1]);
    let metrics = operator_get(&server, METRICS_PATH).await.body;
    assert!(
        metrics.contains(
            "evidence_traceparent_malformed_total{package=\"managed_auto_oncall_clinic\"} 1"
        ),
        "{metrics}"
    );
}

/// Log rotation as logrotate does it (rename, then SIGHUP out of habit): the server
/// answers the signal with a log line and keeps serving, the record of the call made
/// before is in the renamed file, and the next call's record starts the new file, since
/// the log is opened for each record.
#[tokio::test]
async fn a_rotated_audit_log_is_followed_and_sighup_ends_nothing() {
    let s = Setup::new().await;
    let audit = s.dir.path().join("audit.jsonl");
    let server = s.start(&s.env(&audit, None));
    let token = s.session(&server);
    let expr = test_support::TIDB_CPU.expr;
    let before = call(server.addr, Some(token.expose()), "before_rotation", expr).await;
    assert_eq!(before.status, 200, "{before:?}");
    let rotated = s.dir.path().join("audit.jsonl.1");
    std::fs::rename(&audit, &rotated).unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !server
        .lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("\"event\":\"hangup\""))
    {
        assert!(Instant::now() < deadline, "no hangup line");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(operator_get(&server, HEALTHZ_PATH).await.status, 200);
    let after = call(server.addr, Some(token.expose()), "after_rotation", expr).await;
    assert_eq!(after.status, 200, "{after:?}");
    let query_ids = |path: &std::path::Path| -> Vec<String> {
        audit_records(path)
            .iter()
            .filter_map(|r| {
                r["query_ids"][0]
                    .as_str()
                    .or(r["query_id"].as_str())
                    .map(str::to_owned)
            })
            .collect()
    };
    assert_eq!(query_ids(&rotated), ["before_rotation"]);
    assert_eq!(query_ids(&audit), ["after_rotation"]);
}
