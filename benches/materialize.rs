//! Materializing 10,000 attempts (goal at most 10 ms), against a plain group-by of the
//! same attempts by (package, queryId) into a `HashMap`, measured in the same run.
//!
//! `materialize` (what `Turn::handoff` runs) borrows the records: the handoff shares each
//! final result's evidence with them and copies the rest of its details.
//! `materialize_owned` (what `Turn::into_handoff` runs) consumes the records, moves each
//! final result's details into the handoff and frees everything else of the records
//! (texts, calls, replaced failures) inside the timed section. Its input is a deep copy of
//! the records, made outside the timed section, so that no evidence is shared with them:
//! the state of a turn whose results were just received. Every routine's output is
//! dropped outside the timed section.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput};
use managed_evidence::materialize::{
    AcquisitionStatus, Call, CallRecord, materialize, materialize_owned,
};
use managed_evidence::result::{
    Details, ErrorCode, Evidence, Failure, FailureClass, Item, Operation, Origin, PackageId,
    PolicySource, Provider, QueryId, RequestDigest, ToolResult, evidence::EvidenceOutcome,
    evidence::EvidenceWindow, figure::Figure, series::NonFiniteCounts, series::PeakSpread,
    series::SeriesStats, series::SeriesSummary,
};

/// Wetech pairs (a rejection, then a changed success): 2 attempts each.
const WETECH_PAIRS: usize = 4_000;
/// Clinic batches of `BATCH` queries: `BATCH` attempts each.
const CLINIC_BATCHES: usize = 400;
const BATCH: usize = 5;
const ATTEMPTS: usize = WETECH_PAIRS * 2 + CLINIC_BATCHES * BATCH;

fn origin(package: PackageId, provider: Provider) -> Origin {
    Origin {
        package,
        provider,
        operation: Operation::QueryRange,
        policy_source: Some(PolicySource::TrustedEnvelope),
    }
}

fn digest(n: usize) -> RequestDigest {
    RequestDigest::of(&serde_json::json!({ "request": n })).unwrap()
}

/// Realistic compact evidence: 5 kept series of 56, with labels and stats.
fn evidence(seed: usize) -> Evidence {
    let series = (0..5)
        .map(|i| SeriesSummary {
            labels: BTreeMap::from([
                ("cluster_id".to_owned(), "1379661944646413143".to_owned()),
                ("instance".to_owned(), format!("tidb-{i}")),
                ("job".to_owned(), "tidb".to_owned()),
            ]),
            points: 61,
            non_finite_points: 0,
            stats: Some(SeriesStats {
                min: Figure::new(1.0).unwrap(),
                mean: Figure::new(9.5).unwrap(),
                last: Figure::new(4.0).unwrap(),
                peak: Figure::new(22.84 - i as f64).unwrap(),
                peak_time: 1_753_106_400 + seed as i64,
            }),
        })
        .collect();
    Evidence {
        outcome: EvidenceOutcome::Data,
        unit: Some("cores".to_owned()),
        expr: Some(
            "sum by (instance) (rate(process_cpu_seconds_total{cluster_id=\"1379661944646413143\"}[1m]))"
                .to_owned(),
        ),
        window: Some(EvidenceWindow {
            start: 1_753_105_800,
            end: 1_753_106_700,
            step_seconds: 15,
        }),
        series_count: 56,
        point_count: 56 * 61,
        non_finite: Some(NonFiniteCounts::default()),
        peak_spread: PeakSpread::from_peaks((0..56).map(|i| 22.84 - f64::from(i) / 4.0)),
        top_k: 5,
        truncated: true,
        common_labels: BTreeMap::from([
            ("cluster_id".to_owned(), "1379661944646413143".to_owned()),
            ("job".to_owned(), "tidb".to_owned()),
        ]),
        series,
        warnings: Vec::new(),
    }
}

fn records() -> Vec<CallRecord> {
    let mut out = Vec::new();
    let ms = Duration::from_millis(12);
    for i in 0..WETECH_PAIRS {
        let q = QueryId::new(format!("wetech_q{i}")).unwrap();
        let (bad, good) = (digest(2 * i), digest(2 * i + 1));
        let failure = Failure::new(
            ErrorCode::new("invalid_unit").unwrap(),
            FailureClass::InvalidArgument,
            "unit must be a short plain label such as cores, bytes or %",
        );
        let o = || origin(PackageId::wetech(), Provider::Wetech);
        let fail = ToolResult::new(Details::failure(o(), Some(q.clone()), Some(bad), failure));
        let call = |d| Call::single(PackageId::wetech(), Provider::Wetech, q.clone(), Some(d));
        out.push(CallRecord::admitted(call(bad), fail.unwrap(), ms));
        let ok = ToolResult::new(Details::success(o(), q.clone(), good, evidence(i)));
        out.push(CallRecord::admitted(call(good), ok.unwrap(), ms));
    }
    for b in 0..CLINIC_BATCHES {
        let mut call = Call::new(PackageId::clinic(), Provider::Clinic);
        let mut items = Vec::new();
        for j in 0..BATCH {
            let q = QueryId::new(format!("clinic_q{b}_{j}")).unwrap();
            let d = digest(1_000_000 + b * BATCH + j);
            call = call.with_query(q.clone(), Some(d));
            items.push(if j == BATCH - 1 {
                Item::success(q, Some(d), Evidence::no_data(Some("%".to_owned()), 5))
            } else {
                Item::success(q, Some(d), evidence(j))
            });
        }
        let details = Details::batch(origin(PackageId::clinic(), Provider::Clinic), items);
        out.push(CallRecord::admitted(
            call,
            ToolResult::new(details.unwrap()).unwrap(),
            ms,
        ));
    }
    out
}

/// A copy of the records that shares nothing with them: every evidence is a new
/// allocation, as in a turn whose results were just received.
fn deep_copy(records: &[CallRecord]) -> Vec<CallRecord> {
    records
        .iter()
        .map(|record| {
            let mut details = record.result.details().clone();
            let fresh = |e: &mut Option<Arc<Evidence>>| {
                if let Some(shared) = e.take() {
                    *e = Some(Arc::new(Evidence::clone(&shared)));
                }
            };
            fresh(&mut details.evidence);
            details
                .items
                .iter_mut()
                .for_each(|i| fresh(&mut i.evidence));
            CallRecord {
                call: record.call.clone(),
                disposition: record.disposition,
                result: ToolResult::new(details).unwrap(),
                duration: record.duration,
            }
        })
        .collect()
}

/// The baseline: group the same attempts by (package, queryId) into a `HashMap`, keeping
/// (record, item) positions, and nothing else.
fn group_by(records: &[CallRecord]) -> HashMap<(&PackageId, &QueryId), Vec<(usize, usize)>> {
    let mut groups: HashMap<(&PackageId, &QueryId), Vec<(usize, usize)>> = HashMap::new();
    for (r, record) in records.iter().enumerate() {
        let details = record.result.details();
        if let Some(q) = &details.query_id {
            groups
                .entry((&details.package, q))
                .or_default()
                .push((r, 0));
        }
        for (i, item) in details.items.iter().enumerate() {
            groups
                .entry((&details.package, &item.query_id))
                .or_default()
                .push((r, i));
        }
    }
    groups
}

fn main() {
    let records = records();
    let handoff = materialize(&records);
    assert_eq!(
        handoff.objectives.len(),
        WETECH_PAIRS + CLINIC_BATCHES * BATCH
    );
    assert_eq!(handoff.acquisition, AcquisitionStatus::Complete);
    let attempts: u32 = handoff.objectives.iter().map(|o| o.attempts.total).sum();
    assert_eq!(attempts as usize, ATTEMPTS);
    assert_eq!(group_by(&records).len(), handoff.objectives.len());

    let copy = deep_copy(&records);
    assert_eq!(copy, records);
    let shares = |a: &[CallRecord], b: &[CallRecord]| {
        a.iter().zip(b).any(|(x, y)| {
            match (&x.result.details().evidence, &y.result.details().evidence) {
                (Some(p), Some(q)) => Arc::ptr_eq(p, q),
                _ => false,
            }
        })
    };
    assert!(!shares(&copy, &records));
    assert_eq!(materialize_owned(copy), handoff);

    let mut c = Criterion::default().configure_from_args();
    {
        let mut group = c.benchmark_group("materialize_10k_attempts");
        group.throughput(Throughput::Elements(ATTEMPTS as u64));
        group.bench_function("materialize_owned", |b| {
            b.iter_batched(
                || deep_copy(&records),
                |r| materialize_owned(black_box(r)),
                BatchSize::LargeInput,
            )
        });
        group.bench_function("materialize_borrowing", |b| {
            b.iter_batched(
                || (),
                |()| materialize(black_box(&records)),
                BatchSize::SmallInput,
            )
        });
        group.bench_function("baseline_group_by_hashmap", |b| {
            b.iter_batched(
                || (),
                |()| group_by(black_box(&records)),
                BatchSize::SmallInput,
            )
        });
        group.finish();
    }
    c.final_summary();

    // The summary: each routine timed alone, its input built and its output dropped
    // outside the timed section; the median of the runs, which a busy machine disturbs
    // less than the mean.
    let runs = 51;
    let time = |f: &mut dyn FnMut() -> Duration| -> f64 {
        let mut samples: Vec<Duration> = (0..runs).map(|_| f()).collect();
        samples.sort();
        samples[samples.len() / 2].as_secs_f64()
    };
    let owned_s = time(&mut || {
        let input = deep_copy(&records);
        let t = Instant::now();
        let h = materialize_owned(black_box(input));
        let e = t.elapsed();
        drop(black_box(h));
        e
    });
    let copy_s = time(&mut || {
        let t = Instant::now();
        let h = materialize(black_box(&records));
        let e = t.elapsed();
        drop(black_box(h));
        e
    });
    // What freeing the consumed records costs by itself, the same way: the part of
    // `materialize_owned` that any owner of the records pays when it drops them.
    let drop_s = time(&mut || {
        let input = deep_copy(&records);
        let t = Instant::now();
        drop(black_box(input));
        t.elapsed()
    });
    let base_s = time(&mut || {
        let t = Instant::now();
        let g = group_by(black_box(&records));
        let e = t.elapsed();
        drop(black_box(g));
        e
    });
    println!(
        "materialize summary (medians): {ATTEMPTS} attempts, {} objectives; materialize_owned {:.2} ms \
         (goal <= 10 ms), {:.1}x the baseline; materialize (borrowing the records) {:.2} ms \
         (goal <= 10 ms), {:.1}x the baseline; baseline plain group-by into a HashMap {:.2} ms; \
         dropping the same records alone {:.2} ms ({:.1}x the baseline)",
        handoff.objectives.len(),
        owned_s * 1e3,
        owned_s / base_s,
        copy_s * 1e3,
        copy_s / base_s,
        base_s * 1e3,
        drop_s * 1e3,
        drop_s / base_s,
    );
}
