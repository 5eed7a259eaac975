//! The child output schemas: committed copies, validity, the plan's examples, and reading
//! child outputs from files.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;
use std::path::Path;

use opencode_workspace::{
    ChildOutputError, ChildOutputReader, TaskSupport,
    layout::{ANALYST_OUTPUT, ANALYST_SCHEMA_PATH, EVIDENCE_AGENT_OUTPUT, EVIDENCE_SCHEMA_PATH},
    orchestration::ChildOutcome,
    outputs::{
        CheckResult, ChildFailure, DiagnosisAnalystOutput, DiagnosisContext, EvidenceAgentOutput,
        GO_GC_CHECK, MAX_CHILD_OUTPUT_BYTES, RejectedCause, RunStatus, analyst_output_problems,
        diagnosis_analyst_schema, evidence_agent_schema,
    },
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap();
    text.push('\n');
    text
}

fn check_committed(name: &str, schema: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schemas")
        .join(name);
    let expected = pretty(schema);
    if std::env::var_os("UPDATE_SCHEMAS").is_some() {
        fs::write(&path, &expected).unwrap();
        return;
    }
    let committed = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "schemas/{name} is stale or missing: run `UPDATE_SCHEMAS=1 cargo test -p opencode-workspace --test schemas` to regenerate it"
    );
}

#[test]
fn committed_schemas_are_current() {
    check_committed(
        "evidence-agent-output.schema.json",
        &evidence_agent_schema(),
    );
    check_committed(
        "diagnosis-analyst-output.schema.json",
        &diagnosis_analyst_schema(),
    );
}

#[test]
fn workspace_schemas_are_the_generated_ones_and_valid_json_schema() {
    let dir = tempfile::tempdir().unwrap();
    common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap();
    for (path, schema) in [
        (EVIDENCE_SCHEMA_PATH, evidence_agent_schema()),
        (ANALYST_SCHEMA_PATH, diagnosis_analyst_schema()),
    ] {
        let text = fs::read_to_string(dir.path().join(path)).unwrap();
        let written: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(written, schema, "{path}");
        jsonschema::meta::validate(&written).unwrap_or_else(|e| panic!("{path}: {e}"));
        // The plan says what an output must include, not that it may hold nothing else.
        assert_ne!(written["additionalProperties"], json!(false), "{path}");
        assert!(jsonschema::validator_for(&written).is_ok());
    }
}

fn plan_evidence(status: &str) -> Value {
    json!({
        "agent": "evidence-agent",
        "status": status,
        "summary": "",
        "scope": {
            "cluster_id": "",
            "time_range": {},
            "tier": "",
            "parent_id": "",
            "keyspace_id": ""
        },
        "evidence_files": [],
        "missing_evidence": [],
        "warnings": [],
        "next_recommended_skills": []
    })
}

fn plan_analyst(status: &str, confidence: &str) -> Value {
    json!({
        "agent": "diagnosis-analyst",
        "status": status,
        "root_cause": "",
        "confidence": confidence,
        "key_evidence": [],
        "rejected_causes": [],
        "needs_more_evidence": false,
        "missing_evidence": [],
        "quality_checks": [],
        "final_response": ""
    })
}

fn workspace_validator(path: &str) -> jsonschema::Validator {
    let dir = tempfile::tempdir().unwrap();
    common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap();
    let schema: Value =
        serde_json::from_str(&fs::read_to_string(dir.path().join(path)).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

#[test]
fn schemas_accept_the_plans_examples() {
    let evidence = workspace_validator(EVIDENCE_SCHEMA_PATH);
    let analyst = workspace_validator(ANALYST_SCHEMA_PATH);
    for status in ["ok", "partial", "failed"] {
        let example = plan_evidence(status);
        assert!(evidence.is_valid(&example), "{example}");
        serde_json::from_value::<EvidenceAgentOutput>(example).unwrap();
        for confidence in ["low", "medium", "high"] {
            let example = plan_analyst(status, confidence);
            assert!(analyst.is_valid(&example), "{example}");
            serde_json::from_value::<DiagnosisAnalystOutput>(example).unwrap();
        }
    }
    // The plan's placeholder spelling is not a value.
    assert!(!evidence.is_valid(&plan_evidence("ok|partial|failed")));
    assert!(!analyst.is_valid(&plan_analyst("ok", "low|medium|high")));
}

#[test]
fn schemas_accept_extra_fields_and_causes_as_strings_or_objects() {
    let evidence = workspace_validator(EVIDENCE_SCHEMA_PATH);
    let analyst = workspace_validator(ANALYST_SCHEMA_PATH);
    let mut extra = plan_evidence("ok");
    extra["collected_at"] = json!("2026-05-18T10:00:00Z");
    extra["scope"]["region"] = json!("us-east-1");
    extra["scope"]["time_range"] =
        json!({"start": "2026-05-18T10:00:00+08:00", "note": "from alert"});
    assert!(evidence.is_valid(&extra), "{extra}");
    serde_json::from_value::<EvidenceAgentOutput>(extra).unwrap();

    let mut causes = plan_analyst("ok", "medium");
    causes["rejected_causes"] = json!([
        "TiKV hot region: store CPU flat",
        {"cause": "PD scheduling", "reason": "no operator bursts", "evidence": ["evidences/events.json"]},
        {"cause": "network"}
    ]);
    causes["reviewer_notes"] = json!("extra field");
    assert!(analyst.is_valid(&causes), "{causes}");
    let parsed = serde_json::from_value::<DiagnosisAnalystOutput>(causes).unwrap();
    assert_eq!(
        parsed
            .rejected_causes
            .iter()
            .map(RejectedCause::cause)
            .collect::<Vec<_>>(),
        [
            "TiKV hot region: store CPU flat",
            "PD scheduling",
            "network"
        ]
    );
}

#[test]
fn schemas_refuse_what_the_plan_does_not_allow() {
    let evidence = workspace_validator(EVIDENCE_SCHEMA_PATH);
    let analyst = workspace_validator(ANALYST_SCHEMA_PATH);
    let mutate = |mut v: Value, f: &dyn Fn(&mut Value)| {
        f(&mut v);
        v
    };
    let bad_evidence = [
        mutate(plan_evidence("ok"), &|v| {
            v["agent"] = json!("diagnosis-analyst")
        }),
        mutate(plan_evidence("ok"), &|v| {
            v.as_object_mut().unwrap().remove("warnings");
        }),
        mutate(plan_evidence("ok"), &|v| {
            v["scope"].as_object_mut().unwrap().remove("keyspace_id");
        }),
        mutate(plan_evidence("ok"), &|v| {
            v["scope"]["time_range"] = json!({"start": 5})
        }),
        mutate(plan_evidence("ok"), &|v| v["scope"] = json!("cluster c1")),
        mutate(plan_evidence("ok"), &|v| {
            v["next_recommended_skills"] = json!(["Bad Skill"])
        }),
        mutate(plan_evidence("ok"), &|v| {
            v["evidence_files"] = json!("evidences/metrics.json")
        }),
    ];
    for example in bad_evidence {
        assert!(!evidence.is_valid(&example), "{example}");
    }
    let bad_analyst = [
        mutate(plan_analyst("ok", "low"), &|v| {
            v["confidence"] = json!("certain")
        }),
        mutate(plan_analyst("ok", "low"), &|v| {
            v["needs_more_evidence"] = json!("false")
        }),
        mutate(plan_analyst("ok", "low"), &|v| {
            v.as_object_mut().unwrap().remove("final_response");
        }),
        mutate(plan_analyst("ok", "low"), &|v| {
            v["quality_checks"] = json!([{"check": "x", "result": "maybe", "detail": ""}])
        }),
        mutate(plan_analyst("ok", "low"), &|v| {
            v["rejected_causes"] = json!([{"reason": "no cause named"}])
        }),
        mutate(plan_analyst("ok", "low"), &|v| {
            v["rejected_causes"] = json!([42])
        }),
        mutate(plan_analyst("ok", "low"), &|v| {
            v.as_object_mut().unwrap().remove("quality_checks");
        }),
    ];
    for example in bad_analyst {
        assert!(!analyst.is_valid(&example), "{example}");
    }
}

fn write_output(root: &Path, path: &str, text: &str) {
    common::write(root, path, text);
}

fn analyst_output(root_cause: &str, checks: Value) -> Value {
    json!({
        "agent": "diagnosis-analyst",
        "status": "ok",
        "root_cause": root_cause,
        "confidence": "high",
        "key_evidence": ["evidences/metrics.json: tidb_server cpu at 95% from 10:05"],
        "rejected_causes": [{"cause": "TiKV hot region", "reason": "store CPU flat"}],
        "needs_more_evidence": false,
        "missing_evidence": [],
        "quality_checks": checks,
        "final_response": "TiDB CPU was saturated by a slow query."
    })
}

#[test]
fn reading_child_outputs_classifies_failures() {
    let dir = tempfile::tempdir().unwrap();
    let reader = ChildOutputReader::new().unwrap();
    let failure = |r: Result<EvidenceAgentOutput, ChildOutputError>| r.unwrap_err().child_failure();

    assert_eq!(
        failure(reader.read_evidence(dir.path())),
        Some(ChildFailure::Missing)
    );
    write_output(
        dir.path(),
        EVIDENCE_AGENT_OUTPUT,
        "Here is my result: {\"agent\": ",
    );
    assert_eq!(
        failure(reader.read_evidence(dir.path())),
        Some(ChildFailure::InvalidJson)
    );
    write_output(
        dir.path(),
        EVIDENCE_AGENT_OUTPUT,
        "{\"agent\": \"evidence-agent\"}",
    );
    let err = reader.read_evidence(dir.path()).unwrap_err();
    assert_eq!(err.child_failure(), Some(ChildFailure::SchemaInvalid));
    assert!(err.to_string().contains("status"), "{err}");

    let mut unsafe_files = plan_evidence("ok");
    unsafe_files["evidence_files"] = json!(["../../etc/passwd"]);
    write_output(dir.path(), EVIDENCE_AGENT_OUTPUT, &unsafe_files.to_string());
    assert_eq!(
        failure(reader.read_evidence(dir.path())),
        Some(ChildFailure::Rejected)
    );

    let mut good = plan_evidence("partial");
    good["evidence_files"] = json!(["evidences/metrics.json"]);
    good["next_recommended_skills"] = json!(["tidb-clinic-diagnosis"]);
    write_output(dir.path(), EVIDENCE_AGENT_OUTPUT, &good.to_string());
    let output = reader.read_evidence(dir.path()).unwrap();
    assert_eq!(output.status, RunStatus::Partial);
    assert_eq!(
        ChildOutcome::of_evidence(&Ok(output)),
        ChildOutcome::Evidence {
            status: RunStatus::Partial
        }
    );

    let big = format!(
        "{{\"pad\": \"{}\"}}",
        "x".repeat(MAX_CHILD_OUTPUT_BYTES as usize)
    );
    write_output(dir.path(), EVIDENCE_AGENT_OUTPUT, &big);
    assert_eq!(
        failure(reader.read_evidence(dir.path())),
        Some(ChildFailure::Unreadable)
    );
}

#[test]
fn tidb_high_cpu_without_go_gc_check_fails_validation() {
    let dir = tempfile::tempdir().unwrap();
    let reader = ChildOutputReader::new().unwrap();
    let none = DiagnosisContext::default();
    let cpu = DiagnosisContext::default().tidb_high_cpu();
    let gc = json!([{"check": GO_GC_CHECK, "result": "passed",
        "detail": "go_gc_duration_seconds p99 2ms, heap steady: GC not the cause"}]);

    // Named in the output itself.
    let missing = analyst_output("A slow query saturated TiDB CPU", json!([]));
    write_output(dir.path(), ANALYST_OUTPUT, &missing.to_string());
    let err = reader.read_analysis(dir.path(), &none).unwrap_err();
    assert_eq!(err.child_failure(), Some(ChildFailure::Rejected));
    assert!(err.to_string().contains(GO_GC_CHECK), "{err}");

    // Known from the context only.
    let mut quiet = analyst_output("A slow query on the orders table", json!([]));
    quiet["final_response"] = json!("A slow query.");
    quiet["key_evidence"] = json!(["evidences/queries.json"]);
    write_output(dir.path(), ANALYST_OUTPUT, &quiet.to_string());
    assert!(reader.read_analysis(dir.path(), &none).is_ok());
    assert!(reader.read_analysis(dir.path(), &cpu).is_err());

    // Skipped or empty checks do not count.
    for checks in [
        json!([{"check": GO_GC_CHECK, "result": "skipped", "detail": "no time"}]),
        json!([{"check": GO_GC_CHECK, "result": "passed", "detail": " "}]),
        json!([{"check": "evidence_chain_review", "result": "passed", "detail": "ok"}]),
    ] {
        write_output(
            dir.path(),
            ANALYST_OUTPUT,
            &analyst_output("TiDB CPU", checks).to_string(),
        );
        assert!(reader.read_analysis(dir.path(), &cpu).is_err());
    }

    write_output(
        dir.path(),
        ANALYST_OUTPUT,
        &analyst_output("TiDB CPU", gc).to_string(),
    );
    let output = reader.read_analysis(dir.path(), &cpu).unwrap();
    assert_eq!(analyst_output_problems(&output, &cpu), Vec::<String>::new());
}

#[test]
fn needs_more_evidence_requires_gaps() {
    let reader = ChildOutputReader::new().unwrap();
    let mut output = analyst_output("", json!([]));
    output["status"] = json!("partial");
    output["final_response"] = json!("");
    output["key_evidence"] = json!([]);
    output["needs_more_evidence"] = json!(true);
    let ctx = DiagnosisContext::default();
    assert!(
        reader
            .parse_analysis(output.to_string().as_bytes(), &ctx)
            .is_err()
    );
    output["missing_evidence"] = json!(["TiKV store CPU 10:00-11:00"]);
    let ok = reader
        .parse_analysis(output.to_string().as_bytes(), &ctx)
        .unwrap();
    assert!(ok.needs_more_evidence);
    let mut no_cause = analyst_output("", json!([]));
    no_cause["final_response"] = json!("done");
    no_cause["key_evidence"] = json!([]);
    assert!(
        reader
            .parse_analysis(no_cause.to_string().as_bytes(), &ctx)
            .is_err()
    );
}

fn arb_check() -> impl Strategy<Value = Value> {
    (
        prop_oneof![Just(GO_GC_CHECK.to_owned()), "[a-z_]{1,12}"],
        prop_oneof![Just("passed"), Just("failed"), Just("skipped")],
        prop_oneof![Just(String::new()), "[a-z ]{0,12}"],
    )
        .prop_map(
            |(check, result, detail)| json!({"check": check, "result": result, "detail": detail}),
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Arbitrary file contents never panic the reader: they are a valid output or a
    /// classified child failure.
    #[test]
    fn arbitrary_bytes_are_an_output_or_a_failure(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let reader = ChildOutputReader::new().unwrap();
        if let Err(e) = reader.parse_evidence(&bytes) {
            prop_assert!(e.child_failure().is_some());
        }
        if let Err(e) = reader.parse_analysis(&bytes, &DiagnosisContext::default()) {
            prop_assert!(e.child_failure().is_some());
        }
    }

    /// An accepted TiDB high CPU analysis always holds a performed Go GC check with detail.
    #[test]
    fn accepted_tidb_cpu_analysis_has_a_gc_check(
        checks in prop::collection::vec(arb_check(), 0..4),
        root_cause in prop_oneof![Just("TiDB CPU high".to_owned()), "[a-z ]{0,20}"],
        flagged in any::<bool>(),
    ) {
        let reader = ChildOutputReader::new().unwrap();
        let ctx = if flagged { DiagnosisContext::default().tidb_high_cpu() } else { DiagnosisContext::default() };
        let mut output = analyst_output(&root_cause, Value::Array(checks));
        output["final_response"] = json!("answer");
        output["key_evidence"] = json!([]);
        let lower = root_cause.to_lowercase();
        let applies = flagged || (lower.contains("tidb") && lower.contains("cpu"));
        if let Ok(parsed) = reader.parse_analysis(output.to_string().as_bytes(), &ctx)
            && applies
        {
            prop_assert!(parsed.quality_checks.iter().any(|c|
                c.check == GO_GC_CHECK && c.result != CheckResult::Skipped && !c.detail.trim().is_empty()));
        }
    }
}
