//! The representative read-only set the canary runs, per provider and target: the seed's
//! APID-29213 CPU query on Clinic, the ST-2865 memory query and the TiKV query that has
//! no data, a Manus query on `vida` and on `monica` each followed by an `instanceRef`
//! query, and a Wetech query whose `unit` is rejected and then corrected. Each target is
//! one turn under one trusted policy, built here for the package it runs on.

use evidence_package::Package;
use evidence_policy::TrustedPolicy;
use serde_json::{Value, json};

use super::RolloutError;
use super::report::Expectation;
use super::target_override::TargetOverride;
use crate::Tool;

/// Start of the APID-29213 window: 2026-07-21 21:50:00 UTC+8.
pub const APID_29213_START: i64 = 1_784_641_800;
/// End of the APID-29213 window: 2026-07-21 22:05:00 UTC+8.
pub const APID_29213_END: i64 = 1_784_642_700;
/// Start of the 60-minute ST-2865 window: 2026-08-05 14:00:00 UTC+8.
pub const ST_2865_START: i64 = 1_785_909_600;
/// End of the 60-minute ST-2865 window: 2026-08-05 15:00:00 UTC+8.
pub const ST_2865_END: i64 = 1_785_913_200;

const TIDB_CPU: &str = "sum by (instance) (rate(process_cpu_seconds_total{job=\"tidb\"}[1m]))";
const INSTANCE_CPU: &str = "rate(process_cpu_seconds_total{job=\"tidb\"}[1m])";
const MEMORY: &str = "100 * (1 - node_memory_MemAvailable_bytes{job=\"node\"} / node_memory_MemTotal_bytes{job=\"node\"})";
const TIKV_SIZE: &str = "sum by (instance) (tikv_engine_size_bytes{job=\"tikv\"})";

/// The arguments of one step.
pub(crate) enum Args {
    /// Fixed arguments.
    Fixed(Value),
    /// These arguments with `instanceRef` set to the top instance of an earlier step's
    /// answer (by index).
    InstanceRefFrom(usize, Value),
}

/// One call of a target's turn and what its answer must be.
pub(crate) struct Step {
    pub(crate) name: &'static str,
    pub(crate) args: Args,
    pub(crate) expect: Expectation,
}

/// One provider target: its turn's policy and its steps.
pub(crate) struct Target {
    pub(crate) tool: Tool,
    /// `clinic-SaaS01`: names the target's envelope and policy files.
    pub(crate) key: &'static str,
    /// The target within the provider: a cluster, a Manus target or Grafana.
    pub(crate) target: &'static str,
    pub(crate) capability: &'static str,
    ticket: &'static str,
    cluster: &'static str,
    window: (i64, i64),
    steps: fn() -> Vec<Step>,
}

impl Target {
    /// The steps of this target's turn.
    pub(crate) fn steps(&self) -> Vec<Step> {
        (self.steps)()
    }

    /// The trusted policy of this target's turn for `package`, issued at `now` for an
    /// hour, on the seed's cluster and window unless `over` names others;
    /// `wetech_datasource` is the Wetech policy's datasource.
    pub(crate) fn policy(
        &self,
        run: &str,
        account: &str,
        package: &Package,
        wetech_datasource: Option<&str>,
        over: Option<&TargetOverride>,
        now: jiff::Timestamp,
    ) -> Result<TrustedPolicy, RolloutError> {
        let time = |s: i64| {
            jiff::Timestamp::from_second(s).map_err(|e| RolloutError::Policy(e.to_string()))
        };
        let (start, end) = match over.and_then(|o| o.start.zip(o.end)) {
            Some(window) => window,
            None => (time(self.window.0)?, time(self.window.1)?),
        };
        let cluster = over
            .and_then(|o| o.cluster.as_deref())
            .unwrap_or(self.cluster);
        let mut policy = json!({
            "policy_id": format!("canary-{run}-{}", self.key),
            "ticket": self.ticket,
            "provider": package.manifest().provider,
            "package": package.identity(),
            "account": account,
            "cluster": {"id": cluster, "tier": "dedicated"},
            "operation": "query_range",
            "window": {"start": start.to_string(), "end": end.to_string()},
            "lookback": 3600,
            "limits": {"max_points_per_series": 11000, "min_step": 15, "max_batch": 4,
                       "max_series_kept": 10, "max_calls_per_turn": 8},
            "issued_at": now.to_string(),
            "expires_at": (now + jiff::SignedDuration::from_hours(1)).to_string(),
        });
        match self.tool {
            Tool::Manus => policy["manus_target"] = json!(self.target),
            Tool::Wetech => {
                policy["wetech_query_ids"] = json!(["tidb_cpu"]);
                policy["wetech_datasource"] = json!(wetech_datasource.ok_or_else(|| {
                    RolloutError::Policy("the Wetech policy needs wetech_datasource".to_owned())
                })?);
            }
            Tool::Clinic => {}
        }
        serde_json::from_value(policy).map_err(|e| RolloutError::Policy(e.to_string()))
    }
}

fn clinic_saas01() -> Vec<Step> {
    vec![Step {
        name: "APID-29213 TiDB CPU per instance",
        args: Args::Fixed(json!({"queries": [
            {"queryId": "tidb_cpu", "expr": TIDB_CPU, "step": "15s", "unit": "cores"}]})),
        expect: Expectation::Data,
    }]
}

fn clinic_saas02() -> Vec<Step> {
    vec![
        Step {
            name: "ST-2865 memory used",
            args: Args::Fixed(json!({"queries": [
                {"queryId": "mem_used_pct", "expr": MEMORY, "step": "15s", "unit": "%"}]})),
            expect: Expectation::Data,
        },
        Step {
            name: "ST-2865 TiKV engine size (no series)",
            args: Args::Fixed(json!({"queries": [
                {"queryId": "tikv_engine_size", "expr": TIKV_SIZE, "step": "15s", "unit": "bytes"}]})),
            expect: Expectation::NoData,
        },
    ]
}

fn manus() -> Vec<Step> {
    vec![
        Step {
            name: "TiDB CPU per instance",
            args: Args::Fixed(json!({"queryId": "tidb_cpu", "expr": TIDB_CPU, "step": "15s"})),
            expect: Expectation::Data,
        },
        Step {
            name: "instanceRef follow-up on the top instance",
            args: Args::InstanceRefFrom(
                0,
                json!({"queryId": "top_instance_cpu", "expr": INSTANCE_CPU, "step": "15s"}),
            ),
            expect: Expectation::SameInstance,
        },
    ]
}

fn wetech() -> Vec<Step> {
    vec![
        Step {
            name: "TiDB CPU with a unit that is no label",
            args: Args::Fixed(
                json!({"queryId": "tidb_cpu", "expr": TIDB_CPU, "step": "15s",
                                     "unit": "CPU cores, summed over all TiDB instances"}),
            ),
            expect: Expectation::Correction,
        },
        Step {
            name: "the same query, unit corrected",
            args: Args::Fixed(
                json!({"queryId": "tidb_cpu", "expr": TIDB_CPU, "step": "15s",
                                     "unit": "cores"}),
            ),
            expect: Expectation::Data,
        },
    ]
}

/// Every target, in the order the canary runs them.
pub(crate) const TARGETS: &[Target] = &[
    Target {
        tool: Tool::Clinic,
        key: "clinic-SaaS01",
        target: "SaaS01",
        capability: "APID-29213: TiDB CPU per instance",
        ticket: "APID-29213",
        cluster: "SaaS01",
        window: (APID_29213_START, APID_29213_END),
        steps: clinic_saas01,
    },
    Target {
        tool: Tool::Clinic,
        key: "clinic-SaaS02",
        target: "SaaS02",
        capability: "ST-2865: memory, and a TiKV query with no data",
        ticket: "ST-2865",
        cluster: "SaaS02",
        window: (ST_2865_START, ST_2865_END),
        steps: clinic_saas02,
    },
    Target {
        tool: Tool::Manus,
        key: "manus-vida",
        target: "vida",
        capability: "TiDB CPU with an instanceRef follow-up",
        ticket: "APID-29213",
        cluster: "SaaS01",
        window: (APID_29213_START, APID_29213_END),
        steps: manus,
    },
    Target {
        tool: Tool::Manus,
        key: "manus-monica",
        target: "monica",
        capability: "TiDB CPU with an instanceRef follow-up",
        ticket: "APID-29213",
        cluster: "SaaS01",
        window: (APID_29213_START, APID_29213_END),
        steps: manus,
    },
    Target {
        tool: Tool::Wetech,
        key: "wetech-grafana",
        target: "grafana",
        capability: "TiDB CPU from a Grafana page, a unit corrected in the same turn",
        ticket: "APID-29213",
        cluster: "SaaS01",
        window: (APID_29213_START, APID_29213_END),
        steps: wetech,
    },
];
