//! The address step of locking a Manus query: an expression that would test an instance
//! address or move one into another label is refused before anything is sent, with a
//! correction that points to `instanceRef` (see [`crate::addresses`] for the rule).

use evidence_result::Failure;
use promql_parser::parser::Expr;

use super::code::Code;
use super::context::Ctx;
use crate::addresses::{ADDRESS_FREE_LABELS, ADDRESS_LABELS, AddressIssue, check_addresses};

/// Refuses a matcher that could test an address (`address_label_matcher`) and a
/// rewrite that could copy, reshape or forge one (`address_label_rewrite`).
pub(super) fn check_address_labels(ctx: &Ctx<'_>, ast: &Expr) -> Result<(), Box<Failure>> {
    let scope: Vec<&str> = ctx.bindings.iter().map(|(label, _)| *label).collect();
    let free = ADDRESS_FREE_LABELS.join(", ");
    let readable = ADDRESS_FREE_LABELS
        .iter()
        .filter(|l| **l != "__name__")
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let addresses = ADDRESS_LABELS.join(", ");
    check_addresses(ast, &scope).map_err(|issue| {
        Box::new(match issue {
            AddressIssue::Matcher { label, detail } => Code::AddressLabelMatcher.failure(
                format!(
                    "{detail}; under Manus an address can only be named through an instanceRef"
                ),
                &format!(
                    "Remove the matcher on `{label}`. To query one instance, pass the instanceRef an earlier result returned for it (the platform binds it); never write an address. Match on labels without addresses ({free}), or exactly on values without '.', ':', '[' or ']' (plain numbers are fine), never on {addresses}."
                ),
            ),
            AddressIssue::Rewrite { function, detail } => {
                let rule = match function.as_str() {
                    "absent" | "absent_over_time" => format!(
                        "{function}() turns its `=` matchers into labels: give them values without '.', ':', '[' or ']'."
                    ),
                    "sort_by_label" | "sort_by_label_desc" => format!(
                        "{function}() may order only by labels without addresses ({readable}); rows come ordered by their peak anyway."
                    ),
                    "count_values" => format!(
                        "count_values() must write a new label, not {addresses} nor a label without addresses."
                    ),
                    _ => format!(
                        "{function}() may read only labels without addresses ({readable}) and write a new label, with no '.', ':', '[' or ']' in its replacement or separator."
                    ),
                };
                let why = if function.starts_with("sort_by_label") {
                    "under Manus neither an address nor the order of addresses may be read"
                } else {
                    "under Manus no address may be copied, reshaped or written into a label"
                };
                Code::AddressLabelRewrite.failure(
                    format!("{function}(): {detail}; {why}"),
                    &format!(
                        "Rewrite without it: {rule} Group by `instance` to see instances as references, and pass one back as instanceRef to follow it."
                    ),
                )
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use evidence_result::{FailureClass, PolicySource};
    use serde_json::json;

    use crate::TrustedPolicy;
    use crate::lock::fixtures::{clinic, scope, wetech};
    use crate::lock::{LockedItem, lock};
    use crate::policy::tests::seed_json;

    fn manus() -> TrustedPolicy {
        let mut v = seed_json();
        v["provider"] = json!("manus");
        v["package"] = json!("managed_auto_oncall_manus");
        v["manus_target"] = json!("vida");
        v["limits"]["max_batch"] = json!(1);
        serde_json::from_value(v).unwrap()
    }

    const TESTS_AN_ADDRESS: &str = r#"count(up{instance=~"10[.]21[.].*"})"#;
    const RESHAPES_AN_ADDRESS: &str =
        r#"label_replace(up, "x", "$1-$2", "instance", "([0-9]+)[.](.*)")"#;

    #[test]
    fn manus_refuses_with_a_correction_that_points_to_instance_ref() {
        let p = manus();
        for (expr, code) in [
            (TESTS_AN_ADDRESS, "address_label_matcher"),
            (RESHAPES_AN_ADDRESS, "address_label_rewrite"),
        ] {
            let args = json!({"queryId": "q", "expr": expr});
            let r = lock(&p, PolicySource::TrustedEnvelope, &args, &scope()).unwrap_err();
            assert_eq!(r.code().as_str(), code);
            assert_eq!(r.class(), FailureClass::PolicyViolation);
            assert!(
                r.request_digest.is_some(),
                "the digest of the request as sent"
            );
            let c = &r.failure.correction;
            assert!(c.allowed);
            assert!(c.instruction.contains("instanceRef"), "{}", c.instruction);
            assert!(
                c.instruction.contains("cannot be widened"),
                "{}",
                c.instruction
            );
            assert!(
                r.failure.detail_error.contains("instanceRef")
                    || r.failure.detail_error.contains("no address"),
                "{}",
                r.failure.detail_error
            );
            // The detail names the label and the operator, not the model's value.
            assert!(!r.failure.detail_error.contains("10[.]21"));
        }
        // An instanceRef does not unlock a matcher of the model's own.
        let args = json!({"queryId": "q", "expr": TESTS_AN_ADDRESS, "instanceRef": "cjEGazEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"});
        let r = lock(&p, PolicySource::TrustedEnvelope, &args, &scope()).unwrap_err();
        assert_eq!(r.code().as_str(), "address_label_matcher");
        // Grouping and joining by instance stay possible.
        let args =
            json!({"queryId": "q", "expr": "sum by (instance) (rate(x[1m])) / on (instance) y"});
        assert!(lock(&p, PolicySource::TrustedEnvelope, &args, &scope()).is_ok());
    }

    #[test]
    fn clinic_and_wetech_show_addresses_and_keep_every_matcher() {
        let args = json!({"queries": [{"queryId": "q", "expr": TESTS_AN_ADDRESS}, {"queryId": "r", "expr": RESHAPES_AN_ADDRESS}]});
        let locked = lock(&clinic(), PolicySource::TrustedEnvelope, &args, &scope()).unwrap();
        assert!(
            locked
                .items
                .iter()
                .all(|i| matches!(i, LockedItem::Ready(_)))
        );
        for expr in [TESTS_AN_ADDRESS, RESHAPES_AN_ADDRESS] {
            let args = json!({"queryId": "tidb_cpu", "expr": expr, "unit": "cores"});
            assert!(lock(&wetech(), PolicySource::TrustedEnvelope, &args, &scope()).is_ok());
        }
    }
}
