//! Tool-sandbox entrypoint of `managed_auto_oncall_manus`.
//!
//! Reads the model's arguments (JSON) on stdin, the signed policy envelope from the file
//! named by `EVIDENCE_TRUSTED_CONTEXT`, the verification keys from `EVIDENCE_POLICY_KEYS`,
//! the package from `EVIDENCE_PACKAGE_DIR`, the target base URLs from `MANUS_VIDA_URL`
//! and `MANUS_MONICA_URL` (the policy picks the target), and the secrets
//! `MANUS_USERNAME`, `MANUS_PASSWORD` and `MANUS_REF_KEYS` (`kid:base64key,...`, the
//! first key seals new references). Writes one `ToolResult` JSON to stdout and one audit
//! record to `EVIDENCE_AUDIT_LOG` (stderr when unset). Exits 0 whenever it wrote a result.

#[path = "common/mod.rs"]
mod common;

use std::error::Error;

use managed_evidence::connectors::{HostAllowlist, ManusConfig, ManusConnector, ManusSecrets};
use managed_evidence::policy::ManusTarget;

fn main() {
    common::main_with("manus_tool", run());
}

async fn run() -> Result<(), Box<dyn Error>> {
    let package = common::load_package()?;
    let allowlist = HostAllowlist::from_network(&package.manifest().network)?;
    let mut config = ManusConfig::new(allowlist);
    for (target, var) in [
        (ManusTarget::Vida, "MANUS_VIDA_URL"),
        (ManusTarget::Monica, "MANUS_MONICA_URL"),
    ] {
        if let Ok(url) = std::env::var(var) {
            config = config.with_target(target, url::Url::parse(&url)?);
        }
    }
    let secrets = ManusSecrets::from_env()?;
    let connector = ManusConnector::new()?;
    common::run_tool(&package, &connector, &config, &secrets).await
}
