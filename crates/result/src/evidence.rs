use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whether a query returned any series. `no_data` is never a zero value: the objective
/// stays unverified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceOutcome {
    /// At least one series came back.
    Data,
    /// No series came back. Not a zero; unverified.
    NoData,
}

/// The time range a piece of evidence covers, in Unix seconds, with the step used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceWindow {
    /// Start, Unix seconds.
    pub start: i64,
    /// End, Unix seconds.
    pub end: i64,
    /// Step between points, seconds.
    pub step_seconds: u64,
}

/// Statistics over the finite sample values of one series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SeriesStats {
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Last value in time order.
    pub last: f64,
    /// Peak value (the largest value; the earliest one on ties).
    pub peak: f64,
    /// Time of the peak, Unix seconds (fractions allowed, as Prometheus writes them).
    pub peak_time: f64,
}

impl SeriesStats {
    /// Statistics over `(time, value)` points in time order. Non-finite values (`NaN`,
    /// `+Inf`, `-Inf`) are left out; `None` when no finite value remains.
    pub fn from_points(points: &[(f64, f64)]) -> Option<SeriesStats> {
        let mut it = points.iter().filter(|(_, v)| v.is_finite());
        let &(t0, v0) = it.next()?;
        let mut stats = SeriesStats {
            min: v0,
            max: v0,
            mean: 0.0,
            last: v0,
            peak: v0,
            peak_time: t0,
        };
        let mut sum = v0;
        let mut n = 1u64;
        for &(t, v) in it {
            if v < stats.min {
                stats.min = v;
            }
            if v > stats.max {
                stats.max = v;
                stats.peak = v;
                stats.peak_time = t;
            }
            stats.last = v;
            sum += v;
            n += 1;
        }
        #[expect(
            clippy::cast_precision_loss,
            reason = "point counts stay far below 2^52"
        )]
        let mean = sum / n as f64;
        stats.mean = if mean.is_finite() { mean } else { stats.max };
        Some(stats)
    }
}

/// One kept series: its sanitized labels and statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SeriesSummary {
    /// Sanitized labels (addresses replaced by opaque references where a package says so).
    pub labels: BTreeMap<String, String>,
    /// Number of points, finite or not.
    pub points: u64,
    /// Number of `NaN`/`Inf` points left out of the statistics.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub non_finite_points: u64,
    /// Statistics over finite values; absent when the series has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<SeriesStats>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The complete compact evidence of one successful query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// `data`, or `no_data` (never a zero).
    pub outcome: EvidenceOutcome,
    /// Unit label supplied with the query, e.g. `cores`, `bytes`, `%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The locked expression that actually ran (with scope matchers injected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expr: Option<String>,
    /// Window and step the query ran with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<EvidenceWindow>,
    /// Number of series the provider returned.
    pub series_count: u64,
    /// Number of points over all series.
    pub point_count: u64,
    /// How many series are kept at most (top-k by peak).
    pub top_k: u32,
    /// True when more series came back than were kept.
    pub truncated: bool,
    /// The kept series, highest peak first.
    pub series: Vec<SeriesSummary>,
    /// Provider warnings, verbatim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Evidence {
    /// Evidence for a query that returned no series.
    pub fn no_data(unit: Option<String>, top_k: u32) -> Self {
        Evidence {
            outcome: EvidenceOutcome::NoData,
            unit,
            expr: None,
            window: None,
            series_count: 0,
            point_count: 0,
            top_k,
            truncated: false,
            series: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// True when the query returned no series.
    pub fn is_no_data(&self) -> bool {
        self.outcome == EvidenceOutcome::NoData
    }

    /// The highest peak over the kept series, if any finite value exists.
    pub fn top_peak(&self) -> Option<f64> {
        self.series
            .iter()
            .filter_map(|s| s.stats.map(|st| st.peak))
            .fold(None, |acc: Option<f64>, p| {
                Some(acc.map_or(p, |a| a.max(p)))
            })
    }

    pub(crate) fn check(&self) -> Result<(), &'static str> {
        match self.outcome {
            EvidenceOutcome::NoData if self.series_count != 0 || !self.series.is_empty() => {
                Err("no_data evidence must not carry series")
            }
            EvidenceOutcome::Data if self.series_count == 0 => {
                Err("data evidence must carry at least one series")
            }
            _ if self.series.len() as u64 > self.series_count => {
                Err("more kept series than returned series")
            }
            _ if self.truncated != (self.series_count > self.series.len() as u64) => {
                Err("truncated must say whether series were left out")
            }
            _ => Ok(()),
        }
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
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 5.0);
        assert_eq!(s.peak, 5.0);
        assert_eq!(s.peak_time, 30.0);
        assert_eq!(s.last, 2.0);
        assert!((s.mean - 13.0 / 4.0).abs() < 1e-12);
        assert!(SeriesStats::from_points(&[(1.0, f64::NAN)]).is_none());
        assert!(SeriesStats::from_points(&[]).is_none());
    }

    #[test]
    fn no_data_is_not_zero() {
        let e = Evidence::no_data(Some("cores".into()), 10);
        assert!(e.is_no_data());
        assert_eq!(e.top_peak(), None);
        assert!(e.check().is_ok());
    }
}
