#![doc = include_str!("../README.md")]

mod class;
mod correction;
mod details;
mod digest;
mod error;
mod evidence;
mod ids;
mod mcp;
mod tool_result;

pub use class::{FailureClass, FailureGroup};
pub use correction::{Correction, CorrectionScope, SAME_TURN_CORRECTION_RULE};
pub use details::{Details, ErrorInfo, Failure, Item, Origin, PolicySource, Status};
pub use digest::{Digest, RequestDigest, canonical_json};
pub use error::ResultError;
pub use evidence::{Evidence, EvidenceOutcome, EvidenceWindow, SeriesStats, SeriesSummary};
pub use ids::{ErrorCode, Operation, PackageId, Provider, QueryId};
pub use mcp::{McpCallToolResult, McpContent, RESULT_TYPE_COMPLETE};
pub use tool_result::ToolResult;
