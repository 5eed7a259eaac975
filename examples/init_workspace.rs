//! Writes an Investibook OpenCode workspace into a folder.
//!
//! ```text
//! cargo run --example init_workspace -- <dir> [--skills <agentkit/skills>]
//!     [--catalog <agentkit/config/SKILL_CATALOG.md>]
//!     [--task-tool detect|load-skills|prompt|none] [--opencode <path to opencode>]
//!     [--mcp <name>=<command>]... [--mcp-arg <name>=<arg>]... [--mcp-env <name>=<KEY>=<VALUE>]...
//!     [--mcp-remote <name>=<url>]...
//! cargo run --example init_workspace -- --check <dir>
//! ```
//!
//! Without `--skills` the fixture skills tree of the `opencode-workspace` crate is used;
//! without `--catalog` the built-in catalog. `--task-tool detect` asks the installed
//! OpenCode (`--opencode`, else `OPENCODE_BIN`, else `opencode` on `PATH`) whether the
//! orchestrator gets the Task tool and writes the three agents or the single-agent
//! fallback accordingly. `--mcp` registers a local MCP server (one per managed tool
//! package, e.g. `managed_auto_oncall_clinic=/srv/clinic-v3/bin/clinic-tool`);
//! `--mcp-arg` and `--mcp-env` add to a server that `--mcp` registers, and naming any
//! other server is an error. `--mcp-remote` registers a remote server instead (the
//! recommended shape: the package's server runs apart, e.g.
//! `managed_auto_oncall_clinic=http://127.0.0.1:8931/mcp`): OpenCode connects to the URL
//! over Streamable HTTP, sends the header `X-Evidence-Session` filled from
//! `{env:EVIDENCE_SESSION_TOKEN}`, and OAuth is off; plain `http://` only to loopback.
//!
//! The workspace installs the transport skill `managed-evidence-tools` (rendered from the
//! tools' own descriptions) in `.opencode/skill/`, in the `data-access` group: the evidence
//! agent may load it, the analyst may not. Every skill the catalog names must be in the
//! `--skills` tree or installed by the workspace; a missing one stops generation, named.
//!
//! Edit permissions name the files as OpenCode sees them from its worktree (the git root,
//! or `/` outside any repository), so the workspace is generated where it will be used;
//! after moving it, or after `git init` around it, run this again: `--check <dir>` compares
//! the worktree the generation recorded with the one OpenCode would use now and fails,
//! saying to regenerate, when they differ. Running it again in place is a no-op; generated
//! files someone edited are reported as conflicts and nothing is written.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use managed_evidence::policy::{
    skill::TRANSPORT_SKILL_GROUP, skill::TRANSPORT_SKILL_NAME, skill::transport_skill,
};
use managed_evidence::workspace::detect::detect_task_support;
use managed_evidence::workspace::{
    FileChange, GenerateOptions, Generator, McpServer, OpenCodeCli, SkillCatalog, SkillsTree,
    TaskSupport, WorkspaceSkill, check_placement,
};

const DEFAULT_SKILLS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/crates/opencode-workspace/tests/fixtures/agentkit/skills"
);

/// The variable naming the `opencode` program when `--opencode` is not given.
const OPENCODE_BIN_ENV: &str = "OPENCODE_BIN";

const USAGE: &str = "\
usage: init_workspace <dir> [--skills <agentkit/skills>] [--catalog <agentkit/config/SKILL_CATALOG.md>]
         [--task-tool detect|load-skills|prompt|none] [--opencode <path>]
         [--mcp <name>=<command>]... [--mcp-arg <name>=<arg>]... [--mcp-env <name>=<KEY>=<VALUE>]...
         [--mcp-remote <name>=<url>]...
       init_workspace --check <dir>
  --check      checks that OpenCode would use the worktree the workspace was generated for
  --skills     the skills tree (default: the fixture tree of crates/opencode-workspace)
  --catalog    the skill catalog source (default: the built-in Investibook catalog)
  --task-tool  the delegation form (default: prompt); detect asks the installed OpenCode
  --opencode   the opencode program for detect (default: $OPENCODE_BIN, else opencode on PATH)
  --mcp        registers a local MCP server; --mcp-arg and --mcp-env add to a registered one
  --mcp-remote registers a remote MCP server (Streamable HTTP, header X-Evidence-Session
               from {env:EVIDENCE_SESSION_TOKEN}, OAuth off)";

enum TaskTool {
    Detect,
    Fixed(TaskSupport),
}

struct Args {
    dir: PathBuf,
    check: bool,
    skills: PathBuf,
    catalog: Option<PathBuf>,
    task_tool: TaskTool,
    opencode: PathBuf,
    mcp: Vec<(String, String)>,
    mcp_args: Vec<(String, String)>,
    mcp_env: Vec<(String, String, String)>,
    mcp_remote: Vec<(String, String)>,
}

/// What the command line asks for: a workspace, or the usage.
enum Parsed {
    Run(Args),
    Help,
}

fn pair(value: Option<&str>, flag: &str, form: &str) -> Result<(String, String), String> {
    value
        .and_then(|v| v.split_once('='))
        .filter(|(name, _)| !name.is_empty())
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .ok_or_else(|| format!("{flag} takes {form}, got {:?}", value.unwrap_or_default()))
}

/// The program `--task-tool detect` asks: `--opencode`, else `OPENCODE_BIN`, else
/// `opencode` on `PATH`.
fn default_opencode() -> PathBuf {
    std::env::var_os(OPENCODE_BIN_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("opencode"), PathBuf::from)
}

fn parse_args(items: impl IntoIterator<Item = String>) -> Result<Parsed, String> {
    let mut args = Args {
        dir: PathBuf::new(),
        check: false,
        skills: PathBuf::from(DEFAULT_SKILLS),
        catalog: None,
        task_tool: TaskTool::Fixed(TaskSupport::PromptList),
        opencode: default_opencode(),
        mcp: Vec::new(),
        mcp_args: Vec::new(),
        mcp_env: Vec::new(),
        mcp_remote: Vec::new(),
    };
    let mut dir = None;
    let mut items = items.into_iter();
    while let Some(arg) = items.next() {
        match arg.as_str() {
            "--skills" => {
                args.skills = items
                    .next()
                    .map(PathBuf::from)
                    .ok_or("--skills needs a path")?
            }
            "--catalog" => {
                args.catalog = Some(
                    items
                        .next()
                        .map(PathBuf::from)
                        .ok_or("--catalog needs a path")?,
                );
            }
            "--opencode" => {
                args.opencode = items
                    .next()
                    .map(PathBuf::from)
                    .ok_or("--opencode needs a path")?;
            }
            "--task-tool" => {
                args.task_tool = match items.next().as_deref() {
                    Some("detect") => TaskTool::Detect,
                    Some("load-skills") => TaskTool::Fixed(TaskSupport::LoadSkillsArgument),
                    Some("prompt") => TaskTool::Fixed(TaskSupport::PromptList),
                    Some("none") => TaskTool::Fixed(TaskSupport::Unavailable),
                    _ => {
                        return Err(
                            "--task-tool takes detect, load-skills, prompt or none".to_owned()
                        );
                    }
                };
            }
            "--mcp" => args
                .mcp
                .push(pair(items.next().as_deref(), "--mcp", "<name>=<command>")?),
            "--mcp-arg" => {
                args.mcp_args
                    .push(pair(items.next().as_deref(), "--mcp-arg", "<name>=<arg>")?)
            }
            "--mcp-env" => {
                let form = "<name>=<KEY>=<VALUE>";
                let value = items.next();
                let (name, assignment) = pair(value.as_deref(), "--mcp-env", form)?;
                let (key, value) = pair(Some(&assignment), "--mcp-env", form).map_err(|_| {
                    format!(
                        "--mcp-env takes {form}, got {:?}",
                        value.unwrap_or_default()
                    )
                })?;
                args.mcp_env.push((name, key, value));
            }
            "--mcp-remote" => args.mcp_remote.push(pair(
                items.next().as_deref(),
                "--mcp-remote",
                "<name>=<url>",
            )?),
            "--check" => args.check = true,
            "-h" | "--help" => return Ok(Parsed::Help),
            other if dir.is_none() && !other.starts_with('-') => dir = Some(PathBuf::from(other)),
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    args.dir = dir.ok_or("no workspace folder given")?;
    check_server_names(&args)?;
    Ok(Parsed::Run(args))
}

/// Every `--mcp-arg` and `--mcp-env` names a server that `--mcp` registers: a misspelled
/// name would otherwise register the server without its arguments or variables.
fn check_server_names(args: &Args) -> Result<(), String> {
    let registered: Vec<&str> = args.mcp.iter().map(|(name, _)| name.as_str()).collect();
    let remote: Vec<&str> = args
        .mcp_remote
        .iter()
        .map(|(name, _)| name.as_str())
        .collect();
    let all: Vec<&str> = registered.iter().chain(&remote).copied().collect();
    for (i, name) in all.iter().enumerate() {
        if all[..i].contains(name) {
            return Err(format!(
                "the server {name:?} is registered twice (each --mcp and --mcp-remote names \
                 its own server)"
            ));
        }
    }
    let to_remote = args
        .mcp_args
        .iter()
        .map(|(name, _)| ("--mcp-arg", name))
        .chain(args.mcp_env.iter().map(|(name, _, _)| ("--mcp-env", name)))
        .find(|(_, name)| remote.contains(&name.as_str()));
    if let Some((flag, name)) = to_remote {
        return Err(format!(
            "{flag} names the remote server {name:?}: a remote server runs apart, with its own \
             arguments and environment, and OpenCode only connects to it"
        ));
    }
    let named = args
        .mcp_args
        .iter()
        .map(|(name, _)| ("--mcp-arg", name))
        .chain(args.mcp_env.iter().map(|(name, _, _)| ("--mcp-env", name)));
    for (flag, name) in named {
        if !registered.contains(&name.as_str()) {
            let known = if registered.is_empty() {
                "no --mcp was given".to_owned()
            } else {
                format!("registered: {}", registered.join(", "))
            };
            return Err(format!(
                "{flag} names the server {name:?}, which no --mcp registers ({known})"
            ));
        }
    }
    Ok(())
}

fn options(
    args: &Args,
    support: TaskSupport,
) -> Result<GenerateOptions, Box<dyn std::error::Error>> {
    let transport = WorkspaceSkill::new(
        TRANSPORT_SKILL_NAME,
        TRANSPORT_SKILL_GROUP,
        transport_skill(),
    )?;
    let mut options = GenerateOptions::default()
        .with_task_support(support)
        .with_workspace_skill(transport);
    for (name, command) in &args.mcp {
        let mut server = McpServer::new(name.as_str(), command.as_str())?;
        for (_, arg) in args.mcp_args.iter().filter(|(n, _)| n == name) {
            server = server.arg(arg.as_str());
        }
        for (_, key, value) in args.mcp_env.iter().filter(|(n, _, _)| n == name) {
            server = server.env(key.as_str(), value.as_str());
        }
        options = options.with_mcp_server(server);
    }
    for (name, url) in &args.mcp_remote {
        options = options.with_mcp_server(McpServer::remote(name.as_str(), url.as_str())?);
    }
    Ok(options)
}

/// The layout to write: the one `--task-tool` fixes, or the one the installed OpenCode's
/// answer calls for.
fn task_support(args: &Args) -> Result<TaskSupport, Box<dyn std::error::Error>> {
    match args.task_tool {
        TaskTool::Fixed(support) => Ok(support),
        TaskTool::Detect => {
            let probe = detect_task_support(&OpenCodeCli::new(&args.opencode), &args.dir).map_err(|e| {
                format!(
                    "{e}\n--task-tool detect runs {}: name the opencode program with --opencode <path> \
                     or {OPENCODE_BIN_ENV} (npm install opencode-ai installs it), or choose the form \
                     with --task-tool prompt|none",
                    args.opencode.display()
                )
            })?;
            println!(
                "OpenCode gives diagnosis-orchestrator the task tool: {}",
                probe.report.has_tool("task")
            );
            Ok(probe.support)
        }
    }
}

/// `--check`: the recorded placement is the one OpenCode would use now.
fn check(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let checked = check_placement(&args.dir)?;
    println!(
        "placement holds: OpenCode uses the worktree {} and the workspace is at {} in it, as generated",
        checked.worktree.path().display(),
        checked.placement
    );
    Ok(())
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.check {
        return check(args);
    }
    std::fs::create_dir_all(&args.dir)?;
    let skills = SkillsTree::load(&args.skills)?;
    let catalog = match &args.catalog {
        Some(path) => SkillCatalog::load(path)?,
        None => SkillCatalog::investibook()?,
    };
    let support = task_support(args)?;
    let generator = Generator::new(&catalog, &skills, options(args, support)?)?;
    let report = generator.write(&args.dir)?;
    println!("workspace: {}", args.dir.display());
    println!("mode: {:?}", report.mode);
    println!("place in the OpenCode worktree: {}", report.placement);
    for dir in &report.created_dirs {
        println!("  created folder {dir}/");
    }
    for (path, change) in &report.files {
        let what = match change {
            FileChange::Created => "created",
            FileChange::Updated => "updated",
            FileChange::Unchanged => "unchanged",
        };
        println!("  {what:9} {path}");
    }
    for path in &report.stale {
        println!("  left in place (no longer used) {path}");
    }
    match (&args.task_tool, report.notice()) {
        // Chosen on the command line, not found missing: say so.
        (TaskTool::Fixed(TaskSupport::Unavailable), Some(_)) => println!(
            "NOTE: Multi-agent diagnosis is not in effect: --task-tool none writes the \
             single-agent fallback, so a single agent runs the whole diagnosis."
        ),
        (_, Some(notice)) => println!("NOTE: {notice}"),
        (_, None) => {}
    }
    println!("open it with: cd {} && opencode", args.dir.display());
    Ok(())
}

fn main() -> ExitCode {
    let items = std::env::args_os()
        .skip(1)
        .map(|a: OsString| a.to_string_lossy().into_owned());
    match parse_args(items) {
        Ok(Parsed::Help) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Parsed::Run(args)) => match run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Err(message) => {
            eprintln!("init_workspace: {message}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
