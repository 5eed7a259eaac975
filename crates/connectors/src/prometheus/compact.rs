//! Compaction of a parsed matrix into the compact evidence of `evidence-result`: each
//! series is reduced to a fold over its points, every series is pushed into the
//! result-level fold (`summary.rs`), and the summary becomes evidence with sanitized
//! labels.

use std::borrow::Cow;
use std::collections::BTreeMap;

use evidence_policy::lock::{DiscoveryAsk, DiscoveryForm, LockedQuery};
use evidence_result::{
    Evidence, evidence::EvidenceOutcome, evidence::EvidenceWindow, series::SeriesSummary,
};

use super::answer::Answer;
use super::bound::bounded;
use super::census::CensusKind;
use super::discover;
use super::parse::{Labels, Parsed, QueryRangeResponse, SeriesDigest};
use super::sanitize::LabelSanitizer;
use super::summary::{FoldSummary, MAX_TRACKED_SERIES, ResultFold};
use crate::ConnectorError;

/// How many series compact evidence keeps by default (top-k by peak).
pub const DEFAULT_TOP_K: u32 = 10;

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
    /// The discovery the query answers, when it answers one: the answer is then a
    /// discovery's ([`evidence_result::Discovery`]), with at most its items.
    pub discovery: Option<DiscoveryAsk>,
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
            discovery: None,
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

    /// The compaction of a locked query's answer: its expression, window and unit; a
    /// query keeps `series_kept` series, a discovery lists at most its items.
    pub fn for_query(query: &LockedQuery, series_kept: u32) -> Self {
        let top_k = query
            .discovery
            .as_ref()
            .map_or(series_kept, |d| d.max_items);
        let mut compaction = Compaction::new(top_k)
            .with_expr(query.expr.clone())
            .with_window(query.evidence_window());
        compaction.unit.clone_from(&query.unit);
        compaction.discovery.clone_from(&query.discovery);
        compaction
    }

    /// The census the fold takes for this compaction's discovery, if any.
    pub(crate) fn census(&self) -> Option<CensusKind> {
        match self.discovery.as_ref().map(|d| &d.form) {
            Some(DiscoveryForm::LabelNames) => Some(CensusKind::LabelNames),
            Some(DiscoveryForm::MetricNames) => Some(CensusKind::Prefixes),
            _ => None,
        }
    }

    /// Compacts a successful answer: series count, point count, and for the top-k
    /// series by peak their sanitized labels, point counts and statistics (by
    /// [`SeriesStats::from_points`]: `NaN` and infinities are counted, not used).
    /// `truncated` says whether series were left out. Zero series is
    /// [`Evidence::no_data`], never a zero. Warnings are kept.
    ///
    /// [`SeriesStats::from_points`]: evidence_result::series::SeriesStats::from_points
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
        self.evidence(self.fold(digests), &response.warnings, sanitizer)
    }

    /// Compacts series already reduced while parsing (the path of `ResponseMapper`)
    /// into this compaction's answer.
    pub(crate) fn compact_parsed(
        &self,
        parsed: Parsed<'_, SeriesDigest<'_>>,
        sanitizer: &dyn LabelSanitizer,
    ) -> Result<Answer, ConnectorError> {
        self.answer(self.fold(parsed.series), &parsed.warnings, sanitizer)
    }

    fn fold<'a>(&self, series: Vec<SeriesDigest<'a>>) -> FoldSummary<'a> {
        let mut fold = ResultFold::new(self.top_k).with_census(self.census());
        for s in series {
            fold.push(s);
        }
        fold.finish()
    }

    /// The fold's summary as this compaction's answer: a discovery's answer when the
    /// query answers a discovery ([`Self::discovery`]), compact evidence otherwise.
    pub(crate) fn answer(
        &self,
        summary: FoldSummary<'_>,
        warnings: &[Cow<'_, str>],
        sanitizer: &dyn LabelSanitizer,
    ) -> Result<Answer, ConnectorError> {
        match &self.discovery {
            Some(ask) => {
                let warnings = warnings
                    .iter()
                    .map(|w| bounded(w.clone()).into_owned())
                    .collect();
                discover::discovery(ask, summary, warnings, sanitizer).map(Answer::Discovery)
            }
            None => self
                .evidence(summary, warnings, sanitizer)
                .map(Answer::Evidence),
        }
    }

    /// Turns the fold's summary into evidence: sanitizes the common labels once and each
    /// kept series' labels, and gives every kept series the common labels' sanitized
    /// values (so they are stated once).
    pub(crate) fn evidence(
        &self,
        summary: FoldSummary<'_>,
        warnings: &[Cow<'_, str>],
        sanitizer: &dyn LabelSanitizer,
    ) -> Result<Evidence, ConnectorError> {
        // Provider warnings are bounded as labels are (`bound.rs`).
        let mut warnings: Vec<String> = warnings
            .iter()
            .map(|w| bounded(w.clone()).into_owned())
            .collect();
        if summary.untracked_peaks > 0 {
            let covered = summary.peak_spread.map_or(0, |s| s.series);
            warnings.push(format!(
                "peak_spread covers the first {covered} series with a finite peak; {} more \
                 were counted but left out of it (the tool tracks at most {MAX_TRACKED_SERIES} \
                 peaks per answer)",
                summary.untracked_peaks
            ));
        }
        if summary.series_count == 0 {
            let mut evidence = Evidence::no_data(self.unit.clone(), self.top_k);
            evidence.expr = self.expr.clone();
            evidence.window = self.window;
            evidence.warnings = warnings;
            return Ok(evidence);
        }
        let mut common = owned(summary.common);
        sanitizer.sanitize(&mut common)?;
        let mut kept = Vec::with_capacity(summary.top.len());
        for s in summary.top {
            let mut labels = owned(s.labels);
            sanitizer.sanitize(&mut labels)?;
            for (k, v) in &common {
                labels.insert(k.clone(), v.clone());
            }
            kept.push(SeriesSummary {
                labels,
                points: s.fold.points(),
                non_finite_points: s.fold.non_finite(),
                stats: s.fold.stats(),
            });
        }
        Ok(Evidence {
            outcome: EvidenceOutcome::Data,
            unit: self.unit.clone(),
            expr: self.expr.clone(),
            window: self.window,
            series_count: summary.series_count,
            point_count: summary.point_count,
            non_finite: Some(summary.non_finite),
            peak_spread: summary.peak_spread,
            top_k: self.top_k,
            truncated: summary.series_count > kept.len() as u64,
            common_labels: common,
            series: kept,
            warnings,
        })
    }
}

fn owned(labels: Labels<'_>) -> BTreeMap<String, String> {
    labels
        .into_iter()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prometheus::KeepLabels;
    use crate::prometheus::parse::{ResponseStatus, Series};
    use evidence_result::figure::Figure;
    use proptest::prelude::*;
    use std::cmp::Ordering;

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
        // Two kept series and the common labels (none here, all instances differ).
        assert_eq!(seen.get(), 3);
        assert!(e.truncated);
        assert_eq!(e.series_count, 4);
        assert_eq!(e.point_count, 5);
        assert_eq!(e.series[0].stats.unwrap().peak.get(), 3.0);
        assert_eq!(e.series[0].non_finite_points, 1);
        assert_eq!(e.series[1].stats.unwrap().peak.get(), 2.0);
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

    /// Beyond the tracked peaks the evidence says, in a warning, how many series the
    /// spread leaves out; the counts and the top still cover every series, and the
    /// evidence reads back from its JSON (the `compact_v2` format is unchanged).
    #[test]
    fn a_spread_over_part_of_the_series_says_so() {
        let mut fold = ResultFold::with_peak_limit(2, 3);
        for (i, v) in [4.0, 1.0, 2.0, 9.0, 3.0].into_iter().enumerate() {
            fold.push(SeriesDigest::of(
                vec![(Cow::Borrowed("instance"), Cow::Owned(format!("i{i}")))],
                &[(1000.0, v)],
            ));
        }
        let e = Compaction::new(2)
            .evidence(
                fold.finish(),
                &[Cow::Borrowed("from prometheus")],
                &KeepLabels,
            )
            .unwrap();
        assert_eq!(e.series_count, 5);
        assert_eq!(e.top_peak(), Some(9.0));
        assert_eq!(e.peak_spread.unwrap().series, 3);
        assert_eq!(e.warnings[0], "from prometheus");
        assert!(
            e.warnings[1].starts_with(
                "peak_spread covers the first 3 series with a finite peak; 2 more were counted but left out of it"
            ),
            "{:?}",
            e.warnings
        );
        let back: Evidence = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(back, e);
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
            let expected: Vec<Option<f64>> = expected.iter().map(|p| p.map(|p| Figure::new(p).unwrap().get())).collect();
            let got: Vec<Option<f64>> = e.series.iter().map(|s| s.stats.map(|st| st.peak.get())).collect();
            prop_assert_eq!(&got[..], &expected[..got.len()]);
        }

        /// Result-level facts cover every series, kept or not, against an independent
        /// computation: non-finite points and the series holding them, and the
        /// nearest-rank spread of the per-series peaks.
        #[test]
        fn result_level_facts_cover_every_series(
            series in prop::collection::vec(prop::collection::vec(value(), 0..12), 1..40),
            top_k in 0u32..6,
        ) {
            let nan_points = series.iter().flatten().filter(|v| v.is_nan() || v.is_infinite()).count();
            let nan_series = series.iter().filter(|s| s.iter().any(|v| v.is_nan() || v.is_infinite())).count();
            let mut peaks: Vec<f64> = Vec::new();
            for s in &series {
                let mut best: Option<f64> = None;
                for v in s {
                    if v.is_finite() && best.is_none_or(|b| *v > b) {
                        best = Some(*v);
                    }
                }
                peaks.extend(best);
            }
            peaks.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let rank = |q: f64| {
                let r = (q * peaks.len() as f64).ceil() as usize;
                peaks[r.clamp(1, peaks.len()) - 1]
            };
            let e = Compaction::new(top_k).compact(response(series), &KeepLabels).unwrap();
            let nf = e.non_finite.unwrap();
            prop_assert_eq!(nf.points, nan_points as u64);
            prop_assert_eq!(nf.series, nan_series as u64);
            match e.peak_spread {
                None => prop_assert!(peaks.is_empty()),
                Some(spread) => {
                    let fig = |v: f64| Figure::new(v).unwrap();
                    prop_assert_eq!(spread.series, peaks.len() as u64);
                    prop_assert_eq!(spread.min, fig(peaks[0]));
                    prop_assert_eq!(spread.p50, fig(rank(0.5)));
                    prop_assert_eq!(spread.p90, fig(rank(0.9)));
                    prop_assert_eq!(spread.max, fig(peaks[peaks.len() - 1]));
                    if let Some(top) = e.top_peak() {
                        prop_assert_eq!(top, spread.max.get());
                    }
                }
            }
        }

        /// Labels shared by every series are stated once, outside the rows; each kept
        /// series still carries them in Rust, and the JSON reads back to the same
        /// evidence.
        #[test]
        fn common_labels_are_stated_once(
            zones in prop::collection::vec(prop::sample::select(vec!["east", "west"]), 1..15),
            top_k in 1u32..5,
        ) {
            let body = serde_json::json!({"status": "success", "data": {"resultType": "matrix",
                "result": zones.iter().enumerate().map(|(i, zone)| serde_json::json!({
                    "metric": {"job": "tidb", "zone": zone, "instance": format!("tidb-{i}")},
                    "values": [[1000, format!("{i}.5")]]
                })).collect::<Vec<_>>()}}).to_string();
            let e = Compaction::new(top_k)
                .compact(QueryRangeResponse::parse(body.as_bytes()).unwrap(), &KeepLabels)
                .unwrap();
            let mut expected = BTreeMap::from([("job".to_owned(), "tidb".to_owned())]);
            if zones.iter().all(|z| *z == zones[0]) {
                expected.insert("zone".to_owned(), zones[0].to_owned());
            }
            if zones.len() == 1 {
                expected.insert("instance".to_owned(), "tidb-0".to_owned());
            }
            prop_assert_eq!(&e.common_labels, &expected);
            prop_assert!(e.series.iter().all(|s| s.labels["job"] == "tidb" && s.labels.len() == 3));
            let text = serde_json::to_string(&e).unwrap();
            prop_assert_eq!(text.matches("\"tidb\"").count(), 1);
            let back: Evidence = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(back, e);
        }
    }
}
