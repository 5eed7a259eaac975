use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::PolicyError;

macro_rules! policy_id {
    ($(#[$meta:meta])* $name:ident, $what:literal, $rule:literal, $check:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Checks and wraps a value.
            pub fn new(value: impl Into<String>) -> Result<Self, PolicyError> {
                let value = value.into();
                let check: fn(&str) -> bool = $check;
                if check(&value) {
                    Ok(Self(value))
                } else {
                    Err(PolicyError::InvalidPolicy(format!(
                        concat!("invalid ", $what, " {:?}: ", $rule),
                        value
                    )))
                }
            }

            /// The value as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = PolicyError;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                Self::new(value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> Self {
                value.0
            }
        }

        impl FromStr for $name {
            type Err = PolicyError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::new(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

fn is_token(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

policy_id!(
    /// A Jira ticket key such as `APID-29213`: an upper-case project key, `-`, a number.
    TicketKey,
    "ticket key",
    "expected an upper-case project key, '-' and a number, e.g. APID-29213",
    |s| {
        let Some((project, number)) = s.split_once('-') else {
            return false;
        };
        s.len() <= 64
            && project.bytes().next().is_some_and(|b| b.is_ascii_uppercase())
            && project
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
            && !number.is_empty()
            && number.len() <= 18
            && number.bytes().all(|b| b.is_ascii_digit())
            && !number.starts_with('0')
    }
);

policy_id!(
    /// The identity of one issued trusted policy: 1-128 characters of letters, digits,
    /// `_`, `-`, `.` and `:`.
    PolicyId,
    "policy id",
    "use 1-128 characters of letters, digits, '_', '-', '.', ':'",
    |s| is_token(s, 128)
);

policy_id!(
    /// The id of a signing key in a [`crate::KeyRing`]: 1-64 characters of letters,
    /// digits, `_`, `-` and `.`.
    KeyId,
    "key id",
    "use 1-64 characters of letters, digits, '_', '-', '.'",
    |s| is_token(s, 64) && !s.contains(':')
);

/// True for a value the policy may bind into a PromQL label matcher or name a scope
/// with: 1-128 printable ASCII characters without spaces, quotes or backslashes.
pub(crate) fn is_scope_value(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'`' | b'\\'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticket_keys() {
        assert!(TicketKey::new("APID-29213").is_ok());
        assert!(TicketKey::new("ST-2865").is_ok());
        for bad in ["apid-1", "APID-", "-1", "APID-01", "APID 1", "APID-1x", ""] {
            assert!(TicketKey::new(bad).is_err(), "{bad}");
        }
        let err: Result<TicketKey, _> = serde_json::from_str("\"nope\"");
        assert!(err.is_err());
    }

    #[test]
    fn key_ids() {
        assert!(KeyId::new("k2026-07.a").is_ok());
        assert!(KeyId::new("k:1").is_err());
        assert!(KeyId::new("").is_err());
        assert!(PolicyId::new("pol:APID-29213:1").is_ok());
        assert!(is_scope_value("1379661944646413143"));
        assert!(!is_scope_value("a\"b"));
        assert!(!is_scope_value("a b"));
    }
}
