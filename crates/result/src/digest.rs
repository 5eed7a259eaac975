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
        let bad = || ResultError::InvalidDigest(s.to_owned());
        let hex_part = s.strip_prefix("sha256:").ok_or_else(bad)?;
        if hex_part.len() != 64
            || !hex_part
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out).map_err(|_| bad())?;
        Ok(Digest::Sha256(out))
    }
}

impl TryFrom<String> for Digest {
    type Error = ResultError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl From<Digest> for String {
    fn from(value: Digest) -> Self {
        value.to_string()
    }
}

impl JsonSchema for Digest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Digest".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^sha256:[0-9a-f]{64}$",
            "description": "SHA-256 digest: 'sha256:' and 64 lower-case hex digits"
        })
    }
}

/// The digest of a canonical locked request: `sha256:` + hex of the SHA-256 of the
/// request's canonical JSON (RFC 8785, JSON Canonicalization Scheme).
///
/// Identical for an unchanged retry, different after any change of the request.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct RequestDigest(Digest);

impl RequestDigest {
    /// The digest of a serializable request in canonical JSON.
    ///
    /// Field order and map order of the input do not matter; any change of a value does.
    pub fn of<T: Serialize + ?Sized>(request: &T) -> Result<Self, ResultError> {
        let canonical = canonical_json(request)?;
        Ok(RequestDigest(Digest::sha256(canonical.as_bytes())))
    }

    /// The underlying digest.
    pub fn digest(&self) -> Digest {
        self.0
    }
}

impl From<Digest> for RequestDigest {
    fn from(value: Digest) -> Self {
        RequestDigest(value)
    }
}

impl fmt::Display for RequestDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FromStr for RequestDigest {
    type Err = ResultError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(RequestDigest)
    }
}

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
}
