//! One canary call as a sandbox runs it: a new process of the package's own entrypoint
//! binary with nothing but the runtime context (envelope file, verification keys, audit
//! log, turn ledger), the package's deployment configuration and its secrets in its
//! environment, the model's arguments on stdin, and one result on stdout.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use evidence_result::ToolResult;
use secrecy::ExposeSecret as _;
use tokio::io::AsyncWriteExt as _;

use super::deployment::LoadedPackage;
use crate::context::{AUDIT_LOG_ENV, POLICY_KEYS_ENV, TRUSTED_CONTEXT_ENV, TURN_LEDGER_ENV};

/// The runtime context the canary gives every call.
pub(crate) struct CallContext<'a> {
    pub(crate) envelope: &'a Path,
    pub(crate) keys: &'a str,
    pub(crate) audit_log: &'a Path,
    pub(crate) turn_ledger: &'a Path,
}

/// What one process produced.
pub(crate) enum Produced {
    /// A result on stdout.
    Result(Box<ToolResult>),
    /// No result: the canary's code for it and what it saw.
    Nothing { code: &'static str, detail: String },
}

/// Runs one call of `package` with `args`; `timeout` bounds the process (the package's
/// own limit plus a margin). Returns what it produced and its wall-clock time in ms.
pub(crate) async fn call(
    package: &LoadedPackage,
    context: &CallContext<'_>,
    args: &str,
    timeout: Duration,
) -> (Produced, f64) {
    let started = Instant::now();
    let produced = run(package, context, args, timeout).await;
    let ms = (started.elapsed().as_secs_f64() * 10_000.0).round() / 10.0;
    (produced, ms)
}

async fn run(
    package: &LoadedPackage,
    context: &CallContext<'_>,
    args: &str,
    timeout: Duration,
) -> Produced {
    let mut command = tokio::process::Command::new(&package.entrypoint);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env(TRUSTED_CONTEXT_ENV, context.envelope)
        .env(POLICY_KEYS_ENV, context.keys)
        .env(AUDIT_LOG_ENV, context.audit_log)
        .env(TURN_LEDGER_ENV, context.turn_ledger)
        .envs(&package.config)
        .envs(
            package
                .secrets
                .iter()
                .map(|(name, value)| (name, value.expose_secret())),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return Produced::Nothing {
                code: "canary_process_failed",
                detail: format!("cannot start {}: {e}", package.entrypoint.display()),
            };
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        // A binary that exits before reading its arguments answers on stdout anyway.
        let _ = stdin.write_all(args.as_bytes()).await;
    }
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => {
            return Produced::Nothing {
                code: "canary_process_failed",
                detail: format!("waiting for {}: {e}", package.entrypoint.display()),
            };
        }
        Err(_) => {
            return Produced::Nothing {
                code: "canary_timeout",
                detail: format!("no result within {} s", timeout.as_secs()),
            };
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    match ToolResult::from_json(stdout.trim()) {
        Ok(result) => Produced::Result(Box::new(result)),
        Err(e) => Produced::Nothing {
            code: "canary_process_failed",
            detail: format!(
                "{} exited with {} and no result ({e}); its last stderr line: {}",
                package.entrypoint.display(),
                output.status,
                last_line(&output.stderr)
            ),
        },
    }
}

/// The last non-empty stderr line, at most 200 characters.
fn last_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(200)
        .collect()
}
