//! Local (stdio) MCP servers the generator registers under `mcp` in `opencode.json`, one
//! per managed tool package, and the tool names OpenCode derives from them.
//!
//! OpenCode 1.18.33 names every MCP tool `<server>_<tool>`, each part with characters
//! outside `[A-Za-z0-9_-]` replaced by `_` (its `toolName` function; always prefixed, also
//! when only one server offers the tool). Server names are therefore restricted to
//! `[A-Za-z0-9_-]`, so that the derived names are predictable and an evidence-agent
//! permission pattern such as `managed_auto_oncall_*` can be checked against them.

use std::collections::BTreeMap;

use crate::ordered_json::{Json, Object};

/// One local MCP server: a command with arguments and an environment map, started by
/// OpenCode over stdio.
///
/// The environment is written into `opencode.json` as plain text. Put no secret value
/// there: name it with OpenCode's substitution `{env:VARIABLE}` instead, so the value
/// comes from OpenCode's own environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    name: String,
    command: String,
    args: Vec<String>,
    environment: BTreeMap<String, String>,
}

/// Why a server is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpServerError {
    /// The name is empty, longer than 64 characters or holds a character outside
    /// `[A-Za-z0-9_-]`.
    #[error(
        "invalid option mcp server: name {name:?} must be 1-64 characters of letters, digits, '_' and '-'"
    )]
    InvalidName {
        /// The refused name.
        name: String,
    },
    /// The command is empty or has control characters.
    #[error(
        "invalid option mcp server: server {name}: the command is empty or has control characters"
    )]
    InvalidCommand {
        /// The server.
        name: String,
    },
}

impl McpServer {
    /// A server named `name` (`[A-Za-z0-9_-]`, at most 64 characters, e.g.
    /// `managed_auto_oncall_clinic`) started as `command`.
    pub fn new(
        name: impl Into<String>,
        command: impl Into<String>,
    ) -> Result<Self, McpServerError> {
        let name = name.into();
        let command = command.into();
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(McpServerError::InvalidName { name });
        }
        if command.trim().is_empty() || command.chars().any(char::is_control) {
            return Err(McpServerError::InvalidCommand { name });
        }
        Ok(Self {
            name,
            command,
            args: Vec::new(),
            environment: BTreeMap::new(),
        })
    }

    /// Appends a command-line argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Sets an environment variable of the server process.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.environment.insert(key.into(), value.into());
        self
    }

    /// The server name, the key under `mcp`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name OpenCode gives the server's tool `tool`: `<server>_<tool>`, with
    /// characters outside `[A-Za-z0-9_-]` in `tool` replaced by `_`.
    pub fn tool_name(&self, tool: &str) -> String {
        let tool: String = tool
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{}_{tool}", self.name)
    }

    /// How OpenCode names every tool of this server, for people to read:
    /// `<server>_<tool>` with the server's name, e.g. `managed_auto_oncall_clinic_<tool>`.
    pub(crate) fn tool_names(&self) -> String {
        format!("{}_<tool>", self.name)
    }

    /// The `mcp.<name>` JSON value:
    /// `{"type": "local", "command": [command, args...], "environment": {...}, "enabled": true}`.
    pub(crate) fn to_json(&self) -> Json {
        let mut object = Object::new();
        object.insert("type", Json::str("local"));
        let command = std::iter::once(&self.command)
            .chain(self.args.iter())
            .map(|s| Json::str(s.as_str()))
            .collect();
        object.insert("command", Json::Array(command));
        let mut environment = Object::new();
        for (key, value) in &self.environment {
            environment.insert(key.clone(), Json::str(value.as_str()));
        }
        object.insert("environment", Json::Object(environment));
        object.insert("enabled", Json::Bool(true));
        Json::Object(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_tool_names_prefixed() {
        let server = McpServer::new("managed_auto_oncall_clinic", "clinic_tool").unwrap();
        assert_eq!(
            server.tool_name("query.range"),
            "managed_auto_oncall_clinic_query_range"
        );
        for bad in ["", "a b", "a.b", "ä"] {
            assert!(McpServer::new(bad, "x").is_err(), "{bad}");
        }
        assert!(McpServer::new("x", " ").is_err());
        // Said to people as written, not as a sanitized tool name (`clinic__tool_`).
        assert_eq!(
            McpServer::new("clinic", "x").unwrap().tool_names(),
            "clinic_<tool>"
        );
    }
}
