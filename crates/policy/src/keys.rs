//! The keys of policy envelopes: [`PolicySigner`] holds one Ed25519 private key (only
//! where policy is signed, on the Auto-oncall side), [`KeyRing`] holds the Ed25519 public
//! keys a tool sandbox verifies with. Nothing in a ring can sign: the sandbox gets only
//! public keys, so code running there cannot issue a policy.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use rand::RngCore as _;
use secrecy::{ExposeSecret, SecretBox, SecretSlice, SecretString};
use zeroize::Zeroizing;

use crate::{KeyId, PolicyError};

/// The length of an Ed25519 private key (its 32-byte seed, RFC 8032), in bytes.
pub const SECRET_KEY_BYTES: usize = ed25519_dalek::SECRET_KEY_LENGTH;

/// The length of an Ed25519 public key, in bytes.
pub const PUBLIC_KEY_BYTES: usize = ed25519_dalek::PUBLIC_KEY_LENGTH;

/// Decodes standard or URL-safe base64 (padding optional) into zeroizing bytes.
fn decode_base64(text: &str) -> Option<Zeroizing<Vec<u8>>> {
    let text = text.trim();
    STANDARD
        .decode(text)
        .or_else(|_| URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')))
        .ok()
        .map(Zeroizing::new)
}

/// The signing side (Auto-oncall): one key id and its Ed25519 private key.
///
/// The private key is a 32-byte seed held in a zeroizing secret box; `Debug` shows only
/// the key id and the public key. Give the sandbox [`PolicySigner::key_ring_entry`],
/// never the private key.
pub struct PolicySigner {
    kid: KeyId,
    seed: SecretBox<[u8; SECRET_KEY_BYTES]>,
    public: VerifyingKey,
}

impl fmt::Debug for PolicySigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicySigner")
            .field("kid", &self.kid)
            .field("public_key", &self.public_key_base64())
            .field("private_key", &"[REDACTED]")
            .finish()
    }
}

impl PolicySigner {
    /// A signer for key `kid` from its private key: exactly [`SECRET_KEY_BYTES`] bytes
    /// (the Ed25519 seed).
    pub fn new(kid: KeyId, key: SecretSlice<u8>) -> Result<Self, PolicyError> {
        let bytes = key.expose_secret();
        if bytes.len() != SECRET_KEY_BYTES {
            return Err(PolicyError::InvalidKey(format!(
                "private key {kid} is not a {SECRET_KEY_BYTES}-byte Ed25519 key"
            )));
        }
        // Copied straight into the box the secret lives in, not through the stack.
        let mut seed = Box::new([0u8; SECRET_KEY_BYTES]);
        seed.copy_from_slice(bytes);
        Ok(PolicySigner::from_seed(kid, SecretBox::new(seed)))
    }

    /// A signer for key `kid` from its 32-byte Ed25519 seed.
    pub fn from_seed(kid: KeyId, seed: SecretBox<[u8; SECRET_KEY_BYTES]>) -> Self {
        let public = SigningKey::from_bytes(seed.expose_secret()).verifying_key();
        PolicySigner { kid, seed, public }
    }

    /// A signer for key `kid` from its private key in base64 (standard or URL-safe), the
    /// form [`PolicySigner::private_key_base64`] writes.
    pub fn from_base64(kid: KeyId, key: &SecretString) -> Result<Self, PolicyError> {
        let bytes = decode_base64(key.expose_secret()).ok_or_else(|| {
            PolicyError::InvalidKey(format!("private key {kid} is not valid base64"))
        })?;
        PolicySigner::new(kid, SecretSlice::from(bytes.to_vec()))
    }

    /// A signer with a new private key from the operating system's random source.
    pub fn generate(kid: KeyId) -> Result<Self, PolicyError> {
        let mut seed = Box::new([0u8; SECRET_KEY_BYTES]);
        rand::rngs::OsRng
            .try_fill_bytes(seed.as_mut())
            .map_err(|e| PolicyError::InvalidKey(format!("no random source: {e}")))?;
        Ok(PolicySigner::from_seed(kid, SecretBox::new(seed)))
    }

    /// The key id this signer writes into envelopes.
    pub fn key_id(&self) -> &KeyId {
        &self.kid
    }

    /// The private key in standard base64, for storing it where policy is signed.
    pub fn private_key_base64(&self) -> SecretString {
        SecretString::from(STANDARD.encode(self.seed.expose_secret()))
    }

    /// The public key in standard base64.
    pub fn public_key_base64(&self) -> String {
        STANDARD.encode(self.public.as_bytes())
    }

    /// This key's entry of a tool sandbox's key ring: `kid:base64publickey`.
    pub fn key_ring_entry(&self) -> String {
        format!("{}:{}", self.kid, self.public_key_base64())
    }

    /// A key ring holding only this signer's public key.
    pub fn key_ring(&self) -> KeyRing {
        let mut keys = BTreeMap::new();
        keys.insert(self.kid.clone(), self.public);
        KeyRing { keys }
    }

    /// Signs `message` (the envelope's domain-separated signing input).
    pub(crate) fn sign_bytes(&self, message: &[u8]) -> Signature {
        // `SigningKey` zeroizes itself on drop.
        SigningKey::from_bytes(self.seed.expose_secret()).sign(message)
    }
}

/// The verifying side: key ids and their Ed25519 public keys, so that keys rotate (sign
/// with a new key while envelopes signed with the old one still verify, then drop the
/// old one).
///
/// Parses from `kid:base64publickey,kid2:base64publickey` (standard or URL-safe base64,
/// each exactly [`PUBLIC_KEY_BYTES`] bytes, a valid curve point of full order). A ring
/// holds nothing that can sign.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KeyRing {
    keys: BTreeMap<KeyId, VerifyingKey>,
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

    /// Adds a public key. Refuses a duplicate key id, a key that is not
    /// [`PUBLIC_KEY_BYTES`] bytes (a 64-byte key pair included), not a curve point, or a
    /// weak (small-order) point.
    pub fn insert(&mut self, kid: KeyId, public_key: &[u8]) -> Result<(), PolicyError> {
        let not_public = || {
            PolicyError::InvalidKey(format!(
                "key {kid} is not a {PUBLIC_KEY_BYTES}-byte Ed25519 public key"
            ))
        };
        let bytes: &[u8; PUBLIC_KEY_BYTES] = public_key.try_into().map_err(|_| not_public())?;
        let key = VerifyingKey::from_bytes(bytes).map_err(|_| not_public())?;
        if key.is_weak() {
            return Err(PolicyError::InvalidKey(format!(
                "key {kid} is a weak Ed25519 public key"
            )));
        }
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

    /// The ring in its text form, `kid:base64publickey,...` (key ids in order).
    pub fn to_text(&self) -> String {
        self.keys
            .iter()
            .map(|(kid, key)| format!("{kid}:{}", STANDARD.encode(key.as_bytes())))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub(crate) fn key(&self, kid: &KeyId) -> Result<&VerifyingKey, PolicyError> {
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
                    "key ring entry {} is not kid:base64publickey",
                    n + 1
                )));
            };
            let kid = KeyId::new(kid.trim()).map_err(|_| {
                PolicyError::InvalidKey(format!("key ring entry {} has an invalid key id", n + 1))
            })?;
            let bytes = decode_base64(b64)
                .ok_or_else(|| PolicyError::InvalidKey(format!("key {kid} is not valid base64")))?;
            ring.insert(kid, &bytes)?;
        }
        if ring.is_empty() {
            return Err(PolicyError::InvalidKey("empty key ring".to_owned()));
        }
        Ok(ring)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer(kid: &str, seed: u8) -> PolicySigner {
        PolicySigner::from_seed(
            KeyId::new(kid).unwrap(),
            SecretBox::new(Box::new([seed; 32])),
        )
    }

    #[test]
    fn ring_entries_round_trip_and_hold_only_public_keys() {
        let (a, b) = (signer("old", 7), signer("new", 9));
        let text = format!("{}, {}", a.key_ring_entry(), b.key_ring_entry());
        let ring: KeyRing = text.parse().unwrap();
        assert_eq!(
            ring.key_ids().map(KeyId::as_str).collect::<Vec<_>>(),
            ["new", "old"]
        );
        assert_eq!(ring.to_text().parse::<KeyRing>().unwrap(), ring);
        let private = a.private_key_base64();
        assert!(!ring.to_text().contains(private.expose_secret()));
        assert_ne!(a.public_key_base64(), STANDARD.encode([7u8; 32]));
        // URL-safe base64 without padding reads too.
        let url = format!(
            "old:{}",
            URL_SAFE_NO_PAD.encode(a.key_ring().key(a.key_id()).unwrap().as_bytes())
        );
        assert_eq!(url.parse::<KeyRing>().unwrap(), a.key_ring());
    }

    #[test]
    fn key_ring_parsing_refuses_what_is_not_a_public_key_and_never_echoes_it() {
        let short = STANDARD.encode([5u8; 16]);
        let err = format!("k:{short}")
            .parse::<KeyRing>()
            .unwrap_err()
            .to_string();
        assert!(!err.contains(&short), "{err}");
        // A key pair (seed and public key, 64 bytes) is refused: it holds a private key.
        let a = signer("k", 3);
        let pair = STANDARD.encode(
            [
                a.seed.expose_secret().as_slice(),
                a.key_ring().key(a.key_id()).unwrap().as_bytes(),
            ]
            .concat(),
        );
        let err = format!("k:{pair}")
            .parse::<KeyRing>()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not a 32-byte Ed25519 public key") && !err.contains(&pair),
            "{err}"
        );
        // The identity point is a weak key.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let err = format!("k:{}", STANDARD.encode(identity))
            .parse::<KeyRing>()
            .unwrap_err();
        assert!(err.to_string().contains("weak"), "{err}");
        let err = "k:not*base64".parse::<KeyRing>().unwrap_err().to_string();
        assert!(!err.contains("not*base64"), "{err}");
        assert!("".parse::<KeyRing>().is_err());
        assert!("nocolon".parse::<KeyRing>().is_err());
        let dup = format!("{0},{0}", a.key_ring_entry());
        assert!(
            dup.parse::<KeyRing>()
                .unwrap_err()
                .to_string()
                .contains("duplicate")
        );
    }

    #[test]
    fn signer_keys_are_32_bytes_and_stay_out_of_debug() {
        let kid = KeyId::new("k").unwrap();
        assert!(PolicySigner::new(kid.clone(), SecretSlice::from(vec![1u8; 31])).is_err());
        assert!(PolicySigner::new(kid.clone(), SecretSlice::from(vec![1u8; 64])).is_err());
        let s = PolicySigner::new(kid.clone(), SecretSlice::from(vec![1u8; 32])).unwrap();
        let debug = format!("{s:?}");
        assert!(
            !debug.contains(s.private_key_base64().expose_secret()),
            "{debug}"
        );
        assert!(debug.contains(&s.public_key_base64()), "{debug}");
        let again = PolicySigner::from_base64(kid.clone(), &s.private_key_base64()).unwrap();
        assert_eq!(again.key_ring_entry(), s.key_ring_entry());
        let err =
            PolicySigner::from_base64(kid.clone(), &SecretString::from("*secret*")).unwrap_err();
        assert!(!err.to_string().contains("*secret*"));
        let (g1, g2) = (
            PolicySigner::generate(kid.clone()).unwrap(),
            PolicySigner::generate(kid).unwrap(),
        );
        assert_ne!(g1.public_key_base64(), g2.public_key_base64());
    }
}
