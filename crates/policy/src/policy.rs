//! The trusted policy model: what Auto-oncall fixes for one request (ticket, provider,
//! package, cluster, Manus target, time window, limits) and its consistency rules.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use evidence_result::{Digest, Operation, PackageId, Provider, QueryId};
use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::PolicyError;
use crate::ids::{PolicyId, SCOPE_VALUE_PATTERN, TicketKey, is_scope_value};

/// The largest number of points per series any policy may allow: the Prometheus
/// `query_range` resolution limit.
pub const MAX_POINTS_PER_SERIES: u32 = 11_000;

/// The largest Clinic batch any policy may allow (the Agent-visible schema's `maxItems`).
pub const MAX_BATCH: u32 = 20;

/// The largest look-back any policy may allow (31 days).
pub const MAX_LOOKBACK: Duration = Duration::from_secs(31 * 24 * 3600);

/// How far in the future `issued_at` may lie and still verify, for clock skew between
/// Auto-oncall and the tool sandbox. Expiry gets no such tolerance.
pub const CLOCK_SKEW: Duration = Duration::from_secs(60);

/// The trusted, per-request policy that Auto-oncall derives from its canonical ticket
/// classification. It fixes everything the model must not choose: ticket, provider,
/// package, account, cluster, Manus target, operation, Wetech query ids and the time
/// window with its look-back and limits.
///
/// Times are RFC 3339 with any offset on input (for example `2026-07-21T21:50:00+08:00`)
/// and are normalized to UTC (`2026-07-21T13:50:00Z`) on output. Durations are whole
/// seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = crate::policy_schema::provider_rules)]
pub struct TrustedPolicy {
    /// Identity of this issued policy (for audit).
    pub policy_id: PolicyId,
    /// The exact ticket, e.g. `APID-29213`.
    pub ticket: TicketKey,
    /// The provider the package talks to.
    pub provider: Provider,
    /// The package this policy is for.
    pub package: PackageId,
    /// The provider account: 1-128 printable ASCII characters without spaces, quotes
    /// or backslashes (the account is bound into a path or a label matcher).
    #[schemars(pattern(SCOPE_VALUE_PATTERN))]
    pub account: String,
    /// The cluster and its tier-specific identifiers.
    pub cluster: ClusterScope,
    /// The Manus target; present exactly when the provider is Manus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manus_target: Option<ManusTarget>,
    /// The one allowed operation.
    pub operation: Operation,
    /// Scoped discovery (which metric names, label names, label values and series exist
    /// within the policy's scope and window), when the policy grants it; absent, a
    /// discovery request is refused. Granted only by the signed policy, never by the
    /// model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<DiscoveryGrant>,
    /// The query ids Wetech may run; non-empty exactly when the provider is Wetech.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wetech_query_ids: Vec<QueryId>,
    /// The uid of the Grafana datasource Wetech queries (the ticket's region decides
    /// it); present exactly when the provider is Wetech. 1-128 letters, digits, '.',
    /// '_', '-'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^[A-Za-z0-9._-]{1,128}$"))]
    pub wetech_datasource: Option<String>,
    /// The time window every query evaluates over.
    pub window: TimeWindow,
    /// How far before `window.start` an expression may read (range selectors, subquery
    /// ranges, offsets and the 5-minute instant-selector staleness look-back), whole
    /// seconds, at most [`MAX_LOOKBACK`] (31 days).
    #[serde(with = "whole_seconds")]
    #[schemars(with = "u64", range(max = MAX_LOOKBACK.as_secs()))]
    pub lookback: Duration,
    /// Resolution and size limits.
    pub limits: Limits,
    /// When Auto-oncall issued the policy.
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub issued_at: Timestamp,
    /// When the policy stops being valid.
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub expires_at: Timestamp,
    /// The session the policy is for, as the digest of its token
    /// ([`crate::session::SessionToken::digest`]); absent for a policy delivered per call
    /// (one-shot entrypoint, stdio server). A policy naming a session is served only to a
    /// call that presents that session's token, over HTTP; a tool server refuses it from
    /// any other source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Digest>,
}

/// What a policy grants of scoped discovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryGrant {
    /// Most items one discovery answer lists (ordered by series count, with how many
    /// more there are), `1..=500`; [`DEFAULT_DISCOVERY_ITEMS`] when absent.
    #[serde(default = "default_discovery_items")]
    #[schemars(range(min = 1, max = MAX_DISCOVERY_ITEMS))]
    pub max_items: u32,
}

/// The items a discovery answer lists when the grant names no number.
pub const DEFAULT_DISCOVERY_ITEMS: u32 = 50;
/// The most items a grant may allow.
pub const MAX_DISCOVERY_ITEMS: u32 = 500;

fn default_discovery_items() -> u32 {
    DEFAULT_DISCOVERY_ITEMS
}

/// The cluster a policy is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterScope {
    /// The cluster id (the value of the package's cluster scope label, e.g.
    /// `cluster_id`), a scope value like `account`.
    #[schemars(pattern(SCOPE_VALUE_PATTERN))]
    pub id: String,
    /// The cluster tier.
    pub tier: ClusterTier,
    /// The Premium parent id; present exactly for the Premium tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(SCOPE_VALUE_PATTERN))]
    pub parent_id: Option<String>,
    /// The keyspace id; present exactly for the Starter and Essential tiers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(SCOPE_VALUE_PATTERN))]
    pub keyspace_id: Option<String>,
}

/// The tier of a cluster.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ClusterTier {
    /// Dedicated: identified by the cluster id alone.
    Dedicated,
    /// Premium: also carries a `parent_id`.
    Premium,
    /// Starter: also carries a `keyspace_id`.
    Starter,
    /// Essential: also carries a `keyspace_id`.
    Essential,
}

impl ClusterTier {
    /// Every tier.
    pub const ALL: [ClusterTier; 4] = [
        ClusterTier::Dedicated,
        ClusterTier::Premium,
        ClusterTier::Starter,
        ClusterTier::Essential,
    ];

    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterTier::Dedicated => "dedicated",
            ClusterTier::Premium => "premium",
            ClusterTier::Starter => "starter",
            ClusterTier::Essential => "essential",
        }
    }
}

impl fmt::Display for ClusterTier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The Manus target a policy is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ManusTarget {
    /// The `vida` target.
    Vida,
    /// The `monica` target.
    Monica,
}

impl ManusTarget {
    /// The lower-case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ManusTarget::Vida => "vida",
            ManusTarget::Monica => "monica",
        }
    }
}

impl fmt::Display for ManusTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The time window of a policy, in whole seconds, `start < end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimeWindow {
    /// Start of the window (inclusive).
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub start: Timestamp,
    /// End of the window (inclusive).
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub end: Timestamp,
}

impl TimeWindow {
    /// The window's length in whole seconds (0 when `end <= start`).
    pub fn seconds(&self) -> u64 {
        u64::try_from(self.end.as_second() - self.start.as_second()).unwrap_or(0)
    }

    /// Start, Unix seconds.
    pub fn start_unix(&self) -> i64 {
        self.start.as_second()
    }

    /// End, Unix seconds.
    pub fn end_unix(&self) -> i64 {
        self.end.as_second()
    }
}

/// Resolution and size limits of a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Most points one series may have (`1..=11000`).
    #[schemars(range(min = 1, max = MAX_POINTS_PER_SERIES))]
    pub max_points_per_series: u32,
    /// Smallest step, whole seconds (1 second to 31 days).
    #[serde(with = "whole_seconds")]
    #[schemars(with = "u64", range(min = 1, max = MAX_LOOKBACK.as_secs()))]
    pub min_step: Duration,
    /// Most queries in one Clinic batch (`1..=20`).
    #[schemars(range(min = 1, max = MAX_BATCH))]
    pub max_batch: u32,
    /// Most series kept in compact evidence (top-k by peak), at least 1.
    #[schemars(range(min = 1))]
    pub max_series_kept: u32,
    /// Most tool calls per Evidence Agent turn, at least 1 (enforced by the turn: the
    /// embedder's `Turn`, or the turn ledger of the MCP servers).
    #[schemars(range(min = 1))]
    pub max_calls_per_turn: u32,
}

impl TrustedPolicy {
    /// Checks the policy's consistency rules: identifiers well-formed; tier-specific
    /// ids present exactly where the tier has them; a Manus target exactly for Manus;
    /// Wetech query ids (unique, non-empty) exactly for Wetech; a window of whole
    /// seconds with `start < end`; `issued_at < expires_at`; limits in range.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let bad = |m: String| Err(PolicyError::InvalidPolicy(m));
        if !is_scope_value(&self.account) {
            return bad(format!("invalid account {:?}", self.account));
        }
        let c = &self.cluster;
        if !is_scope_value(&c.id) {
            return bad(format!("invalid cluster id {:?}", c.id));
        }
        for (name, v) in [("parent_id", &c.parent_id), ("keyspace_id", &c.keyspace_id)] {
            if let Some(v) = v
                && !is_scope_value(v)
            {
                return bad(format!("invalid {name} {v:?}"));
            }
        }
        let (needs_parent, needs_keyspace) = match c.tier {
            ClusterTier::Dedicated => (false, false),
            ClusterTier::Premium => (true, false),
            ClusterTier::Starter | ClusterTier::Essential => (false, true),
        };
        if c.parent_id.is_some() != needs_parent {
            return bad(format!(
                "a {} cluster {} a parent_id",
                c.tier,
                if needs_parent { "needs" } else { "has no" }
            ));
        }
        if c.keyspace_id.is_some() != needs_keyspace {
            return bad(format!(
                "a {} cluster {} a keyspace_id",
                c.tier,
                if needs_keyspace { "needs" } else { "has no" }
            ));
        }
        if (self.provider == Provider::Manus) != self.manus_target.is_some() {
            return bad("a Manus target is required for Manus and only for Manus".to_owned());
        }
        if (self.provider == Provider::Wetech) == self.wetech_query_ids.is_empty() {
            return bad("Wetech query ids are required for Wetech and only for Wetech".to_owned());
        }
        if (self.provider == Provider::Wetech) != self.wetech_datasource.is_some() {
            return bad(
                "a Wetech datasource is required for Wetech and only for Wetech".to_owned(),
            );
        }
        if let Some(uid) = &self.wetech_datasource {
            let ok = !uid.is_empty()
                && uid.len() <= 128
                && uid
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !ok {
                return bad(
                    "the Wetech datasource uid must be 1-128 letters, digits, '.', '_', '-'"
                        .to_owned(),
                );
            }
        }
        let unique: BTreeSet<&QueryId> = self.wetech_query_ids.iter().collect();
        if unique.len() != self.wetech_query_ids.len() {
            return bad("duplicate Wetech query id".to_owned());
        }
        let w = &self.window;
        if w.start.subsec_nanosecond() != 0 || w.end.subsec_nanosecond() != 0 {
            return bad("window bounds must be whole seconds".to_owned());
        }
        if w.start >= w.end {
            return bad("window start must be before its end".to_owned());
        }
        if self.issued_at >= self.expires_at {
            return bad("issued_at must be before expires_at".to_owned());
        }
        if self.lookback > MAX_LOOKBACK {
            return bad(format!(
                "lookback {}s exceeds the maximum {}s",
                self.lookback.as_secs(),
                MAX_LOOKBACK.as_secs()
            ));
        }
        let l = &self.limits;
        if l.max_points_per_series == 0 || l.max_points_per_series > MAX_POINTS_PER_SERIES {
            return bad(format!(
                "max_points_per_series must be 1..={MAX_POINTS_PER_SERIES}"
            ));
        }
        if l.min_step.as_secs() == 0 || l.min_step > MAX_LOOKBACK {
            return bad("min_step must be at least 1 second and at most 31 days".to_owned());
        }
        if l.max_batch == 0 || l.max_batch > MAX_BATCH {
            return bad(format!("max_batch must be 1..={MAX_BATCH}"));
        }
        if l.max_series_kept == 0 || l.max_calls_per_turn == 0 {
            return bad("max_series_kept and max_calls_per_turn must be at least 1".to_owned());
        }
        if let Some(grant) = &self.discovery
            && (grant.max_items == 0 || grant.max_items > MAX_DISCOVERY_ITEMS)
        {
            return bad(format!(
                "discovery.max_items must be 1..={MAX_DISCOVERY_ITEMS}"
            ));
        }
        Ok(())
    }

    /// Checks that the policy is valid at `now`: issued no later than `now` plus
    /// [`CLOCK_SKEW`], and not yet expired.
    pub fn check_time(&self, now: Timestamp) -> Result<(), PolicyError> {
        let skew = jiff::SignedDuration::from_secs(CLOCK_SKEW.as_secs() as i64);
        let latest_issue = now.checked_add(skew).unwrap_or(now);
        if self.issued_at > latest_issue {
            return Err(PolicyError::NotYetValid {
                issued_at: self.issued_at,
            });
        }
        if now >= self.expires_at {
            return Err(PolicyError::Expired {
                expires_at: self.expires_at,
            });
        }
        Ok(())
    }

    /// The one check every source of trusted policy passes before a call may use it (a
    /// verified envelope and an opted-in canary alike): the policy names `package` and
    /// `provider`, passes [`TrustedPolicy::validate`] and is valid at `now`
    /// ([`TrustedPolicy::check_time`]).
    pub fn check_for(
        &self,
        package: &PackageId,
        provider: Provider,
        now: Timestamp,
    ) -> Result<(), PolicyError> {
        if self.package != *package {
            return Err(PolicyError::PackageMismatch {
                expected: package.clone(),
                found: self.package.clone(),
            });
        }
        if self.provider != provider {
            return Err(PolicyError::ProviderMismatch {
                expected: provider,
                found: self.provider,
            });
        }
        self.validate()?;
        self.check_time(now)
    }

    /// The policy as a JSON value (for example to embed in an audit record).
    pub fn to_json(&self) -> Result<String, PolicyError> {
        serde_json::to_string(self).map_err(|e| PolicyError::Encode(e.to_string()))
    }
}

/// Serde for a [`Duration`] as a whole number of seconds.
mod whole_seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_secs())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_secs)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// The seed policy for APID-29213: Clinic, SaaS01, `2026-07-21 21:50–22:05 UTC+8`
    /// (the shared fixture of `evidence-test-support`).
    pub(crate) fn seed_json() -> serde_json::Value {
        serde_json::from_str(evidence_test_support::policy::APID_29213_POLICY).unwrap()
    }

    #[test]
    fn times_normalize_to_utc() {
        let p: TrustedPolicy = serde_json::from_value(seed_json()).unwrap();
        p.validate().unwrap();
        assert_eq!(p.window.start.to_string(), "2026-07-21T13:50:00Z");
        assert_eq!(p.window.seconds(), 900);
        let out = serde_json::to_value(&p).unwrap();
        assert_eq!(out["window"]["end"], "2026-07-21T14:05:00Z");
        assert_eq!(out["lookback"], 3600);
        let back: TrustedPolicy = serde_json::from_value(out).unwrap();
        assert_eq!(back, p);
        // RFC 3339's space-separated form reads the same.
        let mut spaced = seed_json();
        spaced["window"] =
            json!({"start": "2026-07-21 21:50:00+08:00", "end": "2026-07-21 22:05:00+08:00"});
        assert_eq!(serde_json::from_value::<TrustedPolicy>(spaced).unwrap(), p);
    }

    #[test]
    fn consistency_rules() {
        let base: TrustedPolicy = serde_json::from_value(seed_json()).unwrap();
        let mut p = base.clone();
        p.cluster.tier = ClusterTier::Premium;
        assert!(p.validate().is_err());
        p.cluster.parent_id = Some("parent-1".into());
        p.validate().unwrap();
        p.cluster.tier = ClusterTier::Starter;
        assert!(p.validate().is_err());
        p.cluster.parent_id = None;
        p.cluster.keyspace_id = Some("ks-9".into());
        p.validate().unwrap();

        let mut p = base.clone();
        p.manus_target = Some(ManusTarget::Vida);
        assert!(p.validate().is_err());
        p.provider = Provider::Manus;
        p.validate().unwrap();

        let mut p = base.clone();
        p.provider = Provider::Wetech;
        assert!(p.validate().is_err());
        p.wetech_query_ids = vec![QueryId::new("cpu").unwrap(), QueryId::new("cpu").unwrap()];
        assert!(p.validate().is_err());
        p.wetech_query_ids.pop();
        assert!(
            p.validate().is_err(),
            "a Wetech policy names its datasource"
        );
        p.wetech_datasource = Some("prom/../x".to_owned());
        assert!(p.validate().is_err());
        p.wetech_datasource = Some("prometheus-main".to_owned());
        p.validate().unwrap();

        let mut p = base.clone();
        p.limits.max_points_per_series = 11_001;
        assert!(p.validate().is_err());
        let mut p = base.clone();
        p.window.end = p.window.start;
        assert!(p.validate().is_err());
        let mut p = base.clone();
        p.window.end = "2026-07-21T14:05:00.5Z".parse().unwrap();
        assert!(p.validate().is_err());
        let mut p = base;
        p.limits.min_step = Duration::ZERO;
        assert!(p.validate().is_err());
    }

    #[test]
    fn time_checks() {
        let p: TrustedPolicy = serde_json::from_value(seed_json()).unwrap();
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        p.check_time(at("2026-07-21T14:30:00Z")).unwrap();
        p.check_time(at("2026-07-21T14:09:30Z")).unwrap();
        assert!(matches!(
            p.check_time(at("2026-07-21T14:08:00Z")),
            Err(PolicyError::NotYetValid { .. })
        ));
        assert!(matches!(
            p.check_time(at("2026-07-21T15:10:00Z")),
            Err(PolicyError::Expired { .. })
        ));
    }

    #[test]
    fn unknown_fields_are_refused() {
        let mut v = seed_json();
        v["extra"] = json!(1);
        assert!(serde_json::from_value::<TrustedPolicy>(v).is_err());
        let mut v = seed_json();
        v["window"]["start"] = json!("2026-07-21T21:50:00");
        assert!(serde_json::from_value::<TrustedPolicy>(v).is_err());
    }
}
