//! The real OpenCode (the pinned `opencode-ai` from npm, run isolated and offline) loads
//! the generated workspace where it lives: as a git root, in a subfolder of a repository,
//! and in no repository. It resolves the three agents with their modes and prompts, and
//! its own permission evaluation lets each subagent write exactly its own files.
//!
//! Permission outcomes come from OpenCode twice: its merged rules
//! (`opencode debug agent <name>`) evaluated by its rule (last match wins, default ask),
//! and its own tool execution (`opencode debug agent <name> --tool write --params ...`),
//! which runs the real `write` tool and refuses it exactly when OpenCode evaluates the
//! edit to `deny`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use common::{git, opencode, own_files};
use opencode_workspace::{
    AgentRole, CheckError, GenerateOptions, Generator, McpServer, Mode, OpenCodeCli, Placement,
    SkillsTree, TaskSupport, check_placement,
    cli::PINNED_OPENCODE_VERSION,
    config::Action,
    detect::detect_task_support,
    layout::{ANALYST_OUTPUT, CATALOG_PATH, CONFIG_PATH, EVIDENCE_AGENT_OUTPUT, REPORT_PATH},
    names::FALLBACK_AGENT,
    placement::{Worktree, project_worktree},
    protocol::{FALLBACK_NOTICE, FALLBACK_PROTOCOL_TITLE},
};
use serde_json::Value;

/// Where a test workspace lives.
#[derive(Debug, Clone, Copy)]
enum Where {
    GitRoot,
    RepoSubfolder,
    NoRepository,
}

/// Creates the workspace folder for `place` under `base`; returns it (resolved) and the
/// placement OpenCode should see.
fn place(place: Where, base: &Path) -> (PathBuf, String) {
    let base = base.canonicalize().unwrap();
    match place {
        Where::GitRoot => {
            let ws = base.join("ws");
            fs::create_dir_all(&ws).unwrap();
            git(&ws, &["init", "-q"]);
            (ws, String::new())
        }
        Where::RepoSubfolder => {
            let repo = base.join("repo");
            let ws = repo.join("team/ws");
            fs::create_dir_all(&ws).unwrap();
            git(&repo, &["init", "-q"]);
            (ws, "team/ws".to_owned())
        }
        Where::NoRepository => {
            let ws = base.join("ws");
            fs::create_dir_all(&ws).unwrap();
            assert_eq!(
                project_worktree(&ws).unwrap(),
                Worktree::FilesystemRoot,
                "the temporary folder {} is inside a git repository; set TMPDIR elsewhere",
                base.display()
            );
            let relative = ws.to_str().unwrap().trim_start_matches('/').to_owned();
            (ws, relative)
        }
    }
}

/// Workspace files no subagent may touch unless they are its own.
const PROBES: [&str; 12] = [
    EVIDENCE_AGENT_OUTPUT,
    ANALYST_OUTPUT,
    REPORT_PATH,
    "evidences/metrics.json",
    "evidences/logs.json",
    "evidences/queries.json",
    "evidences/events.json",
    "evidences/other.json",
    CONFIG_PATH,
    CATALOG_PATH,
    ".opencode/investibook/agents/diagnosis-analyst.md",
    "README.md",
];

/// Ends `opencode serve` however the test leaves.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The worktree OpenCode itself uses for `ws`: `opencode serve` answers `GET /path` with
/// `{directory, worktree, ...}`.
fn worktree_opencode_reports(cli: &OpenCodeCli, ws: &Path) -> PathBuf {
    // `--port 0` means OpenCode's default 4096, not a free port: pick one.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut command = cli
        .command(ws, &["serve", "--port", &port, "--hostname", "127.0.0.1"])
        .unwrap();
    let mut server = Server(
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = server.0.stdout.take().unwrap();
    let address = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| {
            line.split("http://")
                .nth(1)
                .map(|rest| rest.trim().to_owned())
        })
        .expect("opencode serve printed no address");
    let stream = TcpStream::connect(&address).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    // HTTP/1.0 gets a plain body with a Content-Length (the server keeps the connection).
    write!(&stream, "GET /path HTTP/1.0\r\nHost: {address}\r\n\r\n").unwrap();
    let mut reader = BufReader::new(&stream);
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let paths: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(paths["directory"], ws.to_str().unwrap());
    PathBuf::from(paths["worktree"].as_str().unwrap())
}

/// Runs OpenCode's own `write` tool as `agent`; `true` when OpenCode let it write.
fn opencode_writes(cli: &OpenCodeCli, ws: &Path, agent: &str, target: &Path) -> bool {
    let params = serde_json::json!({
        "filePath": target.to_str().unwrap(),
        "content": "{\"written_by\": \"opencode\"}\n",
    })
    .to_string();
    let out = cli
        .run(
            ws,
            &[
                "debug", "agent", agent, "--tool", "write", "--params", &params,
            ],
        )
        .unwrap();
    if out.success {
        let result: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(
            result["result"]["output"], "Wrote file successfully.",
            "{}",
            out.stdout
        );
        assert!(target.is_file(), "{} not written", target.display());
        true
    } else {
        assert!(
            out.stderr
                .contains("prevents you from using this specific tool call"),
            "{agent} write {} failed for another reason: {}",
            target.display(),
            out.stderr
        );
        assert!(
            !target.exists(),
            "{} exists after a refusal",
            target.display()
        );
        false
    }
}

/// The prompt file as OpenCode resolves `{file:}` (its contents, trimmed).
fn prompt_file(ws: &Path, agent: &str) -> String {
    fs::read_to_string(ws.join(format!(".opencode/investibook/agents/{agent}.md")))
        .unwrap()
        .trim()
        .to_owned()
}

fn check_opencode_at(kind: Where) {
    let base = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (ws, expected) = place(kind, base.path());
    let report = common::generator(TaskSupport::PromptList)
        .write(&ws)
        .unwrap();
    assert_eq!(report.placement.relative(), expected, "{kind:?}");
    let cli = opencode(home.path());
    // The worktree the generator computed is the one OpenCode uses.
    assert_eq!(
        worktree_opencode_reports(&cli, &ws),
        project_worktree(&ws).unwrap().path(),
        "{kind:?}"
    );

    check_resolved_config(&cli, &ws, kind);
    check_agent_list(&cli, &ws, kind);
    for agent in AgentRole::ALL {
        check_agent_rules(&cli, &ws, &report.placement, agent, kind);
    }
    check_own_writes(&cli, &ws, kind);
}

/// The resolved configuration: default agent, the three agents, prompts read from files.
fn check_resolved_config(cli: &OpenCodeCli, ws: &Path, kind: Where) {
    let out = cli.run(ws, &["debug", "config"]).unwrap();
    assert!(out.success, "{kind:?} debug config: {}", out.stderr);
    let config: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(config["default_agent"], "diagnosis-orchestrator");
    for agent in AgentRole::ALL {
        let name = agent.as_str();
        assert!(
            config["agent"][name]["prompt"].as_str() == Some(prompt_file(ws, name).as_str()),
            "{kind:?} {name}: {{file:}} prompt not resolved to the generated file"
        );
    }
}

/// The agents OpenCode offers, with their modes.
fn check_agent_list(cli: &OpenCodeCli, ws: &Path, kind: Where) {
    let agents = cli.agent_list(ws).unwrap();
    for (name, mode) in [
        ("diagnosis-orchestrator", "primary"),
        ("evidence-agent", "subagent"),
        ("diagnosis-analyst", "subagent"),
    ] {
        assert!(
            agents.contains(&(name.to_owned(), mode.to_owned())),
            "{kind:?}: {name} ({mode}) not in {agents:?}"
        );
    }
}

/// One agent as OpenCode merged it: mode, prompt, tools, and OpenCode's decision for every
/// probe path as OpenCode names it (relative to its worktree) and every Task target.
fn check_agent_rules(
    cli: &OpenCodeCli,
    ws: &Path,
    placement: &Placement,
    agent: AgentRole,
    kind: Where,
) {
    let name = agent.as_str();
    let resolved = cli.debug_agent(ws, name).unwrap();
    assert_eq!(resolved.name, name);
    let mode = if agent.is_subagent() {
        "subagent"
    } else {
        "primary"
    };
    assert_eq!(resolved.mode, mode, "{kind:?} {name}");
    assert_eq!(
        resolved.prompt.as_deref(),
        Some(prompt_file(ws, name).as_str())
    );
    assert_eq!(
        resolved.has_tool("task"),
        !agent.is_subagent(),
        "{kind:?} {name}"
    );
    let own = own_files(name);
    for probe in PROBES.iter().chain(own.iter()) {
        let expected = if own.contains(probe) {
            Action::Allow
        } else {
            Action::Deny
        };
        assert_eq!(
            resolved.evaluate("edit", &placement.pattern(probe)),
            expected,
            "{kind:?} {name} edit {probe}"
        );
    }
    if !placement.is_worktree_root() {
        // The same names relative to the worktree root are other files.
        for file in &own {
            assert_eq!(
                resolved.evaluate("edit", file),
                Action::Deny,
                "{kind:?} {name} {file}"
            );
        }
    }
    for target in ["general", "explore", "build", "diagnosis-orchestrator"] {
        assert_eq!(
            resolved.evaluate("task", target),
            Action::Deny,
            "{name} task {target}"
        );
    }
    for target in ["evidence-agent", "diagnosis-analyst"] {
        let expected = if agent.is_subagent() {
            Action::Deny
        } else {
            Action::Allow
        };
        assert_eq!(
            resolved.evaluate("task", target),
            expected,
            "{name} task {target}"
        );
    }
}

/// OpenCode's own write tool: each subagent writes its own file and is refused the other
/// agent's.
fn check_own_writes(cli: &OpenCodeCli, ws: &Path, kind: Where) {
    assert!(opencode_writes(
        cli,
        ws,
        "evidence-agent",
        &ws.join(EVIDENCE_AGENT_OUTPUT)
    ));
    assert!(!opencode_writes(
        cli,
        ws,
        "evidence-agent",
        &ws.join(ANALYST_OUTPUT)
    ));
    assert!(opencode_writes(
        cli,
        ws,
        "diagnosis-analyst",
        &ws.join(REPORT_PATH)
    ));
    assert!(!opencode_writes(
        cli,
        ws,
        "diagnosis-analyst",
        &ws.join("evidences/metrics.json")
    ));
    if let Where::RepoSubfolder = kind {
        // A file with the same workspace-relative name at the repository root.
        let repo = ws.parent().and_then(Path::parent).unwrap();
        assert!(!opencode_writes(
            cli,
            ws,
            "evidence-agent",
            &repo.join("evidences/metrics.json")
        ));
    }
}

#[test]
fn opencode_loads_and_confines_a_workspace_at_a_git_root() {
    check_opencode_at(Where::GitRoot);
}

#[test]
fn opencode_loads_and_confines_a_workspace_in_a_repository_subfolder() {
    check_opencode_at(Where::RepoSubfolder);
}

#[test]
fn opencode_loads_and_confines_a_workspace_in_no_repository() {
    check_opencode_at(Where::NoRepository);
}

/// Generating before `git init`: the check holds as generated; after `git init` OpenCode
/// moves to the new repository, refuses the evidence agent its own file, and the check
/// fails saying to regenerate; after regenerating both hold again.
#[test]
fn generating_before_git_init_is_caught_by_the_placement_check() {
    let base = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (ws, _) = place(Where::NoRepository, base.path());
    let cli = opencode(home.path());
    let generator = common::generator(TaskSupport::PromptList);
    generator.write(&ws).unwrap();
    let checked = check_placement(&ws).unwrap();
    assert_eq!(checked.worktree, Worktree::FilesystemRoot);
    assert_eq!(
        worktree_opencode_reports(&cli, &ws),
        checked.worktree.path()
    );

    git(&ws, &["init", "-q"]);
    assert_eq!(worktree_opencode_reports(&cli, &ws), ws);
    assert!(
        !opencode_writes(&cli, &ws, "evidence-agent", &ws.join(EVIDENCE_AGENT_OUTPUT)),
        "OpenCode let the evidence agent write with patterns of another worktree"
    );
    let err = check_placement(&ws).unwrap_err();
    match &err {
        CheckError::Moved {
            current_worktree,
            current,
            recorded,
            recorded_worktree,
            ..
        } => {
            assert_eq!(current_worktree, &Worktree::Git(ws.clone()));
            assert_eq!(current, "");
            assert_eq!(recorded, ws.to_str().unwrap().trim_start_matches('/'));
            assert_eq!(recorded_worktree.as_deref(), Some(Path::new("/")));
        }
        other => panic!("expected Moved, got {other:?}"),
    }
    assert!(err.to_string().contains("regenerate"), "{err}");

    generator.write(&ws).unwrap();
    let checked = check_placement(&ws).unwrap();
    assert_eq!(checked.worktree, Worktree::Git(ws.clone()));
    assert!(checked.placement.is_worktree_root());
    assert!(opencode_writes(
        &cli,
        &ws,
        "evidence-agent",
        &ws.join(EVIDENCE_AGENT_OUTPUT)
    ));
}

#[test]
fn the_pinned_version_is_installed() {
    let home = tempfile::tempdir().unwrap();
    let version = opencode(home.path()).version(home.path()).unwrap();
    assert_eq!(version, PINNED_OPENCODE_VERSION);
}

#[test]
fn the_probe_finds_the_task_tool_in_the_pinned_opencode() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let probe = detect_task_support(&opencode(home.path()), ws.path()).unwrap();
    assert!(probe.report.has_tool("task"), "{:?}", probe.report.tools);
    assert_eq!(probe.support, TaskSupport::PromptList);
    let report = common::generator(probe.support).write(ws.path()).unwrap();
    assert_eq!(report.mode, Mode::MultiAgent);
}

#[test]
fn without_the_task_tool_the_fallback_is_generated_and_says_so() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // An installation whose own configuration takes the Task tool away from the agent.
    common::write(
        home.path(),
        "config/opencode/opencode.json",
        r#"{"agent": {"diagnosis-orchestrator": {"tools": {"task": false}}}}"#,
    );
    let cli = opencode(home.path());
    let probe = detect_task_support(&cli, ws.path()).unwrap();
    assert!(!probe.report.has_tool("task"), "{:?}", probe.report.tools);
    assert_eq!(probe.support, TaskSupport::Unavailable);

    let report = common::generator(probe.support).write(ws.path()).unwrap();
    assert_eq!(report.mode, Mode::SingleAgentFallback);
    assert_eq!(report.notice(), Some(FALLBACK_NOTICE));
    let agents = cli.agent_list(ws.path()).unwrap();
    assert!(
        agents.contains(&(FALLBACK_AGENT.to_owned(), "primary".to_owned())),
        "{agents:?}"
    );
    let fallback = cli.debug_agent(ws.path(), FALLBACK_AGENT).unwrap();
    assert!(!fallback.has_tool("task"));
    let prompt = fallback.prompt.clone().unwrap_or_default();
    assert!(
        prompt.contains(FALLBACK_NOTICE),
        "the prompt does not say it"
    );
    assert!(prompt.contains(FALLBACK_PROTOCOL_TITLE));
    let placed = report.placement.pattern(REPORT_PATH);
    assert_eq!(fallback.evaluate("edit", &placed), Action::Allow);
    assert_eq!(
        fallback.evaluate("edit", &report.placement.pattern(CONFIG_PATH)),
        Action::Deny
    );
}

#[test]
fn registered_mcp_servers_are_loaded_and_only_the_evidence_agent_may_use_their_tools() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let servers: Vec<McpServer> = ["clinic", "manus", "wetech"]
        .into_iter()
        .map(|package| {
            McpServer::new(
                format!("managed_auto_oncall_{package}"),
                format!("/opt/managed/{package}_tool"),
            )
            .unwrap()
            .arg("--mcp")
            .env(
                "EVIDENCE_TRUSTED_CONTEXT",
                format!("/run/{package}/envelope.json"),
            )
        })
        .collect();
    let skills = SkillsTree::load(common::fixture_skills()).unwrap();
    let mut options = GenerateOptions::default();
    for server in &servers {
        options = options.with_mcp_server(server.clone());
    }
    Generator::new(&common::catalog(), &skills, options)
        .unwrap()
        .write(ws.path())
        .unwrap();
    let cli = opencode(home.path());
    let out = cli.run(ws.path(), &["debug", "config"]).unwrap();
    assert!(out.success, "{}", out.stderr);
    let config: Value = serde_json::from_str(&out.stdout).unwrap();
    for package in ["clinic", "manus", "wetech"] {
        let server = &config["mcp"][format!("managed_auto_oncall_{package}")];
        assert_eq!(server["type"], "local");
        assert_eq!(
            server["command"],
            serde_json::json!([format!("/opt/managed/{package}_tool"), "--mcp"])
        );
        assert_eq!(
            server["environment"]["EVIDENCE_TRUSTED_CONTEXT"],
            format!("/run/{package}/envelope.json")
        );
        assert_eq!(server["enabled"], true);
    }
    // OpenCode names an MCP tool `<server>_<tool>` and checks it as a permission key.
    let evidence = cli.debug_agent(ws.path(), "evidence-agent").unwrap();
    let analyst = cli.debug_agent(ws.path(), "diagnosis-analyst").unwrap();
    for server in &servers {
        let tool = server.tool_name("query_range");
        assert_eq!(evidence.evaluate(&tool, "*"), Action::Allow, "{tool}");
        assert_eq!(analyst.evaluate(&tool, "*"), Action::Deny, "{tool}");
    }
    assert_eq!(evidence.evaluate("other_server_query", "*"), Action::Deny);
}
