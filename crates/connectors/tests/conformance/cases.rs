//! The cases every connector runs, and the adapter trait they run through.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use evidence_connectors::ResponseLimits;
use evidence_package::{GuardBuilder, OutputGuard, guard::GuardLimits, guard::Verdict};
use evidence_policy::{
    KeyId, KeyRing, LockedRequest, PolicySigner, ScopeBinding, SignedPolicy, TrustedPolicy, lock,
    lock::LockedItem, lock::ScopeValue, verify,
};
use evidence_result::{
    Correction, Details, Digest, ErrorCode, ErrorInfo, Evidence, FailureClass, PackageId,
    PolicySource, Provider, QueryId, RequestDigest, Status, ToolResult,
};
use evidence_test_support::{
    APID_29213_END, APID_29213_START, CPU_CLUSTER, FIGURE_TOLERANCE, Fault, FaultControl, Fixture,
    RecordedRequest, TIDB_CPU, TIDB_CPU_SATURATION, TIDB_MANY_TO_MANY, TIDB_MAXPROCS, policy,
};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

/// A PromQL expression the local parser accepts (`mad_over_time` is a known function
/// there) but the real Prometheus 2.42 rejects with HTTP 400 `bad_data`: it has no such
/// function yet.
pub(crate) const SERVER_PARSE_ERROR: &str =
    r#"mad_over_time(process_cpu_seconds_total{cluster_id="SaaS01",job="tidb"}[5m])"#;
/// Its correction: a function the server knows, same selector and window.
pub(crate) const SERVER_PARSE_ERROR_CORRECTED: &str =
    r#"stddev_over_time(process_cpu_seconds_total{cluster_id="SaaS01",job="tidb"}[5m])"#;

/// The Ed25519 private key (a fixed seed) Auto-oncall signs test policies with.
const POLICY_SIGNING_KEY: &str = "Y29uZm9ybWFuY2UtcG9saWN5LXNlZWQtMDEyMzQ1Njc=";
/// The digest of the package the test policies are bound to.
const PACKAGE_BYTES: &[u8] = b"conformance package";

/// What every output of a connector is checked for, beyond the shared checks.
pub(crate) trait OutputChecks {
    /// Every injected secret, by name.
    fn secrets(&self) -> Vec<(String, SecretString)>;
    /// Connector-specific checks of every output (e.g. no instance address).
    fn check_output(&self, _result: &ToolResult) {}
}

/// An adapter that runs one connector over its real parts.
#[async_trait]
pub(crate) trait Harness: OutputChecks + Sized + Send + Sync {
    /// Starts the real parts (Prometheus, test front) the connector talks to.
    async fn start() -> Self;
    /// The provider.
    fn provider(&self) -> Provider;
    /// The package.
    fn package(&self) -> PackageId;
    /// The data set the connector's target serves.
    fn fixture(&self) -> Fixture;
    /// The model's arguments for one query, in the connector's transport shape.
    fn args(&self, query_id: &str, expr: &str) -> Value;
    /// Provider-specific policy fields (e.g. the Manus target).
    fn policy_extras(&self) -> Value {
        json!({})
    }
    /// Runs a locked request with these limits.
    async fn run(&self, request: &LockedRequest, limits: ResponseLimits) -> ToolResult;
    /// Runs with credentials the provider refuses.
    async fn run_with_bad_credentials(&self, request: &LockedRequest) -> ToolResult;
    /// Runs with a configuration whose allowlist does not list the provider's host.
    async fn run_outside_allowlist(&self, request: &LockedRequest) -> ToolResult;
    /// The class bad credentials give.
    fn bad_credentials_class(&self) -> FailureClass;
    /// The query route's fault modes.
    fn faults(&self) -> &FaultControl;
    /// Kills the real Prometheus behind the front.
    fn kill_provider(&self);
    /// How many requests the front received so far (all routes).
    fn requests(&self) -> usize;
    /// Runs the request with Prometheus' evaluation timeout configured.
    async fn run_with_evaluation_timeout(
        &self,
        request: &LockedRequest,
        limits: ResponseLimits,
        evaluation_timeout: Duration,
    ) -> ToolResult;
    /// The `timeout` parameter of every query the provider received, in order (`-` for
    /// a query without one).
    fn sent_timeouts(&self) -> Vec<String>;
    /// The base URL of the real Prometheus, to read the provider's own words.
    fn prometheus_url(&self) -> String;
    /// Asserts that `detail_error` is the complete provider text as the model may see it.
    fn check_detail(&self, provider_text: &str, detail_error: &str);
}

/// One query's outcome, whether the connector answers in a batch item or at top level.
#[derive(Debug)]
pub(crate) struct View {
    pub(crate) status: Status,
    pub(crate) query_id: Option<QueryId>,
    pub(crate) request_digest: Option<RequestDigest>,
    pub(crate) evidence: Option<Arc<Evidence>>,
    pub(crate) error: Option<ErrorInfo>,
    pub(crate) detail_error: Option<String>,
    pub(crate) correction: Option<Correction>,
}

pub(crate) fn view(result: &ToolResult) -> View {
    let d = result.details();
    match d.items.as_slice() {
        [] => View {
            status: d.status,
            query_id: d.query_id.clone(),
            request_digest: d.request_digest,
            evidence: d.evidence.clone(),
            error: d.error.clone(),
            detail_error: d.detail_error.clone(),
            correction: d.correction.clone(),
        },
        [item] => View {
            status: item.status,
            query_id: Some(item.query_id.clone()),
            request_digest: item.request_digest,
            evidence: item.evidence.clone(),
            error: item.error.clone(),
            detail_error: item.detail_error.clone(),
            correction: item.correction.clone(),
        },
        items => panic!("expected one outcome, got {} items", items.len()),
    }
}

impl View {
    pub(crate) fn evidence(&self) -> &Evidence {
        self.evidence
            .as_ref()
            .unwrap_or_else(|| panic!("expected evidence, got {self:?}"))
    }

    pub(crate) fn error(&self) -> &ErrorInfo {
        self.error
            .as_ref()
            .unwrap_or_else(|| panic!("expected an error, got {self:?}"))
    }

    pub(crate) fn code(&self) -> &str {
        self.error().code.as_str()
    }

    pub(crate) fn class(&self) -> FailureClass {
        self.error().class
    }

    pub(crate) fn detail(&self) -> &str {
        self.detail_error.as_deref().unwrap_or_default()
    }

    pub(crate) fn correction(&self) -> &Correction {
        self.correction.as_ref().expect("a correction")
    }
}

/// `<origin>_<suffix>`, the origin being `clinic`, `manus` or `grafana`.
pub(crate) fn code(provider: Provider, suffix: &str) -> String {
    let http = ErrorCode::http(provider, 0);
    let origin = http.as_str().trim_end_matches("_http_0");
    format!("{origin}_{suffix}")
}

/// The `timeout` parameter of every recorded query (`-` when it has none).
pub(crate) fn sent_timeouts(recorded: &[RecordedRequest]) -> Vec<String> {
    recorded
        .iter()
        .filter(|r| r.param("query").is_some())
        .map(|r| r.param("timeout").unwrap_or("-").to_owned())
        .collect()
}

pub(crate) fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= FIGURE_TOLERANCE
}

/// A trusted policy as Auto-oncall issues it: signed for the package digest and
/// verified the way a tool sandbox does.
pub(crate) fn trusted_policy(
    package: &PackageId,
    provider: Provider,
    cluster: &str,
    window: (i64, i64),
    extras: Value,
) -> TrustedPolicy {
    let at = |s: i64| jiff::Timestamp::from_second(s).unwrap().to_string();
    let mut fields = json!({
        "policy_id": format!("pol-conformance-{}", provider.as_str()),
        "cluster": {"id": cluster, "tier": "dedicated"},
        "window": {"start": at(window.0), "end": at(window.1)},
    });
    if let (Some(obj), Some(extra)) = (fields.as_object_mut(), extras.as_object()) {
        obj.extend(extra.clone());
    }
    let v = policy::apid_29213_now(provider.as_str(), package.as_str(), fields);
    // Read after the issue, so that the policy is valid at the time it is verified at.
    let now = jiff::Timestamp::now();
    let policy: TrustedPolicy = serde_json::from_value(v).unwrap();
    let signer = PolicySigner::from_base64(
        KeyId::new("conf2026").unwrap(),
        &secrecy::SecretString::from(POLICY_SIGNING_KEY),
    )
    .unwrap();
    // The verifying side holds only the public key.
    let keys: KeyRing = signer.key_ring_entry().parse().unwrap();
    let digest = Digest::sha256(PACKAGE_BYTES);
    let envelope = signer.sign(&policy, digest).unwrap().to_json().unwrap();
    let envelope = SignedPolicy::from_json(&envelope).unwrap();
    verify(&envelope, &keys, &digest, package, provider, now).unwrap()
}

pub(crate) fn scope() -> Vec<ScopeBinding> {
    vec![ScopeBinding::new("cluster_id", ScopeValue::ClusterId).unwrap()]
}

/// The policy of the APID-29213 window on `SaaS01` for this harness.
pub(crate) fn apid_policy<H: Harness>(h: &H) -> TrustedPolicy {
    trusted_policy(
        &h.package(),
        h.provider(),
        CPU_CLUSTER,
        (APID_29213_START, APID_29213_END),
        h.policy_extras(),
    )
}

/// Locks one query of the model against `policy`; it must lock.
pub(crate) fn locked<H: Harness>(
    h: &H,
    policy: &TrustedPolicy,
    query_id: &str,
    expr: &str,
) -> LockedRequest {
    let request = lock(
        policy,
        PolicySource::TrustedEnvelope,
        &h.args(query_id, expr),
        &scope(),
    )
    .unwrap_or_else(|r| panic!("{expr} must lock: {r}"));
    assert!(request.ready().count() == 1, "{request:?}");
    request
}

/// The locked query's digest.
pub(crate) fn digest_of(request: &LockedRequest) -> RequestDigest {
    request.ready().next().unwrap().request_digest
}

/// The guard the entrypoint would apply: every injected secret of the harness.
pub(crate) fn guard<C: OutputChecks>(h: &C) -> OutputGuard {
    let mut builder = GuardBuilder::new(GuardLimits::default());
    for (name, value) in h.secrets() {
        builder.add_secret(&name, &value).unwrap();
    }
    builder.build().unwrap()
}

/// The checks every output passes: `text` parses to exactly `details` (as typed value
/// and as JSON), the transport round-trips, no injected secret appears (raw, or in any
/// form the output guard searches), the guard passes it through unchanged, and the
/// connector's own output checks hold.
pub(crate) fn checked<C: OutputChecks>(h: &C, result: ToolResult) -> ToolResult {
    let parsed: Details = serde_json::from_str(result.text()).unwrap();
    assert_eq!(&parsed, result.details());
    let as_json: Value = serde_json::from_str(result.text()).unwrap();
    assert_eq!(as_json, serde_json::to_value(result.details()).unwrap());
    let wire = result.to_json().unwrap();
    assert_eq!(ToolResult::from_json(&wire).unwrap(), result);
    for (name, value) in h.secrets() {
        assert!(
            !wire.contains(value.expose_secret()),
            "secret {name} in the output"
        );
    }
    let guard = guard(h);
    match guard.scan_result(&result) {
        Verdict::Clean => {}
        Verdict::Blocked(b) => panic!("the output guard blocks the output: {}", b.detail()),
    }
    assert_eq!(guard.enforce(result.clone()).result, result);
    h.check_output(&result);
    result
}

/// The complete provider error text for `expr` over the policy window, read directly
/// from the real Prometheus.
pub(crate) async fn provider_error_text<H: Harness>(h: &H, request: &LockedRequest) -> String {
    provider_error_text_at(&h.prometheus_url(), request).await
}

/// The complete provider error text for the locked query, from the Prometheus at `url`.
pub(crate) async fn provider_error_text_at(url: &str, request: &LockedRequest) -> String {
    let q = request.ready().next().unwrap();
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("query", &q.expr)
        .append_pair("start", &q.start_unix().to_string())
        .append_pair("end", &q.end_unix().to_string())
        .append_pair("step", &q.step_seconds.to_string())
        .finish();
    let answer: Value = reqwest::Client::new()
        .post(format!("{url}/api/v1/query_range"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer["error"].as_str().expect("an error text").to_owned()
}

fn assert_failure(v: &View, class: FailureClass) {
    assert_eq!(v.status, Status::Error, "{v:?}");
    assert!(v.evidence.is_none());
    assert_eq!(v.class(), class, "{v:?}");
    assert!(!v.detail().is_empty());
    assert_eq!(v.correction().allowed, class.allows_correction(), "{v:?}");
}

// ---- the cases ------------------------------------------------------------------

/// Success: compact evidence of the seed query, with the query id and the locked
/// request's digest.
pub(crate) async fn success_with_compact_evidence<H: Harness>() {
    let h = H::start().await;
    let policy = apid_policy(&h);
    let request = locked(&h, &policy, TIDB_CPU.name, TIDB_CPU.expr);
    let result = checked(&h, h.run(&request, ResponseLimits::default()).await);
    assert!(!result.is_failed(), "{}", result.text());
    let v = view(&result);
    assert_eq!(v.status, Status::Ok);
    assert_eq!(v.query_id.as_ref().unwrap().as_str(), TIDB_CPU.name);
    assert_eq!(v.request_digest, Some(digest_of(&request)));
    let e = v.evidence();
    let shape = h.fixture().tidb_cpu();
    assert_eq!(e.series_count, shape.series as u64);
    assert_eq!(e.point_count, shape.series as u64 * TIDB_CPU.points());
    assert!(
        close(e.top_peak().unwrap(), shape.peak),
        "{:?}",
        e.top_peak()
    );
    assert_eq!(e.top_k, policy.limits.max_series_kept);
    assert_eq!(e.series.len(), shape.series.min(e.top_k as usize));
    assert_eq!(e.truncated, shape.series > e.top_k as usize);
    assert!(
        e.series
            .windows(2)
            .all(|w| { w[0].stats.unwrap().peak >= w[1].stats.unwrap().peak })
    );
    assert!(e.series.iter().all(|s| s.points == TIDB_CPU.points()));
    let window = e.window.unwrap();
    assert_eq!(
        (window.start, window.end, window.step_seconds),
        (APID_29213_START, APID_29213_END, 15)
    );
    assert!(
        e.expr
            .as_deref()
            .unwrap()
            .contains("process_cpu_seconds_total")
    );
    assert!(h.requests() >= 1);
}

/// A query the local parser accepts but the real server rejects with 400 `bad_data`:
/// a structured, correctable failure with the complete provider text; the corrected
/// call with the same query id returns real data under a different digest.
pub(crate) async fn server_parse_error_is_400<H: Harness>() {
    let h = H::start().await;
    let policy = apid_policy(&h);
    let request = locked(&h, &policy, "cpu_spread", SERVER_PARSE_ERROR);
    let result = checked(&h, h.run(&request, ResponseLimits::default()).await);
    assert!(result.is_failed());
    let v = view(&result);
    assert_failure(&v, FailureClass::QueryRejected);
    assert_eq!(v.code(), ErrorCode::http(h.provider(), 400).as_str());
    assert_eq!(v.error().http_status, Some(400));
    assert_eq!(v.error().prometheus_error_type.as_deref(), Some("bad_data"));
    assert!(v.error().body_digest.is_some());
    assert_eq!(v.request_digest, Some(digest_of(&request)));
    let provider_text = provider_error_text(&h, &request).await;
    assert!(provider_text.contains("mad_over_time"), "{provider_text}");
    h.check_detail(&provider_text, v.detail());
    assert!(v.correction().keep.iter().any(|k| k == "queryId"));

    let corrected = locked(&h, &policy, "cpu_spread", SERVER_PARSE_ERROR_CORRECTED);
    let result = checked(&h, h.run(&corrected, ResponseLimits::default()).await);
    let w = view(&result);
    assert_eq!(w.status, Status::Ok, "{}", result.text());
    assert_eq!(w.query_id, v.query_id);
    assert_ne!(w.request_digest, v.request_digest);
    assert_eq!(
        w.evidence().series_count,
        h.fixture().tidb_cpu().series as u64
    );
}

/// Many-to-many matching: 422 `execution` with the complete provider text
/// (label-matching and duplicate-series context included); the corrected expression
/// with the same query id returns real data under a different digest.
pub(crate) async fn many_to_many_is_422_then_corrected<H: Harness>() {
    let h = H::start().await;
    let policy = apid_policy(&h);
    let request = locked(&h, &policy, "tidb_saturation", TIDB_MANY_TO_MANY.expr);
    let result = checked(&h, h.run(&request, ResponseLimits::default()).await);
    let v = view(&result);
    assert_failure(&v, FailureClass::QueryRejected);
    assert_eq!(v.code(), ErrorCode::http(h.provider(), 422).as_str());
    assert_eq!(v.error().http_status, Some(422));
    assert_eq!(
        v.error().prometheus_error_type.as_deref(),
        Some("execution")
    );
    assert!(v.error().body_digest.is_some());
    let provider_text = provider_error_text(&h, &request).await;
    h.check_detail(&provider_text, v.detail());
    assert!(
        v.detail().contains(r#"{cluster_id="SaaS01"}"#),
        "{}",
        v.detail()
    );
    assert!(v.detail().contains("many-to-many matching not allowed"));
    let c = v.correction();
    assert!(c.allowed);
    assert!(c.instruction.contains("on(instance)"), "{}", c.instruction);
    for keep in ["queryId", "time window", "cluster scope"] {
        assert!(c.keep.iter().any(|k| k == keep), "{keep}");
    }

    let corrected = locked(&h, &policy, "tidb_saturation", TIDB_CPU_SATURATION.expr);
    let result = checked(&h, h.run(&corrected, ResponseLimits::default()).await);
    let w = view(&result);
    assert_eq!(w.status, Status::Ok, "{}", result.text());
    assert_eq!(w.query_id, v.query_id);
    assert_ne!(w.request_digest, v.request_digest);
    let e = w.evidence();
    assert_eq!(e.series_count, h.fixture().tidb_cpu().series as u64);
    assert!(close(
        e.top_peak().unwrap(),
        h.fixture().tidb_cpu().peak / TIDB_MAXPROCS
    ));
}

/// Refused credentials: a shared failure that stops the turn; nothing to correct.
pub(crate) async fn bad_credentials_stop_the_turn<H: Harness>() {
    let h = H::start().await;
    let policy = apid_policy(&h);
    let request = locked(&h, &policy, TIDB_CPU.name, TIDB_CPU.expr);
    let result = checked(&h, h.run_with_bad_credentials(&request).await);
    let v = view(&result);
    let class = h.bad_credentials_class();
    assert!(class.is_shared());
    assert_failure(&v, class);
    assert_eq!(v.error().http_status, Some(401));
    assert!(v.correction().instruction.contains("stop this turn"));
}

/// The provider dies while a call is in flight: `provider_unavailable`, not a query
/// error, and the next call fails the same way.
pub(crate) async fn server_killed_mid_run<H: Harness>() {
    let h = H::start().await;
    let policy = apid_policy(&h);
    let request = locked(&h, &policy, TIDB_CPU.name, TIDB_CPU.expr);
    h.faults().set_delay(Duration::from_millis(600));
    let (result, ()) = tokio::join!(h.run(&request, ResponseLimits::default()), async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        h.kill_provider();
    });
    let v = view(&checked(&h, result));
    assert_failure(&v, FailureClass::ProviderUnavailable);
    assert!(!v.correction().allowed);
    h.faults().clear();
    let again = checked(&h, h.run(&request, ResponseLimits::default()).await);
    assert_failure(&view(&again), FailureClass::ProviderUnavailable);
}

/// A slow server hits the call's time limit: `timeout`, promptly.
pub(crate) async fn slow_server_hits_the_timeout<H: Harness>() {
    let h = H::start().await;
    let policy = apid_policy(&h);
    let request = locked(&h, &policy, TIDB_CPU.name, TIDB_CPU.expr);
    h.faults().set_delay(Duration::from_millis(2000));
    let limits = ResponseLimits {
        timeout: Duration::from_millis(400),
        ..ResponseLimits::default()
    };
    let started = Instant::now();
    let result = checked(&h, h.run(&request, limits).await);
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
    let v = view(&result);
    assert_failure(&v, FailureClass::Timeout);
    assert_eq!(v.code(), code(h.provider(), "timeout"));
}

/// Every query sends Prometheus' evaluation `timeout`, so the server stops when the
/// client stops waiting: by default the call's time limit minus a margin (29 s of 30 s,
/// 4.5 s of 5 s), a configured one never above the limit. A real Prometheus that runs
/// out of it answers 503 `timeout`, which is class `timeout`.
pub(crate) async fn every_query_carries_an_evaluation_timeout<H: Harness>() {
    let h = H::start().await;
    let policy = apid_policy(&h);
    let request = locked(&h, &policy, TIDB_CPU.name, TIDB_CPU.expr);
    let five = ResponseLimits {
        timeout: Duration::from_secs(5),
        ..ResponseLimits::default()
    };
    for result in [
        h.run(&request, ResponseLimits::default()).await,
        h.run(&request, five).await,
        h.run_with_evaluation_timeout(&request, five, Duration::from_secs(60))
            .await,
        h.run_with_evaluation_timeout(&request, five, Duration::from_secs(2))
            .await,
    ] {
        let result = checked(&h, result);
        assert!(!result.is_failed(), "{}", result.text());
    }
    assert_eq!(h.sent_timeouts(), ["29", "4.5", "5", "2"]);

    // A query heavy enough (a 1-second subquery over every series) that Prometheus cannot
    // finish it within the smallest timeout: with the default timeout it answers, with the
    // smallest one Prometheus itself stops at the deadline we sent. Where it stops decides
    // its answer: in evaluation a 503 `timeout` (class `timeout`), while expanding series a
    // 422 `execution` "context deadline exceeded" (a rejection the model can simplify).
    let heavy = locked(
        &h,
        &policy,
        TIDB_CPU.name,
        r#"max_over_time(sum by (instance) (rate(process_cpu_seconds_total{job="tidb"}[1m]))[10m:1s])"#,
    );
    let answered = checked(&h, h.run(&heavy, ResponseLimits::default()).await);
    assert!(!answered.is_failed(), "{}", answered.text());
    let result = checked(
        &h,
        h.run_with_evaluation_timeout(&heavy, ResponseLimits::default(), Duration::from_nanos(1))
            .await,
    );
    let v = view(&result);
    assert_eq!(v.status, Status::Error, "{v:?}");
    match v.class() {
        FailureClass::Timeout => {
            assert_eq!(v.error().http_status, Some(503), "{v:?}");
            assert_eq!(v.error().prometheus_error_type.as_deref(), Some("timeout"));
            assert!(v.detail().contains("query timed out"), "{}", v.detail());
        }
        FailureClass::QueryRejected => {
            assert_eq!(v.error().http_status, Some(422), "{v:?}");
            assert!(v.detail().contains("deadline exceeded"), "{}", v.detail());
        }
        other => panic!("the deadline gave {other:?}: {v:?}"),
    }
}

/// A body over the cap is refused, never truncated, and the model is told to narrow.
pub(crate) async fn oversized_body_is_refused<H: Harness>() {
    let h = H::start().await;
    let policy = apid_policy(&h);
    let request = locked(&h, &policy, TIDB_CPU.name, TIDB_CPU.expr);
    h.faults()
        .set_fault(Fault::OversizedBody { bytes: 3 << 20 });
    let limits = ResponseLimits {
        max_body_bytes: 1 << 20,
        ..ResponseLimits::default()
    };
    let v = view(&checked(&h, h.run(&request, limits).await));
    assert_failure(&v, FailureClass::QueryRejected);
    assert_eq!(v.code(), code(h.provider(), "response_too_large"));
    assert!(v.detail().contains("narrow the query"), "{}", v.detail());
    assert!(v.correction().instruction.contains("narrow the query"));
}

/// A body that is not JSON is a provider error carrying the body's digest.
pub(crate) async fn non_json_body_is_a_provider_error<H: Harness>() {
    let h = H::start().await;
    let policy = apid_policy(&h);
    let request = locked(&h, &policy, TIDB_CPU.name, TIDB_CPU.expr);
    h.faults().set_fault(Fault::NonJson);
    let v = view(&checked(
        &h,
        h.run(&request, ResponseLimits::default()).await,
    ));
    assert_failure(&v, FailureClass::ProviderUnavailable);
    assert_eq!(v.code(), code(h.provider(), "non_json_body"));
    let digest = v.error().body_digest.expect("a body digest");
    assert!(v.detail().contains(&digest.to_string()), "{}", v.detail());
    assert!(v.detail().contains("maintenance"), "{}", v.detail());
}

/// A request rejected while locking is answered without any request to the provider.
pub(crate) async fn lock_rejection_sends_nothing<H: Harness>() {
    let h = H::start().await;
    let policy = apid_policy(&h);
    let rejection = lock(
        &policy,
        PolicySource::TrustedEnvelope,
        &h.args("cpu_other_cluster", r#"up{cluster_id="SaaS99"}"#),
        &scope(),
    );
    let mut request = locked(&h, &policy, TIDB_CPU.name, TIDB_CPU.expr);
    request.items = match rejection {
        // Clinic: the batch locks, with the query rejected inside it.
        Ok(batch) => batch.items,
        // One-operation packages: the whole call is rejected.
        Err(r) => vec![LockedItem::Rejected {
            query_id: r.query_id.clone().unwrap(),
            request_digest: r.request_digest,
            failure: *r.failure,
        }],
    };
    let v = view(&checked(
        &h,
        h.run(&request, ResponseLimits::default()).await,
    ));
    assert_failure(&v, FailureClass::PolicyViolation);
    assert_eq!(v.code(), "scope_violation");
    assert!(v.request_digest.is_some());
    assert_eq!(h.requests(), 0, "nothing may reach the provider");
}

/// A base URL outside the package's allowlist is refused before any request.
pub(crate) async fn host_outside_allowlist_sends_nothing<H: Harness>() {
    let h = H::start().await;
    let policy = apid_policy(&h);
    let request = locked(&h, &policy, TIDB_CPU.name, TIDB_CPU.expr);
    let result = checked(&h, h.run_outside_allowlist(&request).await);
    assert!(result.is_failed());
    let d = result.details();
    let error = d.error.as_ref().expect("a whole-call failure");
    assert_eq!(error.class, FailureClass::Internal);
    assert_eq!(error.code.as_str(), code(h.provider(), "host_not_allowed"));
    assert!(d.detail_error.as_deref().unwrap().contains("127.0.0.1"));
    assert!(!d.correction.as_ref().unwrap().allowed);
    assert_eq!(h.requests(), 0, "nothing may reach the provider");
}

/// One test per case for a harness type.
macro_rules! conformance_suite {
    ($harness:ty) => {
        conformance_suite!(@cases $harness;
            success_with_compact_evidence,
            server_parse_error_is_400,
            many_to_many_is_422_then_corrected,
            bad_credentials_stop_the_turn,
            server_killed_mid_run,
            slow_server_hits_the_timeout,
            every_query_carries_an_evaluation_timeout,
            oversized_body_is_refused,
            non_json_body_is_a_provider_error,
            lock_rejection_sends_nothing,
            host_outside_allowlist_sends_nothing,
        );
    };
    (@cases $harness:ty; $($case:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                $crate::cases::$case::<$harness>().await;
            }
        )+
    };
}
