//! The packaging command: builds a deployable package folder from a package's reviewable
//! source and the tool binary, and prints its identity, revision and digest (the digest
//! that secrets bind to and `sign-policy --package-dir` signs).
//!
//! ```text
//! package-tool --source packages/managed_auto_oncall_clinic/v3 --out DIR [--binary PATH]
//! ```
//!
//! Without `--binary`, the tool binary named like the entrypoint's file (`clinic-tool`)
//! next to this command is used (`cargo build --release -p evidence-tool` builds them
//! side by side).

use std::error::Error;
use std::path::PathBuf;

const USAGE: &str = "usage: package-tool --source DIR --out DIR [--binary PATH]";

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("package-tool: {e}");
            eprintln!("{USAGE}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let mut source: Option<PathBuf> = None;
    let mut out: Option<PathBuf> = None;
    let mut binary: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--source" => source = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--binary" => binary = Some(PathBuf::from(value()?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let source = source.ok_or("--source is required")?;
    let out = out.ok_or("--out is required")?;
    let binary = match binary {
        Some(b) => b,
        None => evidence_tool::deploy::sibling_binary(&source, &std::env::current_exe()?)?,
    };
    let package = evidence_tool::build_deployable(&source, &binary, &out)?;
    let summary = serde_json::json!({
        "identity": package.identity(),
        "revision": package.revision().to_string(),
        "digest": package.digest().to_string(),
        "path": out.display().to_string(),
    });
    println!("{summary}");
    Ok(())
}
