//! The trusted policy of the APID-29213 incident, as the one JSON fixture every test
//! that needs it reads (`fixtures/apid_29213_policy.json`).

use serde_json::{Value, json};

/// The trusted policy of APID-29213 as JSON text: the Clinic package, cluster `SaaS01`
/// (dedicated), the window 2026-07-21 21:50–22:05 UTC+8 with an hour of look-back, issued
/// at 22:10 for an hour. A test changes only the fields it is about.
pub const APID_29213_POLICY: &str = include_str!("../fixtures/apid_29213_policy.json");

/// [`APID_29213_POLICY`] for the package of `provider` (`clinic`, `manus` or `wetech`):
/// `provider` and `package` set. The fields only one provider takes (the Manus target,
/// the Wetech query ids and datasource) are the caller's to add.
pub fn apid_29213_policy(provider: &str) -> Result<Value, serde_json::Error> {
    let mut policy: Value = serde_json::from_str(APID_29213_POLICY)?;
    policy["provider"] = json!(provider);
    policy["package"] = json!(format!("managed_auto_oncall_{provider}"));
    Ok(policy)
}
