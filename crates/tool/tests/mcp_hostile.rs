//! One server, many sessions, under hostile load: the packaged Clinic server over
//! Streamable HTTP against real Prometheus behind the Clinic front, driven by a client
//! that speaks raw HTTP from chosen loopback addresses (as anything in the agent's
//! sandbox or on the network can) and by the official Python SDK.
//!
//! - A flood of unauthenticated `initialize` (some with large parameters) keeps the
//!   server's memory bounded: sessions beyond their bounds are refused at once, `503`
//!   with `Retry-After` and a request record each, and another peer's calls are served
//!   meanwhile.
//! - Thousands of idle connections, and event streams beyond their bounds, are refused
//!   the same way; the calls of another peer keep their audit records and the runtime's
//!   deliveries arrive on the operator listener.
//! - Call slots are shared fairly: a session that arrives while another holds every slot
//!   runs at the next slot that comes free, and a call without a valid session is
//!   answered without waiting for one.
//! - A resumed stream presents its session's token; every request the HTTP layer or the
//!   MCP service refuses leaves its record.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use evidence_policy::SessionToken;
use evidence_result::Status;
use evidence_test_support as test_support;
use evidence_tool::mcp::{
    HTTP_REQUEST_RECORD, MAX_CONNECTIONS_FLAG, MAX_CONNECTIONS_PER_PEER_FLAG, MAX_HEAD_BYTES,
    MAX_INITIALIZE_BYTES, MAX_STREAMS_PER_SESSION_FLAG, MCP_HTTP_FLAG, OPERATOR_FLAG,
    RETRY_AFTER_SECS, ServerLimits, TLS_CERT_FLAG, TLS_KEY_FLAG,
};
use serde_json::{Value, json};
use support::raw::{self, Reply};
use support::*;
use tokio::io::AsyncWriteExt as _;

const TOKEN: &str = "mcp-hostile-clinic-token-0001";
const CLINIC: &str = "managed_auto_oncall_clinic";

/// The attacker's loopback address and the legitimate agent's.
const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const AGENT: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

fn args(query_id: &str) -> Value {
    json!({"queries": [{"queryId": query_id, "expr": test_support::TIDB_CPU.expr,
                        "step": "15s", "unit": "cores"}]})
}

/// Prometheus behind the Clinic front (with `delay` before each answer) and a deployed
/// Clinic package whose manifest `edit` changed.
struct Setup {
    provider: ClinicProvider,
    dir: tempfile::TempDir,
    clinic: PathBuf,
    env: Vec<(&'static str, String)>,
}

impl Setup {
    async fn new(delay: Duration, edit: impl FnOnce(&mut Value)) -> Setup {
        let provider = ClinicProvider::start(TOKEN).await;
        let front = &provider.front;
        front.faults().set_delay(delay);
        let dir = tempfile::tempdir().unwrap();
        let (clinic, _) = deploy_edited(dir.path(), CLINIC, "v3", CLINIC_TOOL, edit);
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
            provider,
            dir,
            clinic,
            env,
        }
    }

    /// A server with `more` flags after its two loopback listeners.
    fn start(&self, more: &[&str]) -> HttpServer {
        let listeners = [MCP_HTTP_FLAG, "127.0.0.1:0", OPERATOR_FLAG, "127.0.0.1:0"];
        HttpServer::start_with(
            &entrypoint(&self.clinic),
            &[&listeners[..], more].concat(),
            &self.env,
        )
    }

    /// A new session: its token, with its own policy (`policy_id`) delivered to `server`.
    fn session(&self, server: &HttpServer, policy_id: &str) -> SessionToken {
        let token = SessionToken::mint();
        let policy = session_policy_of(
            "clinic",
            CLINIC,
            &token,
            json!({"policy_id": policy_id, "limits": {"max_points_per_series": 11000,
                   "min_step": 15, "max_batch": 4, "max_series_kept": 5,
                   "max_calls_per_turn": 50}}),
        );
        let (status, answer) = server.deliver(&sign_session(&self.clinic, &policy), None);
        assert_eq!(status, 200, "{answer}");
        token
    }

    fn records(&self) -> Vec<Value> {
        audit_records(&self.dir.path().join("audit.jsonl"))
    }

    fn call_records(&self) -> Vec<Value> {
        self.records()
            .into_iter()
            .filter(|r| r.get("record").is_none())
            .collect()
    }

    /// The request records refused with `code`.
    fn refused(&self, code: &str) -> Vec<Value> {
        self.records()
            .into_iter()
            .filter(|r| r["record"] == HTTP_REQUEST_RECORD && r["refused"] == code)
            .collect()
    }

    /// The request records refused with `code`, once there are `n` (a refusal's answer
    /// may reach the client before its record is appended), or after 5 s.
    fn refused_eventually(&self, code: &str, n: usize) -> usize {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let found = self.refused(code).len();
            if found >= n || Instant::now() > until {
                return found;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The `details` of a call's answer on the wire (the text of its one content block).
fn details_of(reply: &Reply) -> Value {
    assert_eq!(reply.status, 200, "{reply:?}");
    let message = reply.message();
    let text = message["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no result in {message}"));
    serde_json::from_str(text).unwrap()
}

/// The status of a call's result.
fn call_status(reply: &Reply) -> Status {
    serde_json::from_value(details_of(reply)["status"].clone()).unwrap()
}

/// One whole legitimate call from the agent's address (its own protocol session).
async fn agent_call(server: SocketAddr, token: &SessionToken, query_id: &str) -> (Reply, Duration) {
    let id = raw::open_session(server, AGENT).await;
    let started = Instant::now();
    let reply = raw::call_tool(
        server,
        AGENT,
        &id,
        Some(token.expose()),
        CLINIC,
        args(query_id),
    )
    .await;
    (reply, started.elapsed())
}

fn assert_busy(reply: &Reply, code: &str) {
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_eq!(
        reply.header("retry-after"),
        Some(RETRY_AFTER_SECS.to_string().as_str()),
        "{reply:?}"
    );
    assert_eq!(reply.body.trim(), code, "{reply:?}");
}

/// 20,000 unauthenticated `initialize` from one address, one in ten with 15 KiB of
/// experimental capabilities (under the bound) and one in a hundred with 200 KB (over
/// it): the peer gets its 32 sessions, every other `initialize` is refused at once (`503`
/// with `Retry-After`, `peer_sessions_full`; `413` `initialize_too_large`), each with its
/// request record, and the server's resident memory grows by at most 64 MiB. The agent,
/// from another address, is served all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_unauthenticated_initialize_leaves_memory_bounded() {
    let s = Setup::new(Duration::ZERO, |_| {}).await;
    let server = s.start(&[]);
    let token = s.session(&server, "pol-flood");
    let (reply, _) = agent_call(server.addr, &token, "warm").await;
    assert_eq!(call_status(&reply), Status::Ok);
    let pid = server.child.id();
    let idle = raw::rss_kib(pid);

    let flood = |worker: usize| {
        let addr = server.addr;
        async move {
            let mut statuses = Vec::new();
            for n in 0..2_500 {
                let padding = match n % 100 {
                    0 => 200_000,
                    k if k % 10 == 5 => 15 * 1024 - 300,
                    _ => 0,
                };
                let body = raw::initialize_body(padding);
                let reply = raw::request(
                    addr,
                    ATTACKER,
                    "POST",
                    "/mcp",
                    &raw::mcp_headers(None, None),
                    &body,
                )
                .await;
                statuses.push((worker, padding, reply));
            }
            statuses
        }
    };
    let floods: Vec<_> = (0..8).map(|w| tokio::spawn(flood(w))).collect();
    // The agent is served during the flood.
    let mut during = Vec::new();
    for n in 0..5 {
        let (reply, _) = agent_call(server.addr, &token, &format!("during_{n}")).await;
        during.push(call_status(&reply));
    }
    let mut replies = Vec::new();
    for flood in floods {
        replies.extend(flood.await.unwrap());
    }
    assert_eq!(during, [Status::Ok; 5]);
    assert_eq!(replies.len(), 20_000);
    let mut accepted = 0;
    let mut refused = 0;
    for (_, padding, reply) in &replies {
        if *padding > MAX_INITIALIZE_BYTES {
            assert_eq!(reply.status, 413, "{reply:?}");
            assert_eq!(reply.body.trim(), "initialize_too_large");
        } else if reply.status == 200 {
            accepted += 1;
        } else {
            assert_busy(reply, "peer_sessions_full");
            refused += 1;
        }
    }
    let per_peer = ServerLimits::default().max_sessions_per_peer;
    assert_eq!(accepted, per_peer, "sessions kept for the flooding peer");
    let grown = raw::rss_kib(pid).saturating_sub(idle);
    assert!(
        grown <= 64 * 1024,
        "the server grew by {grown} KiB over 20,000 initialize"
    );
    assert_eq!(s.refused_eventually("peer_sessions_full", refused), refused);
    assert_eq!(s.refused_eventually("initialize_too_large", 200), 200);
    // Every accepted initialize left its record too.
    let initialized = s
        .records()
        .iter()
        .filter(|r| r["mcp_method"] == "initialize" && r["status"] == 200)
        .count();
    assert_eq!(initialized, per_peer + 6, "{initialized}");
}

/// 5,000 idle connections from one address take the agent's listener to its bounds:
/// beyond them each is answered `503` with `Retry-After` at once and leaves a request
/// record; the runtime's delivery still arrives on the operator listener, and once the
/// bound per peer holds the flood, the agent's calls from another address are served with
/// their audit records. One protocol session may hold only its bound of event streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_streams_beyond_their_bounds_are_refused_at_once() {
    raw::raise_open_files();
    let s = Setup::new(Duration::ZERO, |_| {}).await;
    let server = s.start(&[
        MAX_CONNECTIONS_FLAG,
        "300",
        MAX_CONNECTIONS_PER_PEER_FLAG,
        "250",
    ]);
    // All 5,000 first (the served ones wait for a head, 10 s at most), then each read
    // without waiting: an over-bound connection has its answer already.
    let opening = Instant::now();
    let mut streams = Vec::new();
    for _ in 0..50 {
        let batch = (0..100).map(|_| raw::connect(server.addr, ATTACKER));
        streams.extend(futures::future::join_all(batch).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (mut open, mut closed, mut refused) = (Vec::new(), 0, 0);
    for stream in streams {
        let mut answer = vec![0_u8; 512];
        match stream.try_read(&mut answer) {
            Ok(n) if n > 0 => {
                assert_busy(&raw::parse(&answer[..n]), "peer_connections_full");
                refused += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => open.push(stream),
            // Served, and closed by the head timeout (10 s) on a slow machine.
            Ok(_) => closed += 1,
            Err(e) => panic!("neither served nor answered: {e}"),
        }
    }
    // The peer holds at most its bound at once; every other connection was answered
    // 503 at once, each with its record. A served connection ends at the head timeout
    // (10 s) and frees its place, so within the time the 5,000 took, at most 250 more
    // were served for each 10 s passed.
    let rounds = 1 + usize::try_from(opening.elapsed().as_secs() / 10).unwrap();
    assert!(open.len() <= 250, "{} open", open.len());
    assert!(
        open.len() + closed <= 250 * rounds,
        "{refused} refused, {closed} closed, {} open in {:?}",
        open.len(),
        opening.elapsed()
    );
    assert_eq!(open.len() + closed + refused, 5_000);
    assert_eq!(
        s.refused_eventually("peer_connections_full", refused),
        refused
    );
    // The runtime's delivery is not delayed by the agent's port.
    let token = s.session(&server, "pol-idle");
    // The agent, from another address, is served; its call leaves its record.
    let (reply, _) = agent_call(server.addr, &token, "beside_the_flood").await;
    assert_eq!(call_status(&reply), Status::Ok);
    assert!(
        s.call_records()
            .iter()
            .any(|r| r["query_ids"] == json!(["beside_the_flood"]))
    );
    drop(open);

    // The listener's own bound, on a server of 20 connections: a third address fills
    // it, and the agent's next connection is refused.
    let small = s.start(&[
        MAX_CONNECTIONS_FLAG,
        "20",
        MAX_CONNECTIONS_PER_PEER_FLAG,
        "20",
    ]);
    let third = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
    let mut more = Vec::new();
    for _ in 0..20 {
        more.push(raw::connect(small.addr, third).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let reply = raw::request(small.addr, AGENT, "GET", "/mcp", &[], b"").await;
    assert_busy(&reply, "connections_full");
    assert_eq!(s.refused_eventually("connections_full", 1), 1);
    drop(more);

    // Event streams: the bound of one protocol session.
    let id = raw::open_session(server.addr, AGENT).await;
    let limit = ServerLimits::default().max_streams_per_session;
    let mut streams = Vec::new();
    for _ in 0..limit {
        let mut stream = raw::connect(server.addr, AGENT).await;
        let head = format!(
            "GET /mcp HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\
             Mcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n",
            server.addr
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        streams.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reply = raw::request(
        server.addr,
        AGENT,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &id),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        b"",
    )
    .await;
    assert_busy(&reply, "streams_full");
    drop(streams);
}

/// Session A keeps both call slots busy with six slow calls; session B's one call,
/// arriving after them, runs at the next slot that comes free (its wait is at most one
/// of A's calls), not after A's queue; every call answers ok with its record.
#[tokio::test]
async fn a_session_arriving_while_another_holds_every_slot_runs_at_the_next_free_slot() {
    const DELAY: Duration = Duration::from_millis(2_000);
    let s = Setup::new(DELAY, |m| {
        m["limits"]["concurrency"] = json!(2);
        m["limits"]["timeout_ms"] = json!(30_000);
    })
    .await;
    let server = s.start(&[]);
    let (a, b) = (s.session(&server, "pol-a"), s.session(&server, "pol-b"));
    let url = server.url();
    let session = |label: &str, token: &SessionToken, after_ms: u64| {
        let mut session = http_session(
            label,
            &url,
            session_headers(token),
            "2025-11-25",
            vec![tool_call(label, CLINIC, args(label))],
        );
        session["start_after_ms"] = json!(after_ms);
        session
    };
    let mut sessions: Vec<Value> = (0..6).map(|n| session(&format!("a{n}"), &a, 0)).collect();
    sessions.push(session("b", &b, 500));
    let plan = json!({"concurrent": true, "sessions": sessions});
    let output = blocking(move || run_client(&plan)).await;
    for n in 0..6 {
        let step = &session_of(&output, &format!("a{n}"))["steps"][0];
        assert_eq!(step_result(step).details().status, Status::Ok, "{step}");
    }
    let step = &session_of(&output, "b")["steps"][0];
    assert_eq!(step_result(step).details().status, Status::Ok, "{step}");
    let elapsed = Duration::from_millis(step["elapsed_ms"].as_u64().unwrap());
    // Served in arrival order, B would wait for two rounds of A's calls (about 5.5 s);
    // served in turn, it waits for the first of A's calls to end.
    assert!(
        elapsed < DELAY * 2 + Duration::from_millis(1_200),
        "session B waited behind session A's queue: {elapsed:?}"
    );
    assert_eq!(s.call_records().len(), 7);
}

/// With the one slot held by a slow call, calls without a session, with an unknown
/// session or with a malformed token are answered at once (`session_missing`,
/// `session_unknown`), each with its record, instead of waiting for the slot.
#[tokio::test]
async fn a_call_without_a_valid_session_is_answered_before_it_takes_a_slot() {
    let s = Setup::new(Duration::from_secs(4), |m| {
        m["limits"]["concurrency"] = json!(1);
    })
    .await;
    let server = s.start(&[]);
    let token = s.session(&server, "pol-holder");
    let addr = server.addr;
    let holder = tokio::spawn(async move { agent_call(addr, &token, "holder").await });
    while s.provider.front.arrived() == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let id = raw::open_session(server.addr, ATTACKER).await;
    let unknown = SessionToken::mint();
    for (presented, code) in [
        (None, "session_missing"),
        (Some("not a token"), "session_missing"),
        (Some(unknown.expose()), "session_unknown"),
    ] {
        let started = Instant::now();
        let reply = raw::call_tool(server.addr, ATTACKER, &id, presented, CLINIC, args("x")).await;
        let waited = started.elapsed();
        let details = details_of(&reply);
        assert_eq!(details["error"]["code"], code, "{details}");
        assert!(
            waited < Duration::from_secs(2),
            "{code} waited {waited:?} for the slot"
        );
    }
    let (reply, _) = holder.await.unwrap();
    assert_eq!(call_status(&reply), Status::Ok);
    assert_eq!(s.provider.front.arrived(), 1);
    assert_eq!(s.call_records().len(), 4);
}

/// The token a protocol session carries: once a call presented it, a request of that
/// session with another token is refused (`403`, `session_token_mismatch`), and a stream
/// resumed with `Last-Event-ID` must present it: without a token or with another one it
/// is refused, with it it is served.
#[tokio::test]
async fn resuming_a_stream_needs_the_sessions_token() {
    let s = Setup::new(Duration::ZERO, |_| {}).await;
    let server = s.start(&[]);
    let token = s.session(&server, "pol-resume");
    let other = s.session(&server, "pol-other");
    let id = raw::open_session(server.addr, AGENT).await;
    let reply = raw::call_tool(
        server.addr,
        AGENT,
        &id,
        Some(token.expose()),
        CLINIC,
        args("first"),
    )
    .await;
    assert_eq!(call_status(&reply), Status::Ok);
    let event = reply
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("id:"))
        .map(str::trim)
        .next_back()
        .unwrap_or("0")
        .to_owned();
    let reply = raw::call_tool(
        server.addr,
        AGENT,
        &id,
        Some(other.expose()),
        CLINIC,
        args("second"),
    )
    .await;
    assert_eq!(reply.status, 403, "{reply:?}");
    assert_eq!(reply.body.trim(), "session_token_mismatch");
    let resume = |presented: Option<&str>| {
        let (id, event) = (id.clone(), event.clone());
        let presented = presented.map(str::to_owned);
        let addr = server.addr;
        async move {
            let mut headers = vec![
                ("Accept", "text/event-stream"),
                ("Mcp-Session-Id", id.as_str()),
                ("MCP-Protocol-Version", "2025-11-25"),
                ("Last-Event-ID", event.as_str()),
            ];
            if let Some(token) = &presented {
                headers.push((evidence_tool::mcp::SESSION_HEADER, token.as_str()));
            }
            let mut stream = raw::connect(addr, ATTACKER).await;
            let mut head = format!("GET /mcp HTTP/1.1\r\nHost: {addr}\r\n");
            for (n, v) in &headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str("\r\n");
            stream.write_all(head.as_bytes()).await.unwrap();
            // What arrives within half a second (a served stream stays open).
            let mut raw_reply = Vec::new();
            let _open = tokio::time::timeout(
                Duration::from_millis(500),
                tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut raw_reply),
            )
            .await;
            raw::parse(&raw_reply)
        }
    };
    for presented in [None, Some(other.expose())] {
        let reply = resume(presented).await;
        assert_eq!(reply.status, 403, "{reply:?}");
        assert!(reply.body.contains("session_token_mismatch"), "{reply:?}");
    }
    let reply = resume(Some(token.expose())).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(s.refused_eventually("session_token_mismatch", 3), 3);
}

/// What the HTTP layer or the MCP service refuses before a call's handler leaves a
/// request record: a `tools/call` of an unknown tool and one whose `_meta` the MCP
/// service rejects, a head over the bound (431), a request line that is not HTTP (400),
/// a head not finished in time, a body not finished in time (408), an `initialize` over
/// its bound (413) and a TLS handshake that fails. Each is one record with its code.
#[tokio::test]
async fn every_request_the_transport_refuses_leaves_its_record() {
    let s = Setup::new(Duration::ZERO, |_| {}).await;
    let server = s.start(&[MAX_STREAMS_PER_SESSION_FLAG, "1"]);
    let token = s.session(&server, "pol-gaps");
    let id = raw::open_session(server.addr, AGENT).await;
    let before = s.records().len();
    let call = |params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params});
        let (id, token) = (id.clone(), token.expose().to_owned());
        let addr = server.addr;
        async move {
            raw::request(
                addr,
                AGENT,
                "POST",
                "/mcp",
                &raw::mcp_headers(Some(&id), Some(&token)),
                body.to_string().as_bytes(),
            )
            .await
        }
    };
    let unknown = call(json!({"name": "no_such_tool", "arguments": {}})).await;
    assert!(unknown.message()["error"].is_object(), "{unknown:?}");
    // rmcp refuses `params` it cannot read before any handler (415 here).
    let meta = call(json!({"name": CLINIC, "arguments": args("m"), "_meta": 5})).await;
    assert!(
        meta.status >= 400 || meta.message()["error"].is_object(),
        "{meta:?}"
    );
    assert_eq!(s.provider.front.arrived(), 0);
    let calls = s
        .records()
        .iter()
        .filter(|r| r["mcp_method"] == "tools/call")
        .count();
    assert_eq!(calls, 2, "a refused call left no record");

    let raw_bytes = |bytes: Vec<u8>, wait: Duration| {
        let addr = server.addr;
        async move {
            let mut stream = raw::connect(addr, ATTACKER).await;
            stream.write_all(&bytes).await.unwrap();
            tokio::time::sleep(wait).await;
            raw::read_reply(&mut stream).await
        }
    };
    let big_head = format!(
        "GET /mcp HTTP/1.1\r\nHost: {}\r\nX-Pad: {}\r\n\r\n",
        server.addr,
        "p".repeat(MAX_HEAD_BYTES + 1)
    );
    let slow_body = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{",
        server.addr
    );
    let (big, garbage, slow_head, slow) = tokio::join!(
        raw_bytes(big_head.into_bytes(), Duration::ZERO),
        raw_bytes(b"\x16\x03\x01 not http\r\n\r\n".to_vec(), Duration::ZERO),
        raw_bytes(b"POST /mcp HTTP/1.1\r\nHost: x".to_vec(), Duration::ZERO),
        raw_bytes(slow_body.into_bytes(), Duration::ZERO),
    );
    assert_eq!(big.status, 431, "{big:?}");
    assert_eq!(garbage.status, 400, "{garbage:?}");
    assert_eq!(slow_head.status, 0, "{slow_head:?}");
    assert_eq!(slow.status, 408, "{slow:?}");
    let init = raw::request(
        server.addr,
        AGENT,
        "POST",
        "/mcp",
        &raw::mcp_headers(None, None),
        &raw::initialize_body(MAX_INITIALIZE_BYTES),
    )
    .await;
    assert_eq!(init.status, 413, "{init:?}");

    // A TLS server: a handshake that fails.
    let (cert, key) = self_signed(s.dir.path());
    let tls = s.start(&[
        TLS_CERT_FLAG,
        cert.to_str().unwrap(),
        TLS_KEY_FLAG,
        key.to_str().unwrap(),
    ]);
    let mut stream = raw::connect(tls.addr, ATTACKER).await;
    stream
        .write_all(b"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let _closed = raw::read_reply(&mut stream).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    for code in [
        "head_too_large",
        "malformed_request",
        "head_timeout",
        "body_timeout",
        "initialize_too_large",
        "tls_handshake_failed",
    ] {
        // A record written as its connection closes may follow the client's read.
        let found = s.refused_eventually(code, 1);
        let since: Vec<Value> = s.records()[before..]
            .iter()
            .filter(|r| r["refused"] == code)
            .cloned()
            .collect();
        assert_eq!((found, since.len()), (1, 1), "{code}: {since:?}");
    }
}

/// A self-signed certificate for `127.0.0.1` in PEM files under `dir`.
fn self_signed(dir: &std::path::Path) -> (PathBuf, PathBuf) {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (cert, key)
}
