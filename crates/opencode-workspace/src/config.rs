use std::fmt;

use wildmatch::WildMatch;

use crate::catalog::SkillCatalog;
use crate::error::WorkspaceError;
use crate::layout::{
    ANALYST_OUTPUT, EVIDENCE_AGENT_OUTPUT, EVIDENCE_FILES, REPORT_PATH, prompt_reference,
};
use crate::names::{AgentRole, FALLBACK_AGENT, SkillName};
use crate::ordered_json::{Json, Object};
use crate::placement::Placement;

/// What the OpenCode runtime of the workspace can do for delegation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TaskSupport {
    /// The Task tool takes an explicit `load_skills` argument (OMO-style).
    LoadSkillsArgument,
    /// The Task tool exists but has no `load_skills` argument: the required skills are
    /// listed in the task prompt under `Required skills to load:`.
    #[default]
    PromptList,
    /// No Task tool: the single-agent fallback is generated and multi-agent diagnosis is
    /// not in effect.
    Unavailable,
}

impl TaskSupport {
    /// `true` when the three-agent configuration is generated.
    pub fn is_multi_agent(self) -> bool {
        !matches!(self, Self::Unavailable)
    }
}

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
pub struct Permission(Vec<(String, PermissionValue)>);

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

    fn to_json(&self) -> Json {
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
    fn as_str(self) -> &'static str {
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
    pub fn parse(text: &str) -> Result<Self, WorkspaceError> {
        let json: Json = serde_json::from_str(text).map_err(|e| WorkspaceError::Unreadable {
            path: crate::layout::CONFIG_PATH.into(),
            reason: e.to_string(),
        })?;
        let root = json.as_object().ok_or_else(|| WorkspaceError::Unreadable {
            path: crate::layout::CONFIG_PATH.into(),
            reason: "the top level is not an object".to_owned(),
        })?;
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

/// Agent iteration limits (`steps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepLimits {
    /// `diagnosis-orchestrator`.
    pub orchestrator: u32,
    /// `evidence-agent`.
    pub evidence_agent: u32,
    /// `diagnosis-analyst`.
    pub diagnosis_analyst: u32,
    /// The single agent of the fallback.
    pub fallback: u32,
}

impl Default for StepLimits {
    fn default() -> Self {
        Self {
            orchestrator: 40,
            evidence_agent: 60,
            diagnosis_analyst: 40,
            fallback: 80,
        }
    }
}

/// Tool permission keys the generated agents name; tool patterns given as options may not
/// match any of them.
const BUILTIN_PERMISSIONS: [&str; 18] = [
    "*",
    "read",
    "edit",
    "write",
    "patch",
    "glob",
    "grep",
    "list",
    "bash",
    "task",
    "skill",
    "webfetch",
    "websearch",
    "codesearch",
    "external_directory",
    "todowrite",
    "todoread",
    "question",
];

/// What one generated agent is: the single source for both generation and checking.
#[derive(Debug, Clone)]
pub(crate) struct AgentSpec {
    pub(crate) name: String,
    pub(crate) description: &'static str,
    pub(crate) mode: AgentMode,
    pub(crate) steps: u32,
    /// Workspace-relative files the agent may edit (its own outputs).
    pub(crate) edit: Vec<String>,
    /// Skills the agent may load.
    pub(crate) skills: Vec<SkillName>,
    /// Subagents it may start through the Task tool.
    pub(crate) task: Vec<AgentRole>,
    /// Shell command patterns it may run.
    pub(crate) bash: Vec<String>,
    /// Extra tool-name patterns it may use (managed evidence tools).
    pub(crate) tools: Vec<String>,
    /// Whether it keeps a todo list.
    pub(crate) todo: bool,
}

/// The permission of the Task-capability probe: deny everything but starting the two
/// subagents, exactly the orchestrator's `task` rule.
pub(crate) fn task_probe_permission() -> Json {
    Permission(vec![
        ("*".to_owned(), PermissionValue::All(Action::Deny)),
        (
            "task".to_owned(),
            deny_all_but(AgentRole::SUBAGENTS.iter().map(|r| r.as_str().to_owned())),
        ),
    ])
    .to_json()
}

/// The managed evidence tool packages the evidence agent uses by default.
pub(crate) const DEFAULT_EVIDENCE_TOOLS: &str = "managed_auto_oncall_*";

pub(crate) fn check_tool_pattern(pattern: &str) -> Result<(), WorkspaceError> {
    let matcher = WildMatch::new(pattern);
    if pattern.trim().is_empty() || pattern.chars().any(char::is_control) {
        return Err(WorkspaceError::InvalidOption {
            option: "evidence tool pattern",
            reason: "empty or contains control characters".to_owned(),
        });
    }
    if let Some(hit) = BUILTIN_PERMISSIONS.iter().find(|p| matcher.matches(p)) {
        return Err(WorkspaceError::InvalidOption {
            option: "evidence tool pattern",
            reason: format!("{pattern:?} would also match the built-in permission {hit:?}"),
        });
    }
    Ok(())
}

pub(crate) fn check_bash_pattern(pattern: &str) -> Result<(), WorkspaceError> {
    if pattern.trim().is_empty() || pattern.trim() == "*" || pattern.chars().any(char::is_control) {
        return Err(WorkspaceError::InvalidOption {
            option: "evidence bash pattern",
            reason: format!("{pattern:?} is empty, allows every command or has control characters"),
        });
    }
    Ok(())
}

/// The agents generated for `support`.
pub(crate) fn agent_specs(
    catalog: &SkillCatalog,
    support: TaskSupport,
    steps: StepLimits,
    evidence_bash: &[String],
    evidence_tools: &[String],
) -> Vec<AgentSpec> {
    let evidence_outputs: Vec<String> = EVIDENCE_FILES
        .iter()
        .copied()
        .chain([EVIDENCE_AGENT_OUTPUT])
        .map(str::to_owned)
        .collect();
    let analyst_outputs = vec![ANALYST_OUTPUT.to_owned(), REPORT_PATH.to_owned()];
    if !support.is_multi_agent() {
        let mut skills = catalog.default_skills(AgentRole::EvidenceAgent);
        for skill in catalog.default_skills(AgentRole::DiagnosisAnalyst) {
            if !skills.contains(&skill) {
                skills.push(skill);
            }
        }
        let edit = EVIDENCE_FILES
            .iter()
            .copied()
            .chain([REPORT_PATH])
            .map(str::to_owned)
            .collect();
        return vec![AgentSpec {
            name: FALLBACK_AGENT.to_owned(),
            description: "Investibook diagnosis, single-agent fallback (no Task tool): multi-agent diagnosis is not in effect",
            mode: AgentMode::Primary,
            steps: steps.fallback,
            edit,
            skills,
            task: Vec::new(),
            bash: evidence_bash.to_vec(),
            tools: evidence_tools.to_vec(),
            todo: true,
        }];
    }
    vec![
        AgentSpec {
            name: AgentRole::DiagnosisOrchestrator.as_str().to_owned(),
            description: "Investibook diagnosis entry point: scopes the request, delegates to evidence-agent and diagnosis-analyst through the Task tool, reads their output files and answers",
            mode: AgentMode::Primary,
            steps: steps.orchestrator,
            edit: Vec::new(),
            skills: Vec::new(),
            task: AgentRole::SUBAGENTS.to_vec(),
            bash: Vec::new(),
            tools: Vec::new(),
            todo: true,
        },
        AgentSpec {
            name: AgentRole::EvidenceAgent.as_str().to_owned(),
            description: "Collects or reuses diagnosis evidence (metrics, logs, slow queries, TopSQL, events, diagnostic files) and writes evidences/agent-runs/evidence-agent.json",
            mode: AgentMode::Subagent,
            steps: steps.evidence_agent,
            edit: evidence_outputs,
            skills: catalog.default_skills(AgentRole::EvidenceAgent),
            task: Vec::new(),
            bash: evidence_bash.to_vec(),
            tools: evidence_tools.to_vec(),
            todo: false,
        },
        AgentSpec {
            name: AgentRole::DiagnosisAnalyst.as_str().to_owned(),
            description: "Analyses and reviews the collected evidence, rejects candidate causes, writes evidences/agent-runs/diagnosis-analyst.json and evidences/workspace_evidence_report.json",
            mode: AgentMode::Subagent,
            steps: steps.diagnosis_analyst,
            edit: analyst_outputs,
            skills: catalog.default_skills(AgentRole::DiagnosisAnalyst),
            task: Vec::new(),
            bash: Vec::new(),
            tools: Vec::new(),
            todo: false,
        },
    ]
}

fn deny_all_but(allowed: impl IntoIterator<Item = String>) -> PermissionValue {
    let mut patterns = vec![("*".to_owned(), Action::Deny)];
    patterns.extend(allowed.into_iter().map(|p| (p, Action::Allow)));
    if patterns.len() == 1 {
        PermissionValue::All(Action::Deny)
    } else {
        PermissionValue::Patterns(patterns)
    }
}

impl AgentSpec {
    /// The permission object: `"*": "deny"` first, then explicit rules. No rule asks.
    /// Edit patterns are the agent's own files as OpenCode names them for a workspace at
    /// `placement` (relative to the project worktree). Only keys with a tool behind them in
    /// OpenCode 1.18.33 are written (no `list`, no `todoread`).
    pub(crate) fn permission(&self, placement: &Placement) -> Permission {
        let allow = PermissionValue::All(Action::Allow);
        let deny = PermissionValue::All(Action::Deny);
        let mut entries = vec![
            ("*".to_owned(), deny.clone()),
            (
                "read".to_owned(),
                PermissionValue::Patterns(vec![
                    ("*".to_owned(), Action::Allow),
                    ("*.env".to_owned(), Action::Deny),
                    ("*.env.*".to_owned(), Action::Deny),
                    ("*.env.example".to_owned(), Action::Allow),
                ]),
            ),
            ("glob".to_owned(), allow.clone()),
            ("grep".to_owned(), allow.clone()),
            (
                "edit".to_owned(),
                deny_all_but(self.edit.iter().map(|file| placement.pattern(file))),
            ),
            ("bash".to_owned(), deny_all_but(self.bash.iter().cloned())),
            ("webfetch".to_owned(), deny.clone()),
            ("external_directory".to_owned(), deny.clone()),
            (
                "skill".to_owned(),
                deny_all_but(self.skills.iter().map(|s| s.as_str().to_owned())),
            ),
        ];
        if !self.task.is_empty() {
            entries.push((
                "task".to_owned(),
                deny_all_but(self.task.iter().map(|r| r.as_str().to_owned())),
            ));
        }
        if self.todo {
            entries.push(("todowrite".to_owned(), allow.clone()));
        }
        for tool in &self.tools {
            entries.push((tool.clone(), allow.clone()));
        }
        Permission(entries)
    }

    /// The `agent.<name>` JSON value for a workspace at `placement`.
    pub(crate) fn to_json(&self, placement: &Placement) -> Json {
        let mut object = Object::new();
        object.insert("description", Json::str(self.description));
        object.insert("mode", Json::str(self.mode.as_str()));
        object.insert("prompt", Json::str(prompt_reference(&self.name)));
        object.insert("steps", Json::Number(self.steps.into()));
        object.insert("permission", self.permission(placement).to_json());
        Json::Object(object)
    }
}

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
    let name = spec.name.clone();
    let mut problems = Vec::new();
    if agent.mode != Some(spec.mode) {
        problems.push(ConfigProblem::WrongMode(name.clone()));
    }
    if agent.prompt.as_deref() != Some(prompt_reference(&spec.name).as_str()) {
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
    let Some(permission) = &agent.permission else {
        problems.push(ConfigProblem::MissingPermission(name));
        return problems;
    };
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
    // Allow rules reachable for a permission must be literal members of `allowed`.
    let allow_patterns = |perm: &str| -> Vec<String> {
        permission
            .rules()
            .into_iter()
            .filter(|(key, _, action)| {
                *action == Action::Allow && WildMatch::new(key).matches(perm)
            })
            .map(|(_, pattern, _)| pattern.to_owned())
            .collect()
    };
    // task
    let targets: Vec<&str> = spec.task.iter().map(|r| r.as_str()).collect();
    if targets.is_empty() {
        if permission.get("task").is_some()
            || TASK_PROBES
                .iter()
                .any(|p| permission.evaluate("task", p) != Some(Action::Deny))
            || !allow_patterns("task").is_empty()
        {
            problems.push(ConfigProblem::TaskNotAllowed(name.clone()));
        }
    } else {
        for pattern in allow_patterns("task") {
            if !is_literal(&pattern) || !targets.contains(&pattern.as_str()) {
                problems.push(ConfigProblem::TaskTargets {
                    agent: name.clone(),
                    detail: format!("allows {pattern:?}"),
                });
            }
        }
        for probe in TASK_PROBES {
            let expected = if targets.contains(&probe) {
                Action::Allow
            } else {
                Action::Deny
            };
            if permission.evaluate("task", probe) != Some(expected) {
                problems.push(ConfigProblem::TaskTargets {
                    agent: name.clone(),
                    detail: format!("{probe} is not {}", expected.as_str()),
                });
            }
        }
    }
    // edit: OpenCode checks paths relative to the worktree, so the agent's own files are
    // its workspace-relative outputs under the placement prefix, and nothing else.
    let own: Vec<String> = spec.edit.iter().map(|f| placement.pattern(f)).collect();
    for pattern in allow_patterns("edit") {
        if !is_literal(&pattern) || !own.contains(&pattern) {
            problems.push(ConfigProblem::EditScope {
                agent: name.clone(),
                detail: format!("allows {pattern:?}"),
            });
        }
    }
    let unprefixed = EDIT_PROBES
        .iter()
        .map(|p| (*p).to_owned())
        .chain(spec.edit.iter().cloned());
    let probes = EDIT_PROBES
        .iter()
        .map(|p| placement.pattern(p))
        .chain(own.iter().cloned())
        .chain(unprefixed);
    for probe in probes {
        let expected = if own.contains(&probe) {
            Action::Allow
        } else {
            Action::Deny
        };
        if permission.evaluate("edit", &probe) != Some(expected) {
            problems.push(ConfigProblem::EditScope {
                agent: name.clone(),
                detail: format!("{probe} is not {}", expected.as_str()),
            });
        }
    }
    // skill
    let allowed: Vec<&str> = spec.skills.iter().map(SkillName::as_str).collect();
    for pattern in allow_patterns("skill") {
        if !is_literal(&pattern) || !allowed.contains(&pattern.as_str()) {
            problems.push(ConfigProblem::SkillScope {
                agent: name.clone(),
                detail: format!("allows {pattern:?}"),
            });
        }
    }
    for skill in catalog.skills() {
        let expected = if allowed.contains(&skill.as_str()) {
            Action::Allow
        } else {
            Action::Deny
        };
        if permission.evaluate("skill", skill.as_str()) != Some(expected) {
            problems.push(ConfigProblem::SkillScope {
                agent: name.clone(),
                detail: format!("{skill} is not {}", expected.as_str()),
            });
        }
    }
    // external_directory
    if !allow_patterns("external_directory").is_empty()
        || ["/etc/passwd", "~/.ssh/id_rsa", "../other"]
            .iter()
            .any(|p| permission.evaluate("external_directory", p) != Some(Action::Deny))
    {
        problems.push(ConfigProblem::ExternalDirectory(name));
    }
    problems
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
) -> Result<(), WorkspaceError> {
    let problems = config_problems(config, catalog, support);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(WorkspaceError::InvalidConfig(problems))
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

    #[test]
    fn tool_patterns_may_not_shadow_builtins() {
        assert!(check_tool_pattern("managed_auto_oncall_*").is_ok());
        for bad in ["*", "t*", "?ask", "", "edit"] {
            assert!(check_tool_pattern(bad).is_err(), "{bad}");
        }
        assert!(check_bash_pattern("clinic *").is_ok());
        assert!(check_bash_pattern("*").is_err());
    }
}
