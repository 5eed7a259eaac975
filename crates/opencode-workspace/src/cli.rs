//! Running the installed OpenCode command line and reading what it reports about an agent
//! (`opencode debug agent <name>`): its merged permission rules and the tools it gets.
//!
//! OpenCode decides a permission as the *last* rule whose permission key and pattern both
//! match (`*` any run of characters, `?` one character), defaulting to `ask`;
//! [`AgentReport::evaluate`] applies that rule to the merged rules OpenCode printed. A tool
//! is listed as disabled for an agent when the last rule for its key has pattern `*` and
//! action `deny`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use wildmatch::WildMatch;

use crate::config::Action;
use crate::error::WorkspaceError;

/// The OpenCode version the crate's behaviour was checked against.
pub const PINNED_OPENCODE_VERSION: &str = "1.18.33";

/// The environment variables that keep an isolated OpenCode run offline and free of
/// background downloads.
pub const OFFLINE_ENV: [(&str, &str); 4] = [
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
    ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
];

/// The installed `opencode` program and how to run it.
#[derive(Debug, Clone)]
pub struct OpenCodeCli {
    program: PathBuf,
    home: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
}

/// What one OpenCode command printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliOutput {
    /// `true` when it exited with status 0.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// What OpenCode's own execution of one tool call did
/// (`opencode debug agent <agent> --tool <tool> --params <json>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolRun {
    /// The tool ran; the output the model would read.
    Output(String),
    /// OpenCode refused or failed the call; its error text.
    Failed(String),
}

/// One merged permission rule as OpenCode prints it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RuleReport {
    /// The permission key (`edit`, `task`, a tool-name pattern, ...).
    pub permission: String,
    /// The input pattern (a path, an agent name, ...).
    pub pattern: String,
    /// `allow`, `deny` or `ask`.
    pub action: String,
}

/// `opencode debug agent <name>`: the agent as OpenCode resolved it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AgentReport {
    /// The agent's name.
    pub name: String,
    /// `primary`, `subagent` or `all`.
    pub mode: String,
    /// The resolved prompt text (a `{file:}` reference is replaced by the file's contents).
    #[serde(default)]
    pub prompt: Option<String>,
    /// Every permission rule that applies, OpenCode's defaults first, in evaluation order.
    pub permission: Vec<RuleReport>,
    /// Every built-in tool id with whether the agent gets it.
    pub tools: BTreeMap<String, bool>,
}

impl AgentReport {
    /// The action OpenCode takes for `permission` on `input`: the last rule matching both,
    /// `ask` when none does.
    pub fn evaluate(&self, permission: &str, input: &str) -> Action {
        self.permission
            .iter()
            .rev()
            .find(|rule| {
                WildMatch::new(&rule.permission).matches(permission)
                    && WildMatch::new(&rule.pattern).matches(input)
            })
            .map_or(Action::Ask, |rule| match rule.action.as_str() {
                "allow" => Action::Allow,
                "deny" => Action::Deny,
                _ => Action::Ask,
            })
    }

    /// `true` when OpenCode gives the agent the built-in tool `id`.
    pub fn has_tool(&self, id: &str) -> bool {
        self.tools.get(id).copied().unwrap_or(false)
    }
}

fn failure(command: &str, reason: impl Into<String>) -> WorkspaceError {
    WorkspaceError::OpenCode {
        command: command.to_owned(),
        reason: reason.into(),
    }
}

impl OpenCodeCli {
    /// The `opencode` program at `program`, run with the caller's environment.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            home: None,
            env: Vec::new(),
        }
    }

    /// Runs every command isolated in `home`: the environment is cleared but for `PATH`;
    /// `HOME` is `home` and `XDG_CONFIG_HOME`, `XDG_DATA_HOME`, `XDG_CACHE_HOME`,
    /// `XDG_STATE_HOME` are folders in it; the [`OFFLINE_ENV`] switches are set. Nothing of
    /// the user's own OpenCode configuration, sessions or credentials is read or written.
    pub fn isolated(mut self, home: impl Into<PathBuf>) -> Self {
        self.home = Some(home.into());
        self
    }

    /// Sets one more environment variable for every command.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The program.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The command `opencode <args>` in `cwd`, with this runner's environment, for a
    /// caller that starts it itself (for example `opencode serve`).
    pub fn command(&self, cwd: &Path, args: &[&str]) -> Result<Command, WorkspaceError> {
        let mut command = Command::new(&self.program);
        command.args(args).current_dir(cwd);
        if let Some(home) = &self.home {
            command.env_clear();
            if let Some(path) = std::env::var_os("PATH") {
                command.env("PATH", path);
            }
            command.env("HOME", home);
            for (key, folder) in [
                ("XDG_CONFIG_HOME", "config"),
                ("XDG_DATA_HOME", "data"),
                ("XDG_CACHE_HOME", "cache"),
                ("XDG_STATE_HOME", "state"),
            ] {
                let dir = home.join(folder);
                std::fs::create_dir_all(&dir)
                    .map_err(|e| WorkspaceError::io("create folder", &dir, e))?;
                command.env(key, dir);
            }
            for (key, value) in OFFLINE_ENV {
                command.env(key, value);
            }
        }
        for (key, value) in &self.env {
            command.env(key, value);
        }
        Ok(command)
    }

    /// Runs `opencode <args>` in `cwd` with `extra_env` added; a non-zero exit is a
    /// [`CliOutput`] with `success == false`, not an error.
    pub fn run_with_env(
        &self,
        cwd: &Path,
        args: &[&str],
        extra_env: &[(&str, &str)],
    ) -> Result<CliOutput, WorkspaceError> {
        let shown = args.join(" ");
        let mut command = self.command(cwd, args)?;
        for (key, value) in extra_env {
            command.env(key, value);
        }
        let output = command.output().map_err(|e| {
            failure(
                &shown,
                format!("cannot start {}: {e}", self.program.display()),
            )
        })?;
        Ok(CliOutput {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }

    /// Runs `opencode <args>` in `cwd`.
    pub fn run(&self, cwd: &Path, args: &[&str]) -> Result<CliOutput, WorkspaceError> {
        self.run_with_env(cwd, args, &[])
    }

    /// `opencode --version`, trimmed.
    pub fn version(&self, cwd: &Path) -> Result<String, WorkspaceError> {
        let output = self.run(cwd, &["--version"])?;
        if !output.success {
            return Err(failure("--version", output.stderr));
        }
        Ok(output.stdout.trim().to_owned())
    }

    /// `opencode agent list` in `cwd`: every agent's name and mode, in OpenCode's order.
    pub fn agent_list(&self, cwd: &Path) -> Result<Vec<(String, String)>, WorkspaceError> {
        let output = self.run(cwd, &["agent", "list"])?;
        if !output.success {
            return Err(failure("agent list", output.stderr.trim().to_owned()));
        }
        // Each agent is a `name (mode)` line at the start of a line, followed by its
        // indented permission rules.
        Ok(output
            .stdout
            .lines()
            .filter(|line| !line.starts_with(char::is_whitespace))
            .filter_map(|line| {
                let (name, rest) = line.split_once(" (")?;
                let mode = rest.strip_suffix(')')?;
                Some((name.to_owned(), mode.to_owned()))
            })
            .collect())
    }

    /// Runs OpenCode's own `tool` as `agent` in `cwd` with the JSON arguments `params`
    /// (`opencode debug agent <agent> --tool <tool> --params <params>`): the tool's output,
    /// or OpenCode's error text when it refused or failed the call.
    pub fn run_tool(
        &self,
        cwd: &Path,
        agent: &str,
        tool: &str,
        params: &serde_json::Value,
    ) -> Result<ToolRun, WorkspaceError> {
        let command = format!("debug agent {agent} --tool {tool}");
        let params = params.to_string();
        let output = self.run(
            cwd,
            &["debug", "agent", agent, "--tool", tool, "--params", &params],
        )?;
        if !output.success {
            return Ok(ToolRun::Failed(output.stderr));
        }
        let result: serde_json::Value = serde_json::from_str(&output.stdout)
            .map_err(|e| failure(&command, format!("unexpected output ({e})")))?;
        result
            .pointer("/result/output")
            .and_then(serde_json::Value::as_str)
            .map(|text| ToolRun::Output(text.to_owned()))
            .ok_or_else(|| failure(&command, "no result.output in its answer"))
    }

    /// `opencode debug agent <name>` in `cwd`, parsed.
    pub fn debug_agent(&self, cwd: &Path, name: &str) -> Result<AgentReport, WorkspaceError> {
        self.debug_agent_with_env(cwd, name, &[])
    }

    /// `opencode debug agent <name>` in `cwd` with `extra_env`, parsed.
    pub fn debug_agent_with_env(
        &self,
        cwd: &Path,
        name: &str,
        extra_env: &[(&str, &str)],
    ) -> Result<AgentReport, WorkspaceError> {
        let command = format!("debug agent {name}");
        let output = self.run_with_env(cwd, &["debug", "agent", name], extra_env)?;
        if !output.success {
            return Err(failure(&command, output.stderr.trim().to_owned()));
        }
        serde_json::from_str(&output.stdout)
            .map_err(|e| failure(&command, format!("unexpected output ({e})")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(rules: &[(&str, &str, &str)]) -> AgentReport {
        AgentReport {
            name: "a".to_owned(),
            mode: "subagent".to_owned(),
            prompt: None,
            permission: rules
                .iter()
                .map(|(permission, pattern, action)| RuleReport {
                    permission: (*permission).to_owned(),
                    pattern: (*pattern).to_owned(),
                    action: (*action).to_owned(),
                })
                .collect(),
            tools: BTreeMap::new(),
        }
    }

    #[test]
    fn the_last_matching_rule_decides_and_nothing_matching_asks() {
        let r = report(&[
            ("*", "*", "allow"),
            ("*", "*", "deny"),
            ("edit", "*", "deny"),
            ("edit", "ws/evidences/a.json", "allow"),
        ]);
        assert_eq!(r.evaluate("edit", "ws/evidences/a.json"), Action::Allow);
        assert_eq!(r.evaluate("edit", "evidences/a.json"), Action::Deny);
        assert_eq!(r.evaluate("bash", "ls"), Action::Deny);
        assert_eq!(report(&[]).evaluate("edit", "x"), Action::Ask);
        assert!(!r.has_tool("task"));
    }

    #[test]
    fn a_missing_program_is_a_typed_error() {
        let cli = OpenCodeCli::new("/nonexistent/opencode");
        let err = cli.run(Path::new("/"), &["--version"]).unwrap_err();
        assert!(matches!(err, WorkspaceError::OpenCode { .. }), "{err:?}");
    }
}
