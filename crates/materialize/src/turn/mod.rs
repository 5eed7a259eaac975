//! Turn control: the state the runtime asks before each tool call of a turn and records
//! each result into.
//!
//! One concern per file: this file holds the turn and its bookkeeping; `admission` the
//! rules that admit or refuse a call; `refusal` the refusal codes and the result a
//! refused call returns; `belonging` the check that a result belongs to its call;
//! `state` what the turn remembers of each objective.

mod admission;
mod belonging;
mod refusal;
mod state;

use std::collections::HashMap;
use std::time::Duration;

use evidence_result::{PackageId, QueryId, ToolResult};

use crate::call::for_each_attempt;
use crate::{Call, CallRecord, Handoff, MaterializeError, Outcome, RefinementGrant, TurnStop};
use belonging::check_result;
use refusal::refusal_result;
pub use refusal::{Refusal, RefusalCode};
use state::{Last, QueryState};

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

/// Identifies an admitted call until its result is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallTicket(usize);

/// The turn's answer before a call runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Run the call, then hand its result to [`Turn::record`] with this ticket.
    Admit(CallTicket),
    /// Do not run the call; return the refusal's result to the model.
    Refuse(Box<Refusal>),
}

/// A call of the turn: running, or finished with its record.
#[derive(Debug)]
enum Slot {
    InFlight(Call),
    Done(Box<CallRecord>),
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
}
