//! Checked names: skill and group names (the Agent Skills name rule) and the three agent
//! roles of the Investibook diagnosis, with the one error a refused name gives.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Longest skill or group name the Agent Skills format allows.
pub const MAX_NAME_LEN: usize = 64;

/// A skill or group name does not match `^[a-z0-9]+(-[a-z0-9]+)*$` or is longer than 64.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid {kind} name {value:?}: use 1-64 lower-case letters and digits in '-'-separated words"
)]
pub struct NameError {
    kind: &'static str,
    value: String,
}

impl NameError {
    /// What was being named (`skill`, `group`).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The refused value.
    pub fn value(&self) -> &str {
        &self.value
    }
}

/// `true` when `value` matches `^[a-z0-9]+(-[a-z0-9]+)*$` and has at most 64 characters.
pub(crate) fn is_valid_name(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_NAME_LEN
        && value.split('-').all(|word| {
            !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

macro_rules! checked_name {
    ($(#[$meta:meta])* $name:ident, $kind:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Checks `value` against `^[a-z0-9]+(-[a-z0-9]+)*$` (at most 64 characters).
            pub fn new(value: impl Into<String>) -> Result<Self, NameError> {
                let value = value.into();
                if is_valid_name(&value) {
                    Ok(Self(value))
                } else {
                    Err(NameError { kind: $kind, value })
                }
            }

            /// The name as a string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::new(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(s).map_err(serde::de::Error::custom)
            }
        }
    };
}

checked_name!(
    /// The name of a skill: its folder under `agentkit/skills/` and the `name` in its
    /// `SKILL.md` frontmatter.
    SkillName,
    "skill"
);
checked_name!(
    /// The name of a catalog group (`core`, `data-access`, `diagnosis`, ...).
    GroupName,
    "group"
);

/// The three agents of the Investibook diagnosis. There are exactly three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AgentRole {
    /// The user-facing primary agent that delegates through the Task tool.
    #[serde(rename = "diagnosis-orchestrator")]
    DiagnosisOrchestrator,
    /// The subagent that collects or reuses evidence.
    #[serde(rename = "evidence-agent")]
    EvidenceAgent,
    /// The subagent that analyses evidence and writes the final report.
    #[serde(rename = "diagnosis-analyst")]
    DiagnosisAnalyst,
}

impl AgentRole {
    /// All three roles, orchestrator first.
    pub const ALL: [AgentRole; 3] = [
        AgentRole::DiagnosisOrchestrator,
        AgentRole::EvidenceAgent,
        AgentRole::DiagnosisAnalyst,
    ];

    /// The two subagents the orchestrator may delegate to.
    pub const SUBAGENTS: [AgentRole; 2] = [AgentRole::EvidenceAgent, AgentRole::DiagnosisAnalyst];

    /// The agent's name in `opencode.json` and in the output files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DiagnosisOrchestrator => "diagnosis-orchestrator",
            Self::EvidenceAgent => "evidence-agent",
            Self::DiagnosisAnalyst => "diagnosis-analyst",
        }
    }

    /// `true` for the two subagents.
    pub fn is_subagent(self) -> bool {
        !matches!(self, Self::DiagnosisOrchestrator)
    }

    /// The role with this name, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|role| role.as_str() == name)
    }
}

impl fmt::Display for AgentRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Name of the one agent of the single-agent fallback (no Task tool).
pub const FALLBACK_AGENT: &str = "investibook-diagnosis";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_skill_name_rule() {
        for ok in ["a", "core", "data-access", "o11y-metrics-api", "x1-2y"] {
            assert!(SkillName::new(ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(65);
        for bad in [
            "",
            "-a",
            "a-",
            "a--b",
            "A",
            "a_b",
            "a b",
            "ä",
            long.as_str(),
        ] {
            assert!(SkillName::new(bad).is_err(), "{bad}");
        }
        assert!(SkillName::new("a".repeat(64)).is_ok());
    }

    #[test]
    fn roles_round_trip_their_names() {
        for role in AgentRole::ALL {
            assert_eq!(AgentRole::from_name(role.as_str()), Some(role));
            let json = serde_json::to_string(&role).unwrap();
            assert_eq!(json, format!("\"{role}\""));
        }
        assert_eq!(AgentRole::from_name("general"), None);
    }
}
