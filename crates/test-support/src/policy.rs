//! The trusted policy of the APID-29213 incident, as the one JSON fixture every test
//! that needs it reads (`fixtures/apid_29213_policy.json`), and the one way a test, an
//! example or a bench issues a policy "now, for an hour" ([`issued_now`],
//! [`apid_29213_now`]).

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

/// The trusted policy of APID-29213 as JSON text: the Clinic package, cluster `SaaS01`
/// (dedicated), the window 2026-07-21 21:50–22:05 UTC+8 with an hour of look-back, issued
/// at 22:10 for an hour. A test changes only the fields it is about.
pub const APID_29213_POLICY: &str = include_str!("../fixtures/apid_29213_policy.json");

/// How long a policy issued by [`issued_now`] stays valid: an hour.
pub const VALIDITY: SignedDuration = SignedDuration::from_hours(1);

/// [`APID_29213_POLICY`] for the package of `provider` (`clinic`, `manus` or `wetech`):
/// `provider` and `package` set. The fields only one provider takes (the Manus target,
/// the Wetech query ids and datasource) are the caller's to add.
pub fn apid_29213_policy(provider: &str) -> Result<Value, serde_json::Error> {
    let mut policy: Value = serde_json::from_str(APID_29213_POLICY)?;
    policy["provider"] = json!(provider);
    policy["package"] = json!(format!("managed_auto_oncall_{provider}"));
    Ok(policy)
}

/// `policy` issued at `at` and expiring `validity` later: its `issued_at` and
/// `expires_at` set (RFC 3339, UTC), every other field kept. A `policy` that is not a
/// JSON object is returned unchanged.
pub fn issued(mut policy: Value, at: Timestamp, validity: SignedDuration) -> Value {
    if let Some(fields) = policy.as_object_mut() {
        fields.insert("issued_at".to_owned(), json!(at.to_string()));
        fields.insert("expires_at".to_owned(), json!((at + validity).to_string()));
    }
    policy
}

/// `policy` issued now and expiring in an hour ([`VALIDITY`]), the way Auto-oncall
/// issues the policy of a live turn: see [`issued`].
pub fn issued_now(policy: Value) -> Value {
    issued(policy, Timestamp::now(), VALIDITY)
}

/// The APID-29213 policy ([`APID_29213_POLICY`]) for `provider` and `package`, issued
/// now for an hour ([`issued_now`]), with the fields of `extra` (a JSON object) put
/// over it.
///
/// A field of `extra` replaces the fixture's field whole: a `limits` in `extra` is the
/// complete set of limits, a `cluster` the complete cluster. `extra` may replace any
/// field (`policy_id`, `account`, `window`, `cluster`, `limits`, even `issued_at` and
/// `expires_at` for an expired policy) and add the provider's own (`manus_target`,
/// `wetech_query_ids`, `wetech_datasource`); an `extra` that is not an object adds
/// nothing.
///
/// ```
/// use evidence_test_support::policy::apid_29213_now;
/// use serde_json::json;
///
/// let policy = apid_29213_now(
///     "manus",
///     "managed_auto_oncall_manus",
///     json!({"policy_id": "pol-doc", "manus_target": "vida"}),
/// );
/// assert_eq!(policy["ticket"], "APID-29213");
/// assert_eq!(policy["policy_id"], "pol-doc");
/// assert_eq!(policy["cluster"]["id"], "SaaS01");
/// ```
pub fn apid_29213_now(provider: &str, package: &str, extra: Value) -> Value {
    #[expect(
        clippy::expect_used,
        reason = "the fixture is committed JSON, parsed by this module's tests"
    )]
    let fixture: Value =
        serde_json::from_str(APID_29213_POLICY).expect("the APID-29213 fixture is JSON");
    let mut policy = issued_now(fixture);
    if let Some(fields) = policy.as_object_mut() {
        fields.insert("provider".to_owned(), json!(provider));
        fields.insert("package".to_owned(), json!(package));
        if let Some(extra) = extra.as_object() {
            fields.extend(extra.clone());
        }
    }
    policy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_now_is_valid_for_an_hour_from_now() {
        let before = Timestamp::now();
        let p = issued_now(json!({"policy_id": "p"}));
        let at: Timestamp = p["issued_at"].as_str().unwrap().parse().unwrap();
        let until: Timestamp = p["expires_at"].as_str().unwrap().parse().unwrap();
        assert!(before <= at && at <= Timestamp::now());
        assert_eq!(until.duration_since(at), SignedDuration::from_hours(1));
        assert_eq!(p["policy_id"], "p");
    }

    #[test]
    fn extra_fields_replace_the_fixture_s_whole() {
        let p = apid_29213_now(
            "wetech",
            "managed_auto_oncall_wetech",
            json!({"policy_id": "pol-x", "limits": {"max_batch": 1}, "wetech_datasource": "d"}),
        );
        let fixture: Value = serde_json::from_str(APID_29213_POLICY).unwrap();
        assert_eq!(p["provider"], "wetech");
        assert_eq!(p["package"], "managed_auto_oncall_wetech");
        assert_eq!(p["policy_id"], "pol-x");
        assert_eq!(p["limits"], json!({"max_batch": 1}));
        assert_eq!(p["wetech_datasource"], "d");
        assert_eq!(p["window"], fixture["window"]);
        assert_eq!(p["cluster"], fixture["cluster"]);
        assert_ne!(p["issued_at"], fixture["issued_at"]);
        let expired = json!({"issued_at": "2026-01-01T00:00:00Z",
                             "expires_at": "2026-01-01T01:00:00Z"});
        let p = apid_29213_now("clinic", "managed_auto_oncall_clinic", expired);
        assert_eq!(p["expires_at"], "2026-01-01T01:00:00Z");
    }
}
