//! The transport skill `managed-evidence-tools` as `init_workspace` installs it: rendered
//! from the tools' own sources (`evidence_policy::skill::transport_skill`), accepted by the
//! workspace generator, and loaded by the real OpenCode (pinned, isolated, offline) for the
//! evidence agent, with the same-turn correction rule and `queryId` in what the model reads;
//! the analyst is refused it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use evidence_policy::{
    skill::TRANSPORT_SKILL_GROUP, skill::TRANSPORT_SKILL_NAME, skill::transport_skill,
};
use evidence_result::SAME_TURN_CORRECTION_RULE;
use opencode_workspace::{
    GenerateOptions, Generator, OpenCodeCli, SkillCatalog, SkillsTree, TaskSupport, WorkspaceSkill,
    cli::ToolRun, config::Action, internal::pinned_opencode,
};

/// Runs OpenCode's own `skill` tool as `agent`.
fn load_skill(cli: &OpenCodeCli, ws: &Path, agent: &str) -> ToolRun {
    let params = serde_json::json!({ "name": TRANSPORT_SKILL_NAME });
    cli.run_tool(ws, agent, "skill", &params).unwrap()
}

#[test]
fn the_evidence_agent_loads_the_transport_skill_and_the_analyst_is_refused() {
    let skills = SkillsTree::load(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../opencode-workspace/tests/fixtures/agentkit/skills"),
    )
    .unwrap();
    let skill = WorkspaceSkill::new(
        TRANSPORT_SKILL_NAME,
        TRANSPORT_SKILL_GROUP,
        transport_skill(),
    )
    .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    Generator::new(
        &SkillCatalog::investibook().unwrap(),
        &skills,
        GenerateOptions::default()
            .with_task_support(TaskSupport::PromptList)
            .with_workspace_skill(skill),
    )
    .unwrap()
    .write(ws.path())
    .unwrap();

    let cli =
        OpenCodeCli::new(pinned_opencode().unwrap_or_else(|e| panic!("{e}"))).isolated(home.path());
    let ToolRun::Output(loaded) = load_skill(&cli, ws.path(), "evidence-agent") else {
        panic!("the evidence agent could not load the skill");
    };
    assert!(
        loaded.contains(&format!("<skill_content name=\"{TRANSPORT_SKILL_NAME}\">")),
        "{loaded}"
    );
    assert!(loaded.contains("queryId"), "{loaded}");
    assert!(loaded.contains(SAME_TURN_CORRECTION_RULE), "{loaded}");
    assert!(loaded.contains("compact_v3"), "{loaded}");

    let ToolRun::Failed(refused) = load_skill(&cli, ws.path(), "diagnosis-analyst") else {
        panic!("the analyst loaded the evidence agent's transport skill");
    };
    assert!(
        refused.contains("prevents you from using this specific tool call"),
        "refused for another reason: {refused}"
    );
    let analyst = cli.debug_agent(ws.path(), "diagnosis-analyst").unwrap();
    assert_eq!(
        analyst.evaluate("skill", TRANSPORT_SKILL_NAME),
        Action::Deny
    );
}
