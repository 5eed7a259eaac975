//! The structured `details` of a result: status, origin, failure and per-item outcome of
//! a batch, with the rules a well-formed result keeps.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    Correction, Digest, Discovery, ErrorCode, Evidence, FailureClass, Operation, PackageId,
    Provider, QueryId, RequestDigest,
};

/// The status of a result. A single operation is `ok` or `error`; a batch is `ok`,
/// `partial` or `error` with per-item statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Everything succeeded.
    Ok,
    /// A batch where some items succeeded and some failed.
    Partial,
    /// Failed. A result with this status is a failed tool item, whatever the runtime
    /// operation returned.
    Error,
}

/// Where the trusted policy of a call came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PolicySource {
    /// A signed per-request envelope delivered by the runtime.
    TrustedEnvelope,
    /// A static per-installation canary policy the caller opted into explicitly.
    StaticCanary,
}

/// The machine-readable part of a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorInfo {
    /// Error code naming its origin, e.g. `clinic_http_422`.
    pub code: ErrorCode,
    /// Failure class; decides what the caller may do next.
    pub class: FailureClass,
    /// The provider's HTTP status, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// Prometheus `errorType` (`bad_data`, `execution`, `timeout`, ...), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus_error_type: Option<String>,
    /// SHA-256 of the provider body with bound credentials redacted (never of text the
    /// model may not see), when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_digest: Option<Digest>,
}

/// A complete failure: machine-readable error, full redacted provider text, and what
/// the caller may do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Code, class and provider metadata.
    pub error: ErrorInfo,
    /// The complete provider or validation text, credentials redacted.
    pub detail_error: String,
    /// What the caller may do next.
    pub correction: Correction,
}

impl Failure {
    /// A failure with the standard correction for its class and the default fields to keep.
    pub fn new(code: ErrorCode, class: FailureClass, detail_error: impl Into<String>) -> Self {
        Failure {
            error: ErrorInfo {
                code,
                class,
                http_status: None,
                prometheus_error_type: None,
                body_digest: None,
            },
            detail_error: detail_error.into(),
            correction: Correction::for_class(class, None, Correction::default_keep()),
        }
    }

    /// Sets the provider's HTTP status.
    pub fn with_http_status(mut self, status: u16) -> Self {
        self.error.http_status = Some(status);
        self
    }

    /// Sets the Prometheus `errorType`.
    pub fn with_prometheus_error_type(mut self, error_type: impl Into<String>) -> Self {
        self.error.prometheus_error_type = Some(error_type.into());
        self
    }

    /// Sets the digest of the provider body, taken over its text with the bound
    /// credentials redacted.
    pub fn with_body_digest(mut self, digest: Digest) -> Self {
        self.error.body_digest = Some(digest);
        self
    }

    /// Replaces the correction.
    pub fn with_correction(mut self, correction: Correction) -> Self {
        self.correction = correction;
        self
    }
}

/// Identity of the package, provider and operation a result belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The package identity.
    pub package: PackageId,
    /// The provider it talks to.
    pub provider: Provider,
    /// The operation.
    pub operation: Operation,
    /// Where the trusted policy came from, when known.
    pub policy_source: Option<PolicySource>,
}

/// One item of a batch result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// `ok` or `error`.
    pub status: Status,
    /// The objective this item answers.
    pub query_id: QueryId,
    /// Digest of the item's locked request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_digest: Option<RequestDigest>,
    /// Compact evidence on success.
    // Shared: evidence never changes once a result holds it, and whoever needs it again
    // (a handoff, a view) clones the handle instead of the series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Arc<Evidence>>,
    /// The answer of a discovery, on success (instead of evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<Arc<Discovery>>,
    /// Error on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// Full redacted provider text on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail_error: Option<String>,
    /// What may be done next, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correction: Option<Correction>,
}

impl Item {
    /// A successful item.
    pub fn success(
        query_id: QueryId,
        request_digest: Option<RequestDigest>,
        evidence: Evidence,
    ) -> Self {
        Item {
            status: Status::Ok,
            query_id,
            request_digest,
            evidence: Some(Arc::new(evidence)),
            discovery: None,
            error: None,
            detail_error: None,
            correction: None,
        }
    }

    /// A successful discovery item.
    pub fn discovered(
        query_id: QueryId,
        request_digest: Option<RequestDigest>,
        discovery: Discovery,
    ) -> Self {
        Item {
            status: Status::Ok,
            query_id,
            request_digest,
            evidence: None,
            discovery: Some(Arc::new(discovery)),
            error: None,
            detail_error: None,
            correction: None,
        }
    }

    /// A failed item.
    pub fn failure(
        query_id: QueryId,
        request_digest: Option<RequestDigest>,
        failure: Failure,
    ) -> Self {
        Item {
            status: Status::Error,
            query_id,
            request_digest,
            evidence: None,
            discovery: None,
            error: Some(failure.error),
            detail_error: Some(failure.detail_error),
            correction: Some(failure.correction),
        }
    }

    /// True when the item failed.
    pub fn is_failed(&self) -> bool {
        self.status == Status::Error
    }
}

/// The structured, provider-neutral details of a result. The model-visible `text` of a
/// [`crate::ToolResult`] is exactly the JSON of this value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Details {
    /// `ok` | `error` for one operation; `ok` | `partial` | `error` for a batch.
    pub status: Status,
    /// The package identity.
    pub package: PackageId,
    /// The provider the package talks to.
    pub provider: Provider,
    /// The operation.
    pub operation: Operation,
    /// Where the trusted policy came from; `static_canary` marks canary results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_source: Option<PolicySource>,
    /// The objective, for one operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_id: Option<QueryId>,
    /// Digest of the locked request, for one operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_digest: Option<RequestDigest>,
    /// Complete compact evidence, on success of one operation.
    // Shared, as in `Item`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Arc<Evidence>>,
    /// The answer of a discovery, on success of one operation (instead of evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<Arc<Discovery>>,
    /// Error, on failure of the call as a whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// Full redacted provider text, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail_error: Option<String>,
    /// What may be done next, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correction: Option<Correction>,
    /// Per-item results of a batch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<Item>,
}

impl Details {
    fn base(origin: Origin, status: Status) -> Self {
        Details {
            status,
            package: origin.package,
            provider: origin.provider,
            operation: origin.operation,
            policy_source: origin.policy_source,
            query_id: None,
            request_digest: None,
            evidence: None,
            discovery: None,
            error: None,
            detail_error: None,
            correction: None,
            items: Vec::new(),
        }
    }

    /// A successful single operation.
    pub fn success(
        origin: Origin,
        query_id: QueryId,
        request_digest: RequestDigest,
        evidence: Evidence,
    ) -> Self {
        Details {
            query_id: Some(query_id),
            request_digest: Some(request_digest),
            evidence: Some(Arc::new(evidence)),
            ..Self::base(origin, Status::Ok)
        }
    }

    /// A successful single discovery.
    pub fn discovered(
        origin: Origin,
        query_id: QueryId,
        request_digest: RequestDigest,
        discovery: Discovery,
    ) -> Self {
        Details {
            query_id: Some(query_id),
            request_digest: Some(request_digest),
            discovery: Some(Arc::new(discovery)),
            ..Self::base(origin, Status::Ok)
        }
    }

    /// A failed single operation (or a batch that failed as a whole). The query id and
    /// request digest are present when the request got far enough to have them.
    pub fn failure(
        origin: Origin,
        query_id: Option<QueryId>,
        request_digest: Option<RequestDigest>,
        failure: Failure,
    ) -> Self {
        Details {
            query_id,
            request_digest,
            error: Some(failure.error),
            detail_error: Some(failure.detail_error),
            correction: Some(failure.correction),
            ..Self::base(origin, Status::Error)
        }
    }

    /// A batch result; the top-level status is `ok` when every item is, `error` when
    /// none is, `partial` otherwise. `None` for an empty batch.
    pub fn batch(origin: Origin, items: Vec<Item>) -> Option<Self> {
        let status = batch_status(&items)?;
        Some(Details {
            items,
            ..Self::base(origin, status)
        })
    }

    /// True whenever `status` is `error`, whatever the runtime operation returned.
    pub fn is_failed(&self) -> bool {
        self.status == Status::Error
    }

    /// The failure class of a failed call as a whole.
    pub fn failure_class(&self) -> Option<FailureClass> {
        self.error.as_ref().map(|e| e.class)
    }

    /// The origin of these details.
    pub fn origin(&self) -> Origin {
        Origin {
            package: self.package.clone(),
            provider: self.provider,
            operation: self.operation,
            policy_source: self.policy_source,
        }
    }

    /// Checks the rules of the contract: a success carries evidence and no error, a
    /// failure carries error, detail and correction and no evidence, a batch's status
    /// agrees with its items.
    pub fn check(&self) -> Result<(), &'static str> {
        if !self.items.is_empty() {
            if self.query_id.is_some()
                || self.request_digest.is_some()
                || self.evidence.is_some()
                || self.discovery.is_some()
                || self.error.is_some()
                || self.detail_error.is_some()
                || self.correction.is_some()
            {
                return Err("a batch carries its results in items only");
            }
            if batch_status(&self.items) != Some(self.status) {
                return Err("batch status does not agree with its items");
            }
            for item in &self.items {
                check_outcome(
                    item.status,
                    Answer::of(item.evidence.as_deref(), item.discovery.as_deref())?,
                    item.error.is_some(),
                    item.detail_error.is_some(),
                    item.correction.is_some(),
                )?;
            }
            return Ok(());
        }
        if self.status == Status::Ok && (self.query_id.is_none() || self.request_digest.is_none()) {
            return Err("a success names its query id and request digest");
        }
        check_outcome(
            self.status,
            Answer::of(self.evidence.as_deref(), self.discovery.as_deref())?,
            self.error.is_some(),
            self.detail_error.is_some(),
            self.correction.is_some(),
        )
    }
}

/// What a success answers with: evidence of a query or a discovery's answer.
enum Answer<'a> {
    Evidence(&'a Evidence),
    Discovery(&'a Discovery),
}

impl<'a> Answer<'a> {
    fn of(
        evidence: Option<&'a Evidence>,
        discovery: Option<&'a Discovery>,
    ) -> Result<Option<Self>, &'static str> {
        match (evidence, discovery) {
            (Some(_), Some(_)) => Err("a result carries evidence or a discovery, not both"),
            (Some(e), None) => Ok(Some(Answer::Evidence(e))),
            (None, Some(d)) => Ok(Some(Answer::Discovery(d))),
            (None, None) => Ok(None),
        }
    }
}

fn check_outcome(
    status: Status,
    answer: Option<Answer<'_>>,
    error: bool,
    detail: bool,
    correction: bool,
) -> Result<(), &'static str> {
    match status {
        Status::Ok => {
            let answer = answer.ok_or("a success carries evidence")?;
            if error || detail || correction {
                return Err("a success carries no error");
            }
            match answer {
                Answer::Evidence(e) => e.check(),
                Answer::Discovery(d) => d.check(),
            }
        }
        Status::Error => {
            if answer.is_some() {
                return Err("a failure carries no evidence");
            }
            if !(error && detail && correction) {
                return Err("a failure carries error, detail_error and correction");
            }
            Ok(())
        }
        Status::Partial => Err("partial is a batch status only"),
    }
}

fn batch_status(items: &[Item]) -> Option<Status> {
    if items.is_empty() {
        return None;
    }
    let failed = items.iter().filter(|i| i.is_failed()).count();
    Some(if failed == 0 {
        Status::Ok
    } else if failed == items.len() {
        Status::Error
    } else {
        Status::Partial
    })
}
