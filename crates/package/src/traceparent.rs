//! A W3C Trace Context `traceparent` (version `00`): the id that joins a call's audit
//! record to the runtime's trace of the same request. It is parsed strictly (the
//! version, a 32-digit trace id and a 16-digit parent id, neither all zeros, and the
//! flags, in lowercase hexadecimal), so a malformed one is told apart and ignored, never
//! recorded.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A well-formed `traceparent` value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Traceparent(String);

/// Why a `traceparent` value is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a traceparent is 00-<32 hex>-<16 hex>-<2 hex> in lowercase, ids not all zeros")]
pub struct TraceparentError;

impl Traceparent {
    /// The trace id (32 hex digits).
    pub fn trace_id(&self) -> &str {
        self.0.get(3..35).unwrap_or_default()
    }

    /// The whole value.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Traceparent {
    type Err = TraceparentError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let hex = |part: &str, len: usize| {
            part.len() == len && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        let parts: Vec<&str> = text.split('-').collect();
        let [version, trace, parent, flags] = parts.as_slice() else {
            return Err(TraceparentError);
        };
        let nonzero = |part: &str| part.bytes().any(|b| b != b'0');
        if *version == "00"
            && hex(trace, 32)
            && hex(parent, 16)
            && hex(flags, 2)
            && nonzero(trace)
            && nonzero(parent)
        {
            Ok(Traceparent(text.to_owned()))
        } else {
            Err(TraceparentError)
        }
    }
}

impl fmt::Display for Traceparent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Traceparent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Traceparent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_w3c_example_parses_and_malformed_values_do_not() {
        let tp: Traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap();
        assert_eq!(tp.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1g",
        ] {
            assert!(bad.parse::<Traceparent>().is_err(), "{bad:?}");
        }
    }

    proptest! {
        /// Whatever arrives, a value is recorded only when it is exactly of the form:
        /// what parses prints back unchanged, and nothing else parses.
        #[test]
        fn only_the_exact_form_parses(text in "[0-9a-fA-F-]{0,60}|00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}") {
            if let Ok(tp) = text.parse::<Traceparent>() {
                prop_assert_eq!(tp.as_str(), text.as_str());
                prop_assert_eq!(text.len(), 55);
                prop_assert!(text.starts_with("00-"));
            }
        }
    }
}
