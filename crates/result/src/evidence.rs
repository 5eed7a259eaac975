//! Compact evidence, contract version `compact_v2`: what one successful query returned,
//! in as few tokens as keep every fact.
//!
//! Every figure has four significant digits ([`Figure`]), times are whole seconds, the
//! labels every returned series shares are stated once (`common_labels`), and the kept
//! series are a table (see the series table) with no repeated key, no `max` beside `peak` and
//! no per-series point count when all are equal. Result-level facts cover every
//! returned series, kept or not: non-finite point counts ([`NonFiniteCounts`]) and the
//! spread of per-series peaks ([`PeakSpread`]); the statistics of series beyond the top
//! k stay out. The superseded version 1 (no `format` field, full-precision floats, one
//! object per series) is not read.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize, Serializer};

use crate::table::SeriesTable;
use crate::{NonFiniteCounts, PeakSpread, SeriesSummary};

/// The contract version of compact evidence, written first in every evidence object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceFormat {
    /// Version 2: four significant digits, common labels once, a series table,
    /// result-level non-finite counts and peak spread.
    CompactV2,
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

/// The complete compact evidence of one successful query (contract `compact_v2`).
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
    /// Contract version: `compact_v2`.
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
    /// or not).
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
            Some(table) => table.into_series(&wire.common_labels)?,
            None => Vec::new(),
        };
        Ok(Evidence {
            outcome: wire.outcome,
            unit: wire.unit,
            expr: wire.expr,
            window: wire.window,
            series_count: wire.series_count,
            point_count: wire.point_count,
            non_finite: wire.non_finite,
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
            format: EvidenceFormat::CompactV2,
            outcome: self.outcome,
            unit: self.unit.clone(),
            expr: self.expr.clone(),
            window: self.window,
            series_count: self.series_count,
            point_count: self.point_count,
            non_finite: self.non_finite,
            peak_spread: self.peak_spread,
            top_k: self.top_k,
            truncated: self.truncated,
            common_labels: self.common_labels.clone(),
            series: SeriesTable::of(&self.series, &self.common_labels),
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
            r#"{"format":"compact_v2","outcome":"no_data","unit":"cores","series_count":0,"point_count":0,"top_k":10,"truncated":false}"#
        );
    }

    #[test]
    fn version_one_is_not_read() {
        let v1 = r#"{"outcome":"no_data","unit":"cores","series_count":0,"point_count":0,"top_k":10,"truncated":false,"series":[]}"#;
        assert!(serde_json::from_str::<Evidence>(v1).is_err());
    }
}
