//! The steps of a Wetech call on the Grafana origin: Grafana URLs, readiness (the health
//! page), applying the storage state, the session check with its `authentication`
//! failure, navigation and reading the browser's identity in the page.

use std::time::Duration;

use evidence_result::Failure;
use fantoccini::Client;
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use url::Url;

use super::browser::{Browser, CommandFailure};
use super::config::WetechConfig;
use super::failures::command_failure;
use super::identity::{BrowserIdentity, PageIdentity};
use super::page_fetch::{Fetched, PageRequest, page_fetch};
use super::page_scripts::PageScripts;
use super::script;
use super::storage::StorageState;
use crate::codes::Code;
use crate::connector::internal;
use crate::prometheus::Redactor;

/// Largest health answer read.
const HEALTH_MAX_BYTES: usize = 64 * 1024;
/// Time allowed for the health answer.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(10);

/// The start of a Grafana answer quoted in a failure, in bytes (cut at a character
/// boundary, redacted as a cut text).
const EXCERPT_BYTES: usize = 2048;

/// A `GET` of a small Grafana API answer (health, the session's user).
fn small_get(url: &Url) -> PageRequest<'_> {
    PageRequest {
        url,
        method: "GET",
        body: None,
        content_type: None,
        max_bytes: HEALTH_MAX_BYTES,
        timeout: HEALTH_TIMEOUT,
    }
}

pub(super) fn url_of(config: &WetechConfig, path: &str) -> Result<Url, Box<Failure>> {
    config.url_of(path).map_err(|e| {
        Box::new(internal(
            Code::WetechInvalidUrl,
            format!("cannot build a Grafana URL for {path:?}: {e}"),
        ))
    })
}

/// Opens the health endpoint (readiness; unless the page is there already) and leaves
/// the page on the Grafana origin.
pub(super) async fn open_health(
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
    // A warm browser's readied page may be there already (opened without any storage
    // state); the readiness itself is the fetch below, made now.
    if client.current_url().await.ok().as_ref() != Some(&health) {
        goto(client, &health, redactor, |d| {
            not_ready(format!("did not answer: {d}"))
        })
        .await?;
    }
    let fetched = page_fetch(PageScripts::WebDriver(client), &small_get(&health))
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
            let (text, _) = redactor.excerpt(&raw.body, EXCERPT_BYTES);
            Err(Box::new(
                not_ready(format!(
                    "answered HTTP {} without a version: {text}",
                    raw.status,
                ))
                .with_http_status(raw.status)
                .with_body_digest(raw.body_digest(redactor)),
            ))
        }
    }
}

/// Adds the cookies that apply to the Grafana origin, with their stored attributes, and
/// writes that origin's localStorage entries (values as script arguments).
pub(super) async fn apply_storage_state(
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
pub(super) fn local_storage_command(
    state: &StorageState,
    origin: &Url,
) -> Option<(&'static str, Vec<Value>)> {
    let entries: Vec<Value> = state
        .local_storage_for(origin)
        .map(|(name, value)| json!([name, value.expose_secret()]))
        .collect();
    (!entries.is_empty()).then(|| (script::SET_LOCAL_STORAGE, vec![Value::Array(entries)]))
}

/// True when `at` is Grafana's login page or off the Grafana origin.
pub(super) fn is_login_page(config: &WetechConfig, at: &Url) -> bool {
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
pub(super) async fn login_failure(
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
    if let Ok(Fetched::Response(raw)) =
        page_fetch(PageScripts::WebDriver(client), &small_get(&user)).await
        && matches!(raw.status, 401 | 403)
    {
        let (text, _) = redactor.excerpt(&raw.body, EXCERPT_BYTES);
        failure.detail_error = format!(
            "{}; Grafana's API answers HTTP {} for this session: {text}",
            failure.detail_error, raw.status,
        );
        failure = failure
            .with_http_status(raw.status)
            .with_body_digest(raw.body_digest(redactor));
    }
    failure
}

pub(super) async fn goto(
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

pub(super) async fn read_identity(
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
