//! What a connector needs from the trusted policy, resolved once while locking: the
//! cluster's fields (path template placeholders and scope label values name them from
//! the one list [`PolicyField`]), the Manus target, the Wetech datasource and how many
//! series the evidence keeps. A connector reads this, never the policy.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ManusTarget, TrustedPolicy, policy::ClusterTier};

/// A field of the trusted policy's scope that a scope label is bound to or a path
/// template placeholder names. Its snake_case name is the one spelling everywhere
/// (`{cluster_id}` in a template, `"value": "cluster_id"` in a manifest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PolicyField {
    /// `cluster.id`.
    ClusterId,
    /// `account`.
    Account,
    /// `cluster.parent_id` (Premium).
    ParentId,
    /// `cluster.keyspace_id` (Starter, Essential).
    KeyspaceId,
}

impl PolicyField {
    /// Every field.
    pub const ALL: [PolicyField; 4] = [
        PolicyField::ClusterId,
        PolicyField::Account,
        PolicyField::ParentId,
        PolicyField::KeyspaceId,
    ];

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            PolicyField::ClusterId => "cluster_id",
            PolicyField::Account => "account",
            PolicyField::ParentId => "parent_id",
            PolicyField::KeyspaceId => "keyspace_id",
        }
    }

    /// The field called `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        PolicyField::ALL.into_iter().find(|f| f.name() == name)
    }

    /// True when a cluster of `tier` carries this field: the cluster id and the account
    /// always, the parent id for Premium, the keyspace id for Starter and Essential
    /// (what [`TrustedPolicy::validate`] requires).
    pub fn carried_by(self, tier: ClusterTier) -> bool {
        match self {
            PolicyField::ClusterId | PolicyField::Account => true,
            PolicyField::ParentId => tier == ClusterTier::Premium,
            PolicyField::KeyspaceId => {
                matches!(tier, ClusterTier::Starter | ClusterTier::Essential)
            }
        }
    }

    /// The fields only some tiers carry, which scope a cluster of those tiers further
    /// than its id: [`PolicyField::ParentId`] and [`PolicyField::KeyspaceId`].
    pub fn tier_specific(self) -> bool {
        ClusterTier::ALL.into_iter().any(|t| !self.carried_by(t))
    }

    /// The value of this field in `policy`, when the policy has it (the tier decides
    /// whether a parent or keyspace id exists).
    pub fn of(self, policy: &TrustedPolicy) -> Option<&str> {
        match self {
            PolicyField::ClusterId => Some(policy.cluster.id.as_str()),
            PolicyField::Account => Some(policy.account.as_str()),
            PolicyField::ParentId => policy.cluster.parent_id.as_deref(),
            PolicyField::KeyspaceId => policy.cluster.keyspace_id.as_deref(),
        }
    }
}

/// The scope a locked request runs in, resolved from its trusted policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedScope {
    /// The policy's scope fields that it has, with their values.
    fields: Vec<(PolicyField, String)>,
    /// The Manus target; present exactly for Manus.
    pub manus_target: Option<ManusTarget>,
    /// Most series kept in the compact evidence (top-k by peak).
    pub series_kept: u32,
    /// The Grafana datasource uid; present exactly for Wetech.
    pub wetech_datasource: Option<String>,
}

impl ResolvedScope {
    /// Resolves the scope of `policy`.
    pub fn of(policy: &TrustedPolicy) -> Self {
        ResolvedScope {
            fields: PolicyField::ALL
                .into_iter()
                .filter_map(|f| f.of(policy).map(|v| (f, v.to_owned())))
                .collect(),
            manus_target: policy.manus_target,
            series_kept: policy.limits.max_series_kept,
            wetech_datasource: policy.wetech_datasource.clone(),
        }
    }

    /// The value of `field`, when the policy has it.
    pub fn field(&self, field: PolicyField) -> Option<&str> {
        self.fields
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for f in PolicyField::ALL {
            assert_eq!(PolicyField::from_name(f.name()), Some(f));
            assert_eq!(serde_json::to_value(f).unwrap(), f.name());
        }
        assert_eq!(PolicyField::from_name("ticket"), None);
        let policy: TrustedPolicy =
            serde_json::from_value(crate::policy::tests::seed_json()).unwrap();
        let scope = ResolvedScope::of(&policy);
        for f in PolicyField::ALL {
            assert_eq!(scope.field(f), f.of(&policy), "{}", f.name());
        }
        assert_eq!(
            scope.field(PolicyField::ClusterId),
            Some(policy.cluster.id.as_str())
        );
    }

    #[test]
    fn carried_fields_follow_the_tier_rules_of_validate() {
        let base: TrustedPolicy =
            serde_json::from_value(crate::policy::tests::seed_json()).unwrap();
        for tier in ClusterTier::ALL {
            let mut p = base.clone();
            p.cluster.tier = tier;
            p.cluster.parent_id = PolicyField::ParentId
                .carried_by(tier)
                .then(|| "p-1".to_owned());
            p.cluster.keyspace_id = PolicyField::KeyspaceId
                .carried_by(tier)
                .then(|| "ks-1".to_owned());
            p.validate().unwrap();
            for f in PolicyField::ALL {
                assert_eq!(
                    f.of(&p).is_some(),
                    f.carried_by(tier),
                    "{} {tier}",
                    f.name()
                );
            }
        }
        let specific: Vec<_> = PolicyField::ALL
            .into_iter()
            .filter(|f| f.tier_specific())
            .collect();
        assert_eq!(specific, [PolicyField::ParentId, PolicyField::KeyspaceId]);
    }
}
