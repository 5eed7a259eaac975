use std::io::Read as _;
use std::path::Path;

use evidence_result::{Digest, PackageId, PolicySource, Provider};
use jiff::Timestamp;

use crate::envelope::MAX_ENVELOPE_BYTES;
use crate::{
    KeyRing, LockRejection, LockedRequest, PolicyError, ScopeBinding, SignedPolicy, TrustedPolicy,
};

/// The environment variable, set by the runtime (never by the model), that names the
/// file holding the signed policy envelope of the current call.
pub const RUNTIME_CONTEXT_ENV: &str = "EVIDENCE_TRUSTED_CONTEXT";

/// Reads the signed envelope named by [`RUNTIME_CONTEXT_ENV`].
///
/// The variable must hold an absolute path; the file must hold the envelope's compact
/// JSON ([`SignedPolicy::from_json`]) and be at most 64 KiB.
pub fn read_runtime_envelope() -> Result<SignedPolicy, PolicyError> {
    read_envelope_from_var(std::env::var_os(RUNTIME_CONTEXT_ENV).as_deref())
}

fn read_envelope_from_var(value: Option<&std::ffi::OsStr>) -> Result<SignedPolicy, PolicyError> {
    let path = value
        .filter(|v| !v.is_empty())
        .ok_or_else(|| PolicyError::RuntimeContext(format!("{RUNTIME_CONTEXT_ENV} is not set")))?;
    let path = Path::new(path);
    if !path.is_absolute() {
        return Err(PolicyError::RuntimeContext(format!(
            "{RUNTIME_CONTEXT_ENV} must name an absolute path"
        )));
    }
    read_envelope_file(path)
}

/// Reads a signed envelope from a file (at most 64 KiB).
pub fn read_envelope_file(path: &Path) -> Result<SignedPolicy, PolicyError> {
    let file = std::fs::File::open(path)
        .map_err(|e| PolicyError::RuntimeContext(format!("cannot open {}: {e}", path.display())))?;
    let mut text = String::new();
    file.take(MAX_ENVELOPE_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| PolicyError::RuntimeContext(format!("cannot read {}: {e}", path.display())))?;
    SignedPolicy::from_json(&text)
}

/// Reads the envelope named by [`RUNTIME_CONTEXT_ENV`] and verifies it
/// ([`crate::verify`]) for the running package.
pub fn load_runtime_policy(
    keys: &KeyRing,
    package_digest: &Digest,
    package: &PackageId,
    provider: Provider,
    now: Timestamp,
) -> Result<TrustedPolicy, PolicyError> {
    let envelope = read_runtime_envelope()?;
    crate::verify(&envelope, keys, package_digest, package, provider, now)
}

/// A static per-installation policy that a caller explicitly opted into, for canaries.
///
/// It is not signed and not per request. Every request it locks carries
/// [`PolicySource::StaticCanary`], so every result it produces says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanaryPolicy {
    policy: TrustedPolicy,
}

impl CanaryPolicy {
    /// Opts into a static canary policy for `package` and `provider`. The policy must
    /// name them, pass [`TrustedPolicy::validate`] and be valid at `now`.
    pub fn opt_in(
        policy: TrustedPolicy,
        package: &PackageId,
        provider: Provider,
        now: Timestamp,
    ) -> Result<Self, PolicyError> {
        if policy.package != *package {
            return Err(PolicyError::PackageMismatch {
                expected: package.clone(),
                found: policy.package,
            });
        }
        if policy.provider != provider {
            return Err(PolicyError::ProviderMismatch {
                expected: provider,
                found: policy.provider,
            });
        }
        policy.validate()?;
        policy.check_time(now)?;
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

    /// Locks model arguments against the canary policy ([`crate::lock`]); the locked
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

    #[test]
    fn envelope_file_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctx.json");
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(
            read_envelope_file(&path),
            Err(PolicyError::MalformedEnvelope(_))
        ));
        std::fs::write(&path, vec![b' '; MAX_ENVELOPE_BYTES + 10]).unwrap();
        assert!(read_envelope_file(&path).is_err());
        assert!(matches!(
            read_envelope_file(&dir.path().join("missing")),
            Err(PolicyError::RuntimeContext(_))
        ));
        assert!(matches!(
            read_envelope_from_var(None),
            Err(PolicyError::RuntimeContext(_))
        ));
        let relative = std::ffi::OsStr::new("ctx.json");
        assert!(matches!(
            read_envelope_from_var(Some(relative)),
            Err(PolicyError::RuntimeContext(_))
        ));
        assert!(matches!(
            read_envelope_from_var(Some(path.as_os_str())),
            Err(PolicyError::MalformedEnvelope(_))
        ));
    }
}
