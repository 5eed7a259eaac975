//! Admission: the rules a call is checked against before it runs (a stopped turn, the
//! call limits, the refinement grant, and per query: duplicates, a call in flight, an
//! unchanged retry, the one correction, an answered objective), giving the reasons to
//! refuse it.

use evidence_result::{FailureClass, QueryId, RequestDigest};

use super::Turn;
use super::refusal::{Reason, RefusalCode};
use super::state::{Last, QueryState};
use crate::Call;

impl Turn {
    /// Every reason to refuse `call`, in the order of the rules; empty when it may run.
    pub(super) fn reasons(&self, call: &Call) -> Vec<Reason> {
        let whole = |code: RefusalCode, detail: String| {
            vec![Reason {
                code,
                detail,
                correctable: false,
            }]
        };
        if let Some(stop) = &self.stop {
            let about = stop
                .query_id
                .as_ref()
                .map(|q| format!(" for queryId {q}"))
                .unwrap_or_default();
            return whole(
                RefusalCode::TurnStopped,
                format!(
                    "the turn was stopped by a shared {} failure ({}) of {}{about}; nothing \
                     more runs in this turn",
                    stop.class, stop.code, stop.package
                ),
            );
        }
        if self.admitted_calls >= self.limits.max_calls {
            return whole(
                RefusalCode::TurnCallLimit,
                format!(
                    "this turn allows {} tool calls and all of them were used",
                    self.limits.max_calls
                ),
            );
        }
        if let Some(max) = self.limits.max_calls_per_package {
            let used = self.per_package.get(&call.package).copied().unwrap_or(0);
            if used >= max {
                return whole(
                    RefusalCode::PackageCallLimit,
                    format!(
                        "this turn allows {max} calls to {} and all of them were used",
                        call.package
                    ),
                );
            }
        }
        let mut reasons = Vec::new();
        if let Some(granted) = &self.granted
            && call.queries.is_empty()
        {
            reasons.push(Reason {
                code: RefusalCode::QueryNotGranted,
                detail: format!(
                    "a refinement call must name one of the granted queryIds ({})",
                    join(granted)
                ),
                correctable: false,
            });
        }
        for (i, q) in call.queries.iter().enumerate() {
            let id = &q.query_id;
            if let Some(granted) = &self.granted
                && !granted.contains(id)
            {
                reasons.push(Reason {
                    code: RefusalCode::QueryNotGranted,
                    detail: format!(
                        "queryId {id} is not granted to this refinement round (granted: {})",
                        join(granted)
                    ),
                    correctable: false,
                });
                continue;
            }
            if call.queries[..i].iter().any(|p| &p.query_id == id) {
                reasons.push(Reason {
                    code: RefusalCode::DuplicateQueryId,
                    detail: format!("queryId {id} appears more than once in this call"),
                    correctable: true,
                });
                continue;
            }
            let Some(state) = self.queries.get(&(call.package.clone(), id.clone())) else {
                continue;
            };
            if let Some(reason) = query_reason(id, q.request_digest, state) {
                reasons.push(reason);
            }
        }
        reasons
    }
}

/// Why a query of an objective with history may not run now, if it may not.
fn query_reason(id: &QueryId, digest: Option<RequestDigest>, state: &QueryState) -> Option<Reason> {
    if state.in_flight {
        return Some(Reason {
            code: RefusalCode::QueryInFlight,
            detail: format!("a call for queryId {id} is still running"),
            correctable: false,
        });
    }
    let class = match state.last? {
        Last::Answered => {
            return Some(Reason {
                code: RefusalCode::ObjectiveAnswered,
                detail: format!("queryId {id} already has its answer in this turn"),
                correctable: false,
            });
        }
        Last::Failed(class) => class,
    };
    let correctable = class.is_some_and(FailureClass::allows_correction);
    let correction_left = correctable && state.admitted < 2;
    if let Some(d) = digest.filter(|d| state.failed_digests.contains(d)) {
        return Some(Reason {
            code: RefusalCode::UnchangedRetry,
            detail: format!(
                "the request for queryId {id} is unchanged (request digest {d}) from an \
                 earlier failed attempt"
            ),
            correctable: correction_left,
        });
    }
    let class_name = class.map_or("unknown", FailureClass::as_str);
    if !correctable {
        return Some(Reason {
            code: RefusalCode::ObjectiveFailed,
            detail: format!(
                "queryId {id} failed with class {class_name}, which a changed request does not fix"
            ),
            correctable: false,
        });
    }
    if !correction_left {
        return Some(Reason {
            code: RefusalCode::CorrectionExhausted,
            detail: format!(
                "queryId {id} already used its one same-turn correction and failed again \
                 ({class_name})"
            ),
            correctable: false,
        });
    }
    None
}

fn join(ids: &[QueryId]) -> String {
    ids.iter()
        .map(QueryId::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}
