//! Identifiers of trusted policy: the ticket key, the policy id and the signing key id,
//! and the rule for a value policy may bind into a label matcher.

use schemars::JsonSchema;

use crate::PolicyError;

fn is_token(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

evidence_result::checked_string! {
    /// A Jira ticket key such as `APID-29213`: an upper-case project key, `-`, a number.
    #[derive(JsonSchema)]
    pub struct TicketKey;
    check: |s| {
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
    },
    error: PolicyError = |value| invalid(
        "ticket key",
        "expected an upper-case project key, '-' and a number, e.g. APID-29213",
        &value,
    ),
}

evidence_result::checked_string! {
    /// The identity of one issued trusted policy: 1-128 characters of letters, digits,
    /// `_`, `-`, `.` and `:`.
    #[derive(JsonSchema)]
    pub struct PolicyId;
    check: |s| is_token(s, 128),
    error: PolicyError = |value| invalid(
        "policy id",
        "use 1-128 characters of letters, digits, '_', '-', '.', ':'",
        &value,
    ),
}

evidence_result::checked_string! {
    /// The id of a signing key in a [`crate::KeyRing`]: 1-64 characters of letters,
    /// digits, `_`, `-` and `.`.
    #[derive(JsonSchema)]
    pub struct KeyId;
    check: |s| is_token(s, 64) && !s.contains(':'),
    error: PolicyError = |value| invalid(
        "key id",
        "use 1-64 characters of letters, digits, '_', '-', '.'",
        &value,
    ),
}

/// The refusal of a malformed id: `invalid <what> "<value>": <rule>`.
fn invalid(what: &str, rule: &str, value: &str) -> PolicyError {
    PolicyError::InvalidPolicy(format!("invalid {what} {value:?}: {rule}"))
}

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
