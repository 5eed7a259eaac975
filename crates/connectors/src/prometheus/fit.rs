//! The size bound of one query's evidence, enforced: evidence whose JSON is longer than
//! [`MAX_EVIDENCE_BYTES`] loses parts in a fixed order until it fits, and says so in a
//! warning of its own. With the result's envelope around it (package, provider, query
//! id, request digest), a one-query result then fits in 4 KiB whatever the provider
//! returned.
//!
//! What is dropped first: the series rows beyond the first (the highest peak stays; the
//! counts, non-finite counts and peak spread still cover every series); then label
//! columns, longest first (the kept row's own labels, then the common labels); then the
//! provider's warnings; then the expression and the unit (the caller sent both). The
//! last resort, never reached by evidence made of bounded labels, is the first row.

use evidence_result::Evidence;

/// The most bytes of one query's evidence as JSON: 4 KiB less 1 KiB for the result
/// around it.
pub const MAX_EVIDENCE_BYTES: usize = 3 * 1024;

/// What [`fit`] dropped, for the note it adds.
#[derive(Debug, Default)]
struct Dropped {
    rows: usize,
    columns: usize,
    warnings: usize,
    expr: bool,
    last_row: bool,
}

impl Dropped {
    fn any(&self) -> bool {
        self.rows + self.columns + self.warnings > 0 || self.expr || self.last_row
    }

    /// The note the evidence carries when something was dropped.
    fn note(&self) -> String {
        let mut parts = Vec::new();
        if self.rows > 0 {
            parts.push(format!("{} series rows beyond the first", self.rows));
        }
        if self.columns > 0 {
            parts.push(format!("{} label columns", self.columns));
        }
        if self.warnings > 0 {
            parts.push(format!("{} provider warnings", self.warnings));
        }
        if self.expr {
            parts.push("the expression and unit".to_owned());
        }
        if self.last_row {
            parts.push("the first series row".to_owned());
        }
        format!(
            "the evidence was cut to fit {MAX_EVIDENCE_BYTES} bytes: dropped {}; counts, \
             non-finite counts and peak spread still cover every series",
            parts.join(", ")
        )
    }
}

/// The length of `evidence`'s JSON as [`fit`] would leave it now: with the note saying
/// what was dropped and the `truncated` flag set, measured on the finished value (an
/// estimate missed fields that appear only then, such as the first warning).
fn size(evidence: &Evidence, dropped: &Dropped) -> usize {
    let measured = if dropped.any() {
        let mut finished = evidence.clone();
        finish(&mut finished, dropped);
        serde_json::to_string(&finished)
    } else {
        serde_json::to_string(evidence)
    };
    measured.map_or(usize::MAX, |s| s.len())
}

/// What every cut evidence ends with: its `truncated` flag and the note.
fn finish(evidence: &mut Evidence, dropped: &Dropped) {
    evidence.truncated = evidence.series_count > evidence.series.len() as u64;
    evidence.warnings.push(dropped.note());
}

/// Drops parts of `evidence`, in the order the module states, until its JSON (with the
/// note saying what was dropped) is at most [`MAX_EVIDENCE_BYTES`]; evidence that fits
/// is unchanged.
pub(crate) fn fit(evidence: &mut Evidence) {
    let mut dropped = Dropped::default();
    if size(evidence, &dropped) <= MAX_EVIDENCE_BYTES {
        return;
    }
    let steps: [fn(&mut Evidence, &mut Dropped) -> bool; 5] = [
        drop_rows,
        drop_row_column,
        drop_common_column,
        drop_warning,
        drop_expr,
    ];
    for step in steps {
        while size(evidence, &dropped) > MAX_EVIDENCE_BYTES {
            if !step(evidence, &mut dropped) {
                break;
            }
        }
    }
    if size(evidence, &dropped) > MAX_EVIDENCE_BYTES && !evidence.series.is_empty() {
        evidence.series.clear();
        dropped.last_row = true;
    }
    finish(evidence, &dropped);
}

fn drop_rows(e: &mut Evidence, d: &mut Dropped) -> bool {
    if e.series.len() <= 1 {
        return false;
    }
    d.rows += e.series.len() - 1;
    e.series.truncate(1);
    true
}

/// Drops the longest label of the kept row that is not a common label.
fn drop_row_column(e: &mut Evidence, d: &mut Dropped) -> bool {
    let Some(row) = e.series.first_mut() else {
        return false;
    };
    let longest = row
        .labels
        .iter()
        .filter(|(k, _)| !e.common_labels.contains_key(*k))
        .max_by_key(|(k, v)| k.len() + v.len())
        .map(|(k, _)| k.clone());
    match longest {
        Some(k) => {
            row.labels.remove(&k);
            d.columns += 1;
            true
        }
        None => false,
    }
}

/// Drops the longest common label (from every row too: each row carries them).
fn drop_common_column(e: &mut Evidence, d: &mut Dropped) -> bool {
    let longest = e
        .common_labels
        .iter()
        .max_by_key(|(k, v)| k.len() + v.len())
        .map(|(k, _)| k.clone());
    match longest {
        Some(k) => {
            e.common_labels.remove(&k);
            for row in &mut e.series {
                row.labels.remove(&k);
            }
            d.columns += 1;
            true
        }
        None => false,
    }
}

fn drop_warning(e: &mut Evidence, d: &mut Dropped) -> bool {
    if e.warnings.pop().is_some() {
        d.warnings += 1;
        true
    } else {
        false
    }
}

fn drop_expr(e: &mut Evidence, d: &mut Dropped) -> bool {
    if d.expr || (e.expr.is_none() && e.unit.is_none()) {
        return false;
    }
    e.expr = None;
    e.unit = None;
    d.expr = true;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prometheus::bound::{CUT_MARK, MAX_LABEL_CHARS};
    use evidence_result::{
        Details, Item, Operation, Origin, PackageId, PolicySource, Provider, QueryId,
        RequestDigest, ToolResult, evidence::EvidenceOutcome, series::NonFiniteCounts,
        series::PeakSpread, series::SeriesStats, series::SeriesSummary,
    };
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn evidence(rows: Vec<BTreeMap<String, String>>, common: BTreeMap<String, String>) -> Evidence {
        let n = rows.len() as u64;
        Evidence {
            outcome: EvidenceOutcome::Data,
            unit: Some("cores".into()),
            expr: Some("rate(x[1m])".into()),
            window: None,
            series_count: n + 3,
            point_count: n * 240,
            non_finite: Some(NonFiniteCounts::default()),
            peak_spread: PeakSpread::from_peaks(
                (0..n).map(|i| 100.0 - i as f64).collect::<Vec<f64>>(),
            ),
            top_k: 10,
            truncated: true,
            common_labels: common.clone(),
            series: rows
                .into_iter()
                .enumerate()
                .map(|(i, mut labels)| {
                    labels.extend(common.clone());
                    SeriesSummary {
                        labels,
                        points: 240,
                        non_finite_points: 0,
                        stats: SeriesStats::from_points(&[(1000.0, 100.0 - i as f64)]),
                    }
                })
                .collect(),
            warnings: vec![],
        }
    }

    fn label() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9:.-]{1,20}",
            (0usize..MAX_LABEL_CHARS).prop_map(|n| format!("{}{CUT_MARK}", "é".repeat(n.max(1))))
        ]
    }

    /// The input the proptest below found (3,073 bytes): rows of `é` labels whose cut
    /// ended one byte over the bound, since the finished size was estimated rather than
    /// measured.
    #[test]
    fn the_found_input_fits() {
        let cut = |n: usize| format!("{}{CUT_MARK}", "é".repeat(n));
        let first: BTreeMap<String, String> = [
            ("_", "aa-000a0aaaa".to_owned()),
            ("__a___a_aa_a", cut(249)),
            ("_a__a_aaaa_", cut(125)),
            ("aa__aaaa", cut(43)),
            ("aaaa", cut(248)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let common: BTreeMap<String, String> = [
            ("AA__A__A_A__", cut(133)),
            ("AA___A_", cut(222)),
            ("AA___A_AAA_", cut(175)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let mut rows = vec![first];
        rows.extend(std::iter::repeat_n(BTreeMap::new(), 4));
        let mut e = evidence(rows, common);
        fit(&mut e);
        let len = serde_json::to_string(&e).unwrap().len();
        assert!(len <= MAX_EVIDENCE_BYTES, "{len} bytes");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Whatever the labels hold (bounded as the parser bounds them), the evidence
        /// fits; what fits already is unchanged; what was cut says so, keeps the top
        /// row while any row fits and its counts, and reads back from its JSON.
        #[test]
        fn evidence_always_fits_and_says_what_was_dropped(
            rows in prop::collection::vec(prop::collection::btree_map("[a-z_]{1,12}", label(), 0..8), 1..11),
            common in prop::collection::btree_map("[A-Z_]{1,12}", label(), 0..6),
        ) {
            let original = evidence(rows, common);
            let mut e = original.clone();
            fit(&mut e);
            let text = serde_json::to_string(&e).unwrap();
            prop_assert!(text.len() <= MAX_EVIDENCE_BYTES, "{} bytes", text.len());
            if serde_json::to_string(&original).unwrap().len() <= MAX_EVIDENCE_BYTES {
                prop_assert_eq!(&e, &original);
            } else {
                let note = e.warnings.last().unwrap();
                prop_assert!(note.starts_with("the evidence was cut to fit"), "{}", note);
                prop_assert_eq!(e.series.len(), 1);
                prop_assert_eq!(e.series[0].stats, original.series[0].stats);
                prop_assert_eq!(e.series_count, original.series_count);
                prop_assert!(e.truncated);
            }
            let back: Evidence = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&back, &e);
            // Around it, a one-query result with the longest query id fits in 4 KiB.
            let origin = Origin {
                package: PackageId::manus(),
                provider: Provider::Manus,
                operation: Operation::QueryRange,
                policy_source: Some(PolicySource::TrustedEnvelope),
            };
            let digest = RequestDigest::of(&serde_json::json!({"expr": "x"})).unwrap();
            let id = QueryId::new("q".repeat(64)).unwrap();
            let item = Item::success(id.clone(), Some(digest), e.clone());
            let batch = ToolResult::new(Details::batch(origin.clone(), vec![item]).unwrap()).unwrap();
            prop_assert!(batch.text().len() <= 4096, "{} bytes", batch.text().len());
            let one = ToolResult::new(Details::success(origin, id, digest, e)).unwrap();
            prop_assert!(one.text().len() <= 4096, "{} bytes", one.text().len());
        }
    }
}
