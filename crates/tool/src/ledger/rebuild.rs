//! Rebuilding a turn from its logged entries with the one model of the turn rules,
//! [`Turn`]: each admitted call entered, each answer recorded from its logged attempts
//! (stand-in evidence: the rules read only ids, digests, outcomes, codes and classes),
//! each call whose process ended before its answer recorded as abandoned.

use std::collections::BTreeMap;
use std::time::Duration;

use evidence_materialize::{Call, CallTicket, Turn, TurnLimits};
use evidence_result::{
    Correction, Details, ErrorCode, Failure, FailureClass, Item, Operation, Origin, ResultError,
    ToolResult,
};

use super::entry::{Entry, LoggedAttempt, LoggedOutcome, logged_call};
use super::error::LedgerError;

/// The error code of an attempt whose process ended before its answer was logged. It
/// never reaches the model: it only rebuilds the turn.
const ABANDONED: &str = "turn_call_abandoned";

/// What the rebuild found besides the turn: the next call number and the calls that
/// were found abandoned now (not yet logged as such).
#[derive(Debug, Default)]
pub(crate) struct Calls {
    pub(crate) next: u32,
    pub(crate) abandoned: Vec<u32>,
}

/// Rebuilds the turn from the logged entries: each admitted call entered, each answer
/// recorded, and a `refused` entry an earlier version appended skipped (a refusal
/// changes nothing in a turn; refusals are counted apart now). An admitted call
/// without its answer stays in flight unless `abandoned` says its process ended; then
/// it is recorded as a failure of class `internal`.
pub(crate) fn rebuild(
    limits: TurnLimits,
    entries: &[Entry],
    abandoned: impl Fn(u32) -> bool,
) -> Result<(Turn, Calls), LedgerError> {
    let mut turn = Turn::new(limits);
    let mut calls = Calls::default();
    let mut open: BTreeMap<u32, (CallTicket, Call)> = BTreeMap::new();
    for entry in entries {
        match entry {
            Entry::Admitted {
                call,
                package,
                provider,
                queries,
            } => {
                let planned = logged_call(package, *provider, queries);
                let ticket = turn.enter(&planned);
                open.insert(*call, (ticket, planned));
                calls.next = calls.next.max(call.saturating_add(1));
            }
            Entry::Refused { .. } => {}
            Entry::Answered {
                call,
                batch,
                attempts,
            } => {
                if let Some((ticket, planned)) = open.remove(call) {
                    let result = rebuilt_result(&planned, *batch, attempts)?;
                    if turn.record(ticket, result, Duration::ZERO).is_err() {
                        // An answer that does not fit its call still ended it.
                        turn.record(ticket, abandoned_result(&planned)?, Duration::ZERO)?;
                    }
                }
            }
            Entry::Abandoned { call } => {
                if let Some((ticket, planned)) = open.remove(call) {
                    turn.record(ticket, abandoned_result(&planned)?, Duration::ZERO)?;
                }
            }
        }
    }
    for (call, (ticket, planned)) in open {
        if abandoned(call) {
            turn.record(ticket, abandoned_result(&planned)?, Duration::ZERO)?;
            calls.abandoned.push(call);
        }
    }
    Ok((turn, calls))
}

pub(crate) fn origin_of(call: &Call) -> Origin {
    Origin {
        package: call.package.clone(),
        provider: call.provider,
        operation: Operation::QueryRange,
        policy_source: None,
    }
}

fn logged_failure(
    code: Option<&ErrorCode>,
    class: Option<FailureClass>,
) -> Result<Failure, ResultError> {
    let class = class.unwrap_or(FailureClass::Internal);
    let code = match code {
        Some(code) => code.clone(),
        None => ErrorCode::new(ABANDONED)?,
    };
    Ok(
        Failure::new(code, class, String::new()).with_correction(Correction::for_class(
            class,
            None,
            Vec::new(),
        )),
    )
}

/// A result with the logged attempts' outcomes: what [`Turn::record`] reads of it (query
/// ids, digests, outcomes, error codes and classes), with stand-in evidence.
pub(crate) fn rebuilt_result(
    call: &Call,
    batch: bool,
    attempts: &[LoggedAttempt],
) -> Result<ToolResult, LedgerError> {
    let origin = origin_of(call);
    // An answer is an answer to the turn, with data or without.
    let stand_in = |_: LoggedOutcome| evidence_result::Evidence::no_data(None, 0);
    if batch {
        let mut items = Vec::new();
        for a in attempts {
            let Some(query_id) = a.query_id.clone() else {
                continue;
            };
            items.push(match a.outcome {
                LoggedOutcome::Failed => Item::failure(
                    query_id,
                    a.request_digest,
                    logged_failure(a.code.as_ref(), a.class)?,
                ),
                ok => Item::success(query_id, a.request_digest, stand_in(ok)),
            });
        }
        if let Some(details) = Details::batch(origin.clone(), items) {
            return Ok(ToolResult::new(details)?);
        }
        return abandoned_result(call);
    }
    let Some(a) = attempts.first() else {
        return abandoned_result(call);
    };
    let details = match (a.outcome, &a.query_id, a.request_digest) {
        (LoggedOutcome::Ok | LoggedOutcome::NoData, Some(query_id), Some(digest)) => {
            Details::success(origin, query_id.clone(), digest, stand_in(a.outcome))
        }
        _ => Details::failure(
            origin,
            a.query_id.clone(),
            a.request_digest,
            logged_failure(a.code.as_ref(), a.class)?,
        ),
    };
    Ok(ToolResult::new(details)?)
}

/// The failure of a call whose process ended before its answer was logged: class
/// `internal` for every query it declared (no change of the request fixes a crash).
pub(crate) fn abandoned_result(call: &Call) -> Result<ToolResult, LedgerError> {
    Ok(ToolResult::new(Details::failure(
        origin_of(call),
        None,
        None,
        logged_failure(None, None)?,
    ))?)
}
