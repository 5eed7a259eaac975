//! Locking one query object, as a pipeline of named steps: read the arguments; refuse keys
//! the platform fixes and unauthorized Wetech query ids; validate `expr`, `step`, `unit`
//! and `instanceRef`; parse the PromQL and check its constructs (under Manus, also that
//! it neither tests nor moves an instance address); check the step against
//! the minimum and the points limit; check the read window; bind the scope labels; and
//! compute the request digest. A rejection at any step carries the digest of the
//! request as sent.

use std::time::Duration;

use evidence_result::{Failure, Provider, QueryId, RequestDigest};
use promql_parser::parser::Expr;
use serde_json::{Map, Value};

use super::addresses::check_address_labels;
use super::code::Code;
use super::context::Ctx;
use super::digest::{SentFields, locked_digest, rejected_digest};
use super::fixed::{Spec, extras_failure, quoted_list};
use super::types::{LockRejection, LockedQuery, points};
use crate::args::{InstanceRef, MAX_EXPR_BYTES, Step, Unit, json_kind};
use crate::promql::{self, LabelConflict, ParseError, ReadBounds, WindowIssue};

/// A field value that is either valid or the code and message of its rejection.
type Field<T> = Result<T, (Code, String)>;

/// Locks one query object. `query_id` has been checked by the caller.
pub(super) fn lock_query(
    ctx: &Ctx<'_>,
    spec: &Spec,
    query_id: QueryId,
    obj: &Map<String, Value>,
) -> Result<LockedQuery, LockRejection> {
    let fields = Fields::read(ctx, spec, obj);
    let reject = |failure: Box<Failure>| LockRejection {
        query_id: Some(query_id.clone()),
        request_digest: fields.rejected_digest(ctx, spec, &query_id, obj),
        failure,
    };
    check_keys(ctx, spec, &query_id, obj).map_err(reject)?;
    let valid = fields.validate().map_err(reject)?;
    let ast = fields.checked_ast().map_err(reject)?;
    if spec.sealed_addresses {
        check_address_labels(ctx, ast).map_err(reject)?;
    }
    let step_seconds = step_seconds(ctx, valid.step).map_err(reject)?;
    check_window(ctx, ast, step_seconds).map_err(reject)?;
    let expr = bind_scope(ctx, ast, step_seconds).map_err(reject)?;
    let unit = valid.unit.map(String::from);
    let instance_ref = valid.instance_ref.map(String::from);
    let request_digest = locked_digest(
        ctx.policy,
        &query_id,
        &expr,
        step_seconds,
        unit.as_deref(),
        instance_ref.as_deref(),
    )
    .map_err(|e| {
        reject(Box::new(Code::TrustedPolicyRejected.failure(
            format!("cannot compute the request digest: {e}"),
            "",
        )))
    })?;
    Ok(LockedQuery {
        query_id,
        expr,
        start: ctx.policy.window.start,
        end: ctx.policy.window.end,
        step_seconds,
        unit,
        instance_ref,
        discovery: None,
        request_digest,
    })
}

/// The model's fields of one query, each valid or with its rejection, read once.
struct Fields<'o> {
    expr: Field<&'o str>,
    step: Field<Option<Step>>,
    unit: Field<Option<Unit>>,
    instance_ref: Field<Option<InstanceRef>>,
    /// The parsed expression, when `expr` is valid.
    parsed: Option<Result<Expr, ParseError>>,
    /// The step in seconds (the default when none is given), when `step` is valid.
    resolved_step: Option<u64>,
}

/// The valid optional fields of a query.
struct Valid {
    step: Option<Step>,
    unit: Option<Unit>,
    instance_ref: Option<InstanceRef>,
}

impl<'o> Fields<'o> {
    /// Step 1: reads `expr`, `step`, `unit` and `instanceRef`, and parses a valid `expr`.
    fn read(ctx: &Ctx<'_>, spec: &Spec, obj: &'o Map<String, Value>) -> Self {
        let expr = read_expr(obj.get("expr"));
        let step = match obj.get("step") {
            None | Some(Value::Null) => Ok(None),
            Some(v) => Step::from_json(v)
                .map(Some)
                .map_err(|m| (Code::InvalidStep, m)),
        };
        let unit = read_unit(obj.get("unit"), spec.unit_required);
        let instance_ref = if spec.instance_ref {
            read_instance_ref(obj.get("instanceRef"))
        } else {
            Ok(None)
        };
        let parsed = expr.as_ref().ok().map(|e| promql::parse(e));
        let resolved_step = step
            .as_ref()
            .ok()
            .map(|s| s.map_or(ctx.default_step, Step::seconds));
        Fields {
            expr,
            step,
            unit,
            instance_ref,
            parsed,
            resolved_step,
        }
    }

    /// Step 3: the first invalid field, in the order `expr`, `step`, `unit`,
    /// `instanceRef`, as a failure whose hint repeats the problem.
    fn validate(&self) -> Result<Valid, Box<Failure>> {
        let field = |(code, message): (Code, String)| {
            let hint = format!("Fix it: {message}.");
            Box::new(code.failure(message, &hint))
        };
        self.expr.clone().map_err(field)?;
        Ok(Valid {
            step: self.step.clone().map_err(field)?,
            unit: self.unit.clone().map_err(field)?,
            instance_ref: self.instance_ref.clone().map_err(field)?,
        })
    }

    /// Step 4: the parsed expression, checked for unsupported constructs.
    fn checked_ast(&self) -> Result<&Expr, Box<Failure>> {
        let ast = match &self.parsed {
            Some(Ok(ast)) => ast,
            Some(Err(ParseError::TooDeep(message))) => {
                return Err(Box::new(Code::PromqlTooDeep.failure(
                    message.clone(),
                    "Write the expression with less nesting: drop redundant parentheses and repeated unary minus, and split deep compositions into separate queries.",
                )));
            }
            Some(Err(ParseError::Syntax(message))) => {
                return Err(Box::new(Code::PromqlParseError.failure(
                    message.clone(),
                    "Correct the PromQL syntax at the reported position.",
                )));
            }
            None => {
                return Err(Box::new(Code::InvalidExpr.failure(
                    "`expr` is missing".to_owned(),
                    "Send the PromQL expression in `expr`.",
                )));
            }
        };
        promql::check_constructs(ast).map_err(|m| {
            Code::UnsupportedPromql.failure(m, "Rewrite the expression without it.")
        })?;
        Ok(ast)
    }

    /// The digest of the request as sent: the model's expression as printed from its AST
    /// (its raw JSON when it does not parse), valid values normalized, invalid ones and
    /// any extra fields as sent. Computed only when a rejection happens.
    fn rejected_digest(
        &self,
        ctx: &Ctx<'_>,
        spec: &Spec,
        query_id: &QueryId,
        obj: &Map<String, Value>,
    ) -> Option<RequestDigest> {
        let raw = |key: &str| obj.get(key).cloned().unwrap_or(Value::Null);
        let sent = SentFields {
            expr: match &self.parsed {
                Some(Ok(ast)) => Value::String(ast.to_string()),
                _ => raw("expr"),
            },
            step: self.resolved_step.map_or_else(|| raw("step"), Value::from),
            unit: match &self.unit {
                Ok(u) => u.as_ref().map_or(Value::Null, |u| Value::from(u.as_str())),
                Err(_) => raw("unit"),
            },
            instance_ref: match &self.instance_ref {
                Ok(r) => r.as_ref().map_or(Value::Null, |r| Value::from(r.as_str())),
                Err(_) => raw("instanceRef"),
            },
            extra: obj
                .iter()
                .filter(|(k, _)| !spec.keys.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        };
        rejected_digest(ctx.policy, query_id, sent)
    }
}

fn read_expr(value: Option<&Value>) -> Field<&str> {
    match value {
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
    }
}

fn read_unit(value: Option<&Value>, required: bool) -> Field<Option<Unit>> {
    match value {
        None | Some(Value::Null) if required => Err((
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
    }
}

fn read_instance_ref(value: Option<&Value>) -> Field<Option<InstanceRef>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => InstanceRef::new(s.as_str())
            .map(Some)
            .map_err(|m| (Code::InvalidInstanceRef, m)),
        Some(v) => Err((
            Code::InvalidInstanceRef,
            format!("`instanceRef` must be a string, not {}", json_kind(v)),
        )),
    }
}

/// Step 2: keys the platform fixes or does not know, and (Wetech) a query id outside the
/// ticket's allow-list.
fn check_keys(
    ctx: &Ctx<'_>,
    spec: &Spec,
    query_id: &QueryId,
    obj: &Map<String, Value>,
) -> Result<(), Box<Failure>> {
    if let Some(f) = extras_failure(obj, spec.keys) {
        return Err(Box::new(f));
    }
    check_query_id_allowed(ctx, query_id)
}

/// Under Wetech, a query id outside the ticket's allow-list is refused (queries and
/// discoveries alike).
pub(super) fn check_query_id_allowed(
    ctx: &Ctx<'_>,
    query_id: &QueryId,
) -> Result<(), Box<Failure>> {
    let policy = ctx.policy;
    if policy.provider == Provider::Wetech && !policy.wetech_query_ids.contains(query_id) {
        let allowed = quoted_list(policy.wetech_query_ids.iter().map(QueryId::as_str));
        return Err(Box::new(Code::QueryIdNotAllowed.failure(
            format!("queryId `{query_id}` is not authorized for this ticket"),
            &format!("Use one of the query ids the platform authorized: {allowed}."),
        )));
    }
    Ok(())
}

/// Step 5: the step in seconds: the default when none is given, otherwise at least the
/// platform's minimum and within the points limit.
fn step_seconds(ctx: &Ctx<'_>, step: Option<Step>) -> Result<u64, Box<Failure>> {
    let Some(step) = step else {
        return Ok(ctx.default_step);
    };
    let limits = &ctx.policy.limits;
    let s = step.seconds();
    if s < limits.min_step.as_secs() {
        return Err(Box::new(Code::StepBelowMinimum.failure(
            format!(
                "step {s}s is below the platform's minimum step of {}s",
                limits.min_step.as_secs()
            ),
            &format!("Use a step of at least {}s.", ctx.smallest_step),
        )));
    }
    let n = points(ctx.window_seconds, s);
    if n > u64::from(limits.max_points_per_series) {
        return Err(Box::new(Code::TooManyPoints.failure(
            format!(
                "step {s}s gives {n} points per series over the {}s window, more than the {} allowed",
                ctx.window_seconds, limits.max_points_per_series
            ),
            &format!("Use a step of at least {}s.", ctx.smallest_step),
        )));
    }
    Ok(s)
}

/// Step 6: everything the expression reads (ranges, subqueries, offsets, `@`) stays
/// within the policy window and its look-back, and subqueries within the points limit
/// (a subquery without a step counted at the query's step, which step 7 writes into it).
fn check_window(ctx: &Ctx<'_>, ast: &Expr, step_seconds: u64) -> Result<(), Box<Failure>> {
    let policy = ctx.policy;
    let b = &ReadBounds {
        step_ms: u128::from(step_seconds) * 1000,
        ..ctx.bounds
    };
    let failure = |issue| {
        match issue {
        WindowIssue::Outside {
            construct,
            from,
            to,
        } => Code::WindowViolation.failure(
            format!(
                "{construct} reads from {} to {}, outside what the platform allows: {}",
                Ctx::format_ms(from),
                Ctx::format_ms(to),
                ctx.window_text()
            ),
            "Shorten the range, subquery range or offset, and drop negative offsets, so that reads stay within the window and its look-back.",
        ),
        WindowIssue::AtOutside { construct, at } => Code::WindowViolation.failure(
            format!(
                "{construct} is evaluated @ {}, outside the window {} to {}",
                Ctx::format_ms(at),
                policy.window.start,
                policy.window.end
            ),
            "Use @ start() or @ end(), or a time inside the window, or drop the @ modifier.",
        ),
        WindowIssue::SubqueryPoints {
            construct,
            points,
            smallest_step_ms,
        } => Code::TooManyPoints.failure(
            format!(
                "subquery {construct} has {points} evaluation points, more than the {} allowed",
                policy.limits.max_points_per_series
            ),
            &format!("Use a subquery step of at least {smallest_step_ms}ms."),
        ),
    }
    };
    promql::check_reads(ast, (b.start, b.end), b).map_err(|issue| Box::new(failure(issue)))
}

/// Step 7: every selector bound to the package's scope labels and every subquery without
/// a step given the query's step (so Prometheus runs it at the step its points were
/// counted with, not at its own evaluation interval), printed back from the checked AST.
fn bind_scope(ctx: &Ctx<'_>, ast: &Expr, step_seconds: u64) -> Result<String, Box<Failure>> {
    let mut bound = ast.clone();
    promql::pin_subquery_steps(&mut bound, Duration::from_secs(step_seconds));
    promql::bind_labels(&mut bound, &ctx.bindings).map_err(|LabelConflict { label, matcher }| {
        Box::new(Code::ScopeViolation.failure(
            format!(
                "matcher {matcher} conflicts with the platform's binding of label `{label}` to the ticket's scope"
            ),
            &format!(
                "Remove every matcher on `{label}`; the platform binds it to the ticket's scope (its cluster, keyspace or parent)."
            ),
        ))
    })?;
    promql::print_checked(&mut bound).map_err(|m| {
        Box::new(Code::UnsupportedPromql.failure(m, "Rewrite the expression more plainly."))
    })
}
