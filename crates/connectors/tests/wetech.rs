//! The Wetech connector against real parts: Chromium and ChromeDriver (Debian), a real
//! Prometheus over the seed fixtures, and the Grafana test front between them. The
//! connector is a transport of locked requests; locking before any browser start and the
//! output guard belong to the sandbox call and are tested with it (`evidence-tool`). Browser
//! tests hold the test binary's one `BrowserSlot`, so they run one at a time.
#![cfg(feature = "wetech")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::TcpListener;
use std::time::{Duration, Instant};

use evidence_connectors::{
    BrowserConfig, Connector, HostAllowlist, ResponseLimits, WebDriverEndpoint, WetechConfig,
    WetechConnector, WetechSecrets,
};
use evidence_policy::{LockedRequest, ScopeBinding, TrustedPolicy, lock, lock::ScopeValue};
use evidence_result::{
    Details, Digest, FailureClass, PolicySource, RequestDigest, Status, ToolResult,
};
use evidence_test_support::*;
use secrecy::SecretString;
use serde_json::{Value, json};
use url::Url;

/// A localStorage value the storage state protects (JSON with a token leaf).
const LOCAL_TOKEN: &str = "ls-token-5d1e2f3a4b5c6d7e";

/// The trusted policy of APID-29213 for Wetech, with the query ids the tests use.
fn policy() -> TrustedPolicy {
    let mut v = evidence_test_support::policy::apid_29213_policy("wetech").unwrap();
    v["policy_id"] = json!("pol-APID-29213-wetech");
    v["wetech_query_ids"] = json!(["tidb_cpu", "tidb_cpu_saturation", "session_canary"]);
    v["wetech_datasource"] = json!(GrafanaFront::DATASOURCE_UID);
    v["limits"]["max_batch"] = json!(1);
    let p: TrustedPolicy = serde_json::from_value(v).unwrap();
    p.validate().unwrap();
    p
}

/// A Playwright storage state for the front: the session cookie (stored without
/// `sameSite`, so the Lax default is what makes Chromium accept it), a second cookie
/// with explicit attributes, a cookie for another site, and a localStorage entry.
fn storage_state(grafana: &GrafanaFront, session_expires: f64) -> WetechSecrets {
    let state = json!({
        "cookies": [
            {"name": GRAFANA_SESSION_COOKIE_NAME, "value": GRAFANA_SESSION_COOKIE_VALUE,
             "domain": "127.0.0.1", "path": "/", "expires": session_expires,
             "httpOnly": true, "secure": false},
            {"name": "grafana_session_expiry", "value": "1893456000", "domain": "127.0.0.1",
             "path": "/", "expires": 1893456000.0, "httpOnly": false, "secure": false,
             "sameSite": "Strict"},
            {"name": "sso_session", "value": "sso-value-0123456789", "domain": ".sso.example",
             "path": "/", "expires": -1, "httpOnly": true, "secure": true, "sameSite": "None"}
        ],
        "origins": [{"origin": grafana.base_url(), "localStorage": [
            {"name": "grafana.auth", "value": format!("{{\"token\":\"{LOCAL_TOKEN}\"}}")}
        ]}]
    });
    WetechSecrets::new(SecretString::from(state.to_string()))
}

/// Real Prometheus, the Grafana front, and a fresh folder for the browser profiles.
struct Env {
    _prometheus: Prometheus,
    grafana: GrafanaFront,
    profiles: tempfile::TempDir,
}

impl Env {
    async fn start() -> Self {
        Self::over(Prometheus::start(Fixture::Main).await.unwrap()).await
    }

    async fn over(prometheus: Prometheus) -> Self {
        let grafana = GrafanaFront::start(&prometheus.url()).await.unwrap();
        Env {
            _prometheus: prometheus,
            grafana,
            profiles: tempfile::tempdir().unwrap(),
        }
    }

    fn config(&self, webdriver: WebDriverEndpoint) -> WetechConfig {
        let chromium = Chromium::find().unwrap();
        let url = Url::parse(&self.grafana.base_url()).unwrap();
        let allow = format!("127.0.0.1:{}", url.port().unwrap());
        WetechConfig::new(
            url,
            HostAllowlist::new([allow]).unwrap(),
            BrowserConfig::new(chromium.path(), webdriver)
                .with_profile_parent(self.profiles.path()),
        )
    }

    fn attached(&self, driver: &ChromeDriver) -> WetechConfig {
        self.config(WebDriverEndpoint::Attach {
            url: Url::parse(&driver.url()).unwrap(),
        })
    }

    /// A ChromeDriver, the configuration attached to it and a valid storage state.
    async fn session_parts(
        &self,
        slot: &BrowserSlot,
    ) -> (ChromeDriver, WetechConfig, WetechSecrets) {
        let driver = ChromeDriver::start(slot).await.unwrap();
        let config = self.attached(&driver);
        (driver, config, storage_state(&self.grafana, -1.0))
    }

    fn proxy_requests(&self) -> usize {
        let path = self.grafana.query_range_path();
        self.grafana
            .requests()
            .iter()
            .filter(|r| r.path == path)
            .count()
    }

    /// Every call leaves no profile behind.
    fn assert_profiles_removed(&self) {
        let left: Vec<_> = std::fs::read_dir(self.profiles.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(left.is_empty(), "profile folders left behind: {left:?}");
    }
}

fn args(query_id: &str, expr: &str, unit: &str) -> Value {
    json!({"queryId": query_id, "expr": expr, "unit": unit})
}

/// The Wetech package's scope labels, as its manifest declares them.
fn scope() -> Vec<ScopeBinding> {
    vec![ScopeBinding::new("cluster_id", ScopeValue::ClusterId).unwrap()]
}

fn locked(args: &Value) -> LockedRequest {
    let p = policy();
    lock(&p, PolicySource::TrustedEnvelope, args, &scope()).unwrap()
}

/// `text` parses to exactly `details`, and the whole result reads back.
fn assert_transport(result: &ToolResult) {
    let parsed: Details = serde_json::from_str(result.text()).unwrap();
    assert_eq!(&parsed, result.details());
    ToolResult::from_json(&result.to_json().unwrap()).unwrap();
}

/// `result` is a failure with this code and class, its transport intact.
fn assert_failure(result: &ToolResult, code: &str, class: FailureClass) {
    assert_transport(result);
    let error = result.details().error.clone().unwrap();
    assert_eq!(error.code.as_str(), code, "{}", result.text());
    assert_eq!(error.class, class);
}

fn no_secret_in(result: &ToolResult) {
    let json = result.to_json().unwrap();
    for secret in [
        GRAFANA_SESSION_COOKIE_VALUE,
        LOCAL_TOKEN,
        "sso-value-0123456789",
    ] {
        assert!(!json.contains(secret), "secret in output: {json}");
    }
}

/// The many-to-many rejection of `TIDB_MANY_TO_MANY`, as Prometheus wrote it through
/// Grafana's proxy: `grafana_http_422` of class `query_rejected`, the full text, a
/// correction with the same `queryId`, the same object in `text`. Gives the detail, the
/// body digest and the request digest.
fn assert_many_to_many_rejection(rejected: &ToolResult) -> (String, Option<Digest>, RequestDigest) {
    assert_transport(rejected);
    no_secret_in(rejected);
    let d = rejected.details();
    assert_eq!(d.status, Status::Error, "{}", rejected.text());
    let error = d.error.as_ref().unwrap();
    assert_eq!(error.code.as_str(), "grafana_http_422");
    assert_eq!(error.class, FailureClass::QueryRejected);
    assert_eq!(error.http_status, Some(422));
    assert_eq!(error.prometheus_error_type.as_deref(), Some("execution"));
    assert!(error.body_digest.is_some());
    let detail = d.detail_error.as_deref().unwrap();
    assert!(
        detail.starts_with(r#"found duplicate series for the match group {cluster_id="SaaS01"}"#),
        "{detail}"
    );
    assert!(
        detail.contains(
            "many-to-many matching not allowed: matching labels must be unique on one side"
        ),
        "{detail}"
    );
    let correction = d.correction.as_ref().unwrap();
    assert!(correction.allowed);
    assert!(correction.instruction.contains("same queryId"));
    assert!(correction.keep.iter().any(|k| k == "queryId"));
    assert_eq!(d.query_id.as_ref().unwrap().as_str(), "tidb_cpu_saturation");
    // The model reads the same object from `text`.
    let text: Value = serde_json::from_str(rejected.text()).unwrap();
    assert_eq!(text["error"]["code"], "grafana_http_422");
    assert_eq!(text["detail_error"], detail);
    (
        detail.to_owned(),
        error.body_digest,
        d.request_digest.unwrap(),
    )
}

/// The same rejection answered as an `/api/ds/query`-style error frame: the same code,
/// type and detail, the digest of the frame's own body.
fn assert_framed_rejection(framed: &ToolResult, detail: &str, body_digest: Option<Digest>) {
    assert_transport(framed);
    let f = framed.details();
    let ferror = f.error.as_ref().unwrap();
    assert_eq!(ferror.code.as_str(), "grafana_http_422");
    assert_eq!(ferror.prometheus_error_type.as_deref(), Some("execution"));
    assert_eq!(f.detail_error.as_deref(), Some(detail));
    assert_ne!(
        ferror.body_digest, body_digest,
        "digest of the frame's own body"
    );
}

/// The corrected `TIDB_CPU_SATURATION` call with the same `queryId`: real data (56
/// series, peak 22.84 / 32) under another request digest.
fn assert_corrected_saturation(corrected: &ToolResult, rejected_digest: RequestDigest) {
    assert_transport(corrected);
    no_secret_in(corrected);
    let c = corrected.details();
    assert_eq!(c.status, Status::Ok, "{}", corrected.text());
    assert_eq!(c.query_id.as_ref().unwrap().as_str(), "tidb_cpu_saturation");
    assert_ne!(c.request_digest.unwrap(), rejected_digest);
    let evidence = c.evidence.as_ref().unwrap();
    assert_eq!(evidence.series_count, 56);
    assert_eq!(evidence.unit.as_deref(), Some("ratio"));
    assert!((evidence.top_peak().unwrap() - 22.84 / 32.0).abs() < FIGURE_TOLERANCE);
}

/// Every query from the page carries Prometheus' evaluation timeout: the call's time
/// limit (30 s by default) minus the margin.
fn assert_evaluation_timeouts(grafana: &GrafanaFront, queries: usize) {
    let path = grafana.query_range_path();
    let timeouts: Vec<_> = grafana
        .requests()
        .iter()
        .filter(|r| r.path == path)
        .map(|r| r.param("timeout").map(str::to_owned))
        .collect();
    assert_eq!(timeouts, vec![Some("29".to_owned()); queries]);
}

#[tokio::test]
async fn seed_canary_rejection_then_corrected_call_returns_real_data() {
    let slot = BrowserSlot::acquire().await;
    let baseline = chromium_process_count();
    let env = Env::start().await;
    let (driver, config, secrets) = env.session_parts(&slot).await;
    let connector = WetechConnector::new();

    // A real execution-time rejection from Prometheus, through Grafana's proxy.
    let rejected_args = args("tidb_cpu_saturation", TIDB_MANY_TO_MANY.expr, "ratio");
    let rejected = connector
        .call(&locked(&rejected_args), &config, &secrets)
        .await
        .unwrap();
    let (detail, body_digest, rejected_digest) = assert_many_to_many_rejection(&rejected);
    env.assert_profiles_removed();

    // The same rejection answered as an /api/ds/query-style error frame.
    env.grafana.set_error_style(ErrorStyle::DsQueryFrame);
    let framed = connector
        .call(&locked(&rejected_args), &config, &secrets)
        .await
        .unwrap();
    assert_framed_rejection(&framed, &detail, body_digest);
    env.grafana.set_error_style(ErrorStyle::PassThrough);
    env.assert_profiles_removed();

    // The corrected call, same queryId: real data, another request digest.
    let corrected = connector
        .call(
            &locked(&args(
                "tidb_cpu_saturation",
                TIDB_CPU_SATURATION.expr,
                "ratio",
            )),
            &config,
            &secrets,
        )
        .await
        .unwrap();
    assert_corrected_saturation(&corrected, rejected_digest);
    assert_eq!(env.proxy_requests(), 3);
    assert_evaluation_timeouts(&env.grafana, 3);
    env.assert_profiles_removed();

    drop(driver);
    assert_eq!(wait_for_chromium_count(baseline).await, baseline);
    drop(slot);
}

#[tokio::test]
async fn expired_or_missing_session_is_authentication_once_without_retry() {
    let slot = BrowserSlot::acquire().await;
    let env = Env::start().await;
    let driver = ChromeDriver::start(&slot).await.unwrap();
    let config = env.attached(&driver);
    let connector = WetechConnector::new();
    let request = locked(&args("tidb_cpu", TIDB_CPU.expr, "cores"));

    // The stored session cookie expired yesterday: the browser drops it.
    let yesterday = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 86_400) as f64;
    let expired = storage_state(&env.grafana, yesterday);
    let result = connector.call(&request, &config, &expired).await.unwrap();
    assert_transport(&result);
    no_secret_in(&result);
    let error = result.details().error.clone().unwrap();
    assert_eq!(
        error.class,
        FailureClass::Authentication,
        "{}",
        result.text()
    );
    assert_eq!(error.code.as_str(), "grafana_login_redirect");
    // Grafana's own answer for the session joins the failure.
    assert_eq!(error.http_status, Some(401));
    assert!(error.body_digest.is_some());
    let detail = result.details().detail_error.as_deref().unwrap();
    assert!(detail.contains("Unauthorized"), "{detail}");
    assert!(!result.details().correction.as_ref().unwrap().allowed);
    assert!(error.class.is_shared());
    let landings = |env: &Env| {
        env.grafana
            .requests()
            .iter()
            .filter(|r| r.path == "/")
            .count()
    };
    assert_eq!(landings(&env), 1, "one landing page, no retry");
    assert_eq!(env.proxy_requests(), 0, "no query after the login redirect");
    env.assert_profiles_removed();

    let valid = storage_state(&env.grafana, -1.0);

    // A valid session without the permission: 403 from the proxy is authorization.
    env.grafana.set_forbidden(true);
    let result = connector.call(&request, &config, &valid).await.unwrap();
    assert_transport(&result);
    let error = result.details().error.clone().unwrap();
    assert_eq!(
        error.class,
        FailureClass::Authorization,
        "{}",
        result.text()
    );
    assert_eq!(error.code.as_str(), "grafana_http_403");
    assert_eq!(env.proxy_requests(), 1);
    env.grafana.set_forbidden(false);

    // Grafana's health has no version: readiness, and no cookie or query is sent.
    env.grafana.set_health(HealthMode::NoVersion);
    let before = env.grafana.requests().len();
    let result = connector.call(&request, &config, &valid).await.unwrap();
    let error = result.details().error.clone().unwrap();
    assert_eq!(error.class, FailureClass::Readiness, "{}", result.text());
    assert_eq!(error.code.as_str(), "grafana_not_ready");
    let after: Vec<_> = env.grafana.requests()[before..]
        .iter()
        .map(|r| r.path.clone())
        .collect();
    let proxy = env.grafana.query_range_path();
    assert!(
        after.iter().all(|p| p != "/" && *p != proxy),
        "landing page or query after a failed readiness check: {after:?}"
    );
    env.assert_profiles_removed();
    drop(driver);
    drop(slot);
}

#[tokio::test]
async fn user_agent_major_matches_the_client_hints() {
    let slot = BrowserSlot::acquire().await;
    let env = Env::start().await;
    let driver = ChromeDriver::start(&slot).await.unwrap();
    let identity = evidence_connectors::internal::browser_identity(&env.attached(&driver))
        .await
        .unwrap();
    let major = driver.chromium().major_version().unwrap();
    assert_eq!(identity.user_agent_major(), Some(major), "{identity:?}");
    assert_eq!(identity.brand_major(), Some(major), "{identity:?}");
    assert!(identity.is_consistent());
    assert_eq!(identity.user_agent, identity.launched_user_agent);
    assert!(!identity.user_agent.contains("Headless"), "{identity:?}");
    assert!(identity.browser_version.starts_with(&format!("{major}.")));
    env.assert_profiles_removed();
    drop(driver);
    drop(slot);
}

#[tokio::test]
async fn browser_that_cannot_start_is_browser_runtime() {
    let slot = BrowserSlot::acquire().await;
    let env = Env::start().await;
    let secrets = storage_state(&env.grafana, -1.0);
    let request = locked(&args("tidb_cpu", TIDB_CPU.expr, "cores"));
    let connector = WetechConnector::new();

    // Nothing listens where the WebDriver server should be.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let config = env.config(WebDriverEndpoint::Attach {
        url: Url::parse(&format!("http://{addr}")).unwrap(),
    });
    let result = connector.call(&request, &config, &secrets).await.unwrap();
    assert_transport(&result);
    let error = result.details().error.clone().unwrap();
    assert_eq!(
        error.class,
        FailureClass::BrowserRuntime,
        "{}",
        result.text()
    );
    assert_eq!(error.code.as_str(), "wetech_browser_start_failed");
    assert!(!result.details().correction.as_ref().unwrap().allowed);
    env.assert_profiles_removed();

    // ChromeDriver runs, but the browser program does not exist.
    let driver = ChromeDriver::start(&slot).await.unwrap();
    let mut config = env.attached(&driver);
    config.browser.chromium = env.profiles.path().join("no-such-chromium");
    let result = connector.call(&request, &config, &secrets).await.unwrap();
    let error = result.details().error.clone().unwrap();
    assert_eq!(
        error.class,
        FailureClass::BrowserRuntime,
        "{}",
        result.text()
    );
    env.assert_profiles_removed();

    // A Grafana host outside the allowlist starts nothing.
    let mut config = env.attached(&driver);
    config.allowlist = HostAllowlist::new(["grafana.wetech.internal.example"]).unwrap();
    let result = connector.call(&request, &config, &secrets).await.unwrap();
    let error = result.details().error.clone().unwrap();
    assert_eq!(error.code.as_str(), "grafana_host_not_allowed");
    assert!(env.grafana.requests().is_empty());
    drop(driver);
    drop(slot);
}

/// The result of a valid answer far over the former page bound: `ok`, every series of
/// `body` counted, the top peak found.
fn assert_whole_answer(result: &ToolResult, body: &[u8]) {
    let series = String::from_utf8_lossy(body).matches("{\"metric\"").count() as u64;
    assert_transport(result);
    let d = result.details();
    assert_eq!(d.status, Status::Ok, "{}", result.text());
    let evidence = d.evidence.as_ref().unwrap();
    assert!(body.len() > 16 << 20);
    assert_eq!(evidence.series_count, series);
    assert_eq!(evidence.point_count, series * 64);
    assert_eq!(evidence.top_peak(), Some(63.5));
}

/// The result of a long 2xx body that is no answer: `grafana_non_json_body`, with the
/// digest of its first MiB.
fn assert_no_answer_with_digest(result: &ToolResult) {
    assert_failure(
        result,
        "grafana_non_json_body",
        FailureClass::ProviderUnavailable,
    );
    let d = result.details();
    assert!(d.error.as_ref().unwrap().body_digest.is_some());
    let detail = d.detail_error.as_deref().unwrap();
    assert!(
        detail.contains(&format!("digest of the first {}", 1 << 20)),
        "{detail}"
    );
}

/// The page hands the body over in chunks, each folded as it arrives: a 20 MiB answer
/// (over the former 16 MiB page bound) is answered `ok`. Every way a body can end early
/// is a typed failure that closes the WebDriver session and leaves no Chrome process
/// or profile behind: a body over the total bound, a connection broken mid-answer, a
/// long body that stops being an answer (left by the connector), a body still arriving
/// at the time limit.
#[tokio::test]
async fn bodies_arrive_in_chunks_and_every_early_end_cleans_up() {
    let slot = BrowserSlot::acquire().await;
    let baseline = chromium_process_count();
    let env = Env::start().await;
    let (driver, config, secrets) = env.session_parts(&slot).await;
    let connector = WetechConnector::new();
    let request = locked(&args("tidb_cpu", TIDB_CPU.expr, "cores"));
    let cleaned_up = |what: &'static str| {
        let driver = &driver;
        let env = &env;
        async move {
            env.assert_profiles_removed();
            assert_eq!(
                driver.session_count().await.unwrap(),
                0,
                "{what}: a session"
            );
            assert_eq!(
                wait_for_chromium_count(baseline).await,
                baseline,
                "{what}: Chrome"
            );
        }
    };

    // 20 MiB of valid answer: every series counted, the top peak found.
    let bytes = 20 << 20;
    env.grafana
        .faults()
        .set_fault(Fault::OversizedBody { bytes });
    let result = connector.call(&request, &config, &secrets).await.unwrap();
    assert_whole_answer(&result, &oversized_matrix_body(bytes));
    cleaned_up("a 20 MiB answer").await;

    // The same answer over a total bound of 8 MiB.
    let bounded = config.clone().with_limits(ResponseLimits {
        max_body_bytes: 8 << 20,
        ..ResponseLimits::default()
    });
    let result = connector.call(&request, &bounded, &secrets).await.unwrap();
    assert_failure(
        &result,
        "grafana_response_too_large",
        FailureClass::QueryRejected,
    );
    cleaned_up("a body over the total bound").await;

    // The connection breaks after 3 MiB of a valid start.
    env.grafana
        .faults()
        .set_fault(Fault::CutBody { bytes: 3 << 20 });
    let result = connector.call(&request, &config, &secrets).await.unwrap();
    assert_failure(
        &result,
        "grafana_unavailable",
        FailureClass::ProviderUnavailable,
    );
    cleaned_up("a broken answer").await;

    // A 2xx body that stops being an answer at its 60th byte, 6 MiB long: the
    // connector stops reading once it holds the first 1 MiB for the digest and cancels
    // the read in the page.
    env.grafana
        .faults()
        .set_fault(Fault::BrokenMatrix { bytes: 6 << 20 });
    let result = connector.call(&request, &config, &secrets).await.unwrap();
    assert_no_answer_with_digest(&result);
    cleaned_up("a long body that is no answer").await;

    // A valid body arriving at 64 KiB every 50 ms (8 MiB: about 6.4 s) against a
    // time limit of 3 s that covers the whole page read.
    env.grafana.faults().set_fault(Fault::SlowBody {
        bytes: 8 << 20,
        chunk_delay: Duration::from_millis(50),
    });
    let limited = config.clone().with_limits(ResponseLimits {
        timeout: Duration::from_secs(3),
        ..ResponseLimits::default()
    });
    let started = Instant::now();
    let result = connector.call(&request, &limited, &secrets).await.unwrap();
    let elapsed = started.elapsed();
    assert_failure(&result, "grafana_timeout", FailureClass::Timeout);
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
    cleaned_up("a body still arriving at the time limit").await;

    // The page's renderer crashes while the body is being read (64 MiB at 64 KiB every
    // 50 ms, under a 20 s time limit): the call sees the browser lost at once, not at
    // its time limit.
    env.grafana.faults().set_fault(Fault::SlowBody {
        bytes: 64 << 20,
        chunk_delay: Duration::from_millis(50),
    });
    let limited = config.clone().with_limits(ResponseLimits {
        timeout: Duration::from_secs(20),
        ..ResponseLimits::default()
    });
    let asked = env.grafana.requests().len();
    let started = Instant::now();
    let crash = async {
        while env.grafana.requests().len() == asked {
            assert!(started.elapsed() < Duration::from_secs(15), "no query came");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        driver.kill_renderers()
    };
    let (result, crashed) = tokio::join!(connector.call(&request, &limited, &secrets), crash);
    let result = result.unwrap();
    let elapsed = started.elapsed();
    assert!(crashed > 0, "no renderer to crash");
    assert_failure(&result, "wetech_browser_lost", FailureClass::BrowserRuntime);
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    cleaned_up("a renderer crashed mid-read").await;
    env.grafana.faults().clear();
    drop(driver);
    drop(slot);
}

/// Discovery through the Grafana page in real Chromium: each form under a policy that
/// grants it, answered from the fixture's `SaaS01` series through the datasource proxy
/// (POST `query_range`, the one request Wetech makes), refused without the grant before
/// any browser work, and a front that ignores the scope matcher refused whole.
#[tokio::test]
async fn each_discovery_form_runs_through_the_grafana_page() {
    let slot = BrowserSlot::acquire().await;
    let exposition = "\
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 1
";
    let prometheus = Prometheus::start_with_metadata(Fixture::Main, exposition)
        .await
        .unwrap();
    let env = Env::over(prometheus).await;
    let (driver, config, secrets) = env.session_parts(&slot).await;
    let connector = WetechConnector::new();
    let mut granted = policy();
    granted.discovery = Some(evidence_policy::policy::DiscoveryGrant { max_items: 20 });
    let run = |args: Value| {
        let request = lock(&granted, PolicySource::TrustedEnvelope, &args, &scope()).unwrap();
        let connector = &connector;
        let config = &config;
        let secrets = &secrets;
        async move { connector.call(&request, config, secrets).await.unwrap() }
    };
    let rows = |result: &ToolResult| -> Value {
        assert_transport(result);
        no_secret_in(result);
        let d = result
            .details()
            .discovery
            .clone()
            .unwrap_or_else(|| panic!("{}", result.text()));
        d.check().unwrap();
        json!({"total": d.total, "more": d.more, "rows": d.rows, "columns": d.columns})
    };
    let names = run(json!({"queryId": "tidb_cpu", "discover": "metric_names"})).await;
    assert_eq!(
        rows(&names),
        json!({"total": 4, "more": 0, "columns": ["name", "series"],
               "rows": [["process_cpu_seconds_total", 56], ["tidb_server_maxprocs", 56],
                        ["process_resident_memory_bytes", 12], ["tidb_server_session_info", 1]]})
    );
    let labels = run(json!({"queryId": "tidb_cpu", "discover": "label_names",
                            "selector": "{job=\"tidb\"}"}))
    .await;
    assert_eq!(
        rows(&labels),
        json!({"total": 5, "more": 0, "columns": ["label", "values"],
               "rows": [["instance", 56], ["__name__", 4], ["cluster_id", 1], ["job", 1],
                        ["session_id", 1]]})
    );
    let values = run(
        json!({"queryId": "tidb_cpu", "discover": "label_values", "label": "instance",
                            "selector": "process_resident_memory_bytes"}),
    )
    .await;
    let v = rows(&values);
    assert_eq!(
        (v["total"].clone(), v["more"].clone()),
        (json!(12), json!(0)),
        "{v}"
    );
    let series = run(json!({"queryId": "tidb_cpu", "discover": "series",
                            "selector": "process_resident_memory_bytes"}))
    .await;
    let s = rows(&series);
    assert_eq!(
        (s["total"].clone(), s["more"].clone()),
        (json!(12), json!(0)),
        "{s}"
    );
    assert_eq!(s["columns"], json!(["__name__", "instance", "job"]), "{s}");
    assert_eq!(env.proxy_requests(), 4);

    // The provider's metadata of the listed names: a GET each through the proxy.
    let described = run(json!({"queryId": "tidb_cpu", "discover": "metric_metadata",
                               "pattern": "process_.*"}))
    .await;
    let m = rows(&described);
    assert_eq!(
        m["rows"],
        json!([
            ["process_cpu_seconds_total", 56],
            ["process_resident_memory_bytes", 12]
        ])
    );
    let d = described.details().discovery.clone().unwrap();
    assert_eq!(
        serde_json::to_value(d.metadata.as_ref().unwrap()).unwrap(),
        json!({"source": "provider_global", "without": 1, "names": [
            {"name": "process_cpu_seconds_total", "type": "counter",
             "help": "Total user and system CPU time spent in seconds."}]}),
        "{}",
        described.text()
    );
    let metadata_path = env
        .grafana
        .query_range_path()
        .replace("query_range", "metadata");
    let asked: Vec<(String, Option<String>)> = env
        .grafana
        .requests()
        .iter()
        .filter(|r| r.path == metadata_path)
        .map(|r| (r.method.clone(), r.param("metric").map(str::to_owned)))
        .collect();
    assert_eq!(
        asked,
        [
            (
                "GET".to_owned(),
                Some("process_cpu_seconds_total".to_owned())
            ),
            (
                "GET".to_owned(),
                Some("process_resident_memory_bytes".to_owned())
            )
        ]
    );
    assert_eq!(env.proxy_requests(), 5);

    // A Grafana front that drops the scope matcher answers for every cluster: refused.
    env.grafana.faults().set_fault(Fault::IgnoreScope {
        label: "cluster_id",
    });
    let leaked = run(json!({"queryId": "tidb_cpu", "discover": "label_values",
                            "label": "cluster_id", "selector": "{job=~\".+\"}"}))
    .await;
    assert_failure(&leaked, "grafana_out_of_scope", FailureClass::Internal);
    assert!(!leaked.text().contains("SaaS99"), "{}", leaked.text());
    env.grafana.faults().clear();

    // Without the grant: refused while locking, nothing sent.
    let refused = lock(
        &policy(),
        PolicySource::TrustedEnvelope,
        &json!({"queryId": "tidb_cpu", "discover": "metric_names"}),
        &scope(),
    )
    .unwrap_err();
    assert_eq!(refused.code().as_str(), "discovery_not_granted");
    assert_eq!(env.proxy_requests(), 6);
    drop(driver);
    drop(slot);
}
