use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use evidence_result::{Digest, PackageId, Provider, canonical_json};
use hmac::{Hmac, Mac};
use jiff::Timestamp;
use secrecy::{ExposeSecret, SecretSlice, SecretString};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::{KeyId, PolicyError, TrustedPolicy};

type HmacSha256 = Hmac<Sha256>;

/// The envelope format version this crate writes and reads.
pub const ENVELOPE_VERSION: u32 = 1;

/// The smallest HMAC key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 32;

/// The largest envelope accepted, in bytes.
pub const MAX_ENVELOPE_BYTES: usize = 64 * 1024;

/// Domain separation for the MAC input.
const MAC_DOMAIN: &[u8] = b"evidence-policy/signed-policy/v1";

/// The signed per-request envelope of a [`TrustedPolicy`].
///
/// `payload` is the base64url (no padding) of the policy's canonical JSON (RFC 8785);
/// `mac` is the base64url HMAC-SHA256, under the key named by `kid`, of a
/// domain-separated input holding the key id, the package digest and the payload
/// bytes. The envelope is therefore bound to one exact package digest.
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
    mac: String,
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
    /// is detected.
    pub fn from_json(text: &str) -> Result<Self, PolicyError> {
        if text.len() > MAX_ENVELOPE_BYTES {
            return Err(PolicyError::MalformedEnvelope(format!(
                "envelope is larger than {MAX_ENVELOPE_BYTES} bytes"
            )));
        }
        let body = text.strip_suffix('\n').unwrap_or(text);
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

fn mac_input(kid: &KeyId, package_digest: &Digest, payload: &[u8]) -> Vec<u8> {
    let digest = package_digest.to_string();
    let mut input = Vec::with_capacity(
        MAC_DOMAIN.len() + kid.as_str().len() + digest.len() + payload.len() + 3,
    );
    input.extend_from_slice(MAC_DOMAIN);
    input.push(0);
    input.extend_from_slice(kid.as_str().as_bytes());
    input.push(0);
    input.extend_from_slice(digest.as_bytes());
    input.push(0);
    input.extend_from_slice(payload);
    input
}

fn new_mac(key: &SecretSlice<u8>) -> Result<HmacSha256, PolicyError> {
    HmacSha256::new_from_slice(key.expose_secret())
        .map_err(|_| PolicyError::InvalidKey("HMAC key rejected".to_owned()))
}

fn check_key_len(kid: &KeyId, key: &SecretSlice<u8>) -> Result<(), PolicyError> {
    if key.expose_secret().len() < MIN_KEY_BYTES {
        return Err(PolicyError::InvalidKey(format!(
            "key {kid} is shorter than {MIN_KEY_BYTES} bytes"
        )));
    }
    Ok(())
}

/// The signing side (Auto-oncall): one key id and its HMAC key.
pub struct PolicySigner {
    kid: KeyId,
    key: SecretSlice<u8>,
}

impl fmt::Debug for PolicySigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicySigner")
            .field("kid", &self.kid)
            .field("key", &"[REDACTED]")
            .finish()
    }
}

impl PolicySigner {
    /// A signer for key `kid`. The key must hold at least [`MIN_KEY_BYTES`] bytes.
    pub fn new(kid: KeyId, key: SecretSlice<u8>) -> Result<Self, PolicyError> {
        check_key_len(&kid, &key)?;
        Ok(PolicySigner { kid, key })
    }

    /// A signer for the key `kid` of a key ring.
    pub fn from_key_ring(ring: &KeyRing, kid: &KeyId) -> Result<Self, PolicyError> {
        let key = ring
            .keys
            .get(kid)
            .ok_or_else(|| PolicyError::UnknownKey(kid.to_string()))?;
        PolicySigner::new(kid.clone(), key.clone())
    }

    /// The key id this signer writes into envelopes.
    pub fn key_id(&self) -> &KeyId {
        &self.kid
    }

    /// Signs a policy for the package with digest `package_digest`. The policy must
    /// pass [`TrustedPolicy::validate`].
    pub fn sign(
        &self,
        policy: &TrustedPolicy,
        package_digest: Digest,
    ) -> Result<SignedPolicy, PolicyError> {
        policy.validate()?;
        let payload = canonical_json(policy).map_err(|e| PolicyError::Encode(e.to_string()))?;
        let mut mac = new_mac(&self.key)?;
        mac.update(&mac_input(&self.kid, &package_digest, payload.as_bytes()));
        let tag = mac.finalize().into_bytes();
        Ok(SignedPolicy {
            version: ENVELOPE_VERSION,
            kid: self.kid.clone(),
            package_digest,
            payload: URL_SAFE_NO_PAD.encode(payload.as_bytes()),
            mac: URL_SAFE_NO_PAD.encode(tag),
        })
    }
}

/// The verifying side: several key ids and their HMAC keys, so that keys can rotate
/// (sign with the new key while envelopes signed with the old one still verify).
///
/// Parses from `kid:base64key,kid2:base64key` (standard or URL-safe base64, each key at
/// least [`MIN_KEY_BYTES`] bytes). Keys live in zeroizing secret boxes; `Debug` shows
/// only the key ids, and no error message ever holds key material.
#[derive(Clone, Default)]
pub struct KeyRing {
    keys: BTreeMap<KeyId, SecretSlice<u8>>,
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRing")
            .field("kids", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl KeyRing {
    /// An empty key ring.
    pub fn new() -> Self {
        KeyRing::default()
    }

    /// Adds a key. Refuses a duplicate key id or a key shorter than [`MIN_KEY_BYTES`].
    pub fn insert(&mut self, kid: KeyId, key: SecretSlice<u8>) -> Result<(), PolicyError> {
        check_key_len(&kid, &key)?;
        if self.keys.contains_key(&kid) {
            return Err(PolicyError::InvalidKey(format!("duplicate key id {kid}")));
        }
        self.keys.insert(kid, key);
        Ok(())
    }

    /// The key ids held, in order.
    pub fn key_ids(&self) -> impl Iterator<Item = &KeyId> {
        self.keys.keys()
    }

    /// True when the ring holds no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Parses `kid:base64key,kid2:base64key` held in a secret string.
    pub fn parse_secret(text: &SecretString) -> Result<Self, PolicyError> {
        text.expose_secret().parse()
    }

    fn key(&self, kid: &KeyId) -> Result<&SecretSlice<u8>, PolicyError> {
        self.keys
            .get(kid)
            .ok_or_else(|| PolicyError::UnknownKey(kid.to_string()))
    }
}

impl FromStr for KeyRing {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut ring = KeyRing::new();
        for (n, entry) in text.split(',').enumerate() {
            let entry = entry.trim();
            let Some((kid, b64)) = entry.split_once(':') else {
                return Err(PolicyError::InvalidKey(format!(
                    "key ring entry {} is not kid:base64key",
                    n + 1
                )));
            };
            let kid = KeyId::new(kid.trim()).map_err(|_| {
                PolicyError::InvalidKey(format!("key ring entry {} has an invalid key id", n + 1))
            })?;
            let b64 = b64.trim();
            let decoded = STANDARD
                .decode(b64)
                .or_else(|_| URL_SAFE_NO_PAD.decode(b64))
                .map(Zeroizing::new)
                .map_err(|_| PolicyError::InvalidKey(format!("key {kid} is not valid base64")))?;
            let key = SecretSlice::from(Box::<[u8]>::from(decoded.as_slice()));
            ring.insert(kid, key)?;
        }
        if ring.is_empty() {
            return Err(PolicyError::InvalidKey("empty key ring".to_owned()));
        }
        Ok(ring)
    }
}

/// Verifies an envelope and returns its policy.
///
/// Checks, in order: the format version; that `keys` holds the envelope's key id; the
/// HMAC-SHA256 (constant-time comparison); the package digest binding against
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
        return Err(PolicyError::UnsupportedVersion(envelope.version));
    }
    let key = keys.key(&envelope.kid)?;
    let payload = URL_SAFE_NO_PAD
        .decode(&envelope.payload)
        .map_err(|_| PolicyError::MalformedEnvelope("payload is not base64url".to_owned()))?;
    let tag = URL_SAFE_NO_PAD
        .decode(&envelope.mac)
        .map_err(|_| PolicyError::MalformedEnvelope("mac is not base64url".to_owned()))?;
    let mut mac = new_mac(key)?;
    mac.update(&mac_input(
        &envelope.kid,
        &envelope.package_digest,
        &payload,
    ));
    mac.verify_slice(&tag)
        .map_err(|_| PolicyError::BadSignature)?;
    if envelope.package_digest != *package_digest {
        return Err(PolicyError::DigestMismatch {
            expected: *package_digest,
            found: envelope.package_digest,
        });
    }
    let policy: TrustedPolicy =
        serde_json::from_slice(&payload).map_err(|e| PolicyError::InvalidPolicy(e.to_string()))?;
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
    Ok(policy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::seed_json;

    fn ring() -> KeyRing {
        let k1 = STANDARD.encode([7u8; 32]);
        let k2 = URL_SAFE_NO_PAD.encode([9u8; 48]);
        format!("old:{k1}, new:{k2}").parse().unwrap()
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
        for kid in ["old", "new"] {
            let signer = PolicySigner::from_key_ring(&ring, &KeyId::new(kid).unwrap()).unwrap();
            let env = signer.sign(&p, digest).unwrap();
            let text = env.to_json().unwrap();
            let read = SignedPolicy::from_json(&format!("{text}\n")).unwrap();
            let got = verify(&read, &ring, &digest, &p.package, p.provider, now()).unwrap();
            assert_eq!(got, p);
        }
    }

    #[test]
    fn every_check_is_typed() {
        let ring = ring();
        let digest = Digest::sha256(b"package");
        let p = policy();
        let signer = PolicySigner::from_key_ring(&ring, &KeyId::new("new").unwrap()).unwrap();
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
        let other: KeyRing = format!("zzz:{}", STANDARD.encode([1u8; 32]))
            .parse()
            .unwrap();
        assert!(matches!(
            verify(&env, &other, &digest, &p.package, p.provider, now()),
            Err(PolicyError::UnknownKey(_))
        ));
        let same_kid: KeyRing = format!("new:{}", STANDARD.encode([1u8; 32]))
            .parse()
            .unwrap();
        assert!(matches!(
            verify(&env, &same_kid, &digest, &p.package, p.provider, now()),
            Err(PolicyError::BadSignature)
        ));
        let mut wrong_version = env.clone();
        wrong_version.version = 2;
        assert!(matches!(
            v(&wrong_version, &digest, &p.package, p.provider, now()),
            Err(PolicyError::UnsupportedVersion(2))
        ));
        let pretty = serde_json::to_string_pretty(&env).unwrap();
        assert!(SignedPolicy::from_json(&pretty).is_err());
    }

    #[test]
    fn key_ring_parsing_never_echoes_keys() {
        let secret = STANDARD.encode([5u8; 16]);
        let err = format!("k:{secret}")
            .parse::<KeyRing>()
            .unwrap_err()
            .to_string();
        assert!(!err.contains(&secret), "{err}");
        let err = "k:not*base64".parse::<KeyRing>().unwrap_err().to_string();
        assert!(!err.contains("not*base64"), "{err}");
        assert!("".parse::<KeyRing>().is_err());
        let dup = format!("a:{0},a:{0}", STANDARD.encode([1u8; 32]));
        assert!(dup.parse::<KeyRing>().is_err());
        let debug = format!("{:?}", ring());
        assert!(debug.contains("old") && !debug.contains(&STANDARD.encode([7u8; 32])));
        let ring = KeyRing::parse_secret(&SecretString::from(format!(
            "k:{}",
            STANDARD.encode([3u8; 32])
        )))
        .unwrap();
        assert_eq!(ring.key_ids().count(), 1);
    }

    #[test]
    fn signer_refuses_invalid_policy() {
        let signer =
            PolicySigner::new(KeyId::new("k").unwrap(), SecretSlice::from(vec![1u8; 32])).unwrap();
        let mut p = policy();
        p.limits.max_points_per_series = 0;
        assert!(signer.sign(&p, Digest::sha256(b"x")).is_err());
        assert!(
            PolicySigner::new(KeyId::new("k").unwrap(), SecretSlice::from(vec![1u8; 8])).is_err()
        );
    }
}
