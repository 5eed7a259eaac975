//! Locking model arguments against a trusted policy, before any network or browser work.

use std::collections::BTreeSet;
use std::fmt;

use evidence_result::{
    Correction, Details, ErrorCode, EvidenceWindow, Failure, FailureClass, Item, Operation, Origin,
    PackageId, PolicySource, Provider, QueryId, RequestDigest, ResultError, ToolResult,
};
use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::args::{InstanceRef, MAX_EXPR_BYTES, Step, Unit, json_kind};
use crate::promql::{self, LabelConflict, ReadBounds, WindowIssue};
use crate::{PolicyError, TrustedPolicy};

/// A scope label a package declares: every vector selector must carry
/// `label="<policy value>"`.
///
/// In a package manifest: `{"label": "cluster_id", "value": "cluster_id"}`. With
/// `"optional": true` the binding applies only when the policy has the value (for
/// example `keyspace_id`, which only Starter and Essential clusters have); otherwise a
/// policy without the value fails closed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeBinding {
    /// The PromQL label name, e.g. `cluster_id`.
    pub label: String,
    /// The policy value it is bound to.
    pub value: ScopeValue,
    /// Apply only when the policy has the value.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// A policy value a scope label can be bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScopeValue {
    /// `cluster.id`.
    ClusterId,
    /// `cluster.parent_id` (Premium).
    ParentId,
    /// `cluster.keyspace_id` (Starter, Essential).
    KeyspaceId,
}

impl ScopeBinding {
    /// A required binding of `label` to a policy value. The label must be a plain
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
            optional: false,
        })
    }

    /// The same binding, applied only when the policy has the value.
    pub fn when_present(mut self) -> Self {
        self.optional = true;
        self
    }

    /// The policy's value for this binding, if it has one.
    pub fn resolve<'a>(&self, policy: &'a TrustedPolicy) -> Option<&'a str> {
        match self.value {
            ScopeValue::ClusterId => Some(policy.cluster.id.as_str()),
            ScopeValue::ParentId => policy.cluster.parent_id.as_deref(),
            ScopeValue::KeyspaceId => policy.cluster.keyspace_id.as_deref(),
        }
    }
}

/// The result of locking model arguments: the policy, where it came from, and one item
/// per query (one for Manus and Wetech, one per batch entry for Clinic).
#[derive(Debug, Clone, PartialEq)]
pub struct LockedRequest {
    /// The trusted policy the request is locked to.
    pub policy: TrustedPolicy,
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
            operation: self.policy.operation,
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
    /// binds it with [`crate::bind_label`].
    pub instance_ref: Option<String>,
    /// Digest of the request.
    pub request_digest: RequestDigest,
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

/// The error codes of lock rejections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    InvalidArguments,
    MissingQueryId,
    InvalidQueryId,
    DuplicateQueryId,
    QueryIdNotAllowed,
    ForbiddenArgument,
    UnknownArgument,
    MissingArgument,
    InvalidExpr,
    InvalidStep,
    StepBelowMinimum,
    TooManyPoints,
    InvalidUnit,
    InvalidInstanceRef,
    EmptyBatch,
    BatchTooLarge,
    PromqlParseError,
    UnsupportedPromql,
    ScopeViolation,
    WindowViolation,
    TrustedPolicyRejected,
}

impl Code {
    #[cfg(test)]
    const ALL: [Code; 21] = [
        Code::InvalidArguments,
        Code::MissingQueryId,
        Code::InvalidQueryId,
        Code::DuplicateQueryId,
        Code::QueryIdNotAllowed,
        Code::ForbiddenArgument,
        Code::UnknownArgument,
        Code::MissingArgument,
        Code::InvalidExpr,
        Code::InvalidStep,
        Code::StepBelowMinimum,
        Code::TooManyPoints,
        Code::InvalidUnit,
        Code::InvalidInstanceRef,
        Code::EmptyBatch,
        Code::BatchTooLarge,
        Code::PromqlParseError,
        Code::UnsupportedPromql,
        Code::ScopeViolation,
        Code::WindowViolation,
        Code::TrustedPolicyRejected,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Code::InvalidArguments => "invalid_arguments",
            Code::MissingQueryId => "missing_query_id",
            Code::InvalidQueryId => "invalid_query_id",
            Code::DuplicateQueryId => "duplicate_query_id",
            Code::QueryIdNotAllowed => "query_id_not_allowed",
            Code::ForbiddenArgument => "forbidden_argument",
            Code::UnknownArgument => "unknown_argument",
            Code::MissingArgument => "missing_argument",
            Code::InvalidExpr => "invalid_expr",
            Code::InvalidStep => "invalid_step",
            Code::StepBelowMinimum => "step_below_minimum",
            Code::TooManyPoints => "too_many_points",
            Code::InvalidUnit => "invalid_unit",
            Code::InvalidInstanceRef => "invalid_instance_ref",
            Code::EmptyBatch => "empty_batch",
            Code::BatchTooLarge => "batch_too_large",
            Code::PromqlParseError => "promql_parse_error",
            Code::UnsupportedPromql => "unsupported_promql",
            Code::ScopeViolation => "scope_violation",
            Code::WindowViolation => "window_violation",
            Code::TrustedPolicyRejected => "trusted_policy_rejected",
        }
    }

    fn class(self) -> FailureClass {
        match self {
            Code::QueryIdNotAllowed
            | Code::ForbiddenArgument
            | Code::ScopeViolation
            | Code::WindowViolation => FailureClass::PolicyViolation,
            Code::TrustedPolicyRejected => FailureClass::Internal,
            _ => FailureClass::InvalidArgument,
        }
    }

    /// The error code. Every code is a valid snake_case identifier (tested), so the
    /// fallback is never taken.
    pub(crate) fn error_code(self) -> ErrorCode {
        ErrorCode::new(self.as_str()).unwrap_or_else(|_| ErrorCode::scope_violation())
    }

    fn failure(self, detail: String, hint: &str) -> Failure {
        let class = self.class();
        let correction = if class == FailureClass::Internal {
            Correction::for_class(class, None, Vec::new())
        } else {
            Correction::for_class(class, Some(hint), Correction::default_keep())
        };
        Failure::new(self.error_code(), class, detail).with_correction(correction)
    }
}

/// What a provider's arguments may hold.
struct Spec {
    keys: &'static [&'static str],
    unit_required: bool,
    instance_ref: bool,
}

const CLINIC_QUERY: Spec = Spec {
    keys: &["queryId", "expr", "step", "unit"],
    unit_required: false,
    instance_ref: false,
};
const MANUS: Spec = Spec {
    keys: &["queryId", "expr", "step", "instanceRef"],
    unit_required: false,
    instance_ref: true,
};
const WETECH: Spec = Spec {
    keys: &["queryId", "expr", "unit", "step"],
    unit_required: true,
    instance_ref: false,
};

/// What the platform fixes that an argument named `key` tries to set, if anything.
fn platform_fixed(key: &str) -> Option<&'static str> {
    let n: String = key
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let has = |parts: &[&str]| parts.iter().any(|p| n.contains(p));
    let is = |names: &[&str]| names.contains(&n.as_str());
    if has(&["provider", "datasource"]) {
        Some("provider")
    } else if has(&["cluster", "keyspace", "tenant"]) || is(&["tier", "parentid", "region"]) {
        Some("cluster")
    } else if has(&["ticket", "jira"]) || is(&["issue", "issuekey", "incident"]) {
        Some("ticket")
    } else if has(&["account"]) || is(&["org", "orgid", "organization", "project", "projectid"]) {
        Some("account")
    } else if has(&["target", "vida", "monica"])
        || is(&[
            "instance",
            "instanceid",
            "instanceaddress",
            "address",
            "addr",
            "ip",
        ])
    {
        Some("target")
    } else if has(&["url", "uri", "host", "endpoint", "domain"]) || is(&["port", "server"]) {
        Some("provider address")
    } else if has(&["window", "timerange", "lookback", "timestamp", "timezone"])
        || is(&[
            "start",
            "end",
            "time",
            "from",
            "to",
            "since",
            "until",
            "starttime",
            "endtime",
            "range",
            "duration",
            "at",
            "offset",
            "tz",
            "now",
            "period",
            "startts",
            "endts",
        ])
    {
        Some("time window")
    } else if has(&["operation", "package", "policy"]) || is(&["op", "method", "api", "path"]) {
        Some("operation")
    } else if has(&[
        "token",
        "password",
        "cookie",
        "secret",
        "credential",
        "apikey",
        "auth",
        "header",
        "session",
    ]) {
        Some("credentials")
    } else if is(&["limit", "limits", "maxpoints", "maxseries", "maxbatch"]) {
        Some("limits")
    } else {
        None
    }
}

/// Keys outside a spec: `(forbidden, unknown)`, each sorted.
fn extra_keys(
    obj: &Map<String, Value>,
    allowed: &[&str],
) -> (Vec<(String, &'static str)>, Vec<String>) {
    let mut forbidden = Vec::new();
    let mut unknown = Vec::new();
    for key in obj.keys().filter(|k| !allowed.contains(&k.as_str())) {
        match platform_fixed(key) {
            Some(what) => forbidden.push((key.clone(), what)),
            None => unknown.push(key.clone()),
        }
    }
    (forbidden, unknown)
}

fn quoted_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    items
        .into_iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A rejection for keys outside the spec, if any.
fn extras_failure(obj: &Map<String, Value>, allowed: &[&str]) -> Option<Failure> {
    let (forbidden, unknown) = extra_keys(obj, allowed);
    let allowed_list = quoted_list(allowed.iter().copied());
    if !forbidden.is_empty() {
        let fixed: BTreeSet<&str> = forbidden.iter().map(|(_, w)| *w).collect();
        let fixed = fixed.into_iter().collect::<Vec<_>>().join(", ");
        let keys = quoted_list(
            forbidden
                .iter()
                .map(|(k, _)| k.as_str())
                .chain(unknown.iter().map(String::as_str)),
        );
        return Some(Code::ForbiddenArgument.failure(
            format!(
                "arguments {keys} are not accepted: the platform fixes the {fixed} from trusted policy"
            ),
            &format!(
                "The platform fixes the {fixed}; leave {keys} out of the arguments (allowed: {allowed_list})."
            ),
        ));
    }
    if !unknown.is_empty() {
        let keys = quoted_list(unknown.iter().map(String::as_str));
        return Some(Code::UnknownArgument.failure(
            format!("unknown arguments {keys}"),
            &format!("Remove {keys}; the allowed arguments are {allowed_list}."),
        ));
    }
    None
}

/// The locking context of one request.
struct Ctx<'a> {
    policy: &'a TrustedPolicy,
    bindings: Vec<(&'a str, &'a str)>,
    window_seconds: u64,
    default_step: u64,
    smallest_step: u64,
    bounds: ReadBounds,
}

fn points(window_seconds: u64, step: u64) -> u64 {
    window_seconds / step.max(1) + 1
}

impl<'a> Ctx<'a> {
    fn new(policy: &'a TrustedPolicy, scope: &'a [ScopeBinding]) -> Result<Self, LockRejection> {
        let internal = |detail: String| LockRejection {
            query_id: None,
            request_digest: None,
            failure: Box::new(Code::TrustedPolicyRejected.failure(detail, "")),
        };
        policy.validate().map_err(|e| internal(e.to_string()))?;
        let mut bindings = Vec::with_capacity(scope.len());
        for b in scope {
            if !promql::is_bindable_label(&b.label) {
                return Err(internal(format!(
                    "the package declares an invalid scope label {:?}",
                    b.label
                )));
            }
            match b.resolve(policy) {
                Some(v) => bindings.push((b.label.as_str(), v)),
                None if b.optional => {}
                None => {
                    return Err(internal(format!(
                        "the trusted policy has no {:?} value for scope label {:?}",
                        b.value, b.label
                    )));
                }
            }
        }
        let window_seconds = policy.window.seconds();
        let max_points = u64::from(policy.limits.max_points_per_series);
        let min_step = policy.limits.min_step.as_secs().max(1);
        let smallest_step = min_step.max(window_seconds / max_points.max(1) + 1);
        let promtool_default = window_seconds.div_ceil(250).max(1);
        let default_step = promtool_default.max(smallest_step);
        let start = i128::from(policy.window.start.as_millisecond());
        let lookback = i128::try_from(policy.lookback.as_millis()).unwrap_or(i128::MAX);
        Ok(Ctx {
            policy,
            bindings,
            window_seconds,
            default_step,
            smallest_step,
            bounds: ReadBounds {
                start,
                end: i128::from(policy.window.end.as_millisecond()),
                earliest: start.saturating_sub(lookback),
                max_subquery_points: max_points,
            },
        })
    }

    fn format_ms(ms: i128) -> String {
        i64::try_from(ms)
            .ok()
            .and_then(|m| Timestamp::from_millisecond(m).ok())
            .map_or_else(|| format!("{ms} ms"), |t| t.to_string())
    }

    fn window_text(&self) -> String {
        format!(
            "{} to {} plus {}s of look-back",
            self.policy.window.start,
            self.policy.window.end,
            self.policy.lookback.as_secs()
        )
    }
}

/// The canonical request a digest is computed over.
#[derive(Serialize)]
struct DigestInput<'a> {
    v: u32,
    package: &'a PackageId,
    provider: Provider,
    operation: Operation,
    query_id: &'a QueryId,
    expr: Value,
    step: Value,
    unit: Value,
    instance_ref: Value,
    window_start: &'a Timestamp,
    window_end: &'a Timestamp,
    #[serde(skip_serializing_if = "Map::is_empty")]
    extra: Map<String, Value>,
}

/// The canonical request a ready query's digest is computed over. Its fields are
/// declared in RFC 8785 key order and hold only strings, integers and nulls, so its
/// compact `serde_json` form is its canonical JSON (tested), without the cost of a
/// general canonicalizer.
#[derive(Serialize)]
struct ReadyDigest<'a> {
    expr: &'a str,
    instance_ref: Option<&'a str>,
    operation: Operation,
    package: &'a PackageId,
    provider: Provider,
    query_id: &'a QueryId,
    step: u64,
    unit: Option<&'a str>,
    v: u32,
    window_end: &'a Timestamp,
    window_start: &'a Timestamp,
}

fn ready_digest(input: &ReadyDigest<'_>) -> Result<RequestDigest, serde_json::Error> {
    let json = serde_json::to_string(input)?;
    Ok(RequestDigest::from(evidence_result::Digest::sha256(
        json.as_bytes(),
    )))
}

/// Locks one query object. `query_id` has been checked by the caller.
fn lock_query(
    ctx: &Ctx<'_>,
    spec: &Spec,
    query_id: QueryId,
    obj: &Map<String, Value>,
) -> Result<LockedQuery, LockRejection> {
    let policy = ctx.policy;

    // Field values, each either valid or an error message.
    let expr = match obj.get("expr") {
        None => Err((Code::MissingArgument, "`expr` is required".to_owned())),
        Some(Value::String(s)) if s.trim().is_empty() => {
            Err((Code::InvalidExpr, "`expr` is empty".to_owned()))
        }
        Some(Value::String(s)) if s.len() > MAX_EXPR_BYTES => Err((
            Code::InvalidExpr,
            format!("`expr` is longer than {MAX_EXPR_BYTES} bytes"),
        )),
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(v) => Err((
            Code::InvalidExpr,
            format!("`expr` must be a string, not {}", json_kind(v)),
        )),
    };
    let step = match obj.get("step") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => Step::from_json(v)
            .map(Some)
            .map_err(|m| (Code::InvalidStep, m)),
    };
    let unit = match obj.get("unit") {
        None | Some(Value::Null) if spec.unit_required => Err((
            Code::MissingArgument,
            "`unit` is required: a short plain label such as cores, bytes or %".to_owned(),
        )),
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Unit::new(s.as_str())
            .map(Some)
            .map_err(|m| (Code::InvalidUnit, m)),
        Some(v) => Err((
            Code::InvalidUnit,
            format!("`unit` must be a string, not {}", json_kind(v)),
        )),
    };
    let instance_ref = match obj.get("instanceRef") {
        _ if !spec.instance_ref => Ok(None),
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => InstanceRef::new(s.as_str())
            .map(Some)
            .map_err(|m| (Code::InvalidInstanceRef, m)),
        Some(v) => Err((
            Code::InvalidInstanceRef,
            format!("`instanceRef` must be a string, not {}", json_kind(v)),
        )),
    };
    let parsed = expr.as_ref().ok().map(|e| promql::parse(e));

    let resolved_step = step
        .as_ref()
        .ok()
        .map(|s| s.map_or(ctx.default_step, Step::seconds));

    // The digest of a rejected request: the model's expression as printed from its AST
    // (its raw JSON when it does not parse), valid values normalized, invalid ones and
    // any extra fields as sent. Computed only when a rejection happens.
    let raw = |key: &str| obj.get(key).cloned().unwrap_or(Value::Null);
    let reject = |failure: Failure| {
        let input = DigestInput {
            v: 1,
            package: &policy.package,
            provider: policy.provider,
            operation: policy.operation,
            query_id: &query_id,
            expr: match &parsed {
                Some(Ok(ast)) => Value::String(ast.to_string()),
                _ => raw("expr"),
            },
            step: resolved_step.map_or_else(|| raw("step"), Value::from),
            unit: match &unit {
                Ok(u) => u.as_ref().map_or(Value::Null, |u| Value::from(u.as_str())),
                Err(_) => raw("unit"),
            },
            instance_ref: match &instance_ref {
                Ok(r) => r.as_ref().map_or(Value::Null, |r| Value::from(r.as_str())),
                Err(_) => raw("instanceRef"),
            },
            window_start: &policy.window.start,
            window_end: &policy.window.end,
            extra: obj
                .iter()
                .filter(|(k, _)| !spec.keys.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        };
        LockRejection {
            query_id: Some(query_id.clone()),
            request_digest: RequestDigest::of(&input).ok(),
            failure: Box::new(failure),
        }
    };

    if let Some(f) = extras_failure(obj, spec.keys) {
        return Err(reject(f));
    }
    if policy.provider == Provider::Wetech && !policy.wetech_query_ids.contains(&query_id) {
        let allowed = quoted_list(policy.wetech_query_ids.iter().map(QueryId::as_str));
        return Err(reject(Code::QueryIdNotAllowed.failure(
            format!("queryId `{query_id}` is not authorized for this ticket"),
            &format!("Use one of the query ids the platform authorized: {allowed}."),
        )));
    }
    let field = |r: (Code, String)| {
        let hint = format!("Fix it: {}.", r.1);
        reject(r.0.failure(r.1, &hint))
    };
    expr.map_err(field)?;
    let step = step.clone().map_err(field)?;
    let unit = unit.clone().map_err(field)?;
    let instance_ref = instance_ref.clone().map_err(field)?;

    let ast = match &parsed {
        Some(Ok(ast)) => ast,
        Some(Err(message)) => {
            return Err(reject(Code::PromqlParseError.failure(
                message.clone(),
                "Correct the PromQL syntax at the reported position.",
            )));
        }
        None => {
            return Err(reject(Code::InvalidExpr.failure(
                "`expr` is missing".to_owned(),
                "Send the PromQL expression in `expr`.",
            )));
        }
    };
    promql::check_constructs(ast).map_err(|m| {
        reject(Code::UnsupportedPromql.failure(m, "Rewrite the expression without it."))
    })?;

    let step_seconds = match step {
        None => ctx.default_step,
        Some(s) => {
            let s = s.seconds();
            if s < policy.limits.min_step.as_secs() {
                return Err(reject(Code::StepBelowMinimum.failure(
                    format!(
                        "step {s}s is below the platform's minimum step of {}s",
                        policy.limits.min_step.as_secs()
                    ),
                    &format!("Use a step of at least {}s.", ctx.smallest_step),
                )));
            }
            let n = points(ctx.window_seconds, s);
            if n > u64::from(policy.limits.max_points_per_series) {
                return Err(reject(Code::TooManyPoints.failure(
                    format!(
                        "step {s}s gives {n} points per series over the {}s window, more than the {} allowed",
                        ctx.window_seconds, policy.limits.max_points_per_series
                    ),
                    &format!("Use a step of at least {}s.", ctx.smallest_step),
                )));
            }
            s
        }
    };

    let b = &ctx.bounds;
    promql::check_reads(ast, (b.start, b.end), b).map_err(|issue| match issue {
        WindowIssue::Outside {
            construct,
            from,
            to,
        } => reject(Code::WindowViolation.failure(
            format!(
                "{construct} reads from {} to {}, outside what the platform allows: {}",
                Ctx::format_ms(from),
                Ctx::format_ms(to),
                ctx.window_text()
            ),
            "Shorten the range, subquery range or offset, and drop negative offsets, so that reads stay within the window and its look-back.",
        )),
        WindowIssue::AtOutside { construct, at } => reject(Code::WindowViolation.failure(
            format!(
                "{construct} is evaluated @ {}, outside the window {} to {}",
                Ctx::format_ms(at),
                policy.window.start,
                policy.window.end
            ),
            "Use @ start() or @ end(), or a time inside the window, or drop the @ modifier.",
        )),
        WindowIssue::SubqueryPoints {
            construct,
            points,
            smallest_step_ms,
        } => reject(Code::TooManyPoints.failure(
            format!(
                "subquery {construct} has {points} evaluation points, more than the {} allowed",
                policy.limits.max_points_per_series
            ),
            &format!(
                "Use a subquery step of at least {}ms.",
                smallest_step_ms
            ),
        )),
    })?;

    let mut bound = ast.clone();
    promql::bind_labels(&mut bound, &ctx.bindings).map_err(|LabelConflict { label, matcher }| {
        reject(Code::ScopeViolation.failure(
            format!(
                "matcher {matcher} conflicts with the platform's binding of label `{label}` to the ticket's scope"
            ),
            &format!(
                "Remove every matcher on `{label}`; the platform binds it to the ticket's cluster."
            ),
        ))
    })?;
    let expr = promql::print_checked(&mut bound).map_err(|m| {
        reject(Code::UnsupportedPromql.failure(m, "Rewrite the expression more plainly."))
    })?;
    let unit = unit.map(String::from);
    let instance_ref = instance_ref.map(String::from);
    let request_digest = ready_digest(&ReadyDigest {
        expr: &expr,
        instance_ref: instance_ref.as_deref(),
        operation: policy.operation,
        package: &policy.package,
        provider: policy.provider,
        query_id: &query_id,
        step: step_seconds,
        unit: unit.as_deref(),
        v: 1,
        window_end: &policy.window.end,
        window_start: &policy.window.start,
    })
    .map_err(|e| {
        reject(
            Code::TrustedPolicyRejected
                .failure(format!("cannot compute the request digest: {e}"), ""),
        )
    })?;
    Ok(LockedQuery {
        query_id,
        expr,
        start: policy.window.start,
        end: policy.window.end,
        step_seconds,
        unit,
        instance_ref,
        request_digest,
    })
}

/// Reads a `queryId` value: `Ok` with the id, or the rejection code and message.
fn read_query_id(
    value: Option<&Value>,
    wetech: &[QueryId],
) -> Result<QueryId, (Code, String, String)> {
    let hint = if wetech.is_empty() {
        "Add `queryId`: 1-64 letters, digits, '_', '-', '.', ':' naming this objective.".to_owned()
    } else {
        format!(
            "Add `queryId`: one of the query ids the platform authorized ({}).",
            quoted_list(wetech.iter().map(QueryId::as_str))
        )
    };
    match value {
        None | Some(Value::Null) => Err((
            Code::MissingQueryId,
            "`queryId` is required".to_owned(),
            hint,
        )),
        Some(Value::String(s)) => {
            QueryId::new(s.as_str()).map_err(|e| (Code::InvalidQueryId, e.to_string(), hint))
        }
        Some(v) => Err((
            Code::InvalidQueryId,
            format!("`queryId` must be a string, not {}", json_kind(v)),
            hint,
        )),
    }
}

/// Locks model arguments against a trusted policy, entirely locally, before any network
/// or browser work.
///
/// `args` is the raw JSON the model sent; `scope` the package's declared scope labels;
/// `source` where the policy came from (it is carried into every result). Arguments are
/// parsed here rather than by serde, so that a field the platform fixes (`provider`,
/// cluster, ticket, account, target, URL, host, time window, ...) gets a clear
/// non-widening correction.
///
/// For Manus and Wetech (one operation) any rejection is a [`LockRejection`]. For a
/// Clinic batch, a malformed batch (not an object, no `queries`, empty, too large, an
/// entry without a valid unique `queryId`, a forbidden top-level field) is a
/// [`LockRejection`]; every other per-query failure is a [`LockedItem::Rejected`] and
/// the other queries still run.
///
/// Each query is checked in this order: arguments the platform fixes or does not know;
/// the Wetech query id allow-list; field shapes (`expr`, `step`, `unit`,
/// `instanceRef`); PromQL syntax; unsupported constructs; the step against the minimum
/// and the points limit; the read window (ranges, subqueries, offsets, `@`); the scope
/// labels; and that the rewritten expression prints back exactly.
pub fn lock(
    policy: &TrustedPolicy,
    source: PolicySource,
    args: &Value,
    scope: &[ScopeBinding],
) -> Result<LockedRequest, LockRejection> {
    let ctx = Ctx::new(policy, scope)?;
    let whole = |code: Code, detail: String, hint: &str| LockRejection {
        query_id: None,
        request_digest: None,
        failure: Box::new(code.failure(detail, hint)),
    };
    let Some(obj) = args.as_object() else {
        return Err(whole(
            Code::InvalidArguments,
            format!("arguments must be a JSON object, not {}", json_kind(args)),
            "Send the arguments as one JSON object matching the tool schema.",
        ));
    };
    let items = match policy.provider {
        Provider::Clinic => lock_clinic(&ctx, obj)?,
        Provider::Manus | Provider::Wetech => {
            let spec = if policy.provider == Provider::Manus {
                &MANUS
            } else {
                &WETECH
            };
            let query_id = read_query_id(obj.get("queryId"), &policy.wetech_query_ids).map_err(
                |(code, detail, hint)| {
                    // A call without a usable query id may also carry fields the
                    // platform fixes; report both.
                    let detail = match extras_failure(obj, spec.keys) {
                        Some(f) => format!("{detail}; {}", f.detail_error),
                        None => detail,
                    };
                    whole(code, detail, &hint)
                },
            )?;
            vec![LockedItem::Ready(lock_query(&ctx, spec, query_id, obj)?)]
        }
    };
    Ok(LockedRequest {
        policy: policy.clone(),
        policy_source: source,
        package: policy.package.clone(),
        provider: policy.provider,
        items,
    })
}

fn lock_clinic(ctx: &Ctx<'_>, obj: &Map<String, Value>) -> Result<Vec<LockedItem>, LockRejection> {
    let whole = |code: Code, detail: String, hint: &str| LockRejection {
        query_id: None,
        request_digest: None,
        failure: Box::new(code.failure(detail, hint)),
    };
    if let Some(f) = extras_failure(obj, &["queries"]) {
        return Err(LockRejection {
            query_id: None,
            request_digest: None,
            failure: Box::new(f),
        });
    }
    let queries = match obj.get("queries") {
        None => {
            return Err(whole(
                Code::MissingArgument,
                "`queries` is required".to_owned(),
                "Send `queries`: an array of {queryId, expr, step?, unit?}.",
            ));
        }
        Some(Value::Array(q)) => q,
        Some(v) => {
            return Err(whole(
                Code::InvalidArguments,
                format!("`queries` must be an array, not {}", json_kind(v)),
                "Send `queries`: an array of {queryId, expr, step?, unit?}.",
            ));
        }
    };
    let max = ctx.policy.limits.max_batch as usize;
    if queries.is_empty() {
        return Err(whole(
            Code::EmptyBatch,
            "`queries` is empty".to_owned(),
            "Send at least one query.",
        ));
    }
    if queries.len() > max {
        return Err(whole(
            Code::BatchTooLarge,
            format!(
                "{} queries in one call, more than the {max} allowed",
                queries.len()
            ),
            &format!("Send at most {max} queries per call."),
        ));
    }
    let mut ids = Vec::with_capacity(queries.len());
    for (i, q) in queries.iter().enumerate() {
        let Some(item) = q.as_object() else {
            return Err(whole(
                Code::InvalidArguments,
                format!("queries[{i}] must be an object, not {}", json_kind(q)),
                "Each query is an object {queryId, expr, step?, unit?}.",
            ));
        };
        let id = read_query_id(item.get("queryId"), &[]).map_err(|(code, detail, hint)| {
            whole(code, format!("queries[{i}]: {detail}"), &hint)
        })?;
        if ids.contains(&id) {
            return Err(whole(
                Code::DuplicateQueryId,
                format!("queries[{i}]: queryId `{id}` appears more than once"),
                "Give every query of the batch its own queryId.",
            ));
        }
        ids.push(id);
    }
    Ok(queries
        .iter()
        .zip(ids)
        .map(|(q, id)| {
            let item = q.as_object().map_or_else(Map::new, Clone::clone);
            match lock_query(ctx, &CLINIC_QUERY, id.clone(), &item) {
                Ok(locked) => LockedItem::Ready(locked),
                Err(r) => LockedItem::Rejected {
                    query_id: id,
                    request_digest: r.request_digest,
                    failure: *r.failure,
                },
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::seed_json;
    use serde_json::json;

    fn clinic() -> TrustedPolicy {
        serde_json::from_value(seed_json()).unwrap()
    }

    fn wetech() -> TrustedPolicy {
        let mut v = seed_json();
        v["provider"] = json!("wetech");
        v["package"] = json!("managed_auto_oncall_wetech");
        v["wetech_query_ids"] = json!(["tidb_cpu", "tikv_cpu"]);
        serde_json::from_value(v).unwrap()
    }

    fn scope() -> Vec<ScopeBinding> {
        vec![ScopeBinding::new("cluster_id", ScopeValue::ClusterId).unwrap()]
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config { cases: 128, ..Default::default() })]

        /// The fast digest of a ready query is exactly the digest of its RFC 8785
        /// canonical JSON.
        #[test]
        fn ready_digest_is_canonical(
            expr in proptest::prelude::any::<String>(),
            unit in proptest::option::of(proptest::prelude::any::<String>()),
            instance_ref in proptest::option::of("[ -~]{0,40}"),
            step in 1u64..=crate::MAX_STEP_SECONDS,
            qid in "[A-Za-z0-9_.:-]{1,64}",
        ) {
            let p = clinic();
            let query_id = QueryId::new(qid).unwrap();
            let input = ReadyDigest {
                expr: &expr,
                instance_ref: instance_ref.as_deref(),
                operation: p.operation,
                package: &p.package,
                provider: p.provider,
                query_id: &query_id,
                step,
                unit: unit.as_deref(),
                v: 1,
                window_end: &p.window.end,
                window_start: &p.window.start,
            };
            let canonical = evidence_result::canonical_json(&input).unwrap();
            proptest::prop_assert_eq!(serde_json::to_string(&input).unwrap(), canonical);
            proptest::prop_assert_eq!(ready_digest(&input).unwrap(), RequestDigest::of(&input).unwrap());
        }
    }

    #[test]
    fn every_code_is_a_valid_error_code() {
        for c in Code::ALL {
            assert_eq!(ErrorCode::new(c.as_str()).unwrap().as_str(), c.as_str());
        }
    }

    #[test]
    fn platform_fixed_names() {
        for (k, what) in [
            ("provider", "provider"),
            ("clusterId", "cluster"),
            ("cluster_id", "cluster"),
            ("ticket", "ticket"),
            ("accountId", "account"),
            ("target", "target"),
            ("url", "provider address"),
            ("grafanaHost", "provider address"),
            ("start", "time window"),
            ("timeRange", "time window"),
            ("end", "time window"),
            ("time", "time window"),
            ("keyspaceId", "cluster"),
        ] {
            assert_eq!(platform_fixed(k), Some(what), "{k}");
        }
        for k in ["query", "expression", "legend"] {
            assert_eq!(platform_fixed(k), None, "{k}");
        }
    }

    #[test]
    fn default_step_is_promtool_like() {
        let p = clinic();
        let ctx = Ctx::new(&p, &[]).unwrap();
        // 900 s / 250 = 3.6 -> 4 s, but at least the 15 s minimum.
        assert_eq!(ctx.default_step, 15);
        let mut p = clinic();
        p.window.end = "2026-07-21T14:50:00Z".parse().unwrap();
        p.limits.min_step = std::time::Duration::from_secs(1);
        let ctx = Ctx::new(&p, &[]).unwrap();
        assert_eq!(ctx.default_step, 15, "3600 s / 250 = 14.4 -> 15 s");
    }

    #[test]
    fn wetech_single_operation() {
        let p = wetech();
        let ok = lock(
            &p,
            PolicySource::TrustedEnvelope,
            &json!({"queryId": "tidb_cpu", "expr": "rate(x[1m])", "unit": "cores", "step": "30s"}),
            &scope(),
        )
        .unwrap();
        let q = ok.single().unwrap();
        assert_eq!(q.expr, r#"rate(x{cluster_id="SaaS01"}[1m])"#);
        assert_eq!(q.step_seconds, 30);
        assert_eq!(q.unit.as_deref(), Some("cores"));
        assert_eq!(q.points(), 31);

        let r = lock(
            &p,
            PolicySource::TrustedEnvelope,
            &json!({"queryId": "other", "expr": "up", "unit": "cores"}),
            &scope(),
        )
        .unwrap_err();
        assert_eq!(r.code().as_str(), "query_id_not_allowed");
        assert!(r.failure.correction.instruction.contains("`tidb_cpu`"));
        assert!(r.request_digest.is_some());

        let r = lock(
            &p,
            PolicySource::TrustedEnvelope,
            &json!({"queryId": "tidb_cpu", "expr": "up", "unit": "cpu cores per second!"}),
            &scope(),
        )
        .unwrap_err();
        assert_eq!(r.code().as_str(), "invalid_unit");
        assert_eq!(r.class(), FailureClass::InvalidArgument);
        assert!(r.request_digest.is_some(), "unit rejections carry a digest");
    }

    #[test]
    fn step_limits() {
        let p = clinic();
        let one = |step: Value| {
            let args = json!({"queries": [{"queryId": "q", "expr": "up", "step": step}]});
            let locked = lock(&p, PolicySource::TrustedEnvelope, &args, &[]).unwrap();
            match &locked.items[0] {
                LockedItem::Ready(q) => Ok(q.step_seconds),
                LockedItem::Rejected { failure, .. } => Err(Box::new(failure.clone())),
            }
        };
        assert_eq!(one(json!("15s")), Ok(15));
        let f = one(json!(5)).unwrap_err();
        assert_eq!(f.error.code.as_str(), "step_below_minimum");
        assert!(f.correction.instruction.contains("at least 15s"));

        let mut p2 = clinic();
        p2.limits.max_points_per_series = 10;
        p2.limits.min_step = std::time::Duration::from_secs(1);
        let args = json!({"queries": [{"queryId": "q", "expr": "up", "step": 60}]});
        let locked = lock(&p2, PolicySource::TrustedEnvelope, &args, &[]).unwrap();
        let LockedItem::Rejected { failure, .. } = &locked.items[0] else {
            panic!("expected a rejection")
        };
        // 900 s window, at most 10 points: floor(900/s)+1 <= 10 -> s >= 91.
        assert_eq!(failure.error.code.as_str(), "too_many_points");
        assert!(
            failure.correction.instruction.contains("at least 91s"),
            "{}",
            failure.correction.instruction
        );
        let args = json!({"queries": [{"queryId": "q", "expr": "up", "step": 91}]});
        let locked = lock(&p2, PolicySource::TrustedEnvelope, &args, &[]).unwrap();
        assert_eq!(locked.ready().next().unwrap().points(), 10);
        let args = json!({"queries": [{"queryId": "q", "expr": "up"}]});
        let locked = lock(&p2, PolicySource::TrustedEnvelope, &args, &[]).unwrap();
        assert_eq!(locked.ready().next().unwrap().step_seconds, 91);
    }

    #[test]
    fn scope_bindings_resolve_or_fail_closed() {
        let p = clinic();
        let ks = ScopeBinding::new("keyspace_id", ScopeValue::KeyspaceId).unwrap();
        let args = json!({"queries": [{"queryId": "q", "expr": "up"}]});
        let r = lock(
            &p,
            PolicySource::TrustedEnvelope,
            &args,
            std::slice::from_ref(&ks),
        )
        .unwrap_err();
        assert_eq!(r.class(), FailureClass::Internal);
        assert!(!r.failure.correction.allowed);
        let locked = lock(
            &p,
            PolicySource::TrustedEnvelope,
            &args,
            &[ks.when_present()],
        )
        .unwrap();
        assert_eq!(locked.ready().next().unwrap().expr, "up");
        assert!(ScopeBinding::new("__name__", ScopeValue::ClusterId).is_err());
        let parsed: ScopeBinding =
            serde_json::from_value(json!({"label": "cluster_id", "value": "cluster_id"})).unwrap();
        assert_eq!(parsed, scope()[0]);
    }

    #[test]
    fn rejection_to_tool_result() {
        let p = wetech();
        let r = lock(
            &p,
            PolicySource::TrustedEnvelope,
            &json!({"queryId": "tidb_cpu", "expr": "rate(x[5m]", "unit": "cores"}),
            &scope(),
        )
        .unwrap_err();
        assert_eq!(r.code().as_str(), "promql_parse_error");
        let origin = Origin {
            package: p.package.clone(),
            provider: p.provider,
            operation: p.operation,
            policy_source: Some(PolicySource::TrustedEnvelope),
        };
        let result = r.to_tool_result(origin).unwrap();
        assert!(result.is_failed());
        let d = result.details();
        assert_eq!(d.query_id.as_ref().map(QueryId::as_str), Some("tidb_cpu"));
        assert_eq!(d.request_digest, r.request_digest);
        assert!(d.correction.as_ref().unwrap().allowed);
        let failure: Failure = r.into();
        assert_eq!(failure.error.class, FailureClass::InvalidArgument);
    }
}
