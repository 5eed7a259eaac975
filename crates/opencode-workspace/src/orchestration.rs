//! The fixed workflow of the protocol as a state machine that checks an orchestrator's
//! transcript step by step: which step may come next, and why a step is refused.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::catalog::SkillCatalog;
use crate::names::{AgentRole, SkillName};
use crate::outputs::{
    ChildFailure, ChildOutputError, DiagnosisAnalystOutput, EvidenceAgentOutput, RunStatus,
};

/// What the orchestrator learned from reading a child's output file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum ChildOutcome {
    /// The file was missing, not JSON, schema-invalid or rejected: a failed child task.
    Failed {
        /// How it failed.
        failure: ChildFailure,
    },
    /// A valid evidence agent output.
    Evidence {
        /// Its `status`.
        status: RunStatus,
    },
    /// A valid analyst output.
    Analysis {
        /// Its `status`.
        status: RunStatus,
        /// Its `needs_more_evidence`.
        needs_more_evidence: bool,
    },
}

impl ChildOutcome {
    /// The outcome of reading the evidence agent's output.
    pub fn of_evidence(read: &Result<EvidenceAgentOutput, ChildOutputError>) -> Self {
        match read {
            Ok(output) => Self::Evidence {
                status: output.status,
            },
            Err(e) => Self::Failed {
                failure: e.child_failure().unwrap_or(ChildFailure::Unreadable),
            },
        }
    }

    /// The outcome of reading the analyst's output.
    pub fn of_analysis(read: &Result<DiagnosisAnalystOutput, ChildOutputError>) -> Self {
        match read {
            Ok(output) => Self::Analysis {
                status: output.status,
                needs_more_evidence: output.needs_more_evidence,
            },
            Err(e) => Self::Failed {
                failure: e.child_failure().unwrap_or(ChildFailure::Unreadable),
            },
        }
    }
}

/// One step of the orchestrator, as a backend test or a replay records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// A Task call to a subagent with its required skills.
    Delegate {
        /// The subagent.
        agent: AgentRole,
        /// The required skills (never empty).
        required_skills: Vec<SkillName>,
    },
    /// Reading the subagent's output file from disk.
    ReadOutput {
        /// Whose output.
        agent: AgentRole,
        /// What the read found.
        outcome: ChildOutcome,
    },
    /// Replying to the user from the analyst's conclusive output.
    Answer,
    /// Stopping with "insufficient evidence + concrete gaps + recommended next steps".
    InsufficientEvidence {
        /// The concrete evidence gaps.
        gaps: Vec<String>,
        /// The recommended next steps.
        next_steps: Vec<String>,
    },
}

/// The kinds of step, for [`Orchestration::allowed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StepKind {
    /// Task call to `evidence-agent`.
    DelegateEvidence,
    /// Task call to `diagnosis-analyst`.
    DelegateAnalyst,
    /// Read `evidence-agent.json`.
    ReadEvidence,
    /// Read `diagnosis-analyst.json`.
    ReadAnalysis,
    /// Answer the user.
    Answer,
    /// Stop with insufficient evidence.
    InsufficientEvidence,
}

impl StepKind {
    fn of(step: &Step) -> Option<Self> {
        match step {
            Step::Delegate { agent, .. } => match agent {
                AgentRole::EvidenceAgent => Some(Self::DelegateEvidence),
                AgentRole::DiagnosisAnalyst => Some(Self::DelegateAnalyst),
                AgentRole::DiagnosisOrchestrator => None,
            },
            Step::ReadOutput { agent, .. } => match agent {
                AgentRole::EvidenceAgent => Some(Self::ReadEvidence),
                AgentRole::DiagnosisAnalyst => Some(Self::ReadAnalysis),
                AgentRole::DiagnosisOrchestrator => None,
            },
            Step::Answer => Some(Self::Answer),
            Step::InsufficientEvidence { .. } => Some(Self::InsufficientEvidence),
        }
    }

    fn delegate(agent: AgentRole) -> Self {
        if agent == AgentRole::EvidenceAgent {
            Self::DelegateEvidence
        } else {
            Self::DelegateAnalyst
        }
    }
}

impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::DelegateEvidence => "delegate to evidence-agent",
            Self::DelegateAnalyst => "delegate to diagnosis-analyst",
            Self::ReadEvidence => "read evidence-agent.json",
            Self::ReadAnalysis => "read diagnosis-analyst.json",
            Self::Answer => "answer",
            Self::InsufficientEvidence => "stop with insufficient evidence",
        })
    }
}

/// Where the fixed workflow stands. Passes and attempts count from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Nothing delegated yet: the orchestrator is scoping the request.
    Scoping,
    /// A subagent was started; its output file must be read next.
    Delegated {
        /// The subagent.
        agent: AgentRole,
        /// Pass 1, or 2 for the one extra pass.
        pass: u8,
        /// Attempt 1, or 2 for the one retry.
        attempt: u8,
    },
    /// The subagent's output was missing or invalid.
    ChildFailed {
        /// The subagent.
        agent: AgentRole,
        /// Its pass.
        pass: u8,
        /// The failed attempt.
        attempt: u8,
    },
    /// A valid evidence output was read.
    EvidenceReady {
        /// Its pass.
        pass: u8,
    },
    /// A valid analyst output was read.
    AnalysisReady {
        /// Its pass.
        pass: u8,
        /// `needs_more_evidence` was false and `status` not `failed`: it may be answered.
        conclusive: bool,
        /// The analyst asked for more evidence.
        needs_more_evidence: bool,
    },
    /// The user got the analyst's answer.
    Answered,
    /// The orchestrator stopped with insufficient evidence.
    StoppedInsufficient,
}

/// Why the protocol refuses a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The workflow already ended.
    Finished,
    /// The orchestrator cannot delegate to itself or read its own output.
    NotASubagent,
    /// The step is not one the protocol allows now.
    OutOfOrder {
        /// The refused step.
        step: StepKind,
        /// The steps allowed now.
        allowed: Vec<StepKind>,
    },
    /// A Task call without required skills.
    EmptyRequiredSkills(AgentRole),
    /// A required skill outside the agent's load groups.
    SkillNotAllowed {
        /// The agent.
        agent: AgentRole,
        /// The skill.
        skill: SkillName,
    },
    /// The child already failed twice in this pass.
    RetryLimit(AgentRole),
    /// The one extra evidence and analyst pass is used up.
    PassLimit(AgentRole),
    /// Answering without a conclusive analyst output.
    NoConclusion,
    /// An outcome of the wrong kind for the agent (an analysis read from the evidence file).
    OutcomeMismatch(AgentRole),
    /// Stopping without concrete gaps or without next steps.
    EmptyInsufficientReport,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Finished => write!(f, "the workflow has already ended"),
            Self::NotASubagent => write!(
                f,
                "only evidence-agent and diagnosis-analyst take part as subagents"
            ),
            Self::OutOfOrder { step, allowed } => {
                let allowed = allowed
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                write!(f, "cannot {step} now; allowed: {allowed}")
            }
            Self::EmptyRequiredSkills(a) => {
                write!(f, "task call to {a} has an empty required skill list")
            }
            Self::SkillNotAllowed { agent, skill } => {
                write!(f, "{agent} may not load skill {skill}")
            }
            Self::RetryLimit(a) => write!(
                f,
                "{a} already failed twice in this pass: retry at most once"
            ),
            Self::PassLimit(a) => write!(f, "{a} already ran its one extra pass"),
            Self::NoConclusion => write!(f, "no conclusive analyst output to answer from"),
            Self::OutcomeMismatch(a) => write!(f, "the outcome read does not belong to {a}"),
            Self::EmptyInsufficientReport => {
                write!(
                    f,
                    "insufficient evidence needs concrete gaps and recommended next steps"
                )
            }
        }
    }
}

/// A step the protocol does not allow; the workflow is left as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// An orchestration step is not allowed by the protocol at this point.
    #[error("step {index} refused: {refusal}")]
    Refused {
        /// Zero-based position of the step in the transcript.
        index: usize,
        /// Why it was refused.
        refusal: Refusal,
    },
}

impl StepError {
    /// Why the step was refused.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Self::Refused { refusal, .. } => Some(refusal),
        }
    }
}

/// How a finished workflow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conclusion {
    /// Answered from a conclusive analyst output.
    Answered,
    /// Stopped with insufficient evidence.
    InsufficientEvidence,
}

/// The fixed workflow of the protocol as a state machine: evidence -> analyst -> at most one
/// more evidence pass -> one more analyst pass -> answer or insufficient evidence; each
/// child retried at most once after a failed read; every Task call with a non-empty required
/// skill list inside the agent's load groups. A refused step leaves the state unchanged.
#[derive(Debug, Clone)]
pub struct Orchestration {
    evidence_skills: BTreeSet<SkillName>,
    analyst_skills: BTreeSet<SkillName>,
    phase: Phase,
    history: Vec<Step>,
}

/// The most passes of each subagent: the first and one extra.
pub const MAX_PASSES: u8 = 2;
/// The most attempts per pass: the first and one retry.
pub const MAX_ATTEMPTS: u8 = 2;

impl Orchestration {
    /// A workflow whose skill rules come from `catalog`.
    pub fn new(catalog: &SkillCatalog) -> Self {
        Self {
            evidence_skills: catalog
                .default_skills(AgentRole::EvidenceAgent)
                .into_iter()
                .collect(),
            analyst_skills: catalog
                .default_skills(AgentRole::DiagnosisAnalyst)
                .into_iter()
                .collect(),
            phase: Phase::Scoping,
            history: Vec::new(),
        }
    }

    /// Replays a whole transcript; the error names the first refused step.
    pub fn replay(
        catalog: &SkillCatalog,
        steps: impl IntoIterator<Item = Step>,
    ) -> Result<Self, StepError> {
        let mut run = Self::new(catalog);
        for step in steps {
            run.apply(step)?;
        }
        Ok(run)
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The accepted steps, in order.
    pub fn history(&self) -> &[Step] {
        &self.history
    }

    /// How the workflow ended, once it has.
    pub fn conclusion(&self) -> Option<Conclusion> {
        match self.phase {
            Phase::Answered => Some(Conclusion::Answered),
            Phase::StoppedInsufficient => Some(Conclusion::InsufficientEvidence),
            _ => None,
        }
    }

    /// The kinds of step the protocol allows now.
    pub fn allowed(&self) -> Vec<StepKind> {
        use StepKind::*;
        match self.phase {
            Phase::Scoping => vec![DelegateEvidence],
            Phase::Delegated { agent, .. } => {
                if agent == AgentRole::EvidenceAgent {
                    vec![ReadEvidence]
                } else {
                    vec![ReadAnalysis]
                }
            }
            Phase::ChildFailed { agent, attempt, .. } => {
                if attempt < MAX_ATTEMPTS {
                    vec![StepKind::delegate(agent), InsufficientEvidence]
                } else {
                    vec![InsufficientEvidence]
                }
            }
            Phase::EvidenceReady { .. } => vec![DelegateAnalyst, InsufficientEvidence],
            Phase::AnalysisReady {
                pass,
                conclusive,
                needs_more_evidence,
            } => {
                if conclusive {
                    vec![Answer, InsufficientEvidence]
                } else if needs_more_evidence && pass < MAX_PASSES {
                    vec![DelegateEvidence, InsufficientEvidence]
                } else {
                    vec![InsufficientEvidence]
                }
            }
            Phase::Answered | Phase::StoppedInsufficient => Vec::new(),
        }
    }

    fn refuse(&self, refusal: Refusal) -> StepError {
        StepError::Refused {
            index: self.history.len(),
            refusal,
        }
    }

    fn out_of_order(&self, kind: StepKind) -> Refusal {
        match (self.phase, kind) {
            (Phase::Answered | Phase::StoppedInsufficient, _) => Refusal::Finished,
            (Phase::ChildFailed { agent, .. }, k) if k == StepKind::delegate(agent) => {
                Refusal::RetryLimit(agent)
            }
            (Phase::AnalysisReady { pass, .. }, StepKind::DelegateEvidence)
                if pass >= MAX_PASSES =>
            {
                Refusal::PassLimit(AgentRole::EvidenceAgent)
            }
            (_, StepKind::Answer) => Refusal::NoConclusion,
            _ => Refusal::OutOfOrder {
                step: kind,
                allowed: self.allowed(),
            },
        }
    }

    /// Applies `step` if the protocol allows it now; otherwise refuses it and changes
    /// nothing.
    pub fn apply(&mut self, step: Step) -> Result<Phase, StepError> {
        let Some(kind) = StepKind::of(&step) else {
            return Err(self.refuse(Refusal::NotASubagent));
        };
        if !self.allowed().contains(&kind) {
            return Err(self.refuse(self.out_of_order(kind)));
        }
        let next = match &step {
            Step::Delegate {
                agent,
                required_skills,
            } => {
                if required_skills.is_empty() {
                    return Err(self.refuse(Refusal::EmptyRequiredSkills(*agent)));
                }
                let allowed = if *agent == AgentRole::EvidenceAgent {
                    &self.evidence_skills
                } else {
                    &self.analyst_skills
                };
                if let Some(skill) = required_skills.iter().find(|s| !allowed.contains(*s)) {
                    return Err(self.refuse(Refusal::SkillNotAllowed {
                        agent: *agent,
                        skill: skill.clone(),
                    }));
                }
                let (pass, attempt) = match self.phase {
                    Phase::ChildFailed { pass, attempt, .. } => (pass, attempt + 1),
                    Phase::EvidenceReady { pass } => (pass, 1),
                    Phase::AnalysisReady { pass, .. } => (pass + 1, 1),
                    _ => (1, 1),
                };
                Phase::Delegated {
                    agent: *agent,
                    pass,
                    attempt,
                }
            }
            Step::ReadOutput { agent, outcome } => {
                let Phase::Delegated { pass, attempt, .. } = self.phase else {
                    return Err(self.refuse(self.out_of_order(kind)));
                };
                match (agent, outcome) {
                    (_, ChildOutcome::Failed { .. }) => Phase::ChildFailed {
                        agent: *agent,
                        pass,
                        attempt,
                    },
                    (AgentRole::EvidenceAgent, ChildOutcome::Evidence { .. }) => {
                        Phase::EvidenceReady { pass }
                    }
                    (
                        AgentRole::DiagnosisAnalyst,
                        ChildOutcome::Analysis {
                            status,
                            needs_more_evidence,
                        },
                    ) => Phase::AnalysisReady {
                        pass,
                        conclusive: !needs_more_evidence && *status != RunStatus::Failed,
                        needs_more_evidence: *needs_more_evidence,
                    },
                    _ => return Err(self.refuse(Refusal::OutcomeMismatch(*agent))),
                }
            }
            Step::Answer => Phase::Answered,
            Step::InsufficientEvidence { gaps, next_steps } => {
                let blank = |items: &Vec<String>| items.iter().all(|i| i.trim().is_empty());
                if blank(gaps) || blank(next_steps) {
                    return Err(self.refuse(Refusal::EmptyInsufficientReport));
                }
                Phase::StoppedInsufficient
            }
        };
        self.phase = next;
        self.history.push(step);
        Ok(next)
    }
}
