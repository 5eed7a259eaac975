//! What a generation may be asked for ([`GenerateOptions`]), and the checks that refuse
//! an option before anything is rendered.

use wildmatch::WildMatch;

use super::error::GenerateError;
use super::skill::WorkspaceSkill;
use crate::config::{BUILTIN_PERMISSIONS, StepLimits, TaskSupport};
use crate::mcp::McpServer;

/// The managed evidence tool packages the evidence agent uses by default.
const DEFAULT_EVIDENCE_TOOLS: &str = "managed_auto_oncall_*";

/// How the workspace is generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateOptions {
    /// What the runtime's Task tool supports; [`TaskSupport::Unavailable`] generates the
    /// single-agent fallback.
    pub task_support: TaskSupport,
    /// `steps` of each agent.
    pub steps: StepLimits,
    /// Shell command patterns `evidence-agent` may run (everything else is denied). Empty by
    /// default: no shell.
    pub evidence_commands: Vec<String>,
    /// Tool-name patterns `evidence-agent` may use, by default the managed evidence tool
    /// packages (`managed_auto_oncall_*`). A pattern may not match a built-in permission.
    pub evidence_tools: Vec<String>,
    /// Local MCP servers registered under `mcp` in `opencode.json` (one per managed tool
    /// package). Every tool name OpenCode derives from them (`<server>_<tool>`) must be
    /// matched by an [`evidence_tools`](Self::evidence_tools) pattern. Empty by default.
    pub mcp_servers: Vec<McpServer>,
    /// Skills the workspace installs itself, each joining its catalog group (for example
    /// the transport skill `managed-evidence-tools` in `data-access`). Empty by default.
    pub workspace_skills: Vec<WorkspaceSkill>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            task_support: TaskSupport::default(),
            steps: StepLimits::default(),
            evidence_commands: Vec::new(),
            evidence_tools: vec![DEFAULT_EVIDENCE_TOOLS.to_owned()],
            mcp_servers: Vec::new(),
            workspace_skills: Vec::new(),
        }
    }
}

impl GenerateOptions {
    /// Sets what the runtime's Task tool supports.
    pub fn with_task_support(mut self, support: TaskSupport) -> Self {
        self.task_support = support;
        self
    }

    /// Registers a local MCP server in `opencode.json`.
    pub fn with_mcp_server(mut self, server: McpServer) -> Self {
        self.mcp_servers.push(server);
        self
    }

    /// Installs `skill` in the workspace and adds it to its catalog group.
    pub fn with_workspace_skill(mut self, skill: WorkspaceSkill) -> Self {
        self.workspace_skills.push(skill);
        self
    }

    /// Lets `evidence-agent` run shell commands matching `pattern` (e.g. `clinic *`).
    pub fn allow_evidence_command(mut self, pattern: impl Into<String>) -> Self {
        self.evidence_commands.push(pattern.into());
        self
    }
}

/// Refuses unusable options: shell patterns that allow everything, tool patterns that
/// widen a built-in permission, MCP servers whose tools no pattern covers.
pub(super) fn check_options(options: &GenerateOptions) -> Result<(), GenerateError> {
    for pattern in &options.evidence_commands {
        check_bash_pattern(pattern)?;
    }
    for pattern in &options.evidence_tools {
        check_tool_pattern(pattern)?;
    }
    check_mcp_servers(options)
}

/// A tool-name pattern `evidence-agent` may use: not empty, and matching no built-in
/// permission (it would widen that permission).
fn check_tool_pattern(pattern: &str) -> Result<(), GenerateError> {
    let matcher = WildMatch::new(pattern);
    if pattern.trim().is_empty() || pattern.chars().any(char::is_control) {
        return Err(GenerateError::InvalidOption {
            option: "evidence tool pattern",
            reason: "empty or contains control characters".to_owned(),
        });
    }
    if let Some(hit) = BUILTIN_PERMISSIONS.iter().find(|p| matcher.matches(p)) {
        return Err(GenerateError::InvalidOption {
            option: "evidence tool pattern",
            reason: format!("{pattern:?} would also match the built-in permission {hit:?}"),
        });
    }
    Ok(())
}

/// A shell command pattern `evidence-agent` may run: not empty and not every command.
fn check_bash_pattern(pattern: &str) -> Result<(), GenerateError> {
    if pattern.trim().is_empty() || pattern.trim() == "*" || pattern.chars().any(char::is_control) {
        return Err(GenerateError::InvalidOption {
            option: "evidence bash pattern",
            reason: format!("{pattern:?} is empty, allows every command or has control characters"),
        });
    }
    Ok(())
}

/// Refuses MCP servers whose tools the evidence agent would not be permitted, duplicate
/// server names, and remote servers given arguments or environment variables (which
/// `opencode.json` has no place for: they would be dropped without a word).
fn check_mcp_servers(options: &GenerateOptions) -> Result<(), GenerateError> {
    for (index, server) in options.mcp_servers.iter().enumerate() {
        if options.mcp_servers[..index]
            .iter()
            .any(|s| s.name() == server.name())
        {
            return Err(GenerateError::InvalidOption {
                option: "mcp server",
                reason: format!("server {} is registered twice", server.name()),
            });
        }
        if server.url().is_some() && server.has_process_settings() {
            return Err(GenerateError::InvalidOption {
                option: "mcp server",
                reason: format!(
                    "server {} is remote: it takes no arguments or environment variables (it \
                     runs apart with its own; they are for a server OpenCode starts)",
                    server.name()
                ),
            });
        }
        // Any tool of the server is `<server>_<tool>`: a pattern must cover the prefix
        // for every tool name, which a trailing `*` after the prefix (or earlier) does.
        let probe = server.tool_name("any_tool");
        let covered = options.evidence_tools.iter().any(|pattern| {
            let matcher = WildMatch::new(pattern);
            matcher.matches(&probe) && matcher.matches(&server.tool_name("x"))
        });
        if !covered {
            return Err(GenerateError::InvalidOption {
                option: "mcp server",
                reason: format!(
                    "the tools of server {} ({}) match no evidence tool pattern, so evidence-agent could not use them",
                    server.name(),
                    server.tool_names()
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_patterns_may_not_shadow_builtins() {
        assert!(check_tool_pattern("managed_auto_oncall_*").is_ok());
        for bad in ["*", "t*", "?ask", "", "edit"] {
            assert!(check_tool_pattern(bad).is_err(), "{bad}");
        }
        assert!(check_bash_pattern("clinic *").is_ok());
        assert!(check_bash_pattern("*").is_err());
    }

    #[test]
    fn a_remote_server_with_process_settings_or_a_name_twice_is_refused() {
        let remote = || {
            McpServer::remote("managed_auto_oncall_clinic", "http://127.0.0.1:18931/mcp").unwrap()
        };
        let check = |servers: Vec<McpServer>| {
            let options = servers
                .into_iter()
                .fold(GenerateOptions::default(), GenerateOptions::with_mcp_server);
            check_mcp_servers(&options)
        };
        assert!(check(vec![remote()]).is_ok());
        for bad in [
            vec![remote().arg("--mcp")],
            vec![remote().env("CLINIC_API_TOKEN", "{env:CLINIC_API_TOKEN}")],
            vec![remote(), remote()],
        ] {
            let err = check(bad).unwrap_err();
            assert!(
                matches!(err, GenerateError::InvalidOption { .. }),
                "{err:?}"
            );
        }
        // A local server keeps its arguments and environment.
        let local = McpServer::new("managed_auto_oncall_clinic", "clinic-tool")
            .unwrap()
            .arg("--mcp")
            .env("A", "b");
        assert!(check(vec![local]).is_ok());
    }
}
