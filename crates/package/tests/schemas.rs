//! The committed JSON Schemas of the package manifest, the catalog file and the agent
//! profile are current.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use evidence_package::{AgentProfile, Manifest, catalog::CatalogFile};

fn check(name: &str, schema: schemars::Schema) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schemas")
        .join(name);
    let mut generated = serde_json::to_string_pretty(&schema).unwrap();
    generated.push('\n');
    if std::env::var_os("UPDATE_SCHEMAS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let same = serde_json::from_str::<serde_json::Value>(&committed).ok()
        == serde_json::from_str::<serde_json::Value>(&generated).ok();
    assert!(
        same,
        "schemas/{name} is stale; run `UPDATE_SCHEMAS=1 cargo test -p evidence-package --test schemas` to regenerate it"
    );
}

#[test]
fn package_manifest_schema_is_current() {
    check(
        "package-manifest.schema.json",
        schemars::schema_for!(Manifest),
    );
}

#[test]
fn catalog_schema_is_current() {
    check(
        "package-catalog.schema.json",
        schemars::schema_for!(CatalogFile),
    );
}

#[test]
fn agent_profile_schema_is_current() {
    check(
        "agent-profile.schema.json",
        schemars::schema_for!(AgentProfile),
    );
}

fn validate(schema: schemars::Schema, path: &Path) {
    let schema = serde_json::to_value(&schema).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let instance: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{}: {errors:?}", path.display());
}

#[test]
fn committed_files_validate_against_their_schemas() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packages");
    validate(
        schemars::schema_for!(CatalogFile),
        &root.join("catalog.json"),
    );
    validate(
        schemars::schema_for!(AgentProfile),
        &root.join("auto_oncall_agent.json"),
    );
    for dir in [
        "managed_auto_oncall_clinic/v2",
        "managed_auto_oncall_clinic/v3",
        "managed_auto_oncall_manus/v2",
        "managed_auto_oncall_wetech/v2",
    ] {
        validate(
            schemars::schema_for!(Manifest),
            &root.join(dir).join("manifest.json"),
        );
    }
    // And a manifest with an unknown field does not.
    let schema = serde_json::to_value(schemars::schema_for!(Manifest)).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut bad: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("managed_auto_oncall_clinic/v3/manifest.json")).unwrap(),
    )
    .unwrap();
    bad["provider_argument"] = serde_json::json!(true);
    assert!(!validator.is_valid(&bad));
}
