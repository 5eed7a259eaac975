//! The scope labels one request is bound to: the package's bindings that apply to the
//! policy's cluster tier, each resolved to its policy value, with every tier-specific
//! field of that tier (`keyspace_id` for Starter and Essential, `parent_id` for Premium)
//! bound by one of them.

use super::types::ScopeBinding;
use crate::promql;
use crate::{TrustedPolicy, resolved::PolicyField};

/// The `(label, policy value)` pairs every selector of a request of `policy` is bound
/// to, or why the package's scope labels cannot scope this policy (a message for a
/// failure nobody but the platform can correct):
/// - a binding with an invalid label, or applying to a tier that lacks its value;
/// - a binding that applies to the policy's tier while the policy lacks its value;
/// - a package that declares scope labels but none, for the policy's tier, for a
///   tier-specific field that tier carries (its queries would read every keyspace or
///   parent of the cluster) or for a field it binds for other tiers (a `cluster_id`
///   bound for Premium only would leave a Dedicated cluster unscoped).
///
/// A package that declares no scope labels binds nothing.
pub(super) fn tier_bindings<'a>(
    policy: &'a TrustedPolicy,
    scope: &'a [ScopeBinding],
) -> Result<Vec<(&'a str, &'a str)>, String> {
    let tier = policy.cluster.tier;
    let mut bindings = Vec::with_capacity(scope.len());
    for b in scope {
        if !promql::is_bindable_label(&b.label) {
            return Err(format!(
                "the package declares an invalid scope label {:?}",
                b.label
            ));
        }
        b.check_tiers()
            .map_err(|e| format!("the package's scope labels are inconsistent: {e}"))?;
        if !b.applies_to(tier) {
            continue;
        }
        match b.resolve(policy) {
            Some(v) => bindings.push((b.label.as_str(), v)),
            None => {
                return Err(format!(
                    "the trusted policy (tier {tier}) has no {} for scope label {:?}",
                    b.value.name(),
                    b.label
                ));
            }
        }
    }
    if scope.is_empty() {
        return Ok(bindings);
    }
    let unbound = PolicyField::ALL.into_iter().find(|f| {
        f.carried_by(tier)
            && (f.tier_specific() || scope.iter().any(|b| b.value == *f))
            && !scope.iter().any(|b| b.value == *f && b.applies_to(tier))
    });
    match unbound {
        Some(field) => Err(format!(
            "the package binds no scope label to {} for the {tier} tier, so its queries would read beyond the ticket's {}",
            field.name(),
            field.name()
        )),
        None => Ok(bindings),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::fixtures::clinic;
    use crate::policy::ClusterTier;

    /// The committed packages' scope labels: the cluster for every tier, the keyspace
    /// for Starter and Essential, the parent for Premium.
    fn tiered() -> Vec<ScopeBinding> {
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

    fn policy(tier: ClusterTier) -> TrustedPolicy {
        let mut p = clinic();
        p.cluster.tier = tier;
        p.cluster.parent_id = PolicyField::ParentId
            .carried_by(tier)
            .then(|| "p-2001".to_owned());
        p.cluster.keyspace_id = PolicyField::KeyspaceId
            .carried_by(tier)
            .then(|| "ks-1001".to_owned());
        p
    }

    #[test]
    fn each_tier_gets_exactly_its_labels() {
        let scope = tiered();
        let expect = [
            (ClusterTier::Dedicated, vec![("cluster_id", "SaaS01")]),
            (
                ClusterTier::Premium,
                vec![("cluster_id", "SaaS01"), ("parent_id", "p-2001")],
            ),
            (
                ClusterTier::Starter,
                vec![("cluster_id", "SaaS01"), ("keyspace_id", "ks-1001")],
            ),
            (
                ClusterTier::Essential,
                vec![("cluster_id", "SaaS01"), ("keyspace_id", "ks-1001")],
            ),
        ];
        for (tier, want) in expect {
            let p = policy(tier);
            assert_eq!(tier_bindings(&p, &scope).unwrap(), want, "{tier}");
        }
    }

    #[test]
    fn a_tier_field_without_its_label_fails_closed() {
        let cluster_only = vec![ScopeBinding::new("cluster_id", PolicyField::ClusterId).unwrap()];
        for tier in [
            ClusterTier::Starter,
            ClusterTier::Essential,
            ClusterTier::Premium,
        ] {
            let e = tier_bindings(&policy(tier), &cluster_only).unwrap_err();
            assert!(e.contains("binds no scope label to"), "{tier}: {e}");
        }
        assert!(tier_bindings(&policy(ClusterTier::Dedicated), &cluster_only).is_ok());
        // A keyspace label for Starter only leaves an Essential policy unscoped.
        let starter_only = vec![
            ScopeBinding::new("cluster_id", PolicyField::ClusterId).unwrap(),
            ScopeBinding::new("keyspace_id", PolicyField::KeyspaceId)
                .unwrap()
                .for_tiers([ClusterTier::Starter]),
        ];
        assert!(tier_bindings(&policy(ClusterTier::Starter), &starter_only).is_ok());
        let e = tier_bindings(&policy(ClusterTier::Essential), &starter_only).unwrap_err();
        assert!(e.contains("keyspace_id for the essential tier"), "{e}");
        // A field bound for some tiers only is bound for every tier that carries it.
        let premium_cluster = vec![
            ScopeBinding::new("cluster_id", PolicyField::ClusterId)
                .unwrap()
                .for_tiers([ClusterTier::Premium]),
            ScopeBinding::new("parent_id", PolicyField::ParentId)
                .unwrap()
                .for_tiers([ClusterTier::Premium]),
        ];
        assert!(tier_bindings(&policy(ClusterTier::Premium), &premium_cluster).is_ok());
        let e = tier_bindings(&policy(ClusterTier::Dedicated), &premium_cluster).unwrap_err();
        assert!(e.contains("cluster_id for the dedicated tier"), "{e}");
        // A binding to a field some of its tiers lack is refused for every policy.
        let every_tier = vec![ScopeBinding::new("keyspace_id", PolicyField::KeyspaceId).unwrap()];
        let e = tier_bindings(&policy(ClusterTier::Starter), &every_tier).unwrap_err();
        assert!(e.contains("the dedicated tier has no keyspace_id"), "{e}");
        // A policy that lacks the field its tier requires is refused (validate first,
        // the binding too).
        let mut p = policy(ClusterTier::Premium);
        p.cluster.parent_id = None;
        let e = tier_bindings(&p, &tiered()).unwrap_err();
        assert!(e.contains("has no parent_id"), "{e}");
    }
}
