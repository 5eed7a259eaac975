//! The rules of the trusted policy's JSON Schema that a field-by-field derive cannot
//! state: which members each provider and each cluster tier requires or forbids. They
//! restate [`TrustedPolicy::validate`](crate::TrustedPolicy::validate) for an issuer's
//! validator; `validate` stays the rule the tools apply.

use schemars::Schema;
use serde_json::{Value, json};

/// Adds to the policy's schema, as `allOf` of `if`/`then`: a Manus policy has a
/// `manus_target`, a Wetech policy `wetech_query_ids` (at least one, unique) and a
/// `wetech_datasource`, and no other provider has them; and the cluster of each tier
/// carries exactly its tier's identifiers.
pub(crate) fn provider_rules(schema: &mut Schema) {
    let provider =
        |p: &str| json!({"properties": {"provider": {"const": p}}, "required": ["provider"]});
    let forbid = |names: &[&str]| -> Value {
        json!({"not": {"anyOf": names.iter().map(|n| json!({"required": [n]})).collect::<Vec<_>>()}})
    };
    let tier = |tiers: &[&str], has: &[&str], lacks: &[&str]| -> Value {
        json!({
            "if": {"properties": {"cluster": {"properties": {"tier": {"enum": tiers}}}}},
            "then": {"properties": {"cluster": {"allOf": [{"required": has}, forbid(lacks)]}}}
        })
    };
    let rules = json!([
        {"if": provider("manus"), "then": {"required": ["manus_target"]}, "else": forbid(&["manus_target"])},
        {
            "if": provider("wetech"),
            "then": {
                "required": ["wetech_query_ids", "wetech_datasource"],
                "properties": {"wetech_query_ids": {"minItems": 1, "uniqueItems": true}}
            },
            "else": forbid(&["wetech_query_ids", "wetech_datasource"])
        },
        tier(&["dedicated"], &[], &["parent_id", "keyspace_id"]),
        tier(&["premium"], &["parent_id"], &["keyspace_id"]),
        tier(&["starter", "essential"], &["keyspace_id"], &["parent_id"]),
    ]);
    schema.insert("allOf".to_owned(), rules);
}
