#![doc = include_str!("../README.md")]

mod catalog;
mod config;
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
pub use config::{
    Action, AgentConfig, AgentMode, ConfigProblem, OpenCodeConfig, Permission, PermissionValue,
    StepLimits, TaskSupport, config_problems, config_problems_at, validate_config,
};
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
