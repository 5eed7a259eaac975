//! What locking produces: the locked request and its items (ready queries or per-item
//! rejections), the rejection of a whole request, and the scope bindings a package
//! declares, which bind every selector to a policy value.

use std::fmt;

use evidence_result::{
    Details, ErrorCode, Failure, FailureClass, Item, Operation, Origin, PackageId, PolicySource,
    Provider, QueryId, RequestDigest, ResultError, ToolResult, evidence::EvidenceWindow,
};
use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::promql;
use crate::{
    PolicyError, ResolvedScope, TrustedPolicy, policy::ClusterTier, resolved::PolicyField,
};

/// A scope label a package declares: every vector selector must carry
/// `label="<policy value>"`.
///
/// In a package manifest: `{"label": "cluster_id", "value": "cluster_id"}` binds every
/// tier; `{"label": "keyspace_id", "value": "keyspace_id", "tiers": ["starter",
/// "essential"]}` binds the tiers listed, each of which must carry the value
/// ([`PolicyField::carried_by`], checked by [`ScopeBinding::check_tiers`]). When the
/// policy's tier is one the binding applies to, the policy must have the value or
/// locking fails closed; and a package that declares scope labels must bind every
/// tier-specific field its policy's tier carries (see [`crate::lock()`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeBinding {
    /// The PromQL label name, e.g. `cluster_id`.
    pub label: String,
    /// The policy value it is bound to.
    pub value: ScopeValue,
    /// The cluster tiers it applies to; absent (or empty): every tier.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<ClusterTier>,
}

/// A policy value a scope label can be bound to: a [`PolicyField`], the one list of
/// the policy's scope fields and their names.
pub type ScopeValue = PolicyField;

impl ScopeBinding {
    /// A binding of `label` to a policy value for every tier. The label must be a plain
    /// PromQL label name not starting with `__`.
    pub fn new(label: impl Into<String>, value: ScopeValue) -> Result<Self, PolicyError> {
        let label = label.into();
        if !promql::is_bindable_label(&label) {
            return Err(PolicyError::InvalidLabel(format!(
                "{label:?} is not a bindable label name"
            )));
        }
        Ok(ScopeBinding {
            label,
            value,
            tiers: Vec::new(),
        })
    }

    /// The same binding, applied only to clusters of these tiers (sorted, each once).
    pub fn for_tiers(mut self, tiers: impl IntoIterator<Item = ClusterTier>) -> Self {
        self.tiers = tiers.into_iter().collect();
        self.tiers.sort();
        self.tiers.dedup();
        self
    }

    /// True when the binding applies to a cluster of `tier`.
    pub fn applies_to(&self, tier: ClusterTier) -> bool {
        self.tiers.is_empty() || self.tiers.contains(&tier)
    }

    /// Checks that every tier the binding applies to carries its value: a binding to
    /// `keyspace_id` must list Starter and/or Essential, one to `parent_id` Premium.
    pub fn check_tiers(&self) -> Result<(), PolicyError> {
        match ClusterTier::ALL
            .into_iter()
            .find(|t| self.applies_to(*t) && !self.value.carried_by(*t))
        {
            Some(tier) => Err(PolicyError::InvalidLabel(format!(
                "scope label {:?} is bound to {} for {}, but the {tier} tier has no {}",
                self.label,
                self.value.name(),
                if self.tiers.is_empty() {
                    "every tier".to_owned()
                } else {
                    self.tiers
                        .iter()
                        .map(|t| t.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                self.value.name()
            ))),
            None => Ok(()),
        }
    }

    /// The policy's value for this binding, if it has one.
    pub fn resolve<'a>(&self, policy: &'a TrustedPolicy) -> Option<&'a str> {
        self.value.of(policy)
    }
}

/// The result of locking model arguments: everything a connector needs, resolved from
/// the trusted policy once (the scope: cluster fields, Manus target, series kept), where
/// the policy came from, and one item per query (one for Manus and Wetech, one per batch
/// entry for Clinic). A connector reads this, never the policy.
#[derive(Debug, Clone, PartialEq)]
pub struct LockedRequest {
    /// The one allowed operation.
    pub operation: Operation,
    /// The scope resolved from the trusted policy.
    pub scope: ResolvedScope,
    /// Where the policy came from; `StaticCanary` marks canary results.
    pub policy_source: PolicySource,
    /// The package.
    pub package: PackageId,
    /// The provider.
    pub provider: Provider,
    /// The locked queries, in argument order.
    pub items: Vec<LockedItem>,
}

impl LockedRequest {
    /// The result origin of this request, policy source included.
    pub fn origin(&self) -> Origin {
        Origin {
            package: self.package.clone(),
            provider: self.provider,
            operation: self.operation,
            policy_source: Some(self.policy_source),
        }
    }

    /// The queries that may run.
    pub fn ready(&self) -> impl Iterator<Item = &LockedQuery> {
        self.items.iter().filter_map(|i| match i {
            LockedItem::Ready(q) => Some(q),
            LockedItem::Rejected { .. } => None,
        })
    }

    /// The one query of a single-operation request (Manus, Wetech): `Some` when the
    /// request has exactly one item and it is ready.
    pub fn single(&self) -> Option<&LockedQuery> {
        match self.items.as_slice() {
            [LockedItem::Ready(q)] => Some(q),
            _ => None,
        }
    }
}

/// One locked query of a request.
#[derive(Debug, Clone, PartialEq)]
pub enum LockedItem {
    /// Locked and ready to run.
    Ready(LockedQuery),
    /// Rejected before any network work; the other items of a Clinic batch still run.
    Rejected {
        /// The objective.
        query_id: QueryId,
        /// Digest of the request as sent, when it could be computed.
        request_digest: Option<RequestDigest>,
        /// Why, with its correction.
        failure: Failure,
    },
}

impl LockedItem {
    /// The objective of the item.
    pub fn query_id(&self) -> &QueryId {
        match self {
            LockedItem::Ready(q) => &q.query_id,
            LockedItem::Rejected { query_id, .. } => query_id,
        }
    }

    /// The failed batch item of a rejected item, `None` for a ready one.
    pub fn rejected_item(&self) -> Option<Item> {
        match self {
            LockedItem::Ready(_) => None,
            LockedItem::Rejected {
                query_id,
                request_digest,
                failure,
            } => Some(Item::failure(
                query_id.clone(),
                *request_digest,
                failure.clone(),
            )),
        }
    }
}

/// A query locked to its policy: this, and nothing the model wrote, is what runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockedQuery {
    /// The objective.
    pub query_id: QueryId,
    /// The expression that runs: the model's expression with every selector bound to
    /// the package's scope labels, printed from the checked AST.
    pub expr: String,
    /// Start of the range query: the policy window's start (whole seconds, UTC).
    pub start: Timestamp,
    /// End of the range query: the policy window's end (whole seconds, UTC).
    pub end: Timestamp,
    /// Step between points, seconds.
    pub step_seconds: u64,
    /// Unit label of the values, when given.
    pub unit: Option<String>,
    /// Opaque instance reference (Manus), when given; the connector decrypts it and
    /// binds it with [`crate::promql::bind_label`].
    pub instance_ref: Option<String>,
    /// Digest of the request.
    pub request_digest: RequestDigest,
    /// The discovery this query answers, when it answers one
    /// ([`super::LockedDiscovery::query`]): the connectors then answer in the
    /// discovery's shape, with at most its items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<super::DiscoveryAsk>,
}

impl LockedQuery {
    /// Start, Unix seconds.
    pub fn start_unix(&self) -> i64 {
        self.start.as_second()
    }

    /// End, Unix seconds.
    pub fn end_unix(&self) -> i64 {
        self.end.as_second()
    }

    /// The evidence window of the query.
    pub fn evidence_window(&self) -> EvidenceWindow {
        EvidenceWindow {
            start: self.start_unix(),
            end: self.end_unix(),
            step_seconds: self.step_seconds,
        }
    }

    /// Points per series: `floor((end - start) / step) + 1`.
    pub fn points(&self) -> u64 {
        points(
            u64::try_from(self.end_unix() - self.start_unix()).unwrap_or(0),
            self.step_seconds,
        )
    }
}

/// A request rejected while locking, before any network work. Converts into a
/// [`Failure`] and, given an [`Origin`], into a failed [`ToolResult`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockRejection {
    /// The objective, when the arguments named a valid one.
    pub query_id: Option<QueryId>,
    /// Digest of the request as sent, when it could be computed.
    pub request_digest: Option<RequestDigest>,
    /// Code, class, detail and correction (boxed, to keep `Result`s small).
    pub failure: Box<Failure>,
}

impl LockRejection {
    /// The failure class.
    pub fn class(&self) -> FailureClass {
        self.failure.error.class
    }

    /// The error code.
    pub fn code(&self) -> &ErrorCode {
        &self.failure.error.code
    }

    /// The failed result of the whole call.
    pub fn to_tool_result(&self, origin: Origin) -> Result<ToolResult, ResultError> {
        ToolResult::new(Details::failure(
            origin,
            self.query_id.clone(),
            self.request_digest,
            (*self.failure).clone(),
        ))
    }
}

impl fmt::Display for LockRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.failure.error.code, self.failure.error.class, self.failure.detail_error
        )
    }
}

impl std::error::Error for LockRejection {}

impl From<LockRejection> for Failure {
    fn from(value: LockRejection) -> Self {
        *value.failure
    }
}

/// Points per series over a window of `window_seconds`: `floor(window / step) + 1`.
pub(super) fn points(window_seconds: u64, step: u64) -> u64 {
    window_seconds / step.max(1) + 1
}
