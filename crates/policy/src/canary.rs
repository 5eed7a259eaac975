//! The explicit static canary policy: an unsigned, per-installation policy a caller opts
//! into (the package manifest's `static_canary` delivery), checked exactly as a verified
//! envelope's policy is, and marking everything it locks as `static_canary`.

use evidence_result::{PackageId, PolicySource, Provider};
use jiff::Timestamp;

use crate::{LockRejection, LockedRequest, PolicyError, ScopeBinding, TrustedPolicy};

/// A static per-installation policy that a caller explicitly opted into, for canaries.
///
/// It is not signed and not per request. Every request it locks carries
/// [`PolicySource::StaticCanary`], so every result it produces says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanaryPolicy {
    policy: TrustedPolicy,
}

impl CanaryPolicy {
    /// Opts into a static canary policy for `package` and `provider`: the same check a
    /// verified envelope's policy passes ([`TrustedPolicy::check_for`]).
    pub fn opt_in(
        policy: TrustedPolicy,
        package: &PackageId,
        provider: Provider,
        now: Timestamp,
    ) -> Result<Self, PolicyError> {
        policy.check_for(package, provider, now)?;
        Ok(CanaryPolicy { policy })
    }

    /// The canary policy.
    pub fn policy(&self) -> &TrustedPolicy {
        &self.policy
    }

    /// Always [`PolicySource::StaticCanary`].
    pub fn source(&self) -> PolicySource {
        PolicySource::StaticCanary
    }

    /// Locks model arguments against the canary policy ([`crate::lock()`]); the locked
    /// request carries [`PolicySource::StaticCanary`].
    pub fn lock(
        &self,
        args: &serde_json::Value,
        scope: &[ScopeBinding],
    ) -> Result<LockedRequest, LockRejection> {
        crate::lock(&self.policy, PolicySource::StaticCanary, args, scope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::seed_json;

    #[test]
    fn canary_requires_matching_identity_and_marks_requests() {
        let p: TrustedPolicy = serde_json::from_value(seed_json()).unwrap();
        let now: Timestamp = "2026-07-21T14:20:00Z".parse().unwrap();
        assert!(
            CanaryPolicy::opt_in(p.clone(), &PackageId::manus(), Provider::Clinic, now).is_err()
        );
        assert!(
            CanaryPolicy::opt_in(p.clone(), &PackageId::clinic(), Provider::Manus, now).is_err()
        );
        let canary = CanaryPolicy::opt_in(p, &PackageId::clinic(), Provider::Clinic, now).unwrap();
        let args = serde_json::json!({"queries": [{"queryId": "up", "expr": "up"}]});
        let locked = canary.lock(&args, &[]).unwrap();
        assert_eq!(locked.policy_source, PolicySource::StaticCanary);
        assert_eq!(
            locked.origin().policy_source,
            Some(PolicySource::StaticCanary)
        );
    }
}
