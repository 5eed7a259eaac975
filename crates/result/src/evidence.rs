//! Compact evidence, contract version `compact_v3`: what one successful query returned,
//! in as few tokens as keep every fact.
//!
//! Every figure has four significant digits ([`Figure`](crate::figure::Figure)), times are whole seconds, the
//! labels every returned series shares are stated once (`common_labels`), and the kept
//! series are a table (see the series table) with no repeated key, no `max` beside `peak` and
//! no per-series point count when all are equal. Result-level facts cover every
//! returned series, kept or not: non-finite point counts ([`NonFiniteCounts`]) and the
//! spread of per-series peaks ([`PeakSpread`]); the statistics of series beyond the top
//! k stay out. The superseded version 1 (no `format` field, full-precision floats, one
//! object per series) and version 2 are not read.
//!
//! Version 3 cut what did not help a model read the answer: the peak's time is seconds
//! after the window's start (`peak_after_start_s`, three or four digits instead of ten;
//! the start is stated once in `window`), and `non_finite` is left out when every point
//! is finite (its absence reads as zero, since it is stated whenever one is not).

use std::collections::BTreeMap;

/// How to read a `compact_v3` answer, in the words the transport skill gives the model.
/// Kept beside the contract so that it changes with it.
pub const COMPACT_EVIDENCE_GUIDE: &str = "A successful query answers with compact evidence, \
format compact_v3. outcome is data or no_data (no_data is never a zero). Every figure has four \
significant digits and times are whole seconds. window states the start once, and \
peak_after_start_s is seconds after that start. common_labels holds the labels every returned \
series shares, stated once and left out of the series rows; the kept series are a table, the \
top_k largest by peak, and truncated says that more series were returned than kept. \
series_count and point_count, the non-finite point counts (non_finite, absent when every \
point is finite) and peak_spread (the spread of per-series peaks) cover every returned series, kept or not. \
Instance addresses never appear: an instance is named by an opaque instanceRef.";

use schemars::JsonSchema;
use serde::{Deserialize, Serialize, Serializer};

use crate::table::SeriesTable;
use crate::{series::NonFiniteCounts, series::PeakSpread, series::SeriesSummary};

/// The contract version of compact evidence, written first in every evidence object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceFormat {
    /// Version 3: four significant digits, common labels once, a series table with the
    /// peak's time after the window's start, result-level non-finite counts (stated
    /// only when not zero) and peak spread.
    CompactV3,
}

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

/// The complete compact evidence of one successful query (contract `compact_v3`).
///
/// In Rust every kept series carries its full label set; the JSON states the
/// `common_labels` once and leaves them out of the series rows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "EvidenceWire")]
pub struct Evidence {
    /// `data`, or `no_data` (never a zero).
    pub outcome: EvidenceOutcome,
    /// Unit label supplied with the query, e.g. `cores`, `bytes`, `%`.
    pub unit: Option<String>,
    /// The locked expression that actually ran (with scope matchers injected).
    pub expr: Option<String>,
    /// Window and step the query ran with.
    pub window: Option<EvidenceWindow>,
    /// Number of series the provider returned.
    pub series_count: u64,
    /// Number of points over all series.
    pub point_count: u64,
    /// Non-finite points over every returned series, kept or not; present for `data`.
    pub non_finite: Option<NonFiniteCounts>,
    /// Spread of the per-series peaks over every returned series with a finite value.
    pub peak_spread: Option<PeakSpread>,
    /// How many series are kept at most (top-k by peak).
    pub top_k: u32,
    /// True when more series came back than were kept.
    pub truncated: bool,
    /// Labels with the same (sanitized) value in every returned series, stated once.
    pub common_labels: BTreeMap<String, String>,
    /// The kept series, highest peak first, each with its full labels.
    pub series: Vec<SeriesSummary>,
    /// Provider warnings, verbatim.
    pub warnings: Vec<String>,
}

/// Compact evidence as JSON (the schema and the reading side of [`Evidence`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename = "Evidence")]
struct EvidenceWire {
    /// Contract version: `compact_v3`.
    format: EvidenceFormat,
    /// `data`, or `no_data` (never a zero).
    outcome: EvidenceOutcome,
    /// Unit label supplied with the query, e.g. `cores`, `bytes`, `%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unit: Option<String>,
    /// The locked expression that actually ran (with scope matchers injected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expr: Option<String>,
    /// Window and step the query ran with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window: Option<EvidenceWindow>,
    /// Number of series the provider returned.
    series_count: u64,
    /// Number of points over all series.
    point_count: u64,
    /// `NaN`/`Inf` points and the series holding them, over every returned series (kept
    /// or not); stated only when there are some (absent reads as zero for `data`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    non_finite: Option<NonFiniteCounts>,
    /// Min, median, 90th percentile and max of the per-series peaks over every returned
    /// series with a finite value (kept or not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    peak_spread: Option<PeakSpread>,
    /// How many series are kept at most (top-k by peak).
    top_k: u32,
    /// True when more series came back than were kept.
    truncated: bool,
    /// Labels with the same value in every returned series, stated once.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    common_labels: BTreeMap<String, String>,
    /// The kept series as a table, highest peak first; absent when none is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    series: Option<SeriesTable>,
    /// Provider warnings, verbatim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

impl TryFrom<EvidenceWire> for Evidence {
    type Error = String;

    fn try_from(wire: EvidenceWire) -> Result<Self, String> {
        let series = match wire.series {
            Some(table) => table.into_series(&wire.common_labels, wire.window.map(|w| w.start))?,
            None => Vec::new(),
        };
        let non_finite = match (wire.outcome, wire.non_finite) {
            (_, Some(nf)) if nf.points == 0 => {
                return Err("non_finite is stated only when a point is not finite".to_owned());
            }
            (EvidenceOutcome::Data, None) => Some(NonFiniteCounts {
                points: 0,
                series: 0,
            }),
            (_, nf) => nf,
        };
        Ok(Evidence {
            outcome: wire.outcome,
            unit: wire.unit,
            expr: wire.expr,
            window: wire.window,
            series_count: wire.series_count,
            point_count: wire.point_count,
            non_finite,
            peak_spread: wire.peak_spread,
            top_k: wire.top_k,
            truncated: wire.truncated,
            common_labels: wire.common_labels,
            series,
            warnings: wire.warnings,
        })
    }
}

impl Serialize for Evidence {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        EvidenceWire {
            format: EvidenceFormat::CompactV3,
            outcome: self.outcome,
            unit: self.unit.clone(),
            expr: self.expr.clone(),
            window: self.window,
            series_count: self.series_count,
            point_count: self.point_count,
            non_finite: self.non_finite.filter(|nf| nf.points > 0),
            peak_spread: self.peak_spread,
            top_k: self.top_k,
            truncated: self.truncated,
            common_labels: self.common_labels.clone(),
            series: SeriesTable::of(
                &self.series,
                &self.common_labels,
                self.window.map(|w| w.start),
            ),
            warnings: self.warnings.clone(),
        }
        .serialize(serializer)
    }
}

impl JsonSchema for Evidence {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        EvidenceWire::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        EvidenceWire::json_schema(generator)
    }
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
            non_finite: None,
            peak_spread: None,
            top_k,
            truncated: false,
            common_labels: BTreeMap::new(),
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
            .filter_map(|s| s.stats.map(|st| st.peak.get()))
            .reduce(f64::max)
    }

    pub(crate) fn check(&self) -> Result<(), &'static str> {
        let kept = self.series.len() as u64;
        match self.outcome {
            EvidenceOutcome::NoData
                if self.series_count != 0
                    || kept != 0
                    || self.non_finite.is_some()
                    || self.peak_spread.is_some() =>
            {
                return Err("no_data evidence must not carry series");
            }
            EvidenceOutcome::Data if self.series_count == 0 => {
                return Err("data evidence must carry at least one series");
            }
            EvidenceOutcome::Data if self.non_finite.is_none() => {
                return Err("data evidence must count non-finite points");
            }
            _ => {}
        }
        if kept > self.series_count {
            return Err("more kept series than returned series");
        }
        if self.truncated != (self.series_count > kept) {
            return Err("truncated must say whether series were left out");
        }
        let common = |s: &SeriesSummary| {
            self.common_labels
                .iter()
                .all(|(k, v)| s.labels.get(k) == Some(v))
        };
        if !self.series.iter().all(common) {
            return Err("every kept series must carry the common labels");
        }
        if let Some(nf) = self.non_finite {
            let kept_nf: u64 = self.series.iter().map(|s| s.non_finite_points).sum();
            if nf.points > self.point_count || nf.series > self.series_count || kept_nf > nf.points
            {
                return Err("non-finite counts must cover every series");
            }
        }
        let kept_peak = self.top_peak();
        match (self.peak_spread, kept_peak) {
            (None, Some(_)) => Err("kept peaks need a peak spread"),
            (Some(spread), Some(peak)) if spread.max.get() < peak => {
                Err("the peak spread must reach the kept peaks")
            }
            (Some(spread), _) if spread.series > self.series_count => {
                Err("the peak spread covers at most every series")
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_data_is_not_zero() {
        let e = Evidence::no_data(Some("cores".into()), 10);
        assert!(e.is_no_data());
        assert_eq!(e.top_peak(), None);
        assert!(e.check().is_ok());
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"format":"compact_v3","outcome":"no_data","unit":"cores","series_count":0,"point_count":0,"top_k":10,"truncated":false}"#
        );
    }

    #[test]
    fn version_two_is_not_read() {
        let v2 = r#"{"format":"compact_v2","outcome":"no_data","unit":"cores","series_count":0,"point_count":0,"top_k":10,"truncated":false}"#;
        assert!(serde_json::from_str::<Evidence>(v2).is_err());
    }

    fn one_series(non_finite: u64) -> Evidence {
        let stats =
            crate::series::SeriesStats::from_points(&[(1_000.0, 1.0), (1_540.0, 9.5)]).unwrap();
        Evidence {
            outcome: EvidenceOutcome::Data,
            unit: None,
            expr: None,
            window: Some(EvidenceWindow {
                start: 1_000,
                end: 1_600,
                step_seconds: 60,
            }),
            series_count: 1,
            point_count: 2,
            non_finite: Some(NonFiniteCounts {
                points: non_finite,
                series: non_finite.min(1),
            }),
            peak_spread: crate::series::PeakSpread::from_peaks([9.5]),
            top_k: 10,
            truncated: false,
            common_labels: BTreeMap::new(),
            series: vec![SeriesSummary {
                labels: BTreeMap::from([("instance".to_owned(), "a".to_owned())]),
                points: 2,
                non_finite_points: non_finite,
                stats: Some(stats),
            }],
            warnings: Vec::new(),
        }
    }

    /// The peak's time is written after the window's start and read back as Unix
    /// seconds; a zero `non_finite` block is left out and read back as zero.
    #[test]
    fn peak_after_start_and_no_zero_blocks() {
        let e = one_series(0);
        let json = serde_json::to_string(&e).unwrap();
        assert!(
            json.ends_with(r#""stats":["min","mean","last","peak","peak_after_start_s"],"points":2,"rows":[["a",1,5.25,9.5,9.5,540]]}}"#),
            "{json}"
        );
        assert!(!json.contains("non_finite"), "{json}");
        let back: Evidence = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
        assert_eq!(back.series[0].stats.unwrap().peak_time, 1_540);
        // Stated as zero: refused (one way to write one answer).
        let zero = json.replace(
            r#""point_count":2,"#,
            r#""point_count":2,"non_finite":{"points":0,"series":0},"#,
        );
        assert!(serde_json::from_str::<Evidence>(&zero).is_err());
        // Not zero: stated.
        let e = one_series(1);
        let json = serde_json::to_string(&e).unwrap();
        assert!(
            json.contains(r#""non_finite":{"points":1,"series":1}"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Evidence>(&json).unwrap(), e);
        // Without a window the time stays Unix seconds.
        let mut e = one_series(0);
        e.window = None;
        let json = serde_json::to_string(&e).unwrap();
        assert!(
            json.contains(r#""peak_time"],"#) && json.contains(",1540]"),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Evidence>(&json).unwrap(), e);
    }

    #[test]
    fn version_one_is_not_read() {
        let v1 = r#"{"outcome":"no_data","unit":"cores","series_count":0,"point_count":0,"top_k":10,"truncated":false,"series":[]}"#;
        assert!(serde_json::from_str::<Evidence>(v1).is_err());
    }
}
