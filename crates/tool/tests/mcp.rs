//! The tool binaries' MCP servers (`--mcp`) driven by a real MCP client, the official
//! Python SDK (`mcp` 2.3.0 in the venv `scripts/test.sh` makes), from deployable package
//! folders made by `package-tool`, against real Prometheus 2.42 behind the Clinic, Manus
//! and Grafana test fronts and real Chromium for Wetech.
//!
//! The client negotiates each of 2025-06-18, 2025-11-25 and 2026-07-28, lists the one
//! tool of each package and calls it with its own validation of results (the negotiated
//! revision's schema, and `structuredContent` against the tool's `outputSchema`). One
//! server process answers every call of its session: successes, rejections, a provider
//! failure, a missing envelope, an unknown tool and a blocked output, each followed by
//! calls that still work.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use evidence_result::{FailureClass, Status, ToolResult, mcp::McpCallToolResult};
use evidence_test_support as test_support;
use evidence_test_support::{
    Chromium, GRAFANA_SESSION_COOKIE_NAME, GRAFANA_SESSION_COOKIE_VALUE, GrafanaFront,
};
use proptest::prelude::*;
use secrecy::SecretString;
use serde_json::{Value, json};
use support::*;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A session of the plan: one server process of `package_dir`, negotiated at `version`.
fn session(
    label: &str,
    package_dir: &Path,
    env: &[(&'static str, String)],
    version: &str,
    steps: Vec<Value>,
) -> Value {
    let env: serde_json::Map<String, Value> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::String(v.clone())))
        .collect();
    json!({
        "label": label, "command": entrypoint(package_dir), "args": ["--mcp"],
        "env": env, "version": version, "steps": steps,
    })
}

fn step(label: &str, tool: &str, arguments: Value) -> Value {
    json!({"label": label, "tool": tool, "arguments": arguments})
}

/// The managed result a step's MCP result holds, read back with `ToolResult::from_mcp`
/// (which checks text == JSON of structuredContent and isError == failed).
fn result_of(step: &Value) -> ToolResult {
    assert!(
        step.get("protocol_error").is_none(),
        "{}: {step}",
        step["label"]
    );
    let mcp: McpCallToolResult = serde_json::from_value(json!({
        "content": step["content"], "structuredContent": step["structuredContent"],
        "isError": step["isError"],
    }))
    .unwrap();
    let result = ToolResult::from_mcp(&mcp).unwrap();
    assert_eq!(mcp.content.len(), 1, "{}", step["label"]);
    assert_eq!(mcp.content[0].as_text(), Some(result.text()));
    assert_eq!(step["isError"], result.is_failed());
    result
}

fn failure_of(result: &ToolResult) -> (String, FailureClass) {
    let error = result
        .details()
        .error
        .as_ref()
        .or_else(|| {
            result
                .details()
                .items
                .iter()
                .find_map(|item| item.error.as_ref())
        })
        .unwrap_or_else(|| panic!("no failure in {}", result.text()));
    (error.code.as_str().to_owned(), error.class)
}

fn steps_of<'a>(output: &'a Value, label: &str) -> &'a Value {
    let session = output["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == label)
        .unwrap_or_else(|| panic!("no session {label}"));
    &session["steps"]
}

fn step_of<'a>(output: &'a Value, session: &str, label: &str) -> &'a Value {
    steps_of(output, session)
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == label)
        .unwrap_or_else(|| panic!("no step {session}/{label}"))
}

/// The committed output schema of every tool.
fn committed_details_schema() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(workspace().join("schemas/tool-details.schema.json")).unwrap(),
    )
    .unwrap()
}

/// Every session listed exactly its package's tool, described from the deployed
/// manifest, with the committed details schema as output schema.
fn assert_listing(output: &Value, label: &str, package_dir: &Path) {
    let session = output["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == label)
        .unwrap();
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(package_dir.join("manifest.json")).unwrap())
            .unwrap();
    let tools = session["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{label}: {tools:?}");
    let tool = &tools[0];
    assert_eq!(tool["name"], manifest["identity"]);
    assert_eq!(tool["description"], manifest["arguments"]["description"]);
    assert_eq!(tool["inputSchema"], manifest["arguments"]);
    assert_eq!(tool["outputSchema"], committed_details_schema());
    assert_eq!(tool["annotations"]["readOnlyHint"], true);
}

fn tidb_cpu_clinic(query_id: &str) -> Value {
    json!({"queries": [{"queryId": query_id, "expr": test_support::TIDB_CPU.expr,
                        "step": "15s", "unit": "cores"}]})
}

fn wetech_storage_state(grafana: &GrafanaFront) -> String {
    json!({
        "cookies": [{"name": GRAFANA_SESSION_COOKIE_NAME, "value": GRAFANA_SESSION_COOKIE_VALUE,
                     "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": true,
                     "secure": false, "sameSite": "Lax"}],
        "origins": [{"origin": grafana.base_url(), "localStorage": [
            {"name": "grafana.auth", "value": "{\"token\":\"ls-token-5d1e2f3a4b5c6d7e\"}"}]}]
    })
    .to_string()
}

#[tokio::test]
async fn the_python_sdk_lists_and_calls_each_package_server_over_three_protocol_versions() {
    let slot = test_support::BrowserSlot::acquire().await;
    let main = test_support::Prometheus::start(test_support::Fixture::Main)
        .await
        .unwrap();
    let vida = test_support::Prometheus::start(test_support::Fixture::Vida)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();

    // Clinic: its API token is the value planted in the `session_id` label of the
    // session canary series, so answering that series would show the secret.
    let clinic_token = GRAFANA_SESSION_COOKIE_VALUE;
    let clinic_front =
        test_support::ClinicFront::start(&main.url(), SecretString::from(clinic_token.to_owned()))
            .await
            .unwrap();
    let clinic_dir = dir.path().join("clinic");
    std::fs::create_dir_all(&clinic_dir).unwrap();
    let (clinic, _) = deploy(&clinic_dir, "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let clinic_signed = sign(
        &clinic_dir,
        "envelope.json",
        &clinic,
        &policy("clinic", "managed_auto_oncall_clinic", json!({})),
    );
    let clinic_audit = clinic_dir.join("audit.jsonl");
    let clinic_env = clinic_env(
        &clinic_signed,
        &clinic_audit,
        clinic_front.base_url(),
        clinic_token,
    );

    // Manus on the vida target.
    let (user, password) = ("mcp-reader", "mcp-password-0001");
    let manus_front = test_support::ManusFront::start(
        "vida",
        &vida.url(),
        SecretString::from(user.to_owned()),
        SecretString::from(password.to_owned()),
    )
    .await
    .unwrap();
    let manus_dir = dir.path().join("manus");
    std::fs::create_dir_all(&manus_dir).unwrap();
    let (manus, _) = deploy(&manus_dir, "managed_auto_oncall_manus", "v2", MANUS_TOOL);
    let manus_signed = sign(
        &manus_dir,
        "envelope.json",
        &manus,
        &policy(
            "manus",
            "managed_auto_oncall_manus",
            json!({"manus_target": "vida"}),
        ),
    );
    let manus_audit = manus_dir.join("audit.jsonl");
    let mut manus_env = runtime_env(&manus_signed, &manus_audit);
    manus_env.push(("MANUS_VIDA_URL", manus_front.base_url()));
    manus_env.push(("MANUS_USERNAME", user.to_owned()));
    manus_env.push(("MANUS_PASSWORD", password.to_owned()));
    manus_env.push((
        "MANUS_REF_KEYS",
        format!(
            "k1:{}",
            base64::engine::general_purpose::STANDARD.encode([7u8; 32])
        ),
    ));

    // Wetech through the Grafana front, real Chromium and ChromeDriver.
    let grafana = GrafanaFront::start(&main.url()).await.unwrap();
    let wetech_dir = dir.path().join("wetech");
    std::fs::create_dir_all(&wetech_dir).unwrap();
    let (wetech, _) = deploy(&wetech_dir, "managed_auto_oncall_wetech", "v2", WETECH_TOOL);
    let wetech_signed = sign(
        &wetech_dir,
        "envelope.json",
        &wetech,
        &policy(
            "wetech",
            "managed_auto_oncall_wetech",
            json!({"wetech_query_ids": ["tidb_cpu", "session_canary"],
                   "wetech_datasource": GrafanaFront::DATASOURCE_UID, "limits": limits(1)}),
        ),
    );
    let wetech_audit = wetech_dir.join("audit.jsonl");
    let mut wetech_env = runtime_env(&wetech_signed, &wetech_audit);
    wetech_env.push(("WETECH_GRAFANA_URL", grafana.base_url()));
    wetech_env.push(("WETECH_STORAGE_STATE", wetech_storage_state(&grafana)));
    wetech_env.push((
        "WETECH_CHROMIUM",
        Chromium::find().unwrap().path().display().to_string(),
    ));
    let chromedriver = test_support::chromedriver_program().unwrap_or_else(|e| panic!("{e}"));
    wetech_env.push(("WETECH_CHROMEDRIVER", chromedriver.display().to_string()));

    let clinic_tool = "managed_auto_oncall_clinic";
    let manus_tool = "managed_auto_oncall_manus";
    let wetech_tool = "managed_auto_oncall_wetech";
    let envelope = clinic_signed.envelope.display().to_string();
    let moved = format!("{envelope}.moved");
    let mut missing = step("envelope_missing", clinic_tool, tidb_cpu_clinic("tidb_cpu"));
    missing["rename_before"] = json!([envelope, moved]);
    let mut restored = step(
        "envelope_restored",
        clinic_tool,
        tidb_cpu_clinic("tidb_cpu_restored"),
    );
    restored["rename_before"] = json!([moved, envelope]);
    // The blocked output is a shared failure: it stops its turn. The runtime's next
    // envelope (a new `policy_id`) starts a new turn, and the server serves it.
    let next = sign(
        &clinic_dir,
        "envelope-next.json",
        &clinic,
        &policy(
            "clinic",
            "managed_auto_oncall_clinic",
            json!({"policy_id": "pol-after-blocked"}),
        ),
    );
    let mut after_blocked = step(
        "after_blocked",
        clinic_tool,
        tidb_cpu_clinic("tidb_cpu_after"),
    );
    after_blocked["rename_before"] = json!([next.envelope.display().to_string(), envelope]);
    // Each session is a turn of its own (its own ledger), asking each question once.
    let own_turn = |env: &[(&'static str, String)]| {
        let mut env = env.to_vec();
        env.retain(|(k, _)| *k != "EVIDENCE_TURN_LEDGER");
        env.push((
            "EVIDENCE_TURN_LEDGER",
            new_ledger(&clinic_dir).display().to_string(),
        ));
        env
    };
    let plan = json!({"sessions": [
        session("clinic_2025_06_18", &clinic, &own_turn(&clinic_env), "2025-06-18", vec![
            step("ok", clinic_tool, tidb_cpu_clinic("tidb_cpu")),
            step("provider_argument", clinic_tool, json!({
                "queries": [{"queryId": "tidb_cpu_provider", "expr": "up"}], "provider": "manus"})),
            step("other_cluster", clinic_tool, json!({"queries": [{"queryId": "other",
                "expr": "process_cpu_seconds_total{cluster_id=\"SaaS99\"}", "step": "15s"}]})),
            step("unknown_tool", "managed_auto_oncall_other", json!({})),
            step("provider_failure", clinic_tool, json!({"queries": [{"queryId": "m2m",
                "expr": test_support::TIDB_MANY_TO_MANY.expr, "step": "15s"}]})),
            missing,
            restored,
            step("blocked", clinic_tool, json!({"queries": [{"queryId": "session_canary",
                "expr": test_support::SESSION_CANARY.expr, "step": "15s", "unit": "sessions"}]})),
            after_blocked,
        ]),
        session("clinic_2025_11_25", &clinic, &own_turn(&clinic_env), "2025-11-25", vec![
            step("ok", clinic_tool, tidb_cpu_clinic("tidb_cpu")),
        ]),
        session("clinic_2026_07_28", &clinic, &own_turn(&clinic_env), "2026-07-28", vec![
            step("ok", clinic_tool, tidb_cpu_clinic("tidb_cpu")),
            step("provider_argument", clinic_tool, json!({
                "queries": [{"queryId": "tidb_cpu_provider", "expr": "up"}], "provider": "manus"})),
        ]),
        session("manus_2026_07_28", &manus, &manus_env, "2026-07-28", vec![
            step("ok", manus_tool, json!({"queryId": "vida_cpu",
                "expr": test_support::TIDB_CPU.expr, "step": "15s"})),
            step("provider_argument", manus_tool, json!({"queryId": "vida_cpu_provider",
                "expr": "up", "provider": "clinic"})),
        ]),
        session("wetech_2025_11_25", &wetech, &wetech_env, "2025-11-25", vec![
            step("ok", wetech_tool, json!({"queryId": "tidb_cpu",
                "expr": test_support::TIDB_CPU.expr, "unit": "cores"})),
            step("blocked", wetech_tool, json!({"queryId": "session_canary",
                "expr": test_support::SESSION_CANARY.expr, "unit": "sessions"})),
        ]),
    ]});
    let output = blocking(move || run_client(&plan)).await;
    drop(slot);

    // Each version negotiated as asked; 2026-07-28 results carry `resultType`.
    for (label, version) in [
        ("clinic_2025_06_18", "2025-06-18"),
        ("clinic_2025_11_25", "2025-11-25"),
        ("clinic_2026_07_28", "2026-07-28"),
        ("manus_2026_07_28", "2026-07-28"),
        ("wetech_2025_11_25", "2025-11-25"),
    ] {
        let session = output["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["label"] == label)
            .unwrap();
        assert_eq!(session["negotiated"], version, "{label}");
        if version == "2026-07-28" {
            for step in steps_of(&output, label).as_array().unwrap() {
                assert_eq!(step["resultType"], "complete", "{label}: {step}");
            }
        }
    }
    for label in [
        "clinic_2025_06_18",
        "clinic_2025_11_25",
        "clinic_2026_07_28",
    ] {
        assert_listing(&output, label, &clinic);
    }
    assert_listing(&output, "manus_2026_07_28", &manus);
    assert_listing(&output, "wetech_2025_11_25", &wetech);

    // Successes: the compact evidence of real Prometheus, structuredContent = details.
    for session in [
        "clinic_2025_06_18",
        "clinic_2025_11_25",
        "clinic_2026_07_28",
    ] {
        let result = result_of(step_of(&output, session, "ok"));
        let item = &result.details().items[0];
        let evidence = item
            .evidence
            .as_ref()
            .unwrap_or_else(|| panic!("{}", result.text()));
        assert_eq!(evidence.series_count, 56, "{session}");
        assert!((evidence.top_peak().unwrap() - 22.84).abs() < test_support::FIGURE_TOLERANCE);
    }
    let s = "clinic_2025_06_18";
    for label in ["envelope_restored", "after_blocked"] {
        let result = result_of(step_of(&output, s, label));
        assert_eq!(
            result.details().status,
            Status::Ok,
            "{label}: {}",
            result.text()
        );
    }

    // Rejections are results, answered before anything is sent.
    for session in ["clinic_2025_06_18", "clinic_2026_07_28"] {
        let result = result_of(step_of(&output, session, "provider_argument"));
        assert_eq!(
            failure_of(&result).1,
            FailureClass::PolicyViolation,
            "{}",
            result.text()
        );
    }
    let other = result_of(step_of(&output, s, "other_cluster"));
    assert!(other.is_failed(), "{}", other.text());
    assert_eq!(
        failure_of(&other).1,
        FailureClass::PolicyViolation,
        "{}",
        other.text()
    );
    let manus_rejected = result_of(step_of(&output, "manus_2026_07_28", "provider_argument"));
    assert_eq!(failure_of(&manus_rejected).1, FailureClass::PolicyViolation);
    let clinic_sent: Vec<_> = clinic_front.requests();
    assert!(
        clinic_sent.iter().all(|r| !r.path.contains("SaaS99")
            && r.param("query")
                .is_none_or(|q| !q.contains("SaaS99") && q != "up")),
        "a rejected request reached the front: {clinic_sent:?}"
    );

    // A provider failure is a result; so is a missing envelope (read per call).
    let failed = result_of(step_of(&output, s, "provider_failure"));
    assert!(failed.is_failed(), "{}", failed.text());
    let missing = result_of(step_of(&output, s, "envelope_missing"));
    assert_eq!(
        failure_of(&missing),
        (
            "runtime_context_missing".to_owned(),
            FailureClass::Authorization
        )
    );

    // An unknown tool is a protocol error, and the session goes on.
    let unknown = step_of(&output, s, "unknown_tool");
    assert!(
        unknown["protocol_error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool")
    );

    // The secret planted in a metric label is withheld, by value and by name.
    for (session, secret, name) in [
        (s, clinic_token, "clinic_api_token"),
        (
            "wetech_2025_11_25",
            GRAFANA_SESSION_COOKIE_VALUE,
            "wetech_storage_state",
        ),
    ] {
        let blocked = result_of(step_of(&output, session, "blocked"));
        assert_eq!(
            failure_of(&blocked).1,
            FailureClass::OutputBlocked,
            "{}",
            blocked.text()
        );
        assert!(!blocked.text().contains(secret) && !blocked.text().contains(name));
        let raw = step_of(&output, session, "blocked").to_string();
        assert!(!raw.contains(secret), "{session}: {raw}");
    }

    // Manus and Wetech successes.
    let manus_ok = result_of(step_of(&output, "manus_2026_07_28", "ok"));
    assert_eq!(manus_ok.details().status, Status::Ok, "{}", manus_ok.text());
    assert!(
        !manus_ok.text().contains("10.21."),
        "an address reached the output"
    );
    let wetech_ok = result_of(step_of(&output, "wetech_2025_11_25", "ok"));
    let evidence = wetech_ok.details().evidence.as_ref().unwrap();
    assert_eq!(evidence.series_count, 56);

    // One audit record per answered call (protocol errors answer nothing), in each
    // package's own log, with no secret.
    let answered = |sessions: &[&str]| {
        sessions
            .iter()
            .flat_map(|label| steps_of(&output, label).as_array().unwrap().iter())
            .filter(|step| step.get("protocol_error").is_none())
            .count()
    };
    let clinic_records = audit_records(&clinic_audit);
    assert_eq!(
        clinic_records.len(),
        answered(&[
            "clinic_2025_06_18",
            "clinic_2025_11_25",
            "clinic_2026_07_28"
        ])
    );
    assert!(clinic_records.iter().any(|r| r["blocked"] == true));
    assert_eq!(
        audit_records(&manus_audit).len(),
        answered(&["manus_2026_07_28"])
    );
    assert_eq!(
        audit_records(&wetech_audit).len(),
        answered(&["wetech_2025_11_25"])
    );
    for (audit, secret) in [
        (&clinic_audit, clinic_token),
        (&manus_audit, password),
        (&wetech_audit, GRAFANA_SESSION_COOKIE_VALUE),
    ] {
        assert!(!std::fs::read_to_string(audit).unwrap().contains(secret));
    }
}

#[test]
fn committed_details_schema_is_current() {
    let path = workspace().join("schemas/tool-details.schema.json");
    let actual = format!(
        "{}\n",
        serde_json::to_string_pretty(&evidence_tool::mcp::details_output_schema()).unwrap()
    );
    if std::env::var_os("UPDATE_SCHEMAS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &actual).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == actual,
        "schemas/tool-details.schema.json is stale; run \
         `UPDATE_SCHEMAS=1 cargo test -p evidence-tool --test mcp committed_details_schema_is_current`"
    );
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "wire-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

#[test]
fn on_the_wire_result_type_is_sent_exactly_where_the_version_requires_it() {
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let bin = entrypoint(&clinic);
    let args = json!({"queries": [{"queryId": "q", "expr": "up"}]});

    for version in ["2025-06-18", "2025-11-25"] {
        let mut wire = Wire::start_clinic(&bin);
        let init = wire.request(
            1,
            "initialize",
            json!({"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "wire-test", "version": "1"}}),
        );
        assert_eq!(init["result"]["protocolVersion"], version, "{init}");
        assert_eq!(
            init["result"]["serverInfo"]["name"],
            "managed_auto_oncall_clinic"
        );
        wire.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        // No envelope for any call: every call is a failure result, and the next one is
        // answered by the same process.
        for id in 2..5 {
            let call = wire.request(
                id,
                "tools/call",
                json!({"name": "managed_auto_oncall_clinic", "arguments": args}),
            );
            let result = &call["result"];
            assert!(result.get("resultType").is_none(), "{version}: {call}");
            assert_eq!(result["isError"], true);
            let mcp: McpCallToolResult = serde_json::from_value(result.clone()).unwrap();
            let managed = ToolResult::from_mcp(&mcp).unwrap();
            assert_eq!(failure_of(&managed).0, "runtime_context_missing");
        }
    }

    // 2026-07-28: no handshake, the lifecycle in each request's `_meta`.
    let mut wire = Wire::start_clinic(&bin);
    let discover = wire.request(1, "server/discover", json!({"_meta": modern_meta()}));
    let supported = &discover["result"]["supportedVersions"];
    assert_eq!(
        supported,
        &json!(["2025-06-18", "2025-11-25", "2026-07-28"]),
        "{discover}"
    );
    let listed = wire.request(2, "tools/list", json!({"_meta": modern_meta()}));
    assert_eq!(listed["result"]["resultType"], "complete", "{listed}");
    for id in 3..5 {
        let call = wire.request(
            id,
            "tools/call",
            json!({"_meta": modern_meta(), "name": "managed_auto_oncall_clinic", "arguments": args}),
        );
        assert_eq!(call["result"]["resultType"], "complete", "{call}");
        assert_eq!(call["result"]["isError"], true);
    }

    // A version the server does not speak: `initialize` falls back to the newest one it
    // does, a per-request version is refused, and the server stays up.
    let mut wire = Wire::start_clinic(&bin);
    let init = wire.request(
        1,
        "initialize",
        json!({"protocolVersion": "2024-11-05", "capabilities": {},
               "clientInfo": {"name": "wire-test", "version": "1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let mut wire = Wire::start_clinic(&bin);
    let mut old = modern_meta();
    old["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let refused = wire.request(1, "tools/list", json!({"_meta": old}));
    assert!(refused.get("error").is_some(), "{refused}");
    let listed = wire.request(2, "tools/list", json!({"_meta": modern_meta()}));
    assert_eq!(
        listed["result"]["tools"][0]["name"],
        "managed_auto_oncall_clinic"
    );

    // The built binary outside any package folder serves nothing.
    let (code, out, err) = run(Path::new(CLINIC_TOOL), &["--mcp"], &[], "");
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.contains("package_load_failed"), "{err}");

    // Anything but no argument or `--mcp` is a usage error, before any protocol.
    for args in [&["--bogus"][..], &["--mcp", "--mcp"][..]] {
        let (code, out, err) = run(&bin, args, &[], "");
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}: {err}");
        assert!(err.contains("--mcp"), "{err}");
    }
}

/// Arbitrary model arguments: JSON objects of the Clinic shape and beside it (any
/// field, any value, nested), as a model might write them.
fn arbitrary_arguments() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[ -~]{0,24}".prop_map(Value::String),
        Just(json!(test_support::TIDB_CPU.expr)),
        Just(json!("up{cluster_id=\"SaaS99\"}")),
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-zA-Z_]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    let query = (
        proptest::option::of("[A-Za-z0-9_.:-]{1,16}"),
        proptest::option::of(value.clone()),
        proptest::option::of(prop_oneof![Just(json!("15s")), value.clone()]),
    )
        .prop_map(|(id, expr, step)| {
            let mut q = serde_json::Map::new();
            if let Some(id) = id {
                q.insert("queryId".into(), json!(id));
            }
            q.insert(
                "expr".into(),
                expr.unwrap_or_else(|| json!(test_support::TIDB_CPU.expr)),
            );
            if let Some(step) = step {
                q.insert("step".into(), step);
            }
            Value::Object(q)
        });
    (
        proptest::collection::vec(query, 0..3),
        proptest::collection::btree_map(
            prop_oneof![
                Just("provider".to_owned()),
                Just("cluster".to_owned()),
                Just("ticket".to_owned()),
                "[a-z]{1,8}".prop_map(String::from)
            ],
            value,
            0..3,
        ),
    )
        .prop_map(|(queries, extra)| {
            let mut args: serde_json::Map<String, Value> = extra.into_iter().collect();
            args.insert("queries".into(), Value::Array(queries));
            Value::Object(args)
        })
}

/// Whatever arguments a model sends, one server process answers each call with a managed
/// result (never a protocol error, never its own end), its text exactly the JSON of its
/// structuredContent, and appends one audit record per call. The provider is a closed
/// port, so arguments that lock end as a provider failure result, with no Prometheus.
#[test]
fn one_server_answers_every_call_with_a_result_whatever_the_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let signed = sign(
        dir.path(),
        "envelope.json",
        &clinic,
        &policy("clinic", "managed_auto_oncall_clinic", json!({})),
    );
    let audit = dir.path().join("audit.jsonl");
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let env = clinic_env(
        &signed,
        &audit,
        format!("http://{closed}"),
        "proptest-clinic-token-01",
    );
    let mut wire = Wire::start_with(&entrypoint(&clinic), &env);
    let init = wire.request(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "wire-test", "version": "1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    wire.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let wire = std::cell::RefCell::new(wire);
    let id = std::cell::Cell::new(1u64);
    let config = ProptestConfig {
        cases: 48,
        ..ProptestConfig::default()
    };
    proptest!(config, |(args in arbitrary_arguments())| {
        let n = id.get();
        id.set(n + 1);
        let call = wire.borrow_mut().request(
            n,
            "tools/call",
            json!({"name": "managed_auto_oncall_clinic", "arguments": args}),
        );
        prop_assert!(call.get("error").is_none(), "{call}");
        let mcp: McpCallToolResult = serde_json::from_value(call["result"].clone()).unwrap();
        let result = ToolResult::from_mcp(&mcp).unwrap();
        prop_assert_eq!(audit_records(&audit).len() as u64, n);
        prop_assert!(result.is_failed(), "{}", result.text());
        prop_assert!(!result.text().contains("proptest-clinic-token-01"));
    });
}

/// The variable names in the environment process `pid` runs with now.
fn environ_names(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap()
        .split(|b| *b == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            entry.split('=').next().unwrap_or_default().to_owned()
        })
        .collect()
}

/// An MCP client (OpenCode, for one) starts every server with its own whole environment,
/// so the other packages' secrets can be in it. The server keeps only its own package's
/// variables (the runtime context, its deployment configuration, its auth binding's
/// secrets) and a few process basics: whatever else it was started with, the process
/// that serves holds none of it.
#[test]
fn a_package_server_holds_only_its_own_variables_whatever_it_was_started_with() {
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let bin = entrypoint(&clinic);
    let own = [
        (
            "EVIDENCE_TRUSTED_CONTEXT",
            "/run/clinic/envelope.json".to_owned(),
        ),
        ("EVIDENCE_POLICY_KEYS", policy_keys()),
        ("CLINIC_BASE_URL", "http://127.0.0.1:9".to_owned()),
        (
            "CLINIC_QUERY_PATH_TEMPLATE",
            test_support::ClinicFront::QUERY_RANGE_PATH_TEMPLATE.to_owned(),
        ),
        ("CLINIC_API_TOKEN", "own-clinic-token-0001".to_owned()),
        (
            "EVIDENCE_TURN_LEDGER",
            new_ledger(dir.path()).display().to_string(),
        ),
        ("HOME", "/tmp".to_owned()),
    ];
    let config = ProptestConfig {
        cases: 12,
        ..ProptestConfig::default()
    };
    let foreign_names = prop_oneof![
        Just("MANUS_PASSWORD".to_owned()),
        Just("MANUS_USERNAME".to_owned()),
        Just("MANUS_REF_KEYS".to_owned()),
        Just("WETECH_STORAGE_STATE".to_owned()),
        Just("HTTPS_PROXY".to_owned()),
        Just("OPENCODE_PID".to_owned()),
        "[A-Z][A-Z0-9_]{0,12}".prop_filter("not one of the server's own", |n| {
            ![
                "PATH",
                "HOME",
                "TMPDIR",
                "LANG",
                "LC_ALL",
                "TZ",
                "SSL_CERT_FILE",
                "SSL_CERT_DIR",
            ]
            .contains(&n.as_str())
                && !evidence_tool::context::CONTEXT_VARS
                    .iter()
                    .any(|v| v.name == n)
        }),
    ];
    proptest!(config, |(foreign in proptest::collection::btree_map(foreign_names, "[ -~]{8,24}", 1..6))| {
        let leaked: Vec<(String, String)> = foreign.into_iter().collect();
        let mut command = Command::new(&bin);
        command
            .arg("--mcp")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(own.iter().map(|(k, v)| (*k, v.as_str())))
            .envs(leaked.iter().cloned());
        let mut wire = Wire::spawn(command);
        let init = wire.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "wire-test", "version": "1"}}),
        );
        prop_assert_eq!(&init["result"]["protocolVersion"], "2025-11-25");
        // `exec` keeps the pid: this is the environment of the process that serves.
        let names = environ_names(wire.pid());
        drop(wire);
        for (name, _) in &leaked {
            prop_assert!(!names.contains(name), "{} kept: {:?}", name, names);
        }
        for name in ["CLINIC_API_TOKEN", "EVIDENCE_TRUSTED_CONTEXT", "EVIDENCE_POLICY_KEYS", "EVIDENCE_TURN_LEDGER", "CLINIC_BASE_URL", "PATH", "HOME"] {
            prop_assert!(names.iter().any(|n| n == name), "{} dropped: {:?}", name, names);
        }
    });
}

/// Calls beyond the manifest's `limits.concurrency` (4 for Clinic v3) wait for a free
/// slot: with the provider answering each request after 3 s, 8 calls sent at once take
/// at least two rounds, 6 s (without the limit they took 5 s here), and they do
/// overlap (far less than 24 s).
#[tokio::test]
async fn calls_beyond_the_manifest_concurrency_wait_for_a_slot() {
    let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
        .await
        .unwrap();
    let token = "concurrency-clinic-token-01";
    let front =
        test_support::ClinicFront::start(&prometheus.url(), SecretString::from(token.to_owned()))
            .await
            .unwrap();
    front
        .faults()
        .set_delay(std::time::Duration::from_millis(3000));
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(clinic.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["limits"]["concurrency"], 4);
    let signed = sign(
        dir.path(),
        "envelope.json",
        &clinic,
        &policy("clinic", "managed_auto_oncall_clinic", json!({})),
    );
    let env = clinic_env(
        &signed,
        &dir.path().join("audit.jsonl"),
        front.base_url(),
        token,
    );
    let bin = entrypoint(&clinic);
    let (elapsed, results) = blocking(move || {
        let mut wire = Wire::start_with(&bin, &env);
        wire.initialize();
        let started = std::time::Instant::now();
        for id in 1..=8u64 {
            wire.send(
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "managed_auto_oncall_clinic",
                "arguments": tidb_cpu_clinic(&format!("tidb_cpu_{id}"))}}),
            );
        }
        let mut results = Vec::new();
        while results.len() < 8 {
            let message = wire.next_message();
            if message.get("id").is_some() {
                results.push(message);
            }
        }
        (started.elapsed(), results)
    })
    .await;
    for message in &results {
        let mcp: McpCallToolResult = serde_json::from_value(message["result"].clone()).unwrap();
        let result = ToolResult::from_mcp(&mcp).unwrap();
        assert_eq!(result.details().status, Status::Ok, "{}", result.text());
    }
    assert!(
        elapsed >= std::time::Duration::from_millis(6000),
        "8 calls of 3 s with 4 slots took {elapsed:?}"
    );
    assert!(
        elapsed < std::time::Duration::from_millis(20000),
        "calls did not overlap: {elapsed:?}"
    );
}

/// A flood over `limits.concurrency` against a provider that accepts and never answers,
/// with a package whose `timeout_ms` is 4 s (Clinic v3: 4 slots): the official SDK sends
/// 6 calls at once in one session; the 4 that got a slot answer `clinic_timeout` ("a
/// narrower query may help") and the 2 that waited for a slot answer `clinic_timeout`
/// saying their query was never sent ("would not help"), each before 4 s from its
/// request, each
/// with its audit record; no call waits in a queue past its deadline. Meanwhile a second
/// session of the same package and turn ledger, whose provider is healthy, is answered
/// at once. (Main answered the 6 after 30 s and 60 s.)
#[tokio::test]
async fn a_flood_over_the_concurrency_against_a_stalled_provider_answers_within_timeout_ms() {
    const TIMEOUT_MS: u64 = 4_000;
    let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
        .await
        .unwrap();
    let token = "flood-clinic-token-0001";
    let url = prometheus.url();
    let start_front =
        || test_support::ClinicFront::start(&url, SecretString::from(token.to_owned()));
    let (stalled, healthy) = (start_front().await.unwrap(), start_front().await.unwrap());
    stalled
        .faults()
        .set_delay(std::time::Duration::from_secs(3_600));
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy_with_timeout(
        dir.path(),
        "managed_auto_oncall_clinic",
        "v3",
        CLINIC_TOOL,
        TIMEOUT_MS,
    );
    let signed = sign(
        dir.path(),
        "envelope.json",
        &clinic,
        &policy("clinic", "managed_auto_oncall_clinic", json!({})),
    );
    let ledger = new_ledger(dir.path());
    let (flood_audit, healthy_audit) = (
        dir.path().join("flood-audit.jsonl"),
        dir.path().join("healthy-audit.jsonl"),
    );
    let env_of = |audit: &Path, front: &test_support::ClinicFront| {
        let mut env = runtime_env_sharing(&signed, audit, &ledger);
        env.extend(clinic_vars(front.base_url(), token));
        env
    };
    let flood: Vec<Value> = (1..=6)
        .map(|n| {
            step(
                &format!("flood_{n}"),
                "managed_auto_oncall_clinic",
                tidb_cpu_clinic(&format!("flood_{n}")),
            )
        })
        .collect();
    let mut healthy_session = session(
        "healthy",
        &clinic,
        &env_of(&healthy_audit, &healthy),
        "2025-11-25",
        vec![step(
            "healthy",
            "managed_auto_oncall_clinic",
            tidb_cpu_clinic("healthy"),
        )],
    );
    healthy_session["start_after_ms"] = json!(1_500);
    let plan = json!({"concurrent": true, "sessions": [
        session("flood", &clinic, &env_of(&flood_audit, &stalled), "2025-11-25",
                vec![json!({"label": "flood", "parallel": flood})]),
        healthy_session,
    ]});
    let output = blocking(move || run_client(&plan)).await;
    let limit = TIMEOUT_MS;
    let flood = step_of(&output, "flood", "flood")["parallel"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(flood.len(), 6);
    let mut waited_for_a_slot = 0;
    let mut took = Vec::new();
    for answer in &flood {
        let elapsed = answer["elapsed_ms"].as_u64().unwrap();
        took.push(elapsed);
        assert!(
            elapsed < limit,
            "{} answered after {elapsed} ms",
            answer["label"]
        );
        let result = result_of(answer);
        let d = result.details();
        let (code, class) = failure_of(&result);
        assert_eq!(
            (code.as_str(), class),
            ("clinic_timeout", FailureClass::Timeout)
        );
        let detail = d
            .detail_error
            .clone()
            .or_else(|| d.items.first().and_then(|i| i.detail_error.clone()))
            .unwrap_or_default();
        let correction = d
            .correction
            .as_ref()
            .or_else(|| d.items.first().and_then(|i| i.correction.as_ref()))
            .unwrap();
        if correction.instruction.contains("would not help") {
            // Cut off before the query was sent: waiting for a slot (or, given one
            // just as the deadline passed, before the admission).
            waited_for_a_slot += 1;
        } else {
            assert!(
                correction.instruction.contains("may answer in time"),
                "{detail}"
            );
        }
    }
    // Four calls took the four slots and reached the stalled provider. The other two
    // waited; when a slot came free within one's last milliseconds it was still sent
    // ("may answer in time"), though its request may not have arrived before the
    // deadline cut it off. So no call said "never sent" of a request the provider
    // received, and the provider received at least the four.
    let received = stalled.arrived();
    assert!(
        (4..=6).contains(&received),
        "{received} requests reached the provider"
    );
    assert!(waited_for_a_slot <= 6 - received, "{flood:?}");
    let answer = step_of(&output, "healthy", "healthy");
    let healthy_took = answer["elapsed_ms"].as_u64().unwrap();
    let result = result_of(answer);
    assert_eq!(result.details().status, Status::Ok, "{}", result.text());
    assert!(
        healthy_took < 2_000,
        "the healthy call took {healthy_took} ms"
    );
    assert_eq!(audit_records(&flood_audit).len(), 6);
    assert_eq!(audit_records(&healthy_audit).len(), 1);
    eprintln!(
        "flood of 6 over 4 slots, timeout_ms {limit}: {took:?} ms; healthy call meanwhile {healthy_took} ms"
    );
}
