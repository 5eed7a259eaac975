//! The two child outputs as the plan defines them (`evidence-agent.json` and
//! `diagnosis-analyst.json`) and their JSON Schemas, generated with schemars. The rules
//! beyond the schemas are `checks.rs`; reading the files is `reader.rs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a child agent's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Everything the task asked for was done.
    Ok,
    /// Part of it was done; the gaps are listed.
    Partial,
    /// Nothing usable was produced.
    Failed,
}

/// How sure the analyst is of the root cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Weak support.
    Low,
    /// Partial support.
    Medium,
    /// Strong, reviewed support.
    High,
}

/// The `agent` field of the evidence agent's output: always `evidence-agent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum EvidenceAgentId {
    /// `evidence-agent`.
    #[serde(rename = "evidence-agent")]
    EvidenceAgent,
}

/// The `agent` field of the analyst's output: always `diagnosis-analyst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum DiagnosisAnalystId {
    /// `diagnosis-analyst`.
    #[serde(rename = "diagnosis-analyst")]
    DiagnosisAnalyst,
}

/// The normalized diagnosis time range. Every field is optional; `{}` means unknown.
/// Other fields are accepted (the plan leaves the object open) and ignored.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct TimeRange {
    /// Start, RFC 3339 with offset (e.g. `2026-05-18T10:00:00+08:00`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// End, RFC 3339 with offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// IANA time zone the user spoke in (e.g. `Asia/Shanghai`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
}

/// The normalized diagnosis scope. The plan's five fields are required; other fields are
/// accepted and ignored.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Scope {
    /// Cluster id; empty when unknown.
    pub cluster_id: String,
    /// Normalized time range.
    pub time_range: TimeRange,
    /// Cluster tier (e.g. `dedicated`, `premium`, `starter`, `essential`); empty when unknown.
    pub tier: String,
    /// Premium `parent_id`; empty when not applicable.
    pub parent_id: String,
    /// Starter/Essential `keyspace_id`; empty when not applicable.
    pub keyspace_id: String,
}

/// `evidences/agent-runs/evidence-agent.json`. Every field the plan lists is required;
/// other fields are accepted (the plan says "must include", not "only") and ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EvidenceAgentOutput {
    /// Always `evidence-agent`.
    pub agent: EvidenceAgentId,
    /// `ok`, `partial` or `failed`.
    pub status: RunStatus,
    /// What was collected or reused, in a few sentences.
    pub summary: String,
    /// The normalized scope the evidence covers.
    pub scope: Scope,
    /// Workspace-relative paths of the evidence files written or reused
    /// (e.g. `evidences/metrics.json`).
    pub evidence_files: Vec<String>,
    /// Evidence that was looked for and not obtained, one concrete item each.
    pub missing_evidence: Vec<String>,
    /// Problems met while collecting (failed queries, truncated data, ...).
    pub warnings: Vec<String>,
    /// Diagnosis skills the analyst should load, by name.
    #[schemars(inner(pattern(r"^[a-z0-9]+(-[a-z0-9]+)*$")))]
    pub next_recommended_skills: Vec<String>,
}

/// A candidate cause the analyst rejected: a sentence, or an object naming the cause
/// (and, usually, the evidence that rules it out). The plan leaves the item shape open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RejectedCause {
    /// The cause and why it was rejected, in one sentence.
    Text(String),
    /// The cause with its reason; other fields are accepted and ignored.
    Detailed {
        /// The candidate cause.
        cause: String,
        /// The evidence that rules it out.
        #[serde(default)]
        reason: String,
    },
}

impl RejectedCause {
    /// The candidate cause (the whole sentence for [`RejectedCause::Text`]).
    pub fn cause(&self) -> &str {
        match self {
            Self::Text(text) => text,
            Self::Detailed { cause, .. } => cause,
        }
    }
}

/// Result of a quality check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckResult {
    /// Checked; nothing wrong.
    Passed,
    /// Checked; it found a problem (recorded in `detail`).
    Failed,
    /// Not checked. Never acceptable for a check a rule requires.
    Skipped,
}

/// One review step of the analyst (evidence-chain review, required metric checks, ...).
/// Other fields are accepted and ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QualityCheck {
    /// Check name, snake_case (e.g. `tidb_go_gc_metrics`, `evidence_chain_review`).
    #[schemars(length(min = 1))]
    pub check: String,
    /// `passed`, `failed` or `skipped`.
    pub result: CheckResult,
    /// What was checked and what it showed (metric names, values, files).
    pub detail: String,
}

/// `evidences/agent-runs/diagnosis-analyst.json`. Every field the plan lists is required;
/// other fields are accepted and ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DiagnosisAnalystOutput {
    /// Always `diagnosis-analyst`.
    pub agent: DiagnosisAnalystId,
    /// `ok`, `partial` or `failed`.
    pub status: RunStatus,
    /// The root cause; empty when evidence is insufficient.
    pub root_cause: String,
    /// `low`, `medium` or `high`.
    pub confidence: Confidence,
    /// The evidence the root cause rests on (file paths with the fact each shows).
    pub key_evidence: Vec<String>,
    /// Candidate causes ruled out, as sentences or `{cause, reason}` objects.
    pub rejected_causes: Vec<RejectedCause>,
    /// `true` when the orchestrator should run one more evidence pass.
    pub needs_more_evidence: bool,
    /// The concrete evidence gaps (required when `needs_more_evidence` is true).
    pub missing_evidence: Vec<String>,
    /// Review steps performed. A TiDB high CPU diagnosis records `tidb_go_gc_metrics`.
    pub quality_checks: Vec<QualityCheck>,
    /// The answer the orchestrator relays to the user.
    pub final_response: String,
}

/// The JSON Schema of [`EvidenceAgentOutput`], as written to
/// `.opencode/investibook/schemas/evidence-agent-output.schema.json`.
pub fn evidence_agent_schema() -> serde_json::Value {
    schemars::schema_for!(EvidenceAgentOutput).to_value()
}

/// The JSON Schema of [`DiagnosisAnalystOutput`], as written to
/// `.opencode/investibook/schemas/diagnosis-analyst-output.schema.json`.
pub fn diagnosis_analyst_schema() -> serde_json::Value {
    schemars::schema_for!(DiagnosisAnalystOutput).to_value()
}
