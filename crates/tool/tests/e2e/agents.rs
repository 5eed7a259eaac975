//! The subagents' parts of the script. The evidence agent makes its managed tool calls
//! one per reply (a case each: a success, a rejection, its unchanged retry and its
//! same-turn correction, a shared failure and the call the stopped turn refuses, ...),
//! reuses the evidence file of an earlier pass, writes its own files and tries the
//! analyst's; the analyst reads the evidence, tries a managed tool and the evidence
//! agent's file, and writes its own files: asking for more evidence on its first pass
//! and concluding on the second. Each part chooses its pass from the task prompt the
//! orchestrator wrote.

use std::sync::Arc;

use evidence_result::FailureClass;
use evidence_test_support as test_support;
use evidence_test_support::model::{ChatRequest, Play, Reply, Steps};
use evidence_tool::Tool;
use opencode_workspace::layout::{ANALYST_OUTPUT, EVIDENCE_AGENT_OUTPUT, REPORT_PATH};
use opencode_workspace::outputs::GO_GC_CHECK;
use serde_json::{Value, json};

use super::orchestrator::pass_line;
use super::transcript::read_contents;

/// The evidence file the evidence agent keeps its query results in.
pub const METRICS_FILE: &str = "evidences/metrics.json";

/// What a managed call must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// `status: ok` with evidence.
    Success,
    /// `status: ok` with evidence that found no series (`no_data`).
    NoData,
    /// `status: ok` with a discovery's answer that found something.
    Discovered,
    /// A failed result with this code and class.
    Failure(&'static str, FailureClass),
}

/// One managed tool call of an evidence pass.
#[derive(Debug, Clone)]
pub struct ManagedCall {
    /// The call id, unique over the run.
    pub id: &'static str,
    /// The package called.
    pub tool: Tool,
    /// The model's arguments.
    pub arguments: Value,
    /// The earlier call whose rejection this call corrects in the same turn: it is
    /// made only when that result allows a same-turn correction.
    pub corrects: Option<&'static str>,
    /// What the result must be.
    pub expect: Expect,
    /// Whether the call reaches the provider.
    pub sent: bool,
    /// The earlier discovery whose answer must list this name before the call is made
    /// (the model writes the query with a name the discovery found).
    pub listed_by: Option<(&'static str, &'static str)>,
}

fn clinic(query_id: &str, expr: &str, unit: Option<&str>) -> Value {
    let mut query = json!({"queryId": query_id, "expr": expr, "step": "15s"});
    if let Some(unit) = unit {
        query["unit"] = json!(unit);
    }
    json!({"queries": [query]})
}

/// The managed calls of the first evidence pass, one case after the other.
pub fn first_pass() -> Vec<ManagedCall> {
    vec![
        ManagedCall {
            id: "p1_clinic_ok",
            tool: Tool::Clinic,
            arguments: clinic("tidb_cpu", test_support::TIDB_CPU.expr, Some("cores")),
            corrects: None,
            expect: Expect::Success,
            sent: true,
            listed_by: None,
        },
        ManagedCall {
            id: "p1_clinic_rejected",
            tool: Tool::Clinic,
            arguments: clinic(
                "tidb_cpu_saturation",
                test_support::TIDB_MANY_TO_MANY.expr,
                None,
            ),
            corrects: None,
            expect: Expect::Failure("clinic_http_422", FailureClass::QueryRejected),
            sent: true,
            listed_by: None,
        },
        ManagedCall {
            id: UNCHANGED_RETRY,
            tool: Tool::Clinic,
            arguments: clinic(
                "tidb_cpu_saturation",
                test_support::TIDB_MANY_TO_MANY.expr,
                None,
            ),
            corrects: None,
            expect: Expect::Failure("unchanged_retry", FailureClass::InvalidArgument),
            sent: false,
            listed_by: None,
        },
        ManagedCall {
            id: "p1_clinic_corrected",
            tool: Tool::Clinic,
            arguments: clinic(
                "tidb_cpu_saturation",
                test_support::TIDB_CPU_SATURATION.expr,
                None,
            ),
            corrects: Some("p1_clinic_rejected"),
            expect: Expect::Success,
            sent: true,
            listed_by: None,
        },
        ManagedCall {
            id: "p1_manus_ok",
            tool: Tool::Manus,
            arguments: json!({"queryId": "vida_cpu", "expr": test_support::TIDB_CPU.expr,
                              "step": "15s"}),
            corrects: None,
            expect: Expect::Success,
            sent: true,
            listed_by: None,
        },
        ManagedCall {
            id: "p1_wetech_ok",
            tool: Tool::Wetech,
            arguments: json!({"queryId": "tidb_cpu", "expr": test_support::TIDB_CPU.expr,
                              "unit": "cores"}),
            corrects: None,
            expect: Expect::Success,
            sent: true,
            listed_by: None,
        },
        ManagedCall {
            id: SHARED_FAILURE,
            tool: Tool::Manus,
            arguments: json!({"queryId": "vida_cpu_rate", "expr": test_support::TIDB_CPU.expr,
                              "step": "30s"}),
            corrects: None,
            expect: Expect::Failure("manus_http_403", FailureClass::Authorization),
            sent: true,
            listed_by: None,
        },
        ManagedCall {
            id: "p1_clinic_after_stop",
            tool: Tool::Clinic,
            arguments: clinic(
                "tidb_cpu_after_stop",
                test_support::TIDB_CPU.expr,
                Some("cores"),
            ),
            corrects: None,
            expect: Expect::Failure("turn_stopped", FailureClass::PolicyViolation),
            sent: false,
            listed_by: None,
        },
    ]
}

/// The first pass's call that repeats the rejected request unchanged.
pub const UNCHANGED_RETRY: &str = "p1_clinic_unchanged_retry";
/// The first pass's call the Manus target refuses (403): a shared failure, which stops
/// the turn.
pub const SHARED_FAILURE: &str = "p1_manus_forbidden";

/// The managed calls of the extra evidence pass the analyst asked for: a query with a
/// guessed metric name that finds no series, a discovery of the memory metrics the
/// cluster has in its window, and the query written with the name it listed, all in one
/// turn.
pub fn second_pass() -> Vec<ManagedCall> {
    vec![
        ManagedCall {
            id: "p2_clinic_memory_guess",
            tool: Tool::Clinic,
            arguments: clinic(
                "tidb_memory_guess",
                "tidb_server_memory_bytes{job=\"tidb\"}",
                Some("bytes"),
            ),
            corrects: None,
            expect: Expect::NoData,
            sent: true,
            listed_by: None,
        },
        ManagedCall {
            id: MEMORY_DISCOVERY,
            tool: Tool::Clinic,
            arguments: json!({"queries": [{"queryId": "memory_metric_names",
                                           "discover": "metric_names",
                                           "pattern": ".*memory.*"}]}),
            corrects: None,
            expect: Expect::Discovered,
            sent: true,
            listed_by: None,
        },
        ManagedCall {
            id: "p2_clinic_memory",
            tool: Tool::Clinic,
            arguments: clinic(
                "tidb_memory",
                test_support::TIDB_MEMORY_WITH_NAN.expr,
                Some("bytes"),
            ),
            corrects: None,
            expect: Expect::Success,
            sent: true,
            listed_by: Some((MEMORY_DISCOVERY, "process_resident_memory_bytes")),
        },
    ]
}

/// The second pass's discovery, after its guessed query found no series.
pub const MEMORY_DISCOVERY: &str = "p2_clinic_memory_names";

/// What the analyst asks for on its first pass.
pub const MEMORY_GAP: &str = "TiDB resident memory (process_resident_memory_bytes) over the window";

/// The id of the evidence agent's `skill("managed-evidence-tools")` call.
pub const EVIDENCE_LOADS_SKILL: &str = "p1_load_transport_skill";
/// The id of the analyst's attempt to load the evidence agent's transport skill.
pub const ANALYST_LOADS_SKILL: &str = "analyst_loads_transport_skill";

/// The call loading the transport skill, with id `id`.
fn load_transport_skill(id: &'static str) -> impl Fn(&ChatRequest) -> Reply + 'static {
    move |_: &ChatRequest| {
        Reply::call(
            id,
            "skill",
            json!({"name": evidence_policy::skill::TRANSPORT_SKILL_NAME}),
        )
    }
}

/// The id of the analyst's attempt to call a managed tool.
pub const ANALYST_MANAGED_CALL: &str = "analyst_calls_clinic";
/// The id of the analyst's attempt to write the evidence agent's file.
pub const ANALYST_WRITES_EVIDENCE: &str = "analyst_writes_evidence";
/// The id of the evidence agent's attempt to write the analyst's file.
pub const EVIDENCE_WRITES_ANALYSIS: &str = "p2_evidence_writes_analysis";
/// The id of the analyst's read of the evidence agent's file after its refused write.
pub const ANALYST_REREADS_EVIDENCE: &str = "a1_reread_evidence";
/// The id of the evidence agent's read of the analyst's file after its refused write.
pub const EVIDENCE_REREADS_ANALYSIS: &str = "p2_reread_analysis";

/// The OpenCode name of each package's tool.
#[derive(Debug, Clone)]
pub struct ToolNames(pub Vec<(Tool, String)>);

impl ToolNames {
    /// The name of `tool`'s tool.
    pub fn of(&self, tool: Tool) -> &str {
        self.0
            .iter()
            .find(|(t, _)| *t == tool)
            .map(|(_, n)| n.as_str())
            .unwrap()
    }
}

fn write(id: &str, path: &str, content: &Value) -> Reply {
    Reply::call(
        id,
        "write",
        json!({"filePath": path, "content": format!("{}\n", serde_json::to_string_pretty(content).unwrap())}),
    )
}

/// The step making `call`, after `hook`: a correction only when the result it corrects
/// allows one in the same turn.
fn managed_step(call: ManagedCall, names: &ToolNames, hook: Hook) -> impl Play + 'static {
    let name = names.of(call.tool).to_owned();
    move |request: &ChatRequest| {
        hook(call.id);
        if let Some(rejected) = call.corrects {
            let Some(outcome) = request.outcome(rejected) else {
                return Reply::refuse(format!("{}: no result of {rejected}", call.id));
            };
            let details: Value = serde_json::from_str(&outcome.output).unwrap_or_default();
            let correction = details
                .pointer("/items/0/correction")
                .or_else(|| details.get("correction"))
                .cloned()
                .unwrap_or_default();
            if correction["allowed"] != true || correction["scope"] != "same_turn" {
                return Reply::refuse(format!(
                    "{}: {rejected} offers no same-turn correction: {}",
                    call.id, outcome.output
                ));
            }
        }
        if let Some((discovery, listed)) = call.listed_by {
            let Some(outcome) = request.outcome(discovery) else {
                return Reply::refuse(format!("{}: no result of {discovery}", call.id));
            };
            let details: Value = serde_json::from_str(&outcome.output).unwrap_or_default();
            let rows = details
                .pointer("/items/0/discovery/rows")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if !rows.iter().any(|row| row[0] == listed) {
                return Reply::refuse(format!(
                    "{}: {discovery} does not list {listed}: {}",
                    call.id, outcome.output
                ));
            }
        }
        Reply::call(call.id, name.clone(), call.arguments.clone())
    }
}

/// Appends a write of `path` (someone else's file) that must be refused, then a read of
/// that file to see it unchanged.
fn try_foreign_write(
    steps: Steps,
    write_id: &'static str,
    reread_id: &'static str,
    path: &'static str,
    writer: &'static str,
) -> Steps {
    steps
        .then(move |_: &ChatRequest| write(write_id, path, &json!({"agent": writer})))
        .then(move |_: &ChatRequest| Reply::call(reread_id, "read", json!({"filePath": path})))
}

/// Plays `marked` for a task whose prompt holds `marker`, `otherwise` for any other.
fn by_task(marker: String, marked: Steps, otherwise: Steps) -> impl Play + 'static {
    move |request: &ChatRequest| {
        if request.first_user_text().contains(&marker) {
            marked.reply(request)
        } else {
            otherwise.reply(request)
        }
    }
}

/// The results of `calls` as the model read them, by call id (the evidence file).
fn results(request: &ChatRequest, calls: &[ManagedCall]) -> serde_json::Map<String, Value> {
    calls
        .iter()
        .filter_map(|c| {
            let outcome = request.outcome(c.id)?;
            let details = serde_json::from_str(&outcome.output)
                .unwrap_or_else(|_| Value::String(outcome.output.clone()));
            Some((c.id.to_owned(), details))
        })
        .collect()
}

fn evidence_output(pass: u8, summary: &str, warnings: Vec<String>) -> Value {
    json!({
        "agent": "evidence-agent", "status": "ok",
        "summary": format!("Pass {pass}: {summary}"),
        "scope": {"cluster_id": "SaaS01",
                  "time_range": {"start": "2026-07-21T21:50:00+08:00",
                                 "end": "2026-07-21T22:05:00+08:00",
                                 "timezone": "Asia/Shanghai"},
                  "tier": "dedicated", "parent_id": "", "keyspace_id": ""},
        "evidence_files": [METRICS_FILE], "missing_evidence": [], "warnings": warnings,
        "next_recommended_skills": ["tidb-clinic-diagnosis"],
    })
}

/// Something the test does as the evidence agent is about to make a managed call, given
/// the call's id (OpenCode has started every MCP server by then).
pub type Hook = Arc<dyn Fn(&str) + Send + Sync>;

/// The evidence agent: the first pass's cases, or (for a task naming pass 2) the
/// extra pass that reuses the first pass's evidence file.
pub fn evidence_agent(names: &ToolNames, before_call: Hook) -> impl Play + 'static {
    let mut first = Steps::new().then(load_transport_skill(EVIDENCE_LOADS_SKILL));
    let calls = first_pass();
    for call in calls.iter().cloned() {
        first = first.then(managed_step(call, names, before_call.clone()));
    }
    let written = calls.clone();
    first = first
        .then(move |request: &ChatRequest| {
            let results = results(request, &written);
            write("p1_write_metrics", METRICS_FILE, &json!({"passes": [1], "results": results}))
        })
        .then(|_: &ChatRequest| {
            write(
                "p1_write_output",
                EVIDENCE_AGENT_OUTPUT,
                &evidence_output(
                    1,
                    "TiDB CPU by instance from Clinic, Manus (vida) and Wetech; CPU saturation per instance.",
                    vec![
                        "tidb_cpu_saturation was rejected (clinic_http_422) and corrected in the same turn".to_owned(),
                        "the turn stopped after Manus refused the reader (manus_http_403)".to_owned(),
                    ],
                ),
            )
        })
        .then(|_: &ChatRequest| Reply::text("Evidence written to evidences/agent-runs/evidence-agent.json."));

    let mut second = Steps::new().then(|_: &ChatRequest| {
        Reply::call("p2_read_metrics", "read", json!({"filePath": METRICS_FILE}))
    });
    let calls = second_pass();
    for call in calls.iter().cloned() {
        second = second.then(managed_step(call, names, before_call.clone()));
    }
    second = second
        .then(move |request: &ChatRequest| {
            let earlier = read_json(request, "p2_read_metrics");
            let mut all = earlier["results"].as_object().cloned().unwrap_or_default();
            all.extend(results(request, &calls));
            write(
                "p2_write_metrics",
                METRICS_FILE,
                &json!({"passes": [1, 2], "results": all}),
            )
        })
        .then(|_: &ChatRequest| {
            write(
                "p2_write_output",
                EVIDENCE_AGENT_OUTPUT,
                &evidence_output(
                    2,
                    "the first pass's evidence reused; TiDB resident memory added.",
                    Vec::new(),
                ),
            )
        });
    let second = try_foreign_write(
        second,
        EVIDENCE_WRITES_ANALYSIS,
        EVIDENCE_REREADS_ANALYSIS,
        ANALYST_OUTPUT,
        "evidence-agent",
    )
    .then(|_: &ChatRequest| {
        Reply::text("Evidence written to evidences/agent-runs/evidence-agent.json.")
    });
    by_task(pass_line(2, 1), second, first)
}

fn analysis(pass: u8, key_evidence: Vec<String>) -> Value {
    let concluded = pass > 1;
    json!({
        "agent": "diagnosis-analyst",
        "status": if concluded { "ok" } else { "partial" },
        "root_cause": if concluded { "TiDB CPU saturation: tidb-07 ran at 22.84 of 32 cores" } else { "" },
        "confidence": if concluded { "medium" } else { "low" },
        "key_evidence": key_evidence,
        "rejected_causes": [{"cause": "memory pressure", "reason": "resident memory stays far below the limit"}],
        "needs_more_evidence": !concluded,
        "missing_evidence": if concluded { vec![] } else { vec![MEMORY_GAP] },
        "quality_checks": [{"check": GO_GC_CHECK,
                            "result": if concluded { "passed" } else { "failed" },
                            "detail": "go_gc_duration_seconds and go_memstats_heap_inuse_bytes read from the evidence"}],
        "final_response": if concluded { "TiDB high CPU on SaaS01: tidb-07 saturated its 32 cores (22.84 peak)." } else { "" },
    })
}

/// The analyst's report of pass `pass`.
fn report(id: &str, pass: u8) -> Reply {
    let analysis = analysis(pass, Vec::new());
    write(
        id,
        REPORT_PATH,
        &json!({"status": analysis["status"], "needs_more_evidence": analysis["needs_more_evidence"],
                "root_cause": analysis["root_cause"]}),
    )
}

/// The JSON file a read call `id` showed (null when it showed none).
fn read_json(request: &ChatRequest, id: &str) -> Value {
    request
        .outcome(id)
        .and_then(|o| read_contents(&o.output))
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// The analyst: the first pass asks for more evidence (after trying a managed tool and
/// the evidence agent's file); the second pass concludes from both passes' evidence.
pub fn analyst(names: &ToolNames) -> impl Play + 'static {
    let clinic = names.of(Tool::Clinic).to_owned();
    let first = Steps::new()
        .then(load_transport_skill(ANALYST_LOADS_SKILL))
        .then(|_: &ChatRequest| {
            Reply::call(
                "a1_read_evidence",
                "read",
                json!({"filePath": EVIDENCE_AGENT_OUTPUT}),
            )
        })
        .then(move |_: &ChatRequest| {
            Reply::call(
                ANALYST_MANAGED_CALL,
                clinic.clone(),
                clinic_arguments_for_analyst(),
            )
        });
    let first = try_foreign_write(
        first,
        ANALYST_WRITES_EVIDENCE,
        ANALYST_REREADS_EVIDENCE,
        EVIDENCE_AGENT_OUTPUT,
        "diagnosis-analyst",
    )
    .then(|_: &ChatRequest| {
        write(
            "a1_write_output",
            ANALYST_OUTPUT,
            &analysis(1, vec![format!("{METRICS_FILE}: TiDB CPU near saturation")]),
        )
    })
    .then(|_: &ChatRequest| report("a1_write_report", 1))
    .then(|_: &ChatRequest| Reply::text("Analysis written; more evidence needed."));
    let second = Steps::new()
        .then(|_: &ChatRequest| {
            Reply::call("a2_read_metrics", "read", json!({"filePath": METRICS_FILE}))
        })
        .then(|request: &ChatRequest| {
            let metrics = read_json(request, "a2_read_metrics");
            let cited = metrics["results"]
                .as_object()
                .map(|results| {
                    results
                        .iter()
                        .map(|(call, details)| {
                            format!(
                                "{METRICS_FILE} {call}: {} {}",
                                details["query_id"]
                                    .as_str()
                                    .or_else(|| details
                                        .pointer("/items/0/query_id")
                                        .and_then(Value::as_str))
                                    .unwrap_or("?"),
                                details["status"].as_str().unwrap_or("?")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            write("a2_write_output", ANALYST_OUTPUT, &analysis(2, cited))
        })
        .then(|_: &ChatRequest| report("a2_write_report", 2))
        .then(|_: &ChatRequest| Reply::text("Analysis written."));
    by_task(pass_line(2, 1), second, first)
}

fn clinic_arguments_for_analyst() -> Value {
    clinic("analyst_cpu", test_support::TIDB_CPU.expr, Some("cores"))
}

/// An evidence agent that writes no output on its first attempt and a schema-invalid
/// one on its retry.
pub fn failing_evidence_agent() -> impl Play + 'static {
    let first = Steps::new().then(|_: &ChatRequest| Reply::text("No evidence could be collected."));
    let second = Steps::new()
        .then(|_: &ChatRequest| {
            write(
                "b2_write_invalid",
                EVIDENCE_AGENT_OUTPUT,
                &json!({"agent": "evidence-agent", "status": "done"}),
            )
        })
        .then(|_: &ChatRequest| Reply::text("Evidence written."));
    by_task(pass_line(1, 2), second, first)
}
