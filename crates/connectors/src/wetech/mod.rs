//! The Wetech connector: Grafana through a real Chromium driven over WebDriver.

mod browser;
mod config;
mod connector;
mod frame;
mod identity;
mod script;
mod storage;

pub use browser::user_agent_for;
pub use config::{BrowserConfig, DEFAULT_CHROMIUM_ARGS, WebDriverEndpoint, WetechConfig};
pub use connector::{WetechConnector, WetechSecrets};
pub use identity::{Brand, BrowserIdentity};
pub use storage::StorageState;
