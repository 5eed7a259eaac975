//! Refusals: the codes a turn refuses a call with, and the ready failure result a refused
//! call returns to the model.

use std::fmt;

use evidence_result::{
    Correction, Details, ErrorCode, Failure, FailureClass, Origin, ToolResult,
    correction::CorrectionScope,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Call, MaterializeError};

/// Why the turn refused a call. Each is an [`ErrorCode`] of the refusal result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RefusalCode {
    /// A shared failure (`authentication`, `session_bootstrap`, `readiness`,
    /// `authorization`, `browser_runtime`, `output_blocked`) stopped the turn. Class
    /// `policy_violation`.
    TurnStopped,
    /// The turn reached its limit of calls. Class `policy_violation`.
    TurnCallLimit,
    /// The turn reached its limit of calls to this package. Class `policy_violation`.
    PackageCallLimit,
    /// A refinement round names a `queryId` it was not granted (or none). Class
    /// `policy_violation`.
    QueryNotGranted,
    /// A batch names the same `queryId` twice. Class `invalid_argument`.
    DuplicateQueryId,
    /// A call for this `queryId` is still running. Class `policy_violation`.
    QueryInFlight,
    /// The request digest equals an earlier failed attempt of the same `queryId`. Not a
    /// correction. Class `invalid_argument`.
    UnchangedRetry,
    /// The objective already used its one same-turn correction and failed again. Class
    /// `policy_violation`.
    CorrectionExhausted,
    /// The objective failed with a class that a changed request does not fix
    /// (`provider_unavailable`, `timeout`, `internal`). Class `policy_violation`.
    ObjectiveFailed,
    /// The objective already has an answer (`ok` or `no_data`) in this turn. Class
    /// `policy_violation`.
    ObjectiveAnswered,
}

impl RefusalCode {
    /// Every code, in declaration order.
    pub const ALL: [RefusalCode; 10] = [
        RefusalCode::TurnStopped,
        RefusalCode::TurnCallLimit,
        RefusalCode::PackageCallLimit,
        RefusalCode::QueryNotGranted,
        RefusalCode::DuplicateQueryId,
        RefusalCode::QueryInFlight,
        RefusalCode::UnchangedRetry,
        RefusalCode::CorrectionExhausted,
        RefusalCode::ObjectiveFailed,
        RefusalCode::ObjectiveAnswered,
    ];

    /// The snake_case code, as written in `details.error.code`.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalCode::TurnStopped => "turn_stopped",
            RefusalCode::TurnCallLimit => "turn_call_limit",
            RefusalCode::PackageCallLimit => "package_call_limit",
            RefusalCode::QueryNotGranted => "query_not_granted",
            RefusalCode::DuplicateQueryId => "duplicate_query_id",
            RefusalCode::QueryInFlight => "query_in_flight",
            RefusalCode::UnchangedRetry => "unchanged_retry",
            RefusalCode::CorrectionExhausted => "correction_exhausted",
            RefusalCode::ObjectiveFailed => "objective_failed",
            RefusalCode::ObjectiveAnswered => "objective_answered",
        }
    }

    /// The failure class the refusal result carries.
    pub fn class(self) -> FailureClass {
        match self {
            RefusalCode::DuplicateQueryId | RefusalCode::UnchangedRetry => {
                FailureClass::InvalidArgument
            }
            _ => FailureClass::PolicyViolation,
        }
    }

    /// The refusal code an error code names, if it names one.
    pub fn from_code(code: &ErrorCode) -> Option<RefusalCode> {
        RefusalCode::ALL
            .into_iter()
            .find(|c| c.as_str() == code.as_str())
    }

    fn instruction(self) -> &'static str {
        match self {
            RefusalCode::TurnStopped => {
                "Shared failure: this turn is stopped. Do not call any evidence tool again in \
                 this turn, for this or any other objective; report the failure."
            }
            RefusalCode::TurnCallLimit | RefusalCode::PackageCallLimit => {
                "The call limit of this turn is reached. Do not call again; report with the \
                 evidence you have."
            }
            RefusalCode::QueryNotGranted => {
                "This refinement round may only use the queryIds it was granted. Call again \
                 with those only."
            }
            RefusalCode::DuplicateQueryId => {
                "Send each queryId at most once per call, then call again."
            }
            RefusalCode::QueryInFlight => {
                "Wait for the running call's result; never send the same queryId twice at once."
            }
            RefusalCode::UnchangedRetry => {
                "An unchanged request fails the same way and is not a correction. Change your \
                 own arguments to correct it, once, with the same queryId, or report the \
                 objective as failed."
            }
            RefusalCode::CorrectionExhausted => {
                "The one same-turn correction is used and the objective ended failed. Report it; \
                 do not retry."
            }
            RefusalCode::ObjectiveFailed => {
                "This failure is not fixed by changing the request. Report the objective as \
                 failed; do not retry."
            }
            RefusalCode::ObjectiveAnswered => {
                "This objective is answered in this turn. A new question needs a new queryId; \
                 do not repeat or repair an answered objective."
            }
        }
    }
}

impl fmt::Display for RefusalCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused call: why, and the ready result to return to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// Why the call was refused (the first reason, in query order).
    pub code: RefusalCode,
    /// The result to hand back in place of running the call.
    pub result: ToolResult,
}

/// One reason to refuse a call, with whether a changed request may correct it.
pub(super) struct Reason {
    pub(super) code: RefusalCode,
    pub(super) detail: String,
    pub(super) correctable: bool,
}

/// The failure result a refused call returns: every reason in the detail, the
/// instruction of each code once, and a correction allowed only when every reason allows
/// one.
pub(super) fn refusal_result(
    call: &Call,
    reasons: &[Reason],
) -> Result<ToolResult, MaterializeError> {
    let code = reasons.first().map_or(RefusalCode::TurnStopped, |r| r.code);
    let detail = format!(
        "refused without running: {}",
        reasons
            .iter()
            .map(|r| format!("{}: {}", r.code, r.detail))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let mut codes: Vec<RefusalCode> = Vec::new();
    for r in reasons {
        if !codes.contains(&r.code) {
            codes.push(r.code);
        }
    }
    let instruction = codes
        .iter()
        .map(|c| c.instruction())
        .collect::<Vec<_>>()
        .join(" ");
    let correction = Correction {
        allowed: reasons.iter().all(|r| r.correctable),
        scope: CorrectionScope::SameTurn,
        instruction,
        keep: Correction::default_keep(),
    };
    let failure = Failure::new(ErrorCode::new(code.as_str())?, code.class(), detail)
        .with_correction(correction);
    let origin = Origin {
        package: call.package.clone(),
        provider: call.provider,
        operation: call.operation,
        policy_source: None,
    };
    let (query_id, digest) = match call.queries.as_slice() {
        [only] => (Some(only.query_id.clone()), only.request_digest),
        _ => (None, None),
    };
    Ok(ToolResult::new(Details::failure(
        origin, query_id, digest, failure,
    ))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_code_is_in_the_contract_table_with_its_class() {
        for code in RefusalCode::ALL {
            assert!(
                evidence_result::codes::is_known(code.as_str(), code.class()),
                "{} ({}) is not in ERROR_CODES",
                code.as_str(),
                code.class()
            );
        }
    }
}
