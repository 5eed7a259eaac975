//! The command line of a tool binary: with no argument it is the tool-sandbox
//! entrypoint (one call: arguments on stdin, one result on stdout); with `--mcp` it is
//! the package's own MCP server over stdio. Either way the same binary, the one the
//! package digest covers, and the same sandbox call.

use std::process::ExitCode;

use crate::entry::run_entrypoint;
use crate::mcp::{MCP_FLAG, serve_mcp};
use crate::tools::PackageTool;

/// Runs the binary of the tool `T` with the process's command-line arguments: none for
/// the entrypoint, [`MCP_FLAG`] for the MCP server, `--help` (or `-h`) for the usage on
/// stdout (exit 0). Anything else is a usage error (exit 2). The tool is a type, so a binary holds only its own connector's code.
pub fn run_tool_binary<T: PackageTool>() -> ExitCode {
    // `args_os`: an argument that is not Unicode is a usage error, never a panic.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let usage = format!(
        "usage: {name}            (tool-sandbox entrypoint: arguments on stdin)\n       {name} {MCP_FLAG}      (MCP server over stdio)",
        name = T::TOOL.binary_name()
    );
    match args.as_slice() {
        [] => run_entrypoint::<T>(),
        [flag] if flag.as_os_str() == MCP_FLAG => serve_mcp::<T>(),
        [flag] if flag.as_os_str() == "--help" || flag.as_os_str() == "-h" => {
            println!("{usage}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{usage}");
            ExitCode::from(2)
        }
    }
}
