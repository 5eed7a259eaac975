//! The real OpenCode (the pinned `opencode-ai` 1.18.33, run isolated and offline) loads a
//! generated Investibook workspace that registers the three packages' MCP servers (each
//! package's own tool binary with `--mcp`, from its deployable folder), connects to
//! each (`opencode mcp list`), and names their tools as the evidence agent is permitted
//! to use them, while the other agents are denied them; and the same over remote servers
//! (Streamable HTTP, started apart) registered with `McpServer::remote`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use evidence_package::Package;
use opencode_workspace::config::Action;
use opencode_workspace::{
    GenerateOptions, Generator, McpServer, OpenCodeCli, SkillCatalog, SkillsTree,
};
use support::*;

fn opencode(home: &Path) -> OpenCodeCli {
    let program = opencode_workspace::internal::pinned_opencode().unwrap_or_else(|e| panic!("{e}"));
    OpenCodeCli::new(program).isolated(home)
}

/// The skills tree the workspace generator's own tests use.
fn skills() -> SkillsTree {
    SkillsTree::load(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../opencode-workspace/tests/fixtures/agentkit/skills"),
    )
    .unwrap()
}

/// The lines of `opencode mcp list` without terminal colours, one per server:
/// `(name, status)`, e.g. `("managed_auto_oncall_clinic", "connected")`, and the whole
/// plain output (a failed server's error is on the line below its status).
fn mcp_list(cli: &OpenCodeCli, ws: &Path) -> (Vec<(String, String)>, String) {
    let out = cli.run(ws, &["mcp", "list"]).unwrap();
    assert!(out.success, "opencode mcp list failed: {}", out.stderr);
    // OpenCode's MCP client compiles each tool's schemas (AJV, strict about formats):
    // every keyword of ours is one it knows.
    for text in [&out.stdout, &out.stderr] {
        assert!(!text.contains("unknown format"), "{text}");
    }
    let plain = evidence_test_support::without_terminal_colours(&out.stdout);
    let listed = plain
        .lines()
        .filter_map(|line| {
            let rest = line.trim_start_matches(['●', '│', ' ']);
            let rest = rest.strip_prefix('✓').or_else(|| rest.strip_prefix('✗'))?;
            let mut words = rest.split_whitespace();
            Some((
                words.next()?.to_owned(),
                words.collect::<Vec<_>>().join(" "),
            ))
        })
        .collect();
    (listed, plain)
}

/// The status `opencode mcp list` showed for server `name`.
fn status_of(listed: &[(String, String)], name: &str) -> String {
    listed
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| panic!("{name} not in opencode mcp list: {listed:?}"))
}

/// The three packages: identity, revision and tool binary.
const PACKAGES: [(&str, &str, &str); 3] = [
    ("managed_auto_oncall_clinic", "v3", CLINIC_TOOL),
    ("managed_auto_oncall_manus", "v2", MANUS_TOOL),
    ("managed_auto_oncall_wetech", "v2", WETECH_TOOL),
];

#[test]
fn opencode_connects_to_each_package_server_and_permits_its_tool_to_the_evidence_agent_only() {
    let packages = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut options = GenerateOptions::default();
    let mut tools = Vec::new();
    let mut environs = Vec::new();
    for (identity, revision, binary) in PACKAGES {
        let (dir, _) = deploy(packages.path(), identity, revision, binary);
        let recorder = packages.path().join(format!("{identity}-recorder"));
        let recorded = packages.path().join(format!("{identity}.environ"));
        std::fs::write(
            &recorder,
            format!(
                "#!/bin/sh\ntr '\\0' '\\n' < /proc/$$/environ > {}\nexec {} \"$@\"\n",
                recorded.display(),
                entrypoint(&dir).display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&recorder, std::fs::Permissions::from_mode(0o755)).unwrap();
        environs.push((identity, recorded));
        let mut server = McpServer::new(identity, recorder.display().to_string())
            .unwrap()
            .arg(evidence_tool::mcp::MCP_FLAG);
        for (name, value) in ready_env(identity) {
            server = server.env(name, value);
        }
        let server = server.env(
            "EVIDENCE_AUDIT_LOG",
            packages
                .path()
                .join(format!("{identity}.audit.jsonl"))
                .display()
                .to_string(),
        );
        // The name the server lists its tool under (the code `--mcp` answers
        // `tools/list` with), as OpenCode prefixes it.
        let listed = evidence_tool::mcp::tool_listing(&Package::load(&dir).unwrap()).unwrap();
        assert_eq!(listed.name, identity);
        tools.push(server.tool_name(&listed.name));
        options = options.with_mcp_server(server);
    }
    // Servers that cannot serve refuse to start, and OpenCode shows why: the built
    // binary outside any package folder, and a packaged one without verification keys.
    options = options.with_mcp_server(
        McpServer::new("managed_auto_oncall_unpackaged", CLINIC_TOOL)
            .unwrap()
            .arg(evidence_tool::mcp::MCP_FLAG),
    );
    let (keyless, _) = deploy(
        &packages.path().join("keyless"),
        "managed_auto_oncall_clinic",
        "v3",
        CLINIC_TOOL,
    );
    let mut server = McpServer::new(
        "managed_auto_oncall_keyless",
        entrypoint(&keyless).display().to_string(),
    )
    .unwrap()
    .arg(evidence_tool::mcp::MCP_FLAG);
    for (name, value) in ready_env("managed_auto_oncall_clinic") {
        if name != "EVIDENCE_POLICY_KEYS" {
            server = server.env(name, value);
        }
    }
    options = options.with_mcp_server(server);
    let skills = skills();
    Generator::new(&SkillCatalog::investibook().unwrap(), &skills, options)
        .unwrap()
        .write(ws.path())
        .unwrap();
    // OpenCode starts every local server with its own whole environment: the other
    // packages' secrets it holds reach each server process (which then serves with only
    // its own variables, see `tests/mcp.rs`).
    let cli = opencode(home.path())
        .env("MANUS_PASSWORD", "held-by-opencode-0001")
        .env("CLINIC_API_TOKEN", "held-by-opencode-0002");

    let (listed, plain) = mcp_list(&cli, ws.path());
    let status = |name: &str| status_of(&listed, name);
    for (identity, _, _) in PACKAGES {
        assert!(status(identity).starts_with("connected"), "{listed:?}");
    }
    for (name, why) in [
        (
            "managed_auto_oncall_unpackaged",
            "clinic-tool --mcp cannot serve any call: package_load_failed",
        ),
        (
            "managed_auto_oncall_keyless",
            "clinic-tool --mcp cannot serve any call: runtime_context_missing: \
             EVIDENCE_POLICY_KEYS (the verification keys) is not set",
        ),
    ] {
        assert!(status(name).starts_with("failed"), "{listed:?}");
        let shown = plain
            .lines()
            .skip_while(|l| !l.contains(name))
            .nth(1)
            .unwrap_or_default();
        assert!(shown.contains(why), "{name}: {shown}");
    }

    // Each server was started holding another package's secret (its own variables
    // come from its registration and win over OpenCode's).
    for (identity, environ) in &environs {
        let foreign = if *identity == "managed_auto_oncall_manus" {
            "CLINIC_API_TOKEN=held-by-opencode-0002"
        } else {
            "MANUS_PASSWORD=held-by-opencode-0001"
        };
        let environ = std::fs::read_to_string(environ).unwrap();
        assert!(environ.lines().any(|l| l == foreign), "{identity}");
    }

    // OpenCode's own merged permission rules: the evidence agent may call each tool,
    // the analyst and the orchestrator may not.
    let evidence = cli.debug_agent(ws.path(), "evidence-agent").unwrap();
    let analyst = cli.debug_agent(ws.path(), "diagnosis-analyst").unwrap();
    let orchestrator = cli
        .debug_agent(ws.path(), "diagnosis-orchestrator")
        .unwrap();
    for tool in &tools {
        assert_eq!(evidence.evaluate(tool, "*"), Action::Allow, "{tool}");
        assert_eq!(analyst.evaluate(tool, "*"), Action::Deny, "{tool}");
        assert_eq!(orchestrator.evaluate(tool, "*"), Action::Deny, "{tool}");
    }
}

/// The remote form: the three packages' servers over Streamable HTTP, each started apart
/// with its own runtime context (no envelope file), registered with `McpServer::remote`;
/// OpenCode, holding only a session token, lists each as connected (`initialize` and
/// `tools/list` need no session), and a server that cannot be reached as failed with the
/// reason. The evidence agent alone may call their tools, as in the local form.
#[test]
fn opencode_connects_to_remote_package_servers_and_shows_why_one_cannot_be_reached() {
    let packages = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut options = GenerateOptions::default();
    let mut servers = Vec::new();
    let mut tools = Vec::new();
    for (identity, revision, binary) in PACKAGES {
        let (dir, _) = deploy(packages.path(), identity, revision, binary);
        let env: Vec<_> = ready_env(identity)
            .into_iter()
            .filter(|(name, _)| *name != "EVIDENCE_TRUSTED_CONTEXT")
            .collect();
        let http = HttpServer::start(&entrypoint(&dir), &env);
        let server = McpServer::remote(identity, http.url()).unwrap();
        tools.push(server.tool_name(identity));
        options = options.with_mcp_server(server);
        servers.push(http);
    }
    // A port nothing listens on: bound, then released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    options = options.with_mcp_server(
        McpServer::remote(
            "managed_auto_oncall_unreachable",
            format!("http://127.0.0.1:{port}/mcp"),
        )
        .unwrap(),
    );
    Generator::new(&SkillCatalog::investibook().unwrap(), &skills(), options)
        .unwrap()
        .write(ws.path())
        .unwrap();
    let token = evidence_policy::SessionToken::mint();
    let cli = opencode(home.path()).env(opencode_workspace::SESSION_TOKEN_ENV, token.expose());
    let (listed, plain) = mcp_list(&cli, ws.path());
    let status = |name: &str| status_of(&listed, name);
    for (identity, _, _) in PACKAGES {
        assert!(status(identity).starts_with("connected"), "{plain}");
    }
    assert!(
        status("managed_auto_oncall_unreachable").starts_with("failed"),
        "{plain}"
    );
    let shown = plain
        .lines()
        .skip_while(|l| !l.contains("managed_auto_oncall_unreachable"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        shown.to_lowercase().contains("connect") || shown.contains("ECONNREFUSED"),
        "{plain}"
    );
    let evidence = cli.debug_agent(ws.path(), "evidence-agent").unwrap();
    let analyst = cli.debug_agent(ws.path(), "diagnosis-analyst").unwrap();
    for tool in &tools {
        assert_eq!(evidence.evaluate(tool, "*"), Action::Allow, "{tool}");
        assert_eq!(analyst.evaluate(tool, "*"), Action::Deny, "{tool}");
    }
    drop(servers);
}
