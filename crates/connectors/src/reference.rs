//! Opaque references: provider addresses sealed so the model can pass them back but
//! never read, edit or move them to another target.
//!
//! A reference is base64url (no padding) of
//! `b"r1" || kid_len:u8 || kid || expires_at:i64 BE || nonce[12] || AES-256-GCM(address)`,
//! with associated data binding the version, target, package, purpose, key id and expiry.
//! Every way a reference can be wrong gives the same [`ConnectorError::InvalidReference`].

use std::collections::BTreeMap;
use std::fmt;

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use secrecy::{ExposeSecret, SecretBox, SecretString};
use zeroize::Zeroizing;

use crate::ConnectorError;

const VERSION: &[u8; 2] = b"r2";
/// Sealed addresses are padded to a multiple of this many bytes (with a two-byte length
/// in front), so a reference's length does not tell an address's length: every address
/// up to 30 bytes (any IPv4 address with its port, most host names) gives a reference
/// of the same length, at about 22 characters more per reference than no padding.
const PADDED_BLOCK: usize = 32;
const AAD_TAG: &[u8] = b"managed-evidence/opaque-reference/v1";
const NONCE_LEN: usize = 12;
const MAX_REFERENCE_LEN: usize = 1024;

/// Where a reference may be used: its target (e.g. `vida`), the package identity and
/// the purpose (e.g. `instance`, the label it came from). All three are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReferenceScope<'a> {
    /// The provider target the address belongs to.
    pub target: &'a str,
    /// The package that issued the reference.
    pub package: &'a str,
    /// What the reference stands for, e.g. `instance`.
    pub purpose: &'a str,
}

/// AES-256-GCM keys by key id: seal with the current key, open with any listed key, so
/// keys rotate by adding a new current key and later removing the old one.
///
/// `Debug` prints the key ids, never key material.
pub struct ReferenceKeyRing {
    current: String,
    keys: BTreeMap<String, SecretBox<[u8; 32]>>,
}

impl fmt::Debug for ReferenceKeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReferenceKeyRing")
            .field("current", &self.current)
            .field("key_ids", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ReferenceKeyRing {
    /// The environment variable the Manus package's auth binding injects the key ring as.
    pub const ENV: &'static str = "MANUS_REF_KEYS";

    /// A ring whose current key is `(kid, key)`.
    pub fn new(kid: impl Into<String>, key: [u8; 32]) -> Result<Self, ConnectorError> {
        let kid = kid.into();
        check_kid(&kid)?;
        let mut keys = BTreeMap::new();
        keys.insert(kid.clone(), SecretBox::new(Box::new(key)));
        Ok(ReferenceKeyRing { current: kid, keys })
    }

    /// Adds a key that opens older references; the current key stays.
    pub fn with_key(
        mut self,
        kid: impl Into<String>,
        key: [u8; 32],
    ) -> Result<Self, ConnectorError> {
        let kid = kid.into();
        check_kid(&kid)?;
        if self.keys.contains_key(&kid) {
            return Err(ConnectorError::ReferenceKeys(format!(
                "duplicate key id {kid:?}"
            )));
        }
        self.keys.insert(kid, SecretBox::new(Box::new(key)));
        Ok(self)
    }

    /// Parses `kid:base64key,kid2:base64key` (standard base64 of 32 bytes); the first
    /// entry is the current key. Error messages name key ids, never key material.
    pub fn parse(text: &str) -> Result<Self, ConnectorError> {
        let bad = |m: String| ConnectorError::ReferenceKeys(m);
        let mut ring: Option<ReferenceKeyRing> = None;
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (kid, b64) = entry
                .split_once(':')
                .ok_or_else(|| bad("expected kid:base64key".to_owned()))?;
            let raw = Zeroizing::new(
                STANDARD
                    .decode(b64.trim())
                    .map_err(|_| bad(format!("key {kid:?} is not base64")))?,
            );
            let key: [u8; 32] = raw
                .as_slice()
                .try_into()
                .map_err(|_| bad(format!("key {kid:?} must be 32 bytes")))?;
            ring = Some(match ring {
                None => ReferenceKeyRing::new(kid, key)?,
                Some(r) => r.with_key(kid, key)?,
            });
        }
        ring.ok_or_else(|| bad("no keys".to_owned()))
    }

    /// [`ReferenceKeyRing::parse`] of a secret (for example the value of
    /// [`ReferenceKeyRing::ENV`]).
    pub fn parse_secret(text: &SecretString) -> Result<Self, ConnectorError> {
        Self::parse(text.expose_secret())
    }

    /// The id of the key new references are sealed with.
    pub fn current_key_id(&self) -> &str {
        &self.current
    }

    /// The ids of every key that opens references.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Seals `address` for `scope`, valid until `expires_at` (Unix seconds).
    pub fn seal(
        &self,
        address: &str,
        scope: ReferenceScope<'_>,
        expires_at: i64,
    ) -> Result<String, ConnectorError> {
        let failed = || ConnectorError::ReferenceKeys("cannot seal a reference".to_owned());
        let key = self.keys.get(&self.current).ok_or_else(failed)?;
        let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key.expose_secret()));
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let aad = associated_data(scope, &self.current, expires_at);
        let padded = pad(address.as_bytes()).ok_or_else(failed)?;
        let sealed = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: &padded,
                    aad: &aad,
                },
            )
            .map_err(|_| failed())?;
        let kid = self.current.as_bytes();
        let mut out = Vec::with_capacity(3 + kid.len() + 8 + NONCE_LEN + sealed.len());
        out.extend_from_slice(VERSION);
        out.push(u8::try_from(kid.len()).map_err(|_| failed())?);
        out.extend_from_slice(kid);
        out.extend_from_slice(&expires_at.to_be_bytes());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(URL_SAFE_NO_PAD.encode(out))
    }

    /// Opens a reference for `scope` at time `now` (Unix seconds). Any edit, another
    /// target, package or purpose, expiry, or an unknown key gives
    /// [`ConnectorError::InvalidReference`].
    pub fn open(
        &self,
        reference: &str,
        scope: ReferenceScope<'_>,
        now: i64,
    ) -> Result<String, ConnectorError> {
        let invalid = || ConnectorError::InvalidReference;
        if reference.len() > MAX_REFERENCE_LEN {
            return Err(invalid());
        }
        let raw = URL_SAFE_NO_PAD.decode(reference).map_err(|_| invalid())?;
        let rest = raw.strip_prefix(VERSION).ok_or_else(invalid)?;
        let (&kid_len, rest) = rest.split_first().ok_or_else(invalid)?;
        let kid_len = usize::from(kid_len);
        if rest.len() < kid_len + 8 + NONCE_LEN + 16 {
            return Err(invalid());
        }
        let (kid, rest) = rest.split_at(kid_len);
        let (expiry, rest) = rest.split_at(8);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let kid = std::str::from_utf8(kid).map_err(|_| invalid())?;
        let expires_at = i64::from_be_bytes(expiry.try_into().map_err(|_| invalid())?);
        let key = self.keys.get(kid).ok_or_else(invalid)?;
        let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key.expose_secret()));
        let aad = associated_data(scope, kid, expires_at);
        let plain = cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: &aad,
                },
            )
            .map_err(|_| invalid())?;
        if now >= expires_at {
            return Err(invalid());
        }
        let address = unpad(&plain).ok_or_else(invalid)?;
        String::from_utf8(address.to_vec()).map_err(|_| invalid())
    }
}

/// The plaintext of a reference: the address's length (two bytes, big-endian), the
/// address, zeros up to a multiple of [`PADDED_BLOCK`]. `None` for an address longer
/// than 65,535 bytes.
fn pad(address: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    let len = u16::try_from(address.len()).ok()?;
    let total = (2 + address.len()).div_ceil(PADDED_BLOCK) * PADDED_BLOCK;
    let mut out = Zeroizing::new(Vec::with_capacity(total));
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(address);
    out.resize(total, 0);
    Some(out)
}

/// The address inside a padded plaintext, when the framing holds.
fn unpad(plain: &[u8]) -> Option<&[u8]> {
    let (len, rest) = plain.split_first_chunk::<2>()?;
    let len = usize::from(u16::from_be_bytes(*len));
    let (address, padding) = (rest.get(..len)?, rest.get(len..)?);
    (plain.len().is_multiple_of(PADDED_BLOCK) && padding.iter().all(|&b| b == 0)).then_some(address)
}

fn check_kid(kid: &str) -> Result<(), ConnectorError> {
    if kid.is_empty()
        || kid.len() > 64
        || !kid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(ConnectorError::ReferenceKeys(format!(
            "key id {kid:?} must be 1-64 characters of letters, digits, '_', '-', '.'"
        )));
    }
    Ok(())
}

fn associated_data(scope: ReferenceScope<'_>, kid: &str, expires_at: i64) -> Vec<u8> {
    let mut aad = Vec::new();
    for part in [
        AAD_TAG,
        scope.target.as_bytes(),
        scope.package.as_bytes(),
        scope.purpose.as_bytes(),
        kid.as_bytes(),
    ] {
        aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
        aad.extend_from_slice(part);
    }
    aad.extend_from_slice(&expires_at.to_be_bytes());
    aad
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const VIDA: ReferenceScope<'static> = ReferenceScope {
        target: "vida",
        package: "managed_auto_oncall_manus",
        purpose: "instance",
    };
    const MONICA: ReferenceScope<'static> = ReferenceScope {
        target: "monica",
        ..VIDA
    };

    fn ring() -> ReferenceKeyRing {
        ReferenceKeyRing::new("k2", [7u8; 32]).unwrap()
    }

    fn is_invalid<T: fmt::Debug>(r: Result<T, ConnectorError>) -> bool {
        matches!(r, Err(ConnectorError::InvalidReference))
    }

    #[test]
    fn a_reference_does_not_tell_the_length_of_its_address() {
        let r = ring();
        let short = r.seal("10.21.2.10:20160", VIDA, 2_000).unwrap();
        for len in 0..=30 {
            let address = "7".repeat(len);
            let sealed = r.seal(&address, VIDA, 2_000).unwrap();
            assert_eq!(sealed.len(), short.len(), "an address of {len} bytes");
            assert_eq!(r.open(&sealed, VIDA, 1_000).unwrap(), address);
        }
        for len in [31, 32, 62, 63, 600] {
            let address = "7".repeat(len);
            let sealed = r.seal(&address, VIDA, 2_000).unwrap();
            assert_eq!(r.open(&sealed, VIDA, 1_000).unwrap(), address);
        }
    }

    #[test]
    fn seal_and_open() {
        let r = ring();
        let sealed = r.seal("10.0.3.17:10080", VIDA, 2_000).unwrap();
        assert!(!sealed.contains("10.0.3.17"));
        assert_eq!(r.open(&sealed, VIDA, 1_000).unwrap(), "10.0.3.17:10080");
        assert!(is_invalid(r.open(&sealed, MONICA, 1_000)));
        assert!(is_invalid(r.open(&sealed, VIDA, 2_000)));
        let other_purpose = ReferenceScope {
            purpose: "store",
            ..VIDA
        };
        assert!(is_invalid(r.open(&sealed, other_purpose, 1_000)));
        let other_package = ReferenceScope {
            package: "managed_auto_oncall_clinic",
            ..VIDA
        };
        assert!(is_invalid(r.open(&sealed, other_package, 1_000)));
        assert!(is_invalid(r.open("", VIDA, 0)));
        assert!(is_invalid(r.open("not base64 !", VIDA, 0)));
        assert!(is_invalid(r.open(&"A".repeat(2000), VIDA, 0)));
        // The one error says what to do, and nothing about why.
        assert_eq!(
            ConnectorError::InvalidReference.to_string(),
            "invalid reference: use an instanceRef returned by this tool for this target"
        );
    }

    #[test]
    fn references_fit_the_argument_schema() {
        let sealed = ring().seal("[2001:db8::17]:10080", VIDA, i64::MAX).unwrap();
        assert!(evidence_policy::InstanceRef::new(sealed.clone()).is_ok());
        assert!(sealed.len() <= MAX_REFERENCE_LEN);
    }

    #[test]
    fn key_ring_text() {
        let text = format!(
            "new:{},old:{}",
            STANDARD.encode([1u8; 32]),
            STANDARD.encode([2u8; 32])
        );
        let r = ReferenceKeyRing::parse_secret(&SecretString::from(text)).unwrap();
        assert_eq!(r.current_key_id(), "new");
        assert_eq!(r.key_ids().collect::<Vec<_>>(), ["new", "old"]);
        let debug = format!("{r:?}");
        assert!(
            !debug.contains("AQEB") && debug.contains("\"old\""),
            "{debug}"
        );
        assert!(ReferenceKeyRing::parse("x:abc").is_err());
        assert!(ReferenceKeyRing::parse("").is_err());
        assert!(ReferenceKeyRing::parse("nocolon").is_err());
        assert!(
            ReferenceKeyRing::parse(&format!("bad id:{}", STANDARD.encode([1u8; 32]))).is_err()
        );
        let dup = ReferenceKeyRing::parse(&format!("a:{0},a:{0}", STANDARD.encode([1u8; 32])));
        let message = dup.unwrap_err().to_string();
        assert!(message.contains("duplicate key id"), "{message}");
        assert!(!message.contains(&STANDARD.encode([1u8; 32])));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Changing any byte of a reference (any position, any flip) never opens it.
        #[test]
        fn any_byte_change_never_opens(addr in "[0-9.:a-z-]{1,40}", idx in any::<prop::sample::Index>(), flip in 1u8..=255) {
            let r = ring();
            let sealed = r.seal(&addr, VIDA, 10_000).unwrap();
            let mut raw = URL_SAFE_NO_PAD.decode(&sealed).unwrap();
            let i = idx.index(raw.len());
            raw[i] ^= flip;
            let edited = URL_SAFE_NO_PAD.encode(raw);
            prop_assert!(is_invalid(r.open(&edited, VIDA, 0)));
        }

        /// A reference never opens for the other target, and never at or after expiry.
        #[test]
        fn never_opens_across_targets_or_after_expiry(addr in "[0-9.:]{1,21}", exp in -1_000i64..1_000_000, now in -1_000i64..1_000_000) {
            let r = ring();
            let sealed = r.seal(&addr, VIDA, exp).unwrap();
            prop_assert!(is_invalid(r.open(&sealed, MONICA, now)));
            let opened = r.open(&sealed, VIDA, now);
            if now >= exp {
                prop_assert!(is_invalid(opened));
            } else {
                prop_assert_eq!(opened.unwrap(), addr);
            }
        }

        /// Rotation: old references open while their key is listed, and stop opening
        /// once it is removed; a same-id key with other bytes opens nothing.
        #[test]
        fn rotation_keeps_old_references_until_removed(addr in "[0-9.:]{1,21}") {
            let old = ReferenceKeyRing::new("old", [1u8; 32]).unwrap();
            let sealed_old = old.seal(&addr, VIDA, 100).unwrap();
            let rotated = ReferenceKeyRing::new("new", [2u8; 32]).unwrap().with_key("old", [1u8; 32]).unwrap();
            prop_assert_eq!(rotated.open(&sealed_old, VIDA, 0).unwrap(), addr.clone());
            let sealed_new = rotated.seal(&addr, VIDA, 100).unwrap();
            prop_assert_eq!(rotated.open(&sealed_new, VIDA, 0).unwrap(), addr.clone());
            let removed = ReferenceKeyRing::new("new", [2u8; 32]).unwrap();
            prop_assert!(is_invalid(removed.open(&sealed_old, VIDA, 0)));
            prop_assert_eq!(removed.open(&sealed_new, VIDA, 0).unwrap(), addr);
            let impostor = ReferenceKeyRing::new("old", [3u8; 32]).unwrap();
            prop_assert!(is_invalid(impostor.open(&sealed_old, VIDA, 0)));
        }
    }
}
