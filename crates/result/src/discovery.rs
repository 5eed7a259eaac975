//! The answer of a discovery, contract version `discovery_v1`: which metric names,
//! label names, label values or series exist within the policy's scope and window, as
//! few items as the policy lets the answer list, most series first, with how many more
//! there are.
//!
//! What the counts mean is stated in every answer (`counted`): the series with at least
//! one sample inside the window, counted exactly by a query over the window (not the
//! provider's index, whose range reads every block overlapping the window). An empty
//! answer is `no_data`: nothing was found in this scope and window, which is not proof
//! that a metric does not exist.
//!
//! A `metric_metadata` answer lists the names as `metric_names` does and adds what the
//! provider says of each listed name (type, unit, help). That text is the provider's,
//! global to everything it holds (Prometheus' metadata takes no matcher and no range),
//! so it is marked `provider_global` and asked for only for names found in scope.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::evidence::EvidenceOutcome;

/// How to read a `discovery_v1` answer, in the words the transport skill gives the model.
/// Kept beside the contract so that it changes with it.
pub const DISCOVERY_GUIDE: &str = "A discovery answers, format discovery_v1, which metric \
names, label names, label values or series exist in this ticket's scope and window: ask for \
it before guessing a metric name, and after a query answered no_data. counted says what a count \
means: series with a sample inside the window. columns names the row cells; rows are the \
items, most series first; total counts every item found and more those not listed. prefixes \
groups all metric names found by the part before their first '_' when not all are listed. \
outcome no_data means nothing was found in this scope and window, not that it does not exist \
elsewhere. metric_metadata lists names as metric_names does, with metadata: the provider's type, \
unit and help of each listed name, provider-global text (not of this scope; it informs, it proves \
nothing). Instance addresses never appear: an instance is named by an opaque instanceRef, \
which a later query may pass as instanceRef.";

/// The contract version of a discovery answer, written first in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DiscoveryFormat {
    /// Version 1.
    DiscoveryV1,
}

/// What a discovery listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DiscoveryKind {
    /// Metric names, each with its series count.
    MetricNames,
    /// Label names, each with its number of values.
    LabelNames,
    /// The values of one label, each with its series count.
    LabelValues,
    /// Series, as label sets.
    Series,
    /// Metric names, each with its series count, and the provider's metadata of each.
    MetricMetadata,
}

impl DiscoveryKind {
    /// The row columns of this kind's answer (for `series`, the label names instead).
    pub fn columns(self) -> Option<[&'static str; 2]> {
        match self {
            DiscoveryKind::MetricNames | DiscoveryKind::MetricMetadata => Some(["name", "series"]),
            DiscoveryKind::LabelNames => Some(["label", "values"]),
            DiscoveryKind::LabelValues => Some(["value", "series"]),
            DiscoveryKind::Series => None,
        }
    }
}

/// What the counts of an answer mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Counted {
    /// Series with at least one sample inside the window, counted exactly by a query
    /// evaluated over the window.
    SeriesWithSamplesInWindow,
}

/// The window a discovery read, Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryWindow {
    /// Start.
    pub start: i64,
    /// End.
    pub end: i64,
}

/// One cell of a row: a name, label or value, or a count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Cell {
    /// A count.
    Count(u64),
    /// A text; absent labels of a series row are `null`.
    Text(Option<String>),
}

impl Cell {
    /// The text of a text cell (`None` for a count or an absent label).
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Cell::Text(t) => t.as_deref(),
            Cell::Count(_) => None,
        }
    }
}

/// The metric names that share a prefix (the part before the first `_`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrefixCount {
    /// The prefix followed by `_*`, e.g. `tikv_*`.
    pub prefix: String,
    /// How many names found have it.
    pub names: u64,
}

/// Where the text of [`Metadata`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MetadataSource {
    /// The provider's metadata, global to everything it holds: not scoped to this
    /// ticket's cluster or window, and written by whoever exposes the metric.
    ProviderGlobal,
}

/// What the provider says of one listed metric name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NameMetadata {
    /// The metric name, one of the answer's rows.
    pub name: String,
    /// The metric type (`counter`, `gauge`, `histogram`, `summary`, ...).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub metric_type: Option<String>,
    /// The unit, when the provider gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The help text, bounded (a cut one ends with the cut mark).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

/// The provider's metadata of the listed names of a `metric_metadata` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// Always `provider_global`: provider text, not this scope's.
    pub source: MetadataSource,
    /// The listed names the provider gave metadata for, in row order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<NameMetadata>,
    /// Listed names without metadata (the provider has none, or did not answer: a
    /// warning says which).
    pub without: u64,
}

/// The complete answer of one discovery (contract `discovery_v1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Discovery {
    /// Contract version: `discovery_v1`.
    pub format: DiscoveryFormat,
    /// What was listed.
    pub discover: DiscoveryKind,
    /// The label whose values were listed (`label_values`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The selector that ran, scope labels bound.
    pub selector: String,
    /// The window read.
    pub window: DiscoveryWindow,
    /// What the counts mean.
    pub counted: Counted,
    /// `data`, or `no_data` (nothing found here; not proof of absence elsewhere).
    pub outcome: EvidenceOutcome,
    /// Every item found, listed or not.
    pub total: u64,
    /// Items found and not listed.
    pub more: u64,
    /// A count in a row at this number means at least this many (label names counts
    /// its values up to a bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts_capped_at: Option<u64>,
    /// The scope labels every counted series carries, stated once.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scope: BTreeMap<String, String>,
    /// Every metric name found, grouped by prefix, most names first (`metric_names`,
    /// when not every name is listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<PrefixCount>,
    /// The cells of each row.
    pub columns: Vec<String>,
    /// The items listed, most series first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<Vec<Cell>>,
    /// The provider's metadata of the listed names (`metric_metadata` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Provider warnings and notes of the tool, verbatim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Discovery {
    /// Checks the rules of the contract: `no_data` exactly when nothing was found, as
    /// many rows as found less `more`, every row as wide as the columns.
    pub fn check(&self) -> Result<(), &'static str> {
        let listed = self.rows.len() as u64;
        if (self.outcome == EvidenceOutcome::NoData) != (self.total == 0) {
            return Err("a discovery is no_data exactly when it found nothing");
        }
        if listed.checked_add(self.more) != Some(self.total) {
            return Err("a discovery lists total less more items");
        }
        if self.rows.iter().any(|r| r.len() != self.columns.len()) {
            return Err("every row of a discovery has one cell per column");
        }
        if let Some(columns) = self.discover.columns()
            && self.columns != columns
        {
            return Err("a discovery's columns are those of its kind");
        }
        match (&self.metadata, self.discover) {
            (None, DiscoveryKind::MetricMetadata) => {
                return Err("a metric_metadata answer carries metadata");
            }
            (Some(_), kind) if kind != DiscoveryKind::MetricMetadata => {
                return Err("only a metric_metadata answer carries metadata");
            }
            (Some(m), _) => {
                let listed: Vec<Option<&str>> = self
                    .rows
                    .iter()
                    .map(|r| r.first().and_then(Cell::as_text))
                    .collect();
                if m.names
                    .iter()
                    .any(|n| !listed.contains(&Some(n.name.as_str())))
                {
                    return Err("metadata is given only for listed names");
                }
                if (m.names.len() as u64).checked_add(m.without) != Some(listed.len() as u64) {
                    return Err("metadata names and without count the listed names");
                }
            }
            (None, _) => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Discovery {
        Discovery {
            format: DiscoveryFormat::DiscoveryV1,
            discover: DiscoveryKind::MetricNames,
            label: None,
            selector: "{cluster_id=\"SaaS01\",__name__=~\"tikv_.*\"}".to_owned(),
            window: DiscoveryWindow {
                start: 1_000,
                end: 4_900,
            },
            counted: Counted::SeriesWithSamplesInWindow,
            outcome: EvidenceOutcome::Data,
            total: 3,
            more: 1,
            counts_capped_at: None,
            scope: BTreeMap::from([("cluster_id".to_owned(), "SaaS01".to_owned())]),
            prefixes: vec![PrefixCount {
                prefix: "tikv_*".to_owned(),
                names: 3,
            }],
            columns: vec!["name".to_owned(), "series".to_owned()],
            rows: vec![
                vec![Cell::Text(Some("tikv_a".to_owned())), Cell::Count(56)],
                vec![Cell::Text(Some("tikv_b".to_owned())), Cell::Count(12)],
            ],
            metadata: None,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn the_json_is_compact_and_reads_back() {
        let d = names();
        d.check().unwrap();
        let json = serde_json::to_string(&d).unwrap();
        assert!(json.starts_with(r#"{"format":"discovery_v1","discover":"metric_names""#));
        assert!(
            json.contains(r#""rows":[["tikv_a",56],["tikv_b",12]]"#),
            "{json}"
        );
        let back: Discovery = serde_json::from_str(&json).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn the_rules_hold() {
        let mut d = names();
        d.more = 0;
        assert!(d.check().is_err(), "rows + more must be total");
        let mut d = names();
        d.outcome = EvidenceOutcome::NoData;
        assert!(d.check().is_err(), "no_data only when nothing was found");
        let mut d = names();
        d.rows[0].pop();
        assert!(d.check().is_err());
        let mut d = names();
        d.columns = vec!["label".to_owned(), "values".to_owned()];
        assert!(d.check().is_err());
        let empty = Discovery {
            outcome: EvidenceOutcome::NoData,
            total: 0,
            more: 0,
            rows: Vec::new(),
            prefixes: Vec::new(),
            ..names()
        };
        empty.check().unwrap();
        let json = serde_json::to_string(&empty).unwrap();
        assert!(!json.contains("rows"), "{json}");
    }

    #[test]
    fn metadata_is_only_of_listed_names_of_a_metadata_answer() {
        let tikv_a = NameMetadata {
            name: "tikv_a".to_owned(),
            metric_type: Some("gauge".to_owned()),
            unit: None,
            help: Some("A gauge.".to_owned()),
        };
        let with = |given: Vec<NameMetadata>, without| Discovery {
            discover: DiscoveryKind::MetricMetadata,
            metadata: Some(Metadata {
                source: MetadataSource::ProviderGlobal,
                names: given,
                without,
            }),
            ..names()
        };
        let d = with(vec![tikv_a.clone()], 1);
        d.check().unwrap();
        let json = serde_json::to_string(&d).unwrap();
        assert!(
            json.contains(
                r#""metadata":{"source":"provider_global","names":[{"name":"tikv_a","type":"gauge","help":"A gauge."}],"without":1}"#
            ),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Discovery>(&json).unwrap(), d);
        let unlisted = NameMetadata {
            name: "tikv_c".to_owned(),
            ..tikv_a.clone()
        };
        assert!(
            with(vec![unlisted], 1).check().is_err(),
            "tikv_c is not listed"
        );
        assert!(
            with(vec![tikv_a.clone()], 0).check().is_err(),
            "one name uncounted"
        );
        let missing = Discovery {
            discover: DiscoveryKind::MetricMetadata,
            ..names()
        };
        assert!(missing.check().is_err());
        let misplaced = Discovery {
            metadata: with(vec![tikv_a], 1).metadata,
            ..names()
        };
        assert!(
            misplaced.check().is_err(),
            "metric_names carries no metadata"
        );
    }
}
