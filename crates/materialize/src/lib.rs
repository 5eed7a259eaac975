#![doc = include_str!("../README.md")]

mod call;
mod error;
mod handoff;
mod outcome;
mod refine;
mod turn;

pub use call::{Call, CallRecord, Disposition, PlannedQuery};
pub use error::MaterializeError;
pub use handoff::{
    AcquisitionStatus, AttemptMeta, AttemptTrail, Capability, HANDOFF_VERSION, Handoff, Objective,
    ProviderReport, TurnStop, materialize, materialize_owned,
};
pub use outcome::Outcome;
pub use refine::{
    RefinementCode, RefinementDecision, RefinementGate, RefinementGrant, RefinementRefusal,
    RefinementRequest, normalize_question,
};
pub use turn::{Admission, CallTicket, Refusal, RefusalCode, Turn, TurnLimits};
