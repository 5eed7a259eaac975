//! Tool-sandbox entrypoint of `managed_auto_oncall_wetech`.
//!
//! Reads the model's arguments (JSON) on stdin, the signed policy envelope from the file
//! named by `EVIDENCE_TRUSTED_CONTEXT`, the verification keys from `EVIDENCE_POLICY_KEYS`,
//! the package from `EVIDENCE_PACKAGE_DIR`, and its configuration and secret from
//! `WETECH_GRAFANA_URL`, `WETECH_DATASOURCE_UID`, `WETECH_STORAGE_STATE` (Playwright
//! `storageState` JSON), `WETECH_CHROMIUM` (default `/usr/bin/chromium`) and
//! `WETECH_CHROMEDRIVER` (default `/usr/bin/chromedriver`). Everything is verified and
//! locked before ChromeDriver or Chromium starts. Writes one `ToolResult` JSON to stdout
//! and one audit record to `EVIDENCE_AUDIT_LOG` (stderr when unset). Exits 0 whenever it
//! wrote a result.

#[path = "common/mod.rs"]
mod common;

use std::error::Error;
use std::path::PathBuf;

use managed_evidence::connectors::{
    BrowserConfig, HostAllowlist, WebDriverEndpoint, WetechConfig, WetechConnector, WetechSecrets,
};

fn main() {
    common::main_with("wetech_tool", run());
}

async fn run() -> Result<(), Box<dyn Error>> {
    let package = common::load_package()?;
    let allowlist = HostAllowlist::from_network(&package.manifest().network)?;
    let grafana = url::Url::parse(&common::env("WETECH_GRAFANA_URL")?)?;
    let chromium = std::env::var("WETECH_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let chromedriver =
        std::env::var("WETECH_CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
    let browser = BrowserConfig::new(
        chromium,
        WebDriverEndpoint::Spawn {
            chromedriver: PathBuf::from(chromedriver),
        },
    );
    let mut config = WetechConfig::new(
        grafana,
        allowlist,
        common::env("WETECH_DATASOURCE_UID")?,
        browser,
    );
    config.scope = package.manifest().scope_labels.clone();
    let secrets = WetechSecrets::from_env().ok_or("WETECH_STORAGE_STATE is not set")?;
    let connector = WetechConnector::new();
    common::run_tool(&package, &connector, &config, &secrets).await
}
