//! What the discovery tests share: the policy granting discovery, a blocking read of
//! Prometheus' own API for the ground truth, and the strategies of model-written
//! selectors and forms.

use evidence_policy::TrustedPolicy;
use evidence_test_support::policy;
use proptest::prelude::*;
use serde_json::{Value, json};

/// The APID-29213 Clinic policy (cluster `SaaS01`) granting discovery.
pub(crate) fn granted() -> TrustedPolicy {
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
pub(crate) fn get(
    rt: &tokio::runtime::Runtime,
    base: &str,
    path: &str,
    params: &[(&str, String)],
) -> Value {
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

/// One generated discovery: the model's arguments, the same selector and pattern
/// without the scope (the ground truth's selector), and whether it must lock.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub(crate) args: Value,
    pub(crate) raw: String,
    /// False only when the request names a metric twice (the selector's name and a name
    /// matcher or a pattern), which PromQL itself refuses; every other request locks,
    /// whatever its selector, label or pattern (matching the empty string or not).
    pub(crate) answerable: bool,
}

/// Discoveries of every form with model-written selectors and patterns, some of which
/// match the empty string (`.*`, `a*`, `(|x)`, `.?`, `(process_.*)?`).
pub(crate) fn case() -> impl Strategy<Value = Case> {
    (
        selector(),
        form(),
        proptest::option::of(prop_oneof![
            Just("tikv_.*"),
            Just("process_.*"),
            Just(".*"),
            Just("a*"),
            Just("(|x)"),
            Just(".?"),
            Just("(process_.*)?"),
        ]),
    )
        .prop_map(|((name, matchers), form, pattern)| {
            let named = name.is_some();
            let name = name.unwrap_or_default();
            let mut args = form.clone();
            args["queryId"] = json!("q");
            args["selector"] = json!(format!("{name}{{{}}}", matchers.join(",")));
            let pattern = pattern.filter(|_| {
                form["discover"] == "metric_names" || form["discover"] == "metric_metadata"
            });
            let answerable = !named
                || (pattern.is_none() && !matchers.iter().any(|m| m.starts_with("__name__")));
            let mut raw: Vec<String> = matchers.iter().map(|m| (*m).to_owned()).collect();
            if let Some(p) = pattern {
                args["pattern"] = json!(p);
                raw.push(format!("__name__=~\"{p}\""));
            }
            raw.push("__name__=~\".+\"".to_owned());
            Case {
                args,
                raw: format!("{name}{{{}}}", raw.join(",")),
                answerable,
            }
        })
}

/// A model-written selector: an optional metric name and matchers (none: `{}`).
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
                // Matchers that match the empty string: alone, no selector for PromQL;
                // with the scope labels bound, a selector like any other.
                Just("job=~\".*\""),
                Just("__name__=~\".*\""),
                Just("instance=\"\""),
            ],
            0..3,
        ),
    )
}

fn form() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"discover": "metric_names"})),
        Just(json!({"discover": "metric_metadata"})),
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
