//! Planning an admitted call: the [`Call`] that `evidence_materialize::Turn::admit`
//! judges, made from what locking produced (package, each item's `queryId` and request
//! digest), so an embedder never hands a digest in by hand and an unchanged retry is
//! always recognized.

use evidence_materialize::Call;
use evidence_policy::{LockedRequest, lock::LockedItem};
use evidence_result::{PackageId, Provider, ToolResult};

/// The call of a locked request: one planned query per item, ready or rejected, with its
/// request digest.
pub fn plan_locked(request: &LockedRequest) -> Call {
    request.items.iter().fold(
        Call::new(request.package.clone(), request.provider),
        |call, item| match item {
            LockedItem::Ready(q) => call.with_query(q.query_id.clone(), Some(q.request_digest)),
            LockedItem::Rejected {
                query_id,
                request_digest,
                ..
            } => call.with_query(query_id.clone(), *request_digest),
        },
    )
}

/// The call of a request answered without locking (a whole-call rejection or a policy
/// that did not verify): the query and digest the result reports, if any.
pub fn plan_answered(package: PackageId, provider: Provider, result: &ToolResult) -> Call {
    let details = result.details();
    let call = Call::new(package, provider);
    match &details.query_id {
        Some(query_id) => call.with_query(query_id.clone(), details.request_digest),
        None => call,
    }
}
