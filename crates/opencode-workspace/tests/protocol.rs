//! The static protocol text and the prompts that carry it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;

use opencode_workspace::{
    ChildOutputReader, TaskSupport,
    layout::EVIDENCE_AGENT_OUTPUT,
    outputs::{ChildFailure, DiagnosisContext},
    protocol::{
        FALLBACK_PROTOCOL_TITLE, INSUFFICIENT_EVIDENCE_REPLY, PROTOCOL_TITLE, fallback_protocol,
        static_protocol,
    },
};

fn assert_rules(text: &str) {
    let rules = [
        // three-agent orchestration rules
        "# Investibook Diagnosis Orchestration Protocol",
        "exactly three agents",
        "`diagnosis-orchestrator` (primary)",
        "`evidence-agent` (subagent)",
        "`diagnosis-analyst` (subagent)",
        "does not collect evidence itself and does not write the root cause itself",
        "subagents never start agents of their own",
        // Task delegation requirements
        "Delegate only through the Task tool",
        "non-empty list of required skills",
        "empty required skill list is not allowed",
        "pass the list as `load_skills`",
        "`Required skills to load:`",
        "`evidence-agent` gets `core` + `data-access` skills",
        "`diagnosis-analyst` gets `core` + `diagnosis` skills",
        // file output requirements
        "writes `evidences/agent-runs/evidence-agent.json`",
        "`evidences/agent-runs/diagnosis-analyst.json`",
        "`evidences/workspace_evidence_report.json`",
        ".opencode/investibook/schemas/evidence-agent-output.schema.json",
        ".opencode/investibook/schemas/diagnosis-analyst-output.schema.json",
        "never from a child's chat reply",
        "Do not parse JSON out of chat text",
        "is a failed child task. Retry that child at most once",
        // the one extra evidence round limit
        "at most one additional evidence pass and then at most one additional analyst pass",
        "There is no third pass",
        "\"insufficient evidence + concrete gaps + recommended next steps\"",
        "do not force a conclusion",
        // the TiDB high CPU Go GC metrics rule
        "TiDB high CPU diagnosis must check Go GC metrics",
        "`tidb_go_gc_metrics`",
    ];
    for rule in rules {
        assert!(text.contains(rule), "protocol lacks {rule:?}");
    }
}

#[test]
fn static_protocol_contains_every_rule() {
    let text = static_protocol();
    assert!(text.starts_with(&format!("# {PROTOCOL_TITLE}")));
    assert_rules(&text);
    // The workflow has its nine fixed steps, in order.
    let mut last = 0;
    for n in 1..=9 {
        let at = text
            .find(&format!("\n{n}. "))
            .unwrap_or_else(|| panic!("step {n}"));
        assert!(at > last);
        last = at;
    }
}

#[test]
fn the_orchestrator_prompt_carries_the_protocol_on_the_first_turn() {
    let dir = tempfile::tempdir().unwrap();
    common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap();
    let prompt = fs::read_to_string(
        dir.path()
            .join(".opencode/investibook/agents/diagnosis-orchestrator.md"),
    )
    .unwrap();
    assert!(prompt.contains(&static_protocol()));
    assert_rules(&prompt);
    assert!(prompt.contains(
        "Required skills to load:\n- time-conversion\n- tidb-knowledge-base\n- clinic-cli"
    ));

    let evidence = fs::read_to_string(
        dir.path()
            .join(".opencode/investibook/agents/evidence-agent.md"),
    )
    .unwrap();
    assert!(
        evidence.contains("never load\na `diagnosis` skill")
            || evidence.contains("never load a `diagnosis` skill")
    );
    assert!(evidence.contains(EVIDENCE_AGENT_OUTPUT));
    assert!(evidence.contains("Premium `parent_id`"));
    let analyst = fs::read_to_string(
        dir.path()
            .join(".opencode/investibook/agents/diagnosis-analyst.md"),
    )
    .unwrap();
    assert!(analyst.contains("never load a `data-access` skill"));
    assert!(analyst.contains("TiDB high CPU diagnosis must check Go GC metrics"));
    assert!(analyst.contains("Do not call Clinic, O11Y, Jira or DevOps"));
}

#[test]
fn the_prompt_examples_satisfy_the_schemas() {
    let dir = tempfile::tempdir().unwrap();
    common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap();
    let reader = ChildOutputReader::new().unwrap();
    for (prompt, is_evidence) in [("evidence-agent", true), ("diagnosis-analyst", false)] {
        let text = fs::read_to_string(
            dir.path()
                .join(format!(".opencode/investibook/agents/{prompt}.md")),
        )
        .unwrap();
        let start = text.find("```json\n").unwrap() + 8;
        let end = start + text[start..].find("\n```").unwrap();
        let example = &text[start..end];
        if is_evidence {
            reader.parse_evidence(example.as_bytes()).unwrap();
        } else {
            // Schema-valid; the empty root cause of the template is refused by the rules.
            let err = reader
                .parse_analysis(example.as_bytes(), &DiagnosisContext::default())
                .unwrap_err();
            assert_eq!(err.child_failure(), Some(ChildFailure::Rejected), "{err}");
        }
    }
}

#[test]
fn fallback_protocol_says_multi_agent_is_not_in_effect() {
    let catalog = common::catalog();
    let text = fallback_protocol(&catalog);
    assert!(text.starts_with(&format!("# {FALLBACK_PROTOCOL_TITLE}")));
    assert!(text.contains("Multi-agent diagnosis is not in effect"));
    assert!(text.contains("never claim"));
    assert!(text.contains("TiDB high CPU diagnosis must check Go GC metrics"));
    assert!(text.contains("at most one additional evidence phase"));
    assert!(text.contains(INSUFFICIENT_EVIDENCE_REPLY));
    assert!(text.contains("no Task tool"));
    for delegation in [
        "Delegate",
        "load_skills",
        "Required skills to load",
        "Task call",
    ] {
        assert!(
            !text.contains(delegation),
            "the fallback must not tell the agent to delegate"
        );
    }
}
