//! The orchestrator's part of the script: the generated protocol followed to the
//! letter. Each reply is chosen from what OpenCode gave the orchestrator: the required
//! skills come from its system prompt (the generated protocol), and the workflow so far
//! is rebuilt from its conversation (the Task calls it made, and the child output files
//! as OpenCode's `read` tool showed them) with the library's [`Orchestration`] state
//! machine, which then says what the protocol allows next. A file that a subagent
//! could not write, or that OpenCode showed otherwise, changes the workflow.

use evidence_test_support::model::{ChatRequest, Play, Reply};
use opencode_workspace::layout::{ANALYST_OUTPUT, EVIDENCE_AGENT_OUTPUT};
use opencode_workspace::names::SkillName;
use opencode_workspace::orchestration::{ChildOutcome, MAX_ATTEMPTS, MAX_PASSES, Phase, Step};
use opencode_workspace::outputs::{ChildFailure, DiagnosisAnalystOutput, DiagnosisContext};
use opencode_workspace::protocol::{INSUFFICIENT_EVIDENCE_REPLY, REQUIRED_SKILLS_HEADING};
use opencode_workspace::{AgentRole, ChildOutputReader, Orchestration, SkillCatalog};
use serde_json::{Value, json};

use super::transcript::{is_missing_file, read_contents};

/// The diagnosis the orchestrator delegates.
pub const BRIEF: &str = "Diagnose APID-29213: TiDB high CPU on cluster SaaS01 (tier dedicated), \
2026-07-21 21:50-22:05 UTC+8. evidences/agent-runs/evidence-agent.json holds the evidence summary.";

/// What the protocol's last steps need to remember besides the state machine.
pub struct Observed {
    /// The workflow so far.
    pub run: Orchestration,
    /// The last analyst output read.
    pub analysis: Option<DiagnosisAnalystOutput>,
    /// The last child failure read.
    pub failure: Option<(AgentRole, ChildFailure)>,
}

/// The orchestrator following the generated protocol.
pub struct Protocol {
    catalog: SkillCatalog,
    reader: ChildOutputReader,
    context: DiagnosisContext,
}

/// The line that names a task's pass and attempt (subagents choose their part by it).
pub fn pass_line(pass: u8, attempt: u8) -> String {
    format!("Pass {pass}, attempt {attempt}.")
}

/// The skills under the required-skills heading of `text` (a task prompt, or the code
/// block that follows `after` in the protocol).
pub fn required_skills(text: &str, after: &str) -> Vec<String> {
    let Some(start) = text.find(after) else {
        return Vec::new();
    };
    let Some(list) = text[start..].split_once(REQUIRED_SKILLS_HEADING) else {
        return Vec::new();
    };
    list.1
        .lines()
        .skip(1)
        .map_while(|line| line.strip_prefix("- "))
        .map(|s| s.trim().to_owned())
        .collect()
}

fn output_file(agent: AgentRole) -> &'static str {
    if agent == AgentRole::EvidenceAgent {
        EVIDENCE_AGENT_OUTPUT
    } else {
        ANALYST_OUTPUT
    }
}

impl Protocol {
    /// The orchestrator of a TiDB high CPU diagnosis under the built-in catalog.
    pub fn new() -> Self {
        Self {
            catalog: super::catalog(),
            reader: ChildOutputReader::new().unwrap(),
            context: DiagnosisContext::default().tidb_high_cpu(),
        }
    }

    /// What `output` (OpenCode's rendering of a `read` of `agent`'s output file) tells.
    fn outcome(
        &self,
        agent: AgentRole,
        output: &str,
    ) -> (ChildOutcome, Option<DiagnosisAnalystOutput>) {
        let failed = |failure| (ChildOutcome::Failed { failure }, None);
        if is_missing_file(output) {
            return failed(ChildFailure::Missing);
        }
        let Some(contents) = read_contents(output) else {
            return failed(ChildFailure::Unreadable);
        };
        match agent {
            AgentRole::EvidenceAgent => (
                ChildOutcome::of_evidence(&self.reader.parse_evidence(contents.as_bytes())),
                None,
            ),
            _ => {
                let read = self
                    .reader
                    .parse_analysis(contents.as_bytes(), &self.context);
                (ChildOutcome::of_analysis(&read), read.ok())
            }
        }
    }

    /// The workflow rebuilt from the orchestrator's conversation in `request`.
    pub fn observe(&self, request: &ChatRequest) -> Result<Observed, String> {
        let mut observed = Observed {
            run: Orchestration::new(&self.catalog),
            analysis: None,
            failure: None,
        };
        for outcome in request.outcomes() {
            let arguments: Value = serde_json::from_str(&outcome.call.arguments)
                .map_err(|e| format!("call {}: arguments are not JSON: {e}", outcome.call.id))?;
            let step = match outcome.call.name.as_str() {
                "task" => {
                    let agent = arguments["subagent_type"]
                        .as_str()
                        .and_then(AgentRole::from_name)
                        .ok_or_else(|| format!("task call {arguments} names no subagent"))?;
                    let prompt = arguments["prompt"].as_str().unwrap_or_default();
                    let required_skills = required_skills(prompt, "")
                        .into_iter()
                        .map(|s| SkillName::new(s).map_err(|e| e.to_string()))
                        .collect::<Result<_, _>>()?;
                    Step::Delegate {
                        agent,
                        required_skills,
                    }
                }
                "read" => {
                    let path = arguments["filePath"].as_str().unwrap_or_default();
                    let agent = [AgentRole::EvidenceAgent, AgentRole::DiagnosisAnalyst]
                        .into_iter()
                        .find(|a| path.ends_with(output_file(*a)))
                        .ok_or_else(|| format!("read of {path}: not a child output"))?;
                    let (outcome, analysis) = self.outcome(agent, &outcome.output);
                    if let ChildOutcome::Failed { failure } = &outcome {
                        observed.failure = Some((agent, *failure));
                    }
                    if analysis.is_some() {
                        observed.analysis = analysis;
                    }
                    Step::ReadOutput { agent, outcome }
                }
                other => return Err(format!("the orchestrator called {other}")),
            };
            observed.run.apply(step).map_err(|e| e.to_string())?;
        }
        Ok(observed)
    }

    /// A Task call to `agent` with the protocol's required skills, the brief, the pass
    /// line and the analyst's gaps when there are any.
    fn delegate(
        &self,
        request: &ChatRequest,
        observed: &Observed,
        agent: AgentRole,
        gaps: &[String],
    ) -> Reply {
        let skills = required_skills(
            &request.system_prompt(),
            &format!("For `{}`:", agent.as_str()),
        );
        let Ok(names) = skills
            .iter()
            .map(SkillName::new)
            .collect::<Result<Vec<_>, _>>()
        else {
            return Reply::refuse(format!("the protocol lists invalid skills {skills:?}"));
        };
        let mut next = observed.run.clone();
        let Ok(Phase::Delegated { pass, attempt, .. }) = next.apply(Step::Delegate {
            agent,
            required_skills: names,
        }) else {
            return Reply::refuse(format!(
                "the protocol refuses delegating to {} with skills {skills:?}",
                agent.as_str()
            ));
        };
        let mut prompt = format!("{REQUIRED_SKILLS_HEADING}\n");
        for skill in &skills {
            prompt.push_str(&format!("- {skill}\n"));
        }
        prompt.push_str(&format!("\n{BRIEF}\n{}\n", pass_line(pass, attempt)));
        if !gaps.is_empty() {
            prompt.push_str("Missing evidence named by diagnosis-analyst:\n");
            for gap in gaps {
                prompt.push_str(&format!("- {gap}\n"));
            }
        }
        prompt.push_str(&format!(
            "Write {} (schema in .opencode/investibook/schemas/).\n",
            output_file(agent)
        ));
        Reply::call(
            format!("orch_{}_task", request.replies_so_far()),
            "task",
            json!({"description": format!("{} pass {pass}", agent.as_str()),
                   "prompt": prompt, "subagent_type": agent.as_str()}),
        )
    }

    fn insufficient(gaps: &[String]) -> Reply {
        let mut text = format!("{INSUFFICIENT_EVIDENCE_REPLY}\n\nGaps:\n");
        for gap in gaps {
            text.push_str(&format!("- {gap}\n"));
        }
        text.push_str("\nNext steps:\n- rerun the evidence collection for the gaps above\n");
        Reply::text(text)
    }

    /// The protocol's next step for the conversation in `request`.
    fn next(&self, request: &ChatRequest) -> Reply {
        let observed = match self.observe(request) {
            Ok(observed) => observed,
            Err(e) => return Reply::refuse(format!("the workflow broke the protocol: {e}")),
        };
        let n = request.replies_so_far();
        match observed.run.phase() {
            Phase::Scoping => self.delegate(request, &observed, AgentRole::EvidenceAgent, &[]),
            Phase::Delegated { agent, .. } => Reply::call(
                format!("orch_{n}_read"),
                "read",
                json!({"filePath": output_file(agent)}),
            ),
            Phase::ChildFailed { agent, attempt, .. } if attempt < MAX_ATTEMPTS => {
                self.delegate(request, &observed, agent, &[])
            }
            Phase::EvidenceReady { .. } => {
                self.delegate(request, &observed, AgentRole::DiagnosisAnalyst, &[])
            }
            Phase::AnalysisReady {
                conclusive: true, ..
            } => Reply::text(
                observed
                    .analysis
                    .as_ref()
                    .map(|a| a.final_response.clone())
                    .unwrap_or_default(),
            ),
            Phase::AnalysisReady {
                needs_more_evidence: true,
                pass,
                ..
            } if pass < MAX_PASSES => {
                let gaps = observed
                    .analysis
                    .as_ref()
                    .map(|a| a.missing_evidence.clone())
                    .unwrap_or_default();
                self.delegate(request, &observed, AgentRole::EvidenceAgent, &gaps)
            }
            Phase::Answered | Phase::StoppedInsufficient => {
                Reply::refuse("the workflow has already ended")
            }
            Phase::ChildFailed { .. } | Phase::AnalysisReady { .. } => {
                let mut gaps: Vec<String> = observed
                    .analysis
                    .as_ref()
                    .map(|a| a.missing_evidence.clone())
                    .unwrap_or_default();
                if let Some((agent, failure)) = observed.failure {
                    gaps.push(format!(
                        "{} wrote no valid {} ({failure:?}) after one retry",
                        agent.as_str(),
                        output_file(agent)
                    ));
                }
                Self::insufficient(&gaps)
            }
        }
    }
}

impl Play for Protocol {
    fn reply(&self, request: &ChatRequest) -> Reply {
        self.next(request)
    }
}
