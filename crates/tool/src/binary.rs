//! The command line of a tool binary: with no argument it is the tool-sandbox
//! entrypoint (one call: arguments on stdin, one result on stdout); with `--mcp` it is
//! the package's own MCP server over stdio, with `--mcp-http ADDR` the same server over
//! Streamable HTTP (plain on a loopback address, HTTPS with `--tls-cert` and `--tls-key`). Either way the same binary, the one the
//! package digest covers, and the same sandbox call.

use std::process::ExitCode;

use crate::entry::run_entrypoint;
use crate::log::LOG_FORMAT_FLAG;
use crate::mcp::{
    ALLOW_HOST_FLAG, ALLOW_ORIGIN_FLAG, BROWSER_MAX_CALLS_FLAG, BROWSER_MAX_PSS_FLAG, BrowserFlags,
    ENVELOPES_ON_MCP_PORT_FLAG, ENVELOPES_PATH, HttpListen, HttpListenError, MAX_CONNECTIONS_FLAG,
    MAX_CONNECTIONS_PER_PEER_FLAG, MAX_SESSIONS_FLAG, MAX_SESSIONS_PER_PEER_FLAG, MAX_STREAMS_FLAG,
    MAX_STREAMS_PER_SESSION_FLAG, MCP_FLAG, MCP_HTTP_FLAG, MCP_HTTP_PATH, McpTransport,
    OPERATOR_FLAG, SESSION_IDLE_FLAG, TLS_CERT_FLAG, TLS_KEY_FLAG, serve_mcp,
};
use crate::tool_kind::Tool;
use crate::tools::PackageTool;

/// The usage text of the binary `name`.
fn usage(name: &str) -> String {
    // The description under the HTTP form starts where those of the forms above do.
    let pad = " ".repeat(name.len() + 12);
    let warm = warm_usage(name);
    format!(
        "usage: {name}            (tool-sandbox entrypoint: arguments on stdin)\n       \
         {name} {MCP_FLAG}      (MCP server over stdio)\n       \
         {name} {MCP_HTTP_FLAG} IP:PORT {OPERATOR_FLAG} IP:PORT [{TLS_CERT_FLAG} FILE {TLS_KEY_FLAG} FILE]\n       \
         {pad}[{ALLOW_HOST_FLAG} HOST]... [{ALLOW_ORIGIN_FLAG} ORIGIN]...\n       \
         {pad}[{MAX_CONNECTIONS_FLAG} N] [{MAX_CONNECTIONS_PER_PEER_FLAG} N]\n       \
         {pad}[{MAX_SESSIONS_FLAG} N] [{MAX_SESSIONS_PER_PEER_FLAG} N]\n       \
         {pad}[{MAX_STREAMS_FLAG} N] [{MAX_STREAMS_PER_SESSION_FLAG} N]\n       \
         {pad}[{SESSION_IDLE_FLAG} N] [{ENVELOPES_ON_MCP_PORT_FLAG}] [{LOG_FORMAT_FLAG} json|plain]\n       \
         {pad}(MCP server over Streamable HTTP at http(s)://IP:PORT{MCP_HTTP_PATH}, envelope\n       \
         {pad}deliveries at {ENVELOPES_PATH} of the {OPERATOR_FLAG} listener; plain HTTP on\n       \
         {pad}loopback IPs only, any other IP needs TLS; the bounds and their defaults:\n       \
         {pad}docs/reference/mcp-servers.md#bounds){warm}"
    )
}

/// The warm browser's flags, in the usage of `wetech-tool` only.
fn warm_usage(name: &str) -> String {
    if name != Tool::Wetech.binary_name() {
        return String::new();
    }
    let pad = " ".repeat(name.len() + 12);
    format!(
        "\n       {pad}{MCP_FLAG} or {MCP_HTTP_FLAG} ... also take [{BROWSER_MAX_CALLS_FLAG} N] \
         [{BROWSER_MAX_PSS_FLAG} MIB]\n       \
         {pad}(the warm browser's bounds: docs/reference/mcp-servers.md#the-warm-wetech-browser)"
    )
}

/// Runs the binary of the tool `T` with the process's command-line arguments: none for
/// the entrypoint, [`MCP_FLAG`] for the MCP server over stdio, [`MCP_HTTP_FLAG`] and its
/// address for the server over Streamable HTTP, `--help` (or `-h`) for the usage on
/// stdout (exit 0). A non-loopback address without TLS is refused (exit 1, saying
/// why); anything
/// else is a usage error (exit 2). The tool is a type, so a binary holds only its own
/// connector's code.
pub fn run_tool_binary<T: PackageTool>() -> ExitCode {
    // `args_os`: an argument that is not Unicode is a usage error, never a panic.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let name = T::TOOL.binary_name();
    // The warm browser's flags: only `wetech-tool`'s servers keep a browser.
    let serving = args
        .first()
        .is_some_and(|f| f.as_os_str() == MCP_FLAG || f.as_os_str() == MCP_HTTP_FLAG);
    let browser = match BrowserFlags::take_from(&mut args) {
        Ok(flags) if flags.given() && !(serving && T::TOOL == Tool::Wetech) => {
            eprintln!(
                "{name}: {BROWSER_MAX_CALLS_FLAG} and {BROWSER_MAX_PSS_FLAG} are for \
                 wetech-tool's servers ({MCP_FLAG}, {MCP_HTTP_FLAG})\n{}",
                usage(name)
            );
            return ExitCode::from(2);
        }
        Ok(flags) => flags,
        Err(e) => {
            eprintln!("{name}: {e}\n{}", usage(name));
            return ExitCode::from(2);
        }
    };
    match args.as_slice() {
        [] => run_entrypoint::<T>(),
        [flag] if flag.as_os_str() == MCP_FLAG => serve_mcp::<T>(McpTransport::Stdio, browser),
        [flag, rest @ ..] if flag.as_os_str() == MCP_HTTP_FLAG => {
            match HttpListen::from_args(rest) {
                Ok(listen) => serve_mcp::<T>(McpTransport::Http(Box::new(listen)), browser),
                Err(
                    refused @ (HttpListenError::NotLoopback(_)
                    | HttpListenError::OperatorNotLoopback(_)),
                ) => {
                    eprintln!("{name} {MCP_HTTP_FLAG}: {refused}");
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("{name} {MCP_HTTP_FLAG}: {e}\n{}", usage(name));
                    ExitCode::from(2)
                }
            }
        }
        [flag] if flag.as_os_str() == "--help" || flag.as_os_str() == "-h" => {
            println!("{}", usage(name));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{}", usage(name));
            ExitCode::from(2)
        }
    }
}
