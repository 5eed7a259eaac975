use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use evidence_result::{
    Correction, CorrectionScope, Details, ErrorCode, Failure, FailureClass, Origin, PackageId,
    QueryId, RequestDigest, ToolResult,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::call::for_each_attempt;
use crate::{Call, CallRecord, Handoff, MaterializeError, Outcome, RefinementGrant, TurnStop};

/// Limits on the calls of one turn. The caller fills them from the trusted policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TurnLimits {
    /// Calls that may run in the turn, over all packages.
    pub max_calls: u32,
    /// Calls that may run per package in the turn; `None` leaves only `max_calls`.
    pub max_calls_per_package: Option<u32>,
}

impl TurnLimits {
    /// At most `max_calls` calls in the turn, with no separate per-package limit.
    pub fn new(max_calls: u32) -> Self {
        TurnLimits {
            max_calls,
            max_calls_per_package: None,
        }
    }

    /// Sets the per-package limit.
    pub fn with_max_calls_per_package(mut self, max: u32) -> Self {
        self.max_calls_per_package = Some(max);
        self
    }
}

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

/// Identifies an admitted call until its result is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallTicket(usize);

/// A refused call: why, and the ready result to return to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// Why the call was refused (the first reason, in query order).
    pub code: RefusalCode,
    /// The result to hand back in place of running the call.
    pub result: ToolResult,
}

/// The turn's answer before a call runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Run the call, then hand its result to [`Turn::record`] with this ticket.
    Admit(CallTicket),
    /// Do not run the call; return the refusal's result to the model.
    Refuse(Box<Refusal>),
}

/// The recorded state of one objective in the turn.
#[derive(Debug, Default)]
struct QueryState {
    admitted: u32,
    in_flight: bool,
    last: Option<Last>,
    failed_digests: Vec<RequestDigest>,
}

#[derive(Debug, Clone, Copy)]
enum Last {
    Answered,
    Failed(Option<FailureClass>),
}

#[derive(Debug)]
enum Slot {
    InFlight(Call),
    Done(Box<CallRecord>),
}

struct Reason {
    code: RefusalCode,
    detail: String,
    correctable: bool,
}

/// Turn control: the state the runtime asks before each tool call of the Evidence
/// Agent's current turn, and records each result into.
///
/// Rules, in the order they are checked:
/// 1. after one shared failure the turn is stopped; every later call is refused;
/// 2. the per-turn and per-package call limits;
/// 3. in a refinement round, only granted query ids;
/// 4. per query: no duplicate in one call, no second call while one runs, no unchanged
///    retry of a failed request, one changed attempt after a correctable failure
///    (`invalid_argument`, `query_rejected`, `policy_violation`), nothing after a
///    failure no change can fix, nothing after an answer.
///
/// A call is admitted or refused as a whole.
#[derive(Debug)]
pub struct Turn {
    limits: TurnLimits,
    granted: Option<Vec<QueryId>>,
    slots: Vec<Slot>,
    admitted_calls: u32,
    per_package: HashMap<PackageId, u32>,
    queries: HashMap<(PackageId, QueryId), QueryState>,
    stop: Option<TurnStop>,
}

impl Turn {
    /// A new turn with these limits.
    pub fn new(limits: TurnLimits) -> Self {
        Turn {
            limits,
            granted: None,
            slots: Vec::new(),
            admitted_calls: 0,
            per_package: HashMap::new(),
            queries: HashMap::new(),
            stop: None,
        }
    }

    /// A turn for a granted refinement round: only the grant's query ids are admitted.
    pub fn for_refinement(limits: TurnLimits, grant: &RefinementGrant) -> Self {
        Turn {
            granted: Some(grant.query_ids.clone()),
            ..Turn::new(limits)
        }
    }

    /// The shared failure that stopped the turn, if any.
    pub fn stop(&self) -> Option<&TurnStop> {
        self.stop.as_ref()
    }

    /// True once a shared failure stopped the turn.
    pub fn is_stopped(&self) -> bool {
        self.stop.is_some()
    }

    /// Calls admitted so far.
    pub fn admitted_calls(&self) -> u32 {
        self.admitted_calls
    }

    /// Admitted calls whose result is not recorded yet.
    pub fn in_flight(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::InFlight(_)))
            .count()
    }

    /// The finished calls (refused, or admitted and recorded), in call order.
    pub fn records(&self) -> impl Iterator<Item = &CallRecord> {
        self.slots.iter().filter_map(|s| match s {
            Slot::Done(r) => Some(r.as_ref()),
            Slot::InFlight(_) => None,
        })
    }

    /// Asks whether `call` may run. A refusal is recorded in the turn and comes with the
    /// ready result to return to the model.
    pub fn admit(&mut self, call: &Call) -> Result<Admission, MaterializeError> {
        let reasons = self.reasons(call);
        if let Some(first) = reasons.first() {
            let refusal = Refusal {
                code: first.code,
                result: refusal_result(call, &reasons)?,
            };
            self.slots.push(Slot::Done(Box::new(CallRecord::refused(
                call.clone(),
                refusal.result.clone(),
            ))));
            return Ok(Admission::Refuse(Box::new(refusal)));
        }
        Ok(Admission::Admit(self.enter(call)))
    }

    /// Enters `call` as admitted without judging it: for rebuilding a turn from a log of
    /// the calls it already admitted (in call order, each followed by its
    /// [`Turn::record`] once its result is known), so that [`Turn::admit`] judges the
    /// next call as the original turn would have.
    pub fn enter(&mut self, call: &Call) -> CallTicket {
        self.admitted_calls = self.admitted_calls.saturating_add(1);
        let n = self.per_package.entry(call.package.clone()).or_insert(0);
        *n = n.saturating_add(1);
        for q in &call.queries {
            let state = self
                .queries
                .entry((call.package.clone(), q.query_id.clone()))
                .or_default();
            state.admitted = state.admitted.saturating_add(1);
            state.in_flight = true;
        }
        let ticket = CallTicket(self.slots.len());
        self.slots.push(Slot::InFlight(call.clone()));
        ticket
    }

    /// Records the result of an admitted call and how long it took.
    ///
    /// The result must belong to the call: same package and provider, every query id it
    /// names declared by the call (a batch answers each declared query exactly once), and
    /// a digest it reports equal to the one the call declared. Otherwise nothing is
    /// recorded and the call stays in flight.
    pub fn record(
        &mut self,
        ticket: CallTicket,
        result: ToolResult,
        duration: Duration,
    ) -> Result<(), MaterializeError> {
        let call = match self.slots.get(ticket.0) {
            Some(Slot::InFlight(call)) => call,
            _ => return Err(MaterializeError::UnknownTicket),
        };
        check_result(call, result.details())?;
        let record = CallRecord::admitted(call.clone(), result, duration);
        let details = record.result.details();
        for q in &record.call.queries {
            if let Some(state) = self
                .queries
                .get_mut(&(record.call.package.clone(), q.query_id.clone()))
            {
                state.in_flight = false;
            }
        }
        let call_index = u32::try_from(ticket.0).unwrap_or(u32::MAX);
        for_each_attempt(&record, |view| {
            if self.stop.is_none()
                && view.outcome == Outcome::Failed
                && let Some(error) = view.error.filter(|e| e.class.is_shared())
            {
                self.stop = Some(TurnStop {
                    call: call_index,
                    package: details.package.clone(),
                    provider: details.provider,
                    query_id: view.query_id.cloned(),
                    class: error.class,
                    code: error.code.clone(),
                });
            }
            let Some(query_id) = view.query_id else {
                return;
            };
            let state = self
                .queries
                .entry((details.package.clone(), query_id.clone()))
                .or_default();
            state.last = Some(match view.outcome {
                Outcome::Ok | Outcome::NoData => Last::Answered,
                Outcome::Failed | Outcome::Refused => {
                    if let Some(d) = view.request_digest
                        && !state.failed_digests.contains(&d)
                    {
                        state.failed_digests.push(d);
                    }
                    Last::Failed(view.error.map(|e| e.class))
                }
            });
        });
        if let Some(slot) = self.slots.get_mut(ticket.0) {
            *slot = Slot::Done(Box::new(record));
        }
        Ok(())
    }

    /// Materializes the turn, keeping it: the handoff shares each final result's evidence
    /// with the turn's records. Fails while an admitted call has no recorded result.
    pub fn handoff(&self) -> Result<Handoff, MaterializeError> {
        match self.in_flight() {
            0 => Ok(crate::materialize(self.records())),
            n => Err(MaterializeError::CallsInFlight(n)),
        }
    }

    /// Materializes the turn, moving each final result's details into the handoff and
    /// freeing the rest of the turn, which is most of its time; [`Turn::handoff`] is the
    /// faster way to the handoff when the turn can be dropped later. Fails while an
    /// admitted call has no recorded result (check [`Turn::in_flight`] first to keep the
    /// turn).
    pub fn into_handoff(self) -> Result<Handoff, MaterializeError> {
        match self.in_flight() {
            0 => Ok(crate::materialize_owned(
                self.slots
                    .into_iter()
                    .filter_map(|s| match s {
                        Slot::Done(r) => Some(*r),
                        Slot::InFlight(_) => None,
                    })
                    .collect(),
            )),
            n => Err(MaterializeError::CallsInFlight(n)),
        }
    }

    fn reasons(&self, call: &Call) -> Vec<Reason> {
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

fn refusal_result(call: &Call, reasons: &[Reason]) -> Result<ToolResult, MaterializeError> {
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

fn check_result(call: &Call, details: &Details) -> Result<(), MaterializeError> {
    if details.package != call.package {
        return Err(MaterializeError::PackageMismatch {
            expected: call.package.clone(),
            found: details.package.clone(),
        });
    }
    if details.provider != call.provider {
        return Err(MaterializeError::ProviderMismatch {
            expected: call.provider,
            found: details.provider,
        });
    }
    let declared = |id: &QueryId| call.queries.iter().find(|q| &q.query_id == id);
    let check_digest = |id: &QueryId, reported: Option<RequestDigest>| match (
        reported,
        declared(id).and_then(|q| q.request_digest),
    ) {
        (Some(r), Some(d)) if r != d => Err(MaterializeError::DigestMismatch(id.clone())),
        _ => Ok(()),
    };
    if !details.items.is_empty() {
        for (i, item) in details.items.iter().enumerate() {
            if declared(&item.query_id).is_none() {
                return Err(MaterializeError::UndeclaredQuery(item.query_id.clone()));
            }
            if details.items[..i]
                .iter()
                .any(|p| p.query_id == item.query_id)
            {
                return Err(MaterializeError::DuplicateQuery(item.query_id.clone()));
            }
            check_digest(&item.query_id, item.request_digest)?;
        }
        if let Some(q) = call
            .queries
            .iter()
            .find(|q| !details.items.iter().any(|i| i.query_id == q.query_id))
        {
            return Err(MaterializeError::MissingQuery(q.query_id.clone()));
        }
        return Ok(());
    }
    if let Some(id) = &details.query_id {
        if declared(id).is_none() {
            return Err(MaterializeError::UndeclaredQuery(id.clone()));
        }
        if let Some(q) = call.queries.iter().find(|q| &q.query_id != id) {
            return Err(MaterializeError::MissingQuery(q.query_id.clone()));
        }
        check_digest(id, details.request_digest)?;
    } else if let ([only], Some(_)) = (call.queries.as_slice(), details.request_digest) {
        check_digest(&only.query_id, details.request_digest)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_code_is_in_the_contract_table_with_its_class() {
        for code in RefusalCode::ALL {
            assert!(
                evidence_result::is_known(code.as_str(), code.class()),
                "{} ({}) is not in ERROR_CODES",
                code.as_str(),
                code.class()
            );
        }
    }
}
