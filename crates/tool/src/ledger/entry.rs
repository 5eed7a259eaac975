//! The entries of a turn as either store keeps them (one JSON object each: a line of the
//! file ledger, an element of the Redis list): admissions, answers (per attempt:
//! `queryId`, digest, outcome, code and class) and abandoned calls, so at most three per
//! admitted call. No secret and no evidence is in them. Refusals are not entries: each
//! store counts them by code ([`super::refusals`]); a `refused` entry an earlier version
//! appended still reads, and is skipped.

use evidence_materialize::Call;
use evidence_result::{
    Details, ErrorCode, FailureClass, PackageId, Provider, QueryId, RequestDigest, Status,
    evidence::EvidenceOutcome,
};
use serde::{Deserialize, Serialize};

/// One query of a logged call.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LoggedQuery {
    pub(crate) query_id: QueryId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) request_digest: Option<RequestDigest>,
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LoggedOutcome {
    Ok,
    NoData,
    Failed,
}

/// One attempt of a logged answer: a batch item, or the whole call.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LoggedAttempt {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) query_id: Option<QueryId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) request_digest: Option<RequestDigest>,
    pub(crate) outcome: LoggedOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) code: Option<ErrorCode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) class: Option<FailureClass>,
}

/// One line of a turn's file, one element of its Redis list.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
pub(crate) enum Entry {
    /// A call admitted as the turn's call number `call` (counted from 0).
    Admitted {
        call: u32,
        package: PackageId,
        provider: Provider,
        queries: Vec<LoggedQuery>,
    },
    /// A call refused without running, as an earlier version logged each one (its
    /// package, queries, code and class are not read): kept so that a turn logged before
    /// an upgrade still reads. Nothing appends it now.
    Refused {},
    /// The answer of admitted call `call`; `batch` when it answered per item.
    Answered {
        call: u32,
        batch: bool,
        attempts: Vec<LoggedAttempt>,
    },
    /// Admitted call `call` whose process ended before its answer was logged.
    Abandoned { call: u32 },
}

/// The call an `admitted` entry logged, rebuilt from its fields.
pub(crate) fn logged_call(
    package: &PackageId,
    provider: Provider,
    queries: &[LoggedQuery],
) -> Call {
    queries
        .iter()
        .fold(Call::new(package.clone(), provider), |c, q| {
            c.with_query(q.query_id.clone(), q.request_digest)
        })
}

pub(crate) fn logged_queries(call: &Call) -> Vec<LoggedQuery> {
    call.queries
        .iter()
        .map(|q| LoggedQuery {
            query_id: q.query_id.clone(),
            request_digest: q.request_digest,
        })
        .collect()
}

/// The answer entry of call `call`: the attempts of its result, without evidence or
/// provider text.
pub(crate) fn answer_entry(call: u32, details: &Details) -> Entry {
    let outcome = |status: Status, evidence: Option<EvidenceOutcome>| match (status, evidence) {
        (Status::Ok, Some(EvidenceOutcome::Data)) => LoggedOutcome::Ok,
        (Status::Ok, Some(EvidenceOutcome::NoData)) => LoggedOutcome::NoData,
        _ => LoggedOutcome::Failed,
    };
    let attempts = if details.items.is_empty() {
        vec![LoggedAttempt {
            query_id: details.query_id.clone(),
            request_digest: details.request_digest,
            outcome: outcome(details.status, details.evidence.as_ref().map(|e| e.outcome)),
            code: details.error.as_ref().map(|e| e.code.clone()),
            class: details.error.as_ref().map(|e| e.class),
        }]
    } else {
        details
            .items
            .iter()
            .map(|item| LoggedAttempt {
                query_id: Some(item.query_id.clone()),
                request_digest: item.request_digest,
                outcome: outcome(item.status, item.evidence.as_ref().map(|e| e.outcome)),
                code: item.error.as_ref().map(|e| e.code.clone()),
                class: item.error.as_ref().map(|e| e.class),
            })
            .collect()
    };
    Entry::Answered {
        call,
        batch: !details.items.is_empty(),
        attempts,
    }
}
