//! Large Wetech answers with real Chromium, ChromeDriver, a real Prometheus over the
//! TiKV thread-CPU data set (5,000 threads) and the Grafana test front. The page reads
//! the datasource proxy's body in bounded chunks, each handed to the connector over a
//! DevTools session attached to the page (never through ChromeDriver: a relay in front
//! of it counts what it sends back) and folded at once by the same streaming compaction
//! as Clinic and Manus: the 5,000-thread answer (37 MB, over twice the former 16 MiB
//! page bound) is answered `ok` with every series counted and the hot thread on top, and
//! the same answer over a lower total bound is refused as `grafana_response_too_large`,
//! with no WebDriver session and no Chrome process left behind. The test prints how long
//! each took, beside a one-instance call (50 threads) for the cost of a call apart from
//! its body (`--nocapture`).
#![cfg(feature = "wetech")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use evidence_connectors::{
    BrowserConfig, Connector, HostAllowlist, ResponseLimits, WebDriverEndpoint, WetechConfig,
    WetechConnector, WetechSecrets,
};
use evidence_policy::{LockedRequest, ScopeBinding, TrustedPolicy, lock, lock::ScopeValue};
use evidence_result::{FailureClass, PolicySource, Status};
use evidence_test_support::*;
use secrecy::SecretString;
use serde_json::json;
use url::Url;

fn policy() -> TrustedPolicy {
    let ts = |s: i64| jiff::Timestamp::from_second(s).unwrap().to_string();
    let p = json!({
        "policy_id": "pol-tikv-threads-wetech",
        "ticket": "TIKV-5000",
        "provider": "wetech",
        "package": "managed_auto_oncall_wetech",
        "account": "acct-saas",
        "cluster": {"id": TIKV_THREADS_CLUSTER, "tier": "dedicated"},
        "operation": "query_range",
        "wetech_query_ids": ["tikv_threads_one", "tikv_threads_all"],
        "wetech_datasource": GrafanaFront::DATASOURCE_UID,
        "window": {"start": ts(TIKV_THREADS_START), "end": ts(TIKV_THREADS_END)},
        "lookback": 3600,
        "limits": {"max_points_per_series": 11000, "min_step": 15, "max_batch": 1,
                   "max_series_kept": 10, "max_calls_per_turn": 12},
    });
    let at = jiff::Timestamp::from_second(TIKV_THREADS_END).unwrap();
    let p: TrustedPolicy = serde_json::from_value(policy::issued(p, at, policy::VALIDITY)).unwrap();
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
async fn every_thread_answers_ok_and_the_total_bound_still_refuses() {
    let slot = BrowserSlot::acquire().await;
    let baseline = chromium_process_count();
    let data = TikvThreads::new(5_000);
    let prometheus = LargePrometheus::start(data).await.unwrap();
    let grafana = GrafanaFront::start(&prometheus.url()).await.unwrap();
    let profiles = tempfile::tempdir().unwrap();
    let driver = ChromeDriver::start(&slot).await.unwrap();
    let relay = CountingRelay::start(driver.addr()).await.unwrap();
    let url = Url::parse(&grafana.base_url()).unwrap();
    let allow = format!("127.0.0.1:{}", url.port().unwrap());
    let config = WetechConfig::new(
        url,
        HostAllowlist::new([allow]).unwrap(),
        BrowserConfig::new(
            Chromium::find().unwrap().path(),
            WebDriverEndpoint::Attach {
                url: Url::parse(&relay.url()).unwrap(),
            },
        )
        .with_profile_parent(profiles.path()),
    );
    let secrets = storage_state(&grafana);
    let connector = WetechConnector::new();
    let left_behind = |what: &str| {
        let profiles_left = std::fs::read_dir(profiles.path()).unwrap().count();
        assert_eq!(
            profiles_left, 0,
            "{what}: a browser profile was left behind"
        );
    };

    // One instance (50 threads, 0.4 MB): the cost of a call apart from the body.
    let one = locked(
        "tikv_threads_one",
        r#"rate(tikv_thread_cpu_seconds_total{instance="tikv-0000.saas01.svc:20180"}[1m])"#,
    );
    let started = Instant::now();
    let result = connector.call(&one, &config, &secrets).await.unwrap();
    let one_time = started.elapsed();
    let one_driver_bytes = relay.bytes_from_target();
    assert_eq!(result.details().status, Status::Ok, "{}", result.text());
    assert_eq!(result.details().evidence.as_ref().unwrap().series_count, 50);

    // Every thread: 37 MB, far over the former 16 MiB page bound, answered whole.
    let all = locked("tikv_threads_all", TIKV_THREAD_CPU_RATE.expr);
    let started = Instant::now();
    let before = relay.bytes_from_target();
    let result = connector.call(&all, &config, &secrets).await.unwrap();
    let all_time = started.elapsed();
    // The body left the page over DevTools: ChromeDriver answered this call's commands
    // with about what it answers a 0.4 MB call's, nowhere near the 37 MB.
    let all_driver_bytes = relay.bytes_from_target() - before;
    assert!(
        all_driver_bytes < 2 * one_driver_bytes + (64 << 10),
        "ChromeDriver sent {all_driver_bytes} bytes for the 37 MB answer \
         ({one_driver_bytes} for the 0.4 MB one)"
    );
    let d = result.details();
    assert_eq!(d.status, Status::Ok, "{}", result.text());
    let evidence = d.evidence.as_ref().unwrap();
    assert_eq!(evidence.series_count, 5_000);
    assert_eq!(evidence.point_count, 5_000 * 241);
    let hot = data.top_index();
    let top = &evidence.series[0];
    assert_eq!(top.labels["instance"], data.instance(hot));
    assert_eq!(top.labels["name"], data.thread_name(hot));
    assert!((evidence.top_peak().unwrap() - TIKV_THREAD_PEAK).abs() <= FIGURE_TOLERANCE);
    assert_eq!(evidence.peak_spread.as_ref().unwrap().series, 5_000);
    assert_eq!(evidence.common_labels["cluster_id"], TIKV_THREADS_CLUSTER);
    left_behind("the 37 MB answer");
    assert_eq!(driver.session_count().await.unwrap(), 0);

    // The same answer over a total bound of 16 MiB: refused, never truncated, and the
    // page's reader cancelled with the session closed.
    let bounded = config.clone().with_limits(ResponseLimits {
        max_body_bytes: 16 << 20,
        ..ResponseLimits::default()
    });
    let started = Instant::now();
    let result = connector.call(&all, &bounded, &secrets).await.unwrap();
    let bounded_time = started.elapsed();
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
    left_behind("the refused answer");
    assert_eq!(driver.session_count().await.unwrap(), 0);
    assert_eq!(wait_for_chromium_count(baseline).await, baseline);
    eprintln!(
        "wetech through Chromium: 50 threads (0.4 MB) answered ok in {} ms; 5,000 threads \
         (37 MB) answered ok in {} ms; the same over a 16 MiB total bound refused in {} ms; \
         ChromeDriver sent {one_driver_bytes} and {all_driver_bytes} bytes for the first two",
        one_time.as_millis(),
        all_time.as_millis(),
        bounded_time.as_millis()
    );
    drop(driver);
    drop(slot);
}
