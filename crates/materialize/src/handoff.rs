//! The child handoff: the final outcome of each objective with its attempt trail, per
//! provider capability and the turn's stop, materialized from a turn's call records.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use evidence_result::{
    Details, ErrorCode, ErrorInfo, FailureClass, PackageId, Provider, QueryId, RequestDigest,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::call::{
    AttemptView, CallRecord, Disposition, Source, copy_payload, for_each_attempt, move_payload,
    project_head,
};
use crate::{MaterializeError, Outcome};

/// The version of the handoff document this crate writes.
pub const HANDOFF_VERSION: u32 = 1;

/// The acquisition status of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AcquisitionStatus {
    /// Every objective ended `ok` or `no_data`.
    Complete,
    /// Some objectives ended `ok` or `no_data`, others did not.
    Partial,
    /// No objective ended `ok` or `no_data` (or there was none).
    Failed,
}

/// What a turn showed about a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// At least one call returned data.
    Verified,
    /// No call returned data, but none of the calls that ran failed either way that
    /// proves the provider unusable: only `no_data` answers, or nothing ran.
    Unverified,
    /// Calls ran and every one of them failed.
    Failed,
}

/// Metadata of one attempt: never its arguments or evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttemptMeta {
    /// Position of the call in the turn, from 0.
    pub call: u32,
    /// What the attempt ended with.
    pub status: Outcome,
    /// Digest of the locked request, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_digest: Option<RequestDigest>,
    /// Error code of a failed or refused attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
    /// Failure class of a failed or refused attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<FailureClass>,
    /// How long the call took, in milliseconds; absent when it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// Bounded attempt metadata: the first and the last attempt are kept, every attempt is
/// counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttemptTrail {
    /// Every attempt, run or refused.
    pub total: u32,
    /// Attempts that ran.
    pub admitted: u32,
    /// Attempts the turn refused.
    pub refused: u32,
    /// The first attempt.
    pub first: AttemptMeta,
    /// The last attempt; absent when there was only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<AttemptMeta>,
}

impl AttemptTrail {
    /// The last attempt (the first when there was only one).
    pub fn latest(&self) -> &AttemptMeta {
        self.last.as_ref().unwrap_or(&self.first)
    }
}

/// One objective: every attempt with the same package and `queryId`, and its final
/// result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Objective {
    /// The package the objective was asked of.
    pub package: PackageId,
    /// The provider behind that package.
    pub provider: Provider,
    /// The objective's stable identity.
    pub query_id: QueryId,
    /// The final outcome: that of the last attempt that ran, or `refused` when none ran.
    pub outcome: Outcome,
    /// True only for `ok`. A `no_data` objective stays unverified.
    pub verified: bool,
    /// Bounded metadata of its attempts.
    pub attempts: AttemptTrail,
    /// The final result's details (a batch item as the details of one operation).
    pub details: Details,
}

/// What the turn showed about one provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderReport {
    /// The provider.
    pub provider: Provider,
    /// The packages that were called for it, sorted.
    pub packages: Vec<PackageId>,
    /// Whether the provider was shown to work.
    pub capability: Capability,
    /// Calls that ran.
    pub admitted_calls: u32,
    /// Calls the turn refused.
    pub refused_calls: u32,
}

/// The shared failure that stopped a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnStop {
    /// Position of the failing call in the turn, from 0.
    pub call: u32,
    /// The package that failed.
    pub package: PackageId,
    /// The provider behind it.
    pub provider: Provider,
    /// The objective of the failing attempt, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_id: Option<QueryId>,
    /// The shared failure class.
    pub class: FailureClass,
    /// The error code.
    pub code: ErrorCode,
}

/// The deterministic document handed to the child agent or analyst after a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Handoff {
    /// Document version; this crate writes `1`.
    pub version: u32,
    /// `complete`, `partial` or `failed`.
    pub acquisition: AcquisitionStatus,
    /// The shared failure that stopped the turn, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_stop: Option<TurnStop>,
    /// One report per provider called, in provider order.
    pub providers: Vec<ProviderReport>,
    /// The objectives, in first-call order.
    pub objectives: Vec<Objective>,
    /// Attempts that named no `queryId` (rejected before one was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unattributed: Option<AttemptTrail>,
}

impl Handoff {
    /// The objective with this package and query id.
    pub fn objective(&self, package: &PackageId, query_id: &QueryId) -> Option<&Objective> {
        self.objectives
            .iter()
            .find(|o| &o.package == package && &o.query_id == query_id)
    }

    /// Compact JSON. The same handoff always gives the same bytes.
    pub fn to_json(&self) -> Result<String, MaterializeError> {
        serde_json::to_string(self).map_err(MaterializeError::Json)
    }

    /// Pretty-printed JSON, as deterministic as [`Handoff::to_json`].
    pub fn to_json_pretty(&self) -> Result<String, MaterializeError> {
        serde_json::to_string_pretty(self).map_err(MaterializeError::Json)
    }

    /// Reads a handoff back from JSON.
    pub fn from_json(json: &str) -> Result<Self, MaterializeError> {
        serde_json::from_str(json).map_err(MaterializeError::Json)
    }

    /// The JSON Schema of the handoff document (committed as
    /// `schemas/handoff.schema.json`).
    pub fn json_schema() -> schemars::Schema {
        schemars::schema_for!(Handoff)
    }
}

/// Attempt metadata that borrows from the records until the handoff is built.
#[derive(Clone, Copy)]
struct MetaRef<'a> {
    call: u32,
    status: Outcome,
    request_digest: Option<RequestDigest>,
    error: Option<&'a ErrorInfo>,
    duration_ms: Option<u64>,
}

impl MetaRef<'_> {
    fn owned(self) -> AttemptMeta {
        AttemptMeta {
            call: self.call,
            status: self.status,
            request_digest: self.request_digest,
            code: self.error.map(|e| e.code.clone()),
            class: self.error.map(|e| e.class),
            duration_ms: self.duration_ms,
        }
    }
}

/// The running trail of one objective (or of the unattributed attempts).
struct TrailRef<'a> {
    total: u32,
    admitted: u32,
    refused: u32,
    first: MetaRef<'a>,
    last: Option<MetaRef<'a>>,
}

impl<'a> TrailRef<'a> {
    fn new(first: MetaRef<'a>) -> Self {
        let mut trail = TrailRef {
            total: 0,
            admitted: 0,
            refused: 0,
            first,
            last: None,
        };
        trail.count(first.status);
        trail
    }

    fn push(&mut self, meta: MetaRef<'a>) {
        self.count(meta.status);
        self.last = Some(meta);
    }

    fn count(&mut self, status: Outcome) {
        self.total = self.total.saturating_add(1);
        if status == Outcome::Refused {
            self.refused = self.refused.saturating_add(1);
        } else {
            self.admitted = self.admitted.saturating_add(1);
        }
    }

    fn owned(&self) -> AttemptTrail {
        AttemptTrail {
            total: self.total,
            admitted: self.admitted,
            refused: self.refused,
            first: self.first.owned(),
            last: self.last.map(MetaRef::owned),
        }
    }
}

/// The running state of one objective during materialization.
struct Slot<'a> {
    package: &'a PackageId,
    provider: Provider,
    query_id: &'a QueryId,
    trail: TrailRef<'a>,
    /// Where the final result is: the last attempt that ran, else the last refusal.
    final_at: Final,
}

/// Where an objective's final result is.
#[derive(Clone, Copy)]
struct Final {
    record: usize,
    source: Source,
    request_digest: Option<RequestDigest>,
    outcome: Outcome,
}

impl Final {
    /// The final attempt after `next`: an attempt that ran always replaces the final;
    /// a refusal replaces it only while nothing has run.
    fn after(self, next: Final) -> Final {
        if next.outcome != Outcome::Refused || self.outcome == Outcome::Refused {
            next
        } else {
            self
        }
    }
}

#[derive(Default)]
struct ProviderTally<'a> {
    packages: Vec<&'a PackageId>,
    admitted_calls: u32,
    refused_calls: u32,
    data: bool,
    answered: bool,
    failed: bool,
}

/// Everything the first pass learns; the final details are taken in the second.
struct Plan<'a> {
    slots: Vec<Slot<'a>>,
    unattributed: Option<TrailRef<'a>>,
    providers: Vec<(Provider, ProviderTally<'a>)>,
    turn_stop: Option<TurnStop>,
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn plan<'a>(records: &[&'a CallRecord]) -> Plan<'a> {
    // Fx hashing: the keys are short and their number is bounded by the turn's calls.
    let mut index: FxHashMap<(&PackageId, &QueryId), usize> =
        FxHashMap::with_capacity_and_hasher(records.len(), Default::default());
    let mut plan = Plan {
        slots: Vec::new(),
        unattributed: None,
        providers: Vec::new(),
        turn_stop: None,
    };
    for (i, &record) in records.iter().enumerate() {
        let details = record.result.details();
        let tally = provider_tally(&mut plan.providers, details.provider);
        if !tally.packages.contains(&&details.package) {
            tally.packages.push(&details.package);
        }
        match record.disposition {
            Disposition::Admitted => tally.admitted_calls = tally.admitted_calls.saturating_add(1),
            Disposition::Refused => tally.refused_calls = tally.refused_calls.saturating_add(1),
        }
        let duration_ms = record
            .duration
            .filter(|_| record.disposition == Disposition::Admitted)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let slots = &mut plan.slots;
        let unattributed = &mut plan.unattributed;
        let turn_stop = &mut plan.turn_stop;
        for_each_attempt(record, |view: AttemptView<'a>| {
            match view.outcome {
                Outcome::Ok => {
                    tally.data = true;
                    tally.answered = true;
                }
                Outcome::NoData => tally.answered = true,
                Outcome::Failed => tally.failed = true,
                Outcome::Refused => {}
            }
            if turn_stop.is_none()
                && view.outcome == Outcome::Failed
                && let Some(error) = view.error.filter(|e| e.class.is_shared())
            {
                *turn_stop = Some(TurnStop {
                    call: saturating_u32(i),
                    package: details.package.clone(),
                    provider: details.provider,
                    query_id: view.query_id.cloned(),
                    class: error.class,
                    code: error.code.clone(),
                });
            }
            let meta = MetaRef {
                call: saturating_u32(i),
                status: view.outcome,
                request_digest: view.request_digest,
                error: view.error,
                duration_ms,
            };
            let Some(query_id) = view.query_id else {
                match unattributed.as_mut() {
                    Some(trail) => trail.push(meta),
                    None => *unattributed = Some(TrailRef::new(meta)),
                }
                return;
            };
            let next = Final {
                record: i,
                source: view.source,
                request_digest: view.request_digest,
                outcome: view.outcome,
            };
            match index.entry((&details.package, query_id)) {
                Entry::Occupied(at) => {
                    let slot = &mut slots[*at.get()];
                    slot.trail.push(meta);
                    slot.final_at = slot.final_at.after(next);
                }
                Entry::Vacant(at) => {
                    at.insert(slots.len());
                    slots.push(Slot {
                        package: &details.package,
                        provider: details.provider,
                        query_id,
                        trail: TrailRef::new(meta),
                        final_at: next,
                    });
                }
            }
        });
    }
    plan
}

/// The handoff whose objectives carry the head of their final details (everything but
/// the payload), and where each final result is. Owned, so that the records can be
/// consumed afterwards.
struct Skeleton {
    handoff: Handoff,
    finals: Vec<Final>,
}

impl Plan<'_> {
    fn skeleton(self, records: &[&CallRecord]) -> Skeleton {
        let finals: Vec<Final> = self.slots.iter().map(|s| s.final_at).collect();
        let objectives: Vec<Objective> = self
            .slots
            .iter()
            .map(|slot| {
                let f = slot.final_at;
                Objective {
                    package: slot.package.clone(),
                    provider: slot.provider,
                    query_id: slot.query_id.clone(),
                    outcome: f.outcome,
                    verified: f.outcome == Outcome::Ok,
                    attempts: slot.trail.owned(),
                    details: project_head(
                        records[f.record].result.details(),
                        f.source,
                        slot.query_id,
                        f.request_digest,
                    ),
                }
            })
            .collect();
        let answered = objectives
            .iter()
            .filter(|o| o.outcome.is_answered())
            .count();
        let acquisition = if answered == 0 {
            AcquisitionStatus::Failed
        } else if answered == objectives.len() {
            AcquisitionStatus::Complete
        } else {
            AcquisitionStatus::Partial
        };
        let mut providers = self.providers;
        providers.sort_by_key(|(p, _)| *p);
        let providers = providers
            .into_iter()
            .map(|(provider, t)| {
                let mut packages: Vec<PackageId> = t.packages.into_iter().cloned().collect();
                packages.sort();
                ProviderReport {
                    provider,
                    packages,
                    capability: if t.data {
                        Capability::Verified
                    } else if t.failed && !t.answered {
                        Capability::Failed
                    } else {
                        Capability::Unverified
                    },
                    admitted_calls: t.admitted_calls,
                    refused_calls: t.refused_calls,
                }
            })
            .collect();
        Skeleton {
            handoff: Handoff {
                version: HANDOFF_VERSION,
                acquisition,
                turn_stop: self.turn_stop,
                providers,
                objectives,
                unattributed: self.unattributed.as_ref().map(TrailRef::owned),
            },
            finals,
        }
    }
}

/// Materializes a turn's calls, in call order, into the handoff. Each objective shares
/// its final result's evidence with the records (evidence is behind an `Arc` and never
/// changes) and copies the rest of its details. [`materialize_owned`] moves them instead.
///
/// Attempts are grouped by (package, `queryId`). The final outcome of an objective is
/// that of its last attempt that ran; a changed correction therefore replaces the failed
/// outcome. An objective whose every attempt was refused ends `refused`. Any sequence of
/// records is accepted; [`crate::Turn`] produces the sequence its rules allow.
pub fn materialize<'a>(records: impl IntoIterator<Item = &'a CallRecord>) -> Handoff {
    let records: Vec<&CallRecord> = records.into_iter().collect();
    let Skeleton {
        mut handoff,
        finals,
    } = plan(&records).skeleton(&records);
    for (objective, f) in handoff.objectives.iter_mut().zip(finals) {
        copy_payload(
            &mut objective.details,
            records[f.record].result.details(),
            f.source,
        );
    }
    handoff
}

/// Like [`materialize`], but takes the records, moves each final result's details into
/// the handoff and frees the rest of the records.
pub fn materialize_owned(records: Vec<CallRecord>) -> Handoff {
    let Skeleton {
        mut handoff,
        finals,
    } = {
        let refs: Vec<&CallRecord> = records.iter().collect();
        plan(&refs).skeleton(&refs)
    };
    // Objectives by the record that holds their final result, in call order. A batch
    // that failed as a whole is the final result of several objectives: all but the
    // last copy it, the last moves it.
    let mut by_record: Vec<usize> = (0..finals.len()).collect();
    by_record.sort_by_key(|&o| finals[o].record);
    let mut next = by_record.iter().peekable();
    for (r, record) in records.into_iter().enumerate() {
        let mut details = record.result.into_details();
        while let Some(&&o) = next.peek() {
            let f = finals[o];
            if f.record != r {
                break;
            }
            next.next();
            let shared_later = next.peek().is_some_and(|&&p| {
                finals[p].record == r
                    && f.source == Source::Whole
                    && finals[p].source == Source::Whole
            });
            let out = &mut handoff.objectives[o].details;
            if shared_later {
                copy_payload(out, &details, f.source);
            } else if f.source == Source::Whole {
                // The last objective that reads a one-operation result takes its
                // details whole, once they name the objective's query and digest as the
                // projected head does; nothing else reads this record.
                let head = std::mem::replace(out, details);
                out.query_id = head.query_id;
                out.request_digest = head.request_digest;
                break;
            } else {
                move_payload(out, &mut details, f.source);
            }
        }
    }
    handoff
}

fn provider_tally<'a, 'p>(
    providers: &'p mut Vec<(Provider, ProviderTally<'a>)>,
    provider: Provider,
) -> &'p mut ProviderTally<'a> {
    let at = match providers.iter().position(|(p, _)| *p == provider) {
        Some(at) => at,
        None => {
            providers.push((provider, ProviderTally::default()));
            providers.len() - 1
        }
    };
    &mut providers[at].1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(record: usize, outcome: Outcome) -> Final {
        Final {
            record,
            source: Source::Whole,
            request_digest: None,
            outcome,
        }
    }

    #[test]
    fn a_refusal_never_replaces_an_attempt_that_ran() {
        let ran = f(0, Outcome::Failed);
        assert_eq!(ran.after(f(1, Outcome::Refused)).record, 0);
        assert_eq!(ran.after(f(2, Outcome::Ok)).record, 2);
        let refused = f(0, Outcome::Refused);
        assert_eq!(refused.after(f(1, Outcome::Refused)).record, 1);
        assert_eq!(
            refused.after(f(1, Outcome::NoData)).outcome,
            Outcome::NoData
        );
    }

    #[test]
    fn an_empty_turn_acquired_nothing() {
        let h = materialize(std::iter::empty());
        assert_eq!(h.acquisition, AcquisitionStatus::Failed);
        assert!(h.objectives.is_empty() && h.providers.is_empty());
        assert_eq!(h.version, HANDOFF_VERSION);
    }
}
