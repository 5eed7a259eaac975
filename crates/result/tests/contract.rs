//! Contract tests of `evidence-result`: the text invariant, lossless round trips,
//! tamper refusal, golden JSON of the four canonical shapes, the committed schema and
//! the MCP projection.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use evidence_result::*;
use evidence_result::{correction::*, evidence::*, figure::*, series::*};
use proptest::prelude::*;

fn origin(provider: Provider) -> Origin {
    let package = match provider {
        Provider::Clinic => PackageId::clinic(),
        Provider::Manus => PackageId::manus(),
        Provider::Wetech => PackageId::wetech(),
    };
    Origin {
        package,
        provider,
        operation: Operation::QueryRange,
        policy_source: Some(PolicySource::TrustedEnvelope),
    }
}

fn digest(s: &str) -> RequestDigest {
    RequestDigest::of(&serde_json::json!({ "expr": s })).unwrap()
}

fn fig(v: f64) -> Figure {
    Figure::new(v).unwrap()
}

fn cpu_evidence() -> Evidence {
    let mut labels = BTreeMap::new();
    labels.insert("instance".to_owned(), "tidb-0".to_owned());
    Evidence {
        outcome: EvidenceOutcome::Data,
        unit: Some("cores".to_owned()),
        expr: Some(
            "sum by (instance) (rate(process_cpu_seconds_total{cluster_id=\"SaaS01\",job=\"tidb\"}[1m]))"
                .to_owned(),
        ),
        window: Some(EvidenceWindow {
            start: 1_784_641_800,
            end: 1_784_642_700,
            step_seconds: 15,
        }),
        series_count: 56,
        point_count: 3416,
        non_finite: Some(NonFiniteCounts {
            points: 3,
            series: 1,
        }),
        peak_spread: Some(PeakSpread {
            series: 56,
            min: fig(4.1),
            p50: fig(12.5),
            p90: fig(17.25),
            max: fig(22.84),
        }),
        top_k: 1,
        truncated: true,
        common_labels: BTreeMap::new(),
        series: vec![SeriesSummary {
            labels,
            points: 61,
            non_finite_points: 0,
            stats: Some(SeriesStats {
                min: fig(3.5),
                mean: fig(11.25),
                last: fig(9.0),
                peak: fig(22.84),
                peak_time: 1_784_642_100,
            }),
        }],
        warnings: vec![],
    }
}

fn golden_success() -> ToolResult {
    ToolResult::new(Details::success(
        origin(Provider::Clinic),
        QueryId::new("tidb_cpu").unwrap(),
        digest("cpu"),
        cpu_evidence(),
    ))
    .unwrap()
}

fn golden_rejection() -> ToolResult {
    let body = br#"{"status":"error","errorType":"execution","error":"found duplicate series for the match group {cluster_id=\"SaaS01\"} on the right hand-side of the operation: [{...}];many-to-many matching not allowed: matching labels must be unique on one side"}"#;
    let failure = Failure::new(
        ErrorCode::http(Provider::Wetech, 422),
        FailureClass::QueryRejected,
        "found duplicate series for the match group {cluster_id=\"SaaS01\"} on the right hand-side of the operation: [{...}];many-to-many matching not allowed: matching labels must be unique on one side",
    )
    .with_http_status(422)
    .with_prometheus_error_type("execution")
    .with_body_digest(Digest::sha256(body));
    ToolResult::new(Details::failure(
        origin(Provider::Wetech),
        Some(QueryId::new("tidb_cpu").unwrap()),
        Some(digest("a / on(cluster_id) b")),
        failure,
    ))
    .unwrap()
}

fn golden_auth() -> ToolResult {
    let failure = Failure::new(
        ErrorCode::http(Provider::Wetech, 401),
        FailureClass::Authentication,
        "grafana redirected to /login: the browser session is not authenticated",
    )
    .with_http_status(401)
    .with_correction(Correction::for_class(
        FailureClass::Authentication,
        None,
        vec![],
    ));
    ToolResult::new(Details::failure(
        origin(Provider::Wetech),
        Some(QueryId::new("tidb_cpu").unwrap()),
        Some(digest("cpu")),
        failure,
    ))
    .unwrap()
}

fn golden_batch() -> ToolResult {
    let parse = Failure::new(
        ErrorCode::promql_parse_error(),
        FailureClass::InvalidArgument,
        "1:10: parse error: missing unit character in duration",
    );
    let items = vec![
        Item::success(
            QueryId::new("mem_available").unwrap(),
            Some(digest("mem")),
            cpu_evidence(),
        ),
        Item::success(
            QueryId::new("tikv_mem").unwrap(),
            Some(digest("tikv")),
            Evidence::no_data(Some("bytes".to_owned()), 10),
        ),
        Item::failure(QueryId::new("bad_rate").unwrap(), None, parse),
    ];
    ToolResult::new(Details::batch(origin(Provider::Clinic), items).unwrap()).unwrap()
}

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.json"))
}

fn check_golden(name: &str, result: &ToolResult) {
    let actual = format!("{}\n", serde_json::to_string_pretty(result).unwrap());
    let path = golden_path(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_GOLDEN=1 to write it",
            path.display()
        )
    });
    assert_eq!(
        actual, expected,
        "golden {name} changed; review and rerun with UPDATE_GOLDEN=1"
    );
    let back: ToolResult = serde_json::from_str(&expected).unwrap();
    assert_eq!(&back, result);
}

#[test]
fn golden_success_shape() {
    let r = golden_success();
    assert!(!r.is_failed());
    check_golden("success", &r);
}

#[test]
fn golden_rejection_with_correction() {
    let r = golden_rejection();
    assert!(r.is_failed());
    let c = r.details().correction.as_ref().unwrap();
    assert!(c.allowed);
    assert_eq!(c.scope, CorrectionScope::SameTurn);
    assert!(c.keep.iter().any(|k| k == "queryId"));
    check_golden("rejection_422", &r);
}

#[test]
fn golden_shared_authentication_failure() {
    let r = golden_auth();
    assert!(r.details().failure_class().unwrap().is_shared());
    assert!(!r.details().correction.as_ref().unwrap().allowed);
    check_golden("authentication", &r);
}

#[test]
fn golden_mixed_batch() {
    let r = golden_batch();
    assert_eq!(r.details().status, Status::Partial);
    assert!(!r.is_failed());
    check_golden("batch_mixed", &r);
}

#[test]
fn parsing_text_yields_details() {
    for r in [
        golden_success(),
        golden_rejection(),
        golden_auth(),
        golden_batch(),
    ] {
        let parsed: Details = serde_json::from_str(r.text()).unwrap();
        assert_eq!(&parsed, r.details());
        let value: serde_json::Value = serde_json::from_str(r.text()).unwrap();
        assert_eq!(value, serde_json::to_value(r.details()).unwrap());
    }
}

#[test]
fn tampered_text_is_refused() {
    let r = golden_success();
    let mut v: serde_json::Value = serde_json::from_str(&r.to_json().unwrap()).unwrap();
    let text = v["text"].as_str().unwrap().replace("22.84", "2.84");
    v["text"] = serde_json::Value::String(text);
    let err = serde_json::from_value::<ToolResult>(v.clone()).unwrap_err();
    assert!(err.to_string().contains("not exactly"), "{err}");
    // A semantically equal but differently formatted text is refused too.
    let pretty = serde_json::to_string_pretty(r.details()).unwrap();
    v["text"] = serde_json::Value::String(pretty);
    assert!(serde_json::from_value::<ToolResult>(v).is_err());
}

#[test]
fn inconsistent_details_are_refused() {
    let mut d = golden_success().into_details();
    d.status = Status::Error;
    assert!(matches!(
        ToolResult::new(d),
        Err(ResultError::Inconsistent(_))
    ));
    let mut d = golden_batch().into_details();
    d.status = Status::Ok;
    assert!(ToolResult::new(d).is_err());
    let mut d = golden_rejection().into_details();
    d.correction = None;
    assert!(ToolResult::new(d).is_err());
    assert!(Details::batch(origin(Provider::Clinic), vec![]).is_none());
}

/// A rejection is a failed result, also in its MCP projection, and so is a batch whose
/// every item failed (status `error`).
#[test]
fn failed_whenever_status_is_error() {
    let r = golden_rejection();
    assert!(r.is_failed());
    assert!(r.to_mcp().unwrap().failed());
    let all_failed = Details::batch(
        origin(Provider::Clinic),
        vec![Item::failure(
            QueryId::new("q").unwrap(),
            None,
            Failure::new(
                ErrorCode::scope_violation(),
                FailureClass::PolicyViolation,
                "x",
            ),
        )],
    )
    .unwrap();
    assert_eq!(all_failed.status, Status::Error);
    assert!(ToolResult::new(all_failed).unwrap().is_failed());
}

#[test]
fn mcp_projection() {
    let r = golden_rejection();
    let mcp = serde_json::to_value(r.to_mcp().unwrap()).unwrap();
    assert_eq!(mcp["isError"], true);
    assert_eq!(mcp["resultType"], "complete");
    assert_eq!(mcp["content"][0]["type"], "text");
    assert_eq!(mcp["content"][0]["text"], r.text());
    assert_eq!(
        mcp["structuredContent"],
        serde_json::to_value(r.details()).unwrap()
    );
    assert_eq!(
        serde_json::to_value(golden_success().to_mcp().unwrap()).unwrap()["isError"],
        false
    );
}

#[test]
fn committed_schema_is_current() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas/tool-result.schema.json");
    let actual = format!(
        "{}\n",
        serde_json::to_string_pretty(&ToolResult::json_schema()).unwrap()
    );
    if std::env::var_os("UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &actual).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == actual,
        "schemas/tool-result.schema.json is stale; rerun this test with UPDATE_SCHEMAS=1"
    );
}

// ---- property tests ----

fn arb_label() -> impl Strategy<Value = String> {
    "[a-z_]{1,12}"
}

fn arb_figure() -> impl Strategy<Value = Figure> {
    prop_oneof![
        -1.0e12f64..1.0e12f64,
        (-1_000_000i64..1_000_000).prop_map(|n| n as f64),
        Just(0.0),
    ]
    .prop_map(fig)
}

fn arb_stats() -> impl Strategy<Value = Option<SeriesStats>> {
    proptest::option::of(
        (
            arb_figure(),
            arb_figure(),
            arb_figure(),
            arb_figure(),
            -10i64..2_000_000_000,
        )
            .prop_map(|(min, mean, last, peak, peak_time)| SeriesStats {
                min,
                mean,
                last,
                peak,
                peak_time,
            }),
    )
}

fn arb_series() -> impl Strategy<Value = SeriesSummary> {
    (
        proptest::collection::btree_map(arb_label(), "\\PC{0,16}", 0..4),
        prop_oneof![Just(61u64), 0u64..10_000],
        prop_oneof![3 => Just(0u64), 1 => 0u64..5],
        arb_stats(),
    )
        .prop_map(|(labels, points, non_finite_points, stats)| SeriesSummary {
            labels,
            points,
            non_finite_points,
            stats,
        })
}

fn arb_evidence() -> impl Strategy<Value = Evidence> {
    prop_oneof![
        proptest::option::of("[a-z%/ ]{1,8}").prop_map(|u| Evidence::no_data(u, 10)),
        (
            proptest::collection::vec(arb_series(), 0..5),
            0u64..3,
            proptest::collection::btree_map("[A-Z]{1,6}", "\\PC{0,12}", 0..3),
            (0u64..40, -1.0e6f64..1.0e6),
            proptest::option::of("\\PC{0,40}"),
            proptest::collection::vec("\\PC{0,30}", 0..2),
            proptest::option::of((0i64..2_000_000_000, 1u64..3600)),
        )
            .prop_map(
                |(mut series, extra, common, (extra_nf, low), expr, warnings, window)| {
                    for s in &mut series {
                        s.labels.extend(common.clone());
                    }
                    let kept = series.len() as u64;
                    let extra = if kept == 0 { extra + 1 } else { extra };
                    let kept_nf: u64 = series.iter().map(|s| s.non_finite_points).sum();
                    let nf_series =
                        series.iter().filter(|s| s.non_finite_points > 0).count() as u64;
                    let peaks: Vec<f64> = series
                        .iter()
                        .filter_map(|s| s.stats.map(|st| st.peak.get()))
                        .chain(std::iter::once(low).filter(|_| extra > 0))
                        .collect();
                    Evidence {
                        outcome: EvidenceOutcome::Data,
                        unit: Some("cores".to_owned()),
                        expr,
                        window: window.map(|(start, step_seconds)| EvidenceWindow {
                            start,
                            end: start + 3600,
                            step_seconds,
                        }),
                        series_count: kept + extra,
                        point_count: series.iter().map(|s| s.points).sum::<u64>()
                            + kept_nf
                            + extra_nf,
                        non_finite: Some(NonFiniteCounts {
                            points: kept_nf + extra_nf,
                            series: nf_series + u64::from(extra_nf > 0 && extra > 0),
                        }),
                        peak_spread: PeakSpread::from_peaks(peaks),
                        top_k: 10,
                        truncated: extra > 0,
                        common_labels: common,
                        series,
                        warnings,
                    }
                }
            ),
    ]
}

fn arb_class() -> impl Strategy<Value = FailureClass> {
    proptest::sample::select(FailureClass::ALL.to_vec())
}

fn arb_failure() -> impl Strategy<Value = Failure> {
    (
        arb_class(),
        "[a-z][a-z0-9_]{0,20}",
        "\\PC{0,80}",
        proptest::option::of(100u16..600),
        proptest::option::of("[a-z_]{1,10}"),
        proptest::option::of(any::<[u8; 8]>()),
    )
        .prop_map(|(class, code, text, status, et, body)| {
            let mut f = Failure::new(ErrorCode::new(code).unwrap(), class, text);
            if let Some(s) = status {
                f = f.with_http_status(s);
            }
            if let Some(et) = et {
                f = f.with_prometheus_error_type(et);
            }
            if let Some(b) = body {
                f = f.with_body_digest(Digest::sha256(&b));
            }
            f
        })
}

fn arb_query_id() -> impl Strategy<Value = QueryId> {
    "[A-Za-z0-9_.:-]{1,64}".prop_map(|s| QueryId::new(s).unwrap())
}

fn arb_provider() -> impl Strategy<Value = Provider> {
    prop_oneof![
        Just(Provider::Clinic),
        Just(Provider::Manus),
        Just(Provider::Wetech)
    ]
}

fn arb_item() -> impl Strategy<Value = Item> {
    prop_oneof![
        (arb_query_id(), "\\PC{0,10}", arb_evidence()).prop_map(|(q, d, e)| Item::success(
            q,
            Some(digest(&d)),
            e
        )),
        (
            arb_query_id(),
            proptest::option::of("\\PC{0,10}"),
            arb_failure()
        )
            .prop_map(|(q, d, f)| Item::failure(q, d.map(|d| digest(&d)), f)),
    ]
}

fn arb_details() -> impl Strategy<Value = Details> {
    prop_oneof![
        (arb_provider(), arb_query_id(), "\\PC{0,10}", arb_evidence())
            .prop_map(|(p, q, d, e)| Details::success(origin(p), q, digest(&d), e)),
        (
            arb_provider(),
            proptest::option::of(arb_query_id()),
            proptest::option::of("\\PC{0,10}"),
            arb_failure()
        )
            .prop_map(|(p, q, d, f)| Details::failure(
                origin(p),
                q,
                d.map(|d| digest(&d)),
                f
            )),
        (arb_provider(), proptest::collection::vec(arb_item(), 1..6))
            .prop_map(|(p, items)| Details::batch(origin(p), items).unwrap()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// For generated details: `text` is exactly the JSON of `details`, and the result is
    /// failed exactly when `status` is `error`.
    #[test]
    fn text_is_exactly_the_json_of_details(details in arb_details()) {
        let r = ToolResult::new(details.clone()).unwrap();
        prop_assert_eq!(r.text(), serde_json::to_string(&details).unwrap());
        prop_assert_eq!(r.is_failed(), details.status == Status::Error);
    }

    #[test]
    fn round_trips_are_lossless(details in arb_details()) {
        let r = ToolResult::new(details).unwrap();
        let json = r.to_json().unwrap();
        let back = ToolResult::from_json(&json).unwrap();
        prop_assert_eq!(&back, &r);
        prop_assert_eq!(back.to_json().unwrap(), json);
        let parsed: Details = serde_json::from_str(r.text()).unwrap();
        prop_assert_eq!(&parsed, r.details());
    }

    #[test]
    fn any_change_of_text_is_refused(details in arb_details(), pos in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let r = ToolResult::new(details).unwrap();
        let mut text = r.text().as_bytes().to_vec();
        let i = pos.index(text.len());
        prop_assume!(text[i] != byte);
        text[i] = byte;
        let Ok(text) = String::from_utf8(text) else { return Ok(()) };
        let wire = serde_json::json!({ "text": text, "details": r.details() });
        prop_assert!(serde_json::from_value::<ToolResult>(wire).is_err());
    }

    #[test]
    fn request_digest_is_canonical(a in "\\PC{0,20}", b in 0u64..100_000, c in "\\PC{0,20}") {
        let one = serde_json::json!({"expr": a, "step": b, "queryId": c});
        let reordered: serde_json::Value = serde_json::from_str(&format!(
            r#"{{"queryId":{},"step":{},"expr":{}}}"#,
            serde_json::to_string(&c).unwrap(), b, serde_json::to_string(&a).unwrap()
        )).unwrap();
        let d1 = RequestDigest::of(&one).unwrap();
        prop_assert_eq!(d1, RequestDigest::of(&reordered).unwrap());
        let changed = serde_json::json!({"expr": a, "step": b + 1, "queryId": c});
        prop_assert_ne!(d1, RequestDigest::of(&changed).unwrap());
        prop_assert_eq!(d1.to_string().parse::<RequestDigest>().unwrap(), d1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The spread of peaks is nearest-rank over the finite peaks, computed here
    /// independently (sorting with `partial_cmp`, ranks through floating point).
    #[test]
    fn peak_spread_is_nearest_rank(
        peaks in proptest::collection::vec(
            prop_oneof![8 => -1.0e9f64..1.0e9, 1 => Just(f64::NAN), 1 => Just(f64::INFINITY)],
            0..200,
        ),
    ) {
        let mut finite: Vec<f64> = peaks.iter().copied().filter(|p| p.is_finite()).collect();
        finite.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let spread = PeakSpread::from_peaks(peaks.clone());
        if finite.is_empty() {
            prop_assert!(spread.is_none());
        } else {
            let spread = spread.unwrap();
            let n = finite.len();
            let rank = |q: f64| finite[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
            prop_assert_eq!(spread.series, n as u64);
            prop_assert_eq!(spread.min, fig(finite[0]));
            prop_assert_eq!(spread.p50, fig(rank(0.5)));
            prop_assert_eq!(spread.p90, fig(rank(0.9)));
            prop_assert_eq!(spread.max, fig(finite[n - 1]));
            prop_assert!(spread.min <= spread.p50 && spread.p50 <= spread.p90 && spread.p90 <= spread.max);
        }
    }

    /// Every evidence text names its contract version first and states each common
    /// label once.
    #[test]
    fn evidence_text_is_version_three_with_common_labels_once(e in arb_evidence()) {
        let text = serde_json::to_string(&e).unwrap();
        let head = r#"{"format":"compact_v3","#;
        prop_assert!(text.starts_with(head), "{}", text);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        for name in e.common_labels.keys() {
            let columns = value["series"]["labels"].as_array().cloned().unwrap_or_default();
            prop_assert!(!columns.iter().any(|c| c == name));
        }
    }
}
