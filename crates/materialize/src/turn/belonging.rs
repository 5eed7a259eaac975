//! Whether a recorded result belongs to the call it is recorded for.

use evidence_result::{Details, QueryId, RequestDigest};

use crate::{Call, MaterializeError};

/// Checks that a result belongs to its call: same package and provider, every query id
/// it names declared by the call and answered once, each reported digest the declared
/// one.
pub(super) fn check_result(call: &Call, details: &Details) -> Result<(), MaterializeError> {
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
