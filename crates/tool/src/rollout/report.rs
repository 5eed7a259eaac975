//! The rollout-evidence report: for each provider and target whether its capability is
//! verified, each call's answer (series count and peak) or failure (code and class), the
//! latencies and the package digests used. It is the JSON an operator keeps
//! (`schemas/rollout-evidence.schema.json`) and the reason a passive revision may be
//! installed.

use evidence_result::evidence::EvidenceOutcome;
use evidence_result::figure::Figure;
use evidence_result::{Digest, FailureClass, PackageId, Provider, Status, ToolResult};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The report's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReportFormat {
    /// This version.
    RolloutEvidenceV1,
}

/// A canary run's rollout evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RolloutReport {
    /// `rollout_evidence_v1`.
    pub format: ReportFormat,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// When it ended.
    pub finished_at: String,
    /// The deployment file the run read.
    pub deployment: String,
    /// True when every provider checked is verified.
    pub verified: bool,
    /// One verdict per provider checked.
    pub providers: Vec<ProviderVerdict>,
    /// The deployable packages the calls ran, by digest.
    pub packages: Vec<PackageUsed>,
    /// One entry per provider target.
    pub targets: Vec<TargetReport>,
}

/// Whether one provider is verified: every one of its targets is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderVerdict {
    /// The provider.
    pub provider: Provider,
    /// The package identity that runs it.
    pub package: PackageId,
    /// True when every target of the provider is verified.
    pub verified: bool,
    /// Its targets that are verified.
    pub targets_verified: Vec<String>,
    /// Its targets that are not.
    pub targets_unverified: Vec<String>,
}

/// One deployable package the canary ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackageUsed {
    /// The identity.
    pub identity: PackageId,
    /// The revision.
    pub revision: String,
    /// The digest recomputed from the deployable folder (what envelopes and secrets bind).
    pub digest: Digest,
    /// The provider it runs.
    pub provider: Provider,
}

/// One provider target: its capability and its calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetReport {
    /// The provider.
    pub provider: Provider,
    /// The target: a cluster (Clinic), `vida` or `monica` (Manus), `grafana` (Wetech).
    pub target: String,
    /// The capability checked, in words.
    pub capability: String,
    /// The package that ran the calls.
    pub package: PackageId,
    /// Its digest.
    pub digest: Digest,
    /// The policy id of the target's turn; absent when an envelope signed ahead is
    /// missing or does not verify (its calls show the failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
    /// True when every call met its expectation.
    pub verified: bool,
    /// The calls, in order.
    pub calls: Vec<CallReport>,
}

/// What a call's answer must be for its target to be verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Expectation {
    /// `ok` with data: at least one series.
    Data,
    /// `ok` with `no_data` (no series; never a zero).
    NoData,
    /// An `invalid_argument` failure that allows a correction in the same turn.
    Correction,
    /// `ok` with data whose top instance is the reference passed as `instanceRef`.
    SameInstance,
}

/// One call: what it expected, what came back, how long it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallReport {
    /// What the call asks, in words.
    pub step: String,
    /// The call's `queryId`.
    pub query_id: String,
    /// What its answer must be.
    pub expected: Expectation,
    /// True when the answer met the expectation.
    pub met: bool,
    /// The result's status; absent when the call produced no result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// `data` or `no_data`, for an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<EvidenceOutcome>,
    /// The number of series the provider returned, for an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series_count: Option<u64>,
    /// The highest peak over every returned series, for an answer with data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<Figure>,
    /// The answer's unit label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The failure, for a failed call (or one that produced no result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureReport>,
    /// Why the expectation was not met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Wall-clock time of the call's process, in milliseconds.
    pub latency_ms: f64,
}

/// A failure's code and class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FailureReport {
    /// The result's error code, or the canary's own (`canary_process_failed`,
    /// `canary_timeout`, `canary_envelope_missing`, `canary_not_run`) when there is no
    /// result.
    pub code: String,
    /// The failure class; absent for the canary's own codes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<FailureClass>,
    /// The result's `detail_error`, or what the canary saw.
    pub detail: String,
}

impl CallReport {
    /// The report of a call that produced `result`, checked against `expected`;
    /// `reference` is the `instanceRef` passed for [`Expectation::SameInstance`].
    pub(crate) fn from_result(
        step: &str,
        query_id: &str,
        expected: Expectation,
        result: &ToolResult,
        reference: Option<&str>,
        latency_ms: f64,
    ) -> CallReport {
        let details = result.details();
        // A Clinic batch of one query answers in its one item.
        let (status, evidence, error, detail, correction) = match details.items.first() {
            Some(item) => (
                item.status,
                item.evidence.as_deref(),
                item.error.as_ref(),
                item.detail_error.as_deref(),
                item.correction.as_ref(),
            ),
            None => (
                details.status,
                details.evidence.as_deref(),
                details.error.as_ref(),
                details.detail_error.as_deref(),
                details.correction.as_ref(),
            ),
        };
        let failure = error.map(|e| FailureReport {
            code: e.code.as_str().to_owned(),
            class: Some(e.class),
            detail: detail.unwrap_or_default().to_owned(),
        });
        let top = top_instance(evidence);
        let data = |e: &evidence_result::Evidence| {
            e.outcome == EvidenceOutcome::Data && e.series_count > 0
        };
        let note = match expected {
            Expectation::Data => match evidence {
                Some(e) if status == Status::Ok && data(e) => None,
                Some(_) if status == Status::Ok => Some("no series where data was expected"),
                _ => Some("a failure where data was expected"),
            },
            Expectation::NoData => match evidence {
                Some(e) if status == Status::Ok && e.outcome == EvidenceOutcome::NoData => None,
                Some(_) if status == Status::Ok => Some("series where no data was expected"),
                _ => Some("a failure where no_data was expected"),
            },
            Expectation::Correction => match (error, correction) {
                (Some(e), Some(c)) if e.class == FailureClass::InvalidArgument && c.allowed => None,
                (Some(_), _) => Some("a failure that allows no same-turn correction"),
                (None, _) => Some("an answer where an invalid_argument failure was expected"),
            },
            Expectation::SameInstance => match evidence {
                Some(e) if status == Status::Ok && data(e) => match (top, reference) {
                    (Some(t), Some(r)) if t == r => None,
                    _ => Some("the follow-up names another instance than the reference passed"),
                },
                _ => Some("a failure where the follow-up's data was expected"),
            },
        };
        CallReport {
            step: step.to_owned(),
            query_id: query_id.to_owned(),
            expected,
            met: note.is_none(),
            status: Some(status),
            outcome: evidence.map(|e| e.outcome),
            series_count: evidence.map(|e| e.series_count),
            peak: evidence.and_then(|e| e.peak_spread.as_ref()).map(|p| p.max),
            unit: evidence.and_then(|e| e.unit.clone()),
            failure,
            note: note.map(str::to_owned),
            latency_ms,
        }
    }

    /// The report of a call that produced no result.
    pub(crate) fn without_result(
        step: &str,
        query_id: &str,
        expected: Expectation,
        code: &str,
        detail: String,
        latency_ms: f64,
    ) -> CallReport {
        CallReport {
            step: step.to_owned(),
            query_id: query_id.to_owned(),
            expected,
            met: false,
            status: None,
            outcome: None,
            series_count: None,
            peak: None,
            unit: None,
            failure: Some(FailureReport {
                code: code.to_owned(),
                class: None,
                detail,
            }),
            note: Some("the call produced no result".to_owned()),
            latency_ms,
        }
    }
}

/// The instance label of an answer's top series, as the model sees it (a Manus
/// reference): what a follow-up passes back as `instanceRef`.
pub(crate) fn top_instance(evidence: Option<&evidence_result::Evidence>) -> Option<&String> {
    evidence
        .and_then(|e| e.series.first())
        .and_then(|s| s.labels.get("instance"))
}

impl RolloutReport {
    /// The JSON Schema of the report.
    pub fn json_schema() -> schemars::Schema {
        schemars::schema_for!(RolloutReport)
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }
}
