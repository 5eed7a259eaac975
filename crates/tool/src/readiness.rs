//! Whether a server can serve a call now, check by check, for its operator listener's
//! `/readyz` and the `ready` metric: the package it hashed at start is still the one on
//! disk, the policy verification keys are loaded, the turn ledger and the session store
//! answer within [`PROBE_WITHIN`] (a `PING` for Redis, a file written and removed for a
//! directory), and the audit log can be appended to. Each check says only whether it
//! passed; why it failed goes to stderr.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::ledger::TurnLedger;
use crate::runtime_context::RuntimeContext;
use crate::session_store::SessionStore;
use crate::shared_state::SharedState;

/// How long one probe of a store may take.
pub(crate) const PROBE_WITHIN: Duration = Duration::from_secs(1);

/// Runs every check; each name with whether it passed, and the failures' reasons.
pub(crate) fn checks(
    package_changed: bool,
    context: &RuntimeContext,
    sessions: Option<&SessionStore>,
) -> (Vec<(&'static str, bool)>, Vec<String>) {
    let mut why = Vec::new();
    let mut check = |name: &'static str, outcome: Result<(), String>| match outcome {
        Ok(()) => (name, true),
        Err(reason) => {
            why.push(format!("{name}: {reason}"));
            (name, false)
        }
    };
    let package = if package_changed {
        Err("the package folder changed since this process hashed it".to_owned())
    } else {
        Ok(())
    };
    let outcomes = vec![
        check("package", package),
        check(
            "policy_keys",
            context.keys().map(drop).map_err(|e| e.detail),
        ),
        check("turn_ledger", ledger(context)),
        check("session_store", sessions.map_or(Ok(()), session_store)),
        check("audit_log", audit_log(context.audit_log())),
    ];
    (outcomes, why)
}

fn ledger(context: &RuntimeContext) -> Result<(), String> {
    match context.turn_ledger().map_err(|e| e.detail)? {
        None => Ok(()),
        Some(TurnLedger::File(ledger)) => write_probe(ledger.dir()),
        Some(TurnLedger::Redis(ledger)) => ping(ledger.state()),
    }
}

fn session_store(store: &SessionStore) -> Result<(), String> {
    match store {
        SessionStore::File(files) => {
            std::fs::create_dir_all(files.dir())
                .map_err(|e| format!("{}: {e}", files.dir().display()))?;
            write_probe(files.dir())
        }
        SessionStore::Redis(redis) => ping(redis.state()),
    }
}

/// Writes a file in `dir` and removes it.
fn write_probe(dir: &Path) -> Result<(), String> {
    let probe = dir.join(format!(".ready-probe-{}", std::process::id()));
    let written = std::fs::write(&probe, b"ready\n");
    let _removed = std::fs::remove_file(&probe);
    written.map_err(|e| format!("{} cannot be written: {e}", dir.display()))
}

fn ping(state: &SharedState) -> Result<(), String> {
    let pong: String = state
        .with("pinged", PROBE_WITHIN, |c| redis::cmd("PING").query(c))
        .map_err(|e| e.to_string())?;
    if pong == "PONG" {
        Ok(())
    } else {
        Err(format!(
            "{} answered PING with {} bytes",
            state.shown(),
            pong.len()
        ))
    }
}

fn audit_log(path: Option<&Path>) -> Result<(), String> {
    let Some(path) = path else {
        return Ok(());
    };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.flush())
        .map_err(|e| format!("{} cannot be appended to: {e}", path.display()))
}
