//! Reading a child agent's output file: bounded, parsed, checked against its generated
//! schema (with the `jsonschema` crate) and the protocol rules. Every way it can fail is a
//! failed child task ([`ChildFailure`]).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::checks::{DiagnosisContext, analyst_output_problems, evidence_output_problems};
use super::model::{
    DiagnosisAnalystOutput, EvidenceAgentOutput, diagnosis_analyst_schema, evidence_agent_schema,
};
use crate::layout::{ANALYST_OUTPUT, EVIDENCE_AGENT_OUTPUT};

/// Largest child output file that is read, in bytes.
pub const MAX_CHILD_OUTPUT_BYTES: u64 = 4 * 1024 * 1024;

/// Why a child output cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChildOutputError {
    /// A generated JSON Schema could not be compiled into a validator.
    #[error("cannot compile the {name} schema: {reason}")]
    Compile {
        /// Which schema.
        name: &'static str,
        /// The compiler's message.
        reason: String,
    },
    /// A child agent's output file does not exist.
    #[error("child output {path} does not exist")]
    Missing {
        /// The expected file.
        path: PathBuf,
    },
    /// A child agent's output file exists but cannot be read, or is too large.
    #[error("child output {path} cannot be read: {reason}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        reason: String,
    },
    /// A child agent's output is not JSON.
    #[error("child output {path} is not valid JSON: {reason}")]
    NotJson {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// The parser's message.
        reason: String,
    },
    /// A child agent's output is JSON but does not satisfy its schema.
    #[error("child output {path} does not match its schema: {}", .violations.join("; "))]
    Schema {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// One line per violation: instance location and message.
        violations: Vec<String>,
    },
    /// A child agent's output satisfies its schema but breaks a protocol rule (for example a
    /// TiDB high CPU diagnosis without a Go GC metrics check).
    #[error("child output {path} fails the protocol checks: {}", .problems.join("; "))]
    Rejected {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// One line per broken rule.
        problems: Vec<String>,
    },
}

/// How a child task failed, as the orchestration protocol sees it: every kind is a failed
/// child task that may be retried at most once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildFailure {
    /// The output file does not exist.
    Missing,
    /// The output file cannot be read or is too large.
    Unreadable,
    /// The output is not JSON.
    InvalidJson,
    /// The output does not satisfy its schema.
    SchemaInvalid,
    /// The output breaks a protocol rule (quality checks, unsafe paths, ...).
    Rejected,
}

impl ChildOutputError {
    /// The child-task failure this error stands for; `None` for a schema that does not
    /// compile, which is no child's fault.
    pub fn child_failure(&self) -> Option<ChildFailure> {
        match self {
            Self::Missing { .. } => Some(ChildFailure::Missing),
            Self::Unreadable { .. } => Some(ChildFailure::Unreadable),
            Self::NotJson { .. } => Some(ChildFailure::InvalidJson),
            Self::Schema { .. } => Some(ChildFailure::SchemaInvalid),
            Self::Rejected { .. } => Some(ChildFailure::Rejected),
            Self::Compile { .. } => None,
        }
    }
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
) -> Result<jsonschema::Validator, ChildOutputError> {
    jsonschema::validator_for(schema).map_err(|e| ChildOutputError::Compile {
        name,
        reason: e.to_string(),
    })
}

impl ChildOutputReader {
    /// Compiles both schemas.
    pub fn new() -> Result<Self, ChildOutputError> {
        Ok(Self {
            evidence: compile("evidence-agent output", &evidence_agent_schema())?,
            analyst: compile("diagnosis-analyst output", &diagnosis_analyst_schema())?,
        })
    }

    /// Reads `evidences/agent-runs/evidence-agent.json` under `workspace`.
    pub fn read_evidence(&self, workspace: &Path) -> Result<EvidenceAgentOutput, ChildOutputError> {
        let path = workspace.join(EVIDENCE_AGENT_OUTPUT);
        let bytes = read_bounded(&path)?;
        self.parse_evidence_at(&bytes, path)
    }

    /// Reads `evidences/agent-runs/diagnosis-analyst.json` under `workspace`.
    pub fn read_analysis(
        &self,
        workspace: &Path,
        context: &DiagnosisContext,
    ) -> Result<DiagnosisAnalystOutput, ChildOutputError> {
        let path = workspace.join(ANALYST_OUTPUT);
        let bytes = read_bounded(&path)?;
        self.parse_analysis_at(&bytes, path, context)
    }

    /// Checks an evidence agent output held in memory.
    pub fn parse_evidence(&self, bytes: &[u8]) -> Result<EvidenceAgentOutput, ChildOutputError> {
        self.parse_evidence_at(bytes, PathBuf::from("<memory>"))
    }

    /// Checks an analyst output held in memory.
    pub fn parse_analysis(
        &self,
        bytes: &[u8],
        context: &DiagnosisContext,
    ) -> Result<DiagnosisAnalystOutput, ChildOutputError> {
        self.parse_analysis_at(bytes, PathBuf::from("<memory>"), context)
    }

    fn parse_evidence_at(
        &self,
        bytes: &[u8],
        path: PathBuf,
    ) -> Result<EvidenceAgentOutput, ChildOutputError> {
        let output: EvidenceAgentOutput = checked(&self.evidence, bytes, &path)?;
        let problems = evidence_output_problems(&output);
        if problems.is_empty() {
            Ok(output)
        } else {
            Err(ChildOutputError::Rejected { path, problems })
        }
    }

    fn parse_analysis_at(
        &self,
        bytes: &[u8],
        path: PathBuf,
        context: &DiagnosisContext,
    ) -> Result<DiagnosisAnalystOutput, ChildOutputError> {
        let output: DiagnosisAnalystOutput = checked(&self.analyst, bytes, &path)?;
        let problems = analyst_output_problems(&output, context);
        if problems.is_empty() {
            Ok(output)
        } else {
            Err(ChildOutputError::Rejected { path, problems })
        }
    }
}

fn checked<T: serde::de::DeserializeOwned>(
    validator: &jsonschema::Validator,
    bytes: &[u8],
    path: &Path,
) -> Result<T, ChildOutputError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| ChildOutputError::NotJson {
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
        return Err(ChildOutputError::Schema {
            path: path.to_path_buf(),
            violations,
        });
    }
    serde_json::from_value(value).map_err(|e| ChildOutputError::Schema {
        path: path.to_path_buf(),
        violations: vec![e.to_string()],
    })
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, ChildOutputError> {
    let file = fs::File::open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ChildOutputError::Missing {
                path: path.to_path_buf(),
            }
        } else {
            ChildOutputError::Unreadable {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }
        }
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_CHILD_OUTPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ChildOutputError::Unreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    if bytes.len() as u64 > MAX_CHILD_OUTPUT_BYTES {
        return Err(ChildOutputError::Unreadable {
            path: path.to_path_buf(),
            reason: format!("larger than {MAX_CHILD_OUTPUT_BYTES} bytes"),
        });
    }
    Ok(bytes)
}
