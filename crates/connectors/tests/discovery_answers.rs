//! Discovery answers through the tool, against a real Prometheus 2.42 behind the Clinic
//! test front: each generated discovery (the four forms, model-written selectors and
//! patterns, the values of `__name__` and patterns and matchers that match the empty
//! string among them; each locks unless it names a metric twice) is locked by `evidence_policy::lock` as one item of a Clinic batch, run by
//! the Clinic connector, and its `discovery_v1` answer compared with Prometheus' own
//! series of the model's selector, unscoped, filtered here to cluster `SaaS01`: the same
//! totals, each listed name, value or label with the exact count of its series (or
//! values), each listed series one of the scope's, `no_data` exactly when the scope has
//! none (1,000 cases); a `metric_metadata` answer's metadata is Prometheus' own for each
//! listed name (its server scrapes help and type of some names, one of them a name only
//! another cluster has, which never appears). A front that ignores the scope matcher (answers for every cluster)
//! is caught before the answer reaches the model.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use evidence_connectors::{ClinicConfig, ClinicConnector, ClinicSecrets, Connector, HostAllowlist};
use evidence_policy::lock::LockedRequest;
use evidence_policy::{TrustedPolicy, lock};
use evidence_result::discovery::{Cell, DiscoveryKind};
use evidence_result::evidence::EvidenceOutcome;
use evidence_result::{Discovery, Item, PolicySource, Status};
use evidence_test_support::{ClinicFront, Fault, Fixture, Prometheus};
use proptest::prelude::*;
use secrecy::SecretString;
use serde_json::{Map, Value, json};
use url::Url;

mod discovery;
mod scope;

use discovery::{Case, case, get, granted};
use scope::committed_scope;

const TOKEN: &str = "clinic-token-d15c0ve7y";

/// What the test Prometheus scrapes for metadata (`Prometheus::start_with_metadata`):
/// help and type of three names `SaaS01` has (one keyed by its family name, as an
/// OpenMetrics counter is), and of one only another cluster has.
const EXPOSITION: &str = "\
# HELP process_cpu_seconds Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds counter
process_cpu_seconds_total 1
# HELP tidb_server_maxprocs The value of GOMAXPROCS.
# TYPE tidb_server_maxprocs gauge
tidb_server_maxprocs 8
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1024
# HELP tikv_engine_size_bytes Sizes of each column family (only another cluster has it).
# TYPE tikv_engine_size_bytes gauge
tikv_engine_size_bytes 1
";

struct Env {
    rt: tokio::runtime::Runtime,
    prometheus: Prometheus,
    front: ClinicFront,
    policy: TrustedPolicy,
}

impl Env {
    fn start() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let prometheus = rt
            .block_on(Prometheus::start_with_metadata(Fixture::Main, EXPOSITION))
            .unwrap();
        let front = rt
            .block_on(ClinicFront::start(
                &prometheus.url(),
                SecretString::from(TOKEN),
            ))
            .unwrap();
        Env {
            rt,
            prometheus,
            front,
            policy: granted(),
        }
    }

    fn base(&self) -> String {
        self.prometheus.url().trim_end_matches('/').to_owned()
    }

    fn lock(&self, args: &Value) -> LockedRequest {
        lock(
            &self.policy,
            PolicySource::TrustedEnvelope,
            &json!({"queries": [args]}),
            &committed_scope(),
        )
        .unwrap()
    }

    /// Runs one discovery item through the Clinic connector: its item.
    fn run(&self, request: &LockedRequest) -> Item {
        let config = ClinicConfig::new(
            Url::parse(&self.front.base_url()).unwrap(),
            HostAllowlist::new(["127.0.0.1"]).unwrap(),
        );
        let result = self
            .rt
            .block_on(ClinicConnector::new().unwrap().call(
                request,
                &config,
                &ClinicSecrets::new(SecretString::from(TOKEN)),
            ))
            .unwrap();
        result.details().items[0].clone()
    }
}

/// The series of `raw` (unscoped) with samples in the window, those of `SaaS01`: their
/// label sets.
fn truth(env: &Env, raw: &str) -> Vec<Map<String, Value>> {
    let p = &env.policy;
    let series = get(
        &env.rt,
        &env.base(),
        "api/v1/series",
        &[
            ("match[]", raw.to_owned()),
            ("start", p.window.start.as_second().to_string()),
            ("end", p.window.end.as_second().to_string()),
        ],
    );
    series
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["cluster_id"] == "SaaS01")
        .map(|s| s.as_object().unwrap().clone())
        .collect()
}

fn text(cell: &Cell) -> Option<String> {
    match cell {
        Cell::Text(t) => t.clone(),
        Cell::Count(_) => None,
    }
}

fn count(cell: &Cell) -> u64 {
    match cell {
        Cell::Count(n) => *n,
        Cell::Text(_) => panic!("a count is expected"),
    }
}

/// Checks a `metric_metadata` answer's metadata against Prometheus' own for each name
/// listed: the first entry's type and help, and no metadata where it has none.
fn check_metadata(env: &Env, d: &Discovery) -> Result<(), TestCaseError> {
    let Some(metadata) = &d.metadata else {
        prop_assert!(d.discover != DiscoveryKind::MetricMetadata);
        return Ok(());
    };
    prop_assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    for row in &d.rows {
        let name = text(&row[0]).unwrap();
        let served = get(
            &env.rt,
            &env.base(),
            "api/v1/metadata",
            &[("metric", name.clone())],
        );
        let given = metadata.names.iter().find(|m| m.name == name);
        // A series of a family (x_total, x_bucket, ...) without its own entry reads the
        // family's.
        let family = ["_bucket", "_count", "_sum", "_total", "_created", "_info"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix));
        let mut served = served[&name].get(0).cloned();
        if let (None, Some(family)) = (&served, family) {
            let data = get(
                &env.rt,
                &env.base(),
                "api/v1/metadata",
                &[("metric", family.to_owned())],
            );
            served = data[family].get(0).cloned();
        }
        match served {
            None => prop_assert!(given.is_none(), "{} has no metadata", name),
            Some(entry) => {
                let given = given.unwrap_or_else(|| panic!("{name} has metadata"));
                prop_assert_eq!(given.metric_type.as_deref(), entry["type"].as_str());
                prop_assert_eq!(given.help.as_deref(), entry["help"].as_str());
            }
        }
    }
    Ok(())
}

/// Checks `d` against the scope's series `truth`.
fn check(d: &Discovery, truth: &[Map<String, Value>]) -> Result<(), TestCaseError> {
    d.check().map_err(TestCaseError::fail)?;
    prop_assert_eq!(d.outcome == EvidenceOutcome::NoData, truth.is_empty());
    prop_assert_eq!(d.rows.len() as u64 + d.more, d.total);
    let by = |label: &str| {
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for s in truth {
            if let Some(v) = s.get(label).and_then(Value::as_str) {
                *counts.entry(v.to_owned()).or_default() += 1;
            }
        }
        counts
    };
    match d.discover {
        DiscoveryKind::MetricNames | DiscoveryKind::MetricMetadata | DiscoveryKind::LabelValues => {
            let label = d.label.clone().unwrap_or_else(|| "__name__".to_owned());
            let want = by(&label);
            prop_assert_eq!(d.total, want.len() as u64);
            let mut last = u64::MAX;
            for row in &d.rows {
                let key = text(&row[0]).unwrap();
                let n = count(&row[1]);
                prop_assert_eq!(want.get(&key), Some(&n), "{}", key);
                prop_assert!(n <= last, "most series first");
                last = n;
            }
            if d.more == 0 {
                let listed: BTreeSet<String> = d.rows.iter().filter_map(|r| text(&r[0])).collect();
                prop_assert_eq!(listed, want.keys().cloned().collect::<BTreeSet<_>>());
            }
        }
        DiscoveryKind::LabelNames => {
            let mut values: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for s in truth {
                for (k, v) in s {
                    values
                        .entry(k.clone())
                        .or_default()
                        .insert(v.as_str().unwrap().to_owned());
                }
            }
            prop_assert_eq!(d.total, values.len() as u64);
            for row in &d.rows {
                let key = text(&row[0]).unwrap();
                let n = values.get(&key).map(|v| v.len() as u64);
                prop_assert_eq!(n, Some(count(&row[1])), "{}", key);
            }
        }
        DiscoveryKind::Series => {
            prop_assert_eq!(d.total, truth.len() as u64);
            for row in &d.rows {
                let mut set: Map<String, Value> =
                    d.scope.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                for (column, cell) in d.columns.iter().zip(row) {
                    if let Some(v) = text(cell) {
                        set.insert(column.clone(), json!(v));
                    }
                }
                prop_assert!(
                    truth.contains(&set),
                    "{:?} is not a series of the scope",
                    set
                );
            }
        }
    }
    Ok(())
}

#[test]
fn each_discovery_answers_exactly_its_scope_through_the_clinic_connector() {
    let env = Env::start();
    let accepted = std::cell::Cell::new(0_u32);
    let data = std::cell::Cell::new(0_u32);
    let described = std::cell::Cell::new(0_u32);
    let by_family = std::cell::Cell::new(0_u32);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(1000));
    runner
        .run(
            &case(),
            |Case {
                 args,
                 raw,
                 answerable,
             }| {
                let request = env.lock(&args);
                // Only a metric named twice is refused, as PromQL refuses it.
                let locked = request.ready().next().is_some();
                prop_assert_eq!(locked, answerable, "{} {:?}", args, request.items);
                if !locked {
                    return Ok(());
                }
                accepted.set(accepted.get() + 1);
                let item = env.run(&request);
                prop_assert_eq!(item.status, Status::Ok, "{:?}", item);
                prop_assert!(item.evidence.is_none());
                let d = item.discovery.unwrap();
                let truth = truth(&env, &raw);
                if !truth.is_empty() {
                    data.set(data.get() + 1);
                }
                check(&d, &truth)?;
                check_metadata(&env, &d)?;
                if let Some(m) = &d.metadata {
                    if !m.names.is_empty() {
                        described.set(described.get() + 1);
                    }
                    if m.names
                        .iter()
                        .any(|n| n.name == "process_cpu_seconds_total")
                    {
                        by_family.set(by_family.get() + 1);
                    }
                }
                // Never a name that exists only in another cluster.
                let json = serde_json::to_string(&*d).unwrap();
                prop_assert!(!json.contains("tikv_engine_size_bytes\","), "{}", json);
                Ok(())
            },
        )
        .unwrap();
    assert!(accepted.get() > 500, "only {} locked", accepted.get());
    assert!(data.get() > 200, "only {} found data", data.get());
    assert!(
        described.get() > 30,
        "only {} carried metadata",
        described.get()
    );
}

/// The two questions a model asks first are answered as Prometheus'
/// `/api/v1/label/__name__/values` answers them for the scope: the values of `__name__`
/// (with no selector, `{}` or one whose matchers all match the empty string) and the
/// names matching `.*` are the metric names in scope, each with its series count, the
/// rows of `metric_names` without a pattern.
#[test]
fn the_values_of_the_name_label_and_every_name_are_the_metric_names_in_scope() {
    let env = Env::start();
    let rows = |args: Value| -> Vec<(Option<String>, u64)> {
        let mut args = args;
        args["queryId"] = json!("q");
        let item = env.run(&env.lock(&args));
        assert_eq!(item.status, Status::Ok, "{args}: {item:?}");
        let d = item.discovery.unwrap();
        assert_eq!(d.more, 0, "{args}: every name is listed");
        d.rows.iter().map(|r| (text(&r[0]), count(&r[1]))).collect()
    };
    let names = rows(json!({"discover": "metric_names"}));
    let p = &env.policy;
    let own = get(
        &env.rt,
        &env.base(),
        "api/v1/label/__name__/values",
        &[
            ("match[]", "{cluster_id=\"SaaS01\"}".to_owned()),
            ("start", p.window.start.as_second().to_string()),
            ("end", p.window.end.as_second().to_string()),
        ],
    );
    let own: BTreeSet<String> = own
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let listed: BTreeSet<String> = names.iter().filter_map(|(n, _)| n.clone()).collect();
    assert!(!listed.is_empty());
    assert_eq!(listed, own, "Prometheus' own values of __name__ in scope");
    for args in [
        json!({"discover": "label_values", "label": "__name__"}),
        json!({"discover": "label_values", "label": "__name__", "selector": "{}"}),
        json!({"discover": "label_values", "label": "__name__", "selector": "{job=~\".*\"}"}),
        json!({"discover": "metric_names", "pattern": ".*"}),
        json!({"discover": "metric_names", "selector": "{__name__=~\".*\"}"}),
    ] {
        assert_eq!(rows(args.clone()), names, "{args}");
    }
}

#[test]
fn a_front_that_ignores_the_scope_matcher_is_caught_before_the_model() {
    let env = Env::start();
    let clusters = get(
        &env.rt,
        &env.base(),
        "api/v1/label/cluster_id/values",
        &[("match[]", "{__name__=~\".+\"}".to_owned())],
    );
    let others: Vec<String> = clusters
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .filter(|c| c != "SaaS01")
        .collect();
    assert!(!others.is_empty());
    let forms = [
        json!({"discover": "metric_names"}),
        json!({"discover": "label_names"}),
        json!({"discover": "series"}),
        json!({"discover": "label_values", "label": "instance"}),
        json!({"discover": "label_values", "label": "cluster_id"}),
    ];
    for form in &forms {
        let mut args = form.clone();
        args["queryId"] = json!("q");
        args["selector"] = json!("{job=~\".+\"}");
        let request = env.lock(&args);
        // Honest, the front answers within the scope.
        env.front.faults().clear();
        let item = env.run(&request);
        assert_eq!(item.status, Status::Ok, "{form}: {item:?}");
        // Ignoring the matcher, it answers for every cluster: refused whole.
        env.front.faults().set_fault(Fault::IgnoreScope {
            label: "cluster_id",
        });
        let item = env.run(&request);
        assert_eq!(item.status, Status::Error, "{form}: {item:?}");
        assert_eq!(
            item.error.as_ref().unwrap().code.as_str(),
            "clinic_out_of_scope",
            "{form}"
        );
        let text = serde_json::to_string(&item).unwrap();
        for other in &others {
            assert!(!text.contains(other.as_str()), "{form}: {text}");
        }
        // The tool sent the scoped query; the front dropped the matcher.
        let sent = env.front.requests().pop().unwrap();
        assert!(sent.param("query").unwrap().contains("SaaS01"));
    }
    env.front.faults().clear();
}
