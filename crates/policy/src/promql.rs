//! PromQL parsing, construct checks, label binding and read-window computation, on
//! the AST of `promql-parser`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, SystemTime};

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::value::ValueType;
use promql_parser::parser::{self, AtModifier, Expr, Offset, VectorSelector};

use crate::PolicyError;
use crate::depth;

/// The staleness look-back of an instant vector selector: Prometheus's default
/// `--query.lookback-delta`. An instant selector evaluated at `t` reads `(t - 5m, t]`.
pub const STALENESS_LOOKBACK: Duration = Duration::from_secs(300);

/// The functions an expression may call. Every built-in of the parser except `info`,
/// which reads series (`target_info`) the expression does not name, so its scope cannot
/// be bound. Functions registered at run time by other code are refused as well.
const ALLOWED_FUNCTIONS: &[&str] = &[
    "abs",
    "absent",
    "absent_over_time",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "cos",
    "cosh",
    "count_over_time",
    "days_in_month",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "deg",
    "delta",
    "deriv",
    "double_exponential_smoothing",
    "end",
    "exp",
    "first_over_time",
    "floor",
    "histogram_avg",
    "histogram_count",
    "histogram_fraction",
    "histogram_quantile",
    "histogram_quantiles",
    "histogram_stddev",
    "histogram_stdvar",
    "histogram_sum",
    "hour",
    "idelta",
    "increase",
    "integral",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "ln",
    "log10",
    "log2",
    "mad_over_time",
    "max_of",
    "max_over_time",
    "min_of",
    "min_over_time",
    "minute",
    "month",
    "pi",
    "predict_linear",
    "present_over_time",
    "quantile_over_time",
    "rad",
    "range",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sin",
    "sinh",
    "sort",
    "sort_by_label",
    "sort_by_label_desc",
    "sort_desc",
    "sqrt",
    "start",
    "start_timestamp",
    "stddev_over_time",
    "stdvar_over_time",
    "step",
    "sum_over_time",
    "tan",
    "tanh",
    "time",
    "timestamp",
    "ts_of_first_over_time",
    "ts_of_last_over_time",
    "ts_of_max_over_time",
    "ts_of_min_over_time",
    "vector",
    "year",
];

/// Why an expression does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ParseError {
    /// Nested deeper than [`MAX_PROMQL_DEPTH`](crate::depth::MAX_PROMQL_DEPTH); the parser did
    /// not run.
    #[error("{0}")]
    TooDeep(String),
    /// A syntax error (with its position where the lexer reports one), or an
    /// out-of-range duration.
    #[error("{0}")]
    Syntax(String),
}

/// Parses an expression. The nesting depth is checked first, without recursion, so that
/// neither the parser nor any later pass over the tree recurses deeper than
/// [`MAX_PROMQL_DEPTH`](crate::depth::MAX_PROMQL_DEPTH) levels. Never panics: a panic inside the
/// parser (it converts some out-of-range numeric durations with a panicking conversion)
/// becomes an error. Lexer errors carry a `line:column` position, like Prometheus's own
/// messages.
pub(crate) fn parse(text: &str) -> Result<Expr, ParseError> {
    depth::check_depth(text).map_err(ParseError::TooDeep)?;
    match catch_unwind(AssertUnwindSafe(|| parser::parse(text))) {
        Ok(Ok(expr)) => Ok(expr),
        Ok(Err(message)) => Err(ParseError::Syntax(with_position(text, &message))),
        Err(_) => Err(ParseError::Syntax(
            "parse error: a duration, offset or subquery step is out of range (write durations with units, e.g. 5m)"
                .to_owned(),
        )),
    }
}

fn lex_error(text: &str) -> Option<String> {
    catch_unwind(AssertUnwindSafe(|| parser::lex::lexer(text).err())).unwrap_or_default()
}

fn line_column(prefix: &str) -> (usize, usize) {
    let line = prefix.matches('\n').count() + 1;
    let column = prefix.rsplit('\n').next().map_or(0, |l| l.chars().count());
    (line, column)
}

/// Adds a `line:column` position to a lexer error. Errors about unclosed or
/// unterminated input are at the end of the input; others at the end of the shortest
/// prefix of the input on which the lexer reports the same error. The parser reports
/// grammar errors without a position; those are returned as they are.
fn with_position(text: &str, message: &str) -> String {
    if lex_error(text).as_deref() != Some(message) {
        return format!("parse error: {message}");
    }
    if ["unclosed", "unterminated", "end of input"]
        .iter()
        .any(|m| message.contains(m))
    {
        let (line, column) = line_column(text);
        return format!("{line}:{column}: parse error: {message}");
    }
    let mut ends: Vec<usize> = text.char_indices().map(|(i, c)| i + c.len_utf8()).collect();
    ends.dedup();
    for end in ends {
        let prefix = &text[..end];
        if lex_error(prefix).as_deref() == Some(message) {
            let (line, column) = line_column(prefix);
            return format!("{line}:{column}: parse error: {message}");
        }
    }
    format!("parse error: {message}")
}

/// Calls `f` on every node of the expression, including aggregation parameters (which
/// the parser's own visitor skips).
pub(crate) fn walk<'a, E>(
    expr: &'a Expr,
    f: &mut impl FnMut(&'a Expr) -> Result<(), E>,
) -> Result<(), E> {
    f(expr)?;
    match expr {
        Expr::Aggregate(a) => {
            if let Some(param) = &a.param {
                walk(param, f)?;
            }
            walk(&a.expr, f)
        }
        Expr::Unary(u) => walk(&u.expr, f),
        Expr::Binary(b) => {
            walk(&b.lhs, f)?;
            walk(&b.rhs, f)
        }
        Expr::Paren(p) => walk(&p.expr, f),
        Expr::Subquery(s) => walk(&s.expr, f),
        Expr::Call(c) => c.args.args.iter().try_for_each(|a| walk(a, f)),
        Expr::NumberLiteral(_)
        | Expr::StringLiteral(_)
        | Expr::VectorSelector(_)
        | Expr::MatrixSelector(_)
        | Expr::Extension(_) => Ok(()),
    }
}

/// Calls `f` on every node of the expression, a node before its children, including
/// aggregation parameters; `f` may rewrite the node it is given.
fn walk_mut<E>(expr: &mut Expr, f: &mut impl FnMut(&mut Expr) -> Result<(), E>) -> Result<(), E> {
    f(expr)?;
    match expr {
        Expr::Aggregate(a) => {
            if let Some(param) = &mut a.param {
                walk_mut(param, f)?;
            }
            walk_mut(&mut a.expr, f)
        }
        Expr::Unary(u) => walk_mut(&mut u.expr, f),
        Expr::Binary(b) => {
            walk_mut(&mut b.lhs, f)?;
            walk_mut(&mut b.rhs, f)
        }
        Expr::Paren(p) => walk_mut(&mut p.expr, f),
        Expr::Subquery(s) => walk_mut(&mut s.expr, f),
        Expr::Call(c) => c.args.args.iter_mut().try_for_each(|a| walk_mut(a, f)),
        Expr::NumberLiteral(_)
        | Expr::StringLiteral(_)
        | Expr::VectorSelector(_)
        | Expr::MatrixSelector(_)
        | Expr::Extension(_) => Ok(()),
    }
}

/// Calls `f` on every vector selector, including those inside range selectors.
fn selectors_mut<E>(
    expr: &mut Expr,
    f: &mut impl FnMut(&mut VectorSelector) -> Result<(), E>,
) -> Result<(), E> {
    walk_mut(expr, &mut |node| match node {
        Expr::VectorSelector(vs) => f(vs),
        Expr::MatrixSelector(ms) => f(&mut ms.vs),
        _ => Ok(()),
    })
}

/// Writes `step` into every subquery that names none (`x[75m:]` becomes `x[75m:15s]`).
/// Prometheus evaluates a subquery without a step at its configured global evaluation
/// interval, which the client cannot know; written out, the subquery runs at exactly the
/// step its points were counted with.
pub(crate) fn pin_subquery_steps(expr: &mut Expr, step: Duration) {
    let _ = walk_mut(expr, &mut |node| -> Result<(), ()> {
        if let Expr::Subquery(sq) = node
            && sq.step.is_none()
        {
            sq.step = Some(step);
        }
        Ok(())
    });
}

/// Refuses what cannot be bounded or sent as a range query: functions outside the
/// allow-list, `or` inside a selector, extension nodes, zero subquery steps, and a
/// result that is not an instant vector or scalar.
pub(crate) fn check_constructs(expr: &Expr) -> Result<(), String> {
    walk(expr, &mut |node| match node {
        Expr::Call(call) if !ALLOWED_FUNCTIONS.contains(&call.func.name) => {
            if call.func.name == "info" {
                Err("info() is not allowed: it reads series the expression does not name, so the platform cannot bind them to the cluster; join target_info explicitly instead".to_owned())
            } else {
                Err(format!("function {}() is not allowed here", call.func.name))
            }
        }
        Expr::VectorSelector(vs) if !vs.matchers.or_matchers.is_empty() => Err(format!(
            "`or` inside a selector is not supported ({vs}); write one selector per alternative and combine them with the `or` operator"
        )),
        Expr::MatrixSelector(ms) if !ms.vs.matchers.or_matchers.is_empty() => Err(format!(
            "`or` inside a selector is not supported ({ms}); write one selector per alternative and combine them with the `or` operator"
        )),
        Expr::Subquery(sq) if sq.step.is_some_and(|s| s.is_zero()) => {
            Err(format!("subquery step must be greater than zero ({sq})"))
        }
        Expr::Extension(_) => Err("extension expressions are not supported".to_owned()),
        _ => Ok(()),
    })?;
    match expr.value_type() {
        ValueType::Vector | ValueType::Scalar => Ok(()),
        ValueType::Matrix => Err("a range query needs an instant vector or scalar expression; wrap the range selector in a function such as rate() or max_over_time()".to_owned()),
        ValueType::String => Err("a range query needs an instant vector or scalar expression, not a string".to_owned()),
    }
}

/// A conflict between a label binding and a matcher written in the expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LabelConflict {
    pub(crate) label: String,
    pub(crate) matcher: String,
}

/// Binds every vector selector to `label = value` for each binding: injects the
/// matcher where the label has none, accepts equal `=` matchers, and refuses any other
/// matcher on the label (`!=`, `=~`, `!~`, another value).
pub(crate) fn bind_labels(expr: &mut Expr, bindings: &[(&str, &str)]) -> Result<(), LabelConflict> {
    selectors_mut(expr, &mut |vs| {
        for (label, value) in bindings {
            if let Some(m) = vs
                .matchers
                .or_matchers
                .iter()
                .flatten()
                .find(|m| m.name == *label)
            {
                return Err(LabelConflict {
                    label: (*label).to_owned(),
                    matcher: m.to_string(),
                });
            }
            let mut present = false;
            for m in vs.matchers.matchers.iter().filter(|m| m.name == *label) {
                if m.op == MatchOp::Equal && m.value == *value {
                    present = true;
                } else {
                    return Err(LabelConflict {
                        label: (*label).to_owned(),
                        matcher: m.to_string(),
                    });
                }
            }
            if !present {
                vs.matchers
                    .matchers
                    .push(Matcher::new(MatchOp::Equal, label, value));
            }
        }
        Ok(())
    })
}

/// Sorts the matchers of every selector the way the printer writes them (by their
/// text), which does not change the meaning of the expression.
fn sort_matchers(expr: &mut Expr) {
    let _ = selectors_mut(expr, &mut |vs| -> Result<(), ()> {
        vs.matchers.matchers.sort_by_cached_key(ToString::to_string);
        Ok(())
    });
}

/// Prints an expression and checks that the text parses back to the same AST (up to
/// the order of matchers, which the printer sorts), so that what runs is exactly what
/// was checked.
pub(crate) fn print_checked(expr: &mut Expr) -> Result<String, String> {
    sort_matchers(expr);
    let text = expr.to_string();
    match parse(&text) {
        Ok(back) if back == *expr => Ok(text),
        _ => Err(format!(
            "the expression cannot be written back exactly ({text}); use durations of whole milliseconds and plain numbers"
        )),
    }
}

/// The bounds an expression's reads must stay within, in Unix milliseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadBounds {
    /// Query start (`window.start`).
    pub(crate) start: i128,
    /// Query end (`window.end`).
    pub(crate) end: i128,
    /// Earliest readable time (`window.start - lookback`).
    pub(crate) earliest: i128,
    /// Most evaluation points of one subquery.
    pub(crate) max_subquery_points: u64,
    /// The query's step, in milliseconds: the step of a subquery that names none.
    pub(crate) step_ms: u128,
}

/// Why an expression reads outside its bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WindowIssue {
    /// A selector or subquery reads `(from, to]` outside the bounds.
    Outside {
        construct: String,
        from: i128,
        to: i128,
    },
    /// An `@ <timestamp>` outside the window.
    AtOutside { construct: String, at: i128 },
    /// A subquery whose range and step give too many points.
    SubqueryPoints {
        construct: String,
        points: u128,
        smallest_step_ms: u128,
    },
}

fn ms(d: &Duration) -> i128 {
    i128::try_from(d.as_millis()).unwrap_or(i128::MAX)
}

fn offset_ms(offset: &Option<Offset>) -> i128 {
    match offset {
        None => 0,
        Some(Offset::Pos(d)) => ms(d),
        Some(Offset::Neg(d)) => -ms(d),
    }
}

fn at_ms(t: &SystemTime) -> i128 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => ms(&d),
        Err(e) => -ms(&e.duration()),
    }
}

/// The evaluation times a node with this `@` modifier runs at, given its parent's.
fn anchored(
    at: &Option<AtModifier>,
    eval: (i128, i128),
    b: &ReadBounds,
    construct: &dyn Fn() -> String,
) -> Result<(i128, i128), WindowIssue> {
    match at {
        None => Ok(eval),
        Some(AtModifier::Start) => Ok((b.start, b.start)),
        Some(AtModifier::End) => Ok((b.end, b.end)),
        Some(AtModifier::At(t)) => {
            let t = at_ms(t);
            if t < b.start || t > b.end {
                Err(WindowIssue::AtOutside {
                    construct: construct(),
                    at: t,
                })
            } else {
                Ok((t, t))
            }
        }
    }
}

fn within(
    from: i128,
    to: i128,
    b: &ReadBounds,
    construct: &dyn Fn() -> String,
) -> Result<(), WindowIssue> {
    if from < b.earliest || to > b.end {
        Err(WindowIssue::Outside {
            construct: construct(),
            from,
            to,
        })
    } else {
        Ok(())
    }
}

/// Checks that everything the expression reads, evaluated at every time in `eval`,
/// lies within `[earliest, end]`: range selectors, instant selectors (with the
/// staleness look-back), subquery ranges, offsets (negative ones included) and `@`
/// modifiers (`@ start()`/`@ end()` anchor at the window bounds; `@ <t>` must lie
/// inside the window). Each subquery's evaluation points, `(window + range) / step + 1`
/// over the times its parent is evaluated at (the query's step when it names none), are
/// counted against the points limit.
pub(crate) fn check_reads(
    expr: &Expr,
    eval: (i128, i128),
    b: &ReadBounds,
) -> Result<(), WindowIssue> {
    match expr {
        Expr::VectorSelector(vs) => {
            let text = || vs.to_string();
            let (lo, hi) = anchored(&vs.at, eval, b, &text)?;
            let off = offset_ms(&vs.offset);
            within(
                lo.saturating_sub(off)
                    .saturating_sub(ms(&STALENESS_LOOKBACK)),
                hi.saturating_sub(off),
                b,
                &text,
            )
        }
        Expr::MatrixSelector(m) => {
            let text = || m.to_string();
            let (lo, hi) = anchored(&m.vs.at, eval, b, &text)?;
            let off = offset_ms(&m.vs.offset);
            within(
                lo.saturating_sub(off).saturating_sub(ms(&m.range)),
                hi.saturating_sub(off),
                b,
                &text,
            )
        }
        Expr::Subquery(sq) => {
            let text = || sq.to_string();
            let (lo, hi) = anchored(&sq.at, eval, b, &text)?;
            let off = offset_ms(&sq.offset);
            let range = ms(&sq.range);
            // The inner expression is evaluated from the earliest parent evaluation time
            // minus the subquery range to the latest, at the subquery step (the query's
            // step when it names none): (window + range) / step + 1 points.
            let step = sq.step.map_or(b.step_ms, |s| s.as_millis()).max(1);
            let span = hi
                .saturating_sub(lo)
                .saturating_add(range)
                .max(0)
                .unsigned_abs();
            let points = span / step + 1;
            if points > u128::from(b.max_subquery_points) {
                return Err(WindowIssue::SubqueryPoints {
                    construct: text(),
                    points,
                    smallest_step_ms: span / u128::from(b.max_subquery_points.max(1)) + 1,
                });
            }
            let inner = (
                lo.saturating_sub(off).saturating_sub(range),
                hi.saturating_sub(off),
            );
            within(inner.0, inner.1, b, &text)?;
            check_reads(&sq.expr, inner, b)
        }
        Expr::Aggregate(a) => {
            if let Some(param) = &a.param {
                check_reads(param, eval, b)?;
            }
            check_reads(&a.expr, eval, b)
        }
        Expr::Unary(u) => check_reads(&u.expr, eval, b),
        Expr::Binary(bin) => {
            check_reads(&bin.lhs, eval, b)?;
            check_reads(&bin.rhs, eval, b)
        }
        Expr::Paren(p) => check_reads(&p.expr, eval, b),
        Expr::Call(c) => c.args.args.iter().try_for_each(|a| check_reads(a, eval, b)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => Ok(()),
    }
}

/// True for a label name that may be bound: `[A-Za-z_][A-Za-z0-9_]*`, not starting
/// with `__` (reserved labels such as `__name__`).
pub(crate) fn is_bindable_label(label: &str) -> bool {
    let mut bytes = label.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !label.starts_with("__")
}

/// Binds every vector selector of `expr` to the exact matcher `label="value"` and
/// returns the rewritten expression.
///
/// The matcher is injected where the selector has none on `label`; an equal `=`
/// matcher is accepted; any other matcher on `label` (`!=`, `=~`, `!~`, another value)
/// is a [`PolicyError::LabelConflict`]. The Manus connector uses this to bind a
/// decrypted instance reference as `instance="..."`. The result is printed from the
/// rewritten AST and checked to parse back to the same AST.
///
/// ```
/// let bound = evidence_policy::promql::bind_label("rate(cpu[5m]) / on(job) up", "instance", "10.0.0.7:10080")?;
/// assert_eq!(bound, r#"rate(cpu{instance="10.0.0.7:10080"}[5m]) / on (job) up{instance="10.0.0.7:10080"}"#);
/// assert!(evidence_policy::promql::bind_label(r#"up{instance=~".*"}"#, "instance", "a").is_err());
/// # Ok::<(), evidence_policy::PolicyError>(())
/// ```
pub fn bind_label(expr: &str, label: &str, value: &str) -> Result<String, PolicyError> {
    if !is_bindable_label(label) {
        return Err(PolicyError::InvalidLabel(format!(
            "{label:?} is not a bindable label name"
        )));
    }
    if value.is_empty() || value.len() > 1024 || value.chars().any(char::is_control) {
        return Err(PolicyError::InvalidLabel(
            "label value must be 1-1024 characters without control characters".to_owned(),
        ));
    }
    let mut ast = parse(expr).map_err(|e| PolicyError::Promql(e.to_string()))?;
    check_constructs(&ast).map_err(PolicyError::Promql)?;
    bind_labels(&mut ast, &[(label, value)]).map_err(|c| PolicyError::LabelConflict {
        label: c.label,
        matcher: c.matcher,
    })?;
    print_checked(&mut ast).map_err(PolicyError::Promql)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> ReadBounds {
        // window [10_000s, 10_900s], look-back 1h
        ReadBounds {
            start: 10_000_000,
            end: 10_900_000,
            earliest: 10_000_000 - 3_600_000,
            max_subquery_points: 11_000,
            step_ms: 15_000,
        }
    }

    fn reads(e: &str) -> Result<(), WindowIssue> {
        let b = bounds();
        check_reads(&parse(e).unwrap(), (b.start, b.end), &b)
    }

    #[test]
    fn display_round_trips() {
        for e in [
            r#"sum by (instance) (rate(tidb_server_cpu_seconds_total{cluster_id="c1",job=~"tidb.*"}[1m]))"#,
            r#"max_over_time(rate(x[1m])[10m:30s] @ start() offset 5m)"#,
            r#"histogram_quantile(0.99, sum by (le) (rate(x_bucket[5m])))"#,
            r#"a / on (b) group_left (c) d"#,
            r#"foo{"weird.label"="x\n\"q"} offset -1m"#,
            r#"topk(3, scalar(bar) * foo) > bool 2"#,
            r#"label_replace(up, "a", "$1", "b", "(.*)")"#,
            r#"-(foo) + 1e-7 - NaN"#,
            r#"count_values("v", foo) unless on () bar"#,
            r#"foo @ 10500.5"#,
        ] {
            let mut ast = parse(e).unwrap();
            let printed = print_checked(&mut ast).unwrap();
            assert_eq!(parse(&printed).unwrap(), ast, "{e}");
        }
        assert!(print_checked(&mut parse("foo[1.0005]").unwrap()).is_err());
        assert!(print_checked(&mut parse("rate(foo[5m:0.0001])").unwrap()).is_err());
        let mut ast = parse(r#"up{job="b",cluster_id="a"}"#).unwrap();
        assert_eq!(
            print_checked(&mut ast).unwrap(),
            r#"up{cluster_id="a",job="b"}"#
        );
    }

    #[test]
    fn parser_panics_become_errors_and_lexer_errors_get_positions() {
        assert!(
            parse("foo[1e30]")
                .unwrap_err()
                .to_string()
                .contains("out of range")
        );
        assert!(parse("foo offset 1e999").is_err());
        assert_eq!(
            parse("rate(x[5m+1m])").unwrap_err().to_string(),
            "1:10: parse error: unexpected character inside brackets: '+'"
        );
        assert_eq!(
            parse("sum(\n  rate(foo[5m])").unwrap_err().to_string(),
            "2:15: parse error: unclosed left parenthesis"
        );
        assert_eq!(
            parse("foo bool > 1").unwrap_err().to_string(),
            "parse error: invalid promql query"
        );
    }

    #[test]
    fn constructs() {
        assert!(
            check_constructs(&parse("info(up)").unwrap())
                .unwrap_err()
                .contains("info()")
        );
        assert!(check_constructs(&parse(r#"foo{a="1" or b="2"}"#).unwrap()).is_err());
        assert!(check_constructs(&parse("foo[5m]").unwrap()).is_err());
        assert!(check_constructs(&parse(r#""x""#).unwrap()).is_err());
        assert!(check_constructs(&parse("rate(foo[5m]) > 1").unwrap()).is_ok());
        assert!(check_constructs(&parse("time() - start()").unwrap()).is_ok());
    }

    #[test]
    fn binding() {
        let mut ast = parse(r#"topk(scalar(other{cluster_id="x"}), up)"#).unwrap();
        assert_eq!(
            bind_labels(&mut ast, &[("cluster_id", "c1")]),
            Err(LabelConflict {
                label: "cluster_id".into(),
                matcher: r#"cluster_id="x""#.into()
            })
        );
        for bad in [
            r#"up{cluster_id!="c1"}"#,
            r#"up{cluster_id=~"c1"}"#,
            r#"up{cluster_id!~"c2"}"#,
            r#"up{cluster_id="c1",cluster_id=~".*"}"#,
        ] {
            let mut ast = parse(bad).unwrap();
            assert!(
                bind_labels(&mut ast, &[("cluster_id", "c1")]).is_err(),
                "{bad}"
            );
        }
        let mut ast = parse(r#"rate(up{cluster_id="c1"}[5m]) + on () (vector(1) * down)"#).unwrap();
        bind_labels(&mut ast, &[("cluster_id", "c1"), ("keyspace_id", "k")]).unwrap();
        assert_eq!(
            print_checked(&mut ast).unwrap(),
            r#"rate(up{cluster_id="c1",keyspace_id="k"}[5m]) + on () (vector(1) * down{cluster_id="c1",keyspace_id="k"})"#
        );
        assert!(bind_label("up", "__name__", "x").is_err());
        assert!(bind_label("up", "instance", "").is_err());
        assert!(matches!(
            bind_label("up{", "instance", "a"),
            Err(PolicyError::Promql(_))
        ));
    }

    #[test]
    fn read_windows() {
        assert!(reads("up").is_ok());
        assert!(reads("rate(up[60m])").is_ok());
        assert!(
            reads("rate(up[61m])").is_err(),
            "reads before window start - 1h look-back"
        );
        assert!(reads("up offset 55m").is_ok());
        assert!(reads("up offset 56m").is_err());
        assert!(
            reads("up offset -1s").is_err(),
            "negative offsets read after the end"
        );
        assert!(reads("max_over_time(up[10m:1m] offset 45m)").is_ok());
        assert!(reads("max_over_time(rate(up[5m])[10m:1m] offset 45m)").is_ok());
        assert!(reads("max_over_time(rate(up[6m])[10m:1m] offset 45m)").is_err());
        assert!(reads("max_over_time(rate(up[5m] offset -10m)[10m:1m])").is_err());
        assert!(reads("up @ start()").is_ok());
        assert!(reads("rate(up[1h] @ end())").is_ok());
        assert!(reads("rate(up[75m] @ end())").is_ok());
        assert!(reads("rate(up[76m] @ end())").is_err());
        assert!(reads("up @ 10500").is_ok());
        assert!(matches!(
            reads("up @ 10901"),
            Err(WindowIssue::AtOutside { .. })
        ));
        assert!(matches!(
            reads("up @ 9999"),
            Err(WindowIssue::AtOutside { .. })
        ));
        assert!(reads("max_over_time((up @ start())[5m:1m])").is_ok());
        assert!(reads("topk(scalar(rate(x[2h])), up)").is_err());
        assert!(matches!(
            reads("max_over_time(up[50m:100ms])"),
            Err(WindowIssue::SubqueryPoints { .. })
        ));
        assert!(reads("time()").is_ok());
    }

    #[test]
    fn subquery_points_are_window_plus_range_over_step() {
        // 900 s window: (900 s + range) / step + 1 evaluation points, at most `max`.
        let within = |e: &str, max: u64, step_ms: u128| {
            let b = ReadBounds {
                max_subquery_points: max,
                step_ms,
                ..bounds()
            };
            check_reads(&parse(e).unwrap(), (b.start, b.end), &b)
        };
        // (900 + 600) / 1 + 1 = 1501 points, not 600 / 1 + 1.
        assert!(within("max_over_time(up[10m:1s])", 1501, 15_000).is_ok());
        assert_eq!(
            within("max_over_time(up[10m:1s])", 1500, 15_000),
            Err(WindowIssue::SubqueryPoints {
                construct: "up[10m:1s]".to_owned(),
                points: 1501,
                smallest_step_ms: 1001,
            })
        );
        // Without a step: the query's step.
        assert!(within("max_over_time(up[10m:])", 1501, 1_000).is_ok());
        assert!(matches!(
            within("max_over_time(up[10m:])", 1500, 1_000),
            Err(WindowIssue::SubqueryPoints { points: 1501, .. })
        ));
        assert!(within("max_over_time(up[10m:])", 1500, 2_000).is_ok());
        // @ end() evaluates the parent once: 600 / 1 + 1.
        assert!(within("max_over_time(up[10m:1s] @ end())", 601, 15_000).is_ok());
        // A nested subquery spans its parent's evaluation times and range:
        // (900 + 300 + 60) / 1 + 1 = 1261.
        let nested = "max_over_time(max_over_time(up[1m:1s])[5m:1m])";
        assert!(within(nested, 1261, 15_000).is_ok());
        assert!(matches!(
            within(nested, 1260, 15_000),
            Err(WindowIssue::SubqueryPoints { points: 1261, .. })
        ));
    }

    #[test]
    fn subqueries_without_a_step_get_the_query_step() {
        let mut ast =
            parse("max_over_time(rate(up[5m])[75m:]) + max_over_time(up[1m:30s])").unwrap();
        pin_subquery_steps(&mut ast, Duration::from_secs(15));
        assert_eq!(
            print_checked(&mut ast).unwrap(),
            "max_over_time(rate(up[5m])[1h15m:15s]) + max_over_time(up[1m:30s])"
        );
        assert!(reads("time()").is_ok());
    }
}
