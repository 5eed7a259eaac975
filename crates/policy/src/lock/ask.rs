//! What a discovery asks: its form, and what the query answering it carries of the
//! locked discovery (its scoped selector, window, bound and scope), so that a connector
//! answers in the discovery's own shape. Pure data: the locking of a discovery is in
//! `discovery.rs`, the query that carries the ask in `types.rs`.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// What a discovery request asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "discover")]
pub enum DiscoveryForm {
    /// The metric names of the selector's series (`/api/v1/label/__name__/values`).
    MetricNames,
    /// The label names of the selector's series (`/api/v1/labels`).
    LabelNames,
    /// The values of one label among the selector's series
    /// (`/api/v1/label/<label>/values`).
    LabelValues {
        /// The label.
        label: String,
    },
    /// The selector's series, as label sets (`/api/v1/series`).
    Series,
    /// The metric names as [`DiscoveryForm::MetricNames`], and the provider's metadata
    /// (`/api/v1/metadata`, global to the provider) of each name listed.
    MetricMetadata,
}

impl DiscoveryForm {
    /// The snake_case name the model writes in `discover`.
    pub fn name(&self) -> &'static str {
        match self {
            DiscoveryForm::MetricNames => "metric_names",
            DiscoveryForm::LabelNames => "label_names",
            DiscoveryForm::LabelValues { .. } => "label_values",
            DiscoveryForm::Series => "series",
            DiscoveryForm::MetricMetadata => "metric_metadata",
        }
    }

    /// True for the forms that list metric names (and take a name pattern).
    pub fn lists_names(&self) -> bool {
        matches!(
            self,
            DiscoveryForm::MetricNames | DiscoveryForm::MetricMetadata
        )
    }
}

/// What a locked query that answers a discovery asked: the connectors run its query and
/// answer in the discovery's own shape (`evidence_result::Discovery`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscoveryAsk {
    /// What is asked for.
    #[serde(flatten)]
    pub form: DiscoveryForm,
    /// The scoped selector, as in [`super::LockedDiscovery::selector`].
    pub selector: String,
    /// The window's start.
    pub start: Timestamp,
    /// The window's end.
    pub end: Timestamp,
    /// Most items the answer lists.
    pub max_items: u32,
    /// The scope labels and their policy values: every series counted must carry them
    /// (a provider that answers for another scope is caught by this).
    pub scope: Vec<(String, String)>,
}
