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
    #[schemars(extend("pattern" = TICKET_KEY_PATTERN, "maxLength" = 64))]
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
    #[schemars(extend("pattern" = POLICY_ID_PATTERN))]
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

/// The JSON Schema pattern of [`TicketKey`] (with at most 64 characters).
pub(crate) const TICKET_KEY_PATTERN: &str = "^[A-Z][A-Z0-9_]*-[1-9][0-9]{0,17}$";

/// The JSON Schema pattern of [`PolicyId`].
pub(crate) const POLICY_ID_PATTERN: &str = "^[A-Za-z0-9_.:-]{1,128}$";

/// The JSON Schema pattern of a scope value ([`is_scope_value`]): printable ASCII
/// (`!` to `~`) but `"`, `'`, `` ` `` and `\`.
pub(crate) const SCOPE_VALUE_PATTERN: &str = r"^[!#-&(-\[\]-_a-~]{1,128}$";

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

    /// The schema patterns accept exactly what the checks accept, over every single
    /// byte and a spread of longer values.
    #[test]
    fn schema_patterns_agree_with_the_checks() {
        // As an issuer's validator reads them: JSON Schema `pattern`s.
        let pattern = |p: &str| {
            jsonschema::validator_for(&serde_json::json!({"type": "string", "pattern": p})).unwrap()
        };
        let matches = |v: &jsonschema::Validator, s: &str| v.is_valid(&serde_json::json!(s));
        let (scope, policy, ticket) = (
            pattern(SCOPE_VALUE_PATTERN),
            pattern(POLICY_ID_PATTERN),
            pattern(TICKET_KEY_PATTERN),
        );
        let mut values: Vec<String> = (0u8..=127).map(|b| char::from(b).to_string()).collect();
        values.extend(
            [
                "",
                "SaaS01",
                "a b",
                "x".repeat(128).as_str(),
                "x".repeat(129).as_str(),
                "APID-29213",
                "ST-2865",
                "APID-01",
                "apid-1",
                "A_1-9",
                "pol:1.2_x-y",
                "ks\\9",
                "ks\"9",
                "ks`9",
                "ks'9",
                "{a}/[b]",
                "é",
            ]
            .map(str::to_owned),
        );
        for v in &values {
            assert_eq!(matches(&scope, v), is_scope_value(v), "scope value {v:?}");
            assert_eq!(
                matches(&policy, v),
                PolicyId::new(v.as_str()).is_ok(),
                "policy id {v:?}"
            );
            assert_eq!(
                matches(&ticket, v) && v.len() <= 64,
                TicketKey::new(v.as_str()).is_ok(),
                "ticket {v:?}"
            );
        }
    }

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
