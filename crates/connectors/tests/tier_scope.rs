//! Scope for every cluster tier, against a real Prometheus behind the Clinic front: the
//! committed Clinic package's scope labels bind a Dedicated cluster by its id, a Starter
//! or Essential cluster also by its keyspace and a Premium cluster also by its parent.
//! The fixture's other keyspace and other parent on the same clusters hold higher
//! values: a scoped query never reads them, and a matcher that names them is
//! `scope_violation` before anything is sent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use evidence_connectors::{ClinicConfig, ClinicConnector, ClinicSecrets, Connector, HostAllowlist};
use evidence_package::Package;
use evidence_policy::{
    LockedRequest, ScopeBinding, TrustedPolicy, lock, lock::LockedItem, policy::ClusterTier,
};
use evidence_result::{Evidence, FailureClass, PolicySource, Status, ToolResult};
use evidence_test_support::*;
use secrecy::SecretString;
use serde_json::{Value, json};
use url::Url;

mod scope;

use scope::committed_scope;

const TOKEN: &str = "clinic-token-7e21c4b9d05a";

/// The APID-29213 window's Clinic policy for a cluster of `tier`.
fn policy(
    tier: ClusterTier,
    cluster: &str,
    parent: Option<&str>,
    keyspace: Option<&str>,
) -> TrustedPolicy {
    let mut c = json!({"id": cluster, "tier": tier});
    if let Some(p) = parent {
        c["parent_id"] = json!(p);
    }
    if let Some(k) = keyspace {
        c["keyspace_id"] = json!(k);
    }
    let p: TrustedPolicy = serde_json::from_value(policy::apid_29213_now(
        "clinic",
        "managed_auto_oncall_clinic",
        json!({"policy_id": format!("pol-tier-{tier}"), "cluster": c}),
    ))
    .unwrap();
    p.validate().unwrap();
    p
}

fn keyspace_policy(tier: ClusterTier) -> TrustedPolicy {
    policy(tier, SERVERLESS_CLUSTER, None, Some(TICKET_KEYSPACE))
}

fn premium_policy() -> TrustedPolicy {
    policy(
        ClusterTier::Premium,
        PREMIUM_CLUSTER,
        Some(TICKET_PARENT),
        None,
    )
}

fn args(expr: &str) -> Value {
    json!({"queries": [{"queryId": "q", "expr": expr, "unit": "RU"}]})
}

/// Locks `expr` with the committed scope labels: the locked expression, or the code
/// and class of the item's rejection.
fn lock_one(policy: &TrustedPolicy, expr: &str) -> Result<LockedRequest, (String, FailureClass)> {
    let request = lock(
        policy,
        PolicySource::TrustedEnvelope,
        &args(expr),
        &committed_scope(),
    )
    .map_err(|r| (r.code().as_str().to_owned(), r.class()))?;
    match &request.items[0] {
        LockedItem::Ready(_) => Ok(request),
        LockedItem::Rejected { failure, .. } => {
            Err((failure.error.code.as_str().to_owned(), failure.error.class))
        }
    }
}

struct Env {
    _prometheus: Prometheus,
    front: ClinicFront,
}

impl Env {
    async fn start() -> Self {
        let prometheus = Prometheus::start(Fixture::Main).await.unwrap();
        let front = ClinicFront::start(&prometheus.url(), SecretString::from(TOKEN))
            .await
            .unwrap();
        Env {
            _prometheus: prometheus,
            front,
        }
    }

    async fn run(&self, request: &LockedRequest) -> ToolResult {
        let config = ClinicConfig::new(
            Url::parse(&self.front.base_url()).unwrap(),
            HostAllowlist::new(["127.0.0.1"]).unwrap(),
        );
        ClinicConnector::new()
            .unwrap()
            .call(
                request,
                &config,
                &ClinicSecrets::new(SecretString::from(TOKEN)),
            )
            .await
            .unwrap()
    }

    /// Locks and runs `expr`; the evidence of its one item.
    async fn evidence(&self, policy: &TrustedPolicy, expr: &str) -> std::sync::Arc<Evidence> {
        let request = lock_one(policy, expr).unwrap_or_else(|e| panic!("{expr}: {e:?}"));
        let result = self.run(&request).await;
        let item = &result.details().items[0];
        assert_eq!(item.status, Status::Ok, "{}", result.text());
        item.evidence.clone().unwrap()
    }
}

fn locked_expr(request: &LockedRequest) -> String {
    request.ready().next().unwrap().expr.clone()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= FIGURE_TOLERANCE
}

#[test]
fn every_committed_package_binds_the_tier_labels() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packages");
    for (identity, revision) in [
        ("managed_auto_oncall_clinic", "v3"),
        ("managed_auto_oncall_manus", "v2"),
        ("managed_auto_oncall_wetech", "v2"),
    ] {
        let package = Package::load_source(&root.join(identity).join(revision)).unwrap();
        let labels: Vec<(String, Vec<ClusterTier>)> = package
            .manifest()
            .manifest()
            .scope_labels
            .iter()
            .map(|b| (b.label.clone(), b.tiers.clone()))
            .collect();
        assert_eq!(
            labels,
            [
                ("cluster_id".to_owned(), vec![]),
                (
                    "keyspace_id".to_owned(),
                    vec![ClusterTier::Starter, ClusterTier::Essential]
                ),
                ("parent_id".to_owned(), vec![ClusterTier::Premium]),
            ],
            "{identity} {revision}"
        );
    }
}

#[test]
fn each_tier_locks_its_own_labels_and_refuses_another_tenant() {
    let dedicated = policy(ClusterTier::Dedicated, CPU_CLUSTER, None, None);
    let bound = lock_one(&dedicated, "sum(tidb_tenant_request_units)").unwrap();
    assert_eq!(
        locked_expr(&bound),
        r#"sum(tidb_tenant_request_units{cluster_id="SaaS01"})"#
    );
    for tier in [ClusterTier::Starter, ClusterTier::Essential] {
        let p = keyspace_policy(tier);
        let bound = lock_one(&p, "sum(tidb_tenant_request_units)").unwrap();
        assert_eq!(
            locked_expr(&bound),
            r#"sum(tidb_tenant_request_units{cluster_id="SaaS03",keyspace_id="ks-1001"})"#,
            "{tier}"
        );
        for other in [
            r#"sum(tidb_tenant_request_units{keyspace_id="ks-1002"})"#,
            r#"sum(tidb_tenant_request_units{keyspace_id=~"ks-.*"})"#,
            r#"sum(tidb_tenant_request_units{keyspace_id!="ks-1001"})"#,
            r#"sum(tidb_tenant_request_units{keyspace_id=""})"#,
        ] {
            let (code, class) = lock_one(&p, other).unwrap_err();
            assert_eq!(code, "scope_violation", "{tier}: {other}");
            assert_eq!(class, FailureClass::PolicyViolation);
        }
        // Naming the ticket's own keyspace is no widening.
        assert!(lock_one(&p, r#"tidb_tenant_request_units{keyspace_id="ks-1001"}"#).is_ok());
    }
    let p = premium_policy();
    let bound = lock_one(&p, "sum(tidb_tenant_request_units)").unwrap();
    assert_eq!(
        locked_expr(&bound),
        r#"sum(tidb_tenant_request_units{cluster_id="SaaS04",parent_id="p-2001"})"#
    );
    for other in [
        r#"sum(tidb_tenant_request_units{parent_id="p-2002"})"#,
        r#"sum(tidb_tenant_request_units{parent_id=~"p-.*"})"#,
    ] {
        let (code, _) = lock_one(&p, other).unwrap_err();
        assert_eq!(code, "scope_violation", "{other}");
    }
    // A policy whose tier lacks the field it needs never validates, and a package
    // scoped by cluster alone cannot take a tiered policy.
    let cluster_only =
        [ScopeBinding::new("cluster_id", evidence_policy::lock::ScopeValue::ClusterId).unwrap()];
    let r = lock(
        &keyspace_policy(ClusterTier::Starter),
        PolicySource::TrustedEnvelope,
        &args("up"),
        &cluster_only,
    )
    .unwrap_err();
    assert_eq!(r.class(), FailureClass::Internal);
    assert!(r.to_string().contains("keyspace_id"), "{r}");
}

#[tokio::test]
async fn each_tier_reads_only_its_own_tenant_on_real_prometheus() {
    let env = Env::start().await;

    // Dedicated: the cluster id alone; no tier label is added, the seed figures stand.
    let dedicated = policy(ClusterTier::Dedicated, CPU_CLUSTER, None, None);
    let e = env.evidence(&dedicated, TIDB_CPU.expr).await;
    assert_eq!(e.series_count, 56);
    assert!(close(e.top_peak().unwrap(), 22.84));

    // The other tenants exist on the same clusters: a read locked without scope labels
    // sees them.
    let unscoped = lock(
        &keyspace_policy(ClusterTier::Starter),
        PolicySource::TrustedEnvelope,
        &args("tidb_tenant_request_units"),
        &[],
    )
    .unwrap();
    let result = env.run(&unscoped).await;
    let all = result.details().items[0].evidence.clone().unwrap();
    assert_eq!(
        all.series_count,
        TICKET_KEYSPACE_UNITS.series as u64
            + OTHER_KEYSPACE_UNITS.series as u64
            + TICKET_PARENT_UNITS.series as u64
            + OTHER_PARENT_UNITS.series as u64
    );
    assert!(close(all.top_peak().unwrap(), OTHER_PARENT_UNITS.peak));

    // Starter and Essential: the ticket's keyspace only.
    for tier in [ClusterTier::Starter, ClusterTier::Essential] {
        let p = keyspace_policy(tier);
        let e = env.evidence(&p, "tidb_tenant_request_units").await;
        assert_eq!(
            e.series_count, TICKET_KEYSPACE_UNITS.series as u64,
            "{tier}"
        );
        assert!(
            close(e.top_peak().unwrap(), TICKET_KEYSPACE_UNITS.peak),
            "{tier}"
        );
        let e = env.evidence(&p, "sum(tidb_tenant_request_units)").await;
        assert!(
            close(e.top_peak().unwrap(), 100.0 + 110.0 + 120.0),
            "{tier}"
        );
        let e = env.evidence(&p, KEYSPACE_REQUEST_UNITS.expr).await;
        assert_eq!(e.series_count, TICKET_KEYSPACE_UNITS.series as u64);
    }

    // Premium: the ticket's parent only.
    let p = premium_policy();
    let e = env.evidence(&p, "tidb_tenant_request_units").await;
    assert_eq!(e.series_count, TICKET_PARENT_UNITS.series as u64);
    assert!(close(e.top_peak().unwrap(), TICKET_PARENT_UNITS.peak));
    let e = env.evidence(&p, PARENT_REQUEST_UNITS.expr).await;
    assert_eq!(e.series_count, TICKET_PARENT_UNITS.series as u64);
}
