//! The refusals of a turn, counted by code: what both stores keep of a refused call
//! instead of an entry, so that a turn's stored state grows with its admitted calls and
//! never with how often a model retries. The file store keeps the counts as one small
//! JSON object beside the turn's file (`<policy_id>.refusals.json`, rewritten under the
//! turn's lock); the Redis store as a hash beside the turn's list
//! (`evidence:turn:{<policy_id>}:refusals`), incremented by the admission's script. No
//! rule reads them (a refusal changes nothing in a turn): they tell an operator how often
//! each rule refused. The codes are [`evidence_materialize::RefusalCode`]'s, a closed
//! set, so the counts stay a handful of numbers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How many calls of a turn were refused, by refusal code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct RefusalCounts(BTreeMap<String, u64>);

impl RefusalCounts {
    /// Counts one more refusal of `code`.
    pub(crate) fn count(&mut self, code: &str) {
        let n = self.0.entry(code.to_owned()).or_default();
        *n = n.saturating_add(1);
    }

    /// The refusals counted, by code.
    #[cfg(test)]
    pub(crate) fn by_code(&self) -> &BTreeMap<String, u64> {
        &self.0
    }
}
