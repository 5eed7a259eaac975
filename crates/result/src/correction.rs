//! Correction metadata: the shared same-turn correction rule that every tool description
//! carries, and what a failed result tells the caller it may change.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::FailureClass;

/// The provider-neutral same-turn correction rule that every package's Agent-visible
/// description carries. Generated from this one place.
pub const SAME_TURN_CORRECTION_RULE: &str = "Same-turn correction: when a call is rejected \
for a reason you own (class invalid_argument or query_rejected), read details.detail_error \
and details.correction, then correct the request once, in the current turn, with the same \
queryId, changing only your own arguments (expression, step, unit, instanceRef). Never change \
or add what the platform fixed: ticket, provider, account, cluster, target, query id policy \
and time window come from trusted policy. A policy_violation is corrected only by removing \
the offending part, never by widening. Never repeat an unchanged request. Shared failures \
(authentication, session_bootstrap, readiness, authorization, browser_runtime, \
output_blocked) stop the turn: do not retry them for this or any other objective.";

/// The scope in which a correction may happen. Only the current turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CorrectionScope {
    /// The current turn of the Evidence Agent.
    SameTurn,
}

/// What the caller may do after a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Correction {
    /// True when one changed attempt with the same query id is allowed in this turn.
    pub allowed: bool,
    /// Always `same_turn`.
    pub scope: CorrectionScope,
    /// What to do, in plain words.
    pub instruction: String,
    /// What must stay unchanged in a correction (e.g. `queryId`, `time window`).
    pub keep: Vec<String>,
}

impl Correction {
    /// The standard correction for a failure class. `detail` is a short, specific hint
    /// (for example the smallest valid step); `keep` lists what must stay unchanged.
    pub fn for_class(class: FailureClass, detail: Option<&str>, keep: Vec<String>) -> Self {
        let base = match class {
            FailureClass::InvalidArgument => {
                "Fix the rejected argument and call once more in this turn with the same queryId."
            }
            FailureClass::QueryRejected => {
                "The provider rejected the query; read detail_error, correct or simplify the \
                 expression and call once more in this turn with the same queryId."
            }
            FailureClass::PolicyViolation => {
                "The request reached outside the trusted policy. Remove the offending part and \
                 call once more with the same queryId; the platform's scope and window cannot \
                 be widened."
            }
            FailureClass::Authentication
            | FailureClass::SessionBootstrap
            | FailureClass::Readiness
            | FailureClass::Authorization
            | FailureClass::BrowserRuntime => {
                "Shared failure: stop this turn. Do not retry this or any other objective with \
                 this tool; report the failure."
            }
            FailureClass::ProviderUnavailable | FailureClass::Timeout => {
                "The provider did not answer in time or is unavailable; this is not a query \
                 error. Do not correct the query; report the objective as failed."
            }
            FailureClass::OutputBlocked => {
                "The output was withheld because it contained a protected value. This stops \
                 the turn: do not call any evidence tool again in this turn, for this or any \
                 other objective; report the objective as failed."
            }
            FailureClass::Internal => "Internal tool failure. Do not retry; report it.",
        };
        let instruction = match detail {
            Some(d) if !d.is_empty() => format!("{base} {d}"),
            _ => base.to_owned(),
        };
        Correction {
            allowed: class.allows_correction(),
            scope: CorrectionScope::SameTurn,
            instruction,
            keep,
        }
    }

    /// The fields a caller-owned correction must leave untouched, in the common case.
    pub fn default_keep() -> Vec<String> {
        vec![
            "queryId".to_owned(),
            "time window".to_owned(),
            "cluster scope".to_owned(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_classes_forbid_correction() {
        let c = Correction::for_class(FailureClass::OutputBlocked, None, vec![]);
        assert!(!c.allowed);
        assert!(
            c.instruction.contains("stops the turn"),
            "{}",
            c.instruction
        );
        let c = Correction::for_class(FailureClass::Authentication, None, vec![]);
        assert!(!c.allowed);
        assert!(c.instruction.contains("stop this turn"));
        let c = Correction::for_class(
            FailureClass::QueryRejected,
            Some("Use a step of at least 30s."),
            Correction::default_keep(),
        );
        assert!(c.allowed);
        assert!(c.instruction.ends_with("Use a step of at least 30s."));
    }

    #[test]
    fn the_rule_names_exactly_the_shared_classes() {
        let listed = SAME_TURN_CORRECTION_RULE
            .split_once("Shared failures (")
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(names, _)| names.split(", ").collect::<Vec<_>>())
            .expect("the rule lists the shared classes");
        let shared: Vec<&str> = FailureClass::ALL
            .into_iter()
            .filter(|c| c.is_shared())
            .map(FailureClass::as_str)
            .collect();
        assert_eq!(listed, shared);
    }
}
