//! The tool binaries' MCP servers over Streamable HTTP (`--mcp-http ADDR`), from
//! deployable package folders made by `package-tool`: the official Python SDK's
//! Streamable HTTP client calls the Clinic server against real Prometheus behind the
//! Clinic front (one audit record per call, as over stdio); requests with a wrong `Host`
//! or `Origin` and an oversized body are refused before any MCP message is read, both
//! through the SDK and on the wire (status codes, nothing sent to the provider, no audit
//! record); a non-loopback address without TLS is refused at start; the call slots of
//! `limits.concurrency` are shared by every session, a call over them waiting within its
//! deadline; SIGTERM records a call still running as cancelled.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use evidence_policy::SessionToken;
use evidence_result::{Status, ToolResult};
use evidence_test_support as test_support;
use evidence_tool::mcp::{
    ALLOW_HOST_FLAG, ENVELOPES_PATH, HTTP_REQUEST_RECORD, MAX_REQUEST_BODY_BYTES, MCP_HTTP_FLAG,
    OPERATOR_FLAG, SESSION_HEADER, TLS_CERT_FLAG, TLS_KEY_FLAG,
};
use secrecy::SecretString;
use serde_json::{Value, json};
use support::*;

const TOKEN: &str = "mcp-http-clinic-token-0001";
const CLINIC: &str = "managed_auto_oncall_clinic";

fn args(query_id: &str) -> Value {
    json!({"queries": [{"queryId": query_id, "expr": test_support::TIDB_CPU.expr,
                        "step": "15s", "unit": "cores"}]})
}

fn call(label: &str, arguments: Value) -> Value {
    tool_call(label, CLINIC, arguments)
}

fn result_of(step: &Value) -> ToolResult {
    step_result(step)
}

/// Prometheus behind the Clinic front (with `delay` before each answer), a deployed
/// Clinic package, a session token and the envelope signed for that session.
struct Setup {
    _prometheus: test_support::Prometheus,
    front: test_support::ClinicFront,
    dir: tempfile::TempDir,
    clinic: std::path::PathBuf,
    env: Vec<(&'static str, String)>,
    token: SessionToken,
    envelope: String,
}

impl Setup {
    async fn new(delay: Duration) -> Setup {
        let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
            .await
            .unwrap();
        let front = test_support::ClinicFront::start(
            &prometheus.url(),
            SecretString::from(TOKEN.to_owned()),
        )
        .await
        .unwrap();
        front.faults().set_delay(delay);
        let dir = tempfile::tempdir().unwrap();
        let (clinic, _) = deploy(dir.path(), CLINIC, "v3", CLINIC_TOOL);
        let token = SessionToken::mint();
        let envelope = sign_session(&clinic, &session_policy(&token, json!({})));
        let signed = sign(
            dir.path(),
            "unused-envelope.json",
            &clinic,
            &policy("clinic", CLINIC, json!({})),
        );
        let env = http_env(&clinic_env(
            &signed,
            &dir.path().join("audit.jsonl"),
            front.base_url(),
            TOKEN,
        ));
        Setup {
            _prometheus: prometheus,
            front,
            dir,
            clinic,
            env,
            token,
            envelope,
        }
    }

    /// The call records written so far.
    fn audit(&self) -> Vec<Value> {
        call_records(&self.dir.path().join("audit.jsonl"))
    }

    /// The request records written so far.
    fn requests(&self) -> Vec<Value> {
        request_records(&self.dir.path().join("audit.jsonl"))
    }

    /// A server with the session's envelope delivered.
    fn start(&self) -> HttpServer {
        let server = HttpServer::start(&entrypoint(&self.clinic), &self.env);
        assert_eq!(server.deliver(&self.envelope, None).0, 200);
        server
    }

    /// The header of the session on every request.
    fn headers(&self) -> Value {
        session_headers(&self.token)
    }
}

/// The tests' Clinic policy signed for the session of `token`, with `extra` over it.
fn session_policy(token: &SessionToken, extra: Value) -> Value {
    session_policy_of("clinic", CLINIC, token, extra)
}

/// The call records of an audit log (request records left out).
fn call_records(audit: &Path) -> Vec<Value> {
    audit_records(audit)
        .into_iter()
        .filter(|r| r.get("record").is_none())
        .collect()
}

/// The request records of an audit log.
fn request_records(audit: &Path) -> Vec<Value> {
    audit_records(audit)
        .into_iter()
        .filter(|r| r["record"] == HTTP_REQUEST_RECORD)
        .collect()
}

/// The official SDK's Streamable HTTP client negotiates 2025-11-25 (a session with
/// `Mcp-Session-Id`) and 2026-07-28 (stateless), lists the one tool and calls it: each
/// call reaches real Prometheus through the Clinic front and answers compact evidence,
/// with exactly one audit record. The serving process holds only its own package's
/// variables, as over stdio. SIGTERM then ends the server, exit 0.
#[tokio::test]
async fn the_sdk_calls_clinic_over_streamable_http_with_one_audit_record_per_call() {
    let s = Setup::new(Duration::ZERO).await;
    // Started with another package's secret and a stray variable, it re-executes itself
    // with only its own (the same process, so the same pid, listens).
    let mut env = s.env.clone();
    env.push(("MANUS_PASSWORD", "another-package-secret-01".to_owned()));
    env.push(("UNRELATED_SETTING", "1".to_owned()));
    let server = HttpServer::start(&entrypoint(&s.clinic), &env);
    assert_eq!(server.deliver(&s.envelope, None).0, 200);
    let environ = std::fs::read(format!("/proc/{}/environ", server.child.id())).unwrap();
    let names: Vec<String> = environ
        .split(|b| *b == 0)
        .filter_map(|entry| entry.split(|b| *b == b'=').next())
        .map(|name| String::from_utf8_lossy(name).into_owned())
        .collect();
    assert!(names.iter().any(|n| n == "CLINIC_API_TOKEN"), "{names:?}");
    for foreign in ["MANUS_PASSWORD", "UNRELATED_SETTING"] {
        assert!(
            !names.iter().any(|n| n == foreign),
            "{foreign} kept: {names:?}"
        );
    }
    let url = server.url();
    let plan = json!({"sessions": [
        http_session("legacy", &url, s.headers(), "2025-11-25", vec![call("cpu", args("cpu_http"))]),
        http_session("modern", &url, s.headers(), "2026-07-28", vec![call("cpu", args("cpu_http_2"))]),
    ]});
    let output = blocking(move || run_client(&plan)).await;
    for (label, query_id) in [("legacy", "cpu_http"), ("modern", "cpu_http_2")] {
        let session = session_of(&output, label);
        assert_eq!(
            session["negotiated"],
            if label == "legacy" {
                "2025-11-25"
            } else {
                "2026-07-28"
            }
        );
        let tools = session["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 1, "{tools:?}");
        assert_eq!(tools[0]["name"], CLINIC);
        let result = result_of(&session["steps"][0]);
        assert_eq!(result.details().status, Status::Ok, "{}", result.text());
        let item = &serde_json::to_value(result.details()).unwrap()["items"][0];
        assert_eq!(item["query_id"], query_id, "{item}");
        assert!(
            item["evidence"]["series_count"].as_u64().unwrap() > 0,
            "{item}"
        );
    }
    assert_eq!(s.front.arrived(), 2, "one provider request per call");
    let records = s.audit();
    assert_eq!(records.len(), 2, "{records:?}");
    for (record, query_id) in records.iter().zip(["cpu_http", "cpu_http_2"]) {
        assert_eq!(record["query_ids"], json!([query_id]), "{record}");
        assert_eq!(record["status"], "ok", "{record}");
        assert_ne!(record["cancelled"], true, "{record}");
    }
    let status = blocking(move || server.terminate()).await;
    assert!(status.success(), "{status:?}");
}

/// One raw HTTP/1.1 request; returns the status code and the body.
fn raw_request(addr: SocketAddr, head: &str, body: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\n{head}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    // The server may answer (and close) before it has read a refused body.
    let _sent = stream.write_all(body);
    let mut answer = Vec::new();
    let _read = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {answer:?}"));
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (status, body)
}

fn initialize_body() -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "evidence-tool-tests", "version": "1"}}})
    .to_string()
    .into_bytes()
}

/// A `tools/call` whose body is over the bound: a batch query whose expression pads it.
fn oversized_call() -> Vec<u8> {
    let expr = format!("up{{job=\"{}\"}}", "x".repeat(MAX_REQUEST_BODY_BYTES));
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": CLINIC, "arguments": {"queries": [{"queryId": "big", "expr": expr}]}}})
    .to_string()
    .into_bytes()
}

/// DNS rebinding and body bounds: a wrong `Host` and a foreign `Origin` are answered 403
/// and an oversized body 413, on the wire and through the SDK (whose session fails at
/// its first request for a wrong header, whose oversized call fails as a request),
/// while the same request with the right headers is served; nothing of a refused
/// request reaches the provider, each request leaves one request record (its reason
/// code when refused), and the right-header SDK call after them still works.
#[tokio::test]
async fn a_wrong_host_or_origin_and_an_oversized_body_are_refused() {
    let s = Setup::new(Duration::ZERO).await;
    let server = s.start();
    let addr = server.addr;
    let host = format!("Host: {addr}\r\n");
    let (answered, refusals) = blocking(move || {
        let answered = raw_request(addr, &host, &initialize_body());
        let refusals = [
            raw_request(addr, "Host: evil.example\r\n", &initialize_body()),
            raw_request(
                addr,
                &format!("Host: evil.example:{}\r\n", addr.port()),
                &initialize_body(),
            ),
            raw_request(
                addr,
                &format!("{host}Origin: http://evil.example\r\n"),
                &initialize_body(),
            ),
            raw_request(
                addr,
                &format!("{host}Origin: http://127.0.0.1:1\r\n"),
                &initialize_body(),
            ),
            raw_request(addr, &host, &oversized_call()),
        ];
        (answered, refusals)
    })
    .await;
    assert_eq!(answered.0, 200, "{answered:?}");
    let expected = [403, 403, 403, 403, 413];
    for (refused, status) in refusals.iter().zip(expected) {
        assert_eq!(refused.0, status, "{refused:?}");
    }
    assert!(
        refusals[0].1.contains("host_not_allowed"),
        "{:?}",
        refusals[0]
    );
    assert!(
        refusals[2].1.contains("origin_not_allowed"),
        "{:?}",
        refusals[2]
    );
    // Each request on the wire, accepted or refused, left one request record.
    let wire: Vec<Value> = s
        .requests()
        .into_iter()
        .filter(|r| r["path"] == "/mcp")
        .collect();
    let seen: Vec<(u64, Option<&str>)> = wire
        .iter()
        .map(|r| (r["status"].as_u64().unwrap(), r["refused"].as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (200, None),
            (403, Some("host_not_allowed")),
            (403, Some("host_not_allowed")),
            (403, Some("origin_not_allowed")),
            (403, Some("origin_not_allowed")),
            (413, Some("body_too_large")),
        ],
        "{wire:?}"
    );
    assert_eq!(wire[0]["mcp_method"], "initialize");
    assert!(wire.iter().all(|r| r["package"] == CLINIC));

    let url = server.url();
    let refused = |label: &str, headers: Value, steps: Vec<Value>| {
        let mut session = http_session(label, &url, headers, "2025-11-25", steps);
        session["expect_refusal"] = json!(true);
        session
    };
    let big = format!("up{{job=\"{}\"}}", "x".repeat(MAX_REQUEST_BODY_BYTES));
    let plan = json!({"sessions": [
        refused("host", json!({"Host": "evil.example"}), vec![]),
        refused("origin", json!({"Origin": "https://evil.example"}), vec![]),
        http_session("body", &url, s.headers(), "2025-11-25",
                     vec![call("big", json!({"queries": [{"queryId": "big", "expr": big}]}))]),
        http_session("after", &url,
                     json!({"Origin": format!("http://{addr}"), SESSION_HEADER: s.token.expose()}),
                     "2025-11-25",
                     vec![call("cpu", args("cpu_after"))]),
    ]});
    let output = blocking(move || run_client(&plan)).await;
    // The SDK reports any HTTP error status of a request (but 404) as this one error;
    // the status codes are checked on the wire above.
    let http_error = "Server returned an error response";
    for label in ["host", "origin"] {
        let session = session_of(&output, label);
        let refused = session["refused"].as_str();
        assert!(
            refused.is_some_and(|r| r.contains(http_error)),
            "{label} was not refused: {session}"
        );
    }
    // The session is served; its oversized request is not (the SDK sees the 413 as the
    // request's error).
    let big = &session_of(&output, "body")["steps"][0];
    assert_eq!(big["protocol_error"]["message"], http_error, "{big}");
    let after = result_of(&session_of(&output, "after")["steps"][0]);
    assert_eq!(after.details().status, Status::Ok, "{}", after.text());
    assert_eq!(
        s.front.arrived(),
        1,
        "only the served call reached the provider"
    );
    let records = s.audit();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["query_ids"], json!(["cpu_after"]));
    // The SDK's refused requests left their records too, and the served call only its
    // call record.
    let requests = s.requests();
    // Two of each header refusal and one oversized body on the wire, then the SDK's.
    for (code, at_least) in [
        ("host_not_allowed", 3),
        ("origin_not_allowed", 3),
        ("body_too_large", 2),
    ] {
        let count = requests.iter().filter(|r| r["refused"] == code).count();
        assert!(count >= at_least, "{code}: {count} in {requests:?}");
    }
    assert!(
        !requests
            .iter()
            .any(|r| r["mcp_method"] == "tools/call" && r["status"] == 200),
        "{requests:?}"
    );
}

/// Plain HTTP on an address other machines can reach is refused at start, exit 1, with
/// the reason (not loopback, no TLS); a malformed address is a usage error (exit 2); a
/// server without a turn ledger, or with TLS files that do not serve, exits 1 before it
/// listens.
#[test]
fn a_non_loopback_address_without_tls_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy(dir.path(), CLINIC, "v3", CLINIC_TOOL);
    let env = ready_env(CLINIC);
    let bin = entrypoint(&clinic);
    let operator = [OPERATOR_FLAG, "127.0.0.1:0"];
    for addr in ["0.0.0.0:0", "[::]:0", "192.0.2.1:8931"] {
        let (code, stdout, stderr) = run(
            &bin,
            &[MCP_HTTP_FLAG, addr, operator[0], operator[1]],
            &env,
            "",
        );
        assert_eq!(code, 1, "{addr}: {stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        assert!(
            stderr.contains("not a loopback address") && stderr.contains("no TLS"),
            "{addr}: {stderr}"
        );
    }
    // The operator listener is no less bound to loopback without TLS.
    let (code, _, stderr) = run(
        &bin,
        &[MCP_HTTP_FLAG, "127.0.0.1:0", OPERATOR_FLAG, "0.0.0.0:0"],
        &env,
        "",
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("operator listener") && stderr.contains("not a loopback"),
        "{stderr}"
    );
    // Without a listener for the runtime's deliveries no session could be served.
    let (code, _, stderr) = run(&bin, &[MCP_HTTP_FLAG, "127.0.0.1:0"], &env, "");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("needs --operator"), "{stderr}");
    // An envelope file is refused over HTTP: each session's envelopes are delivered.
    let (code, _, stderr) = run(
        &bin,
        &[MCP_HTTP_FLAG, "127.0.0.1:0", operator[0], operator[1]],
        &env,
        "",
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("EVIDENCE_TRUSTED_CONTEXT is set") && stderr.contains("no envelope file"),
        "{stderr}"
    );
    let env = http_env(&env);
    let (code, _, stderr) = run(&bin, &[MCP_HTTP_FLAG, "localhost"], &env, "");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("usage:"), "{stderr}");
    // Without a turn ledger no call could be served: it does not listen.
    let no_ledger: Vec<_> = env
        .iter()
        .filter(|(name, _)| *name != "EVIDENCE_TURN_LEDGER")
        .cloned()
        .collect();
    let (code, _, stderr) = run(
        &bin,
        &[MCP_HTTP_FLAG, "127.0.0.1:0", operator[0], operator[1]],
        &no_ledger,
        "",
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("not started") && stderr.contains("EVIDENCE_TURN_LEDGER"),
        "{stderr}"
    );
    assert!(!stderr.contains("serving"), "{stderr}");
    // TLS files that do not serve stop it before it listens.
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, "not a certificate\n").unwrap();
    std::fs::write(&key, "not a key\n").unwrap();
    let tls = [
        MCP_HTTP_FLAG,
        "127.0.0.1:0",
        OPERATOR_FLAG,
        "127.0.0.1:0",
        TLS_CERT_FLAG,
        cert.to_str().unwrap(),
        TLS_KEY_FLAG,
        key.to_str().unwrap(),
    ];
    let (code, _, stderr) = run(&bin, &tls, &env, "");
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("TLS certificate chain") && stderr.contains("cert.pem"),
        "{stderr}"
    );
    assert!(!stderr.contains("serving"), "{stderr}");
}

/// A self-signed certificate (for `localhost` and `127.0.0.1`) in PEM files under `dir`.
fn self_signed(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .unwrap();
    let (cert, key) = (dir.join("server-cert.pem"), dir.join("server-key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// HTTPS with `--tls-cert` and `--tls-key`: the SDK, trusting only the server's
/// self-signed certificate, calls Clinic on loopback and, since TLS allows it, on a
/// server listening on every address (`0.0.0.0`, reached as `127.0.0.1`, the allowed
/// host given with `--allow-host`); a client that does not trust the certificate is
/// refused by its own TLS check. One audit record per call.
#[tokio::test]
async fn the_sdk_calls_clinic_over_https_with_a_self_signed_certificate() {
    let s = Setup::new(Duration::ZERO).await;
    let (cert, key) = self_signed(s.dir.path());
    let (cert_arg, key_arg) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let bin = entrypoint(&s.clinic);
    let tls = [TLS_CERT_FLAG, cert_arg, TLS_KEY_FLAG, key_arg];
    let local = HttpServer::start_with(
        &bin,
        &[
            &[MCP_HTTP_FLAG, "127.0.0.1:0", OPERATOR_FLAG, "127.0.0.1:0"][..],
            &tls,
        ]
        .concat(),
        &s.env,
    );
    // With TLS the operator listener may listen on every address too.
    let everywhere = HttpServer::start_with(
        &bin,
        &[
            &[MCP_HTTP_FLAG, "0.0.0.0:0", OPERATOR_FLAG, "0.0.0.0:0"][..],
            &tls,
            &[ALLOW_HOST_FLAG, "127.0.0.1"],
        ]
        .concat(),
        &s.env,
    );
    assert_eq!(local.scheme, "https");
    let everywhere_url = format!("https://127.0.0.1:{}/mcp", everywhere.addr.port());
    assert_eq!(local.deliver(&s.envelope, Some(&cert)).0, 200);
    let delivery = format!(
        "https://127.0.0.1:{}{ENVELOPES_PATH}",
        everywhere.operator.unwrap().port()
    );
    assert_eq!(deliver_to(&delivery, &s.envelope, Some(&cert)).0, 200);
    let trusting = |label: &str, url: &str| {
        let mut session = http_session(
            label,
            url,
            s.headers(),
            "2025-11-25",
            vec![call(label, args(label))],
        );
        session["ca_file"] = json!(cert_arg);
        session
    };
    let mut untrusting = http_session(
        "untrusting",
        &local.url(),
        json!(null),
        "2025-11-25",
        vec![],
    );
    untrusting["expect_refusal"] = json!(true);
    let plan = json!({"sessions": [
        trusting("loopback", &local.url()),
        trusting("everywhere", &everywhere_url),
        untrusting,
    ]});
    let output = blocking(move || run_client(&plan)).await;
    for label in ["loopback", "everywhere"] {
        let result = result_of(&session_of(&output, label)["steps"][0]);
        assert_eq!(
            result.details().status,
            Status::Ok,
            "{label}: {}",
            result.text()
        );
    }
    let refused = session_of(&output, "untrusting")["refused"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(refused.contains("CERTIFICATE_VERIFY_FAILED"), "{output}");
    assert_eq!(s.front.arrived(), 2);
    let records = s.audit();
    assert_eq!(records.len(), 2, "{records:?}");
}

/// SIGTERM while a call waits for a stalled provider: the call is recorded as
/// cancelled with its query id, and the server exits at once.
#[tokio::test]
async fn sigterm_records_a_running_http_call_as_cancelled() {
    let s = Setup::new(Duration::from_secs(30)).await;
    let server = s.start();
    // The SDK's one call, in the background; the server's exit ends its session.
    let url = server.url();
    let plan = json!({"sessions": [http_session("stalled", &url, s.headers(), "2025-11-25",
                                                vec![call("stalled", args("stalled"))])]});
    let client = std::thread::spawn(move || {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
        let mut child = Command::new(python())
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(plan.to_string().as_bytes())
            .unwrap();
        child
    });
    let front = &s.front;
    for _ in 0..200 {
        if front.arrived() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        front.arrived(),
        1,
        "the call did not reach the stalled provider"
    );
    let stopped = std::time::Instant::now();
    let status = blocking(move || server.terminate()).await;
    assert!(status.success(), "{status:?}");
    assert!(
        stopped.elapsed() < Duration::from_secs(3),
        "{:?}",
        stopped.elapsed()
    );
    let mut client = client.join().unwrap();
    let _killed = client.kill();
    let _reaped = client.wait();
    let records = s.audit();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["cancelled"], true, "{}", records[0]);
    assert_eq!(records[0]["query_ids"], json!(["stalled"]));
}

/// The code and the correction instruction of a one-query Clinic failure: the call's
/// own (a call cut off before its batch ran) or its one item's.
fn timeout_of(step: &Value) -> (String, String) {
    let result = result_of(step);
    let details = serde_json::to_value(result.details()).unwrap();
    let item = if details.get("error").is_some() {
        &details
    } else {
        &details["items"][0]
    };
    (
        item["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        item["correction"]["instruction"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// The call slots are the server's, not a session's: with `limits.concurrency` 1 and
/// `timeout_ms` 4 s against a provider that never answers, the call of a first session
/// holds the one slot, and the calls of two later sessions wait for it (two seconds
/// after the first call reached the provider, no other has), each answering within 4 s
/// of its request: `clinic_timeout`, "would not help" (never sent) or, when the slot
/// came free in time, sent and cut off ("may answer in time"), each with its record.
#[tokio::test]
async fn http_sessions_share_the_call_slots_and_a_call_over_them_waits_within_its_deadline() {
    const TIMEOUT_MS: u64 = 4_000;
    let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
        .await
        .unwrap();
    let front =
        test_support::ClinicFront::start(&prometheus.url(), SecretString::from(TOKEN.to_owned()))
            .await
            .unwrap();
    front.faults().set_delay(Duration::from_secs(3_600));
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy_edited(dir.path(), CLINIC, "v3", CLINIC_TOOL, |manifest| {
        manifest["limits"]["timeout_ms"] = json!(TIMEOUT_MS);
        manifest["limits"]["concurrency"] = json!(1);
    });
    let signed = sign(
        dir.path(),
        "envelope.json",
        &clinic,
        &policy("clinic", CLINIC, json!({})),
    );
    let audit = dir.path().join("audit.jsonl");
    let env = http_env(&clinic_env(&signed, &audit, front.base_url(), TOKEN));
    let server = HttpServer::start(&entrypoint(&clinic), &env);
    let token = SessionToken::mint();
    let envelope = sign_session(&clinic, &session_policy(&token, json!({})));
    assert_eq!(server.deliver(&envelope, None).0, 200);
    let url = server.url();
    let later = |label: &str| {
        let mut session = http_session(
            label,
            &url,
            session_headers(&token),
            "2025-11-25",
            vec![call(label, args(label))],
        );
        session["start_after_ms"] = json!(1_000);
        session
    };
    let plan = json!({"concurrent": true, "sessions": [
        http_session("first", &url, session_headers(&token), "2025-11-25",
                     vec![call("first", args("first"))]),
        later("second"),
        later("third"),
    ]});
    let client = tokio::task::spawn_blocking(move || run_client(&plan));
    let mut waited = Duration::ZERO;
    while front.arrived() == 0 && waited < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += Duration::from_millis(20);
    }
    assert_eq!(
        front.arrived(),
        1,
        "the first call did not reach the provider"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        front.arrived(),
        1,
        "a later session's call did not wait for the one slot"
    );
    let output = client.await.unwrap();
    let mut never_sent = 0;
    for label in ["first", "second", "third"] {
        let step = &session_of(&output, label)["steps"][0];
        let elapsed = step["elapsed_ms"].as_u64().unwrap();
        assert!(elapsed < TIMEOUT_MS, "{label} answered after {elapsed} ms");
        let (code, instruction) = timeout_of(step);
        assert_eq!(code, "clinic_timeout", "{label}: {step}");
        if instruction.contains("would not help") {
            never_sent += 1;
        } else {
            assert!(
                instruction.contains("may answer in time"),
                "{label}: {step}"
            );
        }
    }
    let received = front.arrived();
    assert!((1..=3).contains(&received), "{received}");
    assert_eq!(never_sent, 3 - received, "{output}");
    assert_eq!(call_records(&audit).len(), 3);
    drop(server);
}

/// The code of a whole-call failure.
fn failure_code(step: &Value) -> String {
    let result = result_of(step);
    assert_eq!(result.details().status, Status::Error, "{}", result.text());
    serde_json::to_value(result.details()).unwrap()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A call with no session header, with a token no envelope was delivered for, with a
/// malformed token, or with a session whose newest envelope has expired answers
/// `session_missing`, `session_unknown` or `session_expired` (class `authorization`),
/// nothing sent to the provider, one audit record each; `initialize` and `tools/list`
/// need no session. The token never appears in the audit log or the session store.
#[tokio::test]
async fn a_call_without_a_session_or_with_an_unknown_or_expired_one_sends_nothing() {
    let s = Setup::new(Duration::ZERO).await;
    let server = s.start();
    // A session whose policy expires 3 s from now.
    let short = SessionToken::mint();
    let expires = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3);
    let envelope = sign_session(
        &s.clinic,
        &session_policy(
            &short,
            json!({"policy_id": "pol-short-lived", "expires_at": expires.to_string()}),
        ),
    );
    assert_eq!(server.deliver(&envelope, None).0, 200);
    while jiff::Timestamp::now() <= expires {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let url = server.url();
    let unknown = SessionToken::mint();
    let plan = json!({"sessions": [
        http_session("none", &url, json!(null), "2025-11-25", vec![call("c", args("no_session"))]),
        http_session("unknown", &url, session_headers(&unknown), "2025-11-25",
                     vec![call("c", args("unknown_session"))]),
        http_session("malformed", &url, json!({SESSION_HEADER: "not-a-token"}), "2025-11-25",
                     vec![call("c", args("malformed_session"))]),
        http_session("expired", &url, session_headers(&short), "2025-11-25",
                     vec![call("c", args("expired_session"))]),
    ]});
    let output = blocking(move || run_client(&plan)).await;
    for (label, code) in [
        ("none", "session_missing"),
        ("unknown", "session_unknown"),
        ("malformed", "session_missing"),
        ("expired", "session_expired"),
    ] {
        let session = session_of(&output, label);
        assert_eq!(session["tools"].as_array().unwrap().len(), 1, "{session}");
        assert_eq!(failure_code(&session["steps"][0]), code, "{label}");
    }
    assert_eq!(s.front.arrived(), 0, "nothing reached the provider");
    let records = s.audit();
    assert_eq!(records.len(), 4, "{records:?}");
    for (record, code) in records.iter().zip([
        "session_missing",
        "session_unknown",
        "session_missing",
        "session_expired",
    ]) {
        assert_eq!(record["error_codes"], json!([code]), "{record}");
        assert_eq!(record["failure_class"], "authorization", "{record}");
    }
    let log = std::fs::read_to_string(s.dir.path().join("audit.jsonl")).unwrap();
    let store = std::process::Command::new("grep")
        .args(["-r", "-l", "-F", s.token.expose()])
        .arg(s.dir.path())
        .output()
        .unwrap();
    for token in [&s.token, &short, &unknown] {
        assert!(!log.contains(token.expose()));
    }
    assert!(
        store.stdout.is_empty(),
        "the token is in {:?}",
        store.stdout
    );
}

/// The runtime replaces a session's policy between passes without a restart: a call
/// runs under the newest envelope delivered for its session (a new `policy_id`, so a
/// new turn); an earlier envelope delivered again is refused (409) and never becomes
/// current; the same envelope again changes nothing. A second session runs under its
/// own policy only. Deliveries that do not verify here, that name no session or that
/// are not envelopes are refused, each with its request record.
#[tokio::test]
async fn a_replaced_policy_serves_the_next_calls_and_an_earlier_one_never_comes_back() {
    let s = Setup::new(Duration::ZERO).await;
    let server = HttpServer::start(&entrypoint(&s.clinic), &s.env);
    let now = jiff::Timestamp::now();
    let at = |secs: i64| (now - jiff::SignedDuration::from_secs(secs)).to_string();
    let first = sign_session(
        &s.clinic,
        &session_policy(
            &s.token,
            json!({"policy_id": "pol-pass-1", "issued_at": at(20)}),
        ),
    );
    let second = sign_session(
        &s.clinic,
        &session_policy(
            &s.token,
            json!({"policy_id": "pol-pass-2", "issued_at": at(10)}),
        ),
    );
    let other = SessionToken::mint();
    let others = sign_session(
        &s.clinic,
        &session_policy(&other, json!({"policy_id": "pol-other-session"})),
    );
    let url = server.url();
    let pass = |label: &str, token: &SessionToken| {
        let plan = json!({"sessions": [http_session(label, &url, session_headers(token),
                                                    "2025-11-25", vec![call("c", args(label))])]});
        blocking(move || run_client(&plan))
    };

    let (status, answer) = server.deliver(&first, None);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["delivered"], "stored");
    let out = pass("pass_one", &s.token).await;
    let result = result_of(&session_of(&out, "pass_one")["steps"][0]);
    assert_eq!(result.details().status, Status::Ok, "{}", result.text());

    let (status, answer) = server.deliver(&second, None);
    assert_eq!(
        (status, &answer["replaced"]),
        (200, &json!("pol-pass-1")),
        "{answer}"
    );
    let (status, answer) = server.deliver(&first, None);
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["current"], "pol-pass-2");
    let (status, answer) = server.deliver(&second, None);
    assert_eq!(
        (status, &answer["delivered"]),
        (200, &json!("unchanged")),
        "{answer}"
    );
    let out = pass("pass_two", &s.token).await;
    let result = result_of(&session_of(&out, "pass_two")["steps"][0]);
    assert_eq!(result.details().status, Status::Ok, "{}", result.text());

    assert_eq!(server.deliver(&others, None).0, 200);
    let out = pass("other", &other).await;
    let result = result_of(&session_of(&out, "other")["steps"][0]);
    assert_eq!(result.details().status, Status::Ok, "{}", result.text());

    let policies: Vec<Value> = s.audit().iter().map(|r| r["policy_id"].clone()).collect();
    assert_eq!(
        policies,
        [
            json!("pol-pass-1"),
            json!("pol-pass-2"),
            json!("pol-other-session")
        ]
    );

    // Refused deliveries: no session, another package's digest, a changed byte, not JSON.
    let no_session = sign_session(&s.clinic, &policy("clinic", CLINIC, json!({})));
    let foreign = sign_for_digest(
        &session_policy(&s.token, json!({"policy_id": "pol-foreign"})),
        &format!("sha256:{}", "ab".repeat(32)),
    );
    let mut changed = second.clone().into_bytes();
    let at = changed.len() / 2;
    changed[at] = if changed[at] == b'A' { b'B' } else { b'A' };
    let changed = String::from_utf8(changed).unwrap();
    for (envelope, status, error) in [
        (no_session.as_str(), 422, "no_session"),
        (foreign.as_str(), 403, "policy_verification_failed"),
        (changed.as_str(), 0, ""),
        ("{\"not\": \"an envelope\"}", 400, "malformed_envelope"),
    ] {
        let (got, answer) = server.deliver(envelope, None);
        if status == 0 {
            assert!(got == 400 || got == 403, "{got} {answer}");
        } else {
            assert_eq!(
                (got, answer["error"].as_str()),
                (status, Some(error)),
                "{answer}"
            );
        }
    }
    let out = pass("after_refusals", &s.token).await;
    let step = &session_of(&out, "after_refusals")["steps"][0];
    assert_eq!(result_of(step).details().status, Status::Ok);
    assert_eq!(s.audit().last().unwrap()["policy_id"], "pol-pass-2");
    let deliveries: Vec<(u64, Value)> = s
        .requests()
        .iter()
        .filter(|r| r["path"] == ENVELOPES_PATH)
        .map(|r| (r["status"].as_u64().unwrap(), r["policy_id"].clone()))
        .collect();
    assert_eq!(deliveries.len(), 9, "{deliveries:?}");
    assert_eq!(deliveries[0], (200, json!("pol-pass-1")));
    assert_eq!(deliveries[2], (409, json!("pol-pass-1")));
}
