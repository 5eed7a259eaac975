//! Compact evidence (`compact_v3`) against a real Prometheus: for the side-by-side
//! queries and the seeds, one-query results stay within 4 KiB, state the top series and its peak exactly
//! to four digits (checked against the raw answer), and count `NaN`s of series that are
//! ranked out of the top k.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use evidence_connectors::internal::*;
use evidence_connectors::*;
use evidence_result::{
    Details, Item, Operation, Origin, PackageId, PolicySource, Provider, QueryId, RequestDigest,
    ToolResult, evidence::EvidenceWindow, figure::Figure, series::NonFiniteCounts,
};
use evidence_test_support::*;
use serde_json::Value;

const TOP_K: u32 = 10;

/// The top series' instance and its peak, straight from the raw body.
fn raw_top(body: &[u8]) -> (String, f64) {
    let v: Value = serde_json::from_slice(body).unwrap();
    let mut best: Option<(String, f64)> = None;
    for s in v["data"]["result"].as_array().unwrap() {
        for p in s["values"].as_array().unwrap() {
            let x: f64 = p[1].as_str().unwrap().parse().unwrap_or(f64::NAN);
            if x.is_finite() && best.as_ref().is_none_or(|b| x > b.1) {
                best = Some((s["metric"]["instance"].as_str().unwrap().to_owned(), x));
            }
        }
    }
    best.unwrap()
}

#[tokio::test]
async fn one_query_results_are_small_and_state_the_answer() {
    let prometheus = Prometheus::start(Fixture::Main).await.unwrap();
    let url: url::Url = format!("{}/api/v1/query_range", prometheus.url())
        .parse()
        .unwrap();
    let client = reqwest::Client::new();
    let mapper = ResponseMapper::new(Provider::Clinic, Redactor::default());
    let origin = Origin {
        package: PackageId::clinic(),
        provider: Provider::Clinic,
        operation: Operation::QueryRange,
        policy_source: Some(PolicySource::TrustedEnvelope),
    };
    for (query, unit, _) in SIDE_BY_SIDE_QUERIES {
        let window = EvidenceWindow {
            start: query.start,
            end: query.end,
            step_seconds: query.step_seconds,
        };
        let raw = fetch(
            QueryRange::new(query.expr, window).post(&client, url.clone()),
            &ResponseLimits::default(),
        )
        .await
        .unwrap();
        let compaction = Compaction::new(TOP_K)
            .with_unit(unit)
            .with_expr(query.expr)
            .with_window(window);
        let evidence = mapper.evidence(&raw, &compaction, &KeepLabels).unwrap();
        let digest = RequestDigest::of(&serde_json::json!({"expr": query.expr})).unwrap();
        let item = Item::success(QueryId::new(query.name).unwrap(), Some(digest), evidence);
        let result = ToolResult::new(Details::batch(origin.clone(), vec![item]).unwrap()).unwrap();
        let text = result.text();
        assert!(
            text.len() <= 4096,
            "{}: {} bytes, over 4 KiB",
            query.name,
            text.len()
        );

        // The answer, read from the text alone: the first row of the series table.
        let (instance, peak) = raw_top(&raw.body);
        let v: Value = serde_json::from_str(text).unwrap();
        let e = &v["items"][0]["evidence"];
        assert_eq!(e["format"], "compact_v3");
        let labels = e["series"]["labels"].as_array().unwrap();
        let stats = e["series"]["stats"].as_array().unwrap();
        let row = e["series"]["rows"][0].as_array().unwrap();
        let at = |name: &str, names: &[Value], offset: usize| {
            names
                .iter()
                .position(|n| n == name)
                .map(|i| &row[offset + i])
        };
        let stated_instance = at("instance", labels, 0)
            .or_else(|| e["common_labels"].get("instance"))
            .unwrap();
        assert_eq!(
            stated_instance,
            &Value::from(instance.clone()),
            "{}",
            query.name
        );
        let stated_peak = at("peak", stats, labels.len()).unwrap();
        let expected = Figure::new(peak).unwrap();
        assert_eq!(
            stated_peak.to_string(),
            serde_json::to_string(&expected).unwrap(),
            "{}",
            query.name
        );
        assert_eq!(e["peak_spread"]["max"], *stated_peak, "{}", query.name);
    }
}

#[tokio::test]
async fn nan_in_a_series_ranked_out_is_still_counted() {
    let prometheus = Prometheus::start(Fixture::Main).await.unwrap();
    let url: url::Url = format!("{}/api/v1/query_range", prometheus.url())
        .parse()
        .unwrap();
    let q = TIDB_MEMORY_WITH_NAN;
    let window = EvidenceWindow {
        start: q.start,
        end: q.end,
        step_seconds: q.step_seconds,
    };
    let raw = fetch(
        QueryRange::new(q.expr, window).post(&reqwest::Client::new(), url),
        &ResponseLimits::default(),
    )
    .await
    .unwrap();
    let e = ResponseMapper::new(Provider::Clinic, Redactor::default())
        .evidence(&raw, &Compaction::new(5).with_unit("bytes"), &KeepLabels)
        .unwrap();
    assert_eq!(e.series_count, TIDB_MEMORY_SERIES as u64);
    assert_eq!(e.series.len(), 5);
    assert!(e.series.iter().all(|s| s.non_finite_points == 0));
    assert!(
        e.series
            .iter()
            .all(|s| s.labels["instance"] != "tidb-00.saas01.svc:10080")
    );
    assert_eq!(
        e.non_finite,
        Some(NonFiniteCounts {
            points: TIDB_MEMORY_NAN_SAMPLES,
            series: 1
        })
    );
    let spread = e.peak_spread.unwrap();
    assert_eq!(spread.series, TIDB_MEMORY_SERIES as u64);
    assert_eq!(
        spread.max,
        Figure::new(TIDB_MEMORY_PEAK_BYTES as f64).unwrap()
    );
    assert_eq!(e.common_labels["cluster_id"], CPU_CLUSTER);
    assert_eq!(e.common_labels["job"], "tidb");
}
