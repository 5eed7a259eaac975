//! The shared Prometheus handling against a real Prometheus and the test fronts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use evidence_connectors::internal::*;
use evidence_connectors::limits::DEFAULT_TOP_K;
use evidence_connectors::*;
use evidence_result::{
    Details, Digest, Evidence, Failure, FailureClass, Operation, Origin, PackageId, PolicySource,
    Provider, QueryId, RequestDigest, ToolResult, evidence::EvidenceWindow,
};
use evidence_test_support::*;
use secrecy::SecretString;

const TOKEN: &str = "clinic-token-5b0c2f9e41d7";

fn window(q: &FixtureQuery) -> EvidenceWindow {
    EvidenceWindow {
        start: q.start,
        end: q.end,
        step_seconds: q.step_seconds,
    }
}

fn mapper() -> ResponseMapper {
    ResponseMapper::new(
        Provider::Clinic,
        Redactor::new([
            SecretString::from(TOKEN),
            SecretString::from(GRAFANA_SESSION_COOKIE_VALUE),
        ]),
    )
}

async fn run_expr(
    url: &str,
    expr: &str,
    q: &FixtureQuery,
    timeout: Option<Duration>,
    limits: ResponseLimits,
) -> (Result<Evidence, Failure>, Result<RawResponse, String>) {
    let mut request = QueryRange::new(expr, window(q));
    if let Some(t) = timeout {
        request = request.with_timeout(t);
    }
    let client = reqwest::Client::new();
    let builder = request
        .post(&client, url.parse().unwrap())
        .bearer_auth(TOKEN);
    let fetched = fetch(builder, &limits).await;
    let raw = fetched
        .as_ref()
        .map(Clone::clone)
        .map_err(|e| e.to_string());
    let compaction = Compaction::new(DEFAULT_TOP_K)
        .with_unit("cores")
        .with_expr(expr)
        .with_window(window(q));
    (mapper().outcome(fetched, &compaction, &KeepLabels), raw)
}

async fn run(url: &str, q: &FixtureQuery) -> Result<Evidence, Failure> {
    run_expr(url, q.expr, q, None, ResponseLimits::default())
        .await
        .0
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= FIGURE_TOLERANCE
}

/// Wraps a result in the transport, checking `text == json(details)`.
fn transport(result: Result<Evidence, Failure>, q: &FixtureQuery) -> ToolResult {
    let origin = Origin {
        package: PackageId::clinic(),
        provider: Provider::Clinic,
        operation: Operation::QueryRange,
        policy_source: Some(PolicySource::TrustedEnvelope),
    };
    let query_id = QueryId::new(q.name).unwrap();
    let digest = RequestDigest::of(&serde_json::json!({"expr": q.expr})).unwrap();
    let details = match result {
        Ok(e) => Details::success(origin, query_id, digest, e),
        Err(f) => Details::failure(origin, Some(query_id), Some(digest), f),
    };
    let result = ToolResult::new(details).unwrap();
    let parsed: Details = serde_json::from_str(result.text()).unwrap();
    assert_eq!(&parsed, result.details());
    result
}

#[tokio::test]
async fn seed_figures_through_the_shared_handling() {
    let prom = Prometheus::start(Fixture::Main).await.unwrap();
    let url = format!("{}/api/v1/query_range", prom.url());

    let cpu = run(&url, &TIDB_CPU).await.unwrap();
    assert_eq!(cpu.series_count, 56);
    assert_eq!(cpu.point_count, 56 * 61);
    assert!(cpu.truncated);
    assert_eq!(cpu.series.len(), DEFAULT_TOP_K as usize);
    assert!(
        close(cpu.top_peak().unwrap(), 22.84),
        "{:?}",
        cpu.top_peak()
    );
    assert_eq!(
        cpu.series[0].labels["instance"],
        Fixture::Main.tidb_instance(Fixture::Main.tidb_top_index())
    );
    assert_eq!(cpu.unit.as_deref(), Some("cores"));
    assert_eq!(cpu.window, Some(window(&TIDB_CPU)));
    let text = transport(Ok(cpu), &TIDB_CPU);
    assert!(!text.is_failed());

    let memory = run(&url, &MEMORY_USED_PERCENT).await.unwrap();
    assert_eq!(memory.series_count, 261);
    assert_eq!(memory.point_count, 261 * 241);
    assert!(close(memory.top_peak().unwrap(), 78.64));
    assert!(memory.series.iter().all(|s| s.points == 241));

    let none = run(&url, &TIKV_NO_DATA).await.unwrap();
    assert!(none.is_no_data());
    assert_eq!(none.top_peak(), None);
    transport(Ok(none), &TIKV_NO_DATA);
}

#[tokio::test]
async fn real_rejections_keep_status_type_text_and_digest() {
    let prom = Prometheus::start(Fixture::Main).await.unwrap();
    let url = format!("{}/api/v1/query_range", prom.url());

    let (result, raw) = run_expr(
        &url,
        MEMORY_MANY_TO_MANY.expr,
        &MEMORY_MANY_TO_MANY,
        None,
        ResponseLimits::default(),
    )
    .await;
    let raw = raw.unwrap();
    let f = result.unwrap_err();
    assert_eq!(f.error.code.as_str(), "clinic_http_422");
    assert_eq!(f.error.class, FailureClass::QueryRejected);
    assert_eq!(f.error.http_status, Some(422));
    assert_eq!(f.error.prometheus_error_type.as_deref(), Some("execution"));
    assert_eq!(f.error.body_digest, Some(Digest::sha256(&raw.body)));
    // The complete provider text, label-matching and duplicate-series context included.
    let provider: serde_json::Value = serde_json::from_slice(&raw.body).unwrap();
    assert_eq!(f.detail_error, provider["error"].as_str().unwrap());
    assert!(f.detail_error.contains(r#"{cluster_id="SaaS02"}"#));
    assert!(f.detail_error.contains("many-to-many matching not allowed"));
    assert!(f.correction.allowed);
    assert!(f.correction.keep.iter().any(|k| k == "queryId"));
    let rejected = transport(Err(f), &MEMORY_MANY_TO_MANY);
    assert!(rejected.is_failed());

    // The corrected expression, same window, runs.
    let corrected = run(&url, &MEMORY_USED_PERCENT).await.unwrap();
    assert_eq!(corrected.series_count, 261);

    let f = run(&url, &PARSE_ERROR).await.unwrap_err();
    assert_eq!(f.error.code.as_str(), "clinic_http_400");
    assert_eq!(f.error.prometheus_error_type.as_deref(), Some("bad_data"));
    assert!(f.detail_error.contains("parse error"), "{}", f.detail_error);
    assert!(f.correction.instruction.contains("PromQL syntax"));

    let (result, _) = run_expr(
        &url,
        TIDB_CPU.expr,
        &TIDB_CPU,
        Some(Duration::from_nanos(1)),
        ResponseLimits::default(),
    )
    .await;
    let f = result.unwrap_err();
    assert_eq!(
        (f.error.http_status, f.error.class),
        (Some(503), FailureClass::Timeout)
    );
    assert_eq!(f.error.prometheus_error_type.as_deref(), Some("timeout"));
}

/// Real Prometheus prints a bound secret (the session cookie in a label) twice in its 422
/// duplicate-series text: `detail_error` keeps the provider's words ("many-to-many
/// matching not allowed") with the value replaced by `[REDACTED]`, and the model-visible
/// result holds no copy of it.
#[tokio::test]
async fn provider_echoes_of_secrets_are_redacted() {
    let prom = Prometheus::start(Fixture::Main).await.unwrap();
    let url = format!("{}/api/v1/query_range", prom.url());
    // The right-hand side holds two series that both carry the cookie canary label, so
    // the real duplicate-series error text prints the secret value twice.
    let expr = r#"tidb_server_maxprocs{cluster_id="SaaS01",job="tidb"} / on(cluster_id) (tidb_server_session_info{cluster_id="SaaS01"} or label_replace(tidb_server_session_info{cluster_id="SaaS01"}, "copy", "1", "", ""))"#;
    let (result, raw) =
        run_expr(&url, expr, &SESSION_CANARY, None, ResponseLimits::default()).await;
    let raw = String::from_utf8(raw.unwrap().body.to_vec()).unwrap();
    assert!(raw.contains(GRAFANA_SESSION_COOKIE_VALUE), "{raw}");
    let f = result.unwrap_err();
    assert_eq!(f.error.http_status, Some(422));
    assert!(!f.detail_error.contains(GRAFANA_SESSION_COOKIE_VALUE));
    assert!(
        f.detail_error.contains(r#"session_id="[REDACTED]""#),
        "{}",
        f.detail_error
    );
    assert!(f.detail_error.contains("many-to-many matching not allowed"));
    let text = transport(Err(f), &SESSION_CANARY);
    assert!(!text.text().contains(GRAFANA_SESSION_COOKIE_VALUE));
}

#[tokio::test]
async fn faults_through_a_front_become_structured_failures() {
    let prom = Prometheus::start(Fixture::Main).await.unwrap();
    let front = ClinicFront::start(&prom.url(), SecretString::from(TOKEN))
        .await
        .unwrap();
    let url = front.query_range_url(CPU_CLUSTER);

    assert_eq!(run(&url, &TIDB_CPU).await.unwrap().series_count, 56);

    // Slow server hitting the time limit.
    front.faults().set_delay(Duration::from_millis(1500));
    let limits = ResponseLimits {
        timeout: Duration::from_millis(300),
        ..ResponseLimits::default()
    };
    let (result, _) = run_expr(&url, TIDB_CPU.expr, &TIDB_CPU, None, limits).await;
    let f = result.unwrap_err();
    assert_eq!(
        (f.error.code.as_str(), f.error.class),
        ("clinic_timeout", FailureClass::Timeout)
    );
    front.faults().clear();

    // Oversized body: refused, never truncated, and the model is told to narrow.
    front
        .faults()
        .set_fault(Fault::OversizedBody { bytes: 3 << 20 });
    let limits = ResponseLimits {
        max_body_bytes: 1 << 20,
        ..ResponseLimits::default()
    };
    let (result, raw) = run_expr(&url, TIDB_CPU.expr, &TIDB_CPU, None, limits).await;
    assert!(raw.unwrap_err().contains("narrow the query"));
    let f = result.unwrap_err();
    assert_eq!(f.error.code.as_str(), "clinic_response_too_large");
    assert_eq!(f.error.class, FailureClass::QueryRejected);
    assert!(f.correction.instruction.contains("narrow the query"));

    // Non-JSON body: a provider error carrying its digest.
    front.faults().set_fault(Fault::NonJson);
    let (result, raw) = run_expr(
        &url,
        TIDB_CPU.expr,
        &TIDB_CPU,
        None,
        ResponseLimits::default(),
    )
    .await;
    let f = result.unwrap_err();
    assert_eq!(f.error.code.as_str(), "clinic_non_json_body");
    assert_eq!(
        f.error.body_digest,
        Some(Digest::sha256(&raw.unwrap().body))
    );

    for status in [429, 503] {
        front.faults().set_fault(Fault::Status(status));
        let f = run(&url, &TIDB_CPU).await.unwrap_err();
        assert_eq!(f.error.class, FailureClass::ProviderUnavailable);
        assert_eq!(f.error.http_status, Some(status));
    }
    front.faults().clear();

    // Wrong token and forbidden.
    let client = reqwest::Client::new();
    let request = QueryRange::new(TIDB_CPU.expr, window(&TIDB_CPU));
    let wrong = request
        .post(&client, url.parse().unwrap())
        .bearer_auth("not-the-token");
    let f = mapper()
        .outcome(
            fetch(wrong, &ResponseLimits::default()).await,
            &Compaction::default(),
            &KeepLabels,
        )
        .unwrap_err();
    assert_eq!(f.error.class, FailureClass::Authentication);
    assert!(!f.correction.allowed);
    front.set_forbidden(true);
    let f = run(&url, &TIDB_CPU).await.unwrap_err();
    assert_eq!(f.error.class, FailureClass::Authorization);
    front.set_forbidden(false);

    // Server killed mid-run: the front answers 502, a direct call cannot connect.
    prom.kill();
    let f = run(&url, &TIDB_CPU).await.unwrap_err();
    assert_eq!(
        (f.error.http_status, f.error.class),
        (Some(502), FailureClass::ProviderUnavailable)
    );
    let direct = format!("{}/api/v1/query_range?token={TOKEN}", prom.url());
    let f = run(&direct, &TIDB_CPU).await.unwrap_err();
    assert_eq!(f.error.code.as_str(), "clinic_unavailable");
    assert!(!f.detail_error.contains(TOKEN), "{}", f.detail_error);
    transport(Err(f), &TIDB_CPU);
}
