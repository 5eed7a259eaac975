//! Scoped discovery requests against a real Prometheus 2.42: each of the four forms
//! (metric names, label names, the values of one label, series), locked by
//! `evidence_policy::lock_discovery` with the committed Clinic package's scope labels for
//! cluster `SaaS01`, is sent as its one `match[]` selector to Prometheus' own API, and
//! compared with the ground truth: the series of the model's selector alone, unscoped,
//! filtered to `SaaS01` here. Over generated selectors, patterns and labels (1,000 cases;
//! `__name__` among the labels, patterns and matchers that match the empty string among
//! the others): every request locks but one that names a metric twice, the answers are
//! equal, and never a name, label or value that exists only outside the scope (the fixture has `tikv_engine_size_bytes` only in another cluster, and values
//! of `instance` and `cluster_id` only there).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use evidence_policy::lock::{DiscoveryForm, LockedDiscovery, lock_discovery};
use evidence_test_support::{Fixture, Prometheus};
use proptest::prelude::*;
use serde_json::{Value, json};

mod discovery;
mod scope;

use discovery::{Case, case, get, granted};
use scope::committed_scope;

/// The Prometheus index endpoint of a locked discovery, below the API root.
fn api_path(locked: &LockedDiscovery) -> String {
    match &locked.form {
        DiscoveryForm::MetricNames | DiscoveryForm::MetricMetadata => {
            "api/v1/label/__name__/values".to_owned()
        }
        DiscoveryForm::LabelNames => "api/v1/labels".to_owned(),
        DiscoveryForm::LabelValues { label } => format!("api/v1/label/{label}/values"),
        DiscoveryForm::Series => "api/v1/series".to_owned(),
    }
}

/// The index endpoint's parameters: the one `match[]` selector and the window.
fn params(locked: &LockedDiscovery) -> [(&'static str, String); 3] {
    [
        ("match[]", locked.selector.clone()),
        ("start", locked.start.as_second().to_string()),
        ("end", locked.end.as_second().to_string()),
    ]
}

/// What the locked request's answer should be: from the series of `raw` (the model's
/// selector and pattern, no scope), those of cluster `SaaS01`.
fn ground_truth(
    rt: &tokio::runtime::Runtime,
    base: &str,
    locked: &LockedDiscovery,
    raw: &str,
) -> BTreeSet<String> {
    let [_, start, end] = params(locked);
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
        DiscoveryForm::MetricNames | DiscoveryForm::MetricMetadata => in_scope
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
    let data = get(rt, base, &api_path(locked), &params(locked));
    data.as_array()
        .unwrap()
        .iter()
        .map(|item| match item {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
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
            &case(),
            |Case {
                 args,
                 raw,
                 answerable,
             }| {
                let locked = match lock_discovery(&policy, &args, &scope) {
                    Ok(locked) => locked,
                    Err(refused) => {
                        // Only a metric named twice is refused, as PromQL refuses it.
                        prop_assert!(!answerable, "{} refused: {:?}", args, refused.failure);
                        return Ok(());
                    }
                };
                prop_assert!(answerable, "{} locked: {}", args, locked.selector);
                accepted.set(accepted.get() + 1);
                let got = answer(&rt, &base, &locked);
                let want = ground_truth(&rt, &base, &locked, &raw);
                prop_assert_eq!(&got, &want, "{} {}", locked.selector, raw);
                // The exact count per name or value, by the query the tool runs, lists the
                // same items (every fixture series has data in the window) with the
                // series count of each.
                if matches!(
                    locked.form,
                    DiscoveryForm::MetricNames
                        | DiscoveryForm::MetricMetadata
                        | DiscoveryForm::LabelValues { .. }
                ) {
                    let query = locked.query().expr;
                    let [_, _, end] = params(&locked);
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
                            params(&locked)[0].clone(),
                            params(&locked)[1].clone(),
                            params(&locked)[2].clone(),
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
