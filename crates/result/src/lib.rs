#![doc = include_str!("../README.md")]

mod class;
mod codes;
mod correction;
mod details;
mod digest;
mod error;
mod evidence;
mod figure;
mod ids;
mod mcp;
mod series;
mod table;
mod tool_result;

pub use class::{FailureClass, FailureGroup};
pub use codes::{CODE_ORIGINS, CodeName, CodeSource, ERROR_CODES, KnownCode, is_known, known_code};
pub use correction::{Correction, CorrectionScope, SAME_TURN_CORRECTION_RULE};
pub use details::{Details, ErrorInfo, Failure, Item, Origin, PolicySource, Status};
pub use digest::{Digest, RequestDigest, canonical_json};
pub use error::ResultError;
pub use evidence::COMPACT_EVIDENCE_GUIDE;
pub use evidence::{Evidence, EvidenceFormat, EvidenceOutcome, EvidenceWindow};
pub use figure::{FIGURE_SIGNIFICANT_DIGITS, Figure};
pub use ids::{ErrorCode, Operation, PackageId, Provider, QueryId};
pub use mcp::{McpCallToolResult, McpContent, RESULT_TYPE_COMPLETE};
pub use series::{NonFiniteCounts, PeakSpread, SeriesFold, SeriesStats, SeriesSummary};
pub use tool_result::{ToolResult, WITHHELD_DETAIL};
