//! The result-level fold of compaction: series are pushed one at a time (each already
//! reduced to a [`SeriesDigest`]) and the fold keeps only what compact evidence states
//! about all of them — counts, non-finite points, every series' exact peak for the peak
//! spread, the labels common to every series — and the top k by peak. A streaming parser
//! can push series as it reads them; memory is bounded by [`MAX_TRACKED_SERIES`] peaks
//! (8 bytes each) and about 2k retained digests, never by the points.

use std::cmp::Ordering;

use evidence_result::{series::NonFiniteCounts, series::PeakSpread};

use super::census::{Census, CensusKind, CensusSummary};
use super::parse::{Labels, SeriesDigest};

/// How many series' peaks one answer's peak spread is computed over (8 MB of peaks).
///
/// Counts (series, points, non-finite points), the top k and the common labels cover
/// every series whatever their number; the exact peak spread needs every peak, so it
/// covers the first this many series with a finite peak, and the evidence then says
/// in a warning how many were left out of it. A body the former 16 MiB cap accepted
/// holds fewer series than this (each takes at least 26 bytes), so for those the spread
/// always covers every series.
pub const MAX_TRACKED_SERIES: usize = 1_000_000;

/// The fold over every series of one answer.
#[derive(Debug)]
pub(crate) struct ResultFold<'a> {
    top_k: usize,
    series_count: u64,
    point_count: u64,
    non_finite: NonFiniteCounts,
    peaks: Vec<f64>,
    untracked_peaks: u64,
    peak_limit: usize,
    common: Option<Labels<'a>>,
    top: Vec<(usize, SeriesDigest<'a>)>,
    census: Option<Census>,
}

/// What the fold found once every series was pushed.
#[derive(Debug)]
pub(crate) struct FoldSummary<'a> {
    pub(crate) series_count: u64,
    pub(crate) point_count: u64,
    pub(crate) non_finite: NonFiniteCounts,
    pub(crate) peak_spread: Option<PeakSpread>,
    /// Series with a finite peak left out of the peak spread (beyond
    /// [`MAX_TRACKED_SERIES`]).
    pub(crate) untracked_peaks: u64,
    /// Labels with the same value in every series (empty when there is no series).
    pub(crate) common: Labels<'a>,
    /// The top-k series, highest exact peak first (ties: provider order; series
    /// without finite values last).
    pub(crate) top: Vec<SeriesDigest<'a>>,
    /// What the census found, when the fold took one (a discovery's).
    pub(crate) census: Option<CensusSummary>,
}

impl<'a> ResultFold<'a> {
    /// A fold that keeps the `top_k` highest peaks.
    pub(crate) fn new(top_k: u32) -> Self {
        Self::with_peak_limit(top_k, MAX_TRACKED_SERIES)
    }

    /// A fold whose peak spread covers at most `peak_limit` series.
    pub(crate) fn with_peak_limit(top_k: u32, peak_limit: usize) -> Self {
        ResultFold {
            top_k: usize::try_from(top_k).unwrap_or(usize::MAX),
            series_count: 0,
            point_count: 0,
            non_finite: NonFiniteCounts::default(),
            peaks: Vec::new(),
            untracked_peaks: 0,
            peak_limit,
            common: None,
            top: Vec::new(),
            census: None,
        }
    }

    /// The same fold, also taking a census of `kind` over every series.
    pub(crate) fn with_census(mut self, kind: Option<CensusKind>) -> Self {
        self.census = kind.map(Census::new);
        self
    }

    /// Adds one series.
    pub(crate) fn push(&mut self, series: SeriesDigest<'a>) {
        let index = usize::try_from(self.series_count).unwrap_or(usize::MAX);
        self.series_count += 1;
        self.point_count += series.fold.points();
        if series.fold.non_finite() > 0 {
            self.non_finite.points += series.fold.non_finite();
            self.non_finite.series += 1;
        }
        if let Some(peak) = series.fold.peak() {
            if self.peaks.len() < self.peak_limit {
                self.peaks.push(peak);
            } else {
                self.untracked_peaks += 1;
            }
        }
        if let Some(census) = &mut self.census {
            census.observe(&series.labels);
        }
        match &mut self.common {
            None => self.common = Some(series.labels.clone()),
            Some(common) => common.retain(|pair| series.labels.contains(pair)),
        }
        if self.top_k == 0 {
            return;
        }
        self.top.push((index, series));
        // Keep at most 2k candidates: the k best of them survive each cut.
        if self.top.len() >= self.top_k.saturating_mul(2) {
            self.cut();
        }
    }

    fn cut(&mut self) {
        if self.top.len() > self.top_k {
            self.top.select_nth_unstable_by(self.top_k - 1, by_peak);
            self.top.truncate(self.top_k);
        }
    }

    /// The bytes of the label names and values the fold holds (its candidates and the
    /// common labels).
    #[cfg(test)]
    pub(crate) fn held_label_bytes(&self) -> usize {
        let bytes =
            |labels: &Labels<'_>| -> usize { labels.iter().map(|(k, v)| k.len() + v.len()).sum() };
        self.top
            .iter()
            .map(|(_, s)| bytes(&s.labels))
            .sum::<usize>()
            + self.common.as_ref().map_or(0, bytes)
    }

    /// The summary of every pushed series.
    pub(crate) fn finish(mut self) -> FoldSummary<'a> {
        self.cut();
        self.top.sort_by(by_peak);
        FoldSummary {
            series_count: self.series_count,
            point_count: self.point_count,
            non_finite: self.non_finite,
            peak_spread: PeakSpread::from_peaks(self.peaks),
            untracked_peaks: self.untracked_peaks,
            common: self.common.unwrap_or_default(),
            top: self.top.into_iter().map(|(_, s)| s).collect(),
            census: self.census.map(Census::finish),
        }
    }
}

/// Highest exact peak first; series without finite values last; ties by provider order.
fn by_peak(a: &(usize, SeriesDigest<'_>), b: &(usize, SeriesDigest<'_>)) -> Ordering {
    match (a.1.fold.peak(), b.1.fold.peak()) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
    .then(a.0.cmp(&b.0))
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn digest(instance: &'static str, values: &[f64]) -> SeriesDigest<'static> {
        let points: Vec<(f64, f64)> = values
            .iter()
            .enumerate()
            .map(|(k, v)| (15.0 * k as f64, *v))
            .collect();
        SeriesDigest::of(
            vec![
                (Cow::Borrowed("job"), Cow::Borrowed("tidb")),
                (Cow::Borrowed("instance"), Cow::Borrowed(instance)),
            ],
            &points,
        )
    }

    #[test]
    fn counts_and_peaks_cover_series_beyond_the_top_k() {
        let mut fold = ResultFold::new(1);
        fold.push(digest("a", &[1.0, 9.0]));
        fold.push(digest("b", &[f64::NAN, 2.0, f64::INFINITY]));
        fold.push(digest("c", &[f64::NAN]));
        let s = fold.finish();
        assert_eq!(s.series_count, 3);
        assert_eq!(s.point_count, 6);
        assert_eq!(
            s.non_finite,
            NonFiniteCounts {
                points: 3,
                series: 2
            }
        );
        let spread = s.peak_spread.unwrap();
        assert_eq!(
            (spread.series, spread.min.get(), spread.max.get()),
            (2, 2.0, 9.0)
        );
        assert_eq!(
            s.common,
            vec![(Cow::Borrowed("job"), Cow::Borrowed("tidb"))]
        );
        assert_eq!(s.top.len(), 1);
        assert_eq!(s.top[0].labels[1].1, "a");
    }

    #[test]
    fn the_peak_spread_is_bounded_and_says_what_it_left_out() {
        let mut fold = ResultFold::with_peak_limit(2, 3);
        for (i, v) in [5.0, 1.0, 7.0, 9.0, f64::NAN, 2.0].iter().enumerate() {
            fold.push(digest(["a", "b", "c", "d", "e", "f"][i], &[*v]));
        }
        let s = fold.finish();
        assert_eq!(s.series_count, 6);
        let spread = s.peak_spread.unwrap();
        assert_eq!((spread.series, spread.max.get()), (3, 7.0));
        assert_eq!(
            s.untracked_peaks, 2,
            "9.0 and 2.0 are counted, not in the spread"
        );
        // The top k still covers every series.
        assert_eq!(s.top[0].fold.peak(), Some(9.0));
    }

    #[test]
    fn the_top_k_survives_many_cuts() {
        let mut fold = ResultFold::new(3);
        let names: Vec<&'static str> = (0..50)
            .map(|i| &*Box::leak(format!("i{i}").into_boxed_str()))
            .collect();
        for (i, name) in names.iter().enumerate() {
            fold.push(digest(name, &[f64::from((i as u32 * 37) % 50)]));
        }
        let top: Vec<f64> = fold
            .finish()
            .top
            .iter()
            .map(|s| s.fold.peak().unwrap())
            .collect();
        assert_eq!(top, vec![49.0, 48.0, 47.0]);
    }
}
