//! What the Clinic benches share: a runtime, real Prometheus over the `Main` fixture
//! behind the Clinic test front, the connector's configuration for that front, and a
//! Clinic batch locked under the APID-29213 policy.

use evidence_test_support as support;
use managed_evidence::connectors::{ClinicConfig, HostAllowlist};
use managed_evidence::policy::{
    LockedRequest, ScopeBinding, TrustedPolicy, lock, lock::ScopeValue,
};
use managed_evidence::result::PolicySource;
use secrecy::SecretString;
use serde_json::{Value, json};

/// A runtime and the provider: Prometheus, and the Clinic front accepting `token`.
pub(crate) fn provider(
    token: &str,
) -> (
    tokio::runtime::Runtime,
    support::Prometheus,
    support::ClinicFront,
) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (prometheus, front) = runtime.block_on(async {
        let p = support::Prometheus::start(support::Fixture::Main)
            .await
            .unwrap();
        let f = support::ClinicFront::start(&p.url(), SecretString::from(token.to_owned()))
            .await
            .unwrap();
        (p, f)
    });
    (runtime, prometheus, front)
}

/// The connector's configuration for `front`.
pub(crate) fn config(front: &support::ClinicFront) -> ClinicConfig {
    ClinicConfig::new(
        url::Url::parse(&front.base_url()).unwrap(),
        HostAllowlist::new(["127.0.0.1"]).unwrap(),
    )
}

/// `queries` (a Clinic batch's items) locked under the APID-29213 policy of at most
/// `max_batch` queries, bound to its cluster.
pub(crate) fn locked(max_batch: u32, queries: Value) -> LockedRequest {
    let policy: TrustedPolicy = serde_json::from_value(support::policy::apid_29213_now(
        "clinic",
        "managed_auto_oncall_clinic",
        json!({"policy_id": "pol-bench", "account": "acct-bench",
               "limits": {"max_points_per_series": 11000, "min_step": 15, "max_batch": max_batch,
                          "max_series_kept": 10, "max_calls_per_turn": 8}}),
    ))
    .unwrap();
    let scope = [ScopeBinding::new("cluster_id", ScopeValue::ClusterId).unwrap()];
    lock(
        &policy,
        PolicySource::TrustedEnvelope,
        &json!({ "queries": queries }),
        &scope,
    )
    .unwrap()
}
