#![doc = include_str!("../README.md")]

pub mod addresses;
pub mod args;
mod canary;
pub mod depth;
pub mod envelope;
mod error;
pub mod ids;
pub mod keys;
pub mod lock;
pub mod policy;
mod policy_schema;
pub mod promql;
pub mod resolved;
pub mod session;
pub mod skill;

// What a signer, a sandbox or an embedder starts from: the trusted policy and its
// envelope, keys, verification, locking and the per-provider arguments, and the error.
// The rest lives in the named modules: `args` (argument bounds and schemas), `policy`
// (windows, limits, cluster scope), `lock` (locked parts), `envelope`, `keys`, `ids`,
// `addresses`, `promql`, `depth`, `resolved` and `skill` (the transport skill).
pub use args::{ClinicArgs, ManusArgs, WetechArgs};
pub use canary::CanaryPolicy;
pub use envelope::{SignedPolicy, verify};
pub use error::PolicyError;
pub use ids::{KeyId, PolicyId};
pub use keys::{KeyRing, PolicySigner};
pub use lock::{LockRejection, LockedRequest, ScopeBinding, lock};
pub use policy::{ManusTarget, TrustedPolicy};
pub use resolved::ResolvedScope;
pub use session::SessionToken;

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
