//! The three tool entrypoints: which package identity each serves, and the deployment
//! configuration and connector each builds from the runtime context before it runs the
//! one sandbox call. Each is a type ([`ClinicTool`], [`ManusTool`], [`WetechTool`]) a
//! binary names at compile time, so a binary's code reaches only its own connector and
//! links nothing of the other two.

use std::path::PathBuf;

use evidence_connectors::{
    BrowserConfig, ClinicConfig, ClinicConnector, ClinicSecrets, Connector, ConnectorError,
    HostAllowlist, ManusConfig, ManusConnector, ManusSecrets, WebDriverEndpoint, WetechConfig,
    WetechConnector, WetechSecrets,
};
use evidence_package::Package;
use evidence_policy::ManusTarget;
use evidence_result::{PackageId, Provider};
use url::Url;

use crate::context::{
    CLINIC_BASE_URL_ENV, CLINIC_QUERY_PATH_TEMPLATE_ENV, DEFAULT_CHROMEDRIVER, DEFAULT_CHROMIUM,
    MANUS_MONICA_URL_ENV, MANUS_VIDA_URL_ENV, WETECH_CHROMEDRIVER_ENV, WETECH_CHROMIUM_ENV,
    WETECH_GRAFANA_URL_ENV, get,
};
use crate::failure::{RuntimeFailure, RuntimeFailureKind};

/// One of the three tool entrypoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// `clinic-tool`, package `managed_auto_oncall_clinic`.
    Clinic,
    /// `manus-tool`, package `managed_auto_oncall_manus`.
    Manus,
    /// `wetech-tool`, package `managed_auto_oncall_wetech`.
    Wetech,
}

impl Tool {
    /// The package identity the tool serves.
    pub fn identity(self) -> PackageId {
        match self {
            Tool::Clinic => PackageId::clinic(),
            Tool::Manus => PackageId::manus(),
            Tool::Wetech => PackageId::wetech(),
        }
    }

    /// The provider it talks to.
    pub fn provider(self) -> Provider {
        match self {
            Tool::Clinic => Provider::Clinic,
            Tool::Manus => Provider::Manus,
            Tool::Wetech => Provider::Wetech,
        }
    }

    /// The binary's name, which is also its entrypoint file name in a package.
    pub fn binary_name(self) -> &'static str {
        match self {
            Tool::Clinic => "clinic-tool",
            Tool::Manus => "manus-tool",
            Tool::Wetech => "wetech-tool",
        }
    }
}

fn config_failure(detail: impl Into<String>) -> RuntimeFailure {
    RuntimeFailure::new(RuntimeFailureKind::ConfigInvalid, detail)
}

fn secret_failure(detail: impl Into<String>) -> RuntimeFailure {
    RuntimeFailure::new(RuntimeFailureKind::SecretNotBound, detail)
}

fn required(name: &str) -> Result<String, RuntimeFailure> {
    get(name).ok_or_else(|| config_failure(format!("{name} is not set")))
}

fn url_of(name: &str, value: &str) -> Result<Url, RuntimeFailure> {
    Url::parse(value).map_err(|e| config_failure(format!("{name} is not a URL: {e}")))
}

/// An HTTP connector, or why its client could not start.
fn http<C>(connector: Result<C, ConnectorError>) -> Result<C, RuntimeFailure> {
    connector.map_err(|e| config_failure(format!("the HTTP client cannot start: {e}")))
}

fn allowlist(package: &Package) -> Result<HostAllowlist, RuntimeFailure> {
    HostAllowlist::from_network(&package.manifest().network)
        .map_err(|e| config_failure(format!("the package network allowlist: {e}")))
}

/// A connector with its deployment configuration and its injected secrets: everything
/// a call needs to reach its provider.
pub struct Transport<C: Connector> {
    /// The connector.
    pub connector: C,
    /// Its deployment configuration.
    pub config: C::Config,
    /// The secrets the package's auth binding injected.
    pub secrets: C::Secrets,
}

impl<C: Connector> std::fmt::Debug for Transport<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secrets are never printed, not even redacted.
        f.debug_struct("Transport").finish_non_exhaustive()
    }
}

/// The tool of one package: which [`Tool`] it is and how it builds its [`Transport`]
/// from the deployment configuration and secrets in the environment. A tool binary
/// names one of [`ClinicTool`], [`ManusTool`] and [`WetechTool`]
/// (`run_tool_binary::<ClinicTool>()`), so it holds only that connector's code.
pub trait PackageTool: Send + Sync + 'static {
    /// Which of the three tools this is.
    const TOOL: Tool;
    /// Its connector.
    type Connector: Connector + 'static;

    /// Builds the transport for `package` from the process's environment.
    fn transport(package: &Package) -> Result<Transport<Self::Connector>, RuntimeFailure>;
}

/// `clinic-tool`: the Clinic connector over HTTP.
#[derive(Debug, Clone, Copy)]
pub struct ClinicTool;

/// `manus-tool`: the Manus connector over an HTTP session.
#[derive(Debug, Clone, Copy)]
pub struct ManusTool;

/// `wetech-tool`: the Wetech connector through Chromium in front of Grafana.
#[derive(Debug, Clone, Copy)]
pub struct WetechTool;

impl PackageTool for ClinicTool {
    const TOOL: Tool = Tool::Clinic;
    type Connector = ClinicConnector;

    fn transport(package: &Package) -> Result<Transport<ClinicConnector>, RuntimeFailure> {
        let base = url_of(CLINIC_BASE_URL_ENV, &required(CLINIC_BASE_URL_ENV)?)?;
        let mut config = ClinicConfig::new(base, allowlist(package)?);
        if let Some(template) = get(CLINIC_QUERY_PATH_TEMPLATE_ENV) {
            config = config.with_query_path_template(template);
        }
        let secrets = ClinicSecrets::from_env()
            .ok_or_else(|| secret_failure(format!("{} is not set", ClinicSecrets::TOKEN_ENV)))?;
        Ok(Transport {
            connector: http(ClinicConnector::new())?,
            config,
            secrets,
        })
    }
}

impl PackageTool for ManusTool {
    const TOOL: Tool = Tool::Manus;
    type Connector = ManusConnector;

    fn transport(package: &Package) -> Result<Transport<ManusConnector>, RuntimeFailure> {
        let mut config = ManusConfig::new(allowlist(package)?);
        for (target, name) in [
            (ManusTarget::Vida, MANUS_VIDA_URL_ENV),
            (ManusTarget::Monica, MANUS_MONICA_URL_ENV),
        ] {
            if let Some(value) = get(name) {
                config = config.with_target(target, url_of(name, &value)?);
            }
        }
        let secrets = ManusSecrets::from_env().map_err(|e| secret_failure(e.to_string()))?;
        Ok(Transport {
            connector: http(ManusConnector::new())?,
            config,
            secrets,
        })
    }
}

impl PackageTool for WetechTool {
    const TOOL: Tool = Tool::Wetech;
    type Connector = WetechConnector;

    fn transport(package: &Package) -> Result<Transport<WetechConnector>, RuntimeFailure> {
        let grafana = url_of(WETECH_GRAFANA_URL_ENV, &required(WETECH_GRAFANA_URL_ENV)?)?;
        let chromium = get(WETECH_CHROMIUM_ENV).unwrap_or_else(|| DEFAULT_CHROMIUM.to_owned());
        let chromedriver =
            get(WETECH_CHROMEDRIVER_ENV).unwrap_or_else(|| DEFAULT_CHROMEDRIVER.to_owned());
        let browser = BrowserConfig::new(
            chromium,
            WebDriverEndpoint::Spawn {
                chromedriver: PathBuf::from(chromedriver),
            },
        );
        let config = WetechConfig::new(grafana, allowlist(package)?, browser);
        let secrets = WetechSecrets::from_env().ok_or_else(|| {
            secret_failure(format!("{} is not set", WetechSecrets::STORAGE_STATE_ENV))
        })?;
        Ok(Transport {
            connector: WetechConnector::new(),
            config,
            secrets,
        })
    }
}
