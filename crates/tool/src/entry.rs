//! The entrypoint flow of a tool binary: find and hash its own deployable package, read
//! the runtime context (model arguments on stdin, the policy envelope, the verification
//! keys, the injected secrets, the deployment configuration), run the one sandbox call,
//! and write one result and one audit record. A runtime-context failure is a result too
//! (exit 0); a non-zero exit only when not even a result could be written. Without a
//! turn ledger (`EVIDENCE_TURN_LEDGER` unset) the runtime that starts the entrypoint
//! owns the turn; given one, the call is admitted there as over MCP. The call's deadline
//! (`crate::deadline`) counts from the start of the process.

use std::io::Read as _;
use std::process::ExitCode;
use std::time::Instant;

use crate::ToolError;
use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::output::write_outputs;
use crate::runtime::block_on_to_exit;
use crate::runtime_context::RuntimeContext;
use crate::sandbox::{CallEnvelope, Sandbox, unloaded};
use crate::tools::PackageTool;

/// Runs the entrypoint of the tool `T` in this process and returns its exit status:
/// success whenever a result was written.
pub fn run_entrypoint<T: PackageTool>() -> ExitCode {
    let name = T::TOOL.binary_name();
    block_on_to_exit(name, &format!("{name}: no result produced"), entry::<T>())
}

async fn entry<T: PackageTool>() -> Result<(), ToolError> {
    let started = Instant::now();
    let context = RuntimeContext::from_env(T::TOOL);
    let audit_log = context.audit_log().map(ToOwned::to_owned);
    let (result, audit) = match Sandbox::<T>::start(context) {
        // The call's deadline counts from the start of the process.
        Ok(sandbox) => {
            let deadline = sandbox.deadline(started);
            sandbox
                .answer_with(read_args, CallEnvelope::Context, started, deadline, None)
                .await?
        }
        Err(failure) => unloaded(T::TOOL, &failure, started)?,
    };
    write_outputs(&result, &audit, audit_log.as_deref())
}

fn read_args() -> Result<String, RuntimeFailure> {
    let mut args = String::new();
    std::io::stdin().read_to_string(&mut args).map_err(|e| {
        RuntimeFailure::new(
            RuntimeFailureKind::InputUnreadable,
            format!("the arguments on stdin cannot be read as UTF-8 text: {e}"),
        )
    })?;
    Ok(args)
}
