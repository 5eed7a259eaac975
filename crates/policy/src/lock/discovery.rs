//! Locking one discovery request: which metric names, label names, label values or
//! series exist within the policy's scope and window. Discovery runs only where the
//! signed policy grants it ([`crate::policy::DiscoveryGrant`]); the model's selector is
//! locked by the same code as a query's (depth pre-scan and parse, constructs, under
//! Manus no address matcher, the scope labels bound, printed and parsed back), a metric
//! name pattern becomes an anchored `__name__=~` matcher of that selector (RE2 syntax,
//! as Prometheus anchors it), and with no selector the scope selector alone is sent. So
//! a locked discovery request is never unscoped: its one `match[]` selector carries
//! every scope label of the policy's tier.
//!
//! For the same reason a pattern or selector whose own matchers all match the empty
//! string (`.*`, `{}`, `{job=~".*"}`) is taken as written: PromQL refuses such a
//! selector alone as one that would select every series, but the bound scope labels
//! make every locked selector non-empty. The values of `__name__` are the metric names
//! of the selector's series, as Prometheus' `/api/v1/label/__name__/values` answers.

use evidence_result::{Failure, Operation, PackageId, Provider, QueryId, RequestDigest};
use jiff::Timestamp;
use promql_parser::label::{METRIC_NAME, MatchOp, Matcher};
use promql_parser::parser::{Expr, VectorSelector};
use serde::Serialize;
use serde_json::{Map, Value};

use super::addresses::check_address_labels;
use super::anchored::{parse_scoped, scope_anchor};
use super::arguments::{arguments_object, read_query_id, whole};
use super::ask::{DiscoveryAsk, DiscoveryForm};
use super::code::Code;
use super::context::Ctx;
use super::fixed::extras_failure;
use super::query::check_query_id_allowed;
use super::types::{LockRejection, LockedQuery, ScopeBinding};
use crate::TrustedPolicy;
use crate::args::{MAX_EXPR_BYTES, json_kind};
use crate::promql::{self, ParseError};

/// The argument keys of a discovery request.
pub const DISCOVERY_KEYS: [&str; 5] = ["queryId", "discover", "selector", "pattern", "label"];

/// The longest metric name pattern, in bytes.
pub const MAX_PATTERN_BYTES: usize = 256;

/// A discovery request locked to the policy: the one scoped `match[]` selector, the
/// window, and the items the answer may list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedDiscovery {
    /// The model's name for the objective.
    pub query_id: QueryId,
    /// What is asked for.
    pub form: DiscoveryForm,
    /// The `match[]` selector: the model's selector (or none) with the pattern and every
    /// scope label bound, printed from its checked AST.
    pub selector: String,
    /// The window's start (the provider's index reads every block overlapping it).
    pub start: Timestamp,
    /// The window's end.
    pub end: Timestamp,
    /// Most items the answer lists.
    pub max_items: u32,
    /// The scope labels bound into the selector, with their policy values.
    pub scope: Vec<(String, String)>,
    /// The digest of the locked request.
    pub request_digest: RequestDigest,
}

impl LockedDiscovery {
    /// The window in seconds (at least 1).
    fn window_seconds(&self) -> i64 {
        self.end
            .as_second()
            .saturating_sub(self.start.as_second())
            .max(1)
    }

    /// The query that answers the discovery exactly over the window, the one the
    /// connectors run (as a range query of one point at the window's end, so every
    /// provider runs it as it runs a query):
    ///
    /// - `metric_names` and `metric_metadata`: `count by (__name__, <scope labels>) (last_over_time(<selector>[<window>s]))`;
    /// - `label_values`: the same `by (<label>, <scope labels>)`, the selector requiring
    ///   the label (`<label>!=""`);
    /// - `label_names` and `series`: `last_over_time(<selector>[<window>s])`, every series
    ///   with a sample in the window with its labels (`last_over_time` keeps the name).
    ///
    /// The scope labels are in every `by`, so each counted row states its scope and a
    /// provider that answered for another scope is seen in the answer.
    pub fn query(&self) -> LockedQuery {
        let window = self.window_seconds();
        let read = format!("last_over_time({}[{window}s])", self.selector);
        let by = |label: &str| {
            let mut labels = vec![label.to_owned()];
            labels.extend(
                self.scope
                    .iter()
                    .map(|(l, _)| l.clone())
                    .filter(|l| l != label),
            );
            format!("count by ({}) ({read})", labels.join(", "))
        };
        let expr = match &self.form {
            DiscoveryForm::MetricNames | DiscoveryForm::MetricMetadata => by("__name__"),
            DiscoveryForm::LabelValues { label } => by(label),
            DiscoveryForm::LabelNames | DiscoveryForm::Series => read,
        };
        LockedQuery {
            query_id: self.query_id.clone(),
            expr,
            start: self.end,
            end: self.end,
            step_seconds: u64::try_from(window).unwrap_or(1),
            unit: None,
            instance_ref: None,
            request_digest: self.request_digest,
            discovery: Some(DiscoveryAsk {
                form: self.form.clone(),
                selector: self.selector.clone(),
                start: self.start,
                end: self.end,
                max_items: self.max_items,
                scope: self.scope.clone(),
            }),
        }
    }
}

/// Locks a discovery request (`args`, the model's JSON object) against `policy`,
/// entirely locally. Refused with `discovery_not_granted` when the policy grants no
/// discovery; with `invalid_discovery` for an unknown form, a label where none belongs
/// or a missing or malformed one, or a selector that is not one plain vector selector;
/// with `invalid_pattern` for a pattern that is empty, too long or does not compile, or
/// that comes with a selector naming a metric already; with the
/// query codes for the selector itself (`promql_parse_error`, `promql_too_deep`,
/// `unsupported_promql`, `scope_violation` for a matcher on a scope label that is not
/// the policy's value, `address_label_matcher` under Manus).
pub fn lock_discovery(
    policy: &TrustedPolicy,
    args: &Value,
    scope: &[ScopeBinding],
) -> Result<LockedDiscovery, LockRejection> {
    let ctx = Ctx::new(policy, scope)?;
    let obj = arguments_object(args)?;
    let query_id = read_query_id(obj.get("queryId"), &[])
        .map_err(|(code, detail, hint)| whole(code, detail, &hint))?;
    lock_discovery_in(&ctx, obj, query_id)
}

/// True when the arguments of one query ask for a discovery (they carry `discover`).
pub(super) fn asks_discovery(obj: &Map<String, Value>) -> bool {
    obj.contains_key("discover")
}

/// Locks the discovery `obj` asks for, named `query_id`, within `ctx`.
pub(super) fn lock_discovery_in(
    ctx: &Ctx<'_>,
    obj: &Map<String, Value>,
    query_id: QueryId,
) -> Result<LockedDiscovery, LockRejection> {
    let policy = ctx.policy;
    let reject = |failure: Box<Failure>| LockRejection {
        query_id: Some(query_id.clone()),
        request_digest: None,
        failure,
    };
    let Some(grant) = policy.discovery else {
        return Err(reject(fail(
            Code::DiscoveryNotGranted,
            "the trusted policy of this request grants no discovery".to_owned(),
            "Query the metrics you know by name; discovery is not available for this ticket.",
        )));
    };
    if let Some(failure) = extras_failure(obj, &DISCOVERY_KEYS) {
        return Err(reject(Box::new(failure)));
    }
    check_query_id_allowed(ctx, &query_id).map_err(reject)?;
    let form = read_form(obj).map_err(reject)?;
    let pattern = read_pattern(obj, &form).map_err(reject)?;
    let selector = read_selector(obj.get("selector")).map_err(reject)?;
    let required = match &form {
        DiscoveryForm::LabelValues { label } => Some(label.as_str()),
        _ => None,
    };
    let selector = locked_selector(ctx, selector, pattern.as_deref(), required).map_err(reject)?;
    let request_digest = discovery_digest(policy, &query_id, &form, &selector).map_err(|e| {
        reject(fail(
            Code::TrustedPolicyRejected,
            format!("cannot compute the request digest: {e}"),
            "",
        ))
    })?;
    Ok(LockedDiscovery {
        query_id,
        form,
        selector,
        start: policy.window.start,
        end: policy.window.end,
        max_items: grant.max_items,
        scope: ctx
            .bindings
            .iter()
            .map(|(l, v)| ((*l).to_owned(), (*v).to_owned()))
            .collect(),
        request_digest,
    })
}

/// The failure of `code` with `detail` and the correction's `hint`.
fn fail(code: Code, detail: String, hint: &str) -> Box<Failure> {
    Box::new(code.failure(detail, hint))
}

fn read_form(obj: &Map<String, Value>) -> Result<DiscoveryForm, Box<Failure>> {
    let invalid = |detail: String, hint: &str| fail(Code::InvalidDiscovery, detail, hint);
    let forms = "Write one of metric_names, metric_metadata, label_names, label_values or series.";
    let form = match obj.get("discover") {
        Some(Value::String(s)) => s.as_str(),
        None => {
            return Err(invalid(
                "discover is missing".to_owned(),
                "Say what to discover: metric_names, metric_metadata, label_names, label_values or series.",
            ));
        }
        Some(other) => {
            return Err(invalid(
                format!("discover must be a string, not {}", json_kind(other)),
                forms,
            ));
        }
    };
    let label = obj.get("label");
    let form = match form {
        "metric_names" => DiscoveryForm::MetricNames,
        "metric_metadata" => DiscoveryForm::MetricMetadata,
        "label_names" => DiscoveryForm::LabelNames,
        "series" => DiscoveryForm::Series,
        "label_values" => {
            return match label {
                Some(Value::String(l)) if is_label_name(l) => {
                    Ok(DiscoveryForm::LabelValues { label: l.clone() })
                }
                Some(Value::String(l)) => Err(invalid(
                    format!("label {l:?} is not a label name"),
                    "Name one label: letters, digits and '_', not starting with a digit.",
                )),
                _ => Err(invalid(
                    "label_values needs the label whose values to list".to_owned(),
                    "Add \"label\": the label name, e.g. \"instance\".",
                )),
            };
        }
        other => {
            return Err(invalid(
                format!("discover {other:?} is not a discovery form"),
                forms,
            ));
        }
    };
    if label.is_some() {
        return Err(invalid(
            format!("label belongs to label_values only, not to {}", form.name()),
            "Remove label, or ask for label_values.",
        ));
    }
    Ok(form)
}

fn read_pattern(
    obj: &Map<String, Value>,
    form: &DiscoveryForm,
) -> Result<Option<String>, Box<Failure>> {
    let invalid = |detail: String, hint: &str| fail(Code::InvalidPattern, detail, hint);
    match obj.get("pattern") {
        None | Some(Value::Null) => Ok(None),
        Some(_) if !form.lists_names() => Err(invalid(
            format!(
                "pattern belongs to metric_names and metric_metadata only, not to {}",
                form.name()
            ),
            "Remove pattern, or put a matcher in the selector.",
        )),
        Some(Value::String(p)) if p.len() > MAX_PATTERN_BYTES => Err(invalid(
            format!("pattern is {} bytes, over {MAX_PATTERN_BYTES}", p.len()),
            "Write a shorter pattern, e.g. \"tikv_.*\".",
        )),
        Some(Value::String(p)) if p.is_empty() => Err(invalid(
            "pattern is empty: it matches only an empty metric name, which no series has"
                .to_owned(),
            "To list every metric name in scope, leave pattern out; to narrow them, write \
             one such as \"tikv_.*\".",
        )),
        Some(Value::String(p)) => Ok(Some(p.clone())),
        Some(other) => Err(invalid(
            format!("pattern must be a string, not {}", json_kind(other)),
            "Write the pattern as a string, e.g. \"tikv_.*\".",
        )),
    }
}

fn read_selector(value: Option<&Value>) -> Result<Option<&str>, Box<Failure>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() > MAX_EXPR_BYTES => Err(fail(
            Code::InvalidDiscovery,
            format!("selector is {} bytes, over {MAX_EXPR_BYTES}", s.len()),
            "Write a shorter selector.",
        )),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(fail(
            Code::InvalidDiscovery,
            format!("selector must be a string, not {}", json_kind(other)),
            "Write the selector as a string, e.g. \"{job=\\\"tikv\\\"}\".",
        )),
    }
}

/// The one `match[]` selector: the model's selector (a plain vector selector), the
/// pattern as a `__name__=~` matcher, every scope label bound; printed and parsed back.
/// A package that binds no scope label gets no discovery: its selector would be
/// unscoped.
fn locked_selector(
    ctx: &Ctx<'_>,
    selector: Option<&str>,
    pattern: Option<&str>,
    required: Option<&str>,
) -> Result<String, Box<Failure>> {
    let plain =
        "Write one vector selector, e.g. tikv_engine_size_bytes{job=\"tikv\"} or {job=\"tikv\"}.";
    if ctx.bindings.is_empty() {
        return Err(fail(
            Code::TrustedPolicyRejected,
            "the package binds no scope label, so a discovery request would not be scoped"
                .to_owned(),
            "",
        ));
    }
    let anchor = scope_anchor(ctx);
    let mut expr = match selector {
        Some(text) => parse_scoped(text, &anchor).map_err(|e| match e {
            ParseError::TooDeep(m) => fail(Code::PromqlTooDeep, m, plain),
            ParseError::Syntax(m) => fail(Code::PromqlParseError, m, plain),
        })?,
        None => Expr::VectorSelector(VectorSelector::default()),
    };
    let Expr::VectorSelector(vs) = &expr else {
        return Err(fail(
            Code::InvalidDiscovery,
            "the selector must be one vector selector, without functions, operators or ranges"
                .to_owned(),
            plain,
        ));
    };
    if vs.offset.is_some() || vs.at.is_some() {
        return Err(fail(
            Code::InvalidDiscovery,
            "the selector may not have offset or @: discovery reads the policy's window".to_owned(),
            "Remove offset and @.",
        ));
    }
    if let Some(pattern) = pattern {
        if let Some(name) = &vs.name {
            return Err(fail(
                Code::InvalidPattern,
                format!(
                    "the selector names the metric {name} and pattern filters metric names: \
                     a name cannot be given twice"
                ),
                "Remove pattern to discover only that metric, or remove the metric name from \
                 the selector and let pattern say which names to list.",
            ));
        }
        // Parsed beside the scope anchor: a pattern that matches the empty string (`.*`)
        // is a matcher like any other once the scope labels are bound.
        let quoted = pattern.replace('\\', "\\\\").replace('"', "\\\"");
        let matcher =
            promql::parse(&format!("{{__name__=~\"{quoted}\",{anchor}}}")).map_err(|e| {
                fail(
                    Code::InvalidPattern,
                    format!("pattern {pattern:?} does not compile: {e}"),
                    "Write an RE2 pattern; it matches whole names, e.g. \"tikv_.*\".",
                )
            })?;
        if let (Expr::VectorSelector(with), Expr::VectorSelector(vs)) = (matcher, &mut expr) {
            vs.matchers.matchers.extend(
                with.matchers
                    .matchers
                    .into_iter()
                    .filter(|m| m.name == METRIC_NAME),
            );
        }
    }
    let constructs = "Write one vector selector with =, !=, =~ and !~ matchers, without `or`.";
    promql::check_constructs(&expr).map_err(|m| fail(Code::UnsupportedPromql, m, constructs))?;
    if ctx.policy.provider == Provider::Manus {
        check_address_labels(ctx, &expr)?;
    }
    promql::bind_labels(&mut expr, &ctx.bindings).map_err(|c| {
        fail(
            Code::ScopeViolation,
            format!(
                "the selector's matcher {} on scope label {} selects outside this ticket's scope",
                c.matcher, c.label
            ),
            &format!(
                "Remove the matcher on {}: the platform binds it to this ticket's scope.",
                c.label
            ),
        )
    })?;
    // The label whose values are listed is required (`label!=""`), unless the selector
    // requires it already: a scope label (the binding requires it), the name of a named
    // selector (`up{...}` cannot also hold a name matcher), or a matcher on the label
    // that does not match the empty value.
    if let (Some(label), Expr::VectorSelector(vs)) = (required, &mut expr)
        && !ctx.bindings.iter().any(|(l, _)| *l == label)
        && !(label == METRIC_NAME && vs.name.is_some())
        && !vs
            .matchers
            .matchers
            .iter()
            .any(|m| m.name == label && !m.is_match(""))
    {
        vs.matchers
            .matchers
            .push(Matcher::new(MatchOp::NotEqual, label, ""));
    }
    promql::print_checked(&mut expr).map_err(|m| fail(Code::UnsupportedPromql, m, constructs))
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 128
}

/// The canonical request a discovery digest is computed over (fields in RFC 8785 key
/// order, strings only: its compact JSON is its canonical JSON).
#[derive(Serialize)]
struct DiscoveryDigest<'a> {
    discover: &'a str,
    label: Option<&'a str>,
    operation: Operation,
    package: &'a PackageId,
    provider: Provider,
    query_id: &'a QueryId,
    selector: &'a str,
    v: u32,
    window_end: &'a Timestamp,
    window_start: &'a Timestamp,
}

fn discovery_digest(
    policy: &TrustedPolicy,
    query_id: &QueryId,
    form: &DiscoveryForm,
    selector: &str,
) -> Result<RequestDigest, serde_json::Error> {
    let label = match form {
        DiscoveryForm::LabelValues { label } => Some(label.as_str()),
        _ => None,
    };
    let json = serde_json::to_string(&DiscoveryDigest {
        discover: form.name(),
        label,
        operation: policy.operation,
        package: &policy.package,
        provider: policy.provider,
        query_id,
        selector,
        v: 1,
        window_end: &policy.window.end,
        window_start: &policy.window.start,
    })?;
    Ok(RequestDigest::from(evidence_result::Digest::sha256(
        json.as_bytes(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::fixtures::{clinic, scope};
    use crate::policy::DiscoveryGrant;
    use proptest::prelude::*;
    use serde_json::json;

    fn granted() -> TrustedPolicy {
        let mut p = clinic();
        p.discovery = Some(DiscoveryGrant { max_items: 20 });
        p
    }

    fn locked(args: Value) -> Result<LockedDiscovery, LockRejection> {
        lock_discovery(&granted(), &args, &scope())
    }

    fn code(args: Value) -> String {
        locked(args).unwrap_err().code().as_str().to_owned()
    }

    #[test]
    fn a_policy_without_the_grant_allows_no_discovery() {
        let args = json!({"queryId": "q", "discover": "metric_names"});
        let err = lock_discovery(&clinic(), &args, &scope()).unwrap_err();
        assert_eq!(err.code().as_str(), "discovery_not_granted");
        assert_eq!(err.class(), evidence_result::FailureClass::PolicyViolation);
    }

    #[test]
    fn the_selector_is_scoped_and_the_pattern_anchored_by_prometheus() {
        let id = clinic().cluster.id;
        let none = locked(json!({"queryId": "q", "discover": "metric_names"})).unwrap();
        assert_eq!(none.selector, format!("{{cluster_id=\"{id}\"}}"));
        assert_eq!(none.max_items, 20);
        let job = locked(json!({"queryId": "q", "discover": "label_names",
                                "selector": "{job=\"tikv\"}"}))
        .unwrap();
        assert_eq!(
            job.selector,
            format!("{{cluster_id=\"{id}\",job=\"tikv\"}}")
        );
        let pattern = locked(json!({"queryId": "q", "discover": "metric_names",
                                    "pattern": "tikv_.*", "selector": "{job=\"tikv\"}"}))
        .unwrap();
        assert_eq!(
            pattern.selector,
            format!("{{__name__=~\"tikv_.*\",cluster_id=\"{id}\",job=\"tikv\"}}")
        );
        let values = locked(json!({"queryId": "q", "discover": "label_values",
                                   "label": "instance", "selector": "tikv_engine_size_bytes"}))
        .unwrap();
        assert_eq!(
            values.selector,
            format!("tikv_engine_size_bytes{{cluster_id=\"{id}\",instance!=\"\"}}")
        );
        assert!(values.start < values.end);
        // Distinct requests, distinct digests; the same request, the same digest.
        let series = locked(json!({"queryId": "q", "discover": "series",
                                   "selector": "tikv_engine_size_bytes"}))
        .unwrap();
        assert_ne!(series.request_digest, values.request_digest);
        assert_eq!(
            locked(json!({"queryId": "q", "discover": "series",
                          "selector": "tikv_engine_size_bytes"}))
            .unwrap()
            .request_digest,
            series.request_digest
        );
    }

    #[test]
    fn each_form_runs_as_an_exact_count_over_the_window() {
        let id = clinic().cluster.id;
        let window = clinic().window.seconds();
        let q = |args: Value| locked(args).unwrap().query();
        let names = q(json!({"queryId": "q", "discover": "metric_names", "pattern": "tikv_.*"}));
        assert_eq!(
            names.expr,
            format!(
                "count by (__name__, cluster_id) (last_over_time({{__name__=~\"tikv_.*\",cluster_id=\"{id}\"}}[{window}s]))"
            )
        );
        // metric_metadata counts the names the same way; only its form differs (and so
        // its digest): the connectors then ask the metadata of the names it lists.
        let described = q(json!({"queryId": "q", "discover": "metric_metadata",
                                 "pattern": "tikv_.*"}));
        assert_eq!(described.expr, names.expr);
        assert_ne!(described.request_digest, names.request_digest);
        assert_eq!(
            described.discovery.unwrap().form,
            DiscoveryForm::MetricMetadata
        );
        // One point, at the window's end, reading the window and nothing before it.
        assert_eq!(
            (names.start, names.end),
            (clinic().window.end, clinic().window.end)
        );
        assert_eq!(names.step_seconds, window);
        assert_eq!(names.points(), 1);
        let ask = names.discovery.as_ref().unwrap();
        assert_eq!(ask.max_items, 20);
        assert_eq!(ask.scope, vec![("cluster_id".to_owned(), id.clone())]);
        assert_eq!(
            (ask.start, ask.end),
            (clinic().window.start, clinic().window.end)
        );
        let values = q(json!({"queryId": "q", "discover": "label_values", "label": "instance"}));
        assert_eq!(
            values.expr,
            format!(
                "count by (instance, cluster_id) (last_over_time({{cluster_id=\"{id}\",instance!=\"\"}}[{window}s]))"
            )
        );
        // The values of a scope label: the scope binds it already.
        let scope = q(json!({"queryId": "q", "discover": "label_values", "label": "cluster_id"}));
        assert_eq!(
            scope.expr,
            format!("count by (cluster_id) (last_over_time({{cluster_id=\"{id}\"}}[{window}s]))")
        );
        for form in ["series", "label_names"] {
            let read = q(json!({"queryId": "q", "discover": form, "selector": "up"}));
            assert_eq!(
                read.expr,
                format!("last_over_time(up{{cluster_id=\"{id}\"}}[{window}s])")
            );
        }
        // What runs parses back as PromQL.
        for form in [names, values, scope] {
            promql::parse(&form.expr).unwrap();
        }
    }

    #[test]
    fn discovery_arrives_through_lock_for_every_provider() {
        use crate::lock::fixtures::wetech;
        use evidence_result::PolicySource;
        let source = PolicySource::TrustedEnvelope;
        let args = json!({"queries": [
            {"queryId": "names", "discover": "metric_names"},
            {"queryId": "cpu", "expr": "up"},
            {"queryId": "bad", "discover": "metric_names", "pattern": "("}
        ]});
        let batch = crate::lock(&granted(), source, &args, &scope()).unwrap();
        let [
            super::super::LockedItem::Ready(names),
            super::super::LockedItem::Ready(cpu),
            bad,
        ] = batch.items.as_slice()
        else {
            panic!("{:?}", batch.items)
        };
        assert!(names.discovery.is_some() && cpu.discovery.is_none());
        assert_eq!(
            bad.rejected_item().unwrap().error.unwrap().code.as_str(),
            "invalid_pattern"
        );
        // Without the grant, the item alone is refused.
        let batch = crate::lock(&clinic(), source, &args, &scope()).unwrap();
        assert_eq!(
            batch.items[0]
                .rejected_item()
                .unwrap()
                .error
                .unwrap()
                .code
                .as_str(),
            "discovery_not_granted"
        );
        // Wetech: the query id is one the platform authorized, for a discovery too.
        let mut w = wetech();
        w.discovery = Some(DiscoveryGrant { max_items: 5 });
        let one = |id: &str| {
            crate::lock(
                &w,
                source,
                &json!({"queryId": id, "discover": "label_names"}),
                &scope(),
            )
        };
        assert!(
            one("tidb_cpu")
                .unwrap()
                .single()
                .unwrap()
                .discovery
                .is_some()
        );
        assert_eq!(
            one("other").unwrap_err().code().as_str(),
            "query_id_not_allowed"
        );
    }

    #[test]
    fn bad_discoveries_are_refused_with_their_codes() {
        let d = |extra: Value| {
            let mut args = json!({"queryId": "q", "discover": "metric_names"});
            args.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            code(args)
        };
        assert_eq!(
            d(json!({"selector": "{cluster_id=\"SaaS02\"}"})),
            "scope_violation"
        );
        assert_eq!(
            d(json!({"selector": "{job=\"tikv\",cluster_id=~\".*\"}"})),
            "scope_violation"
        );
        // A matcher on the scope label that is not its value, even one that matches
        // everything: the platform binds the scope label.
        assert_eq!(
            d(json!({"selector": "{cluster_id=~\".*\"}"})),
            "scope_violation"
        );
        assert_eq!(
            d(json!({"selector": "{job=\"tikv\",cluster_id!=\"x\"}"})),
            "scope_violation"
        );
        assert_eq!(d(json!({"pattern": "("})), "invalid_pattern");
        assert_eq!(
            d(json!({"pattern": "x".repeat(MAX_PATTERN_BYTES + 1)})),
            "invalid_pattern"
        );
        assert_eq!(d(json!({"pattern": 7})), "invalid_pattern");
        assert_eq!(d(json!({"selector": "rate(x[1m])"})), "invalid_discovery");
        // What the scope anchor lets parse is still checked as one selector.
        assert_eq!(
            d(json!({"selector": "sum({job=~\".*\"})"})),
            "invalid_discovery"
        );
        assert_eq!(d(json!({"selector": "x[5m]"})), "invalid_discovery");
        assert_eq!(d(json!({"selector": "x offset 5m"})), "invalid_discovery");
        assert_eq!(
            d(json!({"selector": "{job=\"a\" or job=\"b\"}"})),
            "unsupported_promql"
        );
        assert_eq!(d(json!({"selector": "{job="})), "promql_parse_error");
        assert_eq!(
            d(json!({"selector": "(".repeat(200) + "x" + &")".repeat(200)})),
            "promql_too_deep"
        );
        assert_eq!(d(json!({"label": "instance"})), "invalid_discovery");
        assert_eq!(d(json!({"cluster": "SaaS02"})), "forbidden_argument");
        // The items an answer lists are the policy's: `limit` is not the model's to lift.
        assert_eq!(d(json!({"limit": 10})), "forbidden_argument");
        assert_eq!(d(json!({"colour": "red"})), "unknown_argument");
        assert_eq!(
            code(json!({"queryId": "q", "discover": "everything"})),
            "invalid_discovery"
        );
        assert_eq!(code(json!({"queryId": "q"})), "invalid_discovery");
        assert_eq!(
            code(json!({"queryId": "q", "discover": "label_values"})),
            "invalid_discovery"
        );
        assert_eq!(
            code(json!({"queryId": "q", "discover": "label_values", "label": "1x"})),
            "invalid_discovery"
        );
        assert_eq!(
            code(json!({"queryId": "q", "discover": "series", "pattern": "x"})),
            "invalid_pattern"
        );
        assert_eq!(code(json!({"discover": "series"})), "missing_query_id");
        // A package that binds no scope label gets no discovery at all.
        let err = lock_discovery(
            &granted(),
            &json!({"queryId": "q", "discover": "series"}),
            &[],
        )
        .unwrap_err();
        assert_eq!(err.code().as_str(), "trusted_policy_rejected");
    }

    /// The model's natural question "which metric names are there": the values of
    /// `__name__`, as Prometheus' `/api/v1/label/__name__/values` answers them, with or
    /// without a selector, a named one included. Each locks, scoped, and runs as the
    /// count of series per name, exactly as `metric_names` does.
    #[test]
    fn the_values_of_the_name_label_are_the_metric_names_in_scope() {
        let id = clinic().cluster.id;
        let window = clinic().window.seconds();
        let values = |selector: Option<&str>| {
            let mut args = json!({"queryId": "q", "discover": "label_values", "label": "__name__"});
            if let Some(selector) = selector {
                args["selector"] = json!(selector);
            }
            locked(args).unwrap_or_else(|e| panic!("{selector:?}: {:?}", e.failure))
        };
        let all = values(None);
        assert_eq!(
            all.selector,
            format!("{{__name__!=\"\",cluster_id=\"{id}\"}}")
        );
        assert_eq!(
            all.query().expr,
            format!(
                "count by (__name__, cluster_id) (last_over_time({{__name__!=\"\",cluster_id=\"{id}\"}}[{window}s]))"
            )
        );
        // A named selector requires the name already: nothing is added to it.
        assert_eq!(
            values(Some("tikv_engine_size_bytes")).selector,
            format!("tikv_engine_size_bytes{{cluster_id=\"{id}\"}}")
        );
        assert_eq!(
            values(Some("up{job=\"tikv\"}")).selector,
            format!("up{{cluster_id=\"{id}\",job=\"tikv\"}}")
        );
        // So does a name matcher that cannot match the empty name.
        assert_eq!(
            values(Some("{__name__=~\"tikv_.*\"}")).selector,
            format!("{{__name__=~\"tikv_.*\",cluster_id=\"{id}\"}}")
        );
        assert_eq!(
            values(Some("{job=\"tikv\"}")).selector,
            format!("{{__name__!=\"\",cluster_id=\"{id}\",job=\"tikv\"}}")
        );
        // Any label a matcher already requires is not required twice.
        let instance = locked(json!({"queryId": "q", "discover": "label_values",
                                     "label": "instance", "selector": "{instance=~\"tikv-.*\"}"}))
        .unwrap();
        assert_eq!(
            instance.selector,
            format!("{{cluster_id=\"{id}\",instance=~\"tikv-.*\"}}")
        );
    }

    /// A pattern or a selector whose own matchers all match the empty string (`.*`,
    /// `a*`, `(|x)`, `.?`; `{}`, `{job=~".*"}`, `{__name__=~".*"}`, `{job=""}`) is not
    /// an unscoped request: the scope labels make every locked selector non-empty. Each
    /// locks, for every form it belongs to. Where a request cannot be answered as
    /// written, the correction names the form that answers it.
    #[test]
    fn patterns_and_selectors_that_match_the_empty_string_are_scoped_not_refused() {
        let id = clinic().cluster.id;
        for pattern in [".*", "a*", "(|x)", ".?", "(tikv_.*)?"] {
            for form in ["metric_names", "metric_metadata"] {
                let names = locked(json!({"queryId": "q", "discover": form, "pattern": pattern}))
                    .unwrap_or_else(|e| panic!("{form} {pattern}: {:?}", e.failure));
                let quoted = pattern.replace('\\', "\\\\");
                assert_eq!(
                    names.selector,
                    format!("{{__name__=~\"{quoted}\",cluster_id=\"{id}\"}}")
                );
            }
            let with_job = locked(json!({"queryId": "q", "discover": "metric_names",
                                         "pattern": pattern, "selector": "{job=\"tikv\"}"}))
            .unwrap();
            assert!(
                with_job.selector.contains("job=\"tikv\""),
                "{}",
                with_job.selector
            );
        }
        let forms = [
            json!({"discover": "metric_names"}),
            json!({"discover": "metric_metadata"}),
            json!({"discover": "label_names"}),
            json!({"discover": "series"}),
            json!({"discover": "label_values", "label": "job"}),
            json!({"discover": "label_values", "label": "__name__"}),
        ];
        for selector in [
            "{}",
            "{job=~\".*\"}",
            "{__name__=~\".*\"}",
            "{job=\"\"}",
            "{job=~\".*\",instance!~\"x\"}",
        ] {
            for form in &forms {
                let mut args = form.clone();
                args["queryId"] = json!("q");
                args["selector"] = json!(selector);
                let got =
                    locked(args).unwrap_or_else(|e| panic!("{form} {selector}: {:?}", e.failure));
                assert!(
                    got.selector.contains(&format!("cluster_id=\"{id}\"")),
                    "{}",
                    got.selector
                );
                promql::parse(&got.query().expr).unwrap();
            }
        }
        // The empty pattern matches only an empty name, which no series has: refused,
        // the correction naming what lists every name.
        let empty =
            locked(json!({"queryId": "q", "discover": "metric_names", "pattern": ""})).unwrap_err();
        assert_eq!(empty.code().as_str(), "invalid_pattern");
        assert!(
            empty
                .failure
                .correction
                .instruction
                .contains("leave pattern out"),
            "{:?}",
            empty.failure
        );
        // A pattern with a selector that names one metric already: the correction says
        // which form answers, never that durations or numbers are at fault.
        let named = locked(json!({"queryId": "q", "discover": "metric_names",
                                  "pattern": "tikv_.*", "selector": "up"}))
        .unwrap_err();
        assert_eq!(named.code().as_str(), "invalid_pattern");
        let said = format!(
            "{} {}",
            named.failure.detail_error, named.failure.correction.instruction
        );
        assert!(!said.contains("durations"), "{said}");
        assert!(
            said.contains("selector") && said.contains("pattern"),
            "{said}"
        );
    }

    /// A matcher of a generated selector.
    fn matcher() -> impl Strategy<Value = String> {
        (
            prop_oneof![
                Just("job"),
                Just("instance"),
                Just("cluster_id"),
                Just("keyspace_id"),
                Just("__name__")
            ],
            prop_oneof![Just("="), Just("!="), Just("=~"), Just("!~")],
            prop_oneof![
                Just("tikv"),
                Just("SaaS01"),
                Just("SaaS02"),
                Just(".*"),
                Just(""),
                Just("tikv_.*|tidb_.*")
            ],
        )
            .prop_map(|(label, op, value)| format!("{label}{op}\"{value}\""))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        /// Never an unscoped discovery request: whatever selector and pattern the model
        /// writes, a locked request's one selector holds exactly the policy's
        /// `cluster_id="SaaS01"` on the scope label, and no other matcher on it.
        #[test]
        fn a_locked_discovery_is_always_scoped(
            name in proptest::option::of(prop_oneof![Just("tikv_engine_size_bytes"), Just("up")]),
            matchers in proptest::collection::vec(matcher(), 0..4),
            pattern in proptest::option::of(prop_oneof![Just("tikv_.*"), Just(".*"), Just("("), Just("a|b")]),
        ) {
            let selector = format!("{}{{{}}}", name.unwrap_or_default(), matchers.join(","));
            let args = json!({"queryId": "q", "discover": "metric_names",
                              "selector": selector, "pattern": pattern});
            if let Ok(locked) = locked(args) {
                let Ok(Expr::VectorSelector(vs)) = promql::parse(&locked.selector) else {
                    return Err(TestCaseError::fail(format!("not one selector: {}", locked.selector)));
                };
                let on_scope: Vec<String> = vs
                    .matchers
                    .matchers
                    .iter()
                    .filter(|m| m.name == "cluster_id")
                    .map(ToString::to_string)
                    .collect();
                prop_assert_eq!(on_scope, vec!["cluster_id=\"SaaS01\"".to_owned()]);
                prop_assert!(vs.matchers.or_matchers.is_empty());
            }
        }

        /// What a model naturally asks locks: every form with a generated label
        /// (`__name__` included), a generated selector (a metric name or none, matchers
        /// that match the empty string or not) and a generated pattern (some matching
        /// the empty string) is answered, scoped, unless it asks what Prometheus itself
        /// refuses (a metric name given twice: by the selector's name and by a name
        /// matcher or a pattern), and then the correction names what to change; no
        /// refusal blames durations or numbers, or an empty selector.
        #[test]
        fn every_natural_discovery_locks_scoped(
            name in proptest::option::of(prop_oneof![Just("tikv_engine_size_bytes"), Just("up")]),
            matchers in proptest::collection::vec(natural_matcher(), 0..3),
            form in prop_oneof![
                Just(json!({"discover": "metric_names"})),
                Just(json!({"discover": "metric_metadata"})),
                Just(json!({"discover": "label_names"})),
                Just(json!({"discover": "series"})),
                prop_oneof![Just("__name__"), Just("job"), Just("instance"), Just("cluster_id")]
                    .prop_map(|label| json!({"discover": "label_values", "label": label})),
            ],
            pattern in proptest::option::of(prop_oneof![
                Just("tikv_.*"), Just(".*"), Just("a*"), Just("(|x)"), Just(".?"),
                Just("(tikv_.*)?"), Just(".+"),
            ]),
        ) {
            let selector = format!("{}{{{}}}", name.unwrap_or_default(), matchers.join(","));
            let mut args = form.clone();
            args["queryId"] = json!("q");
            args["selector"] = json!(selector);
            let names = form["discover"] == "metric_names" || form["discover"] == "metric_metadata";
            let pattern = pattern.filter(|_| names);
            if let Some(p) = pattern {
                args["pattern"] = json!(p);
            }
            let name_twice = name.is_some()
                && (pattern.is_some() || matchers.iter().any(|m| m.starts_with("__name__")));
            match locked(args) {
                Ok(got) => {
                    prop_assert!(!name_twice, "{} locked: {}", selector, got.selector);
                    let Ok(Expr::VectorSelector(vs)) = promql::parse(&got.selector) else {
                        return Err(TestCaseError::fail(format!("not one selector: {}", got.selector)));
                    };
                    prop_assert!(vs.matchers.matchers.iter().any(|m| m.to_string() == "cluster_id=\"SaaS01\""));
                    if let Some(p) = pattern {
                        prop_assert!(vs.matchers.matchers.iter().any(|m| m.name == "__name__" && m.value == p), "{}", got.selector);
                    }
                    if let Some(label) = form["label"].as_str() {
                        // The listed label is required: by the scope, the name, or a matcher.
                        let required = label == "cluster_id"
                            || (label == "__name__" && vs.name.is_some())
                            || vs.matchers.matchers.iter().any(|m| m.name == label && !m.is_match(""));
                        prop_assert!(required, "{}", got.selector);
                    }
                    promql::parse(&got.query().expr).map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
                Err(refused) => {
                    let said = format!("{} {}", refused.failure.detail_error, refused.failure.correction.instruction);
                    prop_assert!(name_twice, "{} refused: {}", selector, said);
                    prop_assert!(!said.contains("durations") && !said.contains("non-empty matcher"), "{}", said);
                }
            }
        }
    }

    /// A matcher of a model's natural selector: on a label or the name, some matching
    /// the empty string, none on the scope label.
    fn natural_matcher() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("job=\"tikv\""),
            Just("job=~\".*\""),
            Just("job=\"\""),
            Just("instance!~\"10[.].*\""),
            Just("instance=~\".+\""),
            Just("__name__=~\".*\""),
            Just("__name__=~\"tikv_.*|up\""),
            Just("__name__!=\"up\""),
        ]
    }
}
