//! The MCP servers the generator registers under `mcp` in `opencode.json`, one per managed
//! tool package: local (stdio, started by OpenCode) or remote (Streamable HTTP, running
//! apart), and the tool names OpenCode derives from them.
//!
//! OpenCode 1.18.33 names every MCP tool `<server>_<tool>`, each part with characters
//! outside `[A-Za-z0-9_-]` replaced by `_` (its `toolName` function; always prefixed, also
//! when only one server offers the tool). Server names are therefore restricted to
//! `[A-Za-z0-9_-]`, so that the derived names are predictable and an evidence-agent
//! permission pattern such as `managed_auto_oncall_*` can be checked against them.

use std::collections::BTreeMap;

use crate::ordered_json::{Json, Object};

/// The header that carries the diagnosis session's token to a remote tool server.
pub const SESSION_HEADER: &str = "X-Evidence-Session";

/// The variable of OpenCode's environment that holds the session's token; a remote
/// server's [`SESSION_HEADER`] is filled from it (`{env:EVIDENCE_SESSION_TOKEN}`).
pub const SESSION_TOKEN_ENV: &str = "EVIDENCE_SESSION_TOKEN";

/// One MCP server OpenCode uses: local (a command with arguments and an environment map,
/// started by OpenCode over stdio, [`McpServer::new`]) or remote (a URL OpenCode connects
/// to over Streamable HTTP with static headers and OAuth off, [`McpServer::remote`]).
///
/// The environment and the headers are written into `opencode.json` as plain text. Put no
/// secret value there: name it with OpenCode's substitution `{env:VARIABLE}` instead, so
/// the value comes from OpenCode's own environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    name: String,
    command: String,
    args: Vec<String>,
    environment: BTreeMap<String, String>,
    remote: Option<Remote>,
}

/// The connection of a remote server.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Remote {
    url: String,
    headers: BTreeMap<String, String>,
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
    /// The URL of a remote server is not `http://` or `https://` with a host, or has
    /// white space or control characters, or is plain `http://` to a host other than a
    /// loopback address (the tool servers serve plain HTTP on loopback only).
    #[error("invalid option mcp server: server {name}: {why}")]
    InvalidUrl {
        /// The server.
        name: String,
        /// What is wrong with the URL.
        why: String,
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
            remote: None,
        })
    }

    /// A remote server named `name` (as for [`McpServer::new`]) at `url`, OpenCode sending
    /// [`SESSION_HEADER`] from `{env:EVIDENCE_SESSION_TOKEN}` on every request, OAuth off.
    /// `url` is `https://HOST[:PORT]/PATH`, or `http://` to a loopback address
    /// (`127.0.0.0/8`, `[::1]`, `localhost`).
    pub fn remote(name: impl Into<String>, url: impl Into<String>) -> Result<Self, McpServerError> {
        let url = url.into();
        let mut server = Self::new(name, "remote")?;
        let invalid = |why: String| McpServerError::InvalidUrl {
            name: server.name.clone(),
            why,
        };
        if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid(format!(
                "{url:?} has white space or control characters"
            )));
        }
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid(format!("{url:?} is not an http:// or https:// URL")))?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let host = if host.starts_with('[') {
            host.split_once(']')
                .map_or(host, |(h, _)| h)
                .trim_start_matches('[')
        } else {
            host.split(':').next().unwrap_or_default()
        };
        if host.is_empty() || authority.contains('@') {
            return Err(invalid(format!(
                "{url:?} names no host, or holds credentials"
            )));
        }
        match scheme.to_ascii_lowercase().as_str() {
            "https" => {}
            "http" => {
                let loopback = host.eq_ignore_ascii_case("localhost")
                    || host
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback());
                if !loopback {
                    return Err(invalid(format!(
                        "{url:?} is plain HTTP to {host}, which is not a loopback address: a \
                         tool server serves plain HTTP on loopback only, so use https://"
                    )));
                }
            }
            _ => {
                return Err(invalid(format!(
                    "{url:?} is not an http:// or https:// URL"
                )));
            }
        }
        let headers = BTreeMap::from([(
            SESSION_HEADER.to_owned(),
            format!("{{env:{SESSION_TOKEN_ENV}}}"),
        )]);
        server.remote = Some(Remote { url, headers });
        Ok(server)
    }

    /// The URL of a remote server; `None` for a local one.
    pub fn url(&self) -> Option<&str> {
        self.remote.as_ref().map(|r| r.url.as_str())
    }

    /// Whether arguments or environment variables were given: settings of a process
    /// OpenCode starts, which a remote server (running apart, holding its own) cannot take.
    pub(crate) fn has_process_settings(&self) -> bool {
        !self.args.is_empty() || !self.environment.is_empty()
    }

    /// Appends a command-line argument (a local server's; the generator refuses a remote
    /// server given one).
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Sets an environment variable of the server process (a local server's; the
    /// generator refuses a remote server given one).
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
    /// `{"type": "local", "command": [command, args...], "environment": {...}, "enabled": true}`,
    /// or for a remote server
    /// `{"type": "remote", "url": URL, "headers": {...}, "oauth": false, "enabled": true}`.
    pub(crate) fn to_json(&self) -> Json {
        let mut object = Object::new();
        if let Some(remote) = &self.remote {
            object.insert("type", Json::str("remote"));
            object.insert("url", Json::str(remote.url.as_str()));
            let mut headers = Object::new();
            for (key, value) in &remote.headers {
                headers.insert(key.clone(), Json::str(value.as_str()));
            }
            object.insert("headers", Json::Object(headers));
            object.insert("oauth", Json::Bool(false));
            object.insert("enabled", Json::Bool(true));
            return Json::Object(object);
        }
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
        let remote = McpServer::remote("clinic", "http://127.0.0.1:8931/mcp").unwrap();
        assert_eq!(remote.url(), Some("http://127.0.0.1:8931/mcp"));
        assert_eq!(
            serde_json::to_string(&remote.to_json()).unwrap(),
            r#"{"type":"remote","url":"http://127.0.0.1:8931/mcp","headers":{"X-Evidence-Session":"{env:EVIDENCE_SESSION_TOKEN}"},"oauth":false,"enabled":true}"#
        );
        for ok in [
            "http://localhost:1/mcp",
            "http://[::1]:1/mcp",
            "https://tools.internal:8443/mcp",
        ] {
            assert!(McpServer::remote("x", ok).is_ok(), "{ok}");
        }
        for bad in [
            "ftp://127.0.0.1/mcp",
            "127.0.0.1:1/mcp",
            "http://tools.internal/mcp",
            "http://0.0.0.0:1/mcp",
            "https:///mcp",
            "https://user:pw@tools.internal/mcp",
            "https://tools.internal/m cp",
        ] {
            assert!(
                matches!(
                    McpServer::remote("x", bad),
                    Err(McpServerError::InvalidUrl { .. })
                ),
                "{bad}"
            );
        }
        assert!(!remote.has_process_settings());
        assert!(remote.clone().arg("--x").has_process_settings());
        assert!(remote.env("A", "b").has_process_settings());
        // Said to people as written, not as a sanitized tool name (`clinic__tool_`).
        assert_eq!(
            McpServer::new("clinic", "x").unwrap().tool_names(),
            "clinic_<tool>"
        );
    }
}
