//! The entrypoint flow of a tool binary: find and hash its own deployable package, read
//! the runtime context (model arguments on stdin, the policy envelope, the verification
//! keys, the injected secrets, the deployment configuration), run the one sandbox call,
//! and write one result and one audit record. A runtime-context failure is a result too
//! (exit 0); a non-zero exit only when not even a result could be written.

use std::io::Read as _;
use std::process::ExitCode;
use std::time::Instant;

use crate::ToolError;
use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::output::write_outputs;
use crate::process::{Served, unloaded};
use crate::runtime::block_on_to_exit;
use crate::tools::PackageTool;

/// Runs the entrypoint of the tool `T` in this process and returns its exit status:
/// success whenever a result was written.
pub fn run_entrypoint<T: PackageTool>() -> ExitCode {
    let name = T::TOOL.binary_name();
    block_on_to_exit(name, &format!("{name}: no result produced"), entry::<T>())
}

async fn entry<T: PackageTool>() -> Result<(), ToolError> {
    let started = Instant::now();
    let (result, audit) = match Served::<T>::start() {
        Ok(served) => served.answer(read_args).await?,
        Err(failure) => unloaded(T::TOOL, &failure, started)?,
    };
    write_outputs(&result, &audit)
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
