//! Audit sink failures fail closed: when a call's audit record cannot be appended (its
//! folder removed, as a full disk would refuse it too), no result is handed out. The
//! one-shot entrypoint exits non-zero with the reason on stderr and nothing on stdout;
//! the MCP server answers that call with a protocol error and goes on serving, and the
//! next call whose record can be written gets its result.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::*;

/// The environment of a Clinic tool that reaches no provider, with its audit log in
/// `audit`.
fn env_with_audit(audit: &std::path::Path) -> Vec<(&'static str, String)> {
    let mut env = ready_env("managed_auto_oncall_clinic");
    env.push(("EVIDENCE_AUDIT_LOG", audit.display().to_string()));
    env
}

#[tokio::test]
async fn the_entrypoint_exits_non_zero_without_a_result_when_its_record_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let gone = dir.path().join("removed");
    let env = env_with_audit(&gone.join("audit.jsonl"));
    let bin = entrypoint(&clinic);
    let args = json!({"queries": [{"queryId": "q", "expr": "up"}]}).to_string();
    let (code, out, err) = blocking(move || run(&bin, &[], &env, &args)).await;
    assert_ne!(code, 0, "a result without its record: {out}");
    assert_eq!(out, "", "a result was handed out");
    assert!(
        err.contains("append the audit record to") && err.contains("removed/audit.jsonl"),
        "{err}"
    );
}

#[tokio::test]
async fn the_mcp_server_answers_a_protocol_error_naming_no_path_and_keeps_serving_when_a_record_cannot_be_written()
 {
    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let folder = dir.path().join("audit");
    std::fs::create_dir_all(&folder).unwrap();
    let audit = folder.join("audit.jsonl");
    let env = env_with_audit(&audit);
    let bin = entrypoint(&clinic);
    let (refused, answered) = blocking(move || {
        let mut wire = Wire::start_with(&bin, &env);
        wire.initialize();
        let call = |id: u64| {
            json!({"name": "managed_auto_oncall_clinic",
                   "arguments": {"queries": [{"queryId": format!("q{id}"), "expr": "up"}]}})
        };
        std::fs::remove_dir_all(&folder).unwrap();
        let refused = wire.request(1, "tools/call", call(1));
        std::fs::create_dir_all(&folder).unwrap();
        let answered = wire.request(2, "tools/call", call(2));
        (refused, answered)
    })
    .await;
    assert!(refused.get("result").is_none(), "{refused}");
    // The client reads a fixed text; the cause (which names the audit log's path) goes
    // to the operator's log only.
    let message = refused["error"]["message"].as_str().unwrap();
    assert_eq!(
        message, "no result could be produced; the operator has the detail in the server's log",
        "{refused}"
    );
    assert!(!message.contains("audit.jsonl"), "{refused}");
    // The call whose record was written got its result (here the missing envelope's).
    let code = &answered["result"]["structuredContent"]["error"]["code"];
    assert_eq!(code, "runtime_context_missing", "{answered}");
    let records = audit_records(&audit);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        records[0]["error_codes"],
        json!(["runtime_context_missing"])
    );
}
