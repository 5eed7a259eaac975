//! The one admission both stores make: the turn a call is admitted in ([`TurnSpec`]),
//! the call judged on the turn's entries by the rules of [`Turn`](evidence_materialize::Turn)
//! ([`judge`]), what that writes ([`Judged`], [`Verdict`]), and a store's answer to the
//! call ([`Ruled`]), which the ledger turns into a running call. The stores only read,
//! write and hold; nothing here knows which store runs it.

use std::time::Duration;

use evidence_materialize::{Admission, Call, Refusal, TurnLimits};
use evidence_policy::PolicyId;
use jiff::Timestamp;

use super::entry::{Entry, logged_queries};
use super::error::LedgerError;
use super::rebuild::rebuild;

/// The turn a call is admitted in, and the times the stores need.
#[derive(Debug, Clone)]
pub(crate) struct TurnSpec {
    /// The turn: the policy's `policy_id`.
    pub(crate) policy_id: PolicyId,
    /// The policy's turn limits.
    pub(crate) limits: TurnLimits,
    /// When the policy expires: the Redis keys of the turn go some time after.
    pub(crate) expires_at: Timestamp,
    /// How long the admission may take (what is left of the call's deadline).
    pub(crate) wait: Duration,
    /// How long the admitted call may run and log its answer (the rest of its
    /// deadline and the margin): the Redis lease.
    pub(crate) runs_for: Duration,
    /// How long logging the answer may take.
    pub(crate) log_within: Duration,
}

impl TurnSpec {
    /// A turn with generous times (tests and callers without a deadline).
    #[cfg(test)]
    pub(crate) fn untimed(policy_id: PolicyId, limits: TurnLimits) -> Self {
        TurnSpec {
            policy_id,
            limits,
            expires_at: Timestamp::now() + jiff::SignedDuration::from_hours(1),
            wait: Duration::from_secs(10),
            runs_for: Duration::from_secs(30),
            log_within: Duration::from_secs(10),
        }
    }
}

/// What one admission writes, judged on the turn's entries.
#[derive(Debug)]
pub(crate) struct Judged {
    /// The entries to append, in order: calls found abandoned now, then the admission
    /// (a refusal is not appended: the store counts [`Verdict::Refused`]'s code).
    pub(crate) appended: Vec<Entry>,
    /// The calls found abandoned now.
    pub(crate) abandoned: Vec<u32>,
    /// The admitted call's number, or the refusal.
    pub(crate) verdict: Verdict,
}

/// The verdict of an admission.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Admitted as the turn's call number.
    Run(u32),
    /// Refused.
    Refused(Box<Refusal>),
}

impl Verdict {
    /// The code a refusal is counted under; `None` for an admission.
    pub(crate) fn refusal_code(&self) -> Option<&'static str> {
        match self {
            Verdict::Run(_) => None,
            Verdict::Refused(refusal) => Some(refusal.code.as_str()),
        }
    }
}

/// Judges `call` in the turn the `entries` rebuild (`abandoned` says which admitted
/// calls without an answer lost their running mark): the one admission of both stores.
pub(crate) fn judge(
    limits: TurnLimits,
    entries: &[Entry],
    abandoned: impl Fn(u32) -> bool,
    call: &Call,
) -> Result<Judged, LedgerError> {
    let (mut turn, calls) = rebuild(limits, entries, abandoned)?;
    let mut appended: Vec<Entry> = calls
        .abandoned
        .iter()
        .map(|call| Entry::Abandoned { call: *call })
        .collect();
    let verdict = match turn.admit(call)? {
        Admission::Refuse(refusal) => Verdict::Refused(refusal),
        Admission::Admit(_) => {
            appended.push(Entry::Admitted {
                call: calls.next,
                package: call.package.clone(),
                provider: call.provider,
                queries: logged_queries(call),
            });
            Verdict::Run(calls.next)
        }
    };
    Ok(Judged {
        appended,
        abandoned: calls.abandoned,
        verdict,
    })
}

/// A store's answer to a call: run it as the turn's call number `call`, holding the
/// store's running mark `running` until its answer is logged, or not at all.
#[derive(Debug)]
pub(crate) enum Ruled<R> {
    /// Admitted: run it.
    Run {
        /// The call's number in the turn.
        call: u32,
        /// The store's running mark of the call.
        running: R,
    },
    /// Refused; the refusal is counted.
    Refused(Box<Refusal>),
}
