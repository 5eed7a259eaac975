//! Digests: the SHA-256 package digest, the short request digest of a locked request, and
//! the canonical JSON both are computed over.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::ResultError;

/// A SHA-256 digest written as `sha256:` followed by 64 lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Digest {
    /// A SHA-256 digest.
    Sha256([u8; 32]),
}

impl Digest {
    /// The SHA-256 of some bytes.
    pub fn sha256(bytes: &[u8]) -> Self {
        Digest::Sha256(Sha256::digest(bytes).into())
    }

    /// The raw digest bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        match self {
            Digest::Sha256(b) => b,
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", hex::encode(self.as_bytes()))
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Digest {
    type Err = ResultError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.strip_prefix("sha256:")
            .and_then(lower_hex)
            .map(Digest::Sha256)
            .ok_or_else(|| ResultError::InvalidDigest(s.to_owned()))
    }
}

/// `N` bytes written as exactly `2 N` lower-case hex digits.
fn lower_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N
        || !text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

/// `TryFrom<String>` and `From<.. for String>` through `FromStr` and `Display` (for
/// serde's `try_from`/`into`), and the JSON Schema of the string: `$pattern`,
/// described as `$description`.
macro_rules! digest_text {
    ($ty:ident, $pattern:literal, $description:literal) => {
        impl TryFrom<String> for $ty {
            type Error = ResultError;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                value.parse()
            }
        }

        impl From<$ty> for String {
            fn from(value: $ty) -> Self {
                value.to_string()
            }
        }

        impl JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($ty).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "pattern": $pattern,
                    "description": $description
                })
            }
        }
    };
}

digest_text!(
    Digest,
    "^sha256:[0-9a-f]{64}$",
    "SHA-256 digest: 'sha256:' and 64 lower-case hex digits"
);

/// The digest of a canonical locked request as the model, the materializer and the
/// audit record see it: the first 128 bits of the SHA-256 of the request's canonical
/// JSON (RFC 8785, JSON Canonicalization Scheme), written as 32 lower-case hex digits.
///
/// Identical for an unchanged retry, different after any change of the request. 128
/// bits spot an unchanged retry as surely as 256 (a collision takes about 2^64 tries)
/// at half the characters a model reads per item; anyone holding the canonical request
/// recomputes its SHA-256 and compares the first half.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RequestDigest([u8; 16]);

impl RequestDigest {
    /// The digest of a serializable request in canonical JSON.
    ///
    /// Field order and map order of the input do not matter; any change of a value does.
    pub fn of<T: Serialize + ?Sized>(request: &T) -> Result<Self, ResultError> {
        let canonical = canonical_json(request)?;
        Ok(RequestDigest::from(Digest::sha256(canonical.as_bytes())))
    }

    /// The 16 bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

/// The first 128 bits of a SHA-256 digest.
impl From<Digest> for RequestDigest {
    fn from(value: Digest) -> Self {
        let mut out = [0u8; 16];
        out.copy_from_slice(&value.as_bytes()[..16]);
        RequestDigest(out)
    }
}

impl fmt::Display for RequestDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for RequestDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for RequestDigest {
    type Err = ResultError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        lower_hex(s)
            .map(RequestDigest)
            .ok_or_else(|| ResultError::InvalidRequestDigest(s.to_owned()))
    }
}

digest_text!(
    RequestDigest,
    "^[0-9a-f]{32}$",
    "The first 128 bits of the SHA-256 of the canonical locked request: 32 lower-case hex digits"
);

/// Canonical JSON (RFC 8785) of a serializable value.
pub fn canonical_json<T: Serialize + ?Sized>(value: &T) -> Result<String, ResultError> {
    serde_jcs::to_string(value).map_err(|e| ResultError::Canonical(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digest_text_round_trip() {
        let d = Digest::sha256(b"abc");
        assert_eq!(
            d.to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(d.to_string().parse::<Digest>().unwrap(), d);
        assert!("sha256:BA78".parse::<Digest>().is_err());
        assert!(
            "md5:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
                .parse::<Digest>()
                .is_err()
        );
        let upper = d.to_string().to_uppercase().replace("SHA256", "sha256");
        assert!(upper.parse::<Digest>().is_err());
    }

    #[test]
    fn request_digest_is_the_first_half_of_the_sha256() {
        let d = RequestDigest::from(Digest::sha256(b"abc"));
        assert_eq!(d.to_string(), "ba7816bf8f01cfea414140de5dae2223");
        assert_eq!(d.to_string().parse::<RequestDigest>().unwrap(), d);
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            r#""ba7816bf8f01cfea414140de5dae2223""#
        );
        for bad in [
            "sha256:ba7816bf8f01cfea414140de5dae2223",
            "BA7816BF8F01CFEA414140DE5DAE2223",
            "ba7816bf8f01cfea414140de5dae222",
            "ba7816bf8f01cfea414140de5dae2223b0",
        ] {
            assert!(bad.parse::<RequestDigest>().is_err(), "{bad}");
        }
    }

    #[test]
    fn request_digest_ignores_key_order_not_values() {
        let a = json!({"expr": "up", "step": 15, "queryId": "q1"});
        let b: serde_json::Value =
            serde_json::from_str(r#"{"queryId":"q1","step":15,"expr":"up"}"#).unwrap();
        let c = json!({"expr": "up", "step": 30, "queryId": "q1"});
        assert_eq!(
            RequestDigest::of(&a).unwrap(),
            RequestDigest::of(&b).unwrap()
        );
        assert_ne!(
            RequestDigest::of(&a).unwrap(),
            RequestDigest::of(&c).unwrap()
        );
    }

    #[test]
    fn a_full_sha256_digest_is_refused_with_the_request_digest_form() {
        let full = format!("sha256:{}", "ab".repeat(32));
        let message = full.parse::<RequestDigest>().unwrap_err().to_string();
        assert!(message.contains("32 lower-case hex digits"), "{message}");
        assert!(!message.contains("'sha256:' and 64"), "{message}");
    }
}
