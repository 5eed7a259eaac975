//! Per-series and result-level statistics of compact evidence: the fold over one
//! series' points ([`SeriesFold`]), the statistics of a kept series ([`SeriesStats`],
//! [`SeriesSummary`]) and the result-level facts over every returned series, kept or
//! not ([`NonFiniteCounts`], [`PeakSpread`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::figure::Figure;

/// Statistics over the finite sample values of one series, each rounded once from the
/// exact value (see [`Figure`]). There is no separate `max`: it is the `peak`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesStats {
    /// Smallest value.
    pub min: Figure,
    /// Arithmetic mean.
    pub mean: Figure,
    /// Last value in time order.
    pub last: Figure,
    /// Peak value: the largest value (the earliest one on ties).
    pub peak: Figure,
    /// Time of the peak, whole Unix seconds (rounded to the nearest second).
    pub peak_time: i64,
}

impl SeriesStats {
    /// Statistics over `(time, value)` points in time order. Non-finite values (`NaN`,
    /// `+Inf`, `-Inf`) are left out; `None` when no finite value remains.
    pub fn from_points(points: &[(f64, f64)]) -> Option<SeriesStats> {
        let mut fold = SeriesFold::default();
        for &(t, v) in points {
            fold.push(t, v);
        }
        fold.stats()
    }
}

/// The running fold over one series' points, in time order: point counts and the exact
/// statistics, rounded only when [`SeriesFold::stats`] is read.
///
/// A streaming parser can feed it one point at a time; it holds no points.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SeriesFold {
    points: u64,
    non_finite: u64,
    finite: u64,
    min: f64,
    peak: f64,
    peak_time: f64,
    last: f64,
    sum: f64,
}

impl SeriesFold {
    /// Adds one `(time, value)` point.
    pub fn push(&mut self, time: f64, value: f64) {
        self.points += 1;
        if !value.is_finite() {
            self.non_finite += 1;
            return;
        }
        if self.finite == 0 {
            self.min = value;
            self.peak = value;
            self.peak_time = time;
        } else {
            if value < self.min {
                self.min = value;
            }
            if value > self.peak {
                self.peak = value;
                self.peak_time = time;
            }
        }
        self.last = value;
        self.sum += value;
        self.finite += 1;
    }

    /// Number of points pushed, finite or not.
    pub fn points(&self) -> u64 {
        self.points
    }

    /// Number of `NaN`/`Inf` points pushed.
    pub fn non_finite(&self) -> u64 {
        self.non_finite
    }

    /// The exact peak (largest finite value), if any finite value was pushed.
    pub fn peak(&self) -> Option<f64> {
        (self.finite > 0).then_some(self.peak)
    }

    /// The rounded statistics; `None` when no finite value was pushed.
    pub fn stats(&self) -> Option<SeriesStats> {
        if self.finite == 0 {
            return None;
        }
        #[expect(
            clippy::cast_precision_loss,
            reason = "point counts stay far below 2^52"
        )]
        let mean = self.sum / self.finite as f64;
        // A sum of finite values can overflow; the peak bounds the mean then.
        let mean = if mean.is_finite() { mean } else { self.peak };
        Some(SeriesStats {
            min: figure(self.min),
            mean: figure(mean),
            last: figure(self.last),
            peak: figure(self.peak),
            peak_time: whole_seconds(self.peak_time),
        })
    }
}

/// A figure of a value known to be finite.
fn figure(value: f64) -> Figure {
    Figure::new(value).unwrap_or(Figure::ZERO)
}

/// Whole seconds of a Unix time (nearest second; saturating, `NaN` is 0).
fn whole_seconds(time: f64) -> i64 {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "float to int casts saturate; Unix times stay far inside i64"
    )]
    let whole = time.round() as i64;
    whole
}

/// One kept series: its labels (the result's common labels included), point counts and
/// statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesSummary {
    /// Sanitized labels (addresses replaced by opaque references where a package says
    /// so), including the labels common to every returned series.
    pub labels: BTreeMap<String, String>,
    /// Number of points, finite or not.
    pub points: u64,
    /// Number of `NaN`/`Inf` points left out of the statistics.
    pub non_finite_points: u64,
    /// Statistics over finite values; absent when the series has none.
    pub stats: Option<SeriesStats>,
}

/// Non-finite points over **every** returned series, kept or not: a `NaN` in a series
/// ranked out of the top k is still counted here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NonFiniteCounts {
    /// `NaN`, `+Inf` and `-Inf` points over all series.
    pub points: u64,
    /// Series with at least one such point.
    pub series: u64,
}

/// The spread of the per-series peaks over **every** returned series that has a finite
/// value, kept or not, so "one outlier or every instance" is answerable from the result
/// alone. Percentiles are nearest-rank (each is the peak of an actual series: the
/// `ceil(p/100 * n)`-th smallest), rounded like every figure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PeakSpread {
    /// How many series have a finite peak (the population of the spread).
    pub series: u64,
    /// Lowest per-series peak.
    pub min: Figure,
    /// Median per-series peak (nearest rank, the lower one for an even count).
    pub p50: Figure,
    /// 90th percentile of the per-series peaks (nearest rank).
    pub p90: Figure,
    /// Highest per-series peak: the top series' peak.
    pub max: Figure,
}

impl PeakSpread {
    /// The spread of exact per-series peaks, in any order (non-finite entries are
    /// ignored); `None` when there is none.
    pub fn from_peaks(peaks: impl IntoIterator<Item = f64>) -> Option<PeakSpread> {
        let mut finite: Vec<f64> = peaks.into_iter().filter(|p| p.is_finite()).collect();
        finite.sort_by(f64::total_cmp);
        let n = finite.len();
        let last = *finite.last()?;
        let rank = |p: usize| finite[(p * n).div_ceil(100).max(1) - 1];
        Some(PeakSpread {
            series: n as u64,
            min: figure(finite[0]),
            p50: figure(rank(50)),
            p90: figure(rank(90)),
            max: figure(last),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_skip_non_finite_and_find_peak() {
        let pts = [
            (10.0, 1.0),
            (20.0, f64::NAN),
            (30.0, 5.0),
            (40.0, f64::INFINITY),
            (50.0, 5.0),
            (60.0, 2.0),
        ];
        let s = SeriesStats::from_points(&pts).unwrap();
        assert_eq!(s.min.get(), 1.0);
        assert_eq!(s.peak.get(), 5.0);
        assert_eq!(s.peak_time, 30);
        assert_eq!(s.last.get(), 2.0);
        assert_eq!(s.mean.get(), 3.25);
        assert!(SeriesStats::from_points(&[(1.0, f64::NAN)]).is_none());
        assert!(SeriesStats::from_points(&[]).is_none());
    }

    #[test]
    fn mean_is_rounded_once_from_the_exact_value() {
        let s = SeriesStats::from_points(&[(0.0, 1.0), (15.0, 2.0), (30.0, 2.0)]).unwrap();
        assert_eq!(s.mean.get(), 1.667);
    }

    #[test]
    fn spread_uses_nearest_rank() {
        let mut peaks: Vec<f64> = (1..=10).map(f64::from).collect();
        peaks.push(f64::NAN);
        let s = PeakSpread::from_peaks(peaks).unwrap();
        assert_eq!(s.series, 10);
        assert_eq!(
            (s.min.get(), s.p50.get(), s.p90.get(), s.max.get()),
            (1.0, 5.0, 9.0, 10.0)
        );
        assert!(PeakSpread::from_peaks([f64::NAN]).is_none());
        let one = PeakSpread::from_peaks([7.5]).unwrap();
        assert_eq!(
            (one.min, one.p50, one.p90, one.max),
            (one.max, one.max, one.max, one.max)
        );
    }
}
