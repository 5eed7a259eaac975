#![doc = include_str!("../README.md")]

mod addresses;
mod args;
mod canary;
mod depth;
mod envelope;
mod error;
mod ids;
mod keys;
mod lock;
mod policy;
mod promql;
mod resolved;
mod skill;

pub use addresses::{ADDRESS_FREE_LABELS, ADDRESS_LABELS};
pub use args::{
    ClinicArgs, ClinicQuery, InstanceRef, MAX_EXPR_BYTES, MAX_INSTANCE_REF_BYTES, MAX_STEP_SECONDS,
    MAX_UNIT_CHARS, ManusArgs, Step, Unit, WetechArgs, args_schema,
};
pub use canary::CanaryPolicy;
pub use depth::MAX_PROMQL_DEPTH;
pub use envelope::{ENVELOPE_VERSION, MAX_ENVELOPE_BYTES, SignedPolicy, verify};
pub use error::PolicyError;
pub use ids::{KeyId, PolicyId, TicketKey};
pub use keys::{KeyRing, PUBLIC_KEY_BYTES, PolicySigner, SECRET_KEY_BYTES};
pub use lock::{
    LockRejection, LockedItem, LockedQuery, LockedRequest, ScopeBinding, ScopeValue, lock,
};
pub use policy::{
    CLOCK_SKEW, ClusterScope, ClusterTier, Limits, MAX_BATCH, MAX_LOOKBACK, MAX_POINTS_PER_SERIES,
    ManusTarget, TimeWindow, TrustedPolicy,
};
pub use promql::{STALENESS_LOOKBACK, bind_label};
pub use resolved::{PolicyField, ResolvedScope};
pub use skill::{TRANSPORT_SKILL_GROUP, TRANSPORT_SKILL_NAME, transport_skill};

/// Items that exist for tests and benches. Not part of the stable interface: they may
/// change or go away in any release.
#[doc(hidden)]
pub mod internal {
    use evidence_result::FailureClass;

    /// Every code a lock rejection can carry, with its class.
    pub fn lock_codes() -> impl Iterator<Item = (&'static str, FailureClass)> {
        crate::lock::Code::ALL
            .into_iter()
            .map(|c| (c.as_str(), c.class()))
    }
}
