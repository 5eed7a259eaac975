//! Tool-sandbox entrypoint of `managed_auto_oncall_clinic`.
//!
//! Reads the model's arguments (JSON) on stdin, the signed policy envelope from the file
//! named by `EVIDENCE_TRUSTED_CONTEXT`, the verification keys from `EVIDENCE_POLICY_KEYS`,
//! the package from `EVIDENCE_PACKAGE_DIR`, and its configuration and secret from
//! `CLINIC_BASE_URL`, optional `CLINIC_QUERY_PATH_TEMPLATE` and `CLINIC_API_TOKEN`.
//! Writes one `ToolResult` JSON to stdout and one audit record to `EVIDENCE_AUDIT_LOG`
//! (stderr when unset). Exits 0 whenever it wrote a result.

#[path = "common/mod.rs"]
mod common;

use std::error::Error;

use managed_evidence::connectors::{ClinicConfig, ClinicConnector, ClinicSecrets, HostAllowlist};

fn main() {
    common::main_with("clinic_tool", run());
}

async fn run() -> Result<(), Box<dyn Error>> {
    let package = common::load_package()?;
    let allowlist = HostAllowlist::from_network(&package.manifest().network)?;
    let base_url = url::Url::parse(&common::env("CLINIC_BASE_URL")?)?;
    let mut config = ClinicConfig::new(base_url, allowlist);
    if let Ok(template) = std::env::var("CLINIC_QUERY_PATH_TEMPLATE") {
        config = config.with_query_path_template(template);
    }
    let secrets = ClinicSecrets::from_env().ok_or("CLINIC_API_TOKEN is not set")?;
    let connector = ClinicConnector::new()?;
    common::run_tool(&package, &connector, &config, &secrets).await
}
