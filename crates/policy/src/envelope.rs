//! The signed per-request envelope of a [`TrustedPolicy`] (format version 2, Ed25519)
//! and its verification. Version 1 envelopes (HMAC-SHA256, whose verification keys could
//! also sign) are refused with [`PolicyError::LegacyHmacEnvelope`].

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::Signature;
use evidence_result::{Digest, PackageId, Provider, digest::canonical_json};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::{KeyId, KeyRing, PolicyError, PolicySigner, TrustedPolicy};

/// The envelope format version this crate writes and reads (2: Ed25519).
pub const ENVELOPE_VERSION: u32 = 2;

/// The last HMAC-SHA256 envelope version, refused with a migration hint.
const LEGACY_HMAC_VERSION: u32 = 1;

/// The largest envelope accepted, in bytes.
pub const MAX_ENVELOPE_BYTES: usize = 64 * 1024;

/// Domain separation for the signing input.
const SIGNATURE_DOMAIN: &[u8] = b"evidence-policy/signed-policy/v2/ed25519";

/// The signed per-request envelope of a [`TrustedPolicy`].
///
/// `payload` is the base64url (no padding) of the policy's canonical JSON (RFC 8785);
/// `signature` is the base64url Ed25519 signature (RFC 8032), by the private key named
/// by `kid`, of a domain-separated input holding the key id, the package digest and the
/// payload bytes. The envelope is therefore bound to one exact package digest, and only
/// the holder of the private key can make one: a tool sandbox holds public keys only.
///
/// Its JSON form ([`SignedPolicy::to_json`]) is compact and is read back byte-exactly
/// ([`SignedPolicy::from_json`]): changing any byte of it makes it fail to read or fail
/// to verify.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedPolicy {
    version: u32,
    kid: KeyId,
    package_digest: Digest,
    payload: String,
    signature: String,
}

/// The one field read before the rest, so that an envelope of another version gets a
/// version error rather than a shape error.
#[derive(Deserialize)]
struct VersionOnly {
    version: u32,
}

fn version_error(version: u32) -> PolicyError {
    if version == LEGACY_HMAC_VERSION {
        PolicyError::LegacyHmacEnvelope
    } else {
        PolicyError::UnsupportedVersion(version)
    }
}

impl fmt::Debug for SignedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignedPolicy")
            .field("version", &self.version)
            .field("kid", &self.kid)
            .field("package_digest", &self.package_digest)
            .field("payload_len", &self.payload.len())
            .finish_non_exhaustive()
    }
}

impl SignedPolicy {
    /// The id of the key that signed the envelope.
    pub fn key_id(&self) -> &KeyId {
        &self.kid
    }

    /// The package digest the envelope is bound to.
    pub fn package_digest(&self) -> Digest {
        self.package_digest
    }

    /// The compact JSON form, which [`SignedPolicy::from_json`] reads back.
    pub fn to_json(&self) -> Result<String, PolicyError> {
        serde_json::to_string(self).map_err(|e| PolicyError::Encode(e.to_string()))
    }

    /// Reads an envelope from its compact JSON form (one trailing newline allowed).
    /// Anything else, including re-formatted JSON, is refused, so that any changed byte
    /// is detected. An envelope of another format version is refused by its version
    /// (a version 1 HMAC envelope with [`PolicyError::LegacyHmacEnvelope`]).
    pub fn from_json(text: &str) -> Result<Self, PolicyError> {
        if text.len() > MAX_ENVELOPE_BYTES {
            return Err(PolicyError::MalformedEnvelope(format!(
                "envelope is larger than {MAX_ENVELOPE_BYTES} bytes"
            )));
        }
        let body = text.strip_suffix('\n').unwrap_or(text);
        if let Ok(VersionOnly { version }) = serde_json::from_str(body)
            && version != ENVELOPE_VERSION
        {
            return Err(version_error(version));
        }
        let parsed: SignedPolicy = serde_json::from_str(body)
            .map_err(|e| PolicyError::MalformedEnvelope(e.to_string()))?;
        if parsed.to_json()? != body {
            return Err(PolicyError::MalformedEnvelope(
                "envelope is not in its compact signed form".to_owned(),
            ));
        }
        Ok(parsed)
    }
}

/// The domain-separated input the signature covers.
fn signing_input(kid: &KeyId, package_digest: &Digest, payload: &[u8]) -> Vec<u8> {
    let digest = package_digest.to_string();
    let mut input = Vec::with_capacity(
        SIGNATURE_DOMAIN.len() + kid.as_str().len() + digest.len() + payload.len() + 3,
    );
    input.extend_from_slice(SIGNATURE_DOMAIN);
    input.push(0);
    input.extend_from_slice(kid.as_str().as_bytes());
    input.push(0);
    input.extend_from_slice(digest.as_bytes());
    input.push(0);
    input.extend_from_slice(payload);
    input
}

impl PolicySigner {
    /// Signs a policy for the package with digest `package_digest`. The policy must
    /// pass [`TrustedPolicy::validate`].
    pub fn sign(
        &self,
        policy: &TrustedPolicy,
        package_digest: Digest,
    ) -> Result<SignedPolicy, PolicyError> {
        policy.validate()?;
        let payload = canonical_json(policy).map_err(|e| PolicyError::Encode(e.to_string()))?;
        let kid = self.key_id().clone();
        let signature = self.sign_bytes(&signing_input(&kid, &package_digest, payload.as_bytes()));
        Ok(SignedPolicy {
            version: ENVELOPE_VERSION,
            kid,
            package_digest,
            payload: URL_SAFE_NO_PAD.encode(payload.as_bytes()),
            signature: URL_SAFE_NO_PAD.encode(signature.to_bytes()),
        })
    }
}

/// Verifies an envelope and returns its policy.
///
/// Checks, in order: the format version; that `keys` holds the envelope's key id; the
/// Ed25519 signature under that public key (strict verification: no malleable
/// signature, no weak key); the package digest binding against
/// `package_digest`; the policy's JSON (unknown fields refused); that the policy names
/// `package` and `provider`; its consistency rules ([`TrustedPolicy::validate`]); and that
/// it is valid at `now` ([`TrustedPolicy::check_time`]). Every failure is a typed
/// [`PolicyError`].
pub fn verify(
    envelope: &SignedPolicy,
    keys: &KeyRing,
    package_digest: &Digest,
    package: &PackageId,
    provider: Provider,
    now: Timestamp,
) -> Result<TrustedPolicy, PolicyError> {
    if envelope.version != ENVELOPE_VERSION {
        return Err(version_error(envelope.version));
    }
    let key = keys.key(&envelope.kid)?;
    let payload = URL_SAFE_NO_PAD
        .decode(&envelope.payload)
        .map_err(|_| PolicyError::MalformedEnvelope("payload is not base64url".to_owned()))?;
    let signature = URL_SAFE_NO_PAD
        .decode(&envelope.signature)
        .map_err(|_| PolicyError::MalformedEnvelope("signature is not base64url".to_owned()))?;
    let signature = Signature::from_slice(&signature).map_err(|_| PolicyError::BadSignature)?;
    key.verify_strict(
        &signing_input(&envelope.kid, &envelope.package_digest, &payload),
        &signature,
    )
    .map_err(|_| PolicyError::BadSignature)?;
    if envelope.package_digest != *package_digest {
        return Err(PolicyError::DigestMismatch {
            expected: *package_digest,
            found: envelope.package_digest,
        });
    }
    let policy: TrustedPolicy =
        serde_json::from_slice(&payload).map_err(|e| PolicyError::InvalidPolicy(e.to_string()))?;
    policy.check_for(package, provider, now)?;
    Ok(policy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::seed_json;
    use secrecy::SecretBox;

    fn signer(kid: &str, seed: u8) -> PolicySigner {
        PolicySigner::from_seed(
            KeyId::new(kid).unwrap(),
            SecretBox::new(Box::new([seed; 32])),
        )
    }

    fn signers() -> [PolicySigner; 2] {
        [signer("old", 7), signer("new", 9)]
    }

    fn ring() -> KeyRing {
        let [old, new] = signers();
        format!("{}, {}", old.key_ring_entry(), new.key_ring_entry())
            .parse()
            .unwrap()
    }

    fn policy() -> TrustedPolicy {
        serde_json::from_value(seed_json()).unwrap()
    }

    fn now() -> Timestamp {
        "2026-07-21T14:20:00Z".parse().unwrap()
    }

    #[test]
    fn sign_and_verify_with_rotation() {
        let ring = ring();
        let digest = Digest::sha256(b"package");
        let p = policy();
        for signer in signers() {
            let env = signer.sign(&p, digest).unwrap();
            assert_eq!(env.key_id(), signer.key_id());
            let text = env.to_json().unwrap();
            let read = SignedPolicy::from_json(&format!("{text}\n")).unwrap();
            let got = verify(&read, &ring, &digest, &p.package, p.provider, now()).unwrap();
            assert_eq!(got, p);
        }
        // Dropping the old key from the ring ends its envelopes.
        let [old, new] = signers();
        let env = old.sign(&p, digest).unwrap();
        assert!(matches!(
            verify(
                &env,
                &new.key_ring(),
                &digest,
                &p.package,
                p.provider,
                now()
            ),
            Err(PolicyError::UnknownKey(_))
        ));
    }

    #[test]
    fn every_check_is_typed() {
        let ring = ring();
        let digest = Digest::sha256(b"package");
        let p = policy();
        let [_, signer] = signers();
        let env = signer.sign(&p, digest).unwrap();
        let v = |env: &SignedPolicy, d: &Digest, pkg: &PackageId, prov, t| {
            verify(env, &ring, d, pkg, prov, t)
        };
        assert!(matches!(
            v(
                &env,
                &Digest::sha256(b"other"),
                &p.package,
                p.provider,
                now()
            ),
            Err(PolicyError::DigestMismatch { .. })
        ));
        assert!(matches!(
            v(&env, &digest, &PackageId::wetech(), p.provider, now()),
            Err(PolicyError::PackageMismatch { .. })
        ));
        assert!(matches!(
            v(&env, &digest, &p.package, Provider::Manus, now()),
            Err(PolicyError::ProviderMismatch { .. })
        ));
        assert!(matches!(
            v(
                &env,
                &digest,
                &p.package,
                p.provider,
                "2026-07-22T00:00:00Z".parse().unwrap()
            ),
            Err(PolicyError::Expired { .. })
        ));
        let other = signer_ring("zzz", 1);
        assert!(matches!(
            verify(&env, &other, &digest, &p.package, p.provider, now()),
            Err(PolicyError::UnknownKey(_))
        ));
        // The same key id with another public key.
        let same_kid = signer_ring("new", 1);
        assert!(matches!(
            verify(&env, &same_kid, &digest, &p.package, p.provider, now()),
            Err(PolicyError::BadSignature)
        ));
        // A key id swapped for another key of the ring: the signature covers the key id.
        let mut swapped = env.clone();
        swapped.kid = KeyId::new("old").unwrap();
        assert!(matches!(
            v(&swapped, &digest, &p.package, p.provider, now()),
            Err(PolicyError::BadSignature)
        ));
        let mut short = env.clone();
        short.signature = URL_SAFE_NO_PAD.encode([0u8; 32]);
        assert!(matches!(
            v(&short, &digest, &p.package, p.provider, now()),
            Err(PolicyError::BadSignature)
        ));
        let mut wrong_version = env.clone();
        wrong_version.version = 3;
        assert!(matches!(
            v(&wrong_version, &digest, &p.package, p.provider, now()),
            Err(PolicyError::UnsupportedVersion(3))
        ));
        let pretty = serde_json::to_string_pretty(&env).unwrap();
        assert!(SignedPolicy::from_json(&pretty).is_err());
    }

    fn signer_ring(kid: &str, seed: u8) -> KeyRing {
        signer(kid, seed).key_ring()
    }

    #[test]
    fn a_legacy_hmac_envelope_is_refused_with_a_migration_hint() {
        let v1 = r#"{"version":1,"kid":"k2026a","package_digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","payload":"e30","mac":"AAAA"}"#;
        let err = SignedPolicy::from_json(v1).unwrap_err();
        assert!(matches!(err, PolicyError::LegacyHmacEnvelope), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("version 1") && text.contains("Ed25519"),
            "{text}"
        );
        let mut env = signers()[0].sign(&policy(), Digest::sha256(b"p")).unwrap();
        env.version = 1;
        assert!(matches!(
            verify(
                &env,
                &ring(),
                &Digest::sha256(b"p"),
                &policy().package,
                policy().provider,
                now()
            ),
            Err(PolicyError::LegacyHmacEnvelope)
        ));
        let v9 = v1.replace("\"version\":1", "\"version\":9");
        assert!(matches!(
            SignedPolicy::from_json(&v9),
            Err(PolicyError::UnsupportedVersion(9))
        ));
    }

    #[test]
    fn signer_refuses_invalid_policy() {
        let mut p = policy();
        p.limits.max_points_per_series = 0;
        assert!(signers()[0].sign(&p, Digest::sha256(b"x")).is_err());
    }
}
