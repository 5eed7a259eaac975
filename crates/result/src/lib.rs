#![doc = include_str!("../README.md")]

// First, so that the modules below can name the macro without a path.
#[macro_use]
mod checked_string;
pub mod class;
pub mod codes;
pub mod correction;
mod details;
pub mod digest;
pub mod discovery;
mod error;
pub mod evidence;
pub mod figure;
mod ids;
pub mod mcp;
pub mod series;
mod table;
pub mod tool_result;

// What a producer or reader of results starts from: the result, its details and their
// parts, the identities and the errors. The rest lives in the named modules: `codes`
// (the error-code table), `class`, `correction`, `digest`, `discovery`, `evidence`, `figure`,
// `series`, `mcp` (the MCP projection) and `tool_result`.
pub use class::FailureClass;
pub use correction::{Correction, SAME_TURN_CORRECTION_RULE};
pub use details::{Details, ErrorInfo, Failure, Item, Origin, PolicySource, Status};
pub use digest::{Digest, RequestDigest};
pub use discovery::Discovery;
pub use error::ResultError;
pub use evidence::Evidence;
pub use ids::{ErrorCode, Operation, PackageId, Provider, QueryId};
pub use tool_result::ToolResult;
