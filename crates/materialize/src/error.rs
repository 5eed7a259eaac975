//! The error of turn control and materialization.

use evidence_result::{PackageId, Provider, QueryId, ResultError};
use thiserror::Error;

/// Everything that can go wrong in turn control and materialization.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MaterializeError {
    /// The ticket names no call that is waiting for its result.
    #[error("no admitted call is waiting for a result under this ticket")]
    UnknownTicket,
    /// The result is from another package than the call went to.
    #[error("result is from package {found}, but the call went to {expected}")]
    PackageMismatch {
        /// The call's package.
        expected: PackageId,
        /// The result's package.
        found: PackageId,
    },
    /// The result is from another provider than the call went to.
    #[error("result is from provider {found}, but the call went to {expected}")]
    ProviderMismatch {
        /// The call's provider.
        expected: Provider,
        /// The result's provider.
        found: Provider,
    },
    /// The result names a query id the call did not declare.
    #[error("result names queryId {0}, which the call did not declare")]
    UndeclaredQuery(QueryId),
    /// The result has no outcome for a query id the call declared.
    #[error("result has no outcome for declared queryId {0}")]
    MissingQuery(QueryId),
    /// A batch result answers one query id more than once.
    #[error("result answers queryId {0} more than once")]
    DuplicateQuery(QueryId),
    /// The result reports another request digest than the call declared.
    #[error("result digest for queryId {0} differs from the admitted request digest")]
    DigestMismatch(QueryId),
    /// Admitted calls have no recorded result yet.
    #[error("{0} admitted call(s) have no recorded result")]
    CallsInFlight(usize),
    /// A refusal result could not be built.
    #[error("cannot build the refusal result: {0}")]
    Refusal(#[from] ResultError),
    /// The handoff could not be written or read as JSON.
    #[error("handoff json: {0}")]
    Json(#[source] serde_json::Error),
}
