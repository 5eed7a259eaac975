//! The fixed workflow as a state machine: allowed and refused steps, retries, passes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::catalog;
use opencode_workspace::{
    AgentRole, ChildOutputReader, Orchestration,
    names::SkillName,
    orchestration::{
        ChildOutcome, Conclusion, MAX_ATTEMPTS, MAX_PASSES, Phase, Refusal, Step, StepError,
        StepKind,
    },
    outputs::{ChildFailure, DiagnosisContext, RunStatus},
};
use proptest::prelude::*;

fn skills(role: AgentRole) -> Vec<SkillName> {
    catalog().default_skills(role)
}

fn delegate(agent: AgentRole) -> Step {
    Step::Delegate {
        agent,
        required_skills: skills(agent),
    }
}

fn evidence_ok() -> Step {
    Step::ReadOutput {
        agent: AgentRole::EvidenceAgent,
        outcome: ChildOutcome::Evidence {
            status: RunStatus::Ok,
        },
    }
}

fn analysis(needs_more_evidence: bool) -> Step {
    Step::ReadOutput {
        agent: AgentRole::DiagnosisAnalyst,
        outcome: ChildOutcome::Analysis {
            status: if needs_more_evidence {
                RunStatus::Partial
            } else {
                RunStatus::Ok
            },
            needs_more_evidence,
        },
    }
}

fn failed(agent: AgentRole) -> Step {
    Step::ReadOutput {
        agent,
        outcome: ChildOutcome::Failed {
            failure: ChildFailure::Missing,
        },
    }
}

fn insufficient() -> Step {
    Step::InsufficientEvidence {
        gaps: vec!["TiKV store CPU for 10:00-11:00".to_owned()],
        next_steps: vec!["Grant Clinic access to the cluster".to_owned()],
    }
}

fn refusal(run: &mut Orchestration, step: Step) -> Refusal {
    let before = run.phase();
    let err = run.apply(step).unwrap_err();
    assert_eq!(run.phase(), before, "a refused step changed the state");
    err.refusal().cloned().unwrap()
}

const E: AgentRole = AgentRole::EvidenceAgent;
const A: AgentRole = AgentRole::DiagnosisAnalyst;

#[test]
fn the_plain_workflow_answers() {
    let run = Orchestration::replay(
        &catalog(),
        [
            delegate(E),
            evidence_ok(),
            delegate(A),
            analysis(false),
            Step::Answer,
        ],
    )
    .unwrap();
    assert_eq!(run.conclusion(), Some(Conclusion::Answered));
    assert_eq!(run.history().len(), 5);
}

#[test]
fn one_extra_evidence_pass_and_one_extra_analyst_pass() {
    let mut run = Orchestration::replay(
        &catalog(),
        [delegate(E), evidence_ok(), delegate(A), analysis(true)],
    )
    .unwrap();
    assert_eq!(
        run.allowed(),
        [StepKind::DelegateEvidence, StepKind::InsufficientEvidence]
    );
    assert_eq!(refusal(&mut run, Step::Answer), Refusal::NoConclusion);
    run.apply(delegate(E)).unwrap();
    assert_eq!(
        run.phase(),
        Phase::Delegated {
            agent: E,
            pass: 2,
            attempt: 1
        }
    );
    run.apply(evidence_ok()).unwrap();
    run.apply(delegate(A)).unwrap();
    run.apply(analysis(true)).unwrap();
    // Still insufficient after the extra passes: no third pass, no forced conclusion.
    assert_eq!(refusal(&mut run, delegate(E)), Refusal::PassLimit(E));
    assert_eq!(refusal(&mut run, Step::Answer), Refusal::NoConclusion);
    assert_eq!(run.allowed(), [StepKind::InsufficientEvidence]);
    assert_eq!(
        refusal(
            &mut run,
            Step::InsufficientEvidence {
                gaps: vec![],
                next_steps: vec!["x".into()]
            }
        ),
        Refusal::EmptyInsufficientReport
    );
    run.apply(insufficient()).unwrap();
    assert_eq!(run.conclusion(), Some(Conclusion::InsufficientEvidence));
    assert_eq!(refusal(&mut run, delegate(E)), Refusal::Finished);
}

#[test]
fn a_failed_child_is_retried_at_most_once() {
    let mut run = Orchestration::replay(&catalog(), [delegate(E), failed(E)]).unwrap();
    assert_eq!(
        run.phase(),
        Phase::ChildFailed {
            agent: E,
            pass: 1,
            attempt: 1
        }
    );
    assert!(matches!(
        refusal(&mut run, delegate(A)),
        Refusal::OutOfOrder { .. }
    ));
    run.apply(delegate(E)).unwrap();
    run.apply(failed(E)).unwrap();
    assert_eq!(refusal(&mut run, delegate(E)), Refusal::RetryLimit(E));
    run.apply(insufficient()).unwrap();

    // The analyst too, and a retry does not use up the extra pass.
    let mut run = Orchestration::replay(
        &catalog(),
        [
            delegate(E),
            evidence_ok(),
            delegate(A),
            failed(A),
            delegate(A),
            analysis(true),
        ],
    )
    .unwrap();
    run.apply(delegate(E)).unwrap();
    assert_eq!(
        run.phase(),
        Phase::Delegated {
            agent: E,
            pass: 2,
            attempt: 1
        }
    );
}

#[test]
fn out_of_order_steps_are_refused() {
    let mut run = Orchestration::new(&catalog());
    assert!(matches!(
        refusal(&mut run, delegate(A)),
        Refusal::OutOfOrder { .. }
    ));
    assert_eq!(refusal(&mut run, Step::Answer), Refusal::NoConclusion);
    assert!(matches!(
        refusal(&mut run, evidence_ok()),
        Refusal::OutOfOrder { .. }
    ));
    assert_eq!(
        refusal(&mut run, delegate(AgentRole::DiagnosisOrchestrator)),
        Refusal::NotASubagent
    );
    run.apply(delegate(E)).unwrap();
    // Reading the analyst's file, or an analysis from the evidence file, is refused.
    assert!(matches!(
        refusal(&mut run, analysis(false)),
        Refusal::OutOfOrder { .. }
    ));
    let wrong = Step::ReadOutput {
        agent: E,
        outcome: ChildOutcome::Analysis {
            status: RunStatus::Ok,
            needs_more_evidence: false,
        },
    };
    assert_eq!(refusal(&mut run, wrong), Refusal::OutcomeMismatch(E));
    assert!(matches!(
        refusal(&mut run, delegate(E)),
        Refusal::OutOfOrder { .. }
    ));
}

#[test]
fn a_failed_analysis_cannot_be_answered() {
    let mut run =
        Orchestration::replay(&catalog(), [delegate(E), evidence_ok(), delegate(A)]).unwrap();
    run.apply(Step::ReadOutput {
        agent: A,
        outcome: ChildOutcome::Analysis {
            status: RunStatus::Failed,
            needs_more_evidence: false,
        },
    })
    .unwrap();
    assert_eq!(refusal(&mut run, Step::Answer), Refusal::NoConclusion);
    assert_eq!(run.allowed(), [StepKind::InsufficientEvidence]);
}

#[test]
fn required_skills_must_be_non_empty_and_in_the_load_groups() {
    let mut run = Orchestration::new(&catalog());
    let empty = Step::Delegate {
        agent: E,
        required_skills: vec![],
    };
    assert_eq!(refusal(&mut run, empty), Refusal::EmptyRequiredSkills(E));
    let diagnosis_skill = SkillName::new("tikv-memory").unwrap();
    let wrong = Step::Delegate {
        agent: E,
        required_skills: vec![diagnosis_skill.clone()],
    };
    assert_eq!(
        refusal(&mut run, wrong),
        Refusal::SkillNotAllowed {
            agent: E,
            skill: diagnosis_skill
        }
    );
    run.apply(Step::Delegate {
        agent: E,
        required_skills: vec![SkillName::new("clinic-cli").unwrap()],
    })
    .unwrap();
    run.apply(evidence_ok()).unwrap();
    let jira = SkillName::new("jira").unwrap();
    let data_for_analyst = Step::Delegate {
        agent: A,
        required_skills: vec![jira.clone()],
    };
    assert_eq!(
        refusal(&mut run, data_for_analyst),
        Refusal::SkillNotAllowed {
            agent: A,
            skill: jira
        }
    );
}

#[test]
fn a_json_transcript_replays() {
    let transcript = r#"[
      {"step": "delegate", "agent": "evidence-agent", "required_skills": ["time-conversion", "clinic-cli"]},
      {"step": "read_output", "agent": "evidence-agent", "outcome": {"result": "failed", "failure": "invalid_json"}},
      {"step": "delegate", "agent": "evidence-agent", "required_skills": ["time-conversion", "clinic-cli"]},
      {"step": "read_output", "agent": "evidence-agent", "outcome": {"result": "evidence", "status": "partial"}},
      {"step": "delegate", "agent": "diagnosis-analyst", "required_skills": ["tidb-clinic-diagnosis"]},
      {"step": "read_output", "agent": "diagnosis-analyst", "outcome": {"result": "analysis", "status": "ok", "needs_more_evidence": false}},
      {"step": "answer"}
    ]"#;
    let steps: Vec<Step> = serde_json::from_str(transcript).unwrap();
    let run = Orchestration::replay(&catalog(), steps.clone()).unwrap();
    assert_eq!(run.conclusion(), Some(Conclusion::Answered));
    assert_eq!(
        serde_json::from_str::<Vec<Step>>(&serde_json::to_string(&steps).unwrap()).unwrap(),
        steps
    );

    let bad = r#"[{"step": "delegate", "agent": "general", "required_skills": ["jira"]}]"#;
    assert!(serde_json::from_str::<Vec<Step>>(bad).is_err());
    let third_pass: Vec<Step> = vec![
        delegate(E),
        evidence_ok(),
        delegate(A),
        analysis(true),
        delegate(E),
        evidence_ok(),
        delegate(A),
        analysis(true),
        delegate(E),
    ];
    let err = Orchestration::replay(&catalog(), third_pass).unwrap_err();
    assert!(
        matches!(
            err,
            StepError::Refused {
                index: 8,
                refusal: Refusal::PassLimit(_)
            }
        ),
        "{err}"
    );
}

#[test]
fn child_outcomes_come_from_reading_files() {
    let dir = tempfile::tempdir().unwrap();
    let reader = ChildOutputReader::new().unwrap();
    let read = reader.read_evidence(dir.path());
    assert_eq!(
        ChildOutcome::of_evidence(&read),
        ChildOutcome::Failed {
            failure: ChildFailure::Missing
        }
    );
    let read = reader.read_analysis(dir.path(), &DiagnosisContext::default());
    assert_eq!(
        ChildOutcome::of_analysis(&read),
        ChildOutcome::Failed {
            failure: ChildFailure::Missing
        }
    );
}

fn arb_step() -> impl Strategy<Value = Step> {
    let agent = prop_oneof![Just(E), Just(A), Just(AgentRole::DiagnosisOrchestrator)];
    let skill_sets = prop_oneof![
        Just(vec![]),
        Just(skills(E)),
        Just(skills(A)),
        Just(vec![SkillName::new("jira").unwrap()]),
        Just(vec![SkillName::new("tikv-memory").unwrap()]),
        Just(vec![SkillName::new("time-conversion").unwrap()]),
    ];
    let outcome = prop_oneof![
        Just(ChildOutcome::Failed {
            failure: ChildFailure::SchemaInvalid
        }),
        prop_oneof![
            Just(RunStatus::Ok),
            Just(RunStatus::Partial),
            Just(RunStatus::Failed)
        ]
        .prop_map(|status| ChildOutcome::Evidence { status }),
        (
            prop_oneof![
                Just(RunStatus::Ok),
                Just(RunStatus::Partial),
                Just(RunStatus::Failed)
            ],
            any::<bool>()
        )
            .prop_map(|(status, needs_more_evidence)| ChildOutcome::Analysis {
                status,
                needs_more_evidence
            }),
    ];
    prop_oneof![
        3 => (agent.clone(), skill_sets).prop_map(|(agent, required_skills)| Step::Delegate { agent, required_skills }),
        3 => (agent, outcome).prop_map(|(agent, outcome)| Step::ReadOutput { agent, outcome }),
        1 => Just(Step::Answer),
        1 => prop_oneof![Just(insufficient()), Just(Step::InsufficientEvidence { gaps: vec![], next_steps: vec![] })],
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever steps are attempted, the accepted ones never exceed two passes per
    /// subagent or two attempts per pass, every Task call has a non-empty skill list inside
    /// the agent's groups, an answer follows only a conclusive analysis, and nothing follows
    /// the end.
    #[test]
    fn accepted_transcripts_stay_within_the_protocol(steps in prop::collection::vec(arb_step(), 0..40)) {
        let catalog = catalog();
        let mut run = Orchestration::new(&catalog);
        for step in steps {
            let before = run.phase();
            let finished = run.conclusion().is_some();
            match run.apply(step.clone()) {
                Ok(_) => prop_assert!(!finished, "accepted a step after the end"),
                Err(e) => {
                    prop_assert!(e.refusal().is_some());
                    prop_assert_eq!(run.phase(), before);
                }
            }
            if let Phase::Delegated { pass, attempt, .. } | Phase::ChildFailed { pass, attempt, .. } = run.phase() {
                prop_assert!(pass <= MAX_PASSES && attempt <= MAX_ATTEMPTS);
            }
        }
        let history = run.history();
        let mut delegations = [0usize; 2];
        for (i, step) in history.iter().enumerate() {
            match step {
                Step::Delegate { agent, required_skills } => {
                    prop_assert!(!required_skills.is_empty());
                    let allowed = catalog.default_skills(*agent);
                    prop_assert!(required_skills.iter().all(|s| allowed.contains(s)));
                    delegations[usize::from(*agent == A)] += 1;
                    // Each delegation is followed by reading that agent's file, if anything follows.
                    if let Some(next) = history.get(i + 1) {
                        let reads_same = matches!(next, Step::ReadOutput { agent: a, .. } if a == agent);
                        prop_assert!(reads_same);
                    }
                }
                Step::Answer => {
                    let conclusive = matches!(history.get(i.wrapping_sub(1)),
                        Some(Step::ReadOutput { outcome: ChildOutcome::Analysis { status, needs_more_evidence: false }, .. }) if *status != RunStatus::Failed);
                    prop_assert!(conclusive);
                    prop_assert_eq!(i + 1, history.len());
                }
                _ => {}
            }
        }
        // 2 passes x 2 attempts at most.
        prop_assert!(delegations[0] <= 4 && delegations[1] <= 4, "{delegations:?}");
    }
}
