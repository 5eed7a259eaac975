//! The Wetech connector: one locked `query_range` per call, run from a Grafana page in
//! a fresh Chromium through Grafana's datasource proxy.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use evidence_policy::{LockedRequest, ResolvedScope, lock::LockedQuery};
use evidence_result::{Details, Failure, PackageId, Provider, ResultError, ToolResult};
use secrecy::SecretString;

use super::answer::query_evidence;
use super::browser::{Browser, CLOSE_TIMEOUT, CommandFailure};
use super::cdp::Cdp;
use super::config::WetechConfig;
use super::context::{CONTEXT_COMMAND_LIMIT, CallContext, sweep};
use super::failures::{browser_failure, command_failure, finish_cleanup};
use super::grafana::*;
use super::identity::BrowserIdentity;
use super::page_fetch::{Fetched, Opened, PageRequest, SCRIPT_MARGIN, open, page_fetch};
use super::page_scripts::{PageScripts, PageSession};
use super::storage::StorageState;
use super::warm::{BrowserReuse, WarmBrowsers};
use crate::codes::{Code, OriginCode};
use crate::connector::{failed, finish, internal, single_query};
use crate::prometheus::{
    Answer, Compaction, FORM_CONTENT_TYPE, METADATA_BODY_BYTES, QueryRange, RawResponse, Redactor,
    ResponseMapper, complete_metadata, metadata_url,
};
use crate::{CloseError, Connector, ConnectorError, CutOff, Deadline, deadline_failure};

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
///
/// [`WetechConnector::warm`] is the connector of a long-running server: one browser is
/// kept between calls and each call runs in a browser context of its own (see
/// [`BrowserReuse`]); [`Connector::close`] ends it.
#[derive(Debug, Clone, Default)]
pub struct WetechConnector {
    warm: Option<Arc<WarmBrowsers>>,
}

impl WetechConnector {
    /// The connector of a one-shot call: a browser of its own for every call, ended
    /// with the call.
    pub fn new() -> Self {
        WetechConnector { warm: None }
    }

    /// The connector of a long-running server: a warm browser kept between calls,
    /// replaced as `reuse` says (and when it dies or stops answering), each call in a
    /// fresh browser context disposed of before its result leaves.
    pub fn warm(reuse: BrowserReuse) -> Self {
        WetechConnector {
            warm: Some(Arc::new(WarmBrowsers::new(reuse))),
        }
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
        let cleanup = browser.shutdown(CLOSE_TIMEOUT).await;
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

    /// Runs a locked request: exactly one ready query of the Wetech package, within
    /// `deadline` less `CLEANUP_RESERVE` (2 s) (the browser is ended and its profile removed
    /// in that reserve, whatever step the deadline cut off).
    async fn call_within(
        &self,
        request: &LockedRequest,
        config: &WetechConfig,
        secrets: &WetechSecrets,
        deadline: &Deadline,
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
        if request.scope.wetech_datasource.is_none() {
            let failure = internal(
                Code::WetechInvalidRequest,
                "the locked request names no Wetech datasource",
            );
            return failed(origin, query_id, digest, failure);
        }
        let call = Call::new(config, query, &request.scope, &prepared, deadline);
        let run = match &self.warm {
            None => run(&call, deadline).await,
            Some(warm) => run_warm(warm, &call, deadline).await,
        };
        let details = match run {
            Ok(answer) => answer.details(origin, query.query_id.clone(), query.request_digest),
            Err(failure) => Details::failure(origin, query_id, digest, *failure),
        };
        finish(details)
    }

    async fn close(&self) -> Result<(), CloseError> {
        match &self.warm {
            Some(warm) => warm.close().await.map_err(CloseError),
            None => Ok(()),
        }
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
    // One parse into the package's model: the browser's cookies and the values the
    // output guard protects come from it, so redaction and the guard follow one rule.
    let stored = evidence_package::storage_state::StorageState::parse(
        WetechSecrets::STORAGE_STATE,
        &secrets.storage_state,
    )
    .map_err(|e| invalid(e.to_string()))?;
    let state = StorageState::from_stored(&stored).map_err(invalid)?;
    let values = stored
        .protected_values(WetechSecrets::STORAGE_STATE)
        .map_err(|e| invalid(e.to_string()))?;
    let redactor = Redactor::new(values);
    let mapper = ResponseMapper::new(Provider::Wetech, redactor);
    Ok(Prepared { state, mapper })
}

/// The time a Wetech call keeps before its deadline to end its browser: close the
/// session (at most [`CLOSE_LIMIT_RESERVE`] less than this), stop ChromeDriver with
/// every Chromium process it started, remove the profile folder.
pub(crate) const CLEANUP_RESERVE: Duration = Duration::from_millis(2000);
/// What of [`CLEANUP_RESERVE`] is kept for stopping the processes and removing the
/// profile after the session's close was waited for.
const CLOSE_LIMIT_RESERVE: Duration = Duration::from_millis(1000);

/// Where a call is, for the correction of a deadline that cuts it off: the query was
/// sent from the page (a narrower query may help) or not yet.
#[derive(Debug, Default)]
struct Progress {
    querying: AtomicBool,
}

/// With a deadline, what of the cleanup reserve the browser's close (a session's, or a
/// context's disposal) may wait for.
fn close_limit(deadline: &Deadline) -> Duration {
    match deadline.remaining() {
        Some(left) => left.saturating_sub(CLOSE_LIMIT_RESERVE),
        None => CLOSE_TIMEOUT,
    }
}

impl Progress {
    fn cut_off(&self) -> CutOff {
        if self.querying.load(Ordering::SeqCst) {
            CutOff::DuringQuery
        } else {
            CutOff::BeforeQuery(
                "before the query was sent: while the browser started, Grafana's health, \
                 the storage state or the landing page was waited for",
            )
        }
    }
}

/// One call's frame: what every step reads (the configuration, the locked query and its
/// scope, the prepared secrets), the deadline of its work (the call's less
/// [`CLEANUP_RESERVE`]) with the WebDriver script limit that follows from it, and where
/// the call is.
struct Call<'a> {
    config: &'a WetechConfig,
    query: &'a LockedQuery,
    scope: &'a ResolvedScope,
    prepared: &'a Prepared,
    work: Deadline,
    script_timeout: Duration,
    progress: Progress,
}

impl<'a> Call<'a> {
    fn new(
        config: &'a WetechConfig,
        query: &'a LockedQuery,
        scope: &'a ResolvedScope,
        prepared: &'a Prepared,
        deadline: &Deadline,
    ) -> Self {
        let work = deadline.earlier_by(CLEANUP_RESERVE);
        let script_timeout = work.limit(config.limits.timeout) + SCRIPT_MARGIN;
        Call {
            config,
            query,
            scope,
            prepared,
            work,
            script_timeout,
            progress: Progress::default(),
        }
    }

    fn redactor(&self) -> &'a Redactor {
        self.prepared.mapper.redactor()
    }

    /// The outcome of `steps` run within the work deadline; cut off, the typed timeout
    /// of `deadline` for where the call was.
    async fn within(
        &self,
        deadline: &Deadline,
        steps: impl Future<Output = Result<Answer, Box<Failure>>>,
    ) -> Result<Answer, Box<Failure>> {
        match self.work.run(steps).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Box::new(deadline_failure(
                Provider::Wetech,
                deadline,
                self.progress.cut_off(),
            ))),
        }
    }
}

/// A one-shot call: a browser of its own, started and ended with the call.
async fn run(call: &Call<'_>, deadline: &Deadline) -> Result<Answer, Box<Failure>> {
    let (config, redactor) = (call.config, call.redactor());
    let mut browser =
        Browser::create(&config.browser).map_err(|e| browser_failure(&e, redactor))?;
    let steps = async {
        browser
            .start(&config.browser, call.script_timeout)
            .await
            .map_err(|e| browser_failure(&e, redactor))?;
        let cdp = browser
            .devtools(CONTEXT_COMMAND_LIMIT)
            .await
            .map_err(|e| browser_failure(&e, redactor))?;
        drive(call, &browser, &cdp).await
    };
    let outcome = call.within(deadline, steps).await;
    // The driver's process group is stopped whatever the close waited for.
    let cleanup = browser.shutdown(close_limit(deadline)).await;
    finish_cleanup(outcome, cleanup)
}

/// A call in a warm browser: leased (started when none is idle), a fresh browser
/// context opened, the same steps as [`run`], the context disposed of and the browser
/// given back (or ended, when the call lost it or it is worn out) within the cleanup
/// reserve.
async fn run_warm(
    warm: &Arc<WarmBrowsers>,
    call: &Call<'_>,
    deadline: &Deadline,
) -> Result<Answer, Box<Failure>> {
    let (config, redactor) = (call.config, call.redactor());
    let mut lease = None;
    let mut context = None;
    let steps = async {
        let leased = lease.insert(
            warm.lease(&config.browser, call.script_timeout)
                .await
                .map_err(|e| browser_failure(&e, redactor))?,
        );
        // The context readied for this call after the last one, or a new one.
        let ready = leased
            .warm_mut()
            .map_err(|e| browser_failure(&e, redactor))?
            .take_ready();
        let browser = leased.warm().map_err(|e| browser_failure(&e, redactor))?;
        let client = browser
            .client()
            .map_err(|e| browser_failure(&e, redactor))?;
        context = Some(match ready {
            Some(ready) => ready,
            None => CallContext::open(&browser.cdp, client)
                .await
                .map_err(|e| browser_failure(&e, redactor))?,
        });
        drive(call, &browser.browser, &browser.cdp).await
    };
    let outcome = call.within(deadline, steps).await;
    let Some(lease) = lease else {
        return outcome;
    };
    let close_limit = close_limit(deadline);
    let mut lost = outcome
        .as_ref()
        .is_err_and(|f| f.error.code == Code::WetechBrowserLost.code());
    if let Ok(browser) = lease.warm() {
        let disposed = async {
            let client = browser.client()?;
            match context {
                Some(context) => context.dispose(&browser.cdp, client, &browser.home).await,
                // Cut off while the context was made: whatever was made goes.
                None => sweep(&browser.cdp, None).await.map(drop),
            }
        };
        let limit = close_limit.max(Duration::from_millis(100));
        lost |= !matches!(tokio::time::timeout(limit, disposed).await, Ok(Ok(())));
    }
    let first_page = url_of(config, "api/health").ok();
    let cleanup = lease.release(lost, close_limit, first_page).await;
    finish_cleanup(outcome, cleanup)
}

/// A call's steps in a started browser whose session is on the call's page: Grafana's
/// health, the identity check, the storage state, the landing page, then the query.
async fn drive(call: &Call<'_>, browser: &Browser, cdp: &Cdp) -> Result<Answer, Box<Failure>> {
    let (config, redactor) = (call.config, call.redactor());
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
    apply_storage_state(config, client, &call.prepared.state, redactor).await?;

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

    // The query's requests run in the landing page through a DevTools session attached
    // to it, so that their bodies leave the page without crossing ChromeDriver.
    let target = client
        .window()
        .await
        .map_err(|e| command_failure(&CommandFailure::of(&e), redactor))?;
    let page = PageSession::attach(cdp, &String::from(target))
        .await
        .map_err(|f| command_failure(&f, redactor))?;
    let outcome = query_from_page(call, client, PageScripts::DevTools(&page)).await;
    page.detach().await;
    outcome
}

/// The query (and the metadata a `metric_metadata` answer asks for) from the landing
/// page, with the session cookies, its scripts run as `scripts` says.
async fn query_from_page(
    call: &Call<'_>,
    client: &fantoccini::Client,
    scripts: PageScripts<'_>,
) -> Result<Answer, Box<Failure>> {
    let Call {
        config,
        query,
        scope,
        prepared,
        work,
        progress,
        ..
    } = call;
    let redactor = prepared.mapper.redactor();
    // The query, from the page, with the session cookies.
    let datasource = scope.wetech_datasource.as_deref().unwrap_or_default();
    let url = config.query_range_url(datasource).map_err(|e| {
        Box::new(internal(
            Code::WetechInvalidUrl,
            format!("cannot build the datasource proxy URL: {e}"),
        ))
    })?;
    let window = query.evidence_window();
    // The page's fetch and Prometheus' evaluation stop when what is left of the call's
    // deadline (less the cleanup reserve) passes.
    let page_timeout = work.limit(config.limits.timeout);
    let timeout = config
        .limits
        .evaluation_timeout_within(work, config.evaluation_timeout);
    let range = QueryRange::new(query.expr.clone(), window).with_timeout(timeout);
    let compaction = Compaction::for_query(query, scope.series_kept);
    let request = PageRequest {
        url: &url,
        method: "POST",
        body: Some(range.form_body()),
        content_type: Some(FORM_CONTENT_TYPE),
        max_bytes: config.limits.max_body_bytes,
        timeout: page_timeout,
    };
    progress.querying.store(true, Ordering::SeqCst);
    let opened = open(scripts, &request)
        .await
        .map_err(|f| command_failure(&f, redactor))?;
    let answer = match opened {
        Opened::Redirect => {
            let at = client.current_url().await.unwrap_or(url);
            return Err(Box::new(login_failure(config, client, &at, redactor).await));
        }
        Opened::Failed(e) => return Err(Box::new(prepared.mapper.failure(&e))),
        Opened::Response(mut body) => query_evidence(
            &prepared.mapper,
            &mut body,
            config.limits.max_body_bytes,
            &compaction,
        )
        .await
        .map_err(|f| Box::new(prepared.mapper.naming_path(*f, url.path())))?,
    };
    // A metric_metadata answer asks the metadata of its listed names through the same
    // datasource proxy, a GET each (Grafana allows no POST there), from the page.
    let metadata_at = metadata_url(&url);
    let ask = |url| page_metadata(scripts, url, page_timeout);
    Ok(complete_metadata(answer, &prepared.mapper, work, metadata_at.as_ref(), ask).await)
}

/// One metadata request by a `GET` from the page (`url`, beside the query path), read
/// whole under [`METADATA_BODY_BYTES`].
async fn page_metadata(
    scripts: PageScripts<'_>,
    url: url::Url,
    timeout: Duration,
) -> Result<RawResponse, ConnectorError> {
    let request = PageRequest {
        url: &url,
        method: "GET",
        body: None,
        content_type: None,
        max_bytes: METADATA_BODY_BYTES,
        timeout,
    };
    match page_fetch(scripts, &request).await {
        Ok(Fetched::Response(raw)) => Ok(raw),
        Ok(Fetched::Redirect) => Err(ConnectorError::Unreachable(
            "Grafana redirected the request (the session may have ended)".to_owned(),
        )),
        Ok(Fetched::Failed(e)) => Err(e),
        Err(_) => Err(ConnectorError::Unreachable(
            "the browser could not run the request".to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::answer::frame_failure;
    use super::super::frame::error_frame;
    use super::super::script;
    use super::*;
    use crate::HostAllowlist;
    use crate::prometheus::{KeepLabels, RawResponse};
    use crate::wetech::config::BrowserConfig;
    use evidence_result::Digest;
    use evidence_result::FailureClass;
    use proptest::prelude::*;
    use serde_json::json;
    use url::Url;

    fn config(base: &str) -> WetechConfig {
        let url = Url::parse(base).unwrap();
        let host = url.host_str().unwrap().to_owned();
        WetechConfig::new(
            url,
            HostAllowlist::new([host]).unwrap(),
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
    fn frames_keep_status_type_text_and_a_digest_of_the_redacted_body() {
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
        // The digest is of what the model may see: the body with the secret redacted.
        assert_ne!(f.error.body_digest, Some(Digest::sha256(body.as_bytes())));
        let redacted = body.replace("cookie-secret-1", crate::prometheus::REDACTED);
        assert_eq!(
            f.error.body_digest,
            Some(Digest::sha256(redacted.as_bytes()))
        );
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
