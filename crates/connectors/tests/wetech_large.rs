//! What bounds a large Wetech answer, with real Chromium, ChromeDriver, a real
//! Prometheus over the TiKV thread-CPU data set (5,000 threads) and the Grafana test
//! front: the page's `fetch` hands its body over as one WebDriver script answer, so the
//! page reads at most `PAGE_MAX_BODY_BYTES` (16 MiB) and the connector then folds it
//! with the same streaming compaction as Clinic and Manus. A 2,000-thread answer
//! (15 MB) is answered `ok`; the 5,000-thread answer (37 MB) is refused as
//! `grafana_response_too_large` with the correction to narrow the query. The test prints
//! how long each took, beside a one-instance call (50 threads) for the cost of a call
//! apart from its body (`--nocapture`).
#![cfg(feature = "wetech")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use evidence_connectors::{
    BrowserConfig, Connector, HostAllowlist, WebDriverEndpoint, WetechConfig, WetechConnector,
    WetechSecrets,
};
use evidence_policy::{LockedRequest, ScopeBinding, ScopeValue, TrustedPolicy, lock};
use evidence_result::{FailureClass, PolicySource, Status};
use evidence_test_support::*;
use secrecy::SecretString;
use serde_json::json;
use url::Url;

fn policy() -> TrustedPolicy {
    let ts = |s: i64| jiff::Timestamp::from_second(s).unwrap().to_string();
    let p: TrustedPolicy = serde_json::from_value(json!({
        "policy_id": "pol-tikv-threads-wetech",
        "ticket": "TIKV-5000",
        "provider": "wetech",
        "package": "managed_auto_oncall_wetech",
        "account": "acct-saas",
        "cluster": {"id": TIKV_THREADS_CLUSTER, "tier": "dedicated"},
        "operation": "query_range",
        "wetech_query_ids": ["tikv_threads_one", "tikv_threads_part", "tikv_threads_all"],
        "wetech_datasource": GrafanaFront::DATASOURCE_UID,
        "window": {"start": ts(TIKV_THREADS_START), "end": ts(TIKV_THREADS_END)},
        "lookback": 3600,
        "limits": {"max_points_per_series": 11000, "min_step": 15, "max_batch": 1,
                   "max_series_kept": 10, "max_calls_per_turn": 12},
        "issued_at": ts(TIKV_THREADS_END),
        "expires_at": ts(TIKV_THREADS_END + 3600),
    }))
    .unwrap();
    p.validate().unwrap();
    p
}

fn locked(query_id: &str, expr: &str) -> LockedRequest {
    let scope = vec![ScopeBinding::new("cluster_id", ScopeValue::ClusterId).unwrap()];
    let args = json!({"queryId": query_id, "expr": expr, "unit": "cores", "step": "15s"});
    lock(&policy(), PolicySource::TrustedEnvelope, &args, &scope).unwrap()
}

fn storage_state(grafana: &GrafanaFront) -> WetechSecrets {
    let state = json!({
        "cookies": [{"name": GRAFANA_SESSION_COOKIE_NAME, "value": GRAFANA_SESSION_COOKIE_VALUE,
                     "domain": "127.0.0.1", "path": "/", "expires": -1,
                     "httpOnly": true, "secure": false}],
        "origins": [{"origin": grafana.base_url(), "localStorage": []}]
    });
    WetechSecrets::new(SecretString::from(state.to_string()))
}

#[tokio::test]
async fn the_page_bound_answers_15_mb_and_refuses_37_mb() {
    let slot = BrowserSlot::acquire().await;
    let data = TikvThreads::new(5_000);
    let prometheus = LargePrometheus::start(data).await.unwrap();
    let grafana = GrafanaFront::start(&prometheus.url()).await.unwrap();
    let profiles = tempfile::tempdir().unwrap();
    let driver = ChromeDriver::start(&slot).await.unwrap();
    let url = Url::parse(&grafana.base_url()).unwrap();
    let allow = format!("127.0.0.1:{}", url.port().unwrap());
    let config = WetechConfig::new(
        url,
        HostAllowlist::new([allow]).unwrap(),
        BrowserConfig::new(
            Chromium::find().unwrap().path(),
            WebDriverEndpoint::Attach {
                url: Url::parse(&driver.url()).unwrap(),
            },
        )
        .with_profile_parent(profiles.path()),
    );
    let secrets = storage_state(&grafana);
    let connector = WetechConnector::new();

    // One instance (50 threads, 0.4 MB): the cost of a call apart from the body.
    let one = locked(
        "tikv_threads_one",
        r#"rate(tikv_thread_cpu_seconds_total{instance="tikv-0000.saas01.svc:20180"}[1m])"#,
    );
    let started = Instant::now();
    let result = connector.call(&one, &config, &secrets).await.unwrap();
    let one_time = started.elapsed();
    assert_eq!(result.details().status, Status::Ok, "{}", result.text());
    assert_eq!(result.details().evidence.as_ref().unwrap().series_count, 50);

    // 40 of the 100 instances: 2,000 threads, about 15 MB, under the page bound.
    let part = locked(
        "tikv_threads_part",
        r#"rate(tikv_thread_cpu_seconds_total{instance=~"tikv-00[0-3][0-9].saas01.svc:20180"}[1m])"#,
    );
    let started = Instant::now();
    let result = connector.call(&part, &config, &secrets).await.unwrap();
    let part_time = started.elapsed();
    let d = result.details();
    assert_eq!(d.status, Status::Ok, "{}", result.text());
    let evidence = d.evidence.as_ref().unwrap();
    assert_eq!(evidence.series_count, 2_000);
    assert_eq!(evidence.point_count, 2_000 * 241);
    assert!(evidence.peak_spread.is_some());

    // Every thread: 37 MB, over the page bound, refused (never truncated).
    let all = locked("tikv_threads_all", TIKV_THREAD_CPU_RATE.expr);
    let started = Instant::now();
    let result = connector.call(&all, &config, &secrets).await.unwrap();
    let all_time = started.elapsed();
    let d = result.details();
    assert_eq!(d.status, Status::Error, "{}", result.text());
    let error = d.error.as_ref().unwrap();
    assert_eq!(error.code.as_str(), "grafana_response_too_large");
    assert_eq!(error.class, FailureClass::QueryRejected);
    assert!(
        d.correction
            .as_ref()
            .unwrap()
            .instruction
            .contains("narrow the query")
    );
    eprintln!(
        "wetech through Chromium: 50 threads (0.4 MB) answered ok in {} ms; 2,000 threads \
         (15 MB) answered ok in {} ms; 5,000 threads (37 MB) refused at the 16 MiB page bound \
         in {} ms",
        one_time.as_millis(),
        part_time.as_millis(),
        all_time.as_millis()
    );
}
