//! Address-bearing labels under Manus: which labels may carry instance addresses, and
//! the check, on the parsed expression, that it neither tests an address (a matcher)
//! nor moves or reshapes one into another label (`label_replace`, `label_join`,
//! `count_values`), so that an address is named only through an `instanceRef` and
//! leaves only sealed.
//!
//! The rule is an allowlist: a label is free of addresses only when
//! [`ADDRESS_FREE_LABELS`] (or the package's scope labels) name it; every other label
//! may carry one, because the Manus sealer seals any value that looks like an address,
//! whatever its label. [`ADDRESS_LABELS`] are the labels that always carry one.
//!
//! - A matcher on an address label (`instance`, `host_ip`) of any kind (`=`, `!=`, `=~`,
//!   `!~`) is refused: the one `instance` matcher is the one the connector binds from an
//!   `instanceRef`. On a label outside the allowlist only `=`/`!=` with a value that
//!   has no address character (`.`, `:`, `[`, `]`) or is a plain number is accepted, so
//!   no matcher can test an address; on an allowlisted label any matcher is accepted.
//! - `label_replace` and `label_join` read only allowlisted labels other than
//!   `__name__` (or none: `""`), write only a label that is neither an address label
//!   nor allowlisted (so no written value is ever read again), and their replacement or
//!   separator has no address character; `count_values` writes neither an address label
//!   nor an allowlisted one. The arguments must be string literals.
//! - `absent` and `absent_over_time` turn their `=` matchers into output labels, so
//!   those values have no address character on any label.
//! - `sort_by_label` and `sort_by_label_desc` order only by allowlisted labels: ordering
//!   rows by a label that may carry addresses would tell the addresses' relative order
//!   through the order of their references (the answer keeps the order of rows with
//!   equal peaks), so it is refused before anything is sent.
//!
//! Every label value an expression writes is then built from allowlisted values and
//! literals without address characters (or is a number, for `count_values`), so none
//! can be an address or be compared with one; and no address reaches a label other
//! than the one it was scraped in, where the sealer seals it.

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::{Expr, VectorSelector};

use crate::promql;

/// The labels that always carry an instance address in Manus answers: never matched
/// (an instance is named through an `instanceRef`), never read by a rewrite, sealed
/// whole in every answer.
pub const ADDRESS_LABELS: &[&str] = &["instance", "host_ip"];

/// The labels whose values are never addresses, nor hold `.`, `:`, `[` or `]`, under
/// Manus (besides the package's scope labels): any matcher may test them and
/// `label_replace`/`label_join` may read them (all but `__name__`, whose recording-rule
/// names may hold `:`). Every other label is treated as one that may carry an address:
/// `device`, for one, names NFS and CIFS servers (`10.21.3.4:/export`) in node_exporter's
/// filesystem metrics.
pub const ADDRESS_FREE_LABELS: &[&str] = &[
    "__name__",
    "job",
    "cluster_id",
    "keyspace_id",
    "parent_id",
    "type",
    "sql_type",
    "stmt_type",
    "result",
    "mode",
    "state",
    "status",
    "code",
    "method",
    "reason",
    "level",
    "db",
    "cf",
    "cpu",
];

/// Characters no written or matched value may hold outside the allowlist: every
/// address the sealer recognizes has one (an IPv4 dot, an IPv6 or port colon, an IPv6
/// bracket).
const ADDRESS_CHARACTERS: &[char] = &['.', ':', '[', ']'];

/// Why an expression would test or move an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AddressIssue {
    /// A matcher that could test an address: `detail` says which and why.
    Matcher {
        /// The label matched.
        label: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A rewrite that could copy, reshape or forge an address-bearing value.
    Rewrite {
        /// The function or aggregation.
        function: String,
        /// What is wrong with it.
        detail: String,
    },
}

/// The labels that are free of addresses: the allowlist and the scope labels.
struct Free<'a> {
    scope: &'a [&'a str],
}

impl Free<'_> {
    fn has(&self, label: &str) -> bool {
        ADDRESS_FREE_LABELS.contains(&label) || self.scope.contains(&label)
    }

    /// A label a rewrite may read: free, and not the metric name.
    fn readable(&self, label: &str) -> bool {
        label != "__name__" && self.has(label)
    }
}

fn is_address_label(label: &str) -> bool {
    ADDRESS_LABELS.contains(&label)
}

fn has_address_character(value: &str) -> bool {
    value.contains(ADDRESS_CHARACTERS)
}

/// A plain number (`0.99`, `1e3`, `+Inf`): never an address, whatever its dots.
fn is_number(value: &str) -> bool {
    value.parse::<f64>().is_ok()
}

fn op_text(op: &MatchOp) -> &'static str {
    match op {
        MatchOp::Equal => "=",
        MatchOp::NotEqual => "!=",
        MatchOp::Re(_) => "=~",
        MatchOp::NotRe(_) => "!~",
    }
}

/// Checks that an expression neither tests nor moves an address. `scope` are the
/// package's scope labels (free of addresses, bound to the policy).
pub(crate) fn check_addresses(expr: &Expr, scope: &[&str]) -> Result<(), AddressIssue> {
    let free = Free { scope };
    promql::walk(expr, &mut |node| match node {
        Expr::VectorSelector(vs) => check_selector(vs, &free),
        Expr::MatrixSelector(ms) => check_selector(&ms.vs, &free),
        Expr::Call(call) => check_call(call.func.name, &call.args.args, &free),
        Expr::Aggregate(a) if a.op.to_string() == "count_values" => {
            let label = a.param.as_deref().and_then(string_literal);
            check_written("count_values", label, &free)
        }
        _ => Ok(()),
    })
}

fn matchers(vs: &VectorSelector) -> impl Iterator<Item = &Matcher> {
    vs.matchers
        .matchers
        .iter()
        .chain(vs.matchers.or_matchers.iter().flatten())
}

fn check_selector(vs: &VectorSelector, free: &Free<'_>) -> Result<(), AddressIssue> {
    for m in matchers(vs) {
        let op = op_text(&m.op);
        let refuse = |detail: String| {
            Err(AddressIssue::Matcher {
                label: m.name.clone(),
                detail,
            })
        };
        if is_address_label(&m.name) {
            return refuse(format!(
                "a `{op}` matcher on `{}`, a label that carries instance addresses",
                m.name
            ));
        }
        if free.has(&m.name) {
            continue;
        }
        match m.op {
            MatchOp::Re(_) | MatchOp::NotRe(_) => {
                return refuse(format!(
                    "a regular-expression matcher (`{op}`) on `{}`, a label that may carry addresses",
                    m.name
                ));
            }
            MatchOp::Equal | MatchOp::NotEqual
                if has_address_character(&m.value) && !is_number(&m.value) =>
            {
                return refuse(format!(
                    "a `{op}` matcher on `{}` whose value is shaped like an address (it holds '.', ':', '[' or ']')",
                    m.name
                ));
            }
            MatchOp::Equal | MatchOp::NotEqual => {}
        }
    }
    Ok(())
}

/// The text of a string-literal argument (parentheses allowed around it).
fn string_literal(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::StringLiteral(s) => Some(s.val.as_str()),
        Expr::Paren(p) => string_literal(&p.expr),
        _ => None,
    }
}

fn rewrite(function: &str, detail: String) -> Result<(), AddressIssue> {
    Err(AddressIssue::Rewrite {
        function: function.to_owned(),
        detail,
    })
}

/// The label a rewrite writes: a string literal, neither an address label nor a label
/// free of addresses.
fn check_written(function: &str, label: Option<&str>, free: &Free<'_>) -> Result<(), AddressIssue> {
    match label {
        None => rewrite(
            function,
            "the label it writes must be a string literal".to_owned(),
        ),
        Some(l) if is_address_label(l) => rewrite(
            function,
            format!("it writes `{l}`, a label that carries instance addresses"),
        ),
        Some(l) if free.has(l) => rewrite(
            function,
            format!(
                "it writes `{l}`, a label the platform keeps free of addresses; write a new label instead"
            ),
        ),
        Some(_) => Ok(()),
    }
}

/// A label a rewrite reads: a string literal naming a label free of addresses, or `""`.
fn check_read(function: &str, arg: &Expr, free: &Free<'_>) -> Result<(), AddressIssue> {
    match string_literal(arg) {
        None => rewrite(
            function,
            "the labels it reads must be string literals".to_owned(),
        ),
        Some(l) if l.is_empty() || free.readable(l) => Ok(()),
        Some(l) => rewrite(
            function,
            format!(
                "it reads `{l}`, a label that {} carry addresses",
                if is_address_label(l) { "does" } else { "may" }
            ),
        ),
    }
}

/// A replacement or separator: a string literal without address characters.
fn check_text(function: &str, what: &str, arg: &Expr) -> Result<(), AddressIssue> {
    match string_literal(arg) {
        None => rewrite(function, format!("its {what} must be a string literal")),
        Some(t) if has_address_character(t) => rewrite(
            function,
            format!("its {what} holds '.', ':', '[' or ']', which could shape an address"),
        ),
        Some(_) => Ok(()),
    }
}

fn check_call(name: &str, args: &[Box<Expr>], free: &Free<'_>) -> Result<(), AddressIssue> {
    match name {
        // label_replace(v, dst, replacement, src, regex)
        "label_replace" => {
            check_written(name, args.get(1).and_then(|a| string_literal(a)), free)?;
            if let Some(replacement) = args.get(2) {
                check_text(name, "replacement", replacement)?;
            }
            match args.get(3) {
                Some(src) => check_read(name, src, free),
                None => Ok(()),
            }
        }
        // label_join(v, dst, separator, src...)
        "label_join" => {
            check_written(name, args.get(1).and_then(|a| string_literal(a)), free)?;
            if let Some(separator) = args.get(2) {
                check_text(name, "separator", separator)?;
            }
            args.iter()
                .skip(3)
                .try_for_each(|src| check_read(name, src, free))
        }
        // sort_by_label(v, label...): orders only by labels without addresses.
        "sort_by_label" | "sort_by_label_desc" => args.iter().skip(1).try_for_each(|arg| {
            match string_literal(arg) {
                Some(l) if free.readable(l) => Ok(()),
                Some(l) => rewrite(
                    name,
                    format!(
                        "it orders by `{l}`, a label that {} carry addresses, which would tell their order",
                        if is_address_label(l) { "does" } else { "may" }
                    ),
                ),
                None => rewrite(name, "the labels it orders by must be string literals".to_owned()),
            }
        }),
        // Every selector under the argument, parentheses and subqueries included
        // (more than Prometheus reads labels from, never less).
        "absent" | "absent_over_time" => args.iter().try_for_each(|arg| {
            promql::walk(arg, &mut |node| {
                let vs = match node {
                    Expr::VectorSelector(vs) => vs,
                    Expr::MatrixSelector(ms) => &ms.vs,
                    _ => return Ok(()),
                };
                // A matcher on an address label is refused as a matcher, by the
                // selector check of the same walk.
                match matchers(vs).find(|m| {
                    m.op == MatchOp::Equal
                        && !is_address_label(&m.name)
                        && has_address_character(&m.value)
                }) {
                    Some(m) => rewrite(
                        name,
                        format!(
                            "its `=` matcher on `{}` would become an output label shaped like an address (the value holds '.', ':', '[' or ']')",
                            m.name
                        ),
                    ),
                    None => Ok(()),
                }
            })
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(e: &str) -> Result<(), AddressIssue> {
        check_addresses(&promql::parse(e).unwrap(), &["cluster_id"])
    }

    fn is_matcher(e: &str) -> bool {
        matches!(check(e), Err(AddressIssue::Matcher { .. }))
    }

    fn is_rewrite(e: &str) -> bool {
        matches!(check(e), Err(AddressIssue::Rewrite { .. }))
    }

    #[test]
    fn matchers_on_address_labels_are_refused_whatever_the_operator() {
        for op in ["=", "!=", "=~", "!~"] {
            for label in ADDRESS_LABELS {
                for value in ["10.21.1.17:10080", ".*", "", "x"] {
                    let e = format!(r#"up{{{label}{op}"{value}"}}"#);
                    assert!(is_matcher(&e), "{e}");
                    let e = format!(r#"rate(up{{job="a",{label}{op}"{value}"}}[1m])"#);
                    assert!(is_matcher(&e), "{e}");
                }
            }
        }
        assert!(is_matcher(r#"count({"instance"=~"10[.]21[.].*"})"#));
        assert!(is_matcher(r#"sum(x) + on() absent(y{instance="a"})"#));
    }

    #[test]
    fn other_labels_take_only_plain_exact_matchers() {
        assert!(is_matcher(r#"up{url=~".*10.*"}"#));
        assert!(is_matcher(r#"up{peer!~"x"}"#));
        assert!(is_matcher(r#"up{__address__=~".+"}"#));
        assert!(is_matcher(r#"up{peer="10.21.2.10:20160"}"#));
        assert!(is_matcher(r#"up{peer!="10.21.2.10"}"#));
        assert!(is_matcher(r#"up{ip="::1"}"#));
        assert!(is_matcher(r#"up{ip="[fe80::1]"}"#));
        assert!(check(r#"up{role="storage",peer!=""}"#).is_ok());
        // Labels free of addresses and the scope labels take any matcher.
        assert!(check(r#"rate({__name__=~"process_.*",job=~"ti.*",cluster_id="c"}[1m])"#).is_ok());
        assert!(check(r#"x{quantile="0.99",le!="0.5",le!="+Inf"}"#).is_ok());
        assert!(is_matcher(r#"x{le=~"0[.]5"}"#));
        assert!(is_matcher(r#"x{quantile="0.99.1"}"#));
    }

    #[test]
    fn device_names_file_servers_and_is_not_free_of_addresses() {
        // node_exporter: `device="10.21.3.4:/export"` for an NFS mount.
        assert!(is_matcher(
            r#"count(node_filesystem_avail_bytes{device=~"10[.]21[.].*"})"#
        ));
        assert!(is_matcher(
            r#"node_filesystem_avail_bytes{device="10.21.3.4:/export"}"#
        ));
        assert!(check(r#"node_filesystem_avail_bytes{device="sda1"}"#).is_ok());
        assert!(matches!(
            check(
                r#"label_replace(node_filesystem_avail_bytes, "x", "$1-$2", "device", "([0-9]+)[.](.*)")"#
            ),
            Err(AddressIssue::Rewrite { .. })
        ));
    }

    #[test]
    fn rewrites_read_only_free_labels_and_write_new_ones() {
        for e in [
            r#"label_replace(up, "x", "$1-$2-$3-$4 port $5", "instance", "([0-9]+)[.]([0-9]+)[.]([0-9]+)[.]([0-9]+):([0-9]+)")"#,
            r#"label_replace(up, "h", "$1", "instance", "(.+):[0-9]+")"#,
            r#"label_replace(up, "h", "$1", "url", "(.*)")"#,
            r#"label_replace(up, "instance", "$1", "job", "(.*)")"#,
            r#"label_replace(up, "host_ip", "$1", "job", "(.*)")"#,
            r#"label_replace(up, "job", "$1", "job", "(.*)")"#,
            r#"label_replace(vector(1), "peer", "10.21.2.10", "", "")"#,
            r#"label_replace(vector(1), "peer", "$1:$2", "job", "(.*)")"#,
            r#"label_join(up, "x", "-", "job", "instance")"#,
            r#"label_join(up, "x", ".", "job")"#,
            r#"label_join(up, "__name__", "", "job")"#,
            r#"label_join(up, "x", "", "job", "__name__")"#,
            r#"label_replace(up, "x", "$1", "le", "(.*)")"#,
            r#"count_values("instance", up)"#,
            r#"count_values("job", up)"#,
            r#"absent(nope{job="10.21.1.17:10080"})"#,
            r#"absent_over_time(nope{peer="[::1]"}[5m])"#,
            r#"absent_over_time((nope{le="0.5"})[5m:1m])"#,
            r#"sum(label_replace(up, "x", "$1", "host_ip", "(.*)"))"#,
            r#"sort_by_label(up, "instance")"#,
            r#"sort_by_label_desc(up, "job", "host_ip")"#,
            r#"sort_by_label(up, "hostname")"#,
            r#"sum(sort_by_label_desc(up, "peer"))"#,
        ] {
            assert!(is_rewrite(e), "{e}");
        }
        for e in [
            r#"label_replace(up, "component", "$1", "job", "(ti).*")"#,
            r#"label_replace(vector(1), "x", "a", "", "")"#,
            r#"label_join(up, "where", "-", "job", "cluster_id", "")"#,
            r#"count_values("value", up)"#,
            r#"absent(nope{job="tidb",le!="0.5"})"#,
            r#"sum by (instance) (rate(x[1m])) / on (instance) group_left (host_ip) y"#,
            r#"sort_by_label(up, "job", "cluster_id")"#,
            r#"sort_by_label_desc(up, "mode")"#,
            r#"count without (instance, host_ip) (up)"#,
        ] {
            assert_eq!(check(e), Ok(()), "{e}");
        }
    }
}
