//! The outcome of one attempt and the final outcome of an objective: the one status both
//! a call record and the handoff speak of.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The final outcome of an objective, and the status of each attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The query returned data; `details.evidence` holds it. Verified.
    Ok,
    /// The query ran and returned no series. Never a zero value: unverified.
    NoData,
    /// The call ran and failed; `details.error` holds the final error.
    Failed,
    /// The turn refused the call; nothing ran.
    Refused,
}

impl Outcome {
    /// True for `ok` and `no_data`: the query ran and answered.
    pub fn is_answered(self) -> bool {
        matches!(self, Outcome::Ok | Outcome::NoData)
    }
}
