//! The model of `opencode.json`: the parts the generator owns (`$schema`, `default_agent`,
//! each agent's fields and `permission` object), read back from text, and how OpenCode
//! evaluates a permission. What the generator intends is `permissions.rs`; what is wrong
//! with a configuration is `checker.rs`.

use wildmatch::WildMatch;

use crate::layout::CONFIG_PATH;
use crate::ordered_json::{Json, Object};

/// The action of a permission rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Run without approval.
    Allow,
    /// Block.
    Deny,
    /// Prompt for approval (a headless run would wait forever; never generated).
    Ask,
}

impl Action {
    fn parse(value: &str) -> Option<Self> {
        match value {
            "allow" => Some(Self::Allow),
            "deny" => Some(Self::Deny),
            "ask" => Some(Self::Ask),
            _ => None,
        }
    }

    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Ask => "ask",
        }
    }
}

/// The value of one permission key: one action, or glob patterns with actions in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionValue {
    /// One action for every input.
    All(Action),
    /// `pattern -> action` rules in document order; the last matching one wins.
    Patterns(Vec<(String, Action)>),
}

/// An agent's `permission` object, in document order. Keys and patterns are OpenCode
/// wildcards (`*` any run of characters, `?` one character); the last matching rule wins.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Permission(pub(crate) Vec<(String, PermissionValue)>);

impl Permission {
    /// The entries, in order.
    pub fn entries(&self) -> &[(String, PermissionValue)] {
        &self.0
    }

    /// The value of exactly this key.
    pub fn get(&self, key: &str) -> Option<&PermissionValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Every `(key, pattern, action)` rule, flattened in order.
    pub fn rules(&self) -> Vec<(&str, &str, Action)> {
        let mut out = Vec::new();
        for (key, value) in &self.0 {
            match value {
                PermissionValue::All(action) => out.push((key.as_str(), "*", *action)),
                PermissionValue::Patterns(patterns) => {
                    for (pattern, action) in patterns {
                        out.push((key.as_str(), pattern.as_str(), *action));
                    }
                }
            }
        }
        out
    }

    /// The action OpenCode takes for `permission` (a tool or permission name such as `edit`,
    /// `task`, `skill`) on `input` (a path, an agent name, a skill name, a command): the last
    /// rule whose key matches `permission` and whose pattern matches `input`. `None` when no
    /// rule matches, in which case OpenCode falls back to its defaults, which may ask.
    pub fn evaluate(&self, permission: &str, input: &str) -> Option<Action> {
        self.rules()
            .into_iter()
            .rev()
            .find(|(key, pattern, _)| {
                WildMatch::new(key).matches(permission) && WildMatch::new(pattern).matches(input)
            })
            .map(|(_, _, action)| action)
    }

    fn from_json(value: &Json) -> Option<Self> {
        match value {
            Json::String(s) => Some(Self(vec![(
                "*".to_owned(),
                PermissionValue::All(Action::parse(s)?),
            )])),
            Json::Object(object) => {
                let mut entries = Vec::new();
                for (key, value) in object.iter() {
                    let value = match value {
                        Json::String(s) => PermissionValue::All(Action::parse(s)?),
                        Json::Object(patterns) => PermissionValue::Patterns(
                            patterns
                                .iter()
                                .map(|(p, a)| Some((p.to_owned(), Action::parse(a.as_str()?)?)))
                                .collect::<Option<Vec<_>>>()?,
                        ),
                        _ => return None,
                    };
                    entries.push((key.to_owned(), value));
                }
                Some(Self(entries))
            }
            _ => None,
        }
    }

    /// The permission as an ordered JSON object.
    pub(crate) fn to_json(&self) -> Json {
        let mut object = Object::new();
        for (key, value) in &self.0 {
            let value = match value {
                PermissionValue::All(action) => Json::str(action.as_str()),
                PermissionValue::Patterns(patterns) => {
                    let mut inner = Object::new();
                    for (pattern, action) in patterns {
                        inner.insert(pattern.clone(), Json::str(action.as_str()));
                    }
                    Json::Object(inner)
                }
            };
            object.insert(key.clone(), value);
        }
        Json::Object(object)
    }
}

/// `mode` of an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentMode {
    /// User-facing.
    Primary,
    /// Invoked through the Task tool (or an `@` mention).
    Subagent,
    /// Both.
    All,
}

impl AgentMode {
    /// The JSON spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Subagent => "subagent",
            Self::All => "all",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "primary" => Some(Self::Primary),
            "subagent" => Some(Self::Subagent),
            "all" => Some(Self::All),
            _ => None,
        }
    }
}

/// Why an `opencode.json` text cannot be read as a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigParseError {
    /// The text is not plain JSON.
    #[error("cannot use existing {}: {reason}", CONFIG_PATH)]
    NotJson {
        /// The parser's message.
        reason: String,
    },
    /// The top level is not an object.
    #[error("cannot use existing {}: the top level is not an object", CONFIG_PATH)]
    NotAnObject,
}

/// The fields of one `agent.<name>` entry that the generator sets and checks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentConfig {
    /// `description`.
    pub description: Option<String>,
    /// `mode`.
    pub mode: Option<AgentMode>,
    /// `prompt`, e.g. `{file:./investibook/agents/evidence-agent.md}`.
    pub prompt: Option<String>,
    /// `steps`: the most agentic iterations.
    pub steps: Option<u64>,
    /// `permission`, when present and well-formed.
    pub permission: Option<Permission>,
}

/// The parts of an `opencode.json` the generator owns, read back for checking.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpenCodeConfig {
    /// `$schema`.
    pub schema: Option<String>,
    /// `default_agent`.
    pub default_agent: Option<String>,
    agents: Vec<(String, AgentConfig)>,
}

impl OpenCodeConfig {
    /// Parses `opencode.json` text (plain JSON). Unknown keys and other agents' unknown
    /// fields are allowed and ignored; a malformed `permission` reads as absent.
    pub fn parse(text: &str) -> Result<Self, ConfigParseError> {
        let json: Json = serde_json::from_str(text).map_err(|e| ConfigParseError::NotJson {
            reason: e.to_string(),
        })?;
        let root = json.as_object().ok_or(ConfigParseError::NotAnObject)?;
        let mut agents = Vec::new();
        if let Some(Json::Object(entries)) = root.get("agent") {
            for (name, value) in entries.iter() {
                let Some(fields) = value.as_object() else {
                    continue;
                };
                let text = |key: &str| fields.get(key).and_then(Json::as_str).map(str::to_owned);
                agents.push((
                    name.to_owned(),
                    AgentConfig {
                        description: text("description"),
                        mode: fields
                            .get("mode")
                            .and_then(Json::as_str)
                            .and_then(AgentMode::parse),
                        prompt: text("prompt"),
                        steps: fields.get("steps").and_then(Json::as_u64),
                        permission: fields.get("permission").and_then(Permission::from_json),
                    },
                ));
            }
        }
        Ok(Self {
            schema: root
                .get("$schema")
                .and_then(Json::as_str)
                .map(str::to_owned),
            default_agent: root
                .get("default_agent")
                .and_then(Json::as_str)
                .map(str::to_owned),
            agents,
        })
    }

    /// The agent named `name`.
    pub fn agent(&self, name: &str) -> Option<&AgentConfig> {
        self.agents.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }

    /// All agent names, in document order.
    pub fn agent_names(&self) -> impl Iterator<Item = &str> {
        self.agents.iter().map(|(n, _)| n.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_matching_rule_wins() {
        let p = Permission(vec![
            ("*".into(), PermissionValue::All(Action::Deny)),
            (
                "bash".into(),
                PermissionValue::Patterns(vec![
                    ("*".into(), Action::Allow),
                    ("rm *".into(), Action::Deny),
                ]),
            ),
        ]);
        assert_eq!(p.evaluate("bash", "ls -l"), Some(Action::Allow));
        assert_eq!(p.evaluate("bash", "rm -rf /"), Some(Action::Deny));
        assert_eq!(p.evaluate("edit", "x"), Some(Action::Deny));
        assert_eq!(Permission::default().evaluate("edit", "x"), None);
    }
}
