//! Scope for every cluster tier: with the tier labels the committed packages declare
//! (`cluster_id` always, `keyspace_id` for Starter and Essential, `parent_id` for
//! Premium), every selector of a locked query carries exactly the policy's value of
//! each label its tier binds, and an expression that names another keyspace, parent or
//! cluster is always `scope_violation`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};

use evidence_policy::{
    ScopeBinding, TrustedPolicy, lock, lock::LockedItem, policy::ClusterTier, resolved::PolicyField,
};
use evidence_result::{FailureClass, PolicySource};
use promql_parser::label::MatchOp;
use promql_parser::parser;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use support::*;

const KEYSPACE: &str = "ks-1001";
const PARENT: &str = "p-2001";

/// The scope labels of the committed packages.
fn tiered_scope() -> Vec<ScopeBinding> {
    vec![
        ScopeBinding::new("cluster_id", PolicyField::ClusterId).unwrap(),
        ScopeBinding::new("keyspace_id", PolicyField::KeyspaceId)
            .unwrap()
            .for_tiers([ClusterTier::Starter, ClusterTier::Essential]),
        ScopeBinding::new("parent_id", PolicyField::ParentId)
            .unwrap()
            .for_tiers([ClusterTier::Premium]),
    ]
}

/// The APID-29213 Clinic policy for a cluster of `tier`, with the tier's ids.
fn tier_policy(tier: ClusterTier) -> TrustedPolicy {
    let mut p = apid_29213("clinic");
    p.cluster.tier = tier;
    p.cluster.parent_id = PolicyField::ParentId
        .carried_by(tier)
        .then(|| PARENT.to_owned());
    p.cluster.keyspace_id = PolicyField::KeyspaceId
        .carried_by(tier)
        .then(|| KEYSPACE.to_owned());
    p.validate().unwrap();
    p
}

/// The `(label, value)` pairs a locked query of `tier` must carry on every selector.
fn tier_labels(tier: ClusterTier) -> Vec<(&'static str, &'static str)> {
    let mut labels = vec![("cluster_id", CLUSTER)];
    match tier {
        ClusterTier::Dedicated => {}
        ClusterTier::Premium => labels.push(("parent_id", PARENT)),
        ClusterTier::Starter | ClusterTier::Essential => labels.push(("keyspace_id", KEYSPACE)),
    }
    labels
}

/// A scope matcher a model may write, the label it names and whether it widens the
/// scope of the tiers that bind that label (naming the bound value exactly does not).
fn scope_matcher() -> impl Strategy<Value = (&'static str, &'static str, bool)> {
    prop::sample::select(vec![
        ("", "", false),
        ("", "", false),
        (r#"cluster_id="SaaS01""#, "cluster_id", false),
        (r#"cluster_id="SaaS03""#, "cluster_id", true),
        (r#"keyspace_id="ks-1001""#, "keyspace_id", false),
        (r#"keyspace_id="ks-1002""#, "keyspace_id", true),
        (r#"keyspace_id=~"ks-.*""#, "keyspace_id", true),
        (r#"keyspace_id!="ks-1001""#, "keyspace_id", true),
        (r#"keyspace_id="""#, "keyspace_id", true),
        (r#""keyspace_id"="ks-1002""#, "keyspace_id", true),
        (r#"parent_id="p-2001""#, "parent_id", false),
        (r#"parent_id="p-2002""#, "parent_id", true),
        (r#"parent_id=~"p-2001|p-2002""#, "parent_id", true),
        (r#"parent_id!~"x""#, "parent_id", true),
    ])
}

/// A generated expression and the labels its scope matchers widen.
#[derive(Debug, Clone)]
struct Gen {
    text: String,
    widens: Vec<&'static str>,
}

fn leaf() -> impl Strategy<Value = Gen> {
    let metric = prop::sample::select(vec!["up", "tidb_tenant_request_units", "tikv_mem", ""]);
    let func = prop::sample::select(vec!["", "rate", "max_over_time", "absent_over_time"]);
    (metric, scope_matcher(), func).prop_map(|(metric, (m, label, widens), func)| {
        // A selector without a metric name needs a matcher that cannot match empty.
        let matchers = match (metric.is_empty(), m.is_empty()) {
            (true, true) => r#"job="tidb""#.to_owned(),
            (true, false) => format!(r#"job="tidb",{m}"#),
            (false, _) => m.to_owned(),
        };
        let selector = if matchers.is_empty() {
            metric.to_owned()
        } else {
            format!("{metric}{{{matchers}}}")
        };
        let text = if func.is_empty() {
            selector
        } else {
            format!("{func}({selector}[5m])")
        };
        Gen {
            text,
            widens: if widens { vec![label] } else { vec![] },
        }
    })
}

fn expr() -> impl Strategy<Value = Gen> {
    leaf().prop_recursive(3, 10, 2, |inner| {
        let agg = prop::sample::select(vec![
            "sum by (keyspace_id)",
            "max",
            "count without (parent_id)",
        ]);
        let op = prop::sample::select(vec!["+", "/ on (instance)", "or", "unless"]);
        prop_oneof![
            (agg, inner.clone()).prop_map(|(a, e)| Gen {
                text: format!("{a} ({})", e.text),
                widens: e.widens
            }),
            (inner.clone(), op, inner.clone()).prop_map(|(l, o, r)| Gen {
                text: format!("({}) {o} ({})", l.text, r.text),
                widens: [l.widens, r.widens].concat()
            }),
            inner.clone().prop_map(|e| Gen {
                text: format!("max_over_time(({})[10m:1m])", e.text),
                widens: e.widens
            }),
            inner.prop_map(|e| Gen {
                text: format!(
                    "label_replace({}, \"keyspace_id\", \"ks-1002\", \"job\", \".*\")",
                    e.text
                ),
                widens: e.widens
            }),
        ]
    })
}

/// Every selector of `expr` carries exactly `label="value"` for each of `labels`, and no
/// other matcher on them.
fn check_bound(expr: &str, labels: &[(&str, &str)]) -> Result<(), String> {
    let ast = parser::parse(expr).map_err(|e| format!("locked expr does not parse: {e}"))?;
    let mut sels = Vec::new();
    selectors(&ast, &mut sels);
    if sels.is_empty() {
        return Err(format!("no selector in {expr}"));
    }
    for vs in sels {
        if !vs.matchers.or_matchers.is_empty() {
            return Err(format!("or-matchers in {vs}"));
        }
        for (label, value) in labels {
            let on: Vec<_> = vs
                .matchers
                .matchers
                .iter()
                .filter(|m| m.name == *label)
                .collect();
            if on.len() != 1 || on[0].op != MatchOp::Equal || on[0].value != *value {
                return Err(format!("{vs} is not bound to {label}={value:?}"));
            }
        }
    }
    Ok(())
}

/// For generated PromQL over every tier, a locked query binds every selector to exactly
/// the tier's labels; an expression widening a label its tier binds is always
/// `scope_violation`; a matcher on a label the tier does not bind is left alone.
#[test]
fn every_tier_binds_its_labels_and_refuses_another_tenant() {
    let ready = AtomicUsize::new(0);
    let rejected = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 1000,
        ..Config::default()
    });
    let tier = prop::sample::select(ClusterTier::ALL.to_vec());
    runner
        .run(&(expr(), tier), |(g, tier)| {
            let policy = tier_policy(tier);
            let labels = tier_labels(tier);
            let args = one_query("clinic", "q", &g.text);
            let locked = lock(
                &policy,
                PolicySource::TrustedEnvelope,
                &args,
                &tiered_scope(),
            )
            .map_err(|r| TestCaseError::fail(format!("whole request refused: {r}")))?;
            let widens = g
                .widens
                .iter()
                .any(|label| labels.iter().any(|(l, _)| l == label));
            match &locked.items[0] {
                LockedItem::Ready(q) => {
                    ready.fetch_add(1, Ordering::Relaxed);
                    prop_assert!(!widens, "{tier}: accepted {}", g.text);
                    check_bound(&q.expr, &labels).map_err(|e| {
                        TestCaseError::fail(format!("{tier}: {e}\n  from: {}", g.text))
                    })?;
                }
                LockedItem::Rejected { failure, .. } => {
                    rejected.fetch_add(1, Ordering::Relaxed);
                    if widens {
                        prop_assert_eq!(failure.error.code.as_str(), "scope_violation");
                        prop_assert_eq!(failure.error.class, FailureClass::PolicyViolation);
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    let (ready, rejected) = (ready.into_inner(), rejected.into_inner());
    assert!(
        ready >= 100 && rejected >= 100,
        "generator too one-sided: {ready} ready, {rejected} rejected"
    );
}

/// A policy whose tier carries a field no scope label binds, and a policy lacking the
/// field its tier requires, fail closed before any query locks.
#[test]
fn an_unscoped_tier_field_fails_closed() {
    let cluster_only = [ScopeBinding::new("cluster_id", PolicyField::ClusterId).unwrap()];
    for tier in [
        ClusterTier::Starter,
        ClusterTier::Essential,
        ClusterTier::Premium,
    ] {
        let r = lock(
            &tier_policy(tier),
            PolicySource::TrustedEnvelope,
            &one_query("clinic", "q", "up"),
            &cluster_only,
        )
        .unwrap_err();
        assert_eq!(r.class(), FailureClass::Internal, "{tier}");
        assert!(
            r.to_string().contains("binds no scope label"),
            "{tier}: {r}"
        );
    }
    let mut lacking = tier_policy(ClusterTier::Essential);
    lacking.cluster.keyspace_id = None;
    let r = lock(
        &lacking,
        PolicySource::TrustedEnvelope,
        &one_query("clinic", "q", "up"),
        &tiered_scope(),
    )
    .unwrap_err();
    assert_eq!(r.class(), FailureClass::Internal);
    assert!(r.to_string().contains("keyspace_id"), "{r}");
}
