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
    let addresses = ADDRESS_LABELS.join(", ");
    check_addresses(ast, &scope).map_err(|issue| {
        Box::new(match issue {
            AddressIssue::Matcher { label, detail } => Code::AddressLabelMatcher.failure(
                format!(
                    "{detail}; under Manus an address can only be named through an instanceRef"
                ),
                &format!(
                    "Remove the matcher on `{label}`. To query one instance, pass the instanceRef an earlier result returned for it (the platform binds it); never write an address. Match on labels without addresses ({free}) or with plain exact values, never on {addresses}."
                ),
            ),
            AddressIssue::Rewrite { function, detail } => Code::AddressLabelRewrite.failure(
                format!(
                    "{function}(): {detail}; under Manus no address may be copied, reshaped or written into a label"
                ),
                &format!(
                    "Rewrite without it: {function}() may read only labels without addresses ({free}) and write a new label, with no '.', ':', '[' or ']' in its replacement or separator. Group by `instance` to see instances as references, and pass one back as instanceRef to follow it."
                ),
            ),
        })
    })
}
