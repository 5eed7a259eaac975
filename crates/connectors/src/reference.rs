//! Opaque references: provider addresses sealed so the model can pass them back but
//! never read, edit or move them to another target.
//!
//! A reference is base64url (no padding) of `header || AES-SIV(address)`: AES-SIV
//! (RFC 5297, the RustCrypto `aes-siv` crate, `Aes256Siv`) is a deterministic AEAD, so
//! the same address under the same target, package, purpose and key always gives the
//! same reference, and a model can tell that two rows name one instance (what equality
//! reveals, and all it reveals). The header byte holds the format version (high nibble)
//! and the address kind (low nibble, see the compact address forms); the associated
//! data bind the format tag, the header, the target, the package, the purpose and the
//! key id. The SIV key is derived from the ring's 32-byte key with HKDF-SHA-256.
//! An IPv4 address with its port seals to 23 bytes: 31 characters.
//!
//! The reference carries no key id: opening tries each listed, unexpired key (a ring
//! holds a few), and only the key that sealed it authenticates it. Every way a reference
//! can be wrong gives the same [`ConnectorError::InvalidReference`].

use std::collections::BTreeMap;
use std::fmt;

use aes_siv::KeyInit;
use aes_siv::siv::Aes256Siv;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hkdf::Hkdf;
use secrecy::{ExposeSecret, SecretBox, SecretString};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::ConnectorError;
use crate::compact_address::{self, Kind};

/// The format version, the high nibble of the header byte.
const VERSION: u8 = 3;
/// The first associated-data component: what the bytes are, and in which format.
const AAD_TAG: &[u8] = b"managed-evidence/opaque-reference/v3";
/// The HKDF `info` of the SIV key derived from a ring key.
const KEY_INFO: &[u8] = b"managed-evidence/opaque-reference/aes-siv-cmac-512";
/// The length of the synthetic IV (the authentication tag) AES-SIV prepends.
const SIV_LEN: usize = 16;
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

/// One key of a ring: 32 secret bytes and, optionally, the last second it is valid.
struct RingKey {
    key: SecretBox<[u8; 32]>,
    not_after: Option<i64>,
}

impl RingKey {
    fn valid_at(&self, now: i64) -> bool {
        self.not_after.is_none_or(|last| now <= last)
    }

    /// The AES-SIV cipher of this key: HKDF-SHA-256 expands the ring key to the 64
    /// bytes `Aes256Siv` takes (one half for S2V/CMAC, one for CTR).
    fn cipher(&self) -> Option<Aes256Siv> {
        let mut siv_key = Zeroizing::new([0u8; 64]);
        Hkdf::<Sha256>::new(None, self.key.expose_secret())
            .expand(KEY_INFO, siv_key.as_mut_slice())
            .ok()?;
        Some(Aes256Siv::new(siv_key.as_slice().into()))
    }
}

/// Keys by key id: seal with the current key, open with any listed key that has not
/// expired, so keys rotate by adding a new current key and later removing the old one
/// (or letting it expire).
///
/// `Debug` prints the key ids, never key material.
pub struct ReferenceKeyRing {
    current: String,
    keys: BTreeMap<String, RingKey>,
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

    /// A ring whose current key is `(kid, key)`, valid without end.
    pub fn new(kid: impl Into<String>, key: [u8; 32]) -> Result<Self, ConnectorError> {
        Self::with_expiry(kid, key, None)
    }

    /// A ring whose current key is `(kid, key)`, valid up to and including the Unix
    /// second `not_after` when one is given: after it, the key neither seals nor opens.
    pub fn with_expiry(
        kid: impl Into<String>,
        key: [u8; 32],
        not_after: Option<i64>,
    ) -> Result<Self, ConnectorError> {
        let kid = kid.into();
        check_kid(&kid)?;
        let mut keys = BTreeMap::new();
        keys.insert(
            kid.clone(),
            RingKey {
                key: SecretBox::new(Box::new(key)),
                not_after,
            },
        );
        Ok(ReferenceKeyRing { current: kid, keys })
    }

    /// Adds a key that opens older references; the current key stays.
    pub fn with_key(self, kid: impl Into<String>, key: [u8; 32]) -> Result<Self, ConnectorError> {
        self.with_key_until(kid, key, None)
    }

    /// Adds a key that opens older references up to and including the Unix second
    /// `not_after` (without end when `None`); the current key stays.
    pub fn with_key_until(
        mut self,
        kid: impl Into<String>,
        key: [u8; 32],
        not_after: Option<i64>,
    ) -> Result<Self, ConnectorError> {
        let kid = kid.into();
        check_kid(&kid)?;
        if self.keys.contains_key(&kid) {
            return Err(ConnectorError::ReferenceKeys(format!(
                "duplicate key id {kid:?}"
            )));
        }
        let key = RingKey {
            key: SecretBox::new(Box::new(key)),
            not_after,
        };
        self.keys.insert(kid, key);
        Ok(self)
    }

    /// Parses `kid:base64key[:not_after],...` (standard base64 of 32 bytes, an optional
    /// last valid Unix second); the first entry is the current key. Error messages name
    /// key ids, never key material.
    pub fn parse(text: &str) -> Result<Self, ConnectorError> {
        let bad = |m: String| ConnectorError::ReferenceKeys(m);
        let mut ring: Option<ReferenceKeyRing> = None;
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (kid, rest) = entry
                .split_once(':')
                .ok_or_else(|| bad("expected kid:base64key".to_owned()))?;
            let (b64, not_after) = match rest.split_once(':') {
                Some((b64, until)) => {
                    let until = until.trim().parse::<i64>().map_err(|_| {
                        bad(format!("key {kid:?}: the expiry must be Unix seconds"))
                    })?;
                    (b64, Some(until))
                }
                None => (rest, None),
            };
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
                None => ReferenceKeyRing::with_expiry(kid, key, not_after)?,
                Some(r) => r.with_key_until(kid, key, not_after)?,
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

    /// Seals `address` for `scope` with the current key, which must be valid at `now`
    /// (Unix seconds). Deterministic: the same address, scope and key always give the
    /// same reference.
    pub fn seal(
        &self,
        address: &str,
        scope: ReferenceScope<'_>,
        now: i64,
    ) -> Result<String, ConnectorError> {
        let failed = || ConnectorError::ReferenceKeys("cannot seal a reference".to_owned());
        let key = self.keys.get(&self.current).ok_or_else(failed)?;
        if !key.valid_at(now) {
            return Err(ConnectorError::ReferenceKeys(format!(
                "the current reference key {:?} has expired",
                self.current
            )));
        }
        let (kind, plain) = compact_address::encode(address);
        let header = [header(kind)];
        let mut cipher = key.cipher().ok_or_else(failed)?;
        let sealed = cipher
            .encrypt(associated_data(&header, scope, &self.current), &plain)
            .map_err(|_| failed())?;
        let mut out = Vec::with_capacity(1 + sealed.len());
        out.extend_from_slice(&header);
        out.extend_from_slice(&sealed);
        Ok(URL_SAFE_NO_PAD.encode(out))
    }

    /// Opens a reference for `scope` at time `now` (Unix seconds). Any edit, another
    /// target, package or purpose, a key that expired or left the ring gives
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
        let (header, sealed) = raw.split_first_chunk::<1>().ok_or_else(invalid)?;
        if header[0] >> 4 != VERSION || sealed.len() < SIV_LEN {
            return Err(invalid());
        }
        let kind = Kind::from_nibble(header[0] & 0x0f).ok_or_else(invalid)?;
        let plain = self
            .keys
            .iter()
            .filter(|(_, key)| key.valid_at(now))
            .find_map(|(kid, key)| {
                key.cipher()?
                    .decrypt(associated_data(header, scope, kid), sealed)
                    .ok()
                    .map(Zeroizing::new)
            })
            .ok_or_else(invalid)?;
        compact_address::decode(kind, &plain).ok_or_else(invalid)
    }
}

fn header(kind: Kind) -> u8 {
    VERSION << 4 | kind as u8
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

/// The associated data, as the vector of strings S2V authenticates one by one (so no
/// component can run into the next).
fn associated_data<'a>(
    header: &'a [u8; 1],
    scope: ReferenceScope<'a>,
    kid: &'a str,
) -> [&'a [u8]; 6] {
    [
        AAD_TAG,
        header,
        scope.target.as_bytes(),
        scope.package.as_bytes(),
        scope.purpose.as_bytes(),
        kid.as_bytes(),
    ]
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
    fn references_are_short_and_their_length_tells_only_a_class() {
        let r = ring();
        let ipv4 = r.seal("10.21.2.10:20160", VIDA, 0).unwrap();
        assert_eq!(ipv4.len(), 31, "{ipv4}");
        for address in ["0.0.0.0:0", "255.255.255.255:65535", "10.21.1.17:10080"] {
            assert_eq!(r.seal(address, VIDA, 0).unwrap().len(), ipv4.len());
        }
        assert_eq!(r.seal("10.21.1.17", VIDA, 0).unwrap().len(), 28);
        assert_eq!(r.seal("[2001:db8::17]:10080", VIDA, 0).unwrap().len(), 47);
        // Host names: one length per class of PADDED_CLASSES.
        let class = |address: &str| r.seal(address, VIDA, 0).unwrap().len();
        assert_eq!(class("tidb-07.saas01.svc"), class("node-130.saas02.sv"));
        assert_eq!(class("a.b"), class("tidb-0.saas01.s"));
        for len in 0..=300 {
            let address = "7".repeat(len);
            let sealed = r.seal(&address, VIDA, 0).unwrap();
            let expected = (1 + SIV_LEN + compact_address::padded_len(len)) * 4;
            assert_eq!(
                sealed.len(),
                expected.div_ceil(3),
                "an address of {len} bytes"
            );
            assert_eq!(r.open(&sealed, VIDA, 0).unwrap(), address);
        }
    }

    #[test]
    fn the_same_address_gives_the_same_reference() {
        let r = ring();
        let a = r.seal("10.21.1.17:10080", VIDA, 0).unwrap();
        assert_eq!(r.seal("10.21.1.17:10080", VIDA, 5_000).unwrap(), a);
        assert_ne!(r.seal("10.21.1.18:10080", VIDA, 0).unwrap(), a);
        assert_ne!(r.seal("10.21.1.17:10080", MONICA, 0).unwrap(), a);
        let host_ip = ReferenceScope {
            purpose: "host_ip",
            ..VIDA
        };
        assert_ne!(r.seal("10.21.1.17:10080", host_ip, 0).unwrap(), a);
        let other_key = ReferenceKeyRing::new("k2", [8u8; 32]).unwrap();
        assert_ne!(other_key.seal("10.21.1.17:10080", VIDA, 0).unwrap(), a);
    }

    #[test]
    fn seal_and_open() {
        let r = ring();
        let sealed = r.seal("10.0.3.17:10080", VIDA, 0).unwrap();
        assert!(!sealed.contains("10.0.3.17"));
        assert_eq!(r.open(&sealed, VIDA, 1_000).unwrap(), "10.0.3.17:10080");
        assert!(is_invalid(r.open(&sealed, MONICA, 1_000)));
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
    fn an_expired_key_neither_seals_nor_opens() {
        let r = ReferenceKeyRing::with_expiry("k1", [7u8; 32], Some(1_000)).unwrap();
        let sealed = r.seal("10.0.3.17:10080", VIDA, 1_000).unwrap();
        assert_eq!(r.open(&sealed, VIDA, 1_000).unwrap(), "10.0.3.17:10080");
        assert!(is_invalid(r.open(&sealed, VIDA, 1_001)));
        let message = r
            .seal("10.0.3.17:10080", VIDA, 1_001)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("expired") && message.contains("k1"),
            "{message}"
        );
        // Listed as an old key with an expiry: the same.
        let rotated = ReferenceKeyRing::new("k2", [8u8; 32])
            .unwrap()
            .with_key_until("k1", [7u8; 32], Some(1_000))
            .unwrap();
        assert_eq!(rotated.open(&sealed, VIDA, 999).unwrap(), "10.0.3.17:10080");
        assert!(is_invalid(rotated.open(&sealed, VIDA, 1_001)));
    }

    #[test]
    fn references_fit_the_argument_schema() {
        let sealed = ring().seal("[2001:db8::17]:10080", VIDA, 0).unwrap();
        assert!(evidence_policy::args::InstanceRef::new(sealed.clone()).is_ok());
        let long = ring().seal(&"h".repeat(600), VIDA, 0).unwrap();
        assert!(long.len() <= MAX_REFERENCE_LEN);
        assert_eq!(ring().open(&long, VIDA, 0).unwrap(), "h".repeat(600));
    }

    #[test]
    fn key_ring_text() {
        let text = format!(
            "new:{},old:{}:1900000000",
            STANDARD.encode([1u8; 32]),
            STANDARD.encode([2u8; 32])
        );
        let r = ReferenceKeyRing::parse_secret(&SecretString::from(text)).unwrap();
        assert_eq!(r.current_key_id(), "new");
        assert_eq!(r.key_ids().collect::<Vec<_>>(), ["new", "old"]);
        assert_eq!(r.keys["old"].not_after, Some(1_900_000_000));
        assert_eq!(r.keys["new"].not_after, None);
        let debug = format!("{r:?}");
        assert!(
            !debug.contains("AQEB") && debug.contains("\"old\""),
            "{debug}"
        );
        assert!(ReferenceKeyRing::parse("x:abc").is_err());
        assert!(ReferenceKeyRing::parse("").is_err());
        assert!(ReferenceKeyRing::parse("nocolon").is_err());
        let late = ReferenceKeyRing::parse(&format!("a:{}:soon", STANDARD.encode([1u8; 32])));
        let message = late.unwrap_err().to_string();
        assert!(message.contains("Unix seconds"), "{message}");
        assert!(!message.contains(&STANDARD.encode([1u8; 32])));
        assert!(
            ReferenceKeyRing::parse(&format!("bad id:{}", STANDARD.encode([1u8; 32]))).is_err()
        );
        let dup = ReferenceKeyRing::parse(&format!("a:{0},a:{0}", STANDARD.encode([1u8; 32])));
        let message = dup.unwrap_err().to_string();
        assert!(message.contains("duplicate key id"), "{message}");
        assert!(!message.contains(&STANDARD.encode([1u8; 32])));
    }

    fn address() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<std::net::Ipv4Addr>().prop_map(|a| a.to_string()),
            (any::<std::net::Ipv4Addr>(), any::<u16>()).prop_map(|(a, p)| format!("{a}:{p}")),
            (any::<std::net::Ipv6Addr>(), any::<u16>()).prop_map(|(a, p)| format!("[{a}]:{p}")),
            "[a-zA-Z][a-z0-9-]{0,20}(\\.[a-z0-9]{1,8}){0,3}\\.?(:[0-9]{1,5})?",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// Changing any byte of a reference (any position, any flip) never opens it.
        #[test]
        fn any_byte_change_never_opens(addr in address(), idx in any::<prop::sample::Index>(), flip in 1u8..=255) {
            let r = ring();
            let sealed = r.seal(&addr, VIDA, 0).unwrap();
            let mut raw = URL_SAFE_NO_PAD.decode(&sealed).unwrap();
            let i = idx.index(raw.len());
            raw[i] ^= flip;
            let edited = URL_SAFE_NO_PAD.encode(raw);
            prop_assert!(is_invalid(r.open(&edited, VIDA, 0)));
        }

        /// A reference opens to its address for its scope only: never for the other
        /// target, another package or another purpose; the same address and scope
        /// always seal to the same reference.
        #[test]
        fn opens_only_in_its_scope(addr in address(), now in -1_000i64..1_000_000) {
            let r = ring();
            let sealed = r.seal(&addr, VIDA, now).unwrap();
            prop_assert_eq!(r.seal(&addr, VIDA, now + 1).unwrap(), sealed.clone());
            prop_assert_eq!(r.open(&sealed, VIDA, now).unwrap(), addr);
            prop_assert!(is_invalid(r.open(&sealed, MONICA, now)));
            let package = ReferenceScope { package: "managed_auto_oncall_clinic", ..VIDA };
            prop_assert!(is_invalid(r.open(&sealed, package, now)));
            let purpose = ReferenceScope { purpose: "host_ip", ..VIDA };
            prop_assert!(is_invalid(r.open(&sealed, purpose, now)));
        }

        /// A key with an expiry opens up to and including that second, never after.
        #[test]
        fn never_opens_after_its_key_expired(addr in address(), last in -1_000i64..1_000_000, now in -1_000i64..1_000_000) {
            let r = ReferenceKeyRing::with_expiry("k1", [3u8; 32], Some(last)).unwrap();
            let sealed = r.seal(&addr, VIDA, last).unwrap();
            let opened = r.open(&sealed, VIDA, now);
            if now > last {
                prop_assert!(is_invalid(opened));
                prop_assert!(r.seal(&addr, VIDA, now).is_err());
            } else {
                prop_assert_eq!(opened.unwrap(), addr);
            }
        }

        /// Rotation: old references open while their key is listed, and stop opening
        /// once it is removed; a same-id key with other bytes opens nothing.
        #[test]
        fn rotation_keeps_old_references_until_removed(addr in address()) {
            let old = ReferenceKeyRing::new("old", [1u8; 32]).unwrap();
            let sealed_old = old.seal(&addr, VIDA, 0).unwrap();
            let rotated = ReferenceKeyRing::new("new", [2u8; 32]).unwrap().with_key("old", [1u8; 32]).unwrap();
            prop_assert_eq!(rotated.open(&sealed_old, VIDA, 0).unwrap(), addr.clone());
            let sealed_new = rotated.seal(&addr, VIDA, 0).unwrap();
            prop_assert_ne!(&sealed_new, &sealed_old);
            prop_assert_eq!(rotated.open(&sealed_new, VIDA, 0).unwrap(), addr.clone());
            let removed = ReferenceKeyRing::new("new", [2u8; 32]).unwrap();
            prop_assert!(is_invalid(removed.open(&sealed_old, VIDA, 0)));
            prop_assert_eq!(removed.open(&sealed_new, VIDA, 0).unwrap(), addr);
            let impostor = ReferenceKeyRing::new("old", [3u8; 32]).unwrap();
            prop_assert!(is_invalid(impostor.open(&sealed_old, VIDA, 0)));
        }
    }
}
