//! Property tests of the security invariants: no widening and never another cluster,
//! envelope tamper and digest binding, request digest stability.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};

use evidence_policy::{
    KeyId, KeyRing, PolicySigner, SignedPolicy, TrustedPolicy, lock, lock::LockedItem, verify,
};
use evidence_result::{Digest, PolicySource, RequestDigest};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};
use support::*;

/// A generated PromQL expression and whether it names another cluster scope.
#[derive(Debug, Clone)]
struct Gen {
    text: String,
    conflict: bool,
}

fn window_start_secs() -> i64 {
    apid_29213("clinic").window.start_unix()
}

fn selector_parts() -> impl Strategy<Value = (String, bool)> {
    let metric = prop::sample::select(vec!["up", "tidb_cpu", "tikv_mem", "node_load1", ""]);
    let scope = prop_oneof![
        6 => Just(("", false)),
        3 => Just((r#"cluster_id="SaaS01""#, false)),
        2 => prop::sample::select(vec![
        (r#"cluster_id="SaaS02""#, true),
        (r#"cluster_id!="SaaS01""#, true),
        (r#"cluster_id=~"SaaS.*""#, true),
        (r#"cluster_id=~"SaaS01""#, true),
        (r#"cluster_id!~"x""#, true),
        (r#""cluster_id"="SaaS03""#, true),
        (r#"cluster_id="""#, true),
    ]),
    ];
    let other = prop::sample::select(vec![
        "",
        r#"job="tidb""#,
        r#"instance=~"10\\..*""#,
        r#"job!="pd""#,
    ]);
    (metric, scope, other).prop_map(|(metric, (scope, conflict), other)| {
        let mut matchers: Vec<&str> = [scope, other]
            .into_iter()
            .filter(|m| !m.is_empty())
            .collect();
        if metric.is_empty() && matchers.is_empty() {
            matchers.push(r#"job="tidb""#);
        }
        let body = if matchers.is_empty() {
            metric.to_owned()
        } else {
            format!("{metric}{{{}}}", matchers.join(","))
        };
        (body, conflict)
    })
}

fn modifiers() -> impl Strategy<Value = String> {
    let s = window_start_secs();
    let at = prop_oneof![
        6 => Just(String::new()),
        2 => prop::sample::select(vec![
        " @ start()".to_owned(),
        " @ end()".into(),
        format!(" @ {}", s + 300),
        format!(" @ {}.5", s + 899),
        format!(" @ {}", s - 60),
        format!(" @ {}", s + 1000),
    ]),
    ];
    let offset = prop_oneof![
        6 => Just(""),
        2 => prop::sample::select(vec![" offset 5m", " offset 30m", " offset 1h", " offset -1m", " offset -20m", " offset 2h"]),
    ];
    (at, offset).prop_map(|(a, o)| format!("{a}{o}"))
}

fn leaf() -> impl Strategy<Value = Gen> {
    let range = prop_oneof![
        4 => prop::sample::select(vec!["1m", "5m", "90s"]),
        1 => prop::sample::select(vec!["30m", "55m", "1h", "2h"]),
    ];
    let func = prop::sample::select(vec![
        "rate",
        "max_over_time",
        "increase",
        "avg_over_time",
        "absent_over_time",
    ]);
    prop_oneof![
        (selector_parts(), modifiers()).prop_map(|((sel, conflict), m)| Gen {
            text: format!("{sel}{m}"),
            conflict
        }),
        (func, selector_parts(), range, modifiers()).prop_map(|(f, (sel, conflict), r, m)| Gen {
            text: format!("{f}({sel}[{r}]{m})"),
            conflict
        }),
        prop::sample::select(vec!["1", "0.5", "time()", "vector(1)"]).prop_map(|t| Gen {
            text: t.to_owned(),
            conflict: false
        }),
    ]
}

fn expr() -> impl Strategy<Value = Gen> {
    leaf().prop_recursive(3, 12, 2, |inner| {
        let sub_range = prop::sample::select(vec!["5m", "10m", "30m", "50m"]);
        let sub_step = prop::sample::select(vec!["", "1m", "2m"]);
        let sub_fn = prop::sample::select(vec!["max_over_time", "avg_over_time", "min_over_time"]);
        let agg = prop::sample::select(vec![
            "sum by (instance)",
            "max",
            "count without (job)",
            "avg",
        ]);
        let op = prop::sample::select(vec![
            "+",
            "/ on (instance)",
            "or",
            "and",
            "unless",
            "> bool",
            "*",
        ]);
        prop_oneof![
            (agg, inner.clone()).prop_map(|(a, e)| Gen {
                text: format!("{a} ({})", e.text),
                conflict: e.conflict
            }),
            (inner.clone(), op, inner.clone()).prop_map(|(l, o, r)| Gen {
                text: format!("({}) {o} ({})", l.text, r.text),
                conflict: l.conflict || r.conflict
            }),
            (sub_fn, inner.clone(), sub_range, sub_step, modifiers()).prop_map(
                |(f, e, r, s, m)| Gen {
                    text: format!("{f}(({})[{r}:{s}]{m})", e.text),
                    conflict: e.conflict
                }
            ),
            (inner.clone(), inner.clone()).prop_map(|(k, e)| Gen {
                text: format!("topk(scalar({}), {})", k.text, e.text),
                conflict: k.conflict || e.conflict
            }),
            inner.clone().prop_map(|e| Gen {
                text: format!(
                    "label_replace(abs({}), \"a\", \"$1\", \"instance\", \"(.*)\")",
                    e.text
                ),
                conflict: e.conflict
            }),
            inner.prop_map(|e| Gen {
                text: format!("clamp_min(({}), 0)", e.text),
                conflict: e.conflict
            }),
        ]
    })
}

fn args_for(provider: &str, query_id: &str, e: &str, step: &Option<Value>) -> Value {
    let mut a = one_query(provider, query_id, e);
    if let Some(s) = step {
        if provider == "clinic" {
            a["queries"][0]["step"] = s.clone();
        } else {
            a["step"] = s.clone();
        }
    }
    a
}

/// For generated PromQL (random selectors, matchers on the scope label, offsets
/// including negative ones, `@`, subqueries, nested functions and aggregations), a
/// locked query never reads outside the policy window plus look-back and never targets
/// another cluster; an expression naming another cluster scope is always rejected.
#[test]
fn locked_requests_never_widen_nor_target_another_cluster() {
    let ready = AtomicUsize::new(0);
    let rejected = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 256,
        ..Config::default()
    });
    let step = prop_oneof![
        3 => Just(None),
        3 => prop::sample::select(vec![json!(15), json!("30s"), json!("1m"), json!("5m")]).prop_map(Some),
        1 => prop::sample::select(vec![json!(1), json!("1h"), json!(0)]).prop_map(Some),
    ];
    let provider = prop::sample::select(vec!["clinic", "manus", "wetech"]);
    runner
        .run(&(expr(), provider, step), |(g, provider, step)| {
            let policy = apid_29213(provider);
            let args = args_for(provider, "tidb_cpu", &g.text, &step);
            let outcome = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope());
            let item = match outcome {
                Err(r) => {
                    prop_assert!(r.query_id.is_some(), "{}", r);
                    None
                }
                Ok(locked) => {
                    prop_assert_eq!(locked.items.len(), 1);
                    match &locked.items[0] {
                        LockedItem::Ready(q) => Some(q.clone()),
                        LockedItem::Rejected { .. } => None,
                    }
                }
            };
            match item {
                Some(q) => {
                    ready.fetch_add(1, Ordering::Relaxed);
                    prop_assert!(!g.conflict, "accepted another cluster scope: {}", g.text);
                    if let Err(e) = check_locked(&q, &policy) {
                        return Err(TestCaseError::fail(format!("{e}\n  from: {}", g.text)));
                    }
                }
                None => {
                    rejected.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(())
        })
        .unwrap();
    let (ready, rejected) = (ready.into_inner(), rejected.into_inner());
    assert!(
        ready >= 20 && rejected >= 20,
        "generator too one-sided: {ready} ready, {rejected} rejected"
    );
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z0-9_ %/.:-]{0,12}".prop_map(Value::from),
        expr().prop_map(|g| Value::from(g.text)),
        prop::sample::select(vec!["tidb_cpu", "30s", "cores", "1m", "SaaS02", "up[5m]"])
            .prop_map(Value::from),
    ]
}

fn json_args() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec![
        "queryId",
        "expr",
        "step",
        "unit",
        "instanceRef",
        "queries",
        "provider",
        "cluster_id",
        "start",
        "end",
        "window",
        "target",
        "url",
        "ticket",
        "query",
        "legend",
    ]);
    json_leaf().prop_recursive(3, 24, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6).prop_map(|m| Value::Object(
                m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

proptest! {
    #![proptest_config(Config { cases: 192, ..Config::default() })]

    /// Arbitrary argument JSON never panics, and whatever locks is within scope.
    #[test]
    fn arbitrary_argument_json_never_widens(args in json_args(), provider in prop::sample::select(vec!["clinic", "manus", "wetech"])) {
        let policy = apid_29213(provider);
        if let Ok(locked) = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope()) {
            for q in locked.ready() {
                prop_assert!(check_locked(q, &policy).is_ok(), "{:?}", check_locked(q, &policy));
            }
            // Nothing the model may not set got through at the top level.
            if let Some(obj) = args.as_object() {
                for k in ["provider", "cluster_id", "start", "end", "window", "target", "url", "ticket"] {
                    prop_assert!(!obj.contains_key(k), "{k} accepted");
                }
            }
        }
    }
}

/// The signers of the tests, from fixed seeds.
fn signer(kid: &str) -> PolicySigner {
    let seed = if kid == "k1" { [11u8; 32] } else { [22u8; 32] };
    PolicySigner::new(
        KeyId::new(kid).unwrap(),
        secrecy::SecretSlice::from(seed.to_vec()),
    )
    .unwrap()
}

/// The sandbox's ring: the public keys of `k1` and `k2`, as `EVIDENCE_POLICY_KEYS` holds them.
fn ring() -> KeyRing {
    format!(
        "{},{}",
        signer("k1").key_ring_entry(),
        signer("k2").key_ring_entry()
    )
    .parse()
    .unwrap()
}

fn policy_strategy() -> impl Strategy<Value = TrustedPolicy> {
    (
        1u32..99_999,
        "[A-Za-z0-9]{1,12}",
        0i64..86_400,
        60i64..7200,
        prop::sample::select(vec!["clinic", "manus", "wetech"]),
    )
        .prop_map(|(ticket, cluster, shift, len, provider)| {
            let mut p = apid_29213(provider);
            p.ticket = format!("APID-{ticket}").parse().unwrap();
            p.cluster.id = cluster;
            let start = p.window.start.as_second() - shift;
            p.window.start = jiff::Timestamp::from_second(start).unwrap();
            p.window.end = jiff::Timestamp::from_second(start + len).unwrap();
            p
        })
}

fn now() -> jiff::Timestamp {
    "2026-07-21T14:20:00Z".parse().unwrap()
}

proptest! {
    #![proptest_config(Config { cases: 1000, ..Config::default() })]

    /// Changing any byte of an envelope makes it fail to read or fail to verify.
    #[test]
    fn tampering_with_any_byte_never_verifies(
        policy in policy_strategy(),
        kid in prop::sample::select(vec!["k1", "k2"]),
        index in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let ring = ring();
        let digest = Digest::sha256(b"package under test");
        let signer = signer(kid);
        let text = signer.sign(&policy, digest).unwrap().to_json().unwrap();
        let ok = SignedPolicy::from_json(&text).unwrap();
        prop_assert_eq!(verify(&ok, &ring, &digest, &policy.package, policy.provider, now()).unwrap(), policy.clone());

        let mut bytes = text.into_bytes();
        let i = index.index(bytes.len());
        prop_assume!(bytes[i] != byte);
        bytes[i] = byte;
        if let Ok(tampered) = String::from_utf8(bytes)
            && let Ok(env) = SignedPolicy::from_json(&tampered)
        {
            prop_assert!(verify(&env, &ring, &digest, &policy.package, policy.provider, now()).is_err());
        }
    }

    /// An envelope for another package digest never verifies.
    #[test]
    fn envelope_for_another_digest_never_verifies(
        policy in policy_strategy(),
        signed_for in any::<[u8; 32]>(),
        running in any::<[u8; 32]>(),
    ) {
        prop_assume!(signed_for != running);
        let ring = ring();
        let signer = signer("k1");
        let env = signer.sign(&policy, Digest::Sha256(signed_for)).unwrap();
        let result = verify(&env, &ring, &Digest::Sha256(running), &policy.package, policy.provider, now());
        let is_digest_mismatch = matches!(result, Err(evidence_policy::PolicyError::DigestMismatch { .. }));
        prop_assert!(is_digest_mismatch);
    }
}

fn digest_of(policy: &TrustedPolicy, args: &Value) -> Option<RequestDigest> {
    match lock(policy, PolicySource::TrustedEnvelope, args, &scope()) {
        Ok(l) => match &l.items[0] {
            LockedItem::Ready(q) => Some(q.request_digest),
            LockedItem::Rejected { request_digest, .. } => *request_digest,
        },
        Err(r) => r.request_digest,
    }
}

fn reserialize(v: &Value, pretty: bool) -> Value {
    let text = if pretty {
        serde_json::to_string_pretty(v).unwrap()
    } else {
        serde_json::to_string(v).unwrap()
    };
    serde_json::from_str(&text).unwrap()
}

fn step_spellings(seconds: u64) -> Vec<Value> {
    let mut v = vec![json!(seconds), json!(format!("{seconds}s"))];
    if seconds.is_multiple_of(60) {
        v.push(json!(format!("{}m", seconds / 60)));
    }
    v
}

proptest! {
    #![proptest_config(Config { cases: 128, ..Config::default() })]

    /// The request digest is stable under re-serialization (and equivalent step
    /// spellings) and changes when `expr`, `step`, `unit` or `queryId` changes.
    #[test]
    fn request_digest_is_stable_and_sensitive(
        g in expr(),
        provider in prop::sample::select(vec!["clinic", "manus", "wetech"]),
        qid in prop::sample::select(vec!["tidb_cpu", "tikv_cpu"]),
        other_qid in prop::sample::select(vec!["mem_ratio", "q:2"]),
        step in prop::sample::select(vec![15u64, 30, 60, 120]),
        unit in prop::sample::select(vec!["cores", "bytes", "%"]),
        pretty in any::<bool>(),
    ) {
        let policy = apid_29213(provider);
        let build = |qid: &str, e: &str, step: Value, unit: &str| {
            let mut q = Map::new();
            q.insert("queryId".into(), json!(qid));
            q.insert("expr".into(), json!(e));
            q.insert("step".into(), step);
            if provider != "manus" {
                q.insert("unit".into(), json!(unit));
            }
            if provider == "clinic" {
                json!({"queries": [Value::Object(q)]})
            } else {
                Value::Object(q)
            }
        };
        let base = build(qid, &g.text, json!(step), unit);
        let d = digest_of(&policy, &base);
        prop_assert!(d.is_some());
        prop_assert_eq!(d, digest_of(&policy, &reserialize(&base, pretty)));
        for s in step_spellings(step) {
            prop_assert_eq!(d, digest_of(&policy, &build(qid, &g.text, s, unit)));
        }
        // A semantically different expression, step, unit or query id changes it.
        prop_assert_ne!(d, digest_of(&policy, &build(qid, &format!("({}) + 1", g.text), json!(step), unit)));
        prop_assert_ne!(d, digest_of(&policy, &build(qid, &g.text, json!(step * 2), unit)));
        prop_assert_ne!(d, digest_of(&policy, &build(other_qid, &g.text, json!(step), unit)));
        if provider != "manus" {
            prop_assert_ne!(d, digest_of(&policy, &build(qid, &g.text, json!(step), "ops/s")));
        }
    }
}
