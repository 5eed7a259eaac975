//! The three tool entrypoints: which package identity each serves, and the deployment
//! configuration and connector each builds from the runtime context before it runs the
//! one sandbox call.

use std::path::PathBuf;

use evidence_connectors::{
    BrowserConfig, ClinicConfig, ClinicConnector, ClinicSecrets, HostAllowlist, ManusConfig,
    ManusConnector, ManusSecrets, WebDriverEndpoint, WetechConfig, WetechConnector, WetechSecrets,
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

fn allowlist(package: &Package) -> Result<HostAllowlist, RuntimeFailure> {
    HostAllowlist::from_network(&package.manifest().network)
        .map_err(|e| config_failure(format!("the package network allowlist: {e}")))
}

/// The Clinic connector, configuration and secrets of this sandbox.
pub(crate) fn clinic(
    package: &Package,
) -> Result<(ClinicConnector, ClinicConfig, ClinicSecrets), RuntimeFailure> {
    let base = url_of(CLINIC_BASE_URL_ENV, &required(CLINIC_BASE_URL_ENV)?)?;
    let mut config = ClinicConfig::new(base, allowlist(package)?);
    if let Some(template) = get(CLINIC_QUERY_PATH_TEMPLATE_ENV) {
        config = config.with_query_path_template(template);
    }
    let secrets = ClinicSecrets::from_env()
        .ok_or_else(|| secret_failure(format!("{} is not set", ClinicSecrets::TOKEN_ENV)))?;
    let connector = ClinicConnector::new()
        .map_err(|e| config_failure(format!("the HTTP client cannot start: {e}")))?;
    Ok((connector, config, secrets))
}

/// The Manus connector, configuration and secrets of this sandbox.
pub(crate) fn manus(
    package: &Package,
) -> Result<(ManusConnector, ManusConfig, ManusSecrets), RuntimeFailure> {
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
    let connector = ManusConnector::new()
        .map_err(|e| config_failure(format!("the HTTP client cannot start: {e}")))?;
    Ok((connector, config, secrets))
}

/// The Wetech connector, configuration and secrets of this sandbox.
pub(crate) fn wetech(
    package: &Package,
) -> Result<(WetechConnector, WetechConfig, WetechSecrets), RuntimeFailure> {
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
    Ok((WetechConnector::new(), config, secrets))
}
