//! What the end-to-end diagnosis tests share: a generated workspace whose model is the
//! scripted model, and the real OpenCode run isolated and offline on it with a
//! deadline.
#![allow(unreachable_pub)]

pub mod agents;
pub mod deployment;
pub mod orchestrator;
pub mod transcript;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use evidence_test_support::ScriptedModel;

use opencode_workspace::layout::{AGENTS_DIR, CONFIG_PATH};
use opencode_workspace::{
    AgentRole, GenerateOptions, Generator, McpServer, OpenCodeCli, SkillCatalog, SkillsTree,
};
use transcript::Transcript;

/// The longest an `opencode run` may take.
const RUN_DEADLINE: Duration = Duration::from_secs(300);

/// The skills tree the workspace generator's own tests use.
pub fn skills() -> SkillsTree {
    SkillsTree::load(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../opencode-workspace/tests/fixtures/agentkit/skills"),
    )
    .unwrap()
}

/// The generator of a three-agent workspace registering `servers`.
pub fn generator(servers: &[McpServer]) -> Generator {
    let mut options = GenerateOptions::default().with_workspace_skill(transport_skill());
    for server in servers {
        options = options.with_mcp_server(server.clone());
    }
    Generator::new(&SkillCatalog::investibook().unwrap(), &skills(), options).unwrap()
}

/// The transport skill the workspace installs, as `init_workspace` installs it.
fn transport_skill() -> opencode_workspace::WorkspaceSkill {
    opencode_workspace::WorkspaceSkill::new(
        evidence_policy::skill::TRANSPORT_SKILL_NAME,
        evidence_policy::skill::TRANSPORT_SKILL_GROUP,
        evidence_policy::skill::transport_skill(),
    )
    .unwrap()
}

/// The catalog the generated workspace follows: the Investibook catalog with the
/// transport skill in its group.
pub fn catalog() -> SkillCatalog {
    let skill = transport_skill();
    SkillCatalog::investibook()
        .unwrap()
        .with_skill_in(skill.group(), skill.name())
}

/// The first line of each agent's generated prompt: what the scripted model knows the
/// speaking agent by.
pub fn markers(generator: &Generator) -> Vec<(AgentRole, String)> {
    AgentRole::ALL
        .iter()
        .map(|role| {
            let path = format!("{AGENTS_DIR}/{}.md", role.as_str());
            let file = generator
                .files()
                .iter()
                .find(|f| f.path() == path)
                .unwrap_or_else(|| panic!("no prompt {path}"));
            let first = file.contents().lines().next().unwrap_or_default();
            (*role, first.to_owned())
        })
        .collect()
}

/// A git repository at `dir/ws` holding the workspace `generator` writes, whose
/// `opencode.json` already names the scripted model (the generator keeps other keys);
/// returns the workspace folder.
pub fn workspace(dir: &Path, generator: &Generator, model: &ScriptedModel) -> PathBuf {
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join(".opencode")).unwrap();
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap_or_else(|e| panic!("git is needed (apt-get install -y git): {e}"));
    assert!(status.success());
    std::fs::write(
        ws.join(CONFIG_PATH),
        model.opencode_config(deployment::MODEL_KEY_ENV).to_string(),
    )
    .unwrap();
    generator.write(&ws).unwrap();
    ws
}

/// The pinned OpenCode, isolated in `home`, with `env` added to its environment.
pub fn opencode(home: &Path, env: &[(&str, String)]) -> OpenCodeCli {
    let program = opencode_workspace::internal::pinned_opencode().unwrap_or_else(|e| panic!("{e}"));
    let mut cli = OpenCodeCli::new(program).isolated(home);
    for (key, value) in env {
        cli = cli.env(key, value);
    }
    cli
}

/// What `opencode run` did.
pub struct RunOutput {
    /// Its exit status was 0.
    pub success: bool,
    /// Its JSON event lines.
    pub stdout: String,
    /// Its log output.
    pub stderr: String,
    /// How long it took.
    pub elapsed: Duration,
}

/// `opencode run --agent diagnosis-orchestrator --format json <message>` in `ws`;
/// killed when it outlives the deadline.
pub fn run(cli: &OpenCodeCli, ws: &Path, message: &str) -> RunOutput {
    let started = Instant::now();
    let mut child = cli
        .command(
            ws,
            &[
                "run",
                "--agent",
                "diagnosis-orchestrator",
                "--format",
                "json",
                message,
            ],
        )
        .unwrap()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).unwrap();
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "opencode run did not end within {RUN_DEADLINE:?}; its log:\n{}",
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    RunOutput {
        success: status.success(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        elapsed: started.elapsed(),
    }
}

/// Runs the diagnosis `message` in `ws` (see [`run`]) off the async runtime, prints how
/// long it took, and checks that OpenCode ended well and that the script had an answer
/// for every request; returns the run and what the model recorded.
pub async fn diagnose(
    cli: OpenCodeCli,
    ws: &Path,
    model: &ScriptedModel,
    message: &'static str,
) -> (RunOutput, Transcript) {
    let ws = ws.to_path_buf();
    let run = tokio::task::spawn_blocking(move || run(&cli, &ws, message))
        .await
        .unwrap();
    eprintln!("opencode run took {:?}", run.elapsed);
    let transcript = Transcript {
        exchanges: model.exchanges(),
    };
    assert!(
        transcript.refusals().is_empty(),
        "the script met requests it did not expect: {:?}\n{}",
        transcript.refusals(),
        run.stderr
    );
    assert!(run.success, "opencode run failed:\n{}", run.stderr);
    (run, transcript)
}

/// Every regular file under `root`, recursively (symbolic links not followed).
pub fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path());
            }
        }
    }
    out
}

/// The places under `roots` where any of `secrets` occurs: `(file, secret index)`.
pub fn secrets_in_files(roots: &[&Path], secrets: &[String]) -> Vec<(PathBuf, usize)> {
    let mut found = Vec::new();
    for root in roots {
        for file in files_under(root) {
            let bytes = std::fs::read(&file).unwrap_or_default();
            for (index, secret) in secrets.iter().enumerate() {
                if memchr::memmem::find(&bytes, secret.as_bytes()).is_some() {
                    found.push((file.clone(), index));
                }
            }
        }
    }
    found
}
