//! The agents the generator intends: for each of the three agents (or the one agent of the
//! single-agent fallback) its description, mode, steps, prompt and the permission object
//! that confines it. Generation writes these specs; the checker compares a configuration
//! against them.

use super::model::{Action, AgentMode, Permission, PermissionValue};
use crate::catalog::SkillCatalog;
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
pub(crate) const BUILTIN_PERMISSIONS: [&str; 18] = [
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
