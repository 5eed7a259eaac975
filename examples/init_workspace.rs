//! Writes an Investibook OpenCode workspace into a folder.
//!
//! ```text
//! cargo run --example init_workspace -- <dir> [--skills <agentkit/skills>]
//!     [--catalog <agentkit/config/SKILL_CATALOG.md>]
//!     [--task-tool detect|load-skills|prompt|none] [--opencode <path to opencode>]
//!     [--mcp <name>=<command>]... [--mcp-arg <name>=<arg>]... [--mcp-env <name>=<KEY>=<VALUE>]...
//! ```
//!
//! Without `--skills` the fixture skills tree of the `opencode-workspace` crate is used;
//! without `--catalog` the built-in catalog. `--task-tool detect` asks the installed
//! OpenCode (`--opencode`, else `opencode` on `PATH`) whether the orchestrator gets the
//! Task tool and writes the three agents or the single-agent fallback accordingly.
//! `--mcp` registers a local MCP server (one per managed tool package, e.g.
//! `managed_auto_oncall_clinic=/opt/managed/clinic_tool`).
//!
//! Edit permissions name the files as OpenCode sees them from its worktree (the git root,
//! or `/` outside any repository), so the workspace is generated where it will be used;
//! after moving it, run this again. Running it again in place is a no-op; generated
//! files someone edited are reported as conflicts and nothing is written.

use std::path::PathBuf;
use std::process::ExitCode;

use managed_evidence::workspace::{
    FileChange, GenerateOptions, Generator, McpServer, OpenCodeCli, SkillCatalog, SkillsTree,
    TaskSupport, detect_task_support,
};

const DEFAULT_SKILLS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/crates/opencode-workspace/tests/fixtures/agentkit/skills"
);

const USAGE: &str = "usage: init_workspace <dir> [--skills <agentkit/skills>] [--catalog <SKILL_CATALOG.md>] [--task-tool detect|load-skills|prompt|none] [--opencode <path>] [--mcp <name>=<command>]... [--mcp-arg <name>=<arg>]... [--mcp-env <name>=<KEY>=<VALUE>]...";

enum TaskTool {
    Detect,
    Fixed(TaskSupport),
}

struct Args {
    dir: PathBuf,
    skills: PathBuf,
    catalog: Option<PathBuf>,
    task_tool: TaskTool,
    opencode: PathBuf,
    mcp: Vec<(String, String)>,
    mcp_args: Vec<(String, String)>,
    mcp_env: Vec<(String, String, String)>,
}

fn pair(value: Option<String>, flag: &str) -> Result<(String, String), String> {
    value
        .as_deref()
        .and_then(|v| v.split_once('='))
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .ok_or_else(|| format!("{flag} takes <name>=<value>"))
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        dir: PathBuf::new(),
        skills: PathBuf::from(DEFAULT_SKILLS),
        catalog: None,
        task_tool: TaskTool::Fixed(TaskSupport::PromptList),
        opencode: PathBuf::from("opencode"),
        mcp: Vec::new(),
        mcp_args: Vec::new(),
        mcp_env: Vec::new(),
    };
    let mut dir = None;
    let mut items = std::env::args().skip(1);
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
            "--mcp" => args.mcp.push(pair(items.next(), "--mcp")?),
            "--mcp-arg" => args.mcp_args.push(pair(items.next(), "--mcp-arg")?),
            "--mcp-env" => {
                let (name, assignment) = pair(items.next(), "--mcp-env")?;
                let (key, value) = pair(Some(assignment), "--mcp-env")?;
                args.mcp_env.push((name, key, value));
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other if dir.is_none() && !other.starts_with('-') => dir = Some(PathBuf::from(other)),
            other => return Err(format!("unexpected argument {other:?}\n{USAGE}")),
        }
    }
    args.dir = dir.ok_or(USAGE)?;
    Ok(args)
}

fn options(
    args: &Args,
    support: TaskSupport,
) -> Result<GenerateOptions, Box<dyn std::error::Error>> {
    let mut options = GenerateOptions::default().with_task_support(support);
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
    Ok(options)
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(&args.dir)?;
    let skills = SkillsTree::load(&args.skills)?;
    let catalog = match &args.catalog {
        Some(path) => SkillCatalog::load(path)?,
        None => SkillCatalog::investibook()?,
    };
    let support = match args.task_tool {
        TaskTool::Fixed(support) => support,
        TaskTool::Detect => {
            let probe = detect_task_support(&OpenCodeCli::new(&args.opencode), &args.dir)?;
            println!(
                "OpenCode gives diagnosis-orchestrator the task tool: {}",
                probe.report.has_tool("task")
            );
            probe.support
        }
    };
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
    if let Some(notice) = report.notice() {
        println!("NOTE: {notice}");
    }
    println!("open it with: cd {} && opencode", args.dir.display());
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
