//! The Wetech connector: Grafana through a real Chromium driven over WebDriver.

mod answer;
mod browser;
mod cdp;
mod config;
mod connector;
mod context;
mod failures;
mod frame;
mod grafana;
mod identity;
mod memory;
mod page_fetch;
mod page_scripts;
mod script;
mod storage;
mod warm;

pub use browser::user_agent_for;
pub use config::{BrowserConfig, DEFAULT_CHROMIUM_ARGS, WebDriverEndpoint, WetechConfig};
pub use connector::{WetechConnector, WetechSecrets};
pub use identity::{Brand, BrowserIdentity};
pub use storage::StorageState;
pub use warm::BrowserReuse;

/// Starts a browser exactly as a Wetech call does, opens Grafana's health page and reads
/// the browser's identity there (`navigator.userAgent`, the client hints), then closes
/// everything. For checking a browser image in tests.
pub async fn browser_identity(
    config: &WetechConfig,
) -> Result<BrowserIdentity, Box<evidence_result::Failure>> {
    WetechConnector::new().browser_identity(config).await
}
