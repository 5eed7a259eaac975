#![doc = include_str!("../README.md")]

mod catalog;
mod catalog_source;
mod cli;
mod config;
mod detect;
mod error;
mod generate;
mod layout;
mod mcp;
mod names;
mod orchestration;
mod ordered_json;
mod outputs;
mod placement;
mod protocol;
mod skills;

pub use catalog::{
    CORE_GROUP, CatalogProblem, DATA_ACCESS_GROUP, DIAGNOSIS_GROUP, SkillCatalog, SkillGroup,
};
pub use catalog_source::MAX_CATALOG_BYTES;
pub use cli::{
    AgentReport, CliOutput, OFFLINE_ENV, OpenCodeCli, PINNED_OPENCODE_VERSION, RuleReport,
};
pub use config::{
    Action, AgentConfig, AgentMode, ConfigProblem, OpenCodeConfig, Permission, PermissionValue,
    StepLimits, TaskSupport, config_problems, config_problems_at, validate_config,
};
pub use detect::{TaskProbe, detect_task_support, task_support_from};
pub use error::{ChildFailure, WorkspaceError};
pub use generate::{FileChange, GenerateOptions, GeneratedFile, GenerationReport, Generator, Mode};
pub use layout::{
    AGENT_RUNS_DIR, AGENTS_DIR, ANALYST_OUTPUT, ANALYST_SCHEMA_PATH, CATALOG_PATH, CONFIG_PATH,
    CONFIG_SCHEMA_URL, EVIDENCE_AGENT_OUTPUT, EVIDENCE_FILES, EVIDENCE_SCHEMA_PATH, EVIDENCES_DIR,
    INVESTIBOOK_DIR, MANIFEST_PATH, REPORT_PATH, SKILL_DISCOVERY_DIRS,
};
pub use mcp::McpServer;
pub use names::{AgentRole, FALLBACK_AGENT, GroupName, MAX_NAME_LEN, SkillName};
pub use orchestration::{
    ChildOutcome, Conclusion, MAX_ATTEMPTS, MAX_PASSES, Orchestration, Phase, Refusal, Step,
    StepKind,
};
pub use outputs::{
    CheckResult, ChildOutputReader, Confidence, DiagnosisAnalystId, DiagnosisAnalystOutput,
    DiagnosisContext, EvidenceAgentId, EvidenceAgentOutput, GO_GC_CHECK, MAX_CHILD_OUTPUT_BYTES,
    QualityCheck, RejectedCause, RunStatus, Scope, TimeRange, analyst_output_problems,
    diagnosis_analyst_schema, evidence_agent_schema, evidence_output_problems,
};
pub use placement::{Placement, Worktree, project_worktree};
pub use protocol::{
    FALLBACK_NOTICE, FALLBACK_PROTOCOL_TITLE, INSUFFICIENT_EVIDENCE_REPLY, PROTOCOL_TITLE,
    REQUIRED_SKILLS_HEADING, fallback_protocol, static_protocol, static_protocol_for,
};
pub use skills::{MAX_DESCRIPTION_CHARS, SkillEntry, SkillMeta, SkillsTree};

/// Helpers for this crate's tests and for other crates' tests that run the pinned OpenCode.
/// Not part of the stable interface.
#[doc(hidden)]
pub mod internal {
    use std::path::PathBuf;

    use crate::cli::PINNED_OPENCODE_VERSION;

    /// The environment variable naming the `opencode` program the tests run.
    pub const OPENCODE_BIN_ENV: &str = "OPENCODE_BIN";

    /// Where `scripts/test.sh` installs the pinned `opencode-ai` (from the repository root).
    pub const OPENCODE_INSTALL_DIR: &str = ".tools/opencode";

    /// The command that installs the pinned OpenCode where the tests look for it.
    pub fn install_command() -> String {
        format!(
            "scripts/test.sh (or: npm install --prefix {OPENCODE_INSTALL_DIR} --save-exact --no-audit --no-fund opencode-ai@{PINNED_OPENCODE_VERSION}; apt-get install -y nodejs npm when npm is missing)"
        )
    }

    /// The pinned `opencode` program: `$OPENCODE_BIN`, or
    /// `<repository>/.tools/opencode/node_modules/.bin/opencode`. An error (never a skip)
    /// that names the install command when it is not there.
    pub fn pinned_opencode() -> Result<PathBuf, String> {
        let path = match std::env::var_os(OPENCODE_BIN_ENV) {
            Some(path) => PathBuf::from(path),
            None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(OPENCODE_INSTALL_DIR)
                .join("node_modules/.bin/opencode"),
        };
        if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "OpenCode {PINNED_OPENCODE_VERSION} is not installed at {} (set {OPENCODE_BIN_ENV} to use another path); install it with: {}",
                path.display(),
                install_command()
            ))
        }
    }
}
