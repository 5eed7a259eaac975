//! Builders for tool results used by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use evidence_result::{
    Details, ErrorCode, Evidence, Failure, FailureClass, Item, Operation, Origin, PackageId,
    PolicySource, Provider, QueryId, RequestDigest, ToolResult, evidence::EvidenceOutcome,
    evidence::EvidenceWindow, figure::Figure, series::NonFiniteCounts, series::PeakSpread,
    series::SeriesStats, series::SeriesSummary,
};

pub(crate) fn origin(package: PackageId, provider: Provider) -> Origin {
    Origin {
        package,
        provider,
        operation: Operation::QueryRange,
        policy_source: Some(PolicySource::TrustedEnvelope),
    }
}

pub(crate) fn qid(s: &str) -> QueryId {
    QueryId::new(s).unwrap()
}

pub(crate) fn digest(n: u32) -> RequestDigest {
    RequestDigest::of(&serde_json::json!({ "request": n })).unwrap()
}

/// Data evidence: `series_count` series returned, up to 3 kept, the top peak `peak`.
pub(crate) fn data(unit: &str, series_count: u64, peak: f64) -> Evidence {
    let kept = series_count.min(3);
    let series = (0..kept)
        .map(|i| {
            #[allow(clippy::cast_precision_loss)]
            let p = peak - i as f64;
            SeriesSummary {
                labels: BTreeMap::from([("instance".to_owned(), format!("ref-{i}"))]),
                points: 60,
                non_finite_points: 0,
                stats: Some(SeriesStats {
                    min: Figure::new(p / 2.0).unwrap(),
                    mean: Figure::new(p * 0.75).unwrap(),
                    last: Figure::new(p / 2.0).unwrap(),
                    peak: Figure::new(p).unwrap(),
                    peak_time: 1_753_106_400,
                }),
            }
        })
        .collect();
    Evidence {
        outcome: EvidenceOutcome::Data,
        unit: Some(unit.to_owned()),
        expr: Some("sum by (instance) (rate(process_cpu_seconds_total[1m]))".to_owned()),
        window: Some(EvidenceWindow {
            start: 1_753_105_800,
            end: 1_753_106_700,
            step_seconds: 15,
        }),
        series_count,
        point_count: series_count * 60,
        non_finite: Some(NonFiniteCounts::default()),
        #[allow(clippy::cast_precision_loss)]
        peak_spread: PeakSpread::from_peaks((0..series_count).map(|i| peak - i as f64)),
        top_k: 3,
        truncated: series_count > kept,
        common_labels: BTreeMap::new(),
        series,
        warnings: Vec::new(),
    }
}

pub(crate) fn failure(class: FailureClass) -> Failure {
    let code = match class {
        FailureClass::QueryRejected => "grafana_http_422".to_owned(),
        other => format!("test_{}", other.as_str()),
    };
    Failure::new(
        ErrorCode::new(code).unwrap(),
        class,
        format!("{class} for the test"),
    )
}

pub(crate) fn single_ok(
    package: PackageId,
    provider: Provider,
    q: &QueryId,
    d: RequestDigest,
    evidence: Evidence,
) -> ToolResult {
    ToolResult::new(Details::success(
        origin(package, provider),
        q.clone(),
        d,
        evidence,
    ))
    .unwrap()
}

pub(crate) fn single_fail(
    package: PackageId,
    provider: Provider,
    q: Option<&QueryId>,
    d: Option<RequestDigest>,
    failure: Failure,
) -> ToolResult {
    ToolResult::new(Details::failure(
        origin(package, provider),
        q.cloned(),
        d,
        failure,
    ))
    .unwrap()
}

pub(crate) fn batch(items: Vec<Item>) -> ToolResult {
    ToolResult::new(Details::batch(origin(PackageId::clinic(), Provider::Clinic), items).unwrap())
        .unwrap()
}
