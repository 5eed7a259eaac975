use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::WorkspaceError;
use crate::layout::{ANALYST_OUTPUT, EVIDENCE_AGENT_OUTPUT};

/// Largest child output file that is read, in bytes.
pub const MAX_CHILD_OUTPUT_BYTES: u64 = 4 * 1024 * 1024;

/// The `check` name of the quality check a TiDB high CPU diagnosis must record.
pub const GO_GC_CHECK: &str = "tidb_go_gc_metrics";

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

/// What the backend knows about the diagnosis, for the quality checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiagnosisContext {
    tidb_high_cpu: bool,
}

impl DiagnosisContext {
    /// Marks the diagnosis as a TiDB high CPU case (from the alert or ticket
    /// classification), which requires the Go GC metrics check.
    pub fn tidb_high_cpu(mut self) -> Self {
        self.tidb_high_cpu = true;
        self
    }
}

/// `true` when the output itself describes TiDB CPU trouble.
fn mentions_tidb_cpu(output: &DiagnosisAnalystOutput) -> bool {
    [&output.root_cause, &output.final_response]
        .into_iter()
        .chain(output.key_evidence.iter())
        .any(|text| {
            let text = text.to_lowercase();
            text.contains("tidb") && text.contains("cpu")
        })
}

/// The protocol rules an analyst output must satisfy beyond its schema: a TiDB high CPU
/// diagnosis (by context, or because the output talks about TiDB and CPU) records a
/// `tidb_go_gc_metrics` check that was performed, with detail; `needs_more_evidence`
/// comes with concrete gaps; an `ok` output names a root cause.
pub fn analyst_output_problems(
    output: &DiagnosisAnalystOutput,
    context: &DiagnosisContext,
) -> Vec<String> {
    let mut problems = Vec::new();
    if context.tidb_high_cpu || mentions_tidb_cpu(output) {
        let recorded = output.quality_checks.iter().any(|c| {
            c.check == GO_GC_CHECK
                && c.result != CheckResult::Skipped
                && !c.detail.trim().is_empty()
        });
        if !recorded {
            problems.push(format!(
                "TiDB high CPU diagnosis without a performed {GO_GC_CHECK} quality check"
            ));
        }
    }
    if output.needs_more_evidence && output.missing_evidence.iter().all(|m| m.trim().is_empty()) {
        problems.push("needs_more_evidence without concrete missing_evidence".to_owned());
    }
    if output.status == RunStatus::Ok
        && !output.needs_more_evidence
        && output.root_cause.trim().is_empty()
    {
        problems.push("status ok without a root_cause".to_owned());
    }
    problems
}

/// `true` for a workspace-relative path that stays inside the workspace.
fn is_safe_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && !path.contains(':')
        && path.split('/').all(|part| part != ".." && !part.is_empty())
}

/// The protocol rules an evidence agent output must satisfy beyond its schema: every
/// evidence file is a workspace-relative path that stays inside the workspace.
pub fn evidence_output_problems(output: &EvidenceAgentOutput) -> Vec<String> {
    output
        .evidence_files
        .iter()
        .filter(|p| !is_safe_relative(p))
        .map(|p| {
            format!("evidence file {p:?} is not a workspace-relative path inside the workspace")
        })
        .collect()
}

/// Reads child agents' output files and checks them against the generated schemas (with
/// the `jsonschema` crate) and the protocol rules. Any failure is a failed child task.
#[derive(Debug)]
pub struct ChildOutputReader {
    evidence: jsonschema::Validator,
    analyst: jsonschema::Validator,
}

fn compile(
    name: &'static str,
    schema: &serde_json::Value,
) -> Result<jsonschema::Validator, WorkspaceError> {
    jsonschema::validator_for(schema).map_err(|e| WorkspaceError::Schema {
        name,
        reason: e.to_string(),
    })
}

impl ChildOutputReader {
    /// Compiles both schemas.
    pub fn new() -> Result<Self, WorkspaceError> {
        Ok(Self {
            evidence: compile("evidence-agent output", &evidence_agent_schema())?,
            analyst: compile("diagnosis-analyst output", &diagnosis_analyst_schema())?,
        })
    }

    /// Reads `evidences/agent-runs/evidence-agent.json` under `workspace`.
    pub fn read_evidence(&self, workspace: &Path) -> Result<EvidenceAgentOutput, WorkspaceError> {
        let path = workspace.join(EVIDENCE_AGENT_OUTPUT);
        let bytes = read_bounded(&path)?;
        self.parse_evidence_at(&bytes, path)
    }

    /// Reads `evidences/agent-runs/diagnosis-analyst.json` under `workspace`.
    pub fn read_analysis(
        &self,
        workspace: &Path,
        context: &DiagnosisContext,
    ) -> Result<DiagnosisAnalystOutput, WorkspaceError> {
        let path = workspace.join(ANALYST_OUTPUT);
        let bytes = read_bounded(&path)?;
        self.parse_analysis_at(&bytes, path, context)
    }

    /// Checks an evidence agent output held in memory.
    pub fn parse_evidence(&self, bytes: &[u8]) -> Result<EvidenceAgentOutput, WorkspaceError> {
        self.parse_evidence_at(bytes, PathBuf::from("<memory>"))
    }

    /// Checks an analyst output held in memory.
    pub fn parse_analysis(
        &self,
        bytes: &[u8],
        context: &DiagnosisContext,
    ) -> Result<DiagnosisAnalystOutput, WorkspaceError> {
        self.parse_analysis_at(bytes, PathBuf::from("<memory>"), context)
    }

    fn parse_evidence_at(
        &self,
        bytes: &[u8],
        path: PathBuf,
    ) -> Result<EvidenceAgentOutput, WorkspaceError> {
        let output: EvidenceAgentOutput = checked(&self.evidence, bytes, &path)?;
        let problems = evidence_output_problems(&output);
        if problems.is_empty() {
            Ok(output)
        } else {
            Err(WorkspaceError::ChildOutputRejected { path, problems })
        }
    }

    fn parse_analysis_at(
        &self,
        bytes: &[u8],
        path: PathBuf,
        context: &DiagnosisContext,
    ) -> Result<DiagnosisAnalystOutput, WorkspaceError> {
        let output: DiagnosisAnalystOutput = checked(&self.analyst, bytes, &path)?;
        let problems = analyst_output_problems(&output, context);
        if problems.is_empty() {
            Ok(output)
        } else {
            Err(WorkspaceError::ChildOutputRejected { path, problems })
        }
    }
}

fn checked<T: serde::de::DeserializeOwned>(
    validator: &jsonschema::Validator,
    bytes: &[u8],
    path: &Path,
) -> Result<T, WorkspaceError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| WorkspaceError::ChildOutputNotJson {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    let violations: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_owned() } else { at };
            format!("{at}: {e}")
        })
        .collect();
    if !violations.is_empty() {
        return Err(WorkspaceError::ChildOutputSchema {
            path: path.to_path_buf(),
            violations,
        });
    }
    serde_json::from_value(value).map_err(|e| WorkspaceError::ChildOutputSchema {
        path: path.to_path_buf(),
        violations: vec![e.to_string()],
    })
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, WorkspaceError> {
    let file = fs::File::open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            WorkspaceError::ChildOutputMissing {
                path: path.to_path_buf(),
            }
        } else {
            WorkspaceError::ChildOutputUnreadable {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }
        }
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_CHILD_OUTPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| WorkspaceError::ChildOutputUnreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    if bytes.len() as u64 > MAX_CHILD_OUTPUT_BYTES {
        return Err(WorkspaceError::ChildOutputUnreadable {
            path: path.to_path_buf(),
            reason: format!("larger than {MAX_CHILD_OUTPUT_BYTES} bytes"),
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_inside() {
        for ok in ["evidences/metrics.json", "a/b.c", "evidences/raw/x.log"] {
            assert!(is_safe_relative(ok), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../b",
            "a//b",
            "C:\\x",
            "a\\b",
            "./",
        ] {
            assert!(!is_safe_relative(bad), "{bad}");
        }
    }
}
