//! The three tool entrypoints: which package identity each serves, and the deployment
//! configuration and connector each builds from the runtime context before it runs the
//! one sandbox call. Each is a type ([`ClinicTool`], [`ManusTool`], [`WetechTool`]) a
//! binary names at compile time, so a binary's code reaches only its own connector and
//! links nothing of the other two.

use std::path::PathBuf;

use evidence_connectors::{
    BrowserConfig, ClinicConfig, ClinicConnector, ClinicSecrets, Connector, ConnectorError,
    HostAllowlist, ManusConfig, ManusConnector, ManusSecrets, ReferenceKeyRing, ResponseLimits,
    WebDriverEndpoint, WetechConfig, WetechConnector, WetechSecrets,
};
use evidence_package::Package;
use evidence_policy::ManusTarget;
use url::Url;

use secrecy::SecretString;

use crate::context::{
    CLINIC_BASE_URL_ENV, CLINIC_QUERY_PATH_TEMPLATE_ENV, DEFAULT_CHROMEDRIVER, DEFAULT_CHROMIUM,
    MANUS_MONICA_URL_ENV, MANUS_VIDA_URL_ENV, WETECH_CHROMEDRIVER_ENV, WETECH_CHROMIUM_ENV,
    WETECH_GRAFANA_URL_ENV,
};
use crate::deadline::package_timeout;
use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::runtime_context::RuntimeContext;
use crate::tool_kind::Tool;

fn config_failure(detail: impl Into<String>) -> RuntimeFailure {
    RuntimeFailure::new(RuntimeFailureKind::ConfigInvalid, detail)
}

fn secret_failure(detail: impl Into<String>) -> RuntimeFailure {
    RuntimeFailure::new(RuntimeFailureKind::SecretNotBound, detail)
}

/// A configuration variable the tool needs.
fn required<'c>(context: &'c RuntimeContext, name: &str) -> Result<&'c str, RuntimeFailure> {
    let kind = RuntimeFailureKind::ConfigInvalid;
    context
        .config(name)
        .require(name, kind, kind)
        .map(String::as_str)
}

/// A configuration variable the tool can do without.
fn optional<'c>(
    context: &'c RuntimeContext,
    name: &str,
) -> Result<Option<&'c str>, RuntimeFailure> {
    Ok(context
        .config(name)
        .optional(name, RuntimeFailureKind::ConfigInvalid)?
        .map(String::as_str))
}

/// A secret the package's auth binding injects.
fn secret(context: &RuntimeContext, name: &str) -> Result<SecretString, RuntimeFailure> {
    let kind = RuntimeFailureKind::SecretNotBound;
    context.secret(name).require(name, kind, kind).cloned()
}

fn url_of(name: &str, value: &str) -> Result<Url, RuntimeFailure> {
    Url::parse(value).map_err(|e| config_failure(format!("{name} is not a URL: {e}")))
}

/// An HTTP connector, or why its client could not start.
fn http<C>(connector: Result<C, ConnectorError>) -> Result<C, RuntimeFailure> {
    connector.map_err(|e| config_failure(format!("the HTTP client cannot start: {e}")))
}

/// The limits of every provider request of `package`: the default body bound, and as
/// the time limit the package's whole `timeout_ms`, longer than any call's deadline: the
/// deadline is what ends a request, and the provider's own `timeout` is derived from
/// what is left of it.
fn limits(package: &Package) -> ResponseLimits {
    ResponseLimits {
        timeout: package_timeout(package),
        ..ResponseLimits::default()
    }
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
/// from the deployment configuration and secrets of a [`RuntimeContext`]. A tool binary
/// names one of [`ClinicTool`], [`ManusTool`] and [`WetechTool`]
/// (`run_tool_binary::<ClinicTool>()`), so it holds only that connector's code.
pub trait PackageTool: Send + Sync + 'static {
    /// Which of the three tools this is.
    const TOOL: Tool;
    /// Its connector.
    type Connector: Connector + 'static;

    /// Builds the transport for `package` from the runtime context.
    fn transport(
        package: &Package,
        context: &RuntimeContext,
    ) -> Result<Transport<Self::Connector>, RuntimeFailure>;
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

    fn transport(
        package: &Package,
        context: &RuntimeContext,
    ) -> Result<Transport<ClinicConnector>, RuntimeFailure> {
        let base = url_of(CLINIC_BASE_URL_ENV, required(context, CLINIC_BASE_URL_ENV)?)?;
        // No default path: a template the provider does not serve would only show as 404s.
        let template = required(context, CLINIC_QUERY_PATH_TEMPLATE_ENV)?;
        let config = ClinicConfig::new(base, allowlist(package)?)
            .with_query_path_template(template)
            .with_limits(limits(package));
        let secrets = ClinicSecrets::new(secret(context, ClinicSecrets::TOKEN_ENV)?);
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

    fn transport(
        package: &Package,
        context: &RuntimeContext,
    ) -> Result<Transport<ManusConnector>, RuntimeFailure> {
        let mut config = ManusConfig::new(allowlist(package)?).with_limits(limits(package));
        for (target, name) in [
            (ManusTarget::Vida, MANUS_VIDA_URL_ENV),
            (ManusTarget::Monica, MANUS_MONICA_URL_ENV),
        ] {
            if let Some(value) = optional(context, name)? {
                config = config.with_target(target, url_of(name, value)?);
            }
        }
        let keys =
            ReferenceKeyRing::parse_secret(&secret(context, ManusSecrets::REFERENCE_KEYS_ENV)?)
                .map_err(|e| secret_failure(e.to_string()))?;
        let secrets = ManusSecrets::new(
            secret(context, ManusSecrets::USERNAME_ENV)?,
            secret(context, ManusSecrets::PASSWORD_ENV)?,
            keys,
        );
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

    fn transport(
        package: &Package,
        context: &RuntimeContext,
    ) -> Result<Transport<WetechConnector>, RuntimeFailure> {
        let grafana = url_of(
            WETECH_GRAFANA_URL_ENV,
            required(context, WETECH_GRAFANA_URL_ENV)?,
        )?;
        let chromium = optional(context, WETECH_CHROMIUM_ENV)?.unwrap_or(DEFAULT_CHROMIUM);
        let chromedriver =
            optional(context, WETECH_CHROMEDRIVER_ENV)?.unwrap_or(DEFAULT_CHROMEDRIVER);
        let browser = BrowserConfig::new(
            chromium,
            WebDriverEndpoint::Spawn {
                chromedriver: PathBuf::from(chromedriver),
            },
        );
        let config =
            WetechConfig::new(grafana, allowlist(package)?, browser).with_limits(limits(package));
        let secrets = WetechSecrets::new(secret(context, WetechSecrets::STORAGE_STATE_ENV)?);
        // A server keeps its browser warm between calls; a one-shot call starts its own.
        let connector = match context.warm_browser() {
            Some(reuse) => WetechConnector::warm(reuse),
            None => WetechConnector::new(),
        };
        Ok(Transport {
            connector,
            config,
            secrets,
        })
    }
}
