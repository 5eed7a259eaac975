//! The Agent-visible argument schemas: committed copies are current, and the schemas
//! agree with what `lock` accepts on the seed arguments.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;

use evidence_policy::policy::DiscoveryGrant;
use evidence_policy::{ClinicArgs, ManusArgs, TrustedPolicy, WetechArgs, args::args_schema, lock};
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
    check_committed(
        "trusted-policy.schema.json",
        &schemars::schema_for!(TrustedPolicy),
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
        // Discovery, in each package's own shape.
        (
            "clinic",
            json!({"queries": [{"queryId": "names", "discover": "metric_names", "pattern": "tikv_.*"},
                               {"queryId": "a", "expr": "up"}]}),
            true,
        ),
        (
            "clinic",
            json!({"queries": [{"queryId": "v", "discover": "label_values", "label": "job",
                                "selector": "{job=~\"ti.*\"}"}]}),
            true,
        ),
        (
            "clinic",
            json!({"queries": [{"queryId": "a", "expr": "up", "discover": "series"}]}),
            false,
        ),
        (
            "clinic",
            json!({"queries": [{"queryId": "a", "discover": "series", "step": 30}]}),
            false,
        ),
        ("clinic", json!({"queries": [{"queryId": "a"}]}), false),
        (
            "clinic",
            json!({"queries": [{"queryId": "a", "discover": "everything"}]}),
            false,
        ),
        (
            "manus",
            json!({"queryId": "a", "discover": "label_values", "label": "instance"}),
            true,
        ),
        (
            "manus",
            json!({"queryId": "a", "discover": "series", "instanceRef": "mref1.x"}),
            false,
        ),
        (
            "wetech",
            json!({"queryId": "tidb_cpu", "discover": "label_names"}),
            true,
        ),
        (
            "wetech",
            json!({"queryId": "tidb_cpu", "discover": "label_names", "unit": "cores"}),
            false,
        ),
        (
            "wetech",
            json!({"queryId": "tidb_cpu", "discover": "metric_names", "limit": 5}),
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
        let mut policy = apid_29213(provider);
        policy.discovery = Some(DiscoveryGrant { max_items: 50 });
        let locked = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope());
        let accepted = locked.is_ok_and(|l| l.ready().count() == l.items.len());
        assert_eq!(accepted, valid, "lock on {args}");
    }
}

/// The committed trusted-policy schema accepts exactly the policies `validate` accepts,
/// on the seed policy of each provider and on each way one can break a consistency rule
/// or a bound: the issuer's validator and the tools agree.
#[test]
fn the_policy_schema_agrees_with_validate() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(schema_dir().join("trusted-policy.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let seed = |provider: &str| serde_json::to_value(apid_29213(provider)).unwrap();
    type Edit = fn(&mut Value);
    let edits: Vec<(&str, &str, Edit)> = vec![
        ("clinic", "unchanged", |_| {}),
        ("manus", "unchanged", |_| {}),
        ("wetech", "unchanged", |_| {}),
        ("clinic", "a Manus target on Clinic", |p| {
            p["manus_target"] = json!("vida")
        }),
        ("manus", "Manus without its target", |p| {
            p.as_object_mut().unwrap().remove("manus_target");
        }),
        ("manus", "another target", |p| {
            p["manus_target"] = json!("other")
        }),
        ("wetech", "no datasource", |p| {
            p.as_object_mut().unwrap().remove("wetech_datasource");
        }),
        ("wetech", "a datasource path", |p| {
            p["wetech_datasource"] = json!("prom/../x")
        }),
        ("wetech", "no query ids", |p| {
            p["wetech_query_ids"] = json!([])
        }),
        ("wetech", "a repeated query id", |p| {
            p["wetech_query_ids"] = json!(["cpu", "cpu"])
        }),
        ("clinic", "Wetech query ids on Clinic", |p| {
            p["wetech_query_ids"] = json!(["cpu"])
        }),
        ("clinic", "premium without parent", |p| {
            p["cluster"]["tier"] = json!("premium")
        }),
        (
            "clinic",
            "premium with parent",
            |p| p["cluster"] = json!({"id": "SaaS01", "tier": "premium", "parent_id": "p-1"}),
        ),
        (
            "clinic",
            "starter with keyspace",
            |p| p["cluster"] = json!({"id": "SaaS01", "tier": "starter", "keyspace_id": "ks-1"}),
        ),
        (
            "clinic",
            "essential with a parent",
            |p| {
                p["cluster"] = json!({"id": "SaaS01", "tier": "essential", "keyspace_id": "k", "parent_id": "p"})
            },
        ),
        ("clinic", "dedicated with keyspace", |p| {
            p["cluster"]["keyspace_id"] = json!("ks-1")
        }),
        ("clinic", "a quote in the cluster id", |p| {
            p["cluster"]["id"] = json!("Saa\"S")
        }),
        ("clinic", "a space in the account", |p| {
            p["account"] = json!("acct saas")
        }),
        ("clinic", "a lower-case ticket", |p| {
            p["ticket"] = json!("apid-29213")
        }),
        ("clinic", "a policy id with a space", |p| {
            p["policy_id"] = json!("pol 1")
        }),
        ("clinic", "too many points", |p| {
            p["limits"]["max_points_per_series"] = json!(11_001)
        }),
        ("clinic", "a zero step", |p| {
            p["limits"]["min_step"] = json!(0)
        }),
        ("clinic", "a batch of 21", |p| {
            p["limits"]["max_batch"] = json!(21)
        }),
        ("clinic", "no series kept", |p| {
            p["limits"]["max_series_kept"] = json!(0)
        }),
        ("clinic", "no calls", |p| {
            p["limits"]["max_calls_per_turn"] = json!(0)
        }),
        ("clinic", "a look-back over 31 days", |p| {
            p["lookback"] = json!(31 * 86_400 + 1)
        }),
        ("clinic", "an unknown member", |p| p["extra"] = json!(1)),
        ("clinic", "another operation", |p| {
            p["operation"] = json!("query")
        }),
    ];
    for (provider, what, edit) in edits {
        let mut value = seed(provider);
        edit(&mut value);
        let valid = serde_json::from_value::<TrustedPolicy>(value.clone())
            .is_ok_and(|p| p.validate().is_ok());
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            errors.is_empty(),
            valid,
            "{provider}, {what}: the schema says {errors:?}, validate says {valid}"
        );
    }
}
