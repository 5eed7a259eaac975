//! What the turn remembers of each objective: attempts admitted, whether one runs, how
//! the last ended and the digests of its failed requests.

use evidence_result::{FailureClass, RequestDigest};

/// The recorded state of one objective in the turn.
#[derive(Debug, Default)]
pub(super) struct QueryState {
    pub(super) admitted: u32,
    pub(super) in_flight: bool,
    pub(super) last: Option<Last>,
    pub(super) failed_digests: Vec<RequestDigest>,
}

/// How an objective's last attempt ended.
#[derive(Debug, Clone, Copy)]
pub(super) enum Last {
    Answered,
    Failed(Option<FailureClass>),
}
