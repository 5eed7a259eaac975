//! One target's override in a canary deployment file: another cluster or read window
//! than the seed incident's, and the rules of its shape. Which targets exist is the
//! plan's; the deployment file checks the name against it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::RolloutError;

/// Another cluster or read window for one target's policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetOverride {
    /// The cluster id the target's policy names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The read window's start (RFC 3339); given together with `end`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub start: Option<jiff::Timestamp>,
    /// The read window's end (RFC 3339), after `start`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub end: Option<jiff::Timestamp>,
}

impl TargetOverride {
    /// The override of target `key` gives a window as both ends in order, or none, and
    /// a cluster that is not empty.
    pub(crate) fn check(&self, key: &str) -> Result<(), RolloutError> {
        match (self.start, self.end) {
            (Some(start), Some(end)) if start >= end => {
                return Err(RolloutError::Deployment(format!(
                    "targets.{key}: the window ends ({end}) before it starts ({start})"
                )));
            }
            (Some(_), None) | (None, Some(_)) => {
                return Err(RolloutError::Deployment(format!(
                    "targets.{key}: give both start and end, or neither"
                )));
            }
            _ => {}
        }
        if self.cluster.as_deref().is_some_and(|c| c.trim().is_empty()) {
            return Err(RolloutError::Deployment(format!(
                "targets.{key}: the cluster is empty"
            )));
        }
        Ok(())
    }
}
