//! Rule 9 at the cost of nothing: a tool process hashes its own package once, over the
//! file it was started from, and verifies every call's envelope against that digest.
//! The envelope is still read for every call; a folder changed on disk after start does
//! not change what the process runs (its hashed code and manifest) and is said in every
//! later audit record; a binary changed before start verifies nothing and sends
//! nothing. Driven over the MCP wire against real Prometheus behind the Clinic front.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use evidence_result::{Status, ToolResult, mcp::McpCallToolResult};
use evidence_test_support as test_support;
use secrecy::SecretString;
use serde_json::{Value, json};
use support::*;

const TOKEN: &str = "digest-once-clinic-token-01";

fn initialized(bin: &Path, env: &[(&'static str, String)]) -> Wire {
    let mut wire = Wire::start_with(bin, env);
    wire.initialize();
    wire
}

/// Call `id` asks its own question (`tidb_cpu_<id>`): the turn ledger refuses to answer
/// one twice in a turn.
fn call(wire: &mut Wire, id: u64) -> ToolResult {
    let args = json!({"queries": [{"queryId": format!("tidb_cpu_{id}"), "unit": "cores",
        "expr": "sum by (instance) (rate(tidb_server_cpu_seconds_total{cluster_id=\"SaaS01\"}[1m]))"}]});
    let answer = wire.request(
        id,
        "tools/call",
        json!({"name": "managed_auto_oncall_clinic", "arguments": args}),
    );
    let mcp: McpCallToolResult = serde_json::from_value(answer["result"].clone()).unwrap();
    ToolResult::from_mcp(&mcp).unwrap()
}

#[tokio::test]
async fn a_server_hashes_its_package_once_and_reads_the_envelope_per_call() {
    let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
        .await
        .unwrap();
    let front =
        test_support::ClinicFront::start(&prometheus.url(), SecretString::from(TOKEN.to_owned()))
            .await
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (clinic, digest) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let first = policy(
        "clinic",
        "managed_auto_oncall_clinic",
        json!({"policy_id": "pol-first"}),
    );
    let signed = sign(dir.path(), "envelope.json", &clinic, &first);
    let audit = dir.path().join("audit.jsonl");
    let env = clinic_env(&signed, &audit, front.base_url(), TOKEN);
    let bin = entrypoint(&clinic);
    let front_requests = || front.requests().len();

    let envelope = signed.envelope.clone();
    let (env_server, clinic_dir, bin_server) = (env.clone(), clinic.clone(), bin.clone());
    let records = blocking(move || {
        let mut wire = initialized(&bin_server, &env_server);
        let one = call(&mut wire, 1);
        assert_eq!(one.details().status, Status::Ok, "{}", one.text());

        // A new envelope in the same place: the next call reads it.
        let second = policy(
            "clinic",
            "managed_auto_oncall_clinic",
            json!({"policy_id": "pol-second"}),
        );
        let resigned = sign(
            envelope.parent().unwrap(),
            "next.json",
            &clinic_dir,
            &second,
        );
        std::fs::rename(&resigned.envelope, &envelope).unwrap();
        let two = call(&mut wire, 2);
        assert_eq!(two.details().status, Status::Ok, "{}", two.text());

        // The folder changes on disk: the binary replaced by rename with a changed copy,
        // the README rewritten. The server goes on with what it hashed.
        let changed = clinic_dir.join("changed-tool");
        with_one_byte_changed(&bin_server, &changed);
        std::fs::rename(&changed, &bin_server).unwrap();
        std::fs::write(clinic_dir.join("README.md"), "# rewritten after start\n").unwrap();
        let three = call(&mut wire, 3);
        assert_eq!(three.details().status, Status::Ok, "{}", three.text());
        audit_records(&audit)
    })
    .await;
    assert_eq!(records.len(), 3);
    let ids: Vec<&Value> = records.iter().map(|r| &r["policy_id"]).collect();
    assert_eq!(
        ids,
        [
            &json!("pol-first"),
            &json!("pol-second"),
            &json!("pol-second")
        ]
    );
    for record in &records {
        assert_eq!(record["digest"], digest.as_str(), "{record}");
    }
    assert_eq!(records[0].get("folder_changed"), None, "{}", records[0]);
    assert_eq!(records[1].get("folder_changed"), None, "{}", records[1]);
    assert_eq!(records[2]["folder_changed"], true, "{}", records[2]);
    let sent = front_requests();
    assert_eq!(sent, 3);

    // A process started from the changed folder hashes the changed binary: the envelope
    // signed for the original digest verifies nothing, on every call, and nothing is
    // sent.
    let audit_changed = dir.path().join("audit-changed.jsonl");
    let mut env_changed = env.clone();
    env_changed.retain(|(k, _)| *k != "EVIDENCE_AUDIT_LOG");
    env_changed.push(("EVIDENCE_AUDIT_LOG", audit_changed.display().to_string()));
    let original_envelope = dir.path().join("original.json");
    std::fs::write(&original_envelope, sign_for_digest(&first, &digest)).unwrap();
    env_changed.retain(|(k, _)| *k != "EVIDENCE_TRUSTED_CONTEXT");
    env_changed.push((
        "EVIDENCE_TRUSTED_CONTEXT",
        original_envelope.display().to_string(),
    ));
    let codes = blocking(move || {
        let mut wire = initialized(&bin, &env_changed);
        (1..=2)
            .map(|id| code_of(&call(&mut wire, id)))
            .collect::<Vec<_>>()
    })
    .await;
    assert_eq!(
        codes,
        ["policy_verification_failed", "policy_verification_failed"]
    );
    assert_eq!(
        front_requests(),
        sent,
        "a call of an unverified package was sent"
    );
    let changed_records = audit_records(&audit_changed);
    assert_eq!(changed_records.len(), 2);
    assert_ne!(changed_records[0]["digest"], digest.as_str());
}
