//! Why the turn ledger could not admit or log a call, and the runtime-context failure
//! that answers the call then. Every store and the rebuild of a turn report with it.

use std::path::PathBuf;

use evidence_materialize::MaterializeError;
use evidence_result::ResultError;

use crate::context::TURN_LEDGER_ENV;
use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::shared_state::SharedStateError;

/// Why the ledger could not admit or log a call. Every one fails closed: the call is
/// answered with a runtime-context failure and nothing is sent.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LedgerError {
    /// The directory is not there.
    #[error("the turn ledger directory {0} does not exist")]
    Missing(PathBuf),
    /// A file of the ledger could not be opened, locked, read or written.
    #[error("the turn ledger {path} cannot be {action}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// An entry of the ledger (a line of its file, an element of its Redis list) is not
    /// an entry.
    #[error("the turn ledger {at} entry {line} is not a ledger entry: {why}")]
    Corrupt {
        at: String,
        line: usize,
        why: String,
    },
    /// The shared Redis could not be used.
    #[error(transparent)]
    Shared(#[from] SharedStateError),
    /// Other admissions of the turn kept changing it until the call's time was up.
    #[error("the turn ledger's turn kept changing under {attempts} attempts to admit the call")]
    Contended { attempts: u32 },
    /// The logged calls do not rebuild a turn.
    #[error("the turn ledger does not rebuild the turn: {0}")]
    Turn(#[from] MaterializeError),
    /// A rebuilt result does not hold the contract.
    #[error("the turn ledger does not rebuild a result: {0}")]
    Result(#[from] ResultError),
}

impl LedgerError {
    /// The runtime-context failure that answers the call: a missing directory is
    /// `runtime_context_missing`; a Redis that is unreachable, too slow, answering what
    /// is not a ledger or not durable (and a turn too contended to admit within the
    /// deadline) is `turn_ledger_unavailable`; anything else `runtime_context_invalid`.
    pub(crate) fn to_failure(&self) -> RuntimeFailure {
        let kind = match self {
            LedgerError::Missing(_) => RuntimeFailureKind::ContextMissing,
            LedgerError::Shared(SharedStateError::Address { .. }) => {
                RuntimeFailureKind::ContextInvalid
            }
            LedgerError::Shared(_) | LedgerError::Contended { .. } => {
                RuntimeFailureKind::TurnLedgerUnavailable
            }
            _ => RuntimeFailureKind::ContextInvalid,
        };
        RuntimeFailure::new(kind, format!("{self} ({TURN_LEDGER_ENV})"))
    }
}
