//! Task capability detected, not assumed: the installed OpenCode is asked which tools the
//! orchestrator would get, and the layout follows its answer.
//!
//! The probe runs `opencode debug agent diagnosis-orchestrator` in the workspace folder
//! with the orchestrator's `task` rule supplied through `OPENCODE_CONFIG_CONTENT` (so it
//! merges with the installation's global and project configuration the way the generated
//! agent will, and nothing is written). When OpenCode lists `task` among the agent's
//! tools and lets it start both subagents, the three-agent layout is chosen, with the
//! required skills in the task prompt ([`TaskSupport::PromptList`]: OpenCode's own Task
//! tool has no `load_skills` argument, and its report does not show tool arguments).
//! Otherwise the single-agent fallback ([`TaskSupport::Unavailable`]) is chosen.

use std::path::Path;

use crate::cli::{AgentReport, OpenCodeCli};
use crate::config::{Action, TaskSupport, task_probe_permission};
use crate::error::WorkspaceError;
use crate::names::AgentRole;
use crate::ordered_json::{Json, Object};

/// What the probe found, with OpenCode's own report of the agent.
#[derive(Debug, Clone)]
pub struct TaskProbe {
    /// The layout to generate.
    pub support: TaskSupport,
    /// `opencode debug agent diagnosis-orchestrator` as OpenCode printed it.
    pub report: AgentReport,
}

/// The `OPENCODE_CONFIG_CONTENT` of the probe.
fn probe_config() -> Result<String, WorkspaceError> {
    let mut agent = Object::new();
    agent.insert("mode", Json::str("primary"));
    agent.insert(
        "description",
        Json::str("Investibook Task capability probe"),
    );
    agent.insert("prompt", Json::str("Task capability probe."));
    agent.insert("permission", task_probe_permission());
    let mut agents = Object::new();
    agents.insert(
        AgentRole::DiagnosisOrchestrator.as_str(),
        Json::Object(agent),
    );
    let mut root = Object::new();
    root.insert("agent", Json::Object(agents));
    serde_json::to_string(&Json::Object(root)).map_err(|e| WorkspaceError::Serialize {
        what: "task probe configuration",
        reason: e.to_string(),
    })
}

/// The layout OpenCode's report of the orchestrator calls for.
pub fn task_support_from(report: &AgentReport) -> TaskSupport {
    let delegates = AgentRole::SUBAGENTS
        .iter()
        .all(|role| report.evaluate("task", role.as_str()) == Action::Allow);
    if report.has_tool("task") && delegates {
        TaskSupport::PromptList
    } else {
        TaskSupport::Unavailable
    }
}

/// Asks the OpenCode behind `cli`, run in `workspace`, whether the orchestrator gets the
/// Task tool.
pub fn detect_task_support(
    cli: &OpenCodeCli,
    workspace: &Path,
) -> Result<TaskProbe, WorkspaceError> {
    let content = probe_config()?;
    let report = cli.debug_agent_with_env(
        workspace,
        AgentRole::DiagnosisOrchestrator.as_str(),
        &[("OPENCODE_CONFIG_CONTENT", content.as_str())],
    )?;
    Ok(TaskProbe {
        support: task_support_from(&report),
        report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_asks_for_exactly_the_two_subagents() {
        let content: serde_json::Value = serde_json::from_str(&probe_config().unwrap()).unwrap();
        let permission = &content["agent"]["diagnosis-orchestrator"]["permission"];
        assert_eq!(permission["*"], "deny");
        assert_eq!(permission["task"]["*"], "deny");
        assert_eq!(permission["task"]["evidence-agent"], "allow");
        assert_eq!(permission["task"]["diagnosis-analyst"], "allow");
    }
}
