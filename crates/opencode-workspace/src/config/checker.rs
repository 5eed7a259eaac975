//! What is wrong with an `opencode.json` against the agents the generator intends, for a
//! workspace at a given place in the OpenCode worktree, and the error that lists it.

use std::fmt;

use wildmatch::WildMatch;

use super::model::{Action, AgentConfig, AgentMode, OpenCodeConfig, Permission, PermissionValue};
use super::permissions::{AgentSpec, StepLimits, TaskSupport, agent_specs};
use crate::catalog::SkillCatalog;
use crate::layout::prompt_reference;
use crate::names::{AgentRole, FALLBACK_AGENT, SkillName};
use crate::placement::Placement;

/// Why an `opencode.json` does not satisfy the generated agents' rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigProblem {
    /// An expected agent is absent.
    MissingAgent(String),
    /// A reserved Investibook agent is present although this mode does not use it.
    UnexpectedAgent(String),
    /// `mode` is not the expected one.
    WrongMode(String),
    /// `default_agent` is not the primary diagnosis agent.
    WrongDefaultAgent(Option<String>),
    /// `$schema` is missing.
    MissingSchema,
    /// `prompt` does not point at the generated prompt file.
    WrongPrompt(String),
    /// `description` is missing or empty.
    MissingDescription(String),
    /// `steps` is missing or zero.
    MissingSteps(String),
    /// `permission` is missing or malformed.
    MissingPermission(String),
    /// `permission` does not open with `"*": "deny"`.
    NoDenyByDefault(String),
    /// A permission the agent touches has no explicit rule.
    MissingRule {
        /// The agent.
        agent: String,
        /// The permission key.
        key: &'static str,
    },
    /// A rule asks; a headless run would hang on it.
    AskRule {
        /// The agent.
        agent: String,
        /// The key.
        key: String,
        /// The pattern.
        pattern: String,
    },
    /// An agent other than the orchestrator has a `task` rule, or may start a subagent.
    TaskNotAllowed(String),
    /// The orchestrator may start an agent other than the two subagents, or cannot start one
    /// of them.
    TaskTargets {
        /// The agent.
        agent: String,
        /// The offending pattern or missing target.
        detail: String,
    },
    /// The agent may edit a file that is not one of its own outputs, or cannot edit one.
    EditScope {
        /// The agent.
        agent: String,
        /// The offending pattern or missing path.
        detail: String,
    },
    /// The agent may load a skill outside its load groups, or cannot load one of them.
    SkillScope {
        /// The agent.
        agent: String,
        /// The offending pattern or missing skill.
        detail: String,
    },
    /// The agent may reach outside the workspace.
    ExternalDirectory(String),
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingAgent(a) => write!(f, "agent {a} is missing"),
            Self::UnexpectedAgent(a) => write!(f, "agent {a} must not be configured in this mode"),
            Self::WrongMode(a) => write!(f, "agent {a} has the wrong mode"),
            Self::WrongDefaultAgent(found) => write!(f, "default_agent is {found:?}"),
            Self::MissingSchema => write!(f, "$schema is missing"),
            Self::WrongPrompt(a) => write!(f, "agent {a} does not use its generated prompt file"),
            Self::MissingDescription(a) => write!(f, "agent {a} has no description"),
            Self::MissingSteps(a) => write!(f, "agent {a} has no step limit"),
            Self::MissingPermission(a) => write!(f, "agent {a} has no well-formed permission"),
            Self::NoDenyByDefault(a) => {
                write!(
                    f,
                    "permission of agent {a} does not open with \"*\": \"deny\""
                )
            }
            Self::MissingRule { agent, key } => {
                write!(f, "agent {agent} has no explicit {key} rule")
            }
            Self::AskRule {
                agent,
                key,
                pattern,
            } => write!(f, "agent {agent} asks for {key} {pattern:?}"),
            Self::TaskNotAllowed(a) => write!(f, "agent {a} must not start subagents"),
            Self::TaskTargets { agent, detail } => write!(f, "task rules of {agent}: {detail}"),
            Self::EditScope { agent, detail } => write!(f, "edit rules of {agent}: {detail}"),
            Self::SkillScope { agent, detail } => write!(f, "skill rules of {agent}: {detail}"),
            Self::ExternalDirectory(a) => {
                write!(f, "agent {a} may use directories outside the workspace")
            }
        }
    }
}

/// A generated or inspected `opencode.json` breaks the permission rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Every problem found, agent by agent.
    #[error(
        "invalid opencode configuration: {}",
        .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    Invalid(Vec<ConfigProblem>),
}

impl ConfigError {
    /// The problems found.
    pub fn problems(&self) -> &[ConfigProblem] {
        match self {
            Self::Invalid(problems) => problems,
        }
    }
}

fn is_literal(pattern: &str) -> bool {
    !pattern.contains(['*', '?'])
}

/// Inputs that must be refused for every agent's `task` rule unless they are targets.
const TASK_PROBES: [&str; 8] = [
    "general",
    "explore",
    "build",
    "plan",
    "diagnosis-orchestrator",
    "evidence-agent",
    "diagnosis-analyst",
    "investibook-diagnosis",
];

/// Paths no subagent may edit unless they are its own outputs.
const EDIT_PROBES: [&str; 13] = [
    ".opencode/opencode.json",
    ".opencode/investibook/SKILL_CATALOG.md",
    ".opencode/skills/jira/SKILL.md",
    "evidences/agent-runs/evidence-agent.json",
    "evidences/agent-runs/diagnosis-analyst.json",
    "evidences/workspace_evidence_report.json",
    "evidences/metrics.json",
    "evidences/logs.json",
    "evidences/queries.json",
    "evidences/events.json",
    "evidences/other.json",
    "src/main.rs",
    "README.md",
];

fn check_agent(
    spec: &AgentSpec,
    agent: &AgentConfig,
    catalog: &SkillCatalog,
    placement: &Placement,
) -> Vec<ConfigProblem> {
    let mut problems = Vec::new();
    check_fields(spec, agent, &mut problems);
    let Some(permission) = &agent.permission else {
        problems.push(ConfigProblem::MissingPermission(spec.name.clone()));
        return problems;
    };
    check_rule_shape(spec, permission, &mut problems);
    check_task(spec, permission, &mut problems);
    check_edit(spec, permission, placement, &mut problems);
    check_skills(spec, permission, catalog, &mut problems);
    check_external_directory(spec, permission, &mut problems);
    problems
}

/// The agent's own fields: mode, prompt reference, description and step limit.
fn check_fields(spec: &AgentSpec, agent: &AgentConfig, problems: &mut Vec<ConfigProblem>) {
    let name = &spec.name;
    if agent.mode != Some(spec.mode) {
        problems.push(ConfigProblem::WrongMode(name.clone()));
    }
    if agent.prompt.as_deref() != Some(prompt_reference(name).as_str()) {
        problems.push(ConfigProblem::WrongPrompt(name.clone()));
    }
    if agent
        .description
        .as_deref()
        .is_none_or(|d| d.trim().is_empty())
    {
        problems.push(ConfigProblem::MissingDescription(name.clone()));
    }
    if agent.steps.is_none_or(|s| s == 0) {
        problems.push(ConfigProblem::MissingSteps(name.clone()));
    }
}

/// The shape every permission has: `"*": "deny"` first, no rule that asks, and an
/// explicit rule for each permission the agent touches.
fn check_rule_shape(spec: &AgentSpec, permission: &Permission, problems: &mut Vec<ConfigProblem>) {
    let name = &spec.name;
    if permission.entries().first() != Some(&("*".to_owned(), PermissionValue::All(Action::Deny))) {
        problems.push(ConfigProblem::NoDenyByDefault(name.clone()));
    }
    for (key, pattern, action) in permission.rules() {
        if action == Action::Ask {
            problems.push(ConfigProblem::AskRule {
                agent: name.clone(),
                key: key.to_owned(),
                pattern: pattern.to_owned(),
            });
        }
    }
    let mut required = vec![
        "read",
        "edit",
        "bash",
        "webfetch",
        "external_directory",
        "skill",
    ];
    if !spec.task.is_empty() {
        required.push("task");
    }
    for key in required {
        if permission.get(key).is_none() {
            problems.push(ConfigProblem::MissingRule {
                agent: name.clone(),
                key,
            });
        }
    }
}

/// The patterns of the allow rules reachable for `perm`; each must be a literal member of
/// what the agent may reach.
fn allow_patterns(permission: &Permission, perm: &str) -> Vec<String> {
    permission
        .rules()
        .into_iter()
        .filter(|(key, _, action)| *action == Action::Allow && WildMatch::new(key).matches(perm))
        .map(|(_, pattern, _)| pattern.to_owned())
        .collect()
}

/// `allow` for what the agent may reach, `deny` for everything else.
fn expected_action(allowed: bool) -> Action {
    if allowed { Action::Allow } else { Action::Deny }
}

/// Where `key` may reach: exactly `members`. Every allow rule reachable for `key` must be
/// a literal member, and each probe must evaluate to allow when it is a member and to deny
/// otherwise; `problem` turns each breach into the agent's problem.
fn check_scope<S: AsRef<str>>(
    permission: &Permission,
    key: &str,
    members: &[&str],
    probes: impl IntoIterator<Item = S>,
    problem: impl Fn(String) -> ConfigProblem,
    problems: &mut Vec<ConfigProblem>,
) {
    for pattern in allow_patterns(permission, key) {
        if !is_literal(&pattern) || !members.contains(&pattern.as_str()) {
            problems.push(problem(format!("allows {pattern:?}")));
        }
    }
    for probe in probes {
        let probe = probe.as_ref();
        let expected = expected_action(members.contains(&probe));
        if permission.evaluate(key, probe) != Some(expected) {
            problems.push(problem(format!("{probe} is not {}", expected.as_str())));
        }
    }
}

/// `task`: only the agents it delegates to, and no rule at all for an agent that
/// delegates to none.
fn check_task(spec: &AgentSpec, permission: &Permission, problems: &mut Vec<ConfigProblem>) {
    let name = &spec.name;
    let targets: Vec<&str> = spec.task.iter().map(|r| r.as_str()).collect();
    if targets.is_empty() {
        if permission.get("task").is_some()
            || TASK_PROBES
                .iter()
                .any(|p| permission.evaluate("task", p) != Some(Action::Deny))
            || !allow_patterns(permission, "task").is_empty()
        {
            problems.push(ConfigProblem::TaskNotAllowed(name.clone()));
        }
        return;
    }
    let problem = |detail| ConfigProblem::TaskTargets {
        agent: name.clone(),
        detail,
    };
    check_scope(permission, "task", &targets, TASK_PROBES, problem, problems);
}

/// `edit`: OpenCode checks paths relative to the worktree, so the agent's own files are
/// its workspace-relative outputs under the placement prefix, and nothing else.
fn check_edit(
    spec: &AgentSpec,
    permission: &Permission,
    placement: &Placement,
    problems: &mut Vec<ConfigProblem>,
) {
    let own: Vec<String> = spec.edit.iter().map(|f| placement.pattern(f)).collect();
    let members: Vec<&str> = own.iter().map(String::as_str).collect();
    let unprefixed = EDIT_PROBES
        .iter()
        .map(|p| (*p).to_owned())
        .chain(spec.edit.iter().cloned());
    let probes = EDIT_PROBES
        .iter()
        .map(|p| placement.pattern(p))
        .chain(own.iter().cloned())
        .chain(unprefixed);
    let problem = |detail| ConfigProblem::EditScope {
        agent: spec.name.clone(),
        detail,
    };
    check_scope(permission, "edit", &members, probes, problem, problems);
}

/// `skill`: exactly the skills of the agent's load groups.
fn check_skills(
    spec: &AgentSpec,
    permission: &Permission,
    catalog: &SkillCatalog,
    problems: &mut Vec<ConfigProblem>,
) {
    let allowed: Vec<&str> = spec.skills.iter().map(SkillName::as_str).collect();
    let probes = catalog.skills().into_iter().map(SkillName::as_str);
    let problem = |detail| ConfigProblem::SkillScope {
        agent: spec.name.clone(),
        detail,
    };
    check_scope(permission, "skill", &allowed, probes, problem, problems);
}

/// `external_directory`: nothing outside the workspace.
fn check_external_directory(
    spec: &AgentSpec,
    permission: &Permission,
    problems: &mut Vec<ConfigProblem>,
) {
    if !allow_patterns(permission, "external_directory").is_empty()
        || ["/etc/passwd", "~/.ssh/id_rsa", "../other"]
            .iter()
            .any(|p| permission.evaluate("external_directory", p) != Some(Action::Deny))
    {
        problems.push(ConfigProblem::ExternalDirectory(spec.name.clone()));
    }
}

/// [`config_problems_at`] for a workspace that is the project worktree itself (a git root).
pub fn config_problems(
    config: &OpenCodeConfig,
    catalog: &SkillCatalog,
    support: TaskSupport,
) -> Vec<ConfigProblem> {
    config_problems_at(config, catalog, support, &Placement::worktree_root())
}

/// Everything in `config` that breaks the rules of the agents generated for `support`
/// in a workspace at `placement` inside the OpenCode worktree:
/// the expected agents with their modes, prompts, steps and descriptions; `default_agent`;
/// every permission opening with `"*": "deny"` and never asking; explicit `read`, `edit`,
/// `bash`, `webfetch`, `external_directory` and `skill` rules; only the orchestrator having
/// a `task` rule, allowing exactly the two subagents; edits limited to each agent's own
/// output files (as OpenCode names them from the worktree); skills limited to each
/// agent's load groups; no external directories.
pub fn config_problems_at(
    config: &OpenCodeConfig,
    catalog: &SkillCatalog,
    support: TaskSupport,
    placement: &Placement,
) -> Vec<ConfigProblem> {
    let specs = agent_specs(catalog, support, StepLimits::default(), &[], &[]);
    let mut problems = Vec::new();
    if config.schema.is_none() {
        problems.push(ConfigProblem::MissingSchema);
    }
    let primary = specs
        .iter()
        .find(|s| s.mode == AgentMode::Primary)
        .map(|s| s.name.clone());
    if config.default_agent != primary {
        problems.push(ConfigProblem::WrongDefaultAgent(
            config.default_agent.clone(),
        ));
    }
    let reserved = AgentRole::ALL
        .iter()
        .map(|r| r.as_str())
        .chain([FALLBACK_AGENT]);
    for name in reserved {
        if !specs.iter().any(|s| s.name == name) && config.agent(name).is_some() {
            problems.push(ConfigProblem::UnexpectedAgent(name.to_owned()));
        }
    }
    for spec in &specs {
        match config.agent(&spec.name) {
            None => problems.push(ConfigProblem::MissingAgent(spec.name.clone())),
            Some(agent) => problems.extend(check_agent(spec, agent, catalog, placement)),
        }
    }
    problems
}

/// Checks `config` with [`config_problems`]; the error lists every problem.
pub fn validate_config(
    config: &OpenCodeConfig,
    catalog: &SkillCatalog,
    support: TaskSupport,
) -> Result<(), ConfigError> {
    let problems = config_problems(config, catalog, support);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::Invalid(problems))
    }
}
