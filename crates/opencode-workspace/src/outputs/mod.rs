//! The child agents' outputs: their model and JSON Schemas, the protocol rules beyond the
//! schemas, and the [`ChildOutputReader`] that reads them from their files (never from
//! chat text).

mod checks;
mod model;
mod reader;

pub use checks::{
    DiagnosisContext, GO_GC_CHECK, analyst_output_problems, evidence_output_problems,
};
pub use model::{
    CheckResult, Confidence, DiagnosisAnalystId, DiagnosisAnalystOutput, EvidenceAgentId,
    EvidenceAgentOutput, QualityCheck, RejectedCause, RunStatus, Scope, TimeRange,
    diagnosis_analyst_schema, evidence_agent_schema,
};
pub use reader::{ChildFailure, ChildOutputError, ChildOutputReader, MAX_CHILD_OUTPUT_BYTES};
