//! The packaging command: builds a deployable package folder from a package's reviewable
//! source and the tool binary, and prints its identity, revision and digest (the digest
//! that secrets bind to and `sign-policy --package-dir` signs). Its second command checks
//! a browser storage state (the Wetech secret `WETECH_STORAGE_STATE`) before it is
//! rotated in; its third validates an agent profile against a packages folder and says
//! which pins the model is offered and which are passive, and, given rollout evidence,
//! whether it justifies every offered pin.
//!
//! ```text
//! package-tool --source packages/managed_auto_oncall_clinic/v3 --out DIR [--binary PATH]
//! package-tool check-storage-state [--json] FILE
//! package-tool check-profile --packages DIR [--profile FILE] [--rollout REPORT]
//! ```
//!
//! Without `--binary`, the tool binary named like the entrypoint's file (`clinic-tool`)
//! next to this command is used (`cargo build --release -p evidence-tool` builds them
//! side by side).
//!
//! `check-storage-state` reads Playwright `storageState` JSON from FILE (`-` for stdin)
//! and prints, for every cookie, localStorage entry and value derived from them (JSON
//! leaves, JWT segments), whether the output guard will cover it, leave it unguarded as
//! short page state, or refuse the state, and why; never a value. A text table by
//! default, JSON with `--json`. Exit status: 0 when the secret binding would accept the
//! state, 1 when it would refuse it, 2 on a usage error, an unreadable file or text that
//! is not `storageState` JSON.
//!
//! `check-profile` loads the packages folder's catalog (`DIR/catalog.json` and the
//! revision folders it lists, digests recomputed) and the agent profile (`FILE`, by
//! default `DIR/auto_oncall_agent.json`), validates the profile and prints each pin:
//! `installed: offered` or `passive: not offered`. With `--rollout` (a canary's
//! `rollout-evidence.json`) every offered pin must have been run by the canary with the
//! same revision and digest and its provider verified. Exit status: 0 valid (and
//! justified), 1 refused or not justified, 2 on a usage error or an unreadable file.

use std::error::Error;
use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use secrecy::SecretString;

const USAGE: &str = "usage: package-tool --source DIR --out DIR [--binary PATH]
       package-tool check-storage-state [--json] FILE   (FILE `-` reads stdin)
       package-tool check-profile --packages DIR [--profile FILE] [--rollout REPORT]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("check-storage-state") => check_storage_state(&args[1..]),
        Some("check-profile") => check_profile(&args[1..]),
        _ => package(args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("package-tool: {e}");
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// `package-tool --source DIR --out DIR [--binary PATH]`.
fn package(args: Vec<String>) -> Result<(), Box<dyn Error>> {
    let mut source: Option<PathBuf> = None;
    let mut out: Option<PathBuf> = None;
    let mut binary: Option<PathBuf> = None;
    let mut args = args.into_iter();
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

/// `package-tool check-storage-state [--json] FILE`: 0 accepted, 1 refused.
fn check_storage_state(args: &[String]) -> Result<ExitCode, Box<dyn Error>> {
    let mut json = false;
    let mut file: Option<&str> = None;
    for arg in args {
        match arg.as_str() {
            "--json" => json = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            "-" => file = set_once(file, "-")?,
            other if other.starts_with('-') => {
                return Err(format!("unknown argument {other:?}").into());
            }
            other => file = set_once(file, other)?,
        }
    }
    let file = file.ok_or("check-storage-state needs a FILE (`-` for stdin)")?;
    let (name, text) = if file == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read stdin: {e}"))?;
        ("stdin", text)
    } else {
        let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))?;
        (file, text)
    };
    let report = evidence_package::storage_state::check(name, &SecretString::from(text))?;
    let printed = if json {
        format!("{}\n", serde_json::to_string_pretty(&report)?)
    } else {
        report.to_string()
    };
    std::io::stdout()
        .lock()
        .write_all(printed.as_bytes())
        .map_err(|e| format!("cannot write the report: {e}"))?;
    Ok(if report.accepted() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `arg` as the one FILE, or an error when a FILE was given already.
fn set_once<'a>(file: Option<&'a str>, arg: &'a str) -> Result<Option<&'a str>, String> {
    match file {
        Some(_) => Err("check-storage-state takes one FILE".to_owned()),
        None => Ok(Some(arg)),
    }
}

/// `package-tool check-profile --packages DIR [--profile FILE] [--rollout REPORT]`: 0
/// valid (and justified), 1 refused or not justified.
fn check_profile(args: &[String]) -> Result<ExitCode, Box<dyn Error>> {
    let (mut packages, mut profile, mut rollout) = (None, None, None);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .map(PathBuf::from)
                .ok_or_else(|| format!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--packages" => packages = Some(value()?),
            "--profile" => profile = Some(value()?),
            "--rollout" => rollout = Some(value()?),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let packages: PathBuf = packages.ok_or("check-profile needs --packages DIR")?;
    let profile = profile.unwrap_or_else(|| packages.join("auto_oncall_agent.json"));
    let read = |path: &PathBuf| {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let catalog = evidence_package::Catalog::load(&packages)?;
    let profile = evidence_package::AgentProfile::from_json(&read(&profile)?)?;
    let report = match profile.validate(&catalog) {
        Ok(report) => report,
        Err(e) => {
            println!("refused: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let mut pins: Vec<_> = report.packages.iter().chain(&report.passive).collect();
    pins.sort_by(|a, b| (&a.identity, a.revision).cmp(&(&b.identity, b.revision)));
    for pin in &pins {
        let offered = if report.offers(&pin.identity, pin.revision) {
            "installed: offered"
        } else {
            "passive: not offered"
        };
        println!("{} {} {offered} {}", pin.identity, pin.revision, pin.digest);
    }
    let Some(rollout) = rollout else {
        return Ok(ExitCode::SUCCESS);
    };
    let evidence: evidence_tool::rollout::RolloutReport = serde_json::from_str(&read(&rollout)?)
        .map_err(|e| format!("{} is not rollout evidence: {e}", rollout.display()))?;
    let mut justified = true;
    for pin in &report.packages {
        let revision = pin.revision.to_string();
        match evidence_tool::rollout::justifies(&evidence, &pin.identity, &revision, &pin.digest) {
            Ok(()) => println!(
                "{} {revision}: justified by the rollout evidence of {}",
                pin.identity, evidence.started_at
            ),
            Err(why) => {
                justified = false;
                println!("{} {revision}: NOT justified: {why}", pin.identity);
            }
        }
    }
    Ok(if justified {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
