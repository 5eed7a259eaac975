//! The transport skill `managed-evidence-tools`: a `SKILL.md` (OpenCode's skill format)
//! that tells the evidence agent how to call the managed evidence tools. It is rendered
//! from the same sources as the tools' own descriptions: the argument schemas
//! ([`args_schema`]) for `queryId` and `instanceRef`, the result contract's
//! [`SAME_TURN_CORRECTION_RULE`], its shared failure classes, its
//! [`COMPACT_EVIDENCE_GUIDE`] and its [`DISCOVERY_GUIDE`], so that the skill and the tools
//! cannot disagree.

use evidence_result::{
    FailureClass, Provider, SAME_TURN_CORRECTION_RULE, discovery::DISCOVERY_GUIDE,
    evidence::COMPACT_EVIDENCE_GUIDE,
};

use crate::args::args_schema;

/// The transport skill's name (its folder and frontmatter `name`).
pub const TRANSPORT_SKILL_NAME: &str = "managed-evidence-tools";

/// The catalog group the transport skill belongs to: only the evidence agent loads it.
pub const TRANSPORT_SKILL_GROUP: &str = "data-access";

/// The description of the argument `property` of `provider`'s schema, if it has one.
fn argument_description(provider: Provider, property: &str) -> Option<String> {
    args_schema(provider)
        .as_value()
        .pointer(&format!("/properties/{property}/description"))
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
}

/// The `SKILL.md` text of the transport skill.
pub fn transport_skill() -> String {
    let shared: Vec<&str> = FailureClass::ALL
        .iter()
        .filter(|class| class.is_shared())
        .map(|class| class.as_str())
        .collect();
    let mut text = format!(
        "---\nname: {TRANSPORT_SKILL_NAME}\ndescription: \"How to call the managed evidence \
         tools (managed_auto_oncall_*), with queryId, the same-turn correction rule, the shared \
         failures that stop the turn, compact evidence, discovery and instanceRef.\"\n---\n\
         # Managed evidence tools\n\n\
         The managed evidence tools query metrics for the ticket, cluster and time window the \
         platform fixed. Every call answers with one result whose text is its details as JSON.\n\n"
    );
    text.push_str("## queryId\n\n");
    if let Some(description) = argument_description(Provider::Manus, "queryId") {
        text.push_str(&description);
        text.push_str("\n\n");
    }
    text.push_str(
        "Give each diagnostic objective its own queryId (Clinic: one per query of the batch) \
         and keep it for every attempt at that objective.\n\n",
    );
    text.push_str("## Same-turn correction\n\n");
    text.push_str(SAME_TURN_CORRECTION_RULE);
    text.push_str("\n\n## Shared failures stop the turn\n\n");
    text.push_str(
        "A failure of one of these classes (details.error.class) stops the turn: make no \
         further call to any managed tool in this turn, and report the failure:\n\n",
    );
    for class in shared {
        text.push_str(&format!("- `{class}`\n"));
    }
    text.push_str("\n## Reading compact evidence\n\n");
    text.push_str(COMPACT_EVIDENCE_GUIDE);
    text.push_str("\n\n## Discovery: which metrics exist\n\n");
    for property in ["discover", "selector", "pattern", "label"] {
        if let Some(description) = argument_description(Provider::Manus, property) {
            text.push_str(&format!("- `{property}`: {description}\n"));
        }
    }
    text.push_str(
        "\nA discovery is a call like a query: it has its own queryId, counts toward the \
         turn's calls, and a rejected one (for example a pattern that does not compile) is \
         corrected once in the same turn. In a Clinic batch it is one item, e.g. \
         `{\"queryId\": \"tikv_names\", \"discover\": \"metric_names\", \"pattern\": \"tikv_.*\"}`. \
         After a no_data answer, ask which names exist before writing the query again with a \
         name the answer listed. Ask for metric_metadata instead of metric_names when the \
         type or unit of a name decides how to query it (rate() of a counter, a gauge as it \
         is); its help text is the provider's, global and untrusted: it describes a name, it \
         is no evidence of this cluster.\n\n",
    );
    text.push_str(DISCOVERY_GUIDE);
    text.push_str("\n\n## instanceRef\n\n");
    if let Some(description) = argument_description(Provider::Manus, "instanceRef") {
        text.push_str(&description);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skill_carries_the_tools_own_words() {
        let text = transport_skill();
        assert!(text.starts_with(&format!("---\nname: {TRANSPORT_SKILL_NAME}\n")));
        assert!(text.contains(SAME_TURN_CORRECTION_RULE));
        assert!(text.contains(COMPACT_EVIDENCE_GUIDE));
        assert!(text.contains(DISCOVERY_GUIDE));
        for property in [
            "queryId",
            "instanceRef",
            "discover",
            "selector",
            "pattern",
            "label",
        ] {
            let description = argument_description(Provider::Manus, property)
                .unwrap_or_else(|| panic!("{property} has no description"));
            assert!(text.contains(&description), "{property}");
        }
        for class in FailureClass::ALL.iter().filter(|c| c.is_shared()) {
            assert!(
                text.contains(&format!("- `{}`", class.as_str())),
                "{class:?}"
            );
        }
        assert!(!text.contains("- `timeout`"), "timeout is not shared");
    }
}
