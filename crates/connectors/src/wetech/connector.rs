//! The Wetech connector: one locked `query_range` per call, run from a Grafana page in
//! a fresh Chromium through Grafana's datasource proxy.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use evidence_policy::{LockedQuery, LockedRequest};
use evidence_result::{
    Details, ErrorCode, Evidence, Failure, FailureClass, PackageId, Provider, ResultError,
    ToolResult,
};
use fantoccini::Client;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use super::browser::{Browser, BrowserError, CommandFailure};
use super::config::WetechConfig;
use super::frame::error_frame;
use super::identity::{BrowserIdentity, PageIdentity};
use super::script;
use super::storage::StorageState;
use crate::codes::{Code, OriginCode};
use crate::connector::{failed, finish, internal, single_query};
use crate::prometheus::{
    Compaction, FORM_CONTENT_TYPE, KeepLabels, QueryRange, RawResponse, Redactor, ResponseMapper,
};
use crate::{Connector, ConnectorError};

/// Largest health answer read.
const HEALTH_MAX_BYTES: usize = 64 * 1024;
/// Time allowed for the health answer.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(10);
/// Extra time the WebDriver script limit gives a page fetch beyond its own limit.
const SCRIPT_MARGIN: Duration = Duration::from_secs(5);

/// The secrets injected into the Wetech tool sandbox.
pub struct WetechSecrets {
    storage_state: SecretString,
}

impl fmt::Debug for WetechSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WetechSecrets")
            .field("storage_state", &"[REDACTED]")
            .finish()
    }
}

impl WetechSecrets {
    /// The secret's name in the package's auth binding.
    pub const STORAGE_STATE: &'static str = "wetech_storage_state";
    /// The environment variable the auth binding injects it as.
    pub const STORAGE_STATE_ENV: &'static str = "WETECH_STORAGE_STATE";

    /// The browser storage state (Playwright `storageState` JSON).
    pub fn new(storage_state: SecretString) -> Self {
        WetechSecrets { storage_state }
    }

    /// Reads the storage state from [`WetechSecrets::STORAGE_STATE_ENV`].
    pub fn from_env() -> Option<Self> {
        std::env::var(Self::STORAGE_STATE_ENV)
            .ok()
            .map(|v| WetechSecrets::new(SecretString::from(v)))
    }

    /// The storage state.
    pub fn storage_state(&self) -> &SecretString {
        &self.storage_state
    }
}

/// What a call needs from its secrets before the browser starts.
struct Prepared {
    state: StorageState,
    mapper: ResponseMapper,
}

/// The Wetech connector (package `managed_auto_oncall_wetech`), a [`Connector`] whose
/// configuration is a [`WetechConfig`] and whose secrets are [`WetechSecrets`].
///
/// Every call gets its own browser: a fresh profile folder, ChromeDriver (spawned for
/// the call or attached), one WebDriver session whose `--user-agent` carries the running
/// Chromium's major version. The storage state's cookies are added with their stored
/// attributes and its localStorage entries written (values as script arguments), the
/// query runs as a `fetch` from a Grafana page through the datasource proxy, and the
/// session is closed, the driver stopped and the profile removed on every path. The
/// caller (the sandbox call of `evidence-tool`) guards the result; provider text is
/// redacted with the storage state's values here.
#[derive(Debug, Clone, Copy, Default)]
pub struct WetechConnector;

impl WetechConnector {
    /// The connector. It holds no state: everything comes with each call.
    pub fn new() -> Self {
        WetechConnector
    }

    /// Starts a browser exactly as a call does, opens Grafana's health page and reads
    /// the browser's identity there (`navigator.userAgent`, the client hints), then
    /// closes everything. For checking a browser image.
    pub(crate) async fn browser_identity(
        &self,
        config: &WetechConfig,
    ) -> Result<BrowserIdentity, Box<Failure>> {
        let mapper = ResponseMapper::new(Provider::Wetech, Redactor::default());
        config
            .allowlist
            .check(&config.grafana_url)
            .map_err(|e| Box::new(mapper.failure(&e)))?;
        let redactor = mapper.redactor();
        let mut browser = Browser::launch(&config.browser, SCRIPT_MARGIN)
            .await
            .map_err(|e| browser_failure(&e, redactor))?;
        let outcome = async {
            let client = browser
                .client()
                .map_err(|e| browser_failure(&e, redactor))?;
            open_health(config, client, redactor).await?;
            read_identity(&browser, client, redactor).await
        }
        .await;
        let cleanup = browser.shutdown().await;
        finish_cleanup(outcome, cleanup)
    }
}

#[async_trait]
impl Connector for WetechConnector {
    type Config = WetechConfig;
    type Secrets = WetechSecrets;

    fn package(&self) -> PackageId {
        PackageId::wetech()
    }

    fn provider(&self) -> Provider {
        Provider::Wetech
    }

    /// Runs a locked request: exactly one ready query of the Wetech package.
    async fn call(
        &self,
        request: &LockedRequest,
        config: &WetechConfig,
        secrets: &WetechSecrets,
    ) -> Result<ToolResult, ResultError> {
        let origin = request.origin();
        let query = match single_query(
            request,
            &self.package(),
            self.provider(),
            Code::WetechInvalidRequest,
        ) {
            Ok(q) => q,
            Err(done) => return *done,
        };
        let query_id = Some(query.query_id.clone());
        let digest = Some(query.request_digest);
        let prepared = match prepare(secrets) {
            Ok(p) => p,
            Err(failure) => return failed(origin, query_id, digest, *failure),
        };
        // Configuration before anything starts: a host outside the allowlist starts no
        // browser and sends nothing.
        if let Err(e) = config.allowlist.check(&config.grafana_url) {
            let failure = prepared.mapper.failure(&e);
            return failed(origin, query_id, digest, failure);
        }
        let top_k = request.scope.series_kept;
        let details = match run(config, query, &prepared, top_k).await {
            Ok(evidence) => Details::success(
                origin,
                query.query_id.clone(),
                query.request_digest,
                evidence,
            ),
            Err(failure) => Details::failure(origin, query_id, digest, *failure),
        };
        finish(details)
    }
}

/// Parses the storage state and builds the redactor. Local only.
fn prepare(secrets: &WetechSecrets) -> Result<Prepared, Box<Failure>> {
    let invalid = |detail: String| {
        Box::new(Failure::new(
            Code::WetechStorageStateInvalid.code(),
            Code::WetechStorageStateInvalid.class(),
            format!("the browser storage state cannot be used: {detail}"),
        ))
    };
    let state = StorageState::parse(&secrets.storage_state).map_err(invalid)?;
    let redactor = Redactor::new(state.secret_values());
    let mapper = ResponseMapper::new(Provider::Wetech, redactor);
    Ok(Prepared { state, mapper })
}

async fn run(
    config: &WetechConfig,
    query: &LockedQuery,
    prepared: &Prepared,
    top_k: u32,
) -> Result<Evidence, Box<Failure>> {
    let redactor = prepared.mapper.redactor();
    let script_timeout = config.limits.timeout + SCRIPT_MARGIN;
    let mut browser = Browser::launch(&config.browser, script_timeout)
        .await
        .map_err(|e| browser_failure(&e, redactor))?;
    let outcome = drive(config, &browser, query, prepared, top_k).await;
    let cleanup = browser.shutdown().await;
    finish_cleanup(outcome, cleanup)
}

async fn drive(
    config: &WetechConfig,
    browser: &Browser,
    query: &LockedQuery,
    prepared: &Prepared,
    top_k: u32,
) -> Result<Evidence, Box<Failure>> {
    let redactor = prepared.mapper.redactor();
    let client = browser
        .client()
        .map_err(|e| browser_failure(&e, redactor))?;

    // Readiness: the health endpoint answers with a version.
    open_health(config, client, redactor).await?;
    // The page's client hints must agree with the User-Agent.
    let identity = read_identity(browser, client, redactor).await?;
    if !identity.is_consistent() {
        return Err(Box::new(Failure::new(
            Code::WetechUserAgentMismatch.code(),
            Code::WetechUserAgentMismatch.class(),
            format!(
                "the browser's User-Agent ({:?}) does not match its client hints (major {:?})",
                identity.user_agent,
                identity.brand_major()
            ),
        )));
    }

    // The storage state, on the Grafana origin.
    apply_storage_state(config, client, &prepared.state, redactor).await?;

    // The session must hold: the landing page must not end on the login page.
    let landing = url_of(config, &config.landing_path)?;
    goto(client, &landing, redactor, |detail| {
        Failure::new(
            OriginCode::Unavailable.code(Provider::Wetech),
            OriginCode::Unavailable.class(),
            format!("Grafana's page {landing} did not load: {detail}"),
        )
    })
    .await?;
    let at = client
        .current_url()
        .await
        .map_err(|e| command_failure(&CommandFailure::of(&e), redactor))?;
    if is_login_page(config, &at) {
        return Err(Box::new(login_failure(config, client, &at, redactor).await));
    }

    // The query, from the page, with the session cookies.
    let url = config.query_range_url().map_err(|e| {
        Box::new(internal(
            Code::WetechInvalidUrl,
            format!("cannot build the datasource proxy URL: {e}"),
        ))
    })?;
    let window = query.evidence_window();
    let mut range = QueryRange::new(query.expr.clone(), window);
    if let Some(t) = config.evaluation_timeout {
        range = range.with_timeout(t);
    }
    let fetched = page_fetch(
        client,
        &url,
        "POST",
        Some(range.form_body()),
        Some(FORM_CONTENT_TYPE),
        config.limits.max_body_bytes,
        config.limits.timeout,
    )
    .await
    .map_err(|f| command_failure(&f, redactor))?;
    let mut compaction = Compaction::new(top_k)
        .with_expr(query.expr.clone())
        .with_window(window);
    compaction.unit.clone_from(&query.unit);
    match fetched {
        Fetched::Redirect => {
            let at = client.current_url().await.unwrap_or(url);
            Err(Box::new(login_failure(config, client, &at, redactor).await))
        }
        Fetched::Failed(e) => Err(Box::new(prepared.mapper.failure(&e))),
        Fetched::Response(raw) => {
            // A ds/query-style error frame is read as the rejection it carries. A 2xx
            // body is only tried as a frame when it is no Prometheus answer, so a large
            // success is parsed once.
            if !raw.is_success()
                && let Some(frame) = error_frame(&raw.body)
            {
                return Err(Box::new(frame_failure(&prepared.mapper, &raw, frame)));
            }
            match prepared.mapper.evidence(&raw, &compaction, &KeepLabels) {
                Ok(evidence) => Ok(evidence),
                Err(failure) => match error_frame(&raw.body) {
                    Some(frame) if raw.is_success() => {
                        Err(Box::new(frame_failure(&prepared.mapper, &raw, frame)))
                    }
                    _ => Err(Box::new(failure)),
                },
            }
        }
    }
}

fn url_of(config: &WetechConfig, path: &str) -> Result<Url, Box<Failure>> {
    config.url_of(path).map_err(|e| {
        Box::new(internal(
            Code::WetechInvalidUrl,
            format!("cannot build a Grafana URL for {path:?}: {e}"),
        ))
    })
}

/// Opens the health endpoint (readiness) and leaves the page on the Grafana origin.
async fn open_health(
    config: &WetechConfig,
    client: &Client,
    redactor: &Redactor,
) -> Result<(), Box<Failure>> {
    let health = url_of(config, "api/health")?;
    let not_ready = |detail: String| {
        Failure::new(
            Code::GrafanaNotReady.code(),
            Code::GrafanaNotReady.class(),
            format!("Grafana's health endpoint {health} {detail}"),
        )
    };
    goto(client, &health, redactor, |d| {
        not_ready(format!("did not answer: {d}"))
    })
    .await?;
    let fetched = page_fetch(
        client,
        &health,
        "GET",
        None,
        None,
        HEALTH_MAX_BYTES,
        HEALTH_TIMEOUT,
    )
    .await
    .map_err(|f| command_failure(&f, redactor))?;
    let raw = match fetched {
        Fetched::Response(raw) => raw,
        Fetched::Redirect => {
            return Err(Box::new(not_ready("answered with a redirect".to_owned())));
        }
        Fetched::Failed(e) => {
            return Err(Box::new(not_ready(format!(
                "did not answer: {}",
                redactor.redact(&e.to_string())
            ))));
        }
    };
    let version = serde_json::from_slice::<Value>(&raw.body)
        .ok()
        .and_then(|v| v.get("version").and_then(Value::as_str).map(str::to_owned))
        .filter(|v| !v.trim().is_empty());
    match version {
        Some(_) if raw.is_success() => Ok(()),
        _ => {
            let text = String::from_utf8_lossy(&raw.body[..raw.body.len().min(2048)]);
            Err(Box::new(
                not_ready(format!(
                    "answered HTTP {} without a version: {}",
                    raw.status,
                    redactor.redact(text.trim())
                ))
                .with_http_status(raw.status)
                .with_body_digest(raw.body_digest()),
            ))
        }
    }
}

/// Adds the cookies that apply to the Grafana origin, with their stored attributes, and
/// writes that origin's localStorage entries (values as script arguments).
async fn apply_storage_state(
    config: &WetechConfig,
    client: &Client,
    state: &StorageState,
    redactor: &Redactor,
) -> Result<(), Box<Failure>> {
    let origin = &config.grafana_url;
    for cookie in state.cookies_for(origin) {
        if let Err(e) = client.add_cookie(cookie.to_webdriver()).await {
            return Err(match CommandFailure::of(&e) {
                CommandFailure::Other(message) => Box::new(Failure::new(
                    Code::GrafanaCookieRejected.code(),
                    Code::GrafanaCookieRejected.class(),
                    format!(
                        "the browser refused stored cookie `{}`: {}",
                        cookie.name,
                        redactor.redact(&message)
                    ),
                )),
                other => command_failure(&other, redactor),
            });
        }
    }
    if let Some((script, args)) = local_storage_command(state, origin) {
        client
            .execute(script, args)
            .await
            .map_err(|e| command_failure(&CommandFailure::of(&e), redactor))?;
    }
    Ok(())
}

/// The script and arguments that write `origin`'s localStorage entries: the script is
/// a constant and every name and value travels as an argument. `None` when the origin
/// has no entries.
fn local_storage_command(state: &StorageState, origin: &Url) -> Option<(&'static str, Vec<Value>)> {
    let entries: Vec<Value> = state
        .local_storage_for(origin)
        .map(|(name, value)| json!([name, value.expose_secret()]))
        .collect();
    (!entries.is_empty()).then(|| (script::SET_LOCAL_STORAGE, vec![Value::Array(entries)]))
}

/// True when `at` is Grafana's login page or off the Grafana origin.
fn is_login_page(config: &WetechConfig, at: &Url) -> bool {
    let base = &config.grafana_url;
    if at.origin() != base.origin() {
        return true;
    }
    let base_path = base.path().trim_end_matches('/');
    let rest = at.path().strip_prefix(base_path).unwrap_or(at.path());
    rest.trim_start_matches('/').starts_with("login")
}

/// The `authentication` failure of a session Grafana does not accept. When the page is
/// still on the Grafana origin, Grafana's own answer for the session is read from its
/// API (`/api/user`): its status (401), body digest and text join the failure, so the
/// result carries Grafana's words as the HTTP connectors carry their provider's.
async fn login_failure(
    config: &WetechConfig,
    client: &Client,
    at: &Url,
    redactor: &Redactor,
) -> Failure {
    let mut failure = Failure::new(
        Code::GrafanaLoginRedirect.code(),
        Code::GrafanaLoginRedirect.class(),
        "Grafana sent the browser to its login page: the stored session is missing, expired \
         or revoked",
    );
    if at.origin() != config.grafana_url.origin() {
        return failure;
    }
    let Ok(user) = config.url_of("api/user") else {
        return failure;
    };
    if let Ok(Fetched::Response(raw)) = page_fetch(
        client,
        &user,
        "GET",
        None,
        None,
        HEALTH_MAX_BYTES,
        HEALTH_TIMEOUT,
    )
    .await
        && matches!(raw.status, 401 | 403)
    {
        let text = String::from_utf8_lossy(&raw.body[..raw.body.len().min(2048)]);
        failure.detail_error = format!(
            "{}; Grafana's API answers HTTP {} for this session: {}",
            failure.detail_error,
            raw.status,
            redactor.redact(text.trim())
        );
        failure = failure
            .with_http_status(raw.status)
            .with_body_digest(raw.body_digest());
    }
    failure
}

fn browser_failure(e: &BrowserError, redactor: &Redactor) -> Box<Failure> {
    let (c, what, message) = match e {
        BrowserError::Start(m) => (
            Code::WetechBrowserStartFailed,
            "ChromeDriver or Chromium did not start",
            m,
        ),
        BrowserError::Lost(m) => (Code::WetechBrowserLost, "the browser stopped answering", m),
    };
    Box::new(Failure::new(
        c.code(),
        c.class(),
        format!("{what}: {}", redactor.redact(message)),
    ))
}

fn command_failure(f: &CommandFailure, redactor: &Redactor) -> Box<Failure> {
    match f {
        CommandFailure::Lost(m) => browser_failure(&BrowserError::Lost(m.clone()), redactor),
        CommandFailure::Timeout(m) => Box::new(Failure::new(
            OriginCode::Timeout.code(Provider::Wetech),
            OriginCode::Timeout.class(),
            format!("the browser did not finish in time: {}", redactor.redact(m)),
        )),
        CommandFailure::Navigation(m) => Box::new(Failure::new(
            OriginCode::Unavailable.code(Provider::Wetech),
            OriginCode::Unavailable.class(),
            format!("the page did not load: {}", redactor.redact(m)),
        )),
        CommandFailure::Other(m) => Box::new(Failure::new(
            Code::WetechBrowserCommandFailed.code(),
            Code::WetechBrowserCommandFailed.class(),
            format!("a browser command failed: {}", redactor.redact(m)),
        )),
    }
}

/// The outcome, unless the cleanup failed: a profile left on disk is an error.
fn finish_cleanup<T>(
    outcome: Result<T, Box<Failure>>,
    cleanup: Result<(), String>,
) -> Result<T, Box<Failure>> {
    match cleanup {
        Ok(()) => outcome,
        Err(problem) => Err(Box::new(Failure::new(
            Code::WetechCleanupFailed.code(),
            Code::WetechCleanupFailed.class(),
            format!("the browser profile could not be removed after the call: {problem}"),
        ))),
    }
}

async fn goto(
    client: &Client,
    url: &Url,
    redactor: &Redactor,
    on_navigation: impl FnOnce(String) -> Failure,
) -> Result<(), Box<Failure>> {
    match client.goto(url.as_str()).await {
        Ok(()) => Ok(()),
        Err(e) => Err(match CommandFailure::of(&e) {
            CommandFailure::Navigation(m) | CommandFailure::Timeout(m) => {
                Box::new(on_navigation(redactor.redact(&m)))
            }
            other => command_failure(&other, redactor),
        }),
    }
}

async fn read_identity(
    browser: &Browser,
    client: &Client,
    redactor: &Redactor,
) -> Result<BrowserIdentity, Box<Failure>> {
    let value = client
        .execute(script::IDENTITY, Vec::new())
        .await
        .map_err(|e| command_failure(&CommandFailure::of(&e), redactor))?;
    let page: PageIdentity = serde_json::from_value(value).map_err(|e| {
        Box::new(Failure::new(
            Code::WetechBrowserCommandFailed.code(),
            Code::WetechBrowserCommandFailed.class(),
            format!("unreadable browser identity: {e}"),
        ))
    })?;
    let launched = browser.launched();
    Ok(BrowserIdentity {
        browser_version: launched
            .map(|l| l.browser_version.clone())
            .unwrap_or_default(),
        launched_user_agent: launched.map(|l| l.user_agent.clone()).unwrap_or_default(),
        user_agent: page.user_agent,
        brands: page.brands.unwrap_or_default(),
    })
}

/// What a page fetch brought back.
#[derive(Debug)]
enum Fetched {
    Response(RawResponse),
    Redirect,
    Failed(ConnectorError),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FetchAnswer {
    kind: String,
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    base64: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// One `fetch` from the current page (see [`script::FETCH`]).
async fn page_fetch(
    client: &Client,
    url: &Url,
    method: &str,
    body: Option<String>,
    content_type: Option<&str>,
    max_bytes: usize,
    timeout: Duration,
) -> Result<Fetched, CommandFailure> {
    let args = vec![
        json!(url.as_str()),
        json!(method),
        body.map_or(Value::Null, Value::String),
        content_type.map_or(Value::Null, |c| json!(c)),
        json!(max_bytes),
        json!(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        json!("same-origin"),
    ];
    let run = client.execute_async(script::FETCH, args);
    let value = match tokio::time::timeout(timeout + SCRIPT_MARGIN, run).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            return match CommandFailure::of(&e) {
                CommandFailure::Timeout(m) => Ok(Fetched::Failed(ConnectorError::Timeout(m))),
                other => Err(other),
            };
        }
        Err(_) => {
            return Ok(Fetched::Failed(ConnectorError::Timeout(format!(
                "no complete answer within {} ms",
                timeout.as_millis()
            ))));
        }
    };
    let answer: FetchAnswer = serde_json::from_value(value)
        .map_err(|e| CommandFailure::Other(format!("unreadable fetch answer: {e}")))?;
    Ok(match answer.kind.as_str() {
        "response" => {
            let status = answer.status.unwrap_or(0);
            let bytes = match (answer.text, answer.base64) {
                (Some(text), _) => text.into_bytes(),
                (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| CommandFailure::Other(format!("unreadable body: {e}")))?,
                (None, None) => Vec::new(),
            };
            Fetched::Response(RawResponse::new(status, answer.content_type, bytes))
        }
        "redirect" => Fetched::Redirect,
        "too_large" => Fetched::Failed(ConnectorError::BodyTooLarge { limit: max_bytes }),
        "timeout" => Fetched::Failed(ConnectorError::Timeout(format!(
            "no complete answer within {} ms",
            timeout.as_millis()
        ))),
        _ => Fetched::Failed(ConnectorError::Unreachable(
            answer
                .message
                .unwrap_or_else(|| "the fetch failed".to_owned()),
        )),
    })
}

/// The failure of an `/api/ds/query`-style error frame: the frame's status (the HTTP
/// status when it gives none), its `errorType`, the complete redacted text, and the
/// digest of the raw body as it arrived.
fn frame_failure(
    mapper: &ResponseMapper,
    raw: &RawResponse,
    frame: super::frame::ErrorFrame,
) -> Failure {
    let status = frame
        .status
        .filter(|s| !(200..300).contains(s))
        .unwrap_or(raw.status);
    let mut envelope = json!({"status": "error", "error": frame.error});
    if let Some(t) = &frame.error_type {
        envelope["errorType"] = json!(t);
    }
    let as_prometheus = RawResponse::new(status, raw.content_type.clone(), envelope.to_string());
    let mut failure = match mapper.evidence(&as_prometheus, &Compaction::default(), &KeepLabels) {
        Err(f) => f,
        Ok(_) => Failure::new(
            ErrorCode::http(Provider::Wetech, status),
            FailureClass::ProviderUnavailable,
            mapper.redactor().redact(&frame.error),
        ),
    };
    failure.error.http_status = Some(status);
    failure.error.body_digest = Some(raw.body_digest());
    failure
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostAllowlist;
    use crate::wetech::config::BrowserConfig;
    use evidence_result::Digest;
    use proptest::prelude::*;

    fn config(base: &str) -> WetechConfig {
        let url = Url::parse(base).unwrap();
        let host = url.host_str().unwrap().to_owned();
        WetechConfig::new(
            url,
            HostAllowlist::new([host]).unwrap(),
            "uid",
            BrowserConfig::debian(),
        )
    }

    #[test]
    fn login_page_detection() {
        let c = config("https://g.example/grafana/");
        let at = |u: &str| Url::parse(u).unwrap();
        assert!(is_login_page(&c, &at("https://g.example/grafana/login")));
        assert!(is_login_page(
            &c,
            &at("https://g.example/grafana/login?redirect=%2F")
        ));
        assert!(is_login_page(&c, &at("https://sso.example/auth")));
        assert!(!is_login_page(&c, &at("https://g.example/grafana/")));
        assert!(!is_login_page(&c, &at("https://g.example/grafana/d/abc")));
        let c = config("http://127.0.0.1:3000");
        assert!(is_login_page(&c, &at("http://127.0.0.1:3000/login")));
        assert!(!is_login_page(&c, &at("http://127.0.0.1:3000/?orgId=1")));
    }

    #[test]
    fn frames_keep_status_type_text_and_raw_digest() {
        let mapper = ResponseMapper::new(
            Provider::Wetech,
            Redactor::new([SecretString::from("cookie-secret-1")]),
        );
        let body = r#"{"results":{"A":{"error":"found duplicate series for the match group {cluster_id=\"SaaS01\"} (cookie-secret-1);many-to-many matching not allowed: matching labels must be unique on one side","errorSource":"downstream","status":422}}}"#;
        let raw = RawResponse::new(422, Some("application/json".into()), body);
        let frame = error_frame(&raw.body).unwrap();
        let f = frame_failure(&mapper, &raw, frame);
        assert_eq!(f.error.code.as_str(), "grafana_http_422");
        assert_eq!(f.error.class, FailureClass::QueryRejected);
        assert_eq!(f.error.prometheus_error_type.as_deref(), Some("execution"));
        assert_eq!(f.error.body_digest, Some(Digest::sha256(body.as_bytes())));
        assert!(f.detail_error.contains("many-to-many matching not allowed"));
        assert!(!f.detail_error.contains("cookie-secret-1"));
        assert!(f.correction.allowed);
    }

    fn state_with(cookie: &str, local: &str, origin: &str) -> WetechSecrets {
        WetechSecrets::new(SecretString::from(
            json!({
                "cookies": [{"name": "grafana_session", "value": cookie, "domain": "127.0.0.1",
                             "path": "/", "httpOnly": true, "secure": false}],
                "origins": [{"origin": origin, "localStorage": [
                    {"name": "grafana.auth", "value": local}]}]
            })
            .to_string(),
        ))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Provider text that echoes a storage-state value never carries it into
        /// `detail_error`, whether it arrives as a Prometheus envelope or an error frame.
        #[test]
        fn provider_text_never_carries_storage_state_values(
            cookie in "[A-Za-z0-9_-]{12,40}",
            local in "[A-Za-z0-9_.-]{12,40}",
            status in prop_oneof![Just(400u16), Just(401), Just(422), Just(500)],
            frame in any::<bool>(),
        ) {
            let secrets = state_with(&cookie, &local, "http://127.0.0.1:3000");
            let prepared = prepare(&secrets).unwrap();
            let text = format!("rejected session {cookie} with token {local}");
            let body = if frame {
                json!({"results": {"A": {"error": text, "status": status}}}).to_string()
            } else {
                json!({"status": "error", "errorType": "execution", "error": text}).to_string()
            };
            let raw = RawResponse::new(status, None, body);
            let failure = match error_frame(&raw.body) {
                Some(f) => frame_failure(&prepared.mapper, &raw, f),
                None => prepared
                    .mapper
                    .evidence(&raw, &Compaction::default(), &KeepLabels)
                    .unwrap_err(),
            };
            prop_assert!(!failure.detail_error.contains(&cookie));
            prop_assert!(!failure.detail_error.contains(&local));
            prop_assert!(failure.detail_error.contains("rejected session"));
        }

        /// localStorage names and values travel only as script arguments: the script is
        /// the constant, and the arguments carry every value exactly, whatever it holds.
        #[test]
        fn local_storage_values_are_arguments_never_script(
            value in "[ -~]{8,60}",
            name in "[ -~]{1,20}",
        ) {
            let state = StorageState::parse(&SecretString::from(json!({
                "origins": [{"origin": "http://127.0.0.1:3000", "localStorage": [
                    {"name": name, "value": value}]}]
            }).to_string())).unwrap();
            let origin = Url::parse("http://127.0.0.1:3000").unwrap();
            let (script, args) = local_storage_command(&state, &origin).unwrap();
            prop_assert_eq!(script, script::SET_LOCAL_STORAGE);
            prop_assert_eq!(args, vec![json!([[name, value]])]);
            let other = Url::parse("http://127.0.0.1:3001").unwrap();
            prop_assert!(local_storage_command(&state, &other).is_none());
        }
    }

    #[test]
    fn secrets_never_print() {
        let s = WetechSecrets::new(SecretString::from("{\"cookies\":[]}"));
        assert!(!format!("{s:?}").contains("cookies"));
    }
}
