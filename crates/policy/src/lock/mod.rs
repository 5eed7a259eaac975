//! Locking model arguments against a trusted policy, before any network or browser work.
//!
//! One concern per file: `types` holds what locking produces (the locked request, its
//! items and queries, rejections, scope bindings); `code` the code table of rejections;
//! `fixed` the platform-fixed word list and the keys each provider accepts; `digest` the
//! canonical request a request digest is computed over; `context` what one request is
//! locked within; `scope` the scope labels that apply to the policy's cluster tier;
//! `query` the pipeline that locks one query; `request` the entry point that reads the
//! Clinic batch; `arguments` the reading of the arguments object and its query ids, which
//! both entry points share; `addresses` the Manus step that refuses expressions testing
//! or moving an instance address; `discovery` the lock of one discovery request, `ask`
//! what a discovery asks (carried on the query that answers it), and `anchored` the parse
//! of its selector within the scope.

mod addresses;
mod anchored;
mod arguments;
mod ask;
mod code;
mod context;
mod digest;
mod discovery;
mod fixed;
mod query;
mod request;
mod scope;
mod types;

pub use ask::{DiscoveryAsk, DiscoveryForm};
pub(crate) use code::Code;
pub use discovery::{DISCOVERY_KEYS, LockedDiscovery, MAX_PATTERN_BYTES, lock_discovery};
pub use request::lock;
pub use types::{LockRejection, LockedItem, LockedQuery, LockedRequest, ScopeBinding, ScopeValue};

/// Policies and scopes shared by the unit tests of locking.
#[cfg(test)]
mod fixtures {
    use serde_json::json;

    use super::{ScopeBinding, ScopeValue};
    use crate::TrustedPolicy;
    use crate::policy::tests::seed_json;

    pub(super) fn clinic() -> TrustedPolicy {
        serde_json::from_value(seed_json()).unwrap()
    }

    pub(super) fn wetech() -> TrustedPolicy {
        let mut v = seed_json();
        v["provider"] = json!("wetech");
        v["package"] = json!("managed_auto_oncall_wetech");
        v["wetech_query_ids"] = json!(["tidb_cpu", "tikv_cpu"]);
        v["wetech_datasource"] = json!("prometheus-main");
        serde_json::from_value(v).unwrap()
    }

    pub(super) fn scope() -> Vec<ScopeBinding> {
        vec![ScopeBinding::new("cluster_id", ScopeValue::ClusterId).unwrap()]
    }
}
