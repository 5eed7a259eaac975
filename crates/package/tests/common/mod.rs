//! Shared builders for the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use evidence_package::{Manifest, Package, PackageFile, arguments::argument_schema};
use evidence_result::Provider;
use serde_json::{Value, json};

/// A valid manifest of `provider` at `revision`, as JSON.
pub(crate) fn manifest_json(provider: Provider, revision: u32) -> Value {
    let (identity, template, hosts, secrets) = match provider {
        Provider::Clinic => (
            "managed_auto_oncall_clinic",
            "default",
            json!([
                "Clinic.Internal.Example",
                "127.0.0.1:9090",
                "clinic.internal.example"
            ]),
            json!([{"name": "clinic_api_token", "env": "CLINIC_API_TOKEN", "kind": "value"}]),
        ),
        Provider::Manus => (
            "managed_auto_oncall_manus",
            "default",
            json!([
                "manus-vida.internal.example",
                "manus-monica.internal.example"
            ]),
            json!([
                {"name": "manus_reference_key", "env": "MANUS_REFERENCE_KEY", "kind": "value"},
                {"name": "manus_api_token", "env": "MANUS_API_TOKEN", "kind": "value"}
            ]),
        ),
        Provider::Wetech => (
            "managed_auto_oncall_wetech",
            "browser",
            json!(["grafana.wetech.internal.example"]),
            json!([{"name": "wetech_storage_state", "env": "WETECH_STORAGE_STATE", "kind": "browser_storage_state"}]),
        ),
    };
    json!({
        "identity": identity,
        "revision": format!("v{revision}"),
        "provider": provider,
        "template": template,
        "entrypoint": "bin/tool",
        "files": ["bin/tool", "README.md", "lib/helper.sh"],
        "network": {"mode": "restricted", "hosts": hosts},
        "auth": {"secrets": secrets},
        "policy_delivery": {"mode": "per_request_envelope"},
        "scope_labels": [{"label": "cluster_id", "value": "cluster_id"}],
        "limits": {"timeout_ms": 60000, "concurrency": 2, "max_output_bytes": 1048576, "max_batch": 1},
        "audit_stream": format!("auto_oncall.{identity}"),
        "arguments": argument_schema(provider),
    })
}

/// Parses a manifest JSON value.
pub(crate) fn manifest(value: &Value) -> Manifest {
    Manifest::from_json(&value.to_string()).unwrap()
}

/// The files `manifest_json` lists.
pub(crate) fn files() -> Vec<PackageFile> {
    vec![
        PackageFile::new("bin/tool", true, b"\x7fELF tool binary".to_vec()),
        PackageFile::new("README.md", false, b"# tool\n".to_vec()),
        PackageFile::new("lib/helper.sh", false, b"helper() { :; }\n".to_vec()),
    ]
}

/// A valid package.
pub(crate) fn package(provider: Provider, revision: u32) -> Package {
    Package::new(&manifest(&manifest_json(provider, revision)), files()).unwrap()
}
