//! Scoped discovery requests against a real Prometheus 2.42: each of the four forms
//! (metric names, label names, the values of one label, series), locked by
//! `evidence_policy::lock_discovery` with the committed Clinic package's scope labels for
//! cluster `SaaS01`, is sent as its one `match[]` selector to Prometheus' own API, and
//! compared with the ground truth: the series of the model's selector alone, unscoped,
//! filtered to `SaaS01` here. Over generated selectors, patterns and labels (1,000 cases):
//! the answers are equal, and never a name, label or value that exists only outside the
//! scope (the fixture has `tikv_engine_size_bytes` only in another cluster, and values
//! of `instance` and `cluster_id` only there).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::Path;

use evidence_package::Package;
use evidence_policy::lock::{DiscoveryForm, LockedDiscovery, lock_discovery};
use evidence_policy::{ScopeBinding, TrustedPolicy};
use evidence_test_support::{Fixture, Prometheus, policy};
use proptest::prelude::*;
use serde_json::{Value, json};

/// The scope labels of the committed, installed Clinic package.
fn committed_scope() -> Vec<ScopeBinding> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packages/managed_auto_oncall_clinic/v3");
    Package::load_source(&dir)
        .unwrap()
        .manifest()
        .manifest()
        .scope_labels
        .clone()
}

/// The APID-29213 Clinic policy (cluster `SaaS01`) granting discovery.
fn granted() -> TrustedPolicy {
    let p: TrustedPolicy = serde_json::from_value(policy::apid_29213_now(
        "clinic",
        "managed_auto_oncall_clinic",
        json!({"policy_id": "pol-discovery-scope", "discovery": {"max_items": 50}}),
    ))
    .unwrap();
    p.validate().unwrap();
    p
}

/// A blocking GET of Prometheus' API: its `data`.
fn get(rt: &tokio::runtime::Runtime, base: &str, path: &str, params: &[(&str, String)]) -> Value {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    let client = CLIENT.get_or_init(reqwest::Client::new);
    rt.block_on(async {
        let answer: Value = client
            .get(format!("{base}/{path}"))
            .query(params)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(answer["status"], "success", "{path} {params:?}: {answer}");
        answer["data"].clone()
    })
}

/// What the locked request's answer should be: from the series of `raw` (the model's
/// selector and pattern, no scope), those of cluster `SaaS01`.
fn ground_truth(
    rt: &tokio::runtime::Runtime,
    base: &str,
    locked: &LockedDiscovery,
    raw: &str,
) -> BTreeSet<String> {
    let [_, start, end] = locked.params();
    let series = get(
        rt,
        base,
        "api/v1/series",
        &[("match[]", raw.to_owned()), start, end],
    );
    let in_scope = series
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["cluster_id"] == "SaaS01");
    match &locked.form {
        DiscoveryForm::MetricNames => in_scope
            .map(|s| s["__name__"].as_str().unwrap().to_owned())
            .collect(),
        DiscoveryForm::LabelNames => in_scope
            .flat_map(|s| s.as_object().unwrap().keys().cloned().collect::<Vec<_>>())
            .collect(),
        DiscoveryForm::LabelValues { label } => in_scope
            .filter_map(|s| s[label].as_str().map(str::to_owned))
            .collect(),
        DiscoveryForm::Series => in_scope.map(Value::to_string).collect(),
    }
}

/// The locked request's answer, from Prometheus itself.
fn answer(rt: &tokio::runtime::Runtime, base: &str, locked: &LockedDiscovery) -> BTreeSet<String> {
    let data = get(rt, base, &locked.api_path(), &locked.params());
    data.as_array()
        .unwrap()
        .iter()
        .map(|item| match item {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// A model-written selector: an optional metric name and matchers.
fn selector() -> impl Strategy<Value = (Option<&'static str>, Vec<&'static str>)> {
    (
        proptest::option::of(prop_oneof![
            Just("process_cpu_seconds_total"),
            Just("tikv_engine_size_bytes"),
            Just("tidb_server_maxprocs"),
            Just("node_memory_MemTotal_bytes"),
        ]),
        proptest::collection::vec(
            prop_oneof![
                Just("job=\"tidb\""),
                Just("job=~\"tidb|tikv\""),
                Just("job!=\"tikv\""),
                Just("instance=~\".*:.*\""),
                Just("instance!~\"10[.].*\""),
                Just("__name__=~\"process_.*|tikv_.*\""),
            ],
            0..3,
        ),
    )
}

fn form() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"discover": "metric_names"})),
        Just(json!({"discover": "label_names"})),
        Just(json!({"discover": "series"})),
        prop_oneof![
            Just("instance"),
            Just("job"),
            Just("cluster_id"),
            Just("__name__")
        ]
        .prop_map(|label| json!({"discover": "label_values", "label": label})),
    ]
}

#[test]
fn each_discovery_form_answers_exactly_its_scope_on_real_prometheus() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let prometheus = rt.block_on(Prometheus::start(Fixture::Main)).unwrap();
    let base = prometheus.url().trim_end_matches('/').to_owned();
    let policy = granted();
    let scope = committed_scope();
    // The fixture has what the property needs: a name and values only elsewhere.
    let everywhere = get(
        &rt,
        &base,
        "api/v1/label/cluster_id/values",
        &[("match[]", "{__name__=~\".+\"}".to_owned())],
    );
    assert!(everywhere.as_array().unwrap().len() > 1, "{everywhere}");
    let names = lock_discovery(
        &policy,
        &json!({"queryId": "names", "discover": "metric_names", "pattern": "tikv_.*"}),
        &scope,
    )
    .unwrap();
    assert!(
        answer(&rt, &base, &names).is_empty(),
        "tikv_ names exist only in another cluster"
    );
    let accepted = std::cell::Cell::new(0_u32);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(1000));
    runner
        .run(
            &(
                selector(),
                form(),
                proptest::option::of(prop_oneof![Just("tikv_.*"), Just("process_.*"), Just(".*")]),
            ),
            |((name, matchers), form, pattern)| {
                let text = format!("{}{{{}}}", name.unwrap_or_default(), matchers.join(","));
                let mut args = form.clone();
                args["queryId"] = json!("q");
                args["selector"] = json!(text);
                let pattern = pattern.filter(|_| form["discover"] == "metric_names");
                if let Some(p) = pattern {
                    args["pattern"] = json!(p);
                }
                let Ok(locked) = lock_discovery(&policy, &args, &scope) else {
                    return Ok(());
                };
                accepted.set(accepted.get() + 1);
                // The same selector and pattern without the scope, for the truth.
                let mut raw: Vec<String> = matchers.iter().map(|m| (*m).to_owned()).collect();
                if let Some(p) = pattern {
                    raw.push(format!("__name__=~\"{p}\""));
                }
                raw.push("__name__=~\".+\"".to_owned());
                let raw = format!("{}{{{}}}", name.unwrap_or_default(), raw.join(","));
                let got = answer(&rt, &base, &locked);
                let want = ground_truth(&rt, &base, &locked, &raw);
                prop_assert_eq!(&got, &want, "{} {}", locked.selector, raw);
                // The exact count per name or value, by query over the window, lists the
                // same items (every fixture series has data in the window) with the
                // series count of each.
                if let Some(query) = locked.count_query() {
                    let [_, _, end] = locked.params();
                    let counted = get(
                        &rt,
                        &base,
                        "api/v1/query",
                        &[("query", query.clone()), ("time", end.1)],
                    );
                    let label = match &locked.form {
                        DiscoveryForm::LabelValues { label } => label.clone(),
                        _ => "__name__".to_owned(),
                    };
                    let mut counts = std::collections::BTreeMap::new();
                    for r in counted["result"].as_array().unwrap() {
                        // Series without the label count under no value: not a value.
                        let Some(key) = r["metric"][&label].as_str() else {
                            continue;
                        };
                        counts.insert(
                            key.to_owned(),
                            r["value"][1].as_str().unwrap().parse::<usize>().unwrap(),
                        );
                    }
                    let keys: BTreeSet<String> = counts.keys().cloned().collect();
                    prop_assert_eq!(&keys, &want, "{}", query);
                    let series = get(
                        &rt,
                        &base,
                        "api/v1/series",
                        &[
                            locked.params()[0].clone(),
                            locked.params()[1].clone(),
                            locked.params()[2].clone(),
                        ],
                    );
                    for (key, n) in &counts {
                        let listed = series
                            .as_array()
                            .unwrap()
                            .iter()
                            .filter(|s| s[&label] == key.as_str())
                            .count();
                        prop_assert_eq!(*n, listed, "{} {}", query, key);
                    }
                }
                if let DiscoveryForm::LabelValues { label } = &locked.form
                    && label == "cluster_id"
                {
                    prop_assert!(got.iter().all(|v| v == "SaaS01"), "{:?}", got);
                }
                Ok(())
            },
        )
        .unwrap();
    let accepted = accepted.get();
    assert!(
        accepted > 500,
        "only {accepted} of 1,000 generated requests locked"
    );
}
