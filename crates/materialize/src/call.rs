//! One tool call as the runtime sees it (the queries it carries and, once it ran, its
//! result), and the per-attempt view that turn control and materialization read.

use std::time::Duration;

use evidence_result::{
    Details, Discovery, ErrorInfo, Evidence, Operation, PackageId, Provider, QueryId,
    RequestDigest, Status, ToolResult, evidence::EvidenceOutcome,
};

use crate::Outcome;

/// One query a call carries: its objective and, when the request was locked, the digest
/// of the locked request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedQuery {
    /// The objective this query answers.
    pub query_id: QueryId,
    /// Digest of the locked request; `None` when the request could not be locked (for
    /// example malformed arguments that the tool will reject before locking).
    pub request_digest: Option<RequestDigest>,
}

/// One tool call as the runtime sees it before dispatch.
///
/// A Manus or Wetech call carries one query; a Clinic batch carries several. A call with
/// no query is allowed (for example a Wetech call whose arguments lack `queryId`): the
/// tool rejects it, and its attempt is reported as unattributed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The package the call goes to.
    pub package: PackageId,
    /// The provider that package talks to.
    pub provider: Provider,
    /// The operation.
    pub operation: Operation,
    /// The queries the call carries, in argument order.
    pub queries: Vec<PlannedQuery>,
}

impl Call {
    /// A call to `package` that carries no query yet.
    pub fn new(package: PackageId, provider: Provider) -> Self {
        Call {
            package,
            provider,
            operation: Operation::QueryRange,
            queries: Vec::new(),
        }
    }

    /// A one-operation call (Manus, Wetech) for one objective.
    pub fn single(
        package: PackageId,
        provider: Provider,
        query_id: QueryId,
        request_digest: Option<RequestDigest>,
    ) -> Self {
        Call::new(package, provider).with_query(query_id, request_digest)
    }

    /// Adds a query (one entry of a Clinic batch).
    pub fn with_query(mut self, query_id: QueryId, request_digest: Option<RequestDigest>) -> Self {
        self.queries.push(PlannedQuery {
            query_id,
            request_digest,
        });
        self
    }

    /// The digest declared for `query_id`, when the call declares that query exactly once.
    fn declared_digest(&self, query_id: &QueryId) -> Option<RequestDigest> {
        let mut matching = self.queries.iter().filter(|q| &q.query_id == query_id);
        match (matching.next(), matching.next()) {
            (Some(only), None) => only.request_digest,
            _ => None,
        }
    }
}

/// Whether a call ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Disposition {
    /// The turn admitted the call and it ran; its result is the tool's.
    Admitted,
    /// The turn refused the call; its result is the refusal and nothing ran.
    Refused,
}

/// One call of a turn with its result, in call order. The input of [`crate::materialize`].
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The call as planned.
    pub call: Call,
    /// Whether it ran.
    pub disposition: Disposition,
    /// The tool's result, or the refusal.
    pub result: ToolResult,
    /// How long the call took; `None` when it did not run.
    pub duration: Option<Duration>,
}

impl CallRecord {
    /// A call that ran and returned `result`.
    pub fn admitted(call: Call, result: ToolResult, duration: Duration) -> Self {
        CallRecord {
            call,
            disposition: Disposition::Admitted,
            result,
            duration: Some(duration),
        }
    }

    /// A call the turn refused; `result` is the refusal.
    pub fn refused(call: Call, result: ToolResult) -> Self {
        CallRecord {
            call,
            disposition: Disposition::Refused,
            result,
            duration: None,
        }
    }
}

/// Where an attempt's outcome lives in its call's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The details as a whole (one operation, or a batch that failed as a whole).
    Whole,
    /// One item of a batch.
    Item(usize),
}

/// One attempt of one objective (or an unattributed attempt), read from a call record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttemptView<'a> {
    pub(crate) query_id: Option<&'a QueryId>,
    pub(crate) request_digest: Option<RequestDigest>,
    pub(crate) outcome: Outcome,
    pub(crate) error: Option<&'a ErrorInfo>,
    pub(crate) source: Source,
}

fn outcome_of(
    disposition: Disposition,
    status: Status,
    evidence: Option<EvidenceOutcome>,
) -> Outcome {
    match (disposition, status, evidence) {
        (Disposition::Refused, _, _) => Outcome::Refused,
        (Disposition::Admitted, Status::Ok, Some(EvidenceOutcome::Data)) => Outcome::Ok,
        (Disposition::Admitted, Status::Ok, Some(EvidenceOutcome::NoData)) => Outcome::NoData,
        _ => Outcome::Failed,
    }
}

/// Whether an answer (a query's evidence or a discovery's answer) found data. A
/// discovery that found nothing is `no_data` like a query: never a fact of absence.
fn answered(evidence: Option<&Evidence>, discovery: Option<&Discovery>) -> Option<EvidenceOutcome> {
    evidence
        .map(|e| e.outcome)
        .or_else(|| discovery.map(|d| d.outcome))
}

/// Splits a record into its attempts, calling `f` for each in order.
///
/// - A batch result: one attempt per item, keyed by the item's query id.
/// - One operation naming a query id: one attempt for it.
/// - A result naming none (a batch that failed as a whole, or a call rejected before its
///   query id was read): one attempt per declared query, or one unattributed attempt when
///   the call declared none.
///
/// A digest the result carries wins over the one the call declared.
pub(crate) fn for_each_attempt<'a>(record: &'a CallRecord, mut f: impl FnMut(AttemptView<'a>)) {
    let details: &'a Details = record.result.details();
    let disposition = record.disposition;
    if !details.items.is_empty() {
        for (i, item) in details.items.iter().enumerate() {
            f(AttemptView {
                query_id: Some(&item.query_id),
                request_digest: item
                    .request_digest
                    .or_else(|| record.call.declared_digest(&item.query_id)),
                outcome: outcome_of(
                    disposition,
                    item.status,
                    answered(item.evidence.as_deref(), item.discovery.as_deref()),
                ),
                error: item.error.as_ref(),
                source: Source::Item(i),
            });
        }
        return;
    }
    let outcome = outcome_of(
        disposition,
        details.status,
        answered(details.evidence.as_deref(), details.discovery.as_deref()),
    );
    let whole = |query_id: Option<&'a QueryId>, request_digest| AttemptView {
        query_id,
        request_digest,
        outcome,
        error: details.error.as_ref(),
        source: Source::Whole,
    };
    if let Some(q) = details.query_id.as_ref() {
        f(whole(
            Some(q),
            details
                .request_digest
                .or_else(|| record.call.declared_digest(q)),
        ));
        return;
    }
    match record.call.queries.as_slice() {
        [] => f(whole(None, details.request_digest)),
        [only] => f(whole(
            Some(&only.query_id),
            details.request_digest.or(only.request_digest),
        )),
        many => {
            for q in many {
                f(whole(Some(&q.query_id), q.request_digest));
            }
        }
    }
}

/// The details of one attempt as a one-operation result, without its payload
/// (evidence, error, detail and correction): a batch item becomes the details of its
/// query, a whole-call result is given the objective's query id when it names none. A
/// digest the result carries wins over `request_digest`.
pub(crate) fn project_head(
    details: &Details,
    source: Source,
    query_id: &QueryId,
    request_digest: Option<RequestDigest>,
) -> Details {
    let (status, query_id, reported) = match source.item(details) {
        Some(item) => (item.status, &item.query_id, item.request_digest),
        None => (
            details.status,
            details.query_id.as_ref().unwrap_or(query_id),
            details.request_digest,
        ),
    };
    Details {
        status,
        package: details.package.clone(),
        provider: details.provider,
        operation: details.operation,
        policy_source: details.policy_source,
        query_id: Some(query_id.clone()),
        request_digest: reported.or(request_digest),
        evidence: None,
        discovery: None,
        error: None,
        detail_error: None,
        correction: None,
        items: Vec::new(),
    }
}

/// Copies the payload (evidence, error, detail, correction) of one attempt into `out`;
/// the evidence is shared, not copied.
pub(crate) fn copy_payload(out: &mut Details, from: &Details, source: Source) {
    match source.item(from) {
        Some(item) => {
            out.evidence.clone_from(&item.evidence);
            out.discovery.clone_from(&item.discovery);
            out.error.clone_from(&item.error);
            out.detail_error.clone_from(&item.detail_error);
            out.correction.clone_from(&item.correction);
        }
        None => {
            out.evidence.clone_from(&from.evidence);
            out.discovery.clone_from(&from.discovery);
            out.error.clone_from(&from.error);
            out.detail_error.clone_from(&from.detail_error);
            out.correction.clone_from(&from.correction);
        }
    }
}

/// Moves the payload of one attempt out of `from` into `out`.
pub(crate) fn move_payload(out: &mut Details, from: &mut Details, source: Source) {
    let item = match source {
        Source::Item(i) => from.items.get_mut(i),
        Source::Whole => None,
    };
    let (evidence, discovery, error, detail_error, correction) = match item {
        Some(item) => (
            &mut item.evidence,
            &mut item.discovery,
            &mut item.error,
            &mut item.detail_error,
            &mut item.correction,
        ),
        None => (
            &mut from.evidence,
            &mut from.discovery,
            &mut from.error,
            &mut from.detail_error,
            &mut from.correction,
        ),
    };
    out.evidence = evidence.take();
    out.discovery = discovery.take();
    out.error = error.take();
    out.detail_error = detail_error.take();
    out.correction = correction.take();
}

impl Source {
    fn item(self, details: &Details) -> Option<&evidence_result::Item> {
        match self {
            Source::Whole => None,
            Source::Item(i) => details.items.get(i),
        }
    }
}
