//! The static protocol the backend injects on the first turn, and the agents' prompts
//! built from it: the fixed workflow, the loading rules, the output contracts and the
//! single-agent fallback's plain statement.

use std::fmt::Write as _;

use crate::catalog::{CORE_GROUP, DATA_ACCESS_GROUP, DIAGNOSIS_GROUP, SkillCatalog};
use crate::config::TaskSupport;
use crate::layout::{
    ANALYST_OUTPUT, ANALYST_SCHEMA_PATH, CATALOG_PATH, EVIDENCE_AGENT_OUTPUT, EVIDENCE_FILES,
    EVIDENCE_SCHEMA_PATH, REPORT_PATH,
};
use crate::names::{AgentRole, FALLBACK_AGENT, GroupName};
use crate::outputs::GO_GC_CHECK;

/// Title of the protocol injected on the first turn.
pub const PROTOCOL_TITLE: &str = "Investibook Diagnosis Orchestration Protocol";

/// Title of the single-agent fallback protocol.
pub const FALLBACK_PROTOCOL_TITLE: &str = "Investibook Diagnosis Single-Agent Protocol (fallback)";

/// The sentence the fallback states plainly, in its prompt and in every reply.
pub const FALLBACK_NOTICE: &str = "Multi-agent diagnosis is not in effect: this OpenCode runtime has no Task tool, so a single agent runs the whole diagnosis.";

/// The heading of the required skill list in a task prompt when the Task tool has no
/// `load_skills` argument.
pub const REQUIRED_SKILLS_HEADING: &str = "Required skills to load:";

/// The reply the protocol prescribes when evidence stays insufficient.
pub const INSUFFICIENT_EVIDENCE_REPLY: &str =
    "insufficient evidence + concrete gaps + recommended next steps";

fn group_list(groups: &[&str]) -> String {
    groups
        .iter()
        .map(|g| format!("`{g}`"))
        .collect::<Vec<_>>()
        .join(" + ")
}

fn evidence_files_list() -> String {
    EVIDENCE_FILES
        .iter()
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn gc_rule() -> String {
    format!(
        "- **TiDB high CPU diagnosis must check Go GC metrics.** Before concluding on TiDB high \
         CPU, the analyst checks the TiDB Go GC metrics (GC pause and frequency such as \
         `go_gc_duration_seconds`, heap size and GC target such as \
         `go_memstats_heap_inuse_bytes` and `go_memstats_next_gc_bytes`, the share of CPU \
         spent in GC) and records a quality check `{GO_GC_CHECK}` in its output with `result` \
         `passed` or `failed` and a `detail` naming the metrics and what they showed. An \
         analyst output for TiDB high CPU without that performed check is rejected as a failed \
         child task.\n"
    )
}

fn render_protocol(evidence_groups: &[&str], analyst_groups: &[&str]) -> String {
    let evidence = group_list(evidence_groups);
    let analyst = group_list(analyst_groups);
    let mut out = String::new();
    let _ = write!(
        out,
        "# {PROTOCOL_TITLE}\n\n\
         ## Three agents\n\n\
         Diagnosis in this workspace runs inside OpenCode with exactly three agents. No other \
         agent takes part, and the subagents never start agents of their own.\n\n\
         - `diagnosis-orchestrator` (primary): talks to the user; decides whether the request \
         enters diagnosis mode; reads the workspace context (sources, Jira, alert and cluster \
         metadata, existing evidence) and `{CATALOG_PATH}`; decides when to call \
         `evidence-agent` and `diagnosis-analyst`; reads their outputs from files; answers. It \
         does not collect evidence itself and does not write the root cause itself.\n\
         - `evidence-agent` (subagent): owns data-source analysis and evidence collection \
         (metrics, logs, slow queries, TopSQL, events, diagnostic files); normalizes the time \
         range, cluster tier, Premium `parent_id` and Starter/Essential `keyspace_id`; reuses \
         existing workspace evidence; loads only {evidence} skills. Writes \
         `{EVIDENCE_AGENT_OUTPUT}`.\n\
         - `diagnosis-analyst` (subagent): domain expert, reviewer and synthesizer in one; reads \
         the evidence agent's output and evidence files; loads only {analyst} skills; performs \
         root-cause analysis, candidate rejection, evidence-chain review and the final report. \
         It does not call Clinic, O11Y, Jira or DevOps to collect data; when evidence is \
         insufficient it sets `needs_more_evidence=true`. Writes `{ANALYST_OUTPUT}` and \
         `{REPORT_PATH}`.\n\n\
         ## Task delegation\n\n\
         - Delegate only through the Task tool, and only to `evidence-agent` and \
         `diagnosis-analyst`.\n\
         - Every Task call names a non-empty list of required skills, taken from the called \
         agent's load groups in `{CATALOG_PATH}`: `evidence-agent` gets {evidence} skills, \
         `diagnosis-analyst` gets {analyst} skills. A diagnosis Task call with an empty required \
         skill list is not allowed. Never give the analyst a `{DATA_ACCESS_GROUP}` skill or the \
         evidence agent a `{DIAGNOSIS_GROUP}` skill.\n\
         - When the Task tool has a `load_skills` argument, pass the list as `load_skills`. \
         Otherwise open the task prompt with a `{REQUIRED_SKILLS_HEADING}` line followed by one \
         `- <skill>` line per skill.\n\
         - The task prompt also states the scope (cluster, time range, tier, `parent_id` or \
         `keyspace_id`), the question, and the files the child must write.\n\n\
         ## Fixed workflow\n\n\
         1. The orchestrator determines the user's intent and the diagnosis scope.\n\
         2. The orchestrator calls `evidence-agent`.\n\
         3. `evidence-agent` collects or reuses evidence and writes `{EVIDENCE_AGENT_OUTPUT}`.\n\
         4. The orchestrator reads `{EVIDENCE_AGENT_OUTPUT}` from disk.\n\
         5. The orchestrator calls `diagnosis-analyst`.\n\
         6. The analyst analyses and reviews the evidence, then writes `{ANALYST_OUTPUT}` and \
         `{REPORT_PATH}`.\n\
         7. The orchestrator reads `{ANALYST_OUTPUT}` from disk and replies to the user from its \
         `final_response`.\n\
         8. If the analyst returns `needs_more_evidence=true`, the orchestrator may run at most \
         one additional evidence pass and then at most one additional analyst pass. There is no \
         third pass.\n\
         9. If evidence is still insufficient, reply with \"{INSUFFICIENT_EVIDENCE_REPLY}\" and \
         do not force a conclusion.\n\n\
         ## File outputs\n\n\
         - `{EVIDENCE_AGENT_OUTPUT}`: written by `evidence-agent`; schema \
         `{EVIDENCE_SCHEMA_PATH}`.\n\
         - `{ANALYST_OUTPUT}`: written by `diagnosis-analyst`; schema `{ANALYST_SCHEMA_PATH}`.\n\
         - `{REPORT_PATH}`: written by `diagnosis-analyst`; the report artifact the user sees.\n\
         - Evidence files written by `evidence-agent`: {files}.\n\
         - Each agent may edit only its own output files; everything else is read-only to it.\n\n\
         ## Reading child outputs\n\n\
         - Read child results only from their files on disk, never from a child's chat reply. \
         Do not parse JSON out of chat text.\n\
         - A missing output file, a file that is not valid JSON, or JSON that does not match its \
         schema is a failed child task. Retry that child at most once; if it fails again, stop \
         and reply with insufficient evidence.\n\n\
         ## Diagnosis rules\n\n",
        files = evidence_files_list(),
    );
    out.push_str(&gc_rule());
    out.push_str(
        "- Every root cause rests on key evidence from the evidence files; rejected candidate \
         causes are listed with the evidence that rules them out.\n\
         - Never present a guess as a conclusion: with low confidence or missing evidence, say \
         so and list the gaps.\n",
    );
    out
}

/// The "Investibook Diagnosis Orchestration Protocol" for the standard load groups
/// (`evidence-agent`: `core` + `data-access`; `diagnosis-analyst`: `core` + `diagnosis`),
/// as the backend injects it on the first turn.
pub fn static_protocol() -> String {
    render_protocol(
        &[CORE_GROUP, DATA_ACCESS_GROUP],
        &[CORE_GROUP, DIAGNOSIS_GROUP],
    )
}

fn group_strs(groups: &[GroupName]) -> Vec<&str> {
    groups.iter().map(GroupName::as_str).collect()
}

/// The orchestration protocol with the load groups of `catalog`.
pub fn static_protocol_for(catalog: &SkillCatalog) -> String {
    render_protocol(
        &group_strs(catalog.default_groups(AgentRole::EvidenceAgent)),
        &group_strs(catalog.default_groups(AgentRole::DiagnosisAnalyst)),
    )
}

/// The single-agent fallback protocol, used when the runtime has no Task tool. It says
/// plainly that multi-agent diagnosis is not in effect.
pub fn fallback_protocol(catalog: &SkillCatalog) -> String {
    let evidence = group_list(&group_strs(
        catalog.default_groups(AgentRole::EvidenceAgent),
    ));
    let analyst = group_list(&group_strs(
        catalog.default_groups(AgentRole::DiagnosisAnalyst),
    ));
    let mut out = String::new();
    let _ = write!(
        out,
        "# {FALLBACK_PROTOCOL_TITLE}\n\n\
         **{FALLBACK_NOTICE}** The agents `diagnosis-orchestrator`, `evidence-agent` and \
         `diagnosis-analyst` are not available. Never say that they took part and never claim \
         that a multi-agent diagnosis was completed. Open every diagnosis reply with: \
         \"Single-agent diagnosis (multi-agent diagnosis is not in effect).\"\n\n\
         ## Phases\n\n\
         1. Determine the user's intent and the diagnosis scope (cluster, time range, tier, \
         Premium `parent_id` or Starter/Essential `keyspace_id`). Read `{CATALOG_PATH}` and the \
         workspace files, and reuse existing evidence.\n\
         2. Evidence phase: load only {evidence} skills. Collect metrics, logs, slow queries, \
         TopSQL, events and diagnostic files into {files}.\n\
         3. Analysis phase: load only {analyst} skills; do not collect more data in this phase. \
         Perform root-cause analysis, candidate rejection and evidence-chain review, then write \
         `{REPORT_PATH}`.\n\
         4. If evidence is insufficient, run at most one additional evidence phase and then at \
         most one additional analysis phase.\n\
         5. If evidence is still insufficient, reply with \"{INSUFFICIENT_EVIDENCE_REPLY}\" and \
         do not force a conclusion.\n\n\
         ## Diagnosis rules\n\n",
        files = evidence_files_list(),
    );
    out.push_str(&gc_rule().replace(
        "and records a quality check",
        "(single-agent: the analysis phase) and records a quality check",
    ));
    let _ = writeln!(
        out,
        "- In this fallback the check is recorded in `{REPORT_PATH}` and stated in the reply."
    );
    out
}

fn skill_lines(catalog: &SkillCatalog, role: AgentRole) -> String {
    catalog
        .default_skills(role)
        .iter()
        .map(|s| format!("- {s}\n"))
        .collect()
}

fn delegation_for_runtime(catalog: &SkillCatalog, support: TaskSupport) -> String {
    let evidence_skills = catalog
        .default_skills(AgentRole::EvidenceAgent)
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let analyst_skills = catalog
        .default_skills(AgentRole::DiagnosisAnalyst)
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ");
    match support {
        TaskSupport::LoadSkillsArgument => format!(
            "## Delegation in this runtime\n\n\
             This runtime's Task tool has a `load_skills` argument. Pass the required skills \
             there, never an empty list:\n\n\
             - `evidence-agent`: `load_skills` from [{evidence_skills}]\n\
             - `diagnosis-analyst`: `load_skills` from [{analyst_skills}]\n"
        ),
        TaskSupport::PromptList | TaskSupport::Unavailable => format!(
            "## Delegation in this runtime\n\n\
             This runtime's Task tool has no `load_skills` argument. Open every task prompt with \
             the required skills, never an empty list. For `evidence-agent`:\n\n\
             ```text\n{REQUIRED_SKILLS_HEADING}\n{}```\n\n\
             For `diagnosis-analyst`:\n\n\
             ```text\n{REQUIRED_SKILLS_HEADING}\n{}```\n\n\
             You may drop skills that cannot matter for the case, but keep the `{CORE_GROUP}` \
             skills and at least one skill.\n",
            skill_lines(catalog, AgentRole::EvidenceAgent),
            skill_lines(catalog, AgentRole::DiagnosisAnalyst),
        ),
    }
}

pub(crate) fn orchestrator_prompt(catalog: &SkillCatalog, support: TaskSupport) -> String {
    let mut out = String::new();
    out.push_str(
        "You are `diagnosis-orchestrator`, the user-facing entry point of Investibook \
         diagnosis. You scope the request, delegate to `evidence-agent` and `diagnosis-analyst` \
         through the Task tool, read their output files and answer. You cannot edit files, run \
         commands or load skills; you read the workspace and the skill catalog.\n\n\
         When the request is not a diagnosis (a question about the workspace, a follow-up on a \
         finished report), answer it directly from the workspace files.\n\n",
    );
    out.push_str(&static_protocol_for(catalog));
    out.push('\n');
    out.push_str(&delegation_for_runtime(catalog, support));
    let _ = write!(
        out,
        "\n## Task prompt outline\n\n\
         After the required skills, every task prompt states:\n\n\
         - the question and the symptoms (name TiDB high CPU explicitly when it is one);\n\
         - the scope: cluster id, time range with time zone, tier, `parent_id` or \
         `keyspace_id`;\n\
         - for `evidence-agent`: which evidence already exists and what is missing; on the \
         extra pass, the analyst's `missing_evidence` list;\n\
         - for `diagnosis-analyst`: that `{EVIDENCE_AGENT_OUTPUT}` holds the evidence summary;\n\
         - the files the child must write and their schemas.\n"
    );
    out
}

pub(crate) fn evidence_agent_prompt(catalog: &SkillCatalog) -> String {
    let groups = group_list(&group_strs(
        catalog.default_groups(AgentRole::EvidenceAgent),
    ));
    let mut out = String::new();
    let _ = write!(
        out,
        "You are `evidence-agent`, the evidence collector of Investibook diagnosis. \
         `diagnosis-orchestrator` starts you through the Task tool; you never start other \
         agents.\n\n\
         ## Skills\n\n\
         Load the skills listed under `{REQUIRED_SKILLS_HEADING}` in your task (or passed as \
         `load_skills`). You may load only {groups} skills (see `{CATALOG_PATH}`); never load \
         a `{DIAGNOSIS_GROUP}` skill.\n\n\
         ## What you do\n\n\
         1. Normalize the scope: the time range (RFC 3339 with offset, and the user's time \
         zone), the cluster tier, the Premium `parent_id` and the Starter/Essential \
         `keyspace_id`. Leave a field empty when it does not apply or is unknown, and say so \
         in `warnings`.\n\
         2. Reuse the evidence already in `evidences/` when it covers the scope; collect only \
         what is missing.\n\
         3. Collect metrics, logs, slow queries, TopSQL, events and diagnostic files yourself: \
         do not split the work into more collectors. Write them to {files}.\n\
         4. Do not diagnose: no root cause, no conclusions. Recommend diagnosis skills for the \
         analyst in `next_recommended_skills` instead.\n\
         5. Write `{EVIDENCE_AGENT_OUTPUT}` last, as one JSON object matching \
         `{EVIDENCE_SCHEMA_PATH}`, with every field present:\n\n\
         ```json\n{example}\n```\n\n\
         `status` is `ok`, `partial` (some evidence missing: list it in `missing_evidence`) or \
         `failed`. `evidence_files` holds workspace-relative paths only. You may edit only your \
         own output files: {files} and `{EVIDENCE_AGENT_OUTPUT}`. Your chat reply is not read: \
         the file is your result.\n",
        files = evidence_files_list(),
        example = EVIDENCE_EXAMPLE,
    );
    out
}

pub(crate) fn analyst_prompt(catalog: &SkillCatalog) -> String {
    let groups = group_list(&group_strs(
        catalog.default_groups(AgentRole::DiagnosisAnalyst),
    ));
    let mut out = String::new();
    let _ = write!(
        out,
        "You are `diagnosis-analyst`: domain expert, reviewer and synthesizer of Investibook \
         diagnosis. `diagnosis-orchestrator` starts you through the Task tool; you never start \
         other agents.\n\n\
         ## Skills\n\n\
         Load the skills listed under `{REQUIRED_SKILLS_HEADING}` in your task (or passed as \
         `load_skills`), choosing by the symptoms. You may load only {groups} skills (see \
         `{CATALOG_PATH}`); never load a `{DATA_ACCESS_GROUP}` skill.\n\n\
         ## What you do\n\n\
         1. Read `{EVIDENCE_AGENT_OUTPUT}` and the evidence files it lists.\n\
         2. Do not call Clinic, O11Y, Jira or DevOps, and do not collect data. When the \
         evidence is insufficient, set `needs_more_evidence` to true, list the concrete gaps in \
         `missing_evidence`, and stop: the orchestrator decides on one more evidence pass.\n\
         3. Perform root-cause analysis, reject candidate causes with the evidence that rules \
         them out, review the evidence chain, and record each review step in \
         `quality_checks`.\n\
         4. Write `{REPORT_PATH}` (the report the user sees) and then `{ANALYST_OUTPUT}`, as one \
         JSON object matching `{ANALYST_SCHEMA_PATH}`, with every field present:\n\n\
         ```json\n{example}\n```\n\n\
         `status` is `ok`, `partial` or `failed`; `confidence` is `low`, `medium` or `high`. \
         `final_response` is the answer the orchestrator relays. You may edit only \
         `{ANALYST_OUTPUT}` and `{REPORT_PATH}`. Your chat reply is not read: the file is your \
         result.\n\n\
         ## Rules\n\n",
        example = ANALYST_EXAMPLE,
    );
    out.push_str(&gc_rule());
    out.push_str(
        "- `needs_more_evidence: true` always comes with concrete `missing_evidence` items.\n\
         - `status: ok` always names a `root_cause`.\n",
    );
    out
}

pub(crate) fn fallback_prompt(catalog: &SkillCatalog) -> String {
    let mut out = format!(
        "You are `{FALLBACK_AGENT}`, the single Investibook diagnosis agent of this workspace.\n\n"
    );
    out.push_str(&fallback_protocol(catalog));
    out
}

const EVIDENCE_EXAMPLE: &str = r#"{
  "agent": "evidence-agent",
  "status": "ok",
  "summary": "",
  "scope": {
    "cluster_id": "",
    "time_range": { "start": "", "end": "", "timezone": "" },
    "tier": "",
    "parent_id": "",
    "keyspace_id": ""
  },
  "evidence_files": [],
  "missing_evidence": [],
  "warnings": [],
  "next_recommended_skills": []
}"#;

const ANALYST_EXAMPLE: &str = r#"{
  "agent": "diagnosis-analyst",
  "status": "ok",
  "root_cause": "",
  "confidence": "low",
  "key_evidence": [],
  "rejected_causes": [{ "cause": "", "reason": "" }],
  "needs_more_evidence": false,
  "missing_evidence": [],
  "quality_checks": [{ "check": "tidb_go_gc_metrics", "result": "passed", "detail": "" }],
  "final_response": ""
}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_protocol_matches_the_static_one_for_the_standard_catalog() {
        let catalog = SkillCatalog::investibook().unwrap();
        assert_eq!(static_protocol_for(&catalog), static_protocol());
    }

    #[test]
    fn runtime_delegation_follows_task_support() {
        let catalog = SkillCatalog::investibook().unwrap();
        let with_arg = orchestrator_prompt(&catalog, TaskSupport::LoadSkillsArgument);
        assert!(with_arg.contains("has a `load_skills` argument"));
        let listed = orchestrator_prompt(&catalog, TaskSupport::PromptList);
        assert!(listed.contains("Required skills to load:\n- time-conversion\n"));
    }
}
