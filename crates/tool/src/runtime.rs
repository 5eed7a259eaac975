//! The async runtime a tool process runs its work on, and the exit status it ends with.

use std::future::Future;
use std::process::ExitCode;

use crate::ToolError;

/// How long the end of a process waits for work still running on the runtime's
/// blocking pool.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// Runs `work` to its end on a new multi-thread runtime and gives the exit status:
/// success when it finished, failure (after printing `{prefix}: {error}` on stderr)
/// when the runtime could not start or `work` failed.
pub(crate) fn block_on_to_exit(
    name: &str,
    prefix: &str,
    work: impl Future<Output = Result<(), ToolError>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name}: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(work);
    // Work the call gave up on (a turn-ledger lock waited for past the deadline) does not
    // hold the exit: the result and the audit record are written.
    runtime.shutdown_timeout(SHUTDOWN_WAIT);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{prefix}: {e}");
            ExitCode::FAILURE
        }
    }
}
