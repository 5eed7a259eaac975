//! The command line of a tool binary: with no argument it is the tool-sandbox
//! entrypoint (one call: arguments on stdin, one result on stdout); with `--mcp` it is
//! the package's own MCP server over stdio. Either way the same binary, the one the
//! package digest covers, and the same sandbox call.

use std::future::Future;
use std::process::ExitCode;

use crate::ToolError;

use crate::entry::run_entrypoint;
use crate::mcp::serve_mcp;
use crate::tools::Tool;

/// The flag that starts the MCP server.
pub const MCP_FLAG: &str = "--mcp";

/// Runs the binary of `tool` with the process's command-line arguments: none for the
/// entrypoint, [`MCP_FLAG`] for the MCP server. Anything else is a usage error (exit 2).
pub fn run_tool_binary(tool: Tool) -> ExitCode {
    // `args_os`: an argument that is not Unicode is a usage error, never a panic.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    match args.as_slice() {
        [] => run_entrypoint(tool),
        [flag] if flag.as_os_str() == MCP_FLAG => serve_mcp(tool),
        _ => {
            eprintln!(
                "usage: {name}            (tool-sandbox entrypoint: arguments on stdin)\n       {name} {MCP_FLAG}      (MCP server over stdio)",
                name = tool.binary_name()
            );
            ExitCode::from(2)
        }
    }
}

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
    match runtime.block_on(work) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{prefix}: {e}");
            ExitCode::FAILURE
        }
    }
}
