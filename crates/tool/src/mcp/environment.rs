//! The environment a package's MCP server serves with: only its own variables. An MCP
//! client starts a local server with the client's whole environment plus the server's
//! own entries (OpenCode 1.18.33 does), so the other packages' secrets, the signer's key
//! or a proxy setting can be in it. Before it serves, the server replaces itself (`exec`,
//! same process) by the same binary with only the variables of its own runtime-context
//! contract ([`crate::context::CONTEXT_VARS`]: the runtime's, its deployment configuration, its
//! auth binding's secrets) and a few process basics; whatever else it was started with,
//! the process that serves never holds it.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;

use crate::ToolError;
use crate::context::{CONTEXT_VARS, ContextVar, ReadBy, SECRET_FILE_VARS, takes_file_form};
use crate::mcp::browser_flags::BrowserFlags;
use crate::mcp::listen::McpTransport;
use crate::secret_file::file_variable;
use crate::tool_kind::Tool;

/// Variables of the process itself a server keeps besides its package's own: search
/// path, home, temporary folder, locale, time zone and the TLS trust store location.
pub const PROCESS_BASICS: [&str; 8] = [
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "TZ",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// The variables the MCP server of `tool` serves with when they are set: those of
/// [`CONTEXT_VARS`] read by every tool or by this one, the file forms of its secrets
/// ([`SECRET_FILE_VARS`]: paths, never values) and [`PROCESS_BASICS`].
pub fn server_variables(tool: Tool) -> Vec<&'static str> {
    let own: Vec<&ContextVar> = CONTEXT_VARS
        .iter()
        .filter(|v| v.read_by == ReadBy::AllTools || v.read_by == tool.reader())
        .collect();
    let file_forms = SECRET_FILE_VARS.iter().copied().filter(|file| {
        own.iter()
            .any(|v| takes_file_form(v) && file_variable(v.name) == *file)
    });
    own.iter()
        .map(|v| v.name)
        .chain(file_forms)
        .chain(PROCESS_BASICS)
        .collect()
}

/// Returns when the environment holds only [`server_variables`]; otherwise replaces
/// the process by the same binary with the arguments of `transport` and `browser` and only those
/// variables, and returns only when that fails.
pub(crate) fn keep_only_own_variables(
    tool: Tool,
    transport: &McpTransport,
    browser: BrowserFlags,
) -> Result<(), ToolError> {
    let kept = server_variables(tool);
    let is_kept = |name: &OsString| name.to_str().is_some_and(|name| kept.contains(&name));
    if std::env::vars_os().all(|(name, _)| is_kept(&name)) {
        return Ok(());
    }
    let exe = std::env::current_exe()
        .map_err(|e| ToolError::io("locate the running binary", "/proc/self/exe", e))?;
    let error = std::process::Command::new(&exe)
        .args(transport.to_args())
        .args(browser.to_args())
        .env_clear()
        .envs(std::env::vars_os().filter(|(name, _)| is_kept(name)))
        .exec();
    Err(ToolError::io(
        "serve with only its own variables: cannot execute",
        exe,
        error,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::SetBy;

    #[test]
    fn a_server_keeps_no_variable_of_another_package_or_of_the_signer() {
        for tool in Tool::ALL {
            let kept = server_variables(tool);
            for var in CONTEXT_VARS {
                let own = var.read_by == ReadBy::AllTools || var.read_by == tool.reader();
                assert_eq!(kept.contains(&var.name), own, "{tool:?} {}", var.name);
                if var.set_by == SetBy::Signer {
                    assert!(!kept.contains(&var.name), "{}", var.name);
                }
            }
        }
    }
}
