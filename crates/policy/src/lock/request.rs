//! Locking a request: reading the Clinic batch and the query ids, and locking each query
//! (or discovery) against the policy.

use evidence_result::{PolicySource, Provider};
use serde_json::{Map, Value};

use super::arguments::{arguments_object, read_query_id, whole};
use super::code::Code;
use super::context::Ctx;
use super::discovery::{DISCOVERY_KEYS, asks_discovery, lock_discovery_in};
use super::fixed::{CLINIC_QUERY, MANUS, WETECH, extras_failure};
use super::query::lock_query;
use super::types::{LockRejection, LockedItem, LockedRequest, ScopeBinding};
use crate::args::json_kind;
use crate::{ResolvedScope, TrustedPolicy};

/// Locks model arguments against a trusted policy, entirely locally, before any network
/// or browser work.
///
/// `args` is the raw JSON the model sent; `scope` the package's declared scope labels;
/// `source` where the policy came from (it is carried into every result). Arguments are
/// parsed here rather than by serde, so that a field the platform fixes (`provider`,
/// cluster, ticket, account, target, URL, host, time window, ...) gets a clear
/// non-widening correction.
///
/// Arguments that carry `discover` ask for a discovery (of a Manus or Wetech call, or of
/// one item of a Clinic batch) and are locked by [`super::lock_discovery`]'s rules into
/// the query that answers it ([`super::LockedDiscovery::query`]).
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
    let obj = arguments_object(args)?;
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
                    let keys = if asks_discovery(obj) {
                        &DISCOVERY_KEYS[..]
                    } else {
                        spec.keys
                    };
                    let detail = match extras_failure(obj, keys) {
                        Some(f) => format!("{detail}; {}", f.detail_error),
                        None => detail,
                    };
                    whole(code, detail, &hint)
                },
            )?;
            let query = if asks_discovery(obj) {
                lock_discovery_in(&ctx, obj, query_id)?.query()
            } else {
                lock_query(&ctx, spec, query_id, obj)?
            };
            vec![LockedItem::Ready(query)]
        }
    };
    Ok(LockedRequest {
        operation: policy.operation,
        scope: ResolvedScope::of(policy),
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
            let locked = if asks_discovery(&item) {
                lock_discovery_in(ctx, &item, id.clone()).map(|d| d.query())
            } else {
                lock_query(ctx, &CLINIC_QUERY, id.clone(), &item)
            };
            match locked {
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
    use evidence_result::{Failure, FailureClass, Origin, QueryId};
    use serde_json::json;

    use super::*;
    use crate::lock::ScopeValue;
    use crate::lock::fixtures::{clinic, scope, wetech};

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
    fn subquery_points_count_the_window_and_the_query_step() {
        // 900 s window, at most 100 points, 15 s step (the default and the minimum).
        let mut p = clinic();
        p.limits.max_points_per_series = 100;
        let one = |expr: &str| {
            let args = json!({"queries": [{"queryId": "q", "expr": expr}]});
            let locked = lock(&p, PolicySource::TrustedEnvelope, &args, &scope()).unwrap();
            match &locked.items[0] {
                LockedItem::Ready(q) => Ok(q.expr.clone()),
                LockedItem::Rejected { failure, .. } => Err(Box::new(failure.clone())),
            }
        };
        // (900 s + 1200 s) / 15 s + 1 = 141 points: the window counts, not the range alone.
        let f = one("max_over_time(up[20m:15s])").unwrap_err();
        assert_eq!(f.error.code.as_str(), "too_many_points");
        assert!(
            f.detail_error.contains("141 evaluation points"),
            "{}",
            f.detail_error
        );
        assert!(
            f.correction.instruction.contains("at least 21001ms"),
            "{}",
            f.correction.instruction
        );
        // A subquery without a step is counted at the query's step: 141 points again.
        let f = one("max_over_time(up[20m:])").unwrap_err();
        assert_eq!(f.error.code.as_str(), "too_many_points");
        // (900 s + 585 s) / 15 s + 1 = 100 points is within the limit, and the locked
        // expression carries the step it was counted with.
        assert_eq!(
            one("max_over_time(up[585s:])").unwrap(),
            r#"max_over_time(up{cluster_id="SaaS01"}[9m45s:15s])"#
        );
        assert!(one("max_over_time(up[10m:])").is_err(), "101 points");
        // Anchored with @ end(), the parent is evaluated once: 1200 s / 15 s + 1 = 81.
        assert!(one("max_over_time(up[20m:15s] @ end())").is_ok());
        // A nested subquery runs over its parent's whole evaluation span:
        // (900 s + 300 s + 60 s) / 15 s + 1 = 85 points, and with 10 s steps 127.
        assert!(one("max_over_time(max_over_time(up[1m:])[5m:1m])").is_ok());
        assert!(one("max_over_time(max_over_time(up[1m:10s])[5m:1m])").is_err());
    }

    #[test]
    fn scope_bindings_resolve_or_fail_closed() {
        let p = clinic();
        let ks = ScopeBinding::new("keyspace_id", ScopeValue::KeyspaceId).unwrap();
        let args = json!({"queries": [{"queryId": "q", "expr": "up"}]});
        // Bound for every tier, but a dedicated cluster has no keyspace: fails closed.
        let r = lock(
            &p,
            PolicySource::TrustedEnvelope,
            &args,
            std::slice::from_ref(&ks),
        )
        .unwrap_err();
        assert_eq!(r.class(), FailureClass::Internal);
        assert!(!r.failure.correction.allowed);
        let starter = ks.for_tiers([
            crate::policy::ClusterTier::Starter,
            crate::policy::ClusterTier::Essential,
        ]);
        let locked = lock(
            &p,
            PolicySource::TrustedEnvelope,
            &args,
            std::slice::from_ref(&starter),
        )
        .unwrap();
        assert_eq!(locked.ready().next().unwrap().expr, "up");
        let mut s = clinic();
        s.cluster.tier = crate::policy::ClusterTier::Starter;
        s.cluster.keyspace_id = Some("ks-1001".to_owned());
        let locked = lock(&s, PolicySource::TrustedEnvelope, &args, &[starter]).unwrap();
        assert_eq!(
            locked.ready().next().unwrap().expr,
            r#"up{keyspace_id="ks-1001"}"#
        );
        assert!(ScopeBinding::new("__name__", ScopeValue::ClusterId).is_err());
        let parsed: ScopeBinding =
            serde_json::from_value(json!({"label": "cluster_id", "value": "cluster_id"})).unwrap();
        assert_eq!(parsed, scope()[0]);
        let parsed: ScopeBinding = serde_json::from_value(
            json!({"label": "keyspace_id", "value": "keyspace_id", "tiers": ["starter"]}),
        )
        .unwrap();
        assert!(parsed.applies_to(crate::policy::ClusterTier::Starter));
        assert!(!parsed.applies_to(crate::policy::ClusterTier::Essential));
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
