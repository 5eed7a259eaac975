//! Shared fixtures of the integration tests: seed policies and an independent checker of
//! locked queries.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use evidence_policy::{ScopeBinding, TrustedPolicy, lock::LockedQuery, lock::ScopeValue};
use promql_parser::label::MatchOp;
use promql_parser::parser::{self, AtModifier, Expr, Offset};
use serde_json::{Value, json};
use std::time::SystemTime;

/// The cluster of the seeds.
pub(crate) const CLUSTER: &str = "SaaS01";

/// The trusted policy of APID-29213 (`2026-07-21 21:50–22:05 UTC+8`, SaaS01) for a
/// provider: 15-minute window, 1 hour look-back, 15 s minimum step.
pub(crate) fn apid_29213(provider: &str) -> TrustedPolicy {
    let mut v = evidence_test_support::policy::apid_29213_policy(provider).unwrap();
    match provider {
        "manus" => v["manus_target"] = json!("vida"),
        "wetech" => {
            v["wetech_query_ids"] = json!(["tidb_cpu", "tikv_cpu", "mem_ratio"]);
            v["wetech_datasource"] = json!("prometheus-main");
        }
        _ => {}
    }
    let p: TrustedPolicy = serde_json::from_value(v).unwrap();
    p.validate().unwrap();
    p
}

/// The Clinic policy of the ST-2865 replay on SaaS01: a 60-minute window (the seeds do
/// not give its clock time; 09:00–10:00 UTC+8 on the replay day is used).
pub(crate) fn st_2865_clinic() -> TrustedPolicy {
    let mut p = apid_29213("clinic");
    p.policy_id = "pol-ST-2865-1".parse().unwrap();
    p.ticket = "ST-2865".parse().unwrap();
    p.window.start = "2026-08-05T09:00:00+08:00".parse().unwrap();
    p.window.end = "2026-08-05T10:00:00+08:00".parse().unwrap();
    p.issued_at = "2026-08-05T10:01:00+08:00".parse().unwrap();
    p.expires_at = "2026-08-05T11:01:00+08:00".parse().unwrap();
    p.validate().unwrap();
    p
}

/// The scope labels of the seed packages.
pub(crate) fn scope() -> Vec<ScopeBinding> {
    vec![ScopeBinding::new("cluster_id", ScopeValue::ClusterId).unwrap()]
}

/// Arguments of one query for a provider.
pub(crate) fn one_query(provider: &str, query_id: &str, expr: &str) -> Value {
    match provider {
        "clinic" => json!({"queries": [{"queryId": query_id, "expr": expr}]}),
        "manus" => json!({"queryId": query_id, "expr": expr}),
        _ => json!({"queryId": query_id, "expr": expr, "unit": "cores"}),
    }
}

fn ms(d: &std::time::Duration) -> i128 {
    d.as_millis() as i128
}

fn off(o: &Option<Offset>) -> i128 {
    match o {
        None => 0,
        Some(Offset::Pos(d)) => ms(d),
        Some(Offset::Neg(d)) => -ms(d),
    }
}

/// What the concrete evaluation of a locked query reads.
#[derive(Debug, Default)]
pub(crate) struct Reads {
    pub(crate) earliest: Option<i128>,
    pub(crate) latest: Option<i128>,
    pub(crate) at_times: Vec<i128>,
}

impl Reads {
    fn add(&mut self, from: i128, to: i128) {
        self.earliest = Some(self.earliest.map_or(from, |e| e.min(from)));
        self.latest = Some(self.latest.map_or(to, |l| l.max(to)));
    }
}

struct Sim {
    start: i128,
    end: i128,
    reads: Reads,
}

impl Sim {
    fn at(&mut self, at: &Option<AtModifier>, t: i128) -> i128 {
        match at {
            None => t,
            Some(AtModifier::Start) => self.start,
            Some(AtModifier::End) => self.end,
            Some(AtModifier::At(st)) => {
                let v = match st.duration_since(SystemTime::UNIX_EPOCH) {
                    Ok(d) => ms(&d),
                    Err(e) => -ms(&e.duration()),
                };
                self.reads.at_times.push(v);
                v
            }
        }
    }

    /// Evaluates `expr` at `t` the way Prometheus does (subquery steps aligned to
    /// multiples of the step, a 1 minute default step), recording every read.
    fn eval(&mut self, expr: &Expr, t: i128) {
        match expr {
            Expr::VectorSelector(vs) => {
                let base = self.at(&vs.at, t) - off(&vs.offset);
                self.reads.add(base - 300_000, base);
            }
            Expr::MatrixSelector(m) => {
                let base = self.at(&m.vs.at, t) - off(&m.vs.offset);
                self.reads.add(base - ms(&m.range), base);
            }
            Expr::Subquery(sq) => {
                let end = self.at(&sq.at, t) - off(&sq.offset);
                let start = end - ms(&sq.range);
                let step = sq.step.map_or(60_000, |s| ms(&s)).max(1);
                let mut it = step * start.div_euclid(step);
                if it < start {
                    it += step;
                }
                while it <= end {
                    self.eval(&sq.expr, it);
                    it += step;
                }
            }
            Expr::Aggregate(a) => {
                if let Some(p) = &a.param {
                    self.eval(p, t);
                }
                self.eval(&a.expr, t);
            }
            Expr::Unary(u) => self.eval(&u.expr, t),
            Expr::Binary(b) => {
                self.eval(&b.lhs, t);
                self.eval(&b.rhs, t);
            }
            Expr::Paren(p) => self.eval(&p.expr, t),
            Expr::Call(c) => c.args.args.iter().for_each(|a| self.eval(a, t)),
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) => {}
            Expr::Extension(_) => panic!("extension node in a locked query"),
        }
    }
}

/// Every vector selector of `expr`, in order (matrix selectors by their vector part).
pub(crate) fn selectors<'a>(
    expr: &'a Expr,
    out: &mut Vec<&'a promql_parser::parser::VectorSelector>,
) {
    match expr {
        Expr::VectorSelector(vs) => out.push(vs),
        Expr::MatrixSelector(m) => out.push(&m.vs),
        Expr::Subquery(sq) => selectors(&sq.expr, out),
        Expr::Aggregate(a) => {
            if let Some(p) = &a.param {
                selectors(p, out);
            }
            selectors(&a.expr, out);
        }
        Expr::Unary(u) => selectors(&u.expr, out),
        Expr::Binary(b) => {
            selectors(&b.lhs, out);
            selectors(&b.rhs, out);
        }
        Expr::Paren(p) => selectors(&p.expr, out),
        Expr::Call(c) => c.args.args.iter().for_each(|a| selectors(a, out)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// Checks a locked query independently of the crate: it runs over exactly the policy
/// window with a step the limits allow; every selector carries exactly
/// `cluster_id="SaaS01"` (and no other matcher on `cluster_id`); and its concrete
/// evaluation reads nothing outside `[start - lookback, end]`, with every `@ <t>` inside
/// the window.
pub(crate) fn check_locked(q: &LockedQuery, policy: &TrustedPolicy) -> Result<(), String> {
    if q.start != policy.window.start || q.end != policy.window.end {
        return Err("query does not run over the policy window".into());
    }
    if q.step_seconds < policy.limits.min_step.as_secs() {
        return Err("step below the minimum".into());
    }
    let window = (q.end_unix() - q.start_unix()) as u64;
    if window / q.step_seconds + 1 > u64::from(policy.limits.max_points_per_series) {
        return Err("too many points".into());
    }
    let ast = parser::parse(&q.expr).map_err(|e| format!("locked expr does not parse: {e}"))?;
    let mut sels = Vec::new();
    selectors(&ast, &mut sels);
    for vs in &sels {
        if !vs.matchers.or_matchers.is_empty() {
            return Err(format!("selector with or-matchers: {vs}"));
        }
        let on_label: Vec<_> = vs
            .matchers
            .matchers
            .iter()
            .filter(|m| m.name == "cluster_id")
            .collect();
        if on_label.is_empty() {
            return Err(format!("selector not bound to the cluster: {vs}"));
        }
        if on_label
            .iter()
            .any(|m| m.op != MatchOp::Equal || m.value != CLUSTER)
        {
            return Err(format!("selector targets another cluster: {vs}"));
        }
    }
    let start = i128::from(policy.window.start.as_millisecond());
    let end = i128::from(policy.window.end.as_millisecond());
    let mut sim = Sim {
        start,
        end,
        reads: Reads::default(),
    };
    let step = i128::from(q.step_seconds) * 1000;
    let mut t = start;
    while t <= end {
        sim.eval(&ast, t);
        t += step;
    }
    let earliest_allowed = start - policy.lookback.as_millis() as i128;
    if let Some(e) = sim.reads.earliest
        && e < earliest_allowed
    {
        return Err(format!("reads {e} before {earliest_allowed}: {}", q.expr));
    }
    if let Some(l) = sim.reads.latest
        && l > end
    {
        return Err(format!("reads {l} after {end}: {}", q.expr));
    }
    if let Some(a) = sim.reads.at_times.iter().find(|a| **a < start || **a > end) {
        return Err(format!("@ {a} outside the window: {}", q.expr));
    }
    Ok(())
}
