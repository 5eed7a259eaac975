//! The three-agent diagnosis run end to end in the real OpenCode (the pinned 1.18.33,
//! isolated and offline) through its own agent loop: a generated workspace with the
//! three packages' MCP servers registered (deployable folders, Ed25519 envelopes, real
//! Prometheus behind the Clinic and Manus fronts, real Chromium for Wetech), and the
//! scripted model of the test support playing the orchestrator, the evidence agent and
//! the analyst. Everything asserted comes from what OpenCode did: the requests it sent
//! the model (tools offered, results returned), the files on disk, the servers' audit
//! logs and the environment of the processes it started.
//!
//! Each case of the evidence agent is one step of its script (`e2e/agents.rs`), so a
//! new case is one more step and one more expectation. The three servers share one turn
//! ledger: the first evidence pass is one turn (an unchanged retry is refused; a shared
//! failure of Manus stops the turn for Clinic's next call), and the extra pass runs
//! under new envelopes, a new turn. The diagnosis runs over stdio servers OpenCode starts
//! and over remote servers (Streamable HTTP, each started apart with only its own
//! variables, OpenCode holding only the session's token; the next turn's envelopes are
//! delivered to the servers while OpenCode runs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod e2e;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use e2e::agents::{
    self, ANALYST_LOADS_SKILL, ANALYST_MANAGED_CALL, ANALYST_REREADS_EVIDENCE,
    ANALYST_WRITES_EVIDENCE, EVIDENCE_LOADS_SKILL, EVIDENCE_REREADS_ANALYSIS,
    EVIDENCE_WRITES_ANALYSIS, Expect, METRICS_FILE, ManagedCall, SHARED_FAILURE, ToolNames,
};
use e2e::deployment::{Deployment, MODEL_KEY, MODEL_KEY_ENV, NEXT_POLICY_ID, POLICY_ID, Shape};
use e2e::orchestrator::{Protocol, required_skills};
use e2e::transcript::{REFUSED, Transcript, WROTE, read_contents};
use evidence_result::{
    Correction, Details, ErrorInfo, FailureClass, QueryId, RequestDigest, Status, ToolResult,
};
use evidence_test_support::model::{Play, Reply, Speaker};
use evidence_test_support::{Script, ScriptedModel};
use opencode_workspace::layout::{ANALYST_OUTPUT, EVIDENCE_AGENT_OUTPUT, REPORT_PATH};
use opencode_workspace::orchestration::{ChildOutcome, Conclusion, Step};
use opencode_workspace::outputs::{ChildFailure, DiagnosisContext};
use opencode_workspace::protocol::INSUFFICIENT_EVIDENCE_REPLY;
use opencode_workspace::{AgentRole, ChildOutputReader, SESSION_TOKEN_ENV};
use serde_json::Value;

const ORCHESTRATOR: &str = "diagnosis-orchestrator";
const EVIDENCE: &str = "evidence-agent";
const ANALYST: &str = "diagnosis-analyst";

/// The script of the three agents, each known by the first line of its prompt.
fn script(markers: &[(AgentRole, String)], parts: Vec<(AgentRole, Box<dyn Play>)>) -> Script {
    let mut script = Script::new().title("APID-29213 diagnosis");
    for (role, play) in parts {
        let marker = &markers.iter().find(|(r, _)| *r == role).unwrap().1;
        script = script.agent(role.as_str(), marker.clone(), play);
    }
    script
}

/// The subagents OpenCode's `task` tool offers, from its description.
fn offered_subagents(description: &str) -> BTreeSet<String> {
    description
        .split_once("Available agent types")
        .map(|(_, list)| {
            list.lines()
                .filter_map(|line| line.strip_prefix("- "))
                .filter_map(|line| line.split_once(':').map(|(name, _)| name.trim().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// The write call `id`'s `content` argument.
fn written(transcript: &Transcript, id: &str) -> String {
    let outcome = transcript.outcome(id);
    assert_eq!(outcome.output, WROTE, "{id}");
    let arguments: Value = serde_json::from_str(&outcome.call.arguments).unwrap();
    arguments["content"].as_str().unwrap().to_owned()
}

/// What one query's result says: the one item of a Clinic batch, or the details.
struct Query<'a> {
    status: Status,
    query_id: Option<&'a QueryId>,
    digest: Option<&'a RequestDigest>,
    has_evidence: bool,
    no_data: bool,
    has_discovery: bool,
    error: Option<&'a ErrorInfo>,
    correction: Option<&'a Correction>,
}

fn query_of(details: &Details) -> Query<'_> {
    match details.items.as_slice() {
        [item] => Query {
            status: item.status,
            query_id: Some(&item.query_id),
            digest: item.request_digest.as_ref(),
            has_evidence: item.evidence.is_some(),
            no_data: item.evidence.as_ref().is_some_and(|e| e.is_no_data()),
            has_discovery: item.discovery.as_ref().is_some_and(|d| d.total > 0),
            error: item.error.as_ref(),
            correction: item.correction.as_ref(),
        },
        _ => Query {
            status: details.status,
            query_id: details.query_id.as_ref(),
            digest: details.request_digest.as_ref(),
            has_evidence: details.evidence.is_some(),
            no_data: details.evidence.as_ref().is_some_and(|e| e.is_no_data()),
            has_discovery: details.discovery.as_ref().is_some_and(|d| d.total > 0),
            error: details.error.as_ref(),
            correction: details.correction.as_ref(),
        },
    }
}

/// A managed result as the model read it: exactly the `text` of a `ToolResult` (the JSON
/// of its details, byte for byte), checked against the expectation and against the
/// package's audit record of the call (its turn, its request digest, and the size of its
/// text).
fn check_managed(
    transcript: &Transcript,
    call: &ManagedCall,
    record: &Value,
    policy_id: &str,
) -> ToolResult {
    let outcome = transcript.outcome(call.id);
    let details: Details = serde_json::from_str(&outcome.output).unwrap_or_else(|e| {
        panic!(
            "{}: the model did not read a result's text ({e}): {}",
            call.id, outcome.output
        )
    });
    let result = ToolResult::new(details).unwrap();
    assert_eq!(
        result.text(),
        outcome.output,
        "{}: the tool message is not exactly the result's text",
        call.id
    );
    let query = query_of(result.details());
    match call.expect {
        Expect::Success => {
            assert_eq!(query.status, Status::Ok, "{}: {}", call.id, outcome.output);
            assert!(query.has_evidence && !query.no_data, "{}", call.id);
        }
        Expect::NoData => {
            assert_eq!(query.status, Status::Ok, "{}: {}", call.id, outcome.output);
            assert!(query.no_data, "{}: {}", call.id, outcome.output);
        }
        Expect::Discovered => {
            assert_eq!(query.status, Status::Ok, "{}: {}", call.id, outcome.output);
            assert!(query.has_discovery, "{}: {}", call.id, outcome.output);
        }
        Expect::Failure(code, class) => {
            let error = query
                .error
                .unwrap_or_else(|| panic!("{}: {}", call.id, outcome.output));
            assert_eq!(
                (error.code.as_str(), error.class),
                (code, class),
                "{}",
                call.id
            );
        }
    }
    let digests = serde_json::to_value(query.digest.into_iter().collect::<Vec<_>>()).unwrap();
    assert_eq!(
        record["request_digests"], digests,
        "{}: the audit record is of another request",
        call.id
    );
    assert_eq!(record["policy_id"], policy_id, "{}: turn", call.id);
    assert_eq!(
        record["output_bytes"].as_u64(),
        Some(outcome.output.len() as u64),
        "{}: the model read another size than the server answered",
        call.id
    );
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_three_agent_diagnosis_runs_in_opencode_over_the_three_packages() {
    diagnose_over(Shape::Stdio).await;
}

/// The same diagnosis with the three servers over Streamable HTTP, each started apart
/// with only its own variables, OpenCode holding only the session's token: the second
/// evidence pass runs under the replaced policy the runtime delivered to the servers,
/// and no provider secret, key or envelope is in OpenCode's environment, configuration,
/// home, logs or workspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_three_agent_diagnosis_runs_in_opencode_over_remote_servers() {
    diagnose_over(Shape::Remote).await;
}

/// The three-agent diagnosis over the servers of `shape` (see the tests above).
async fn diagnose_over(shape: Shape) {
    let deployment = Arc::new(Deployment::start(shape).await);
    let names = ToolNames(
        deployment
            .packages
            .iter()
            .map(|p| (p.tool, p.tool_name()))
            .collect(),
    );
    let servers: Vec<_> = deployment
        .packages
        .iter()
        .map(|p| p.server.clone())
        .collect();
    let generator = e2e::generator(&servers);
    let markers = e2e::markers(&generator);

    // When the evidence agent first speaks, OpenCode has started every server: the
    // environment each serving process holds is read then.
    let environs: Arc<Mutex<BTreeMap<String, BTreeMap<String, String>>>> = Arc::default();
    let watched: Vec<_> = deployment
        .packages
        .iter()
        .map(|p| (p.identity(), p.pid_file.clone()))
        .collect();
    // Before each managed call the providers' query counts are noted. Before the shared
    // failure's call the Manus target starts refusing the reader; before the extra pass
    // the runtime writes the next turn's envelopes (and Manus serves again).
    let seen = environs.clone();
    // In the remote shape, the environment of every process that holds the session
    // token (OpenCode and its children) is read at each call.
    let agent_side: Arc<Mutex<Vec<BTreeMap<String, String>>>> = Arc::default();
    let agent_seen = agent_side.clone();
    let token = deployment.session.as_ref().map(|t| t.expose().to_owned());
    let sent: Sent = Arc::default();
    let noted = sent.clone();
    let providers = deployment.clone();
    let next_pass = agents::second_pass()[0].id;
    let hook: agents::Hook = Arc::new(move |call: &str| {
        let mut noted = noted.lock().unwrap();
        if !noted.iter().any(|(id, _)| id == call) {
            noted.push((call.to_owned(), provider_queries(&providers)));
        }
        if call == SHARED_FAILURE {
            providers.manus_front.set_forbidden(true);
        }
        if call == next_pass {
            providers.manus_front.set_forbidden(false);
            providers.next_turn();
        }
        if let Some(token) = &token {
            agent_seen
                .lock()
                .unwrap()
                .extend(environments_holding(&format!(
                    "{SESSION_TOKEN_ENV}={token}"
                )));
        }
        let mut seen = seen.lock().unwrap();
        for (identity, pid_file) in &watched {
            if !seen.contains_key(identity) {
                seen.insert(
                    identity.clone(),
                    e2e::deployment::serving_environment(identity, pid_file),
                );
            }
        }
    });

    let model = ScriptedModel::start(script(
        &markers,
        vec![
            (AgentRole::DiagnosisOrchestrator, Box::new(Protocol::new())),
            (
                AgentRole::EvidenceAgent,
                Box::new(agents::evidence_agent(&names, hook)),
            ),
            (
                AgentRole::DiagnosisAnalyst,
                Box::new(agents::analyst(&names)),
            ),
        ],
    ))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let ws = e2e::workspace(dir.path(), &generator, &model);

    // Over stdio OpenCode holds every package's secrets (each server's configuration
    // names its own as `{env:NAME}`), the model's key and the signer's key id: all of it
    // reaches every server process OpenCode starts. In the remote shape it holds the
    // session's token instead of the secrets.
    let mut env: Vec<(&str, String)> = match &deployment.session {
        None => deployment.secrets.clone(),
        Some(token) => vec![(SESSION_TOKEN_ENV, token.expose().to_owned())],
    };
    env.push((MODEL_KEY_ENV, MODEL_KEY.to_owned()));
    env.push(("EVIDENCE_SIGNING_KID", "decoy-signer-2026".to_owned()));
    let cli = e2e::opencode(home.path(), &env);
    let (run, transcript) = e2e::diagnose(
        cli,
        &ws,
        &model,
        "Diagnose APID-29213: TiDB high CPU on SaaS01, 2026-07-21 21:50-22:05 UTC+8.",
    )
    .await;

    // OpenCode asks for a title as it starts (without tools, alongside the first agent
    // request); every request is streamed.
    let titles: Vec<_> = transcript
        .exchanges
        .iter()
        .enumerate()
        .filter(|(_, e)| e.speaker == Speaker::Title)
        .collect();
    assert!(
        matches!(titles.as_slice(), [(0 | 1, _)]),
        "title requests: {:?}",
        titles.iter().map(|(i, _)| i).collect::<Vec<_>>()
    );
    assert!(titles[0].1.request.tools().is_empty());
    assert!(transcript.exchanges.iter().all(|e| e.request.is_streamed()));

    // File writes and tool lists first: a break there changes the rest of the run.
    check_files(&transcript, &ws);
    check_tool_lists(&transcript, &deployment, &names);
    check_managed_results(&transcript, &deployment, &sent.lock().unwrap());
    check_delegation(&transcript);
    check_workflow(&transcript);
    check_secrets(
        &transcript,
        &deployment,
        &[&ws, home.path(), deployment.dir()],
        &run,
    );
    check_environments(&deployment, &environs.lock().unwrap());
    if shape == Shape::Remote {
        check_agent_side(
            &deployment,
            &agent_side.lock().unwrap(),
            &[&ws, home.path()],
            &run,
        );
    }
}

/// The environment of every process whose environment holds `entry` (`NAME=value`).
fn environments_holding(entry: &str) -> Vec<BTreeMap<String, String>> {
    let mut found = Vec::new();
    for process in std::fs::read_dir("/proc").unwrap().flatten() {
        let is_pid = process
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        let Ok(environ) = std::fs::read(process.path().join("environ")) else {
            continue;
        };
        if !is_pid || !environ.split(|b| *b == 0).any(|e| e == entry.as_bytes()) {
            continue;
        }
        found.push(
            environ
                .split(|b| *b == 0)
                .filter(|e| !e.is_empty())
                .map(|e| {
                    let e = String::from_utf8_lossy(e);
                    let (name, value) = e.split_once('=').unwrap_or((&e, ""));
                    (name.to_owned(), value.to_owned())
                })
                .collect(),
        );
    }
    found
}

/// The remote shape's agent side holds no provider secret, key or envelope: not in the
/// environment of any process of OpenCode's (read during the run: `/proc/<pid>/environ`),
/// not in its configuration, its home (logs, session store), the workspace or its output;
/// its configuration names no variable but the session token and the model's key, and
/// every server OpenCode registered is remote.
fn check_agent_side(
    deployment: &Deployment,
    environs: &[BTreeMap<String, String>],
    roots: &[&std::path::Path],
    run: &e2e::RunOutput,
) {
    assert!(
        !environs.is_empty(),
        "no process of OpenCode's was found holding the token"
    );
    let provider_secrets: Vec<String> = deployment
        .secrets
        .iter()
        .map(|(_, v)| v.clone())
        .chain(deployment.inner_secrets.iter().cloned())
        .collect();
    let forbidden: Vec<&String> = provider_secrets
        .iter()
        .chain(deployment.signing_material())
        .collect();
    for environ in environs {
        for (name, value) in environ {
            assert!(
                !forbidden.iter().any(|f| value.contains(f.as_str())),
                "OpenCode's process holds a provider secret or signing material in {name}"
            );
            assert!(
                !name.starts_with("CLINIC_")
                    && !name.starts_with("MANUS_")
                    && !name.starts_with("WETECH_")
                    && name != "EVIDENCE_SIGNING_KEY"
                    && name != "EVIDENCE_TRUSTED_CONTEXT"
                    && name != "EVIDENCE_POLICY_KEYS",
                "OpenCode's process holds {name}"
            );
        }
    }
    let material: Vec<String> = provider_secrets
        .into_iter()
        .chain(deployment.signing_material().iter().cloned())
        .collect();
    let found = e2e::secrets_in_files(roots, &material);
    assert!(
        found.is_empty(),
        "secrets or signing material in files: {found:?}"
    );
    for text in [&run.stdout, &run.stderr] {
        assert!(!material.iter().any(|m| text.contains(m.as_str())));
    }
    let ws = roots[0];
    let config: Value = serde_json::from_str(
        &std::fs::read_to_string(ws.join(opencode_workspace::layout::CONFIG_PATH)).unwrap(),
    )
    .unwrap();
    let text = config.to_string();
    let named: BTreeSet<&str> = text
        .split("{env:")
        .skip(1)
        .filter_map(|rest| rest.split('}').next())
        .collect();
    assert_eq!(
        named,
        BTreeSet::from([SESSION_TOKEN_ENV, MODEL_KEY_ENV]),
        "{text}"
    );
    for package in &deployment.packages {
        let entry = &config["mcp"][package.identity()];
        assert_eq!(entry["type"], "remote", "{entry}");
        assert_eq!(entry["oauth"], false, "{entry}");
    }
}

/// The orchestrator's `task` tool offers exactly the two subagents; every task a
/// subagent received opens with a non-empty required-skill list, the protocol's list
/// for that agent.
fn check_delegation(transcript: &Transcript) {
    let catalog = e2e::catalog();
    for exchange in transcript.of(ORCHESTRATOR) {
        let task = exchange
            .request
            .tool("task")
            .expect("the orchestrator has no task tool");
        assert_eq!(
            offered_subagents(&task.description),
            BTreeSet::from([EVIDENCE.to_owned(), ANALYST.to_owned()]),
            "{}",
            task.description
        );
    }
    for (agent, role) in [
        (EVIDENCE, AgentRole::EvidenceAgent),
        (ANALYST, AgentRole::DiagnosisAnalyst),
    ] {
        let expected: Vec<String> = catalog
            .default_skills(role)
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect();
        for session in transcript.sessions(agent) {
            let task = session[0].first_user_text();
            let skills = required_skills(task, "");
            assert!(
                !skills.is_empty(),
                "{agent} got a task without required skills:\n{task}"
            );
            assert_eq!(skills, expected, "{agent}");
        }
    }
}

/// The evidence agent is offered the three managed tools as their servers list them;
/// no other agent is offered any, and the analyst's call of one reaches no server.
fn check_tool_lists(transcript: &Transcript, deployment: &Deployment, names: &ToolNames) {
    for exchange in transcript.of(EVIDENCE) {
        for package in &deployment.packages {
            let name = names.of(package.tool);
            let offered = exchange.request.tool(name).unwrap_or_else(|| {
                panic!(
                    "{name} not offered to the evidence agent: {:?}",
                    exchange.request.tool_names()
                )
            });
            let listing = evidence_tool::mcp::tool_listing(
                &evidence_package::Package::load(&package.dir).unwrap(),
            )
            .unwrap();
            assert_eq!(
                offered.description,
                listing.description.as_deref().unwrap_or_default(),
                "{name}"
            );
            assert_eq!(
                offered.parameters,
                Value::Object((*listing.input_schema).clone()),
                "{name}"
            );
        }
        let managed: Vec<_> = exchange
            .request
            .tool_names()
            .into_iter()
            .filter(|n| n.starts_with("managed_auto_oncall"))
            .collect();
        assert_eq!(managed.len(), 3, "{managed:?}");
    }
    for agent in [ORCHESTRATOR, ANALYST] {
        for exchange in transcript.of(agent) {
            let names = exchange.request.tool_names();
            assert!(
                names.iter().all(|n| !n.starts_with("managed_auto_oncall")),
                "{agent} is offered {names:?}"
            );
        }
    }
    // The transport skill loads for the evidence agent, and names queryId; the analyst's
    // skill permission denies it.
    let loaded = transcript.outcome(EVIDENCE_LOADS_SKILL);
    assert!(
        loaded
            .output
            .contains("<skill_content name=\"managed-evidence-tools\">"),
        "{}",
        loaded.output
    );
    assert!(loaded.output.contains("queryId"), "{}", loaded.output);
    let denied = transcript.outcome(ANALYST_LOADS_SKILL);
    assert!(
        denied.output.starts_with(
            "The user has specified a rule which prevents you from using this specific tool call"
        ) && !denied.output.contains("<skill_content"),
        "the analyst's skill permission did not deny the transport skill: {}",
        denied.output
    );
    let refused = transcript.outcome(ANALYST_MANAGED_CALL);
    assert!(
        serde_json::from_str::<Details>(&refused.output).is_err(),
        "the analyst's managed call was answered by a server: {}",
        refused.output
    );
    // OpenCode answers the call itself, naming the tools the analyst has: none managed.
    let available = refused
        .output
        .strip_prefix("Model tried to call unavailable tool")
        .and_then(|rest| rest.split_once("Available tools:"))
        .unwrap_or_else(|| panic!("not OpenCode's unavailable-tool answer: {}", refused.output))
        .1;
    assert!(
        !available.contains("managed_auto_oncall"),
        "{}",
        refused.output
    );
}

/// The provider queries of each package so far, in the deployment's order.
fn provider_queries(deployment: &Deployment) -> Vec<usize> {
    deployment
        .packages
        .iter()
        .map(|p| deployment.provider_queries(p.tool))
        .collect()
}

/// [`provider_queries`] as the evidence agent was about to make each managed call, by
/// call id, in call order.
type Sent = Arc<Mutex<Vec<(String, Vec<usize>)>>>;

/// Each managed result the model read is exactly the tool's text; the rejection is
/// corrected in the same turn with the same `queryId`; the audit logs hold one record
/// per call that reached a server, in the turn of its pass; each call sent one query to
/// its own provider and none to another, or nothing at all (an unchanged retry, a call
/// of a stopped turn); the three servers kept both turns in the one ledger they share.
fn check_managed_results(
    transcript: &Transcript,
    deployment: &Deployment,
    sent: &[(String, Vec<usize>)],
) {
    let passes = [
        (POLICY_ID, agents::first_pass()),
        (NEXT_POLICY_ID, agents::second_pass()),
    ];
    let calls: Vec<ManagedCall> = passes.iter().flat_map(|(_, c)| c.clone()).collect();
    let mut results = BTreeMap::new();
    let mut audits: BTreeMap<String, std::vec::IntoIter<Value>> = deployment
        .packages
        .iter()
        .map(|p| (p.identity(), p.audit_records().into_iter()))
        .collect();
    for (policy_id, pass) in &passes {
        for call in pass {
            let identity = call.tool.identity().to_string();
            let record = audits
                .get_mut(&identity)
                .and_then(Iterator::next)
                .unwrap_or_else(|| panic!("{}: no audit record in {identity}", call.id));
            results.insert(call.id, check_managed(transcript, call, &record, policy_id));
        }
    }
    // The stop names the shared failure that caused it, of another package.
    let stopped = calls
        .iter()
        .find(|c| c.expect == Expect::Failure("turn_stopped", FailureClass::PolicyViolation))
        .unwrap();
    let stop_detail = results[stopped.id]
        .details()
        .detail_error
        .clone()
        .unwrap_or_default();
    let manus = deployment.package(evidence_tool::Tool::Manus).identity();
    assert_ne!(stopped.tool, evidence_tool::Tool::Manus);
    assert!(
        stop_detail.contains(&manus) && stop_detail.contains("manus_http_403"),
        "{stop_detail}"
    );
    for (policy_id, pass) in &passes {
        let entries =
            std::fs::read_to_string(deployment.ledger().join(format!("{policy_id}.jsonl")))
                .unwrap_or_else(|e| panic!("no turn {policy_id} in the shared ledger: {e}"));
        let packages: BTreeSet<String> = entries
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter_map(|e| e["package"].as_str().map(str::to_owned))
            .collect();
        let called: BTreeSet<String> = pass.iter().map(|c| c.tool.identity().to_string()).collect();
        assert_eq!(packages, called, "the packages of turn {policy_id}");
    }
    let order: Vec<&str> = sent.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        order,
        calls.iter().map(|c| c.id).collect::<Vec<_>>(),
        "call order"
    );
    let after = provider_queries(deployment);
    for (index, call) in calls.iter().enumerate() {
        let before = &sent[index].1;
        let next = sent.get(index + 1).map_or(&after, |(_, counts)| counts);
        let expected: Vec<usize> = deployment
            .packages
            .iter()
            .map(|p| usize::from(p.tool == call.tool && call.sent))
            .collect();
        let made: Vec<usize> = next.iter().zip(before).map(|(n, b)| n - b).collect();
        assert_eq!(made, expected, "{}: provider queries it sent", call.id);
    }
    for call in calls.iter().filter(|c| c.corrects.is_some()) {
        let rejected = query_of(results[call.corrects.unwrap()].details());
        let corrected = query_of(results[call.id].details());
        assert_eq!(rejected.query_id, corrected.query_id, "{}", call.id);
        let correction = rejected.correction.unwrap();
        assert!(correction.allowed, "{}", call.id);
    }
    for package in &deployment.packages {
        let made: Vec<_> = calls.iter().filter(|c| c.tool == package.tool).collect();
        assert_eq!(
            package.audit_records().len(),
            made.len(),
            "{}: one audit record per call that reached the server",
            package.identity()
        );
        assert_eq!(
            deployment.provider_queries(package.tool),
            made.iter().filter(|c| c.sent).count(),
            "{}: provider queries",
            package.identity()
        );
    }
}

/// Each agent wrote its own files (schema-valid) and was refused the other's, which
/// stayed as their owner wrote them.
fn check_files(transcript: &Transcript, ws: &std::path::Path) {
    for (agent, id) in [
        (EVIDENCE, "p1_write_metrics"),
        (EVIDENCE, "p1_write_output"),
        (ANALYST, "a1_write_output"),
        (ANALYST, "a1_write_report"),
        (EVIDENCE, "p2_write_metrics"),
        (EVIDENCE, "p2_write_output"),
        (ANALYST, "a2_write_output"),
        (ANALYST, "a2_write_report"),
    ] {
        assert_eq!(
            transcript.outcome(id).output,
            WROTE,
            "{agent} could not write its own file ({id})"
        );
    }
    let reader = ChildOutputReader::new().unwrap();
    let evidence = reader.read_evidence(ws).unwrap();
    assert!(
        evidence.summary.starts_with("Pass 2"),
        "{}",
        evidence.summary
    );
    let analysis = reader
        .read_analysis(ws, &DiagnosisContext::default().tidb_high_cpu())
        .unwrap();
    assert!(!analysis.needs_more_evidence);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.join(REPORT_PATH)).unwrap()).unwrap();
    assert_eq!(report["status"], "ok");
    assert_eq!(
        std::fs::read_to_string(ws.join(EVIDENCE_AGENT_OUTPUT)).unwrap(),
        written(transcript, "p2_write_output")
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(ANALYST_OUTPUT)).unwrap(),
        written(transcript, "a2_write_output")
    );

    for (refused, reread, owner_write) in [
        (
            ANALYST_WRITES_EVIDENCE,
            ANALYST_REREADS_EVIDENCE,
            "p1_write_output",
        ),
        (
            EVIDENCE_WRITES_ANALYSIS,
            EVIDENCE_REREADS_ANALYSIS,
            "a1_write_output",
        ),
    ] {
        let outcome = transcript.outcome(refused);
        assert!(
            outcome.output.starts_with(REFUSED),
            "{refused}: {}",
            outcome.output
        );
        let after = read_contents(&transcript.outcome(reread).output).unwrap();
        assert_eq!(
            after,
            written(transcript, owner_write).trim_end(),
            "{refused} changed the file"
        );
    }

    // The extra pass reused the first pass's evidence: the file holds both.
    let metrics: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.join(METRICS_FILE)).unwrap()).unwrap();
    assert_eq!(metrics["passes"], serde_json::json!([1, 2]));
    let recorded: BTreeSet<&str> = metrics["results"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let made: BTreeSet<&str> = agents::first_pass()
        .iter()
        .chain(agents::second_pass().iter())
        .map(|c| c.id)
        .collect();
    assert_eq!(recorded, made);
    for call in made {
        assert!(
            analysis.key_evidence.iter().any(|k| k.contains(call)),
            "the conclusion does not cite {call}: {:?}",
            analysis.key_evidence
        );
    }
}

/// The workflow as the orchestrator saw it: evidence, analysis asking for more, one
/// extra evidence pass and one extra analyst pass, then the answer.
fn check_workflow(transcript: &Transcript) {
    assert_eq!(transcript.sessions(EVIDENCE).len(), 2);
    assert_eq!(transcript.sessions(ANALYST).len(), 2);
    let last = transcript.of(ORCHESTRATOR).last().copied().unwrap();
    let observed = Protocol::new().observe(&last.request).unwrap();
    let outcomes: Vec<&ChildOutcome> = observed
        .run
        .history()
        .iter()
        .filter_map(|s| match s {
            Step::ReadOutput { outcome, .. } => Some(outcome),
            _ => None,
        })
        .collect();
    assert!(
        matches!(
            outcomes.as_slice(),
            [
                ChildOutcome::Evidence { .. },
                ChildOutcome::Analysis {
                    needs_more_evidence: true,
                    ..
                },
                ChildOutcome::Evidence { .. },
                ChildOutcome::Analysis {
                    needs_more_evidence: false,
                    ..
                },
            ]
        ),
        "{outcomes:?}"
    );
    let mut run = observed.run;
    run.apply(Step::Answer).unwrap();
    assert_eq!(run.conclusion(), Some(Conclusion::Answered));
    assert_eq!(
        last.reply,
        Reply::text(observed.analysis.unwrap().final_response)
    );
}

/// No secret is in the requests the model got, the replies, the workspace, OpenCode's
/// home (its logs and session store), the audit logs or OpenCode's output.
fn check_secrets(
    transcript: &Transcript,
    deployment: &Deployment,
    roots: &[&std::path::Path],
    run: &e2e::RunOutput,
) {
    let secrets = deployment.secret_values();
    for exchange in &transcript.exchanges {
        let text = exchange.request.body().to_string();
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a secret reached the model"
            );
        }
    }
    for text in [&run.stdout, &run.stderr] {
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a secret is in OpenCode's output"
            );
        }
    }
    let found = e2e::secrets_in_files(roots, &secrets);
    assert!(
        found.is_empty(),
        "secrets in files: {:?}",
        found
            .iter()
            .map(|(f, i)| (f, deployment.secret_names()[*i]))
            .collect::<Vec<_>>()
    );
}

/// Each serving process holds only its own package's variables: its own secrets, none
/// of another package's, not the model's key or the signer's key id.
fn check_environments(
    deployment: &Deployment,
    environs: &BTreeMap<String, BTreeMap<String, String>>,
) {
    let foreign_values: Vec<(&str, &str)> = deployment
        .secrets
        .iter()
        .map(|(n, v)| (*n, v.as_str()))
        .chain([(MODEL_KEY_ENV, MODEL_KEY)])
        .collect();
    for package in &deployment.packages {
        let environ = environs
            .get(&package.identity())
            .unwrap_or_else(|| panic!("{}: environment not read", package.identity()));
        let allowed = evidence_tool::mcp::server_variables(package.tool);
        for name in environ.keys() {
            assert!(
                allowed.contains(&name.as_str()),
                "{} serves with {name}",
                package.identity()
            );
        }
        for own in &package.own_secrets {
            let value = &deployment.secrets.iter().find(|(n, _)| n == own).unwrap().1;
            assert_eq!(
                environ.get(*own),
                Some(value),
                "{}: {own}",
                package.identity()
            );
        }
        for (name, value) in &foreign_values {
            if package.own_secrets.contains(name) {
                continue;
            }
            assert!(
                environ.values().all(|v| !v.contains(value)),
                "{} holds {name}",
                package.identity()
            );
        }
        assert!(!environ.contains_key("EVIDENCE_SIGNING_KID"));
    }
}

/// A child's output missing, then invalid after the one retry, ends in the protocol's
/// insufficient-evidence reply naming the gap; the analyst is never called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_then_invalid_child_output_is_retried_once_then_reported() {
    let generator = e2e::generator(&[]);
    let markers = e2e::markers(&generator);
    let model = ScriptedModel::start(script(
        &markers,
        vec![
            (AgentRole::DiagnosisOrchestrator, Box::new(Protocol::new())),
            (
                AgentRole::EvidenceAgent,
                Box::new(agents::failing_evidence_agent()),
            ),
        ],
    ))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let ws = e2e::workspace(dir.path(), &generator, &model);
    let cli = e2e::opencode(home.path(), &[(MODEL_KEY_ENV, MODEL_KEY.to_owned())]);
    let (_, transcript) = e2e::diagnose(
        cli,
        &ws,
        &model,
        "Diagnose APID-29213: TiDB high CPU on SaaS01.",
    )
    .await;

    assert_eq!(transcript.sessions(EVIDENCE).len(), 2);
    assert!(transcript.of(ANALYST).is_empty());
    let last = transcript.of(ORCHESTRATOR).last().copied().unwrap();
    let observed = Protocol::new().observe(&last.request).unwrap();
    let failures: Vec<ChildFailure> = observed
        .run
        .history()
        .iter()
        .filter_map(|s| match s {
            Step::ReadOutput {
                outcome: ChildOutcome::Failed { failure },
                ..
            } => Some(*failure),
            _ => None,
        })
        .collect();
    assert_eq!(
        failures,
        [ChildFailure::Missing, ChildFailure::SchemaInvalid]
    );
    let Reply::Text(answer) = &last.reply else {
        panic!("the orchestrator ended with {:?}", last.reply)
    };
    assert!(answer.starts_with(INSUFFICIENT_EVIDENCE_REPLY), "{answer}");
    assert!(answer.contains(EVIDENCE_AGENT_OUTPUT), "{answer}");
    let mut run_state = observed.run;
    run_state
        .apply(Step::InsufficientEvidence {
            gaps: vec![EVIDENCE_AGENT_OUTPUT.to_owned()],
            next_steps: vec!["rerun".to_owned()],
        })
        .unwrap();
    assert_eq!(
        run_state.conclusion(),
        Some(Conclusion::InsufficientEvidence)
    );
}
