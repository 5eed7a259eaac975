//! Where everything lives, relative to the workspace root (always `/`-separated).

/// The OpenCode configuration the generator merges its agents into.
pub const CONFIG_PATH: &str = ".opencode/opencode.json";
/// `$schema` of `opencode.json`.
pub const CONFIG_SCHEMA_URL: &str = "https://opencode.ai/config.json";
/// The generator's own folder; nothing outside it but `opencode.json` and `evidences/` is
/// written.
pub const INVESTIBOOK_DIR: &str = ".opencode/investibook";
/// The folder of the agent prompts.
pub const AGENTS_DIR: &str = ".opencode/investibook/agents";
/// The read-only skill catalog. Not a skill, not named `SKILL.md`, not on a discovery path.
pub const CATALOG_PATH: &str = ".opencode/investibook/SKILL_CATALOG.md";
/// The schema of `evidences/agent-runs/evidence-agent.json`.
pub const EVIDENCE_SCHEMA_PATH: &str =
    ".opencode/investibook/schemas/evidence-agent-output.schema.json";
/// The schema of `evidences/agent-runs/diagnosis-analyst.json`.
pub const ANALYST_SCHEMA_PATH: &str =
    ".opencode/investibook/schemas/diagnosis-analyst-output.schema.json";
/// Digests of the files the generator wrote, so that it can tell its own unchanged files
/// from files someone edited.
pub const MANIFEST_PATH: &str = ".opencode/investibook/generated.json";
/// Where the generator installs the workspace's own skills
/// (`.opencode/skill/<name>/SKILL.md`), a project skill folder OpenCode reads. Apart from
/// the user's `.opencode/skills`.
pub const WORKSPACE_SKILLS_DIR: &str = ".opencode/skill";
/// The skill discovery folders of the existing enable/disable flow. The generator never
/// reads, writes or deletes anything under them.
pub const SKILL_DISCOVERY_DIRS: [&str; 2] = [".opencode/skills", ".opencode/.all-skills"];

/// The agent-side evidence folder.
pub const EVIDENCES_DIR: &str = "evidences";
/// The folder of the child agents' run files.
pub const AGENT_RUNS_DIR: &str = "evidences/agent-runs";
/// The evidence agent's run file.
pub const EVIDENCE_AGENT_OUTPUT: &str = "evidences/agent-runs/evidence-agent.json";
/// The analyst's run file.
pub const ANALYST_OUTPUT: &str = "evidences/agent-runs/diagnosis-analyst.json";
/// The report artifact the frontend shows; written by the analyst.
pub const REPORT_PATH: &str = "evidences/workspace_evidence_report.json";
/// The evidence files written by the evidence agent.
pub const EVIDENCE_FILES: [&str; 4] = [
    "evidences/metrics.json",
    "evidences/logs.json",
    "evidences/queries.json",
    "evidences/events.json",
];

/// `{file:...}` reference (relative to `.opencode/opencode.json`) of an agent's prompt.
pub(crate) fn prompt_reference(agent: &str) -> String {
    format!("{{file:./investibook/agents/{agent}.md}}")
}

/// Workspace-relative path of an agent's prompt.
pub(crate) fn prompt_path(agent: &str) -> String {
    format!("{AGENTS_DIR}/{agent}.md")
}
