//! Tokens a model reads for one query, before and after compact evidence v2, counted
//! with a real tokenizer: `cl100k_base` from the `tiktoken-rs` crate (its rank file ships
//! inside the crate).
//!
//! A real Prometheus (test support, `Main` fixture) answers the five queries of
//! `SIDE_BY_SIDE_QUERIES`; each answer becomes the Clinic tool's one-query batch result
//! (`text`, what the model reads) twice in the same run:
//! - **after**: the library's compaction (`ResponseMapper::evidence`, top 10), contract
//!   `compact_v2`;
//! - **before** (baseline): the superseded version 1 evidence, rendered here from the
//!   same body by an independent implementation of the old compaction (full-precision
//!   floats, one object per series, `max` beside `peak`, float `peak_time`). It is
//!   checked byte for byte against a result the old code wrote
//!   (`benches/data/v1_wetech_tidb_cpu_result.json`), so the baseline is the old format.
//!
//! Prints a table (bytes, tokens, ratio) and fails when a result is over 4 KiB, over
//! 60 % of the baseline's tokens, or when the top instance and its peak cannot be read
//! from the text.
//!
//! Two more rows:
//! - **Manus vs Clinic**: the APID-29213 query on the `vida` fixture (IPv4:port
//!   instances), once as the Clinic one-query batch result and once as the Manus result
//!   with every address sealed by the library's sealer (deterministic AES-SIV
//!   references); prints the ratio of tokens and the length of a reference, and fails
//!   when a reference is over 32 characters or the ratio over [`MANUS_BOUND`]. It says
//!   whether the ratio meets the issue's goal of [`MANUS_GOAL`]: it does not (about
//!   1.24x), because AES-SIV's 16-byte tag alone costs about as many tokens as the
//!   address it protects (a 31-character reference reads as about 23 tokens where
//!   `10.21.1.17:10080` reads as about 12), ten rows over a 514-token answer.
//! - **per-item overhead**: the tokens of a one-query result other than its series
//!   rows, before (a `compact_v2` result the old code wrote,
//!   `benches/data/v2_wetech_tidb_cpu_result.json`) and after (the same query and
//!   result shape in the current contract).
//!
//! ```sh
//! cargo bench --bench tokens
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use evidence_test_support as support;
use managed_evidence::connectors::ReferenceKeyRing;
use managed_evidence::connectors::ResponseLimits;
use managed_evidence::connectors::internal::{
    AddressSealer, Compaction, KeepLabels, QueryRange, Redactor, ResponseMapper, fetch,
};
use managed_evidence::result::{
    Details, Evidence, Item, Operation, Origin, PackageId, PolicySource, Provider, QueryId,
    RequestDigest, ToolResult, evidence::EvidenceWindow,
};
use serde::Serialize;
use serde_json::Value;

const TOP_K: u32 = 10;
const BUDGET_BYTES: usize = 4096;
const TOKEN_GOAL: f64 = 0.60;
/// The issue's goal for Manus result tokens over Clinic result tokens (same answer);
/// reported, not met with authenticated references (see the module doc).
const MANUS_GOAL: f64 = 1.15;
/// Manus result tokens over Clinic result tokens for the same answer, at most: the
/// regression bound (1.96x before deterministic compact references).
const MANUS_BOUND: f64 = 1.30;
/// Characters of an IPv4:port reference, at most.
const REFERENCE_GOAL: usize = 32;

// ---- the superseded version 1 of compact evidence (the baseline) ----

#[derive(Serialize)]
struct EvidenceV1 {
    outcome: &'static str,
    unit: String,
    expr: String,
    window: EvidenceWindow,
    series_count: u64,
    point_count: u64,
    top_k: u32,
    truncated: bool,
    series: Vec<SeriesV1>,
}

#[derive(Serialize)]
struct SeriesV1 {
    labels: BTreeMap<String, String>,
    points: u64,
    #[serde(skip_serializing_if = "is_zero")]
    non_finite_points: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    stats: Option<StatsV1>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Serialize, Clone, Copy)]
struct StatsV1 {
    min: f64,
    max: f64,
    mean: f64,
    last: f64,
    peak: f64,
    peak_time: f64,
}

fn prometheus_float(s: &str) -> f64 {
    match s {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().unwrap(),
    }
}

/// Version 1 statistics: the old `SeriesStats::from_points`, exactly.
fn stats_v1(points: &[(f64, f64)]) -> Option<StatsV1> {
    let mut it = points.iter().filter(|(_, v)| v.is_finite());
    let &(t0, v0) = it.next()?;
    let mut s = StatsV1 {
        min: v0,
        max: v0,
        mean: 0.0,
        last: v0,
        peak: v0,
        peak_time: t0,
    };
    let (mut sum, mut n) = (v0, 1u64);
    for &(t, v) in it {
        if v < s.min {
            s.min = v;
        }
        if v > s.max {
            s.max = v;
            s.peak = v;
            s.peak_time = t;
        }
        s.last = v;
        sum += v;
        n += 1;
    }
    let mean = sum / n as f64;
    s.mean = if mean.is_finite() { mean } else { s.max };
    Some(s)
}

/// The version 1 evidence JSON of a `query_range` body.
fn evidence_v1(body: &[u8], unit: &str, expr: &str, window: EvidenceWindow) -> String {
    let v: Value = serde_json::from_slice(body).unwrap();
    let mut all: Vec<(usize, SeriesV1)> = v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let labels = s["metric"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect();
            let points: Vec<(f64, f64)> = s["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    (
                        p[0].as_f64().unwrap(),
                        prometheus_float(p[1].as_str().unwrap()),
                    )
                })
                .collect();
            let series = SeriesV1 {
                labels,
                points: points.len() as u64,
                non_finite_points: points.iter().filter(|(_, v)| !v.is_finite()).count() as u64,
                stats: stats_v1(&points),
            };
            (i, series)
        })
        .collect();
    let series_count = all.len() as u64;
    let point_count = all.iter().map(|(_, s)| s.points).sum();
    all.sort_by(|(i, a), (j, b)| {
        match (a.stats, b.stats) {
            (Some(x), Some(y)) => y.peak.total_cmp(&x.peak),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        }
        .then(i.cmp(j))
    });
    all.truncate(TOP_K as usize);
    serde_json::to_string(&EvidenceV1 {
        outcome: "data",
        unit: unit.to_owned(),
        expr: expr.to_owned(),
        window,
        series_count,
        point_count,
        top_k: TOP_K,
        truncated: series_count > all.len() as u64,
        series: all.into_iter().map(|(_, s)| s).collect(),
    })
    .unwrap()
}

// ---- the run ----

struct Row {
    name: &'static str,
    series: u64,
    before: (usize, usize),
    after: (usize, usize),
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too.
    let bpe = tiktoken_rs::cl100k_base().unwrap();
    let tokens = |text: &str| bpe.encode_ordinary(text).len();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let prometheus = runtime
        .block_on(support::Prometheus::start(support::Fixture::Main))
        .unwrap();
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

    let mut rows = Vec::new();
    for (query, unit, _cluster) in support::SIDE_BY_SIDE_QUERIES {
        let window = EvidenceWindow {
            start: query.start,
            end: query.end,
            step_seconds: query.step_seconds,
        };
        let builder = QueryRange::new(query.expr, window).post(&client, url.clone());
        let raw = runtime
            .block_on(fetch(builder, &ResponseLimits::default()))
            .unwrap();
        let compaction = Compaction::new(TOP_K)
            .with_unit(unit)
            .with_expr(query.expr)
            .with_window(window);
        let evidence: Evidence = mapper.evidence(&raw, &compaction, &KeepLabels).unwrap();
        let after_evidence = serde_json::to_string(&evidence).unwrap();
        let before_evidence = evidence_v1(&raw.body, unit, query.expr, window);

        if query == support::TIDB_CPU {
            check_baseline(&before_evidence);
        }

        let digest =
            RequestDigest::of(&serde_json::json!({"expr": query.expr, "window": window})).unwrap();
        let qid = QueryId::new(query.name).unwrap();
        let details = Details::batch(
            origin.clone(),
            vec![Item::success(qid, Some(digest), evidence.clone())],
        )
        .unwrap();
        let after = ToolResult::new(details).unwrap().text().to_owned();
        assert_eq!(after.matches(&after_evidence).count(), 1);
        let before = after.replace(&after_evidence, &before_evidence);

        check_readable(&after, &evidence);
        if std::env::var_os("TOKENS_SHOW").is_some() {
            println!("{after}");
        }
        rows.push(Row {
            name: query.name,
            series: evidence.series_count,
            before: (before.len(), tokens(&before)),
            after: (after.len(), tokens(&after)),
        });
    }

    println!("tokens: cl100k_base (tiktoken-rs), Clinic one-query batch result text, top {TOP_K}");
    println!(
        "| query | series | before (v1): bytes / tokens | after (compact_v2): bytes / tokens | tokens after / before |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let mut failures = Vec::new();
    for r in &rows {
        let ratio = r.after.1 as f64 / r.before.1 as f64;
        println!(
            "| `{}` | {} | {} / {} | {} / {} | {:.1} % |",
            r.name,
            r.series,
            r.before.0,
            r.before.1,
            r.after.0,
            r.after.1,
            100.0 * ratio
        );
        if ratio > TOKEN_GOAL {
            failures.push(format!(
                "{}: {:.1} % of the baseline's tokens",
                r.name,
                100.0 * ratio
            ));
        }
        if r.after.0 > BUDGET_BYTES {
            failures.push(format!("{}: {} bytes, over 4 KiB", r.name, r.after.0));
        }
    }
    let manus = manus_row(&runtime, &tokens);
    println!();
    println!(
        "| Manus vs Clinic, `tidb_cpu` on vida (56 series, top {TOP_K}) | Clinic: bytes / tokens | Manus: bytes / tokens | tokens Manus / Clinic | reference length |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let ratio = manus.manus.1 as f64 / manus.clinic.1 as f64;
    println!(
        "| same answer | {} / {} | {} / {} | {:.2}x | {} characters |",
        manus.clinic.0, manus.clinic.1, manus.manus.0, manus.manus.1, ratio, manus.reference_len
    );
    if manus.reference_len > REFERENCE_GOAL {
        failures.push(format!(
            "an IPv4:port reference has {} characters",
            manus.reference_len
        ));
    }
    println!(
        "Manus / Clinic {ratio:.2}x: the goal of {MANUS_GOAL}x is {}",
        if ratio <= MANUS_GOAL {
            "met"
        } else {
            "not met"
        }
    );
    if ratio > MANUS_BOUND {
        failures.push(format!(
            "Manus / Clinic tokens {ratio:.2}x, over {MANUS_BOUND}x"
        ));
    }

    let (before, after) = overhead_row(&runtime, &prometheus, &tokens);
    println!();
    println!(
        "| per-item overhead (all but the rows), `tidb_cpu` top {TOP_K} | compact_v2: tokens | current: tokens | after / before |"
    );
    println!("| --- | --- | --- | --- |");
    println!(
        "| one-query result | {before} | {after} | {:.1} % |",
        100.0 * after as f64 / before as f64
    );
    if after >= before {
        failures.push(format!(
            "per-item overhead {after} tokens, not below {before}"
        ));
    }
    assert!(failures.is_empty(), "goals missed: {failures:?}");
    println!(
        "goals met: every result within {BUDGET_BYTES} bytes and at most 60 % of the baseline's tokens; references at most {REFERENCE_GOAL} characters; Manus at most {MANUS_BOUND}x Clinic"
    );
}

/// Bytes and tokens of the same answer through Clinic and Manus, and a reference's length.
struct ManusRow {
    clinic: (usize, usize),
    manus: (usize, usize),
    reference_len: usize,
}

/// A tool result's text.
fn result_text(details: Details) -> String {
    ToolResult::new(details).unwrap().text().to_owned()
}

fn origin(package: PackageId, provider: Provider) -> Origin {
    Origin {
        package,
        provider,
        operation: Operation::QueryRange,
        policy_source: Some(PolicySource::TrustedEnvelope),
    }
}

fn window_of(query: &support::FixtureQuery) -> EvidenceWindow {
    EvidenceWindow {
        start: query.start,
        end: query.end,
        step_seconds: query.step_seconds,
    }
}

/// The `tidb_cpu` answer of `prometheus`, as fetched.
fn tidb_cpu_body(
    runtime: &tokio::runtime::Runtime,
    prometheus: &support::Prometheus,
) -> managed_evidence::connectors::internal::RawResponse {
    let url: url::Url = format!("{}/api/v1/query_range", prometheus.url())
        .parse()
        .unwrap();
    let query = support::TIDB_CPU;
    let builder = QueryRange::new(query.expr, window_of(&query)).post(&reqwest::Client::new(), url);
    runtime
        .block_on(fetch(builder, &ResponseLimits::default()))
        .unwrap()
}

fn manus_row(runtime: &tokio::runtime::Runtime, tokens: &dyn Fn(&str) -> usize) -> ManusRow {
    let vida = runtime
        .block_on(support::Prometheus::start(support::Fixture::Vida))
        .unwrap();
    let raw = tidb_cpu_body(runtime, &vida);
    let query = support::TIDB_CPU;
    let window = window_of(&query);
    let qid = QueryId::new(query.name).unwrap();
    let digest =
        RequestDigest::of(&serde_json::json!({"expr": query.expr, "window": window})).unwrap();

    let clinic_evidence = tidb_cpu_evidence(&raw, Provider::Clinic, query.expr, &KeepLabels);
    let clinic = result_text(
        Details::batch(
            origin(PackageId::clinic(), Provider::Clinic),
            vec![Item::success(qid.clone(), Some(digest), clinic_evidence)],
        )
        .unwrap(),
    );

    let keys = ReferenceKeyRing::new("bench", [7u8; 32]).unwrap();
    let package = PackageId::manus();
    let sealer = AddressSealer::new(&keys, "vida", package.as_str(), 0);
    let manus_evidence =
        tidb_cpu_evidence(&raw, Provider::Manus, &sealer.text(query.expr), &sealer);
    let reference_len = manus_evidence.series[0].labels["instance"].len();
    let manus = result_text(Details::success(
        origin(PackageId::manus(), Provider::Manus),
        qid,
        digest,
        manus_evidence,
    ));
    assert!(
        !manus.contains("10.21."),
        "an address reached the Manus text"
    );
    if std::env::var_os("TOKENS_SHOW").is_some() {
        println!("{clinic}\n{manus}");
    }
    ManusRow {
        clinic: (clinic.len(), tokens(&clinic)),
        manus: (manus.len(), tokens(&manus)),
        reference_len,
    }
}

/// The compact evidence of a `tidb_cpu` answer (top 10, `cores`), labels through
/// `sanitizer`.
fn tidb_cpu_evidence(
    raw: &managed_evidence::connectors::internal::RawResponse,
    provider: Provider,
    expr: &str,
    sanitizer: &dyn managed_evidence::connectors::internal::LabelSanitizer,
) -> Evidence {
    let compaction = Compaction::new(TOP_K)
        .with_unit("cores")
        .with_expr(expr)
        .with_window(window_of(&support::TIDB_CPU));
    ResponseMapper::new(provider, Redactor::default())
        .evidence(raw, &compaction, sanitizer)
        .unwrap()
}

/// Tokens of a result text other than its series rows.
fn overhead(text: &str, tokens: &dyn Fn(&str) -> usize) -> usize {
    let details: Value = serde_json::from_str(text).unwrap();
    let rows = serde_json::to_string(&details["evidence"]["series"]["rows"]).unwrap();
    assert_eq!(text.matches(&rows).count(), 1);
    tokens(text) - tokens(&rows)
}

/// The per-item overhead of the `compact_v2` Wetech result the old code wrote, and of
/// the same query's result now.
fn overhead_row(
    runtime: &tokio::runtime::Runtime,
    prometheus: &support::Prometheus,
    tokens: &dyn Fn(&str) -> usize,
) -> (usize, usize) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/data/v2_wetech_tidb_cpu_result.json"
    );
    let old: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let before_text = old["text"].as_str().unwrap();
    assert!(before_text.contains(r#""format":"compact_v2""#));

    let raw = tidb_cpu_body(runtime, prometheus);
    let query = support::TIDB_CPU;
    let window = window_of(&query);
    let evidence = tidb_cpu_evidence(&raw, Provider::Wetech, query.expr, &KeepLabels);
    let digest =
        RequestDigest::of(&serde_json::json!({"expr": query.expr, "window": window})).unwrap();
    let after_text = result_text(Details::success(
        origin(PackageId::wetech(), Provider::Wetech),
        QueryId::new(query.name).unwrap(),
        digest,
        evidence,
    ));
    (overhead(before_text, tokens), overhead(&after_text, tokens))
}

/// The baseline renderer reproduces, byte for byte, the evidence a result of the old
/// code holds for the APID-29213 query (top 10 of 56).
fn check_baseline(before_evidence: &str) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/data/v1_wetech_tidb_cpu_result.json"
    );
    let old: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let text = old["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("\"evidence\":{before_evidence}}}")),
        "the version 1 renderer does not reproduce the old code's evidence"
    );
}

/// The top series' distinguishing labels and its peak, as printed, are in the text.
fn check_readable(text: &str, evidence: &Evidence) {
    let top = &evidence.series[0];
    let peak = top.stats.unwrap().peak;
    assert!(text.contains(&serde_json::to_string(&peak).unwrap()));
    for (k, v) in &top.labels {
        assert!(
            text.contains(&serde_json::to_string(v).unwrap()),
            "label {k} of the top series is not in the text"
        );
    }
}
