//! Compaction of a parsed matrix into the compact evidence of `evidence-result`.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BTreeMap;

use evidence_result::{Evidence, EvidenceOutcome, EvidenceWindow, SeriesSummary};

use super::parse::{Parsed, QueryRangeResponse, SeriesDigest};
use crate::ConnectorError;

/// How many series compact evidence keeps by default (top-k by peak).
pub const DEFAULT_TOP_K: u32 = 10;

/// Rewrites the labels of a kept series before they reach the model.
///
/// The Manus connector replaces instance addresses with opaque references here. A
/// closure `Fn(&mut BTreeMap<String, String>) -> Result<(), ConnectorError>` is a
/// sanitizer too. Only the kept (top-k) series are sanitized.
pub trait LabelSanitizer {
    /// Rewrites one series' labels in place.
    fn sanitize(&self, labels: &mut BTreeMap<String, String>) -> Result<(), ConnectorError>;
}

impl<F> LabelSanitizer for F
where
    F: Fn(&mut BTreeMap<String, String>) -> Result<(), ConnectorError>,
{
    fn sanitize(&self, labels: &mut BTreeMap<String, String>) -> Result<(), ConnectorError> {
        self(labels)
    }
}

/// The sanitizer that keeps labels as returned (Clinic, Wetech).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeepLabels;

impl LabelSanitizer for KeepLabels {
    fn sanitize(&self, _labels: &mut BTreeMap<String, String>) -> Result<(), ConnectorError> {
        Ok(())
    }
}

/// What compact evidence carries besides the data: how many series to keep, the unit,
/// the locked expression and the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compaction {
    /// How many series to keep, highest peak first.
    pub top_k: u32,
    /// Unit label of the values (`cores`, `bytes`, `%`).
    pub unit: Option<String>,
    /// The locked expression that ran.
    pub expr: Option<String>,
    /// Window and step the query ran with.
    pub window: Option<EvidenceWindow>,
}

impl Default for Compaction {
    fn default() -> Self {
        Compaction::new(DEFAULT_TOP_K)
    }
}

impl Compaction {
    /// Keeps `top_k` series; no unit, expression or window.
    pub fn new(top_k: u32) -> Self {
        Compaction {
            top_k,
            unit: None,
            expr: None,
            window: None,
        }
    }

    /// Sets the unit label.
    pub fn with_unit(mut self, unit: impl Into<String>) -> Self {
        self.unit = Some(unit.into());
        self
    }

    /// Sets the expression that ran.
    pub fn with_expr(mut self, expr: impl Into<String>) -> Self {
        self.expr = Some(expr.into());
        self
    }

    /// Sets the window.
    pub fn with_window(mut self, window: EvidenceWindow) -> Self {
        self.window = Some(window);
        self
    }

    /// Compacts a successful answer: series count, point count, and for the top-k
    /// series by peak their sanitized labels, point counts and statistics (by
    /// [`SeriesStats::from_points`]: `NaN` and infinities are counted, not used).
    /// `truncated` says whether series were left out. Zero series is
    /// [`Evidence::no_data`], never a zero. Warnings are kept.
    ///
    /// [`SeriesStats::from_points`]: evidence_result::SeriesStats::from_points
    ///
    /// Ties in peak keep the provider's order; series without any finite value rank
    /// last.
    pub fn compact(
        &self,
        response: QueryRangeResponse<'_>,
        sanitizer: &dyn LabelSanitizer,
    ) -> Result<Evidence, ConnectorError> {
        let digests = response
            .series
            .into_iter()
            .map(|s| SeriesDigest::of(s.labels, &s.points))
            .collect();
        self.compact_digests(digests, &response.warnings, sanitizer)
    }

    /// Compacts series already reduced while parsing (the path of `ResponseMapper`).
    pub(crate) fn compact_parsed(
        &self,
        parsed: Parsed<'_, SeriesDigest<'_>>,
        sanitizer: &dyn LabelSanitizer,
    ) -> Result<Evidence, ConnectorError> {
        self.compact_digests(parsed.series, &parsed.warnings, sanitizer)
    }

    fn compact_digests(
        &self,
        series: Vec<SeriesDigest<'_>>,
        warnings: &[Cow<'_, str>],
        sanitizer: &dyn LabelSanitizer,
    ) -> Result<Evidence, ConnectorError> {
        let warnings: Vec<String> = warnings.iter().map(|w| w.clone().into_owned()).collect();
        if series.is_empty() {
            let mut evidence = Evidence::no_data(self.unit.clone(), self.top_k);
            evidence.expr = self.expr.clone();
            evidence.window = self.window;
            evidence.warnings = warnings;
            return Ok(evidence);
        }
        let series_count = series.len();
        let point_count: u64 = series.iter().map(|s| s.points).sum();
        let mut ranked: Vec<(usize, SeriesDigest<'_>)> = series.into_iter().enumerate().collect();
        let keep = usize::try_from(self.top_k)
            .unwrap_or(usize::MAX)
            .min(ranked.len());
        if keep < ranked.len() && keep > 0 {
            ranked.select_nth_unstable_by(keep - 1, by_peak);
        }
        ranked.truncate(keep);
        ranked.sort_by(by_peak);
        let mut kept = Vec::with_capacity(keep);
        for (_, s) in ranked {
            let mut labels: BTreeMap<String, String> = s
                .labels
                .into_iter()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            sanitizer.sanitize(&mut labels)?;
            kept.push(SeriesSummary {
                labels,
                points: s.points,
                non_finite_points: s.non_finite,
                stats: s.stats,
            });
        }
        Ok(Evidence {
            outcome: EvidenceOutcome::Data,
            unit: self.unit.clone(),
            expr: self.expr.clone(),
            window: self.window,
            series_count: series_count as u64,
            point_count,
            top_k: self.top_k,
            truncated: series_count > kept.len(),
            series: kept,
            warnings,
        })
    }
}

/// Highest peak first; series without finite values last; ties by provider order.
fn by_peak(a: &(usize, SeriesDigest<'_>), b: &(usize, SeriesDigest<'_>)) -> Ordering {
    match (&a.1.stats, &b.1.stats) {
        (Some(x), Some(y)) => y.peak.total_cmp(&x.peak),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
    .then(a.0.cmp(&b.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prometheus::parse::{ResponseStatus, Series};
    use proptest::prelude::*;

    fn response(series: Vec<Vec<f64>>) -> QueryRangeResponse<'static> {
        QueryRangeResponse {
            status: ResponseStatus::Success,
            series: series
                .into_iter()
                .enumerate()
                .map(|(i, values)| Series {
                    labels: vec![(
                        Cow::Borrowed("instance"),
                        Cow::Owned(format!("10.0.0.{i}:9100")),
                    )],
                    points: values
                        .into_iter()
                        .enumerate()
                        .map(|(k, v)| (1000.0 + 15.0 * k as f64, v))
                        .collect(),
                })
                .collect(),
            error_type: None,
            error: None,
            warnings: vec![Cow::Borrowed("partial data")],
        }
    }

    #[test]
    fn zero_series_is_no_data_not_zero() {
        let e = Compaction::new(5)
            .with_unit("%")
            .compact(response(vec![]), &KeepLabels)
            .unwrap();
        assert!(e.is_no_data());
        assert_eq!(e.top_peak(), None);
        assert_eq!(e.unit.as_deref(), Some("%"));
        assert_eq!(e.warnings, vec!["partial data".to_owned()]);
    }

    #[test]
    fn sanitizer_sees_only_kept_series() {
        let seen = std::cell::Cell::new(0);
        let sanitizer = |labels: &mut BTreeMap<String, String>| {
            seen.set(seen.get() + 1);
            labels.insert("instance".into(), "ref:opaque".into());
            Ok(())
        };
        let e = Compaction::new(2)
            .compact(
                response(vec![
                    vec![1.0],
                    vec![f64::NAN],
                    vec![3.0, f64::INFINITY],
                    vec![2.0],
                ]),
                &sanitizer,
            )
            .unwrap();
        assert_eq!(seen.get(), 2);
        assert!(e.truncated);
        assert_eq!(e.series_count, 4);
        assert_eq!(e.point_count, 5);
        assert_eq!(e.series[0].stats.unwrap().peak, 3.0);
        assert_eq!(e.series[0].non_finite_points, 1);
        assert_eq!(e.series[1].stats.unwrap().peak, 2.0);
        assert!(
            e.series
                .iter()
                .all(|s| s.labels["instance"] == "ref:opaque")
        );
        let failing = |_: &mut BTreeMap<String, String>| -> Result<(), ConnectorError> {
            Err(ConnectorError::Sanitize("no key".into()))
        };
        assert!(
            Compaction::new(2)
                .compact(response(vec![vec![1.0]]), &failing)
                .is_err()
        );
    }

    fn value() -> impl Strategy<Value = f64> {
        prop_oneof![
            8 => -1e6f64..1e6,
            1 => Just(f64::NAN),
            1 => Just(f64::INFINITY),
            1 => Just(f64::NEG_INFINITY),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Counts are complete, `truncated` is exact, kept series are the highest peaks
        /// in order, and no data is never a zero.
        #[test]
        fn compaction_invariants(
            series in prop::collection::vec(prop::collection::vec(value(), 0..20), 0..30),
            top_k in 0u32..12,
        ) {
            let n = series.len();
            let points: usize = series.iter().map(Vec::len).sum();
            let peaks: Vec<Option<f64>> = series
                .iter()
                .map(|s| s.iter().copied().filter(|v| v.is_finite()).reduce(f64::max))
                .collect();
            let e = Compaction::new(top_k).compact(response(series), &KeepLabels).unwrap();
            prop_assert_eq!(e.series_count, n as u64);
            prop_assert_eq!(e.point_count, points as u64);
            prop_assert_eq!(e.is_no_data(), n == 0);
            prop_assert_eq!(e.series.len(), n.min(top_k as usize));
            prop_assert_eq!(e.truncated, n > e.series.len());
            let mut expected: Vec<Option<f64>> = peaks.clone();
            expected.sort_by(|a, b| match (a, b) {
                (Some(x), Some(y)) => y.total_cmp(x),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            });
            let got: Vec<Option<f64>> = e.series.iter().map(|s| s.stats.map(|st| st.peak)).collect();
            prop_assert_eq!(&got[..], &expected[..got.len()]);
        }
    }
}
