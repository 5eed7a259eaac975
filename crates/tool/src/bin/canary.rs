//! The rollout canary: runs the representative read-only set of every provider and
//! target through the deployed packages' own binaries (a process per call, real
//! envelopes, turn admission) and writes the rollout evidence.
//!
//! ```text
//! canary --deployment FILE --out DIR            run, write DIR/rollout-evidence.{json,md}
//! canary policies --deployment FILE --out DIR   write the policies to sign ahead
//! ```
//!
//! The deployment file (`schemas/canary-deployment.schema.json`) names each package's
//! deployable folder and configuration, the sandboxes' verification keys and how
//! envelopes are obtained; each package's secrets come from this command's environment,
//! under the names its manifest binds them to. Exit status: 0 when every provider is
//! verified, 1 when one is not, 2 when the canary cannot run (bad arguments or
//! deployment).

use std::path::PathBuf;
use std::process::ExitCode;

use evidence_tool::rollout::{self, Deployment, REPORT_JSON, REPORT_MARKDOWN};

const USAGE: &str = "\
usage: canary --deployment FILE --out DIR
       canary policies --deployment FILE --out DIR";

struct Args {
    policies: bool,
    deployment: PathBuf,
    out: PathBuf,
}

fn parse() -> Result<Option<Args>, String> {
    let mut args = std::env::args_os().skip(1).peekable();
    let policies = args.peek().is_some_and(|a| a == "policies");
    if policies {
        args.next();
    }
    let (mut deployment, mut out) = (None, None);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .map(PathBuf::from)
                .ok_or_else(|| format!("{} needs a value", arg.to_string_lossy()))
        };
        match arg.to_str() {
            Some("--deployment") => deployment = Some(value()?),
            Some("--out") => out = Some(value()?),
            Some("-h" | "--help") => return Ok(None),
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    Ok(Some(Args {
        policies,
        deployment: deployment.ok_or("--deployment is required")?,
        out: out.ok_or("--out is required")?,
    }))
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("canary: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let deployment = match Deployment::load(&args.deployment, &|name| std::env::var(name).ok()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("canary: {e}");
            return ExitCode::from(2);
        }
    };
    if args.policies {
        return match rollout::write_policies(&deployment, &args.out) {
            Ok(written) => {
                for (policy, package) in written {
                    let envelope = policy.with_extension("").with_extension("envelope");
                    println!(
                        "sign-policy --package-dir {} < {} > {}",
                        package.display(),
                        policy.display(),
                        envelope.display()
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("canary: {e}");
                ExitCode::from(2)
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("canary: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(rollout::run_canary(&deployment, &args.out)) {
        Ok(report) => {
            for p in &report.providers {
                println!(
                    "{}: {}{}",
                    p.provider,
                    if p.verified {
                        "verified"
                    } else {
                        "NOT verified"
                    },
                    if p.targets_unverified.is_empty() {
                        String::new()
                    } else {
                        format!(" (not verified: {})", p.targets_unverified.join(", "))
                    }
                );
            }
            println!(
                "report: {} and {}",
                args.out.join(REPORT_JSON).display(),
                args.out.join(REPORT_MARKDOWN).display()
            );
            if report.verified {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("canary: {e}");
            ExitCode::from(2)
        }
    }
}
