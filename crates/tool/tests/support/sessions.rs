//! Sessions of the HTTP tool servers as the tests drive them: a server's environment
//! without an envelope file, policies signed for a session's token, the token's header,
//! and the official SDK driver's plans and answers (`mcp_client.py`).

use std::path::Path;

use evidence_policy::SessionToken;
use evidence_result::{ToolResult, mcp::McpCallToolResult};
use evidence_tool::mcp::SESSION_HEADER;
use serde_json::{Value, json};

/// The environment of a server over HTTP: no envelope file (the sessions' envelopes are
/// delivered to it).
pub fn http_env(env: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    env.iter()
        .filter(|(name, _)| *name != "EVIDENCE_TRUSTED_CONTEXT")
        .cloned()
        .collect()
}

/// The tests' policy of `provider`'s `package` signed for the session of `token`, with
/// `extra` over it.
pub fn session_policy_of(
    provider: &str,
    package: &str,
    token: &SessionToken,
    extra: Value,
) -> Value {
    let mut policy = super::policy(provider, package, extra);
    policy["session"] = json!(token.digest().to_string());
    policy
}

/// The envelope of `policy` for the deployed package `package_dir`, as JSON.
pub fn sign_session(package_dir: &Path, policy: &Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let signed = super::sign(dir.path(), "envelope.json", package_dir, policy);
    std::fs::read_to_string(signed.envelope).unwrap()
}

/// The header that presents the session of `token`.
pub fn session_headers(token: &SessionToken) -> Value {
    json!({ SESSION_HEADER: token.expose() })
}

/// An SDK session against `url` at `version`, with `headers` on every request.
pub fn http_session(
    label: &str,
    url: &str,
    headers: Value,
    version: &str,
    steps: Vec<Value>,
) -> Value {
    json!({"label": label, "url": url, "headers": headers, "version": version, "steps": steps})
}

/// A call step of `tool` with `arguments`.
pub fn tool_call(label: &str, tool: &str, arguments: Value) -> Value {
    json!({"label": label, "tool": tool, "arguments": arguments})
}

/// The managed result of an SDK step.
pub fn step_result(step: &Value) -> ToolResult {
    assert!(step.get("protocol_error").is_none(), "{step}");
    let mcp: McpCallToolResult = serde_json::from_value(json!({
        "content": step["content"], "structuredContent": step["structuredContent"],
        "isError": step["isError"],
    }))
    .unwrap();
    ToolResult::from_mcp(&mcp).unwrap()
}

/// The session labelled `label` of the driver's output.
pub fn session_of<'a>(output: &'a Value, label: &str) -> &'a Value {
    output["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == label)
        .unwrap_or_else(|| panic!("no session {label}: {output}"))
}
