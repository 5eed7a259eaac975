//! Writes an Investibook OpenCode workspace into a folder.
//!
//! ```text
//! cargo run --example init_workspace -- <dir> [--skills <agentkit/skills>] [--task-tool load-skills|prompt|none]
//! ```
//!
//! Without `--skills` the fixture skills tree of the `opencode-workspace` crate is used.
//! Running it again is a no-op; files the generator wrote and someone edited are reported
//! as conflicts and nothing is written.

use std::path::PathBuf;
use std::process::ExitCode;

use managed_evidence::workspace::{
    FileChange, GenerateOptions, Generator, SkillCatalog, SkillsTree, TaskSupport,
};

const DEFAULT_SKILLS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/crates/opencode-workspace/tests/fixtures/agentkit/skills"
);

const USAGE: &str = "usage: init_workspace <dir> [--skills <agentkit/skills>] [--task-tool load-skills|prompt|none]";

struct Args {
    dir: PathBuf,
    skills: PathBuf,
    support: TaskSupport,
}

fn parse_args() -> Result<Args, String> {
    let mut dir = None;
    let mut skills = PathBuf::from(DEFAULT_SKILLS);
    let mut support = TaskSupport::PromptList;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--skills" => {
                skills = args
                    .next()
                    .map(PathBuf::from)
                    .ok_or("--skills needs a path")?;
            }
            "--task-tool" => {
                support = match args.next().as_deref() {
                    Some("load-skills") => TaskSupport::LoadSkillsArgument,
                    Some("prompt") => TaskSupport::PromptList,
                    Some("none") => TaskSupport::Unavailable,
                    _ => return Err("--task-tool takes load-skills, prompt or none".to_owned()),
                };
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other if dir.is_none() && !other.starts_with('-') => dir = Some(PathBuf::from(other)),
            other => return Err(format!("unexpected argument {other:?}\n{USAGE}")),
        }
    }
    Ok(Args {
        dir: dir.ok_or(USAGE)?,
        skills,
        support,
    })
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(&args.dir)?;
    let skills = SkillsTree::load(&args.skills)?;
    let catalog = SkillCatalog::investibook()?;
    let options = GenerateOptions::default().with_task_support(args.support);
    let generator = Generator::new(&catalog, &skills, options)?;
    let report = generator.write(&args.dir)?;
    println!("workspace: {}", args.dir.display());
    println!("mode: {:?}", report.mode);
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
