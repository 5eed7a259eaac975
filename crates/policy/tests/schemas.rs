//! The Agent-visible argument schemas: committed copies are current, and the schemas
//! agree with what `lock` accepts on the seed arguments.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;

use evidence_policy::{ClinicArgs, ManusArgs, WetechArgs, args::args_schema, lock};
use evidence_result::{PolicySource, Provider, SAME_TURN_CORRECTION_RULE};
use serde_json::{Value, json};
use support::*;

fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas")
}

fn check_committed(file: &str, schema: &schemars::Schema) {
    let generated = format!("{}\n", serde_json::to_string_pretty(schema).unwrap());
    let path = schema_dir().join(file);
    if std::env::var_os("UPDATE_SCHEMAS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "schemas/{file} is stale or missing; regenerate it with \
         `UPDATE_SCHEMAS=1 cargo test -p evidence-policy --test schemas`"
    );
}

#[test]
fn committed_schemas_are_current() {
    check_committed(
        "clinic-args.schema.json",
        &schemars::schema_for!(ClinicArgs),
    );
    check_committed("manus-args.schema.json", &schemars::schema_for!(ManusArgs));
    check_committed(
        "wetech-args.schema.json",
        &schemars::schema_for!(WetechArgs),
    );
    for p in [Provider::Clinic, Provider::Manus, Provider::Wetech] {
        let s = args_schema(p);
        let d = s.get("description").and_then(Value::as_str).unwrap();
        assert!(d.contains(SAME_TURN_CORRECTION_RULE), "{p}");
    }
}

/// Every seed argument set is valid under the schema exactly when `lock` accepts its
/// shape (field names and types; PromQL and policy checks are `lock`'s alone).
#[test]
fn schemas_agree_with_lock_on_argument_shapes() {
    let cases: Vec<(&str, Value, bool)> = vec![
        (
            "clinic",
            json!({"queries": [{"queryId": "a", "expr": "up"}]}),
            true,
        ),
        (
            "clinic",
            json!({"queries": [{"queryId": "a", "expr": "up", "step": "1m", "unit": "%"}]}),
            true,
        ),
        (
            "clinic",
            json!({"queries": [{"queryId": "a", "expr": "up", "step": 30}]}),
            true,
        ),
        ("clinic", json!({"queries": []}), false),
        ("clinic", json!({"queries": [{"expr": "up"}]}), false),
        (
            "clinic",
            json!({"queries": [{"queryId": "a", "expr": "up"}], "provider": "clinic"}),
            false,
        ),
        (
            "manus",
            json!({"queryId": "a", "expr": "up", "instanceRef": "mref1.x"}),
            true,
        ),
        (
            "manus",
            json!({"queryId": "a", "expr": "up", "target": "vida"}),
            false,
        ),
        ("manus", json!({"queryId": "a b", "expr": "up"}), false),
        (
            "wetech",
            json!({"queryId": "tidb_cpu", "expr": "up", "unit": "cores"}),
            true,
        ),
        (
            "wetech",
            json!({"queryId": "tidb_cpu", "expr": "up", "unit": "cores", "step": "1m30s"}),
            true,
        ),
        ("wetech", json!({"expr": "up", "unit": "cores"}), false),
        (
            "wetech",
            json!({"queryId": "tidb_cpu", "expr": "up"}),
            false,
        ),
        (
            "wetech",
            json!({"queryId": "tidb_cpu", "expr": "up", "unit": "cores per instance!"}),
            false,
        ),
        (
            "wetech",
            json!({"queryId": "tidb_cpu", "expr": "up", "unit": "cores", "step": "soon"}),
            false,
        ),
        (
            "wetech",
            json!({"queryId": "tidb_cpu", "expr": "up", "unit": "   "}),
            false,
        ),
        (
            "wetech",
            json!({"queryId": "tidb_cpu", "expr": "up", "unit": "ops/s"}),
            true,
        ),
        (
            "wetech",
            json!({"queryId": "tidb_cpu", "expr": "up", "unit": "cores", "provider": "wetech"}),
            false,
        ),
    ];
    for (provider, args, valid) in cases {
        let p = match provider {
            "clinic" => Provider::Clinic,
            "manus" => Provider::Manus,
            _ => Provider::Wetech,
        };
        let schema = serde_json::to_value(args_schema(p)).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        assert_eq!(validator.is_valid(&args), valid, "schema on {args}");
        let policy = apid_29213(provider);
        let locked = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope());
        let accepted = locked.is_ok_and(|l| l.ready().count() == l.items.len());
        assert_eq!(accepted, valid, "lock on {args}");
    }
}
