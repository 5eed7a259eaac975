//! Under Manus no instance address leaves in any shape, and an address is named only
//! through an `instanceRef`: the inputs of the finding (an address reshaped by
//! `label_replace`, host names cut out of it, matchers on `instance` as a yes/no
//! oracle), their neighbours, and a property over generated expressions. Everything
//! runs the real path: `lock`, then `ManusConnector` behind the Manus front over a real
//! Prometheus holding the `vida` fixture.

use evidence_connectors::{Connector, ManusConfig, ResponseLimits};
use evidence_policy::policy::DiscoveryGrant;
use evidence_policy::{ManusTarget, TrustedPolicy, lock};
use evidence_result::discovery::Cell;
use evidence_result::{
    Discovery, FailureClass, Origin, PolicySource, Status, ToolResult, codes::known_code,
};
use evidence_test_support::{
    APID_29213_END, APID_29213_START, CPU_CLUSTER, Fixture, MEMORY_CLUSTER, ManusFront, Prometheus,
    ST_2865_END, ST_2865_START, TIDB_CPU, VIDA_HOST_NAMES,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

use crate::address_leaks::{assert_no_leak, leak};
use crate::cases::Harness;
use crate::cases::{checked, scope, view};
use crate::manus::{ManusHarness, ManusOutput, config_for, policy, ref_keys_text, secrets_with};

/// The `vida` target over its real Prometheus: the conformance harness's set-up.
struct Vida(ManusHarness);

/// Metadata whose help texts name instances of the fixture, as exporters do: a
/// `metric_metadata` answer must seal them like any provider text.
const ADDRESSED_METADATA: &str = "\
# HELP process_cpu_seconds_total CPU time of the TiDB server at 10.21.1.17:10080, in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 1
# HELP tidb_server_info Build of tidb-0.tidb-peer.tidb.svc:10080 and its peers.
# TYPE tidb_server_info gauge
tidb_server_info 1
";

impl Vida {
    async fn start() -> Self {
        Vida(<ManusHarness as Harness>::start().await)
    }

    /// Vida over a Prometheus that also serves [`ADDRESSED_METADATA`].
    async fn with_metadata() -> Self {
        let prometheus = Prometheus::start_with_metadata(Fixture::Vida, ADDRESSED_METADATA)
            .await
            .unwrap();
        Vida(ManusHarness::over(prometheus).await)
    }

    fn config(&self) -> ManusConfig {
        config_for(
            &[(ManusTarget::Vida, &self.0.front)],
            ResponseLimits::default(),
        )
    }

    /// What the model sees for `args`: the lock's rejection, or the connector's result.
    async fn attempt(&self, policy: &TrustedPolicy, args: Value) -> ToolResult {
        match lock(policy, PolicySource::TrustedEnvelope, &args, &scope()) {
            Ok(request) => {
                let result = self
                    .0
                    .connector
                    .call(&request, &self.config(), &secrets_with(&ref_keys_text()))
                    .await
                    .unwrap();
                checked(&ManusOutput, result)
            }
            Err(rejection) => {
                let origin = Origin {
                    package: policy.package.clone(),
                    provider: policy.provider,
                    operation: policy.operation,
                    policy_source: Some(PolicySource::TrustedEnvelope),
                };
                rejection.to_tool_result(origin).unwrap()
            }
        }
    }

    fn queries_sent(&self) -> usize {
        self.0
            .front
            .requests()
            .iter()
            .filter(|r| r.path == ManusFront::QUERY_RANGE_PATH)
            .count()
    }
}

fn apid() -> TrustedPolicy {
    policy(
        ManusTarget::Vida,
        CPU_CLUSTER,
        (APID_29213_START, APID_29213_END),
    )
}

fn st() -> TrustedPolicy {
    policy(
        ManusTarget::Vida,
        MEMORY_CLUSTER,
        (ST_2865_START, ST_2865_END),
    )
}

/// The code of a refused matcher on an address-bearing label.
const MATCHER: &str = "address_label_matcher";
/// The code of a refused rewrite that copies, shapes or orders by an address.
const REWRITE: &str = "address_label_rewrite";

/// The expressions of the finding and their neighbours, each with whether it reads the
/// CPU window (else the memory one) and the code that refuses it.
const REFUSED_PROBES: &[(&str, bool, &str)] = &[
    // The finding: reshaped addresses and host names.
    (
        r#"label_replace(sum by (instance) (rate(process_cpu_seconds_total{job="tidb"}[1m])), "x", "$1-$2-$3-$4 port $5", "instance", "([0-9]+)[.]([0-9]+)[.]([0-9]+)[.]([0-9]+):([0-9]+)")"#,
        true,
        REWRITE,
    ),
    (
        r#"label_replace(process_cpu_seconds_total{job="tidb"}, "h", "$1", "instance", "(.+):[0-9]+")"#,
        true,
        REWRITE,
    ),
    // The finding: matchers on `instance` as an oracle, and naming an address.
    (
        r#"count(process_cpu_seconds_total{instance=~"10[.]21[.].*"})"#,
        true,
        MATCHER,
    ),
    (
        r#"rate(process_cpu_seconds_total{instance="10.21.1.17:10080"}[1m])"#,
        true,
        MATCHER,
    ),
    // Neighbours: the other matcher operators and the other address label.
    (
        r#"count(process_cpu_seconds_total{instance!="10.21.1.17:10080"})"#,
        true,
        MATCHER,
    ),
    (
        r#"count(process_cpu_seconds_total{instance!~"10[.]21[.]1[.]1.*"})"#,
        true,
        MATCHER,
    ),
    (
        r#"count(node_memory_MemTotal_bytes{host_ip=~"10[.]21[.]2[.].*"})"#,
        false,
        MATCHER,
    ),
    (
        r#"count(node_memory_MemTotal_bytes{host_ip="10.21.2.10"})"#,
        false,
        MATCHER,
    ),
    // A regex on a label that may hold addresses, an address-shaped exact value on
    // one, and the scrape address label.
    (
        r#"count(node_memory_MemTotal_bytes{url=~".*10[.]21.*"})"#,
        false,
        MATCHER,
    ),
    (
        r#"count(node_memory_MemTotal_bytes{peer="10.21.2.10:20160"})"#,
        false,
        MATCHER,
    ),
    (
        r#"count({__address__=~"10.+", job="node"})"#,
        false,
        MATCHER,
    ),
    (
        r#"absent(process_cpu_seconds_total{instance="10.21.1.17:10080"})"#,
        true,
        MATCHER,
    ),
    (
        r#"absent_over_time(process_cpu_seconds_total{instance="10.21.1.99:10080"}[5m])"#,
        true,
        MATCHER,
    ),
    // Other ways to copy or shape an address-bearing value.
    (
        r#"label_join(process_cpu_seconds_total{job="tidb"}, "x", "-", "job", "instance")"#,
        true,
        REWRITE,
    ),
    (
        r#"label_replace(node_memory_MemTotal_bytes{job="node"}, "x", "ip $1", "host_ip", "(.*)")"#,
        false,
        REWRITE,
    ),
    (
        r#"label_replace(node_memory_MemTotal_bytes{job="node"}, "x", "$1", "url", "(.*)")"#,
        false,
        REWRITE,
    ),
    // Writing an address-bearing label: a guess sealed as an instance reference
    // would make the reference an oracle.
    (
        r#"label_replace(vector(1), "instance", "10.21.1.17:10080", "", "")"#,
        true,
        REWRITE,
    ),
    (
        r#"sum(process_cpu_seconds_total{job="tidb"}) * on() group_left() label_replace(vector(1), "host_ip", "10.21.2.10", "", "")"#,
        true,
        REWRITE,
    ),
    (
        r#"count_values("instance", tidb_server_maxprocs{job="tidb"})"#,
        true,
        REWRITE,
    ),
    // A literal address shape written into a new label (an oracle by joining it).
    (
        r#"label_replace(vector(1), "peer", "10.21.2.10", "", "")"#,
        true,
        REWRITE,
    ),
    // A guess forged from literals that absent() turns into labels, then joined.
    (
        r#"label_join(absent(nope{job="10.21", type="1.17"}), "peer", "", "job", "type")"#,
        true,
        REWRITE,
    ),
    // Ordering by a label that may carry addresses tells their order.
    (
        r#"sort_by_label(sum by (instance) (rate(process_cpu_seconds_total{job="tidb"}[1m])), "instance")"#,
        true,
        REWRITE,
    ),
    (
        r#"sort_by_label_desc(tidb_server_info{job="tidb"}, "hostname")"#,
        true,
        REWRITE,
    ),
    (
        r#"sort_by_label(node_memory_MemTotal_bytes{job="node"}, "job", "host_ip")"#,
        false,
        REWRITE,
    ),
    // The metric name (recording rules may hold ':') is no rewrite source.
    (
        r#"label_replace(tidb_server_maxprocs{job="tidb"}, "x", "$1", "__name__", "(.*)")"#,
        true,
        REWRITE,
    ),
    // A label without addresses overwritten and later read as a source.
    (
        r#"label_replace(process_cpu_seconds_total{job="tidb"}, "job", "$1", "instance", "(.*)")"#,
        true,
        REWRITE,
    ),
];

/// The expressions of the finding and their neighbours (`REFUSED_PROBES`): `label_replace`
/// reshaping `instance` into `10-21-1-17 port 10080` or cutting the host name out of it,
/// `instance` matchers used as a yes/no oracle or naming an address, the other matcher
/// operators, `host_ip`, `__address__`, `absent`, `label_join`, `count_values` and
/// `sort_by_label` on address-bearing labels. Each is refused by the lock with a typed,
/// correctable policy code that points to `instanceRef`, and nothing is sent.
#[tokio::test]
async fn addresses_cannot_be_reshaped_or_tested() {
    let vida = Vida::start().await;
    for (expr, cpu, code) in REFUSED_PROBES {
        let policy = if *cpu { apid() } else { st() };
        let before = vida.queries_sent();
        let result = vida
            .attempt(&policy, json!({"queryId": "probe", "expr": expr}))
            .await;
        assert_no_leak(expr, &result);
        let v = view(&result);
        assert_eq!(v.status, Status::Error, "{expr} ran: {}", result.text());
        assert_eq!(v.code(), *code, "{expr}: {}", result.text());
        assert_eq!(v.class(), FailureClass::PolicyViolation, "{expr}");
        let c = v.correction();
        assert!(c.allowed, "{expr}");
        assert!(c.instruction.contains("instanceRef"), "{}", c.instruction);
        assert!(c.keep.iter().any(|k| k == "queryId"), "{expr}");
        assert_eq!(vida.queries_sent(), before, "{expr}: nothing may be sent");
    }
}

/// What stays possible: grouping and joining by `instance` (sealed in the answer),
/// matchers and rewrites on labels without addresses, and naming one instance through
/// the reference an earlier answer returned (the bounded follow-up, 1 series).
#[tokio::test]
async fn instances_are_named_through_references() {
    let vida = Vida::start().await;
    let first = vida
        .attempt(
            &apid(),
            json!({"queryId": TIDB_CPU.name, "expr": r#"sum by (instance) (rate(process_cpu_seconds_total{job="tidb"}[1m]))"#}),
        )
        .await;
    assert_no_leak("first", &first);
    let e = view(&first).evidence().clone();
    assert_eq!(e.series_count, 56);
    let top = e.series[0].labels["instance"].clone();
    let follow = vida
        .attempt(
            &apid(),
            json!({"queryId": "tidb_cpu_top", "expr": r#"rate(process_cpu_seconds_total{job="tidb"}[1m])"#, "instanceRef": top}),
        )
        .await;
    assert_no_leak("follow-up", &follow);
    assert_eq!(
        view(&follow).evidence().series_count,
        1,
        "{}",
        follow.text()
    );
    // One instance, one reference: the follow-up names it as the first call did.
    assert_eq!(view(&follow).evidence().series[0].labels["instance"], top);

    for (expr, cpu, series) in [
        (
            r#"rate(process_cpu_seconds_total{job="tidb"}[1m]) / on (instance) tidb_server_maxprocs{job="tidb"}"#,
            true,
            56,
        ),
        (
            r#"sum by (job) (rate({__name__=~"process_cpu_.*",job=~"ti.*"}[1m]))"#,
            true,
            1,
        ),
        (
            r#"label_replace(sum by (job) (rate(process_cpu_seconds_total{job="tidb"}[1m])), "component", "$1", "job", "(ti).*")"#,
            true,
            1,
        ),
        (
            r#"sum without (instance) (tidb_server_maxprocs{job!="node"})"#,
            true,
            1,
        ),
        (
            r#"count(tidb_server_maxprocs{job="tidb",quantile!="0.99",role!="x"})"#,
            true,
            1,
        ),
        (
            r#"label_join(absent(nope{job="tidb", type="gauge"}), "what", "-", "job", "type")"#,
            true,
            1,
        ),
        (
            r#"100 * (1 - node_memory_MemAvailable_bytes{job="node"} / node_memory_MemTotal_bytes{job="node"})"#,
            false,
            261,
        ),
        // Host names in other labels, with and without a port and inside a URL: sealed.
        (r#"tidb_server_info{job="tidb"}"#, true, 56),
        (
            r#"count by (host_ip) (node_memory_MemTotal_bytes{job="node",role="storage"} or node_memory_MemTotal_bytes{job="node"})"#,
            false,
            261,
        ),
    ] {
        let policy = if cpu { apid() } else { st() };
        let result = vida
            .attempt(&policy, json!({"queryId": "allowed", "expr": expr}))
            .await;
        assert_no_leak(expr, &result);
        let v = view(&result);
        assert_eq!(v.status, Status::Ok, "{expr}: {}", result.text());
        assert_eq!(v.evidence().series_count, series, "{expr}");
    }
}

// ---- The property: generated expressions ----

const CPU_SELECTORS: &[&str] = &[
    "process_cpu_seconds_total",
    "tidb_server_maxprocs",
    VIDA_HOST_NAMES,
];
const MEMORY_SELECTORS: &[&str] = &[
    "node_memory_MemAvailable_bytes",
    "node_memory_MemTotal_bytes",
];

/// Label names the generator uses: the address labels of the fixture, labels without
/// addresses, the scope label, and new names.
const LABELS: &[&str] = &[
    "instance",
    "host_ip",
    "job",
    "cluster_id",
    "x",
    "h",
    "peer",
    "__name__",
    "hostname",
    "advertise_address",
    "status_url",
];

fn label() -> impl Strategy<Value = &'static str> {
    prop::sample::select(LABELS)
}

fn matcher() -> impl Strategy<Value = String> {
    let values = prop::sample::select(
        &[
            "",
            ".+",
            ".*",
            ".*:[0-9]+",
            "[0-9.]+",
            "tidb",
            "node",
            "ti.*",
            "x",
            "[0-9]+[.].*",
            ".*[.]1[0-9]+:.*",
        ][..],
    );
    let ops = prop::sample::select(&["=", "!=", "=~", "!~"][..]);
    prop_oneof![
        // Labels that may carry addresses (the selectors name their metric: no second
        // name through `__name__`).
        (
            label().prop_filter("named selector", |l| *l != "__name__"),
            ops.clone(),
            values.clone(),
        )
            .prop_map(|(l, op, v)| format!("{l}{op}\"{v}\"")),
        // Labels without addresses.
        (
            prop::sample::select(&["job", "role", "mode"][..]),
            ops,
            values
        )
            .prop_map(|(l, op, v)| format!("{l}{op}\"{v}\"")),
    ]
}

fn selector(cpu: bool) -> impl Strategy<Value = String> {
    let names = if cpu { CPU_SELECTORS } else { MEMORY_SELECTORS };
    let job = if cpu { "tidb" } else { "node" };
    (
        prop::sample::select(names),
        prop::collection::vec(matcher(), 0..2),
    )
        .prop_map(move |(name, mut ms)| {
            ms.insert(0, format!("job=\"{job}\""));
            format!("{name}{{{}}}", ms.join(","))
        })
}

fn leaf(cpu: bool) -> impl Strategy<Value = String> {
    let rate = cpu;
    prop_oneof![
        selector(cpu).prop_map(move |s| if rate && s.starts_with("process_cpu") {
            format!("rate({s}[1m])")
        } else {
            s
        }),
        selector(cpu).prop_map(|s| format!("last_over_time({s}[5m])")),
        selector(cpu).prop_map(|s| format!("absent({s})")),
        // absent() turns `=` matchers into labels: literals a rewrite could read.
        (
            prop::sample::select(&["1", "1.2", "3.4", "tidb", "5"][..]),
            prop::sample::select(&["6.7", "8", "gauge", ".", "9:9"][..]),
        )
            .prop_map(|(a, b)| format!("absent(nope{{job=\"{a}\",type=\"{b}\"}})")),
        selector(cpu).prop_map(|s| format!("absent_over_time({s}[2m])")),
        Just("vector(1)".to_owned()),
    ]
}

const REGEXES: &[&str] = &[
    "(.*)",
    "(.+):[0-9]+",
    "([0-9]+)[.]([0-9]+)[.]([0-9]+)[.]([0-9]+):([0-9]+)",
    "([^.]+)[.](.*)",
    "(.)(.)(.*)",
    ".*?([0-9]+)$",
    "(t)(.*)",
    "([0-9]+).*",
    "",
];
const REPLACEMENTS: &[&str] = &[
    "$1",
    "$1-$2-$3-$4 port $5",
    "$1.$2",
    "ip $1",
    "$2$1",
    "${1}x",
    "a",
    "$1 $2 $3 $4",
    "",
];
const SEPARATORS: &[&str] = &["-", "", " ", "/", ".", ":"];
/// Source labels of rewrites: the address labels as often as the others.
const SOURCES: &[&str] = &[
    "instance",
    "instance",
    "host_ip",
    "hostname",
    "status_url",
    "job",
    "job",
    "type",
    "",
    "x",
    "cluster_id",
    "__name__",
];
/// Labels rewrites write: new ones as often as the others.
const DESTINATIONS: &[&str] = &[
    "x",
    "h",
    "peer",
    "component",
    "instance",
    "host_ip",
    "job",
    "__name__",
];

fn expr(cpu: bool) -> impl Strategy<Value = String> {
    leaf(cpu).prop_recursive(3, 24, 3, move |inner| {
        prop_oneof![
            4 => (
                inner.clone(),
                prop::sample::select(DESTINATIONS),
                prop::sample::select(REPLACEMENTS),
                prop::sample::select(SOURCES),
                prop::sample::select(REGEXES),
            )
                .prop_map(|(e, dst, repl, src, re)| format!(
                    "label_replace({e}, \"{dst}\", \"{repl}\", \"{src}\", \"{re}\")"
                )),
            2 => (
                inner.clone(),
                prop::sample::select(DESTINATIONS),
                prop::sample::select(SEPARATORS),
                prop::collection::vec(prop::sample::select(SOURCES), 1..4),
            )
                .prop_map(|(e, dst, sep, srcs)| format!(
                    "label_join({e}, \"{dst}\", \"{sep}\", {})",
                    srcs.iter()
                        .map(|s| format!("\"{s}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            1 => (
                inner.clone(),
                prop::sample::select(&["sum", "max", "count", "min"][..]),
                prop::sample::select(&["by", "without"][..]),
                prop::collection::vec(label(), 0..3),
            )
                .prop_map(|(e, op, how, ls)| format!("{op} {how} ({}) ({e})", ls.join(", "))),
            1 => (inner.clone(), label()).prop_map(|(e, l)| format!("count_values(\"{l}\", {e})")),
            1 => inner.clone().prop_map(|e| format!("topk(3, {e})")),
            1 => (
                inner.clone(),
                inner.clone(),
                prop::sample::select(&["*", "/", "+", "and", "or", "unless", "> bool"][..]),
                prop::sample::select(&["on", "ignoring"][..]),
                prop::collection::vec(label(), 0..3),
                prop::sample::select(&["", "group_left", "group_right"][..]),
                prop::collection::vec(label(), 0..2),
            )
                .prop_map(|(a, b, op, how, ls, group, copied)| {
                    let set = matches!(op, "and" | "or" | "unless");
                    let grouping = if group.is_empty() || set {
                        String::new()
                    } else {
                        format!(" {group} ({})", copied.join(", "))
                    };
                    format!("({a}) {op} {how} ({}){grouping} ({b})", ls.join(", "))
                }),
            1 => inner.clone().prop_map(|e| format!("abs({e})")),
            1 => inner.clone().prop_map(|e| format!("clamp_min({e}, 0)")),
            1 => (inner.clone(), label()).prop_map(|(e, l)| format!("sort_by_label({e}, \"{l}\")")),
            1 => inner.clone().prop_map(|e| format!("max_over_time(({e})[5m:1m])")),
        ]
    })
}

/// No generated expression gets an address out in any shape. 2,000 expressions (rewrites
/// with varied regexes and replacements, matchers on address and other labels,
/// aggregations, `on`/`ignoring` with `group_left`/`group_right`, nested functions and
/// subqueries, with and without an `instanceRef`) go through `lock` and then
/// `ManusConnector` behind the Manus front on the real `vida` Prometheus, whose fixture
/// carries host names with and without a port, and inside a URL, in labels other than
/// `instance`. Each is refused by the lock or runs with every address sealed: no
/// model-visible string holds the digits of a fixture address joined by any separators, a
/// fixture port or a fixture host name. Refusals carry codes from the contract table. One
/// server for the whole property.
#[test]
fn no_address_leaves_in_any_shape() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let vida = runtime.block_on(Vida::start());
    // A reference for each window, to pass back in some cases.
    let reference = |policy: &TrustedPolicy, expr: &str| {
        let r = runtime.block_on(vida.attempt(policy, json!({"queryId": "seed", "expr": expr})));
        view(&r).evidence().series[0].labels["instance"].clone()
    };
    let cpu_ref = reference(
        &apid(),
        r#"sum by (instance) (rate(process_cpu_seconds_total{job="tidb"}[1m]))"#,
    );
    let memory_ref = reference(&st(), r#"node_memory_MemTotal_bytes{job="node"}"#);
    let cases = (any::<bool>(), any::<bool>())
        .prop_flat_map(|(cpu, with_ref)| (Just(cpu), Just(with_ref), expr(cpu)));
    let mut runner = runner(2000);
    let ran = std::cell::Cell::new(0usize);
    let refused = std::cell::Cell::new(0usize);
    runner
        .run(&cases, |(cpu, with_ref, expr)| {
            let policy = if cpu { apid() } else { st() };
            let mut args = json!({"queryId": "generated", "expr": expr});
            if with_ref {
                args["instanceRef"] = json!(if cpu { &cpu_ref } else { &memory_ref });
            }
            let result = runtime.block_on(vida.attempt(&policy, args));
            if let Some(s) = leak(&result) {
                return Err(TestCaseError::fail(format!(
                    "{expr}: an address left as {s:?} in {}",
                    result.text()
                )));
            }
            let d = result.details();
            if let Some(e) = &d.error {
                prop_assert!(
                    known_code(e.code.as_str()).is_some(),
                    "{} is not in ERROR_CODES",
                    e.code
                );
                refused.set(refused.get() + 1);
            } else {
                ran.set(ran.get() + 1);
            }
            Ok(())
        })
        .unwrap();
    let (ran, refused) = (ran.get(), refused.get());
    eprintln!("{ran} generated expressions ran, {refused} were refused");
    assert!(
        ran >= 300,
        "the generator must produce runnable expressions: {ran}"
    );
}

/// A discovery the model may write under Manus: each form, over generated selectors
/// that name address-bearing labels (refused, or bound to the window's cluster).
fn discovery(cpu: bool) -> impl Strategy<Value = Value> {
    let form = prop_oneof![
        Just(json!({"discover": "metric_names"})),
        Just(json!({"discover": "metric_names", "pattern": ".*"})),
        Just(json!({"discover": "metric_metadata"})),
        Just(json!({"discover": "metric_metadata", "pattern": "(process|tidb)_.*"})),
        Just(json!({"discover": "label_names"})),
        Just(json!({"discover": "series"})),
        label().prop_map(|l| json!({"discover": "label_values", "label": l})),
    ];
    (form, proptest::option::of(selector(cpu))).prop_map(|(mut args, selector)| {
        args["queryId"] = json!("discovered");
        if let Some(s) = selector {
            args["selector"] = json!(s);
        }
        args
    })
}

/// A runner of `cases` cases, shrinking at most 200 steps, persisting no failure.
fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        max_shrink_iters: 200,
        failure_persistence: None,
        ..Config::default()
    })
}

/// The sealing property for discovery answers: whatever the model asks for (every
/// address-bearing label's values, the series' label sets, label names, the provider's
/// help texts of names, which here name instances), no
/// model-visible string holds a fixture address in any shape; the values of `instance`
/// come back as references, and a reference a discovery listed binds a later query to
/// its instance. 1,000 generated discoveries on one server.
#[test]
fn no_address_leaves_a_discovery() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let vida = runtime.block_on(Vida::with_metadata());
    let granted = |mut p: TrustedPolicy| {
        p.discovery = Some(DiscoveryGrant { max_items: 50 });
        p
    };
    // Help texts that name instances come back sealed.
    let described = runtime.block_on(vida.attempt(
        &granted(apid()),
        json!({"queryId": "described", "discover": "metric_metadata"}),
    ));
    assert_no_leak("described", &described);
    let d = result_discovery(&described);
    let metadata = d.metadata.as_ref().unwrap();
    let help = |name: &str| {
        metadata
            .names
            .iter()
            .find(|m| m.name == name)
            .and_then(|m| m.help.clone())
            .unwrap_or_else(|| panic!("{name} has help: {}", described.text()))
    };
    assert!(help("process_cpu_seconds_total").starts_with("CPU time of the TiDB server at "));
    assert!(help("tidb_server_info").starts_with("Build of "));
    // The instances a discovery lists are references a query can pass back.
    let listed = runtime.block_on(vida.attempt(
        &granted(apid()),
        json!({"queryId": "instances", "discover": "label_values", "label": "instance",
               "selector": "process_cpu_seconds_total{job=\"tidb\"}"}),
    ));
    assert_no_leak("instances", &listed);
    let d = result_discovery(&listed);
    assert_eq!((d.total, d.rows.len()), (56, 50), "{}", listed.text());
    // The selector that ran says the label was required, and seals nothing empty.
    assert!(d.selector.contains(r#"instance!="""#), "{}", d.selector);
    let Cell::Text(Some(reference)) = &d.rows[0][0] else {
        panic!("{}", listed.text())
    };
    let bound = runtime.block_on(vida.attempt(
        &granted(apid()),
        json!({"queryId": "one_instance", "instanceRef": reference,
               "expr": "rate(process_cpu_seconds_total{job=\"tidb\"}[1m])"}),
    ));
    assert_no_leak("one_instance", &bound);
    assert_eq!(view(&bound).evidence().series_count, 1, "{}", bound.text());
    // Without the grant, nothing is discovered and nothing is sent.
    let before = vida.queries_sent();
    let refused = runtime.block_on(vida.attempt(
        &apid(),
        json!({"queryId": "names", "discover": "metric_names"}),
    ));
    assert_eq!(
        view(&refused).error().code.as_str(),
        "discovery_not_granted"
    );
    assert_eq!(vida.queries_sent(), before);

    let cases = any::<bool>().prop_flat_map(|cpu| (Just(cpu), discovery(cpu)));
    let mut runner = runner(1000);
    let ran = std::cell::Cell::new(0usize);
    runner
        .run(&cases, |(cpu, args)| {
            let policy = granted(if cpu { apid() } else { st() });
            let result = runtime.block_on(vida.attempt(&policy, args.clone()));
            if let Some(s) = leak(&result) {
                return Err(TestCaseError::fail(format!(
                    "{args}: an address left as {s:?} in {}",
                    result.text()
                )));
            }
            let d = result.details();
            match &d.error {
                Some(e) => prop_assert!(
                    known_code(e.code.as_str()).is_some(),
                    "{} is not in ERROR_CODES",
                    e.code
                ),
                None => {
                    prop_assert!(d.discovery.is_some(), "{}", result.text());
                    ran.set(ran.get() + 1);
                }
            }
            Ok(())
        })
        .unwrap();
    let ran = ran.get();
    eprintln!("{ran} generated discoveries ran");
    assert!(
        ran >= 300,
        "the generator must produce runnable discoveries: {ran}"
    );
}

/// The discovery answer of a single-operation result.
fn result_discovery(result: &ToolResult) -> std::sync::Arc<Discovery> {
    result
        .details()
        .discovery
        .clone()
        .unwrap_or_else(|| panic!("expected a discovery: {}", result.text()))
}
