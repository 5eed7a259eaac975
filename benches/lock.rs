//! Locking one tool call: parse the model's JSON arguments, lock them against the
//! trusted policy (PromQL parse, checks, scope binding, print and re-parse) and digest the
//! request. Two baselines measured in the same run: parsing the same arguments into the
//! typed Wetech argument struct with serde_json, and one `promql-parser` parse of the same
//! expression (locking parses twice: the model's text and the rewritten text). Prints the
//! ratios. Goal: at most 50 us per call.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Instant;

use criterion::Criterion;
use managed_evidence::policy::{ScopeBinding, TrustedPolicy, WetechArgs, lock, lock::ScopeValue};
use managed_evidence::result::PolicySource;
use serde_json::{Value, json};

const ARGS: &str = r#"{"queryId":"tidb_cpu","expr":"sum by (instance) (rate(tidb_server_cpu_seconds_total{job=\"tidb\"}[1m])) / on (instance) group_left () max by (instance) (tidb_server_maxprocs{job=\"tidb\"})","unit":"cores","step":"30s"}"#;

/// The APID-29213 fixture for the Wetech package.
fn policy() -> TrustedPolicy {
    let mut v = evidence_test_support::policy::apid_29213_policy("wetech").unwrap();
    v["wetech_query_ids"] = json!(["tidb_cpu"]);
    v["wetech_datasource"] = json!("prometheus-main");
    v["limits"]["max_batch"] = json!(1);
    serde_json::from_value(v).unwrap()
}

fn lock_call(policy: &TrustedPolicy, scope: &[ScopeBinding]) -> u64 {
    let args: Value = serde_json::from_str(black_box(ARGS)).unwrap();
    let locked = lock(policy, PolicySource::TrustedEnvelope, &args, scope).unwrap();
    locked.single().unwrap().step_seconds
}

fn baseline_call() -> usize {
    let args: WetechArgs = serde_json::from_str(black_box(ARGS)).unwrap();
    args.expr.map_or(0, |e| e.len())
}

fn parse_only(expr: &str) -> bool {
    promql_parser::parser::parse(black_box(expr)).is_ok()
}

fn main() {
    let policy = policy();
    let scope = [ScopeBinding::new("cluster_id", ScopeValue::ClusterId).unwrap()];
    assert_eq!(lock_call(&policy, &scope), 30);
    let expr = serde_json::from_str::<WetechArgs>(ARGS)
        .unwrap()
        .expr
        .unwrap();
    assert!(parse_only(&expr));

    let mut c = Criterion::default().configure_from_args();
    {
        let mut group = c.benchmark_group("lock");
        group.bench_function("parse_lock_digest", |b| {
            b.iter(|| black_box(lock_call(&policy, &scope)))
        });
        group.bench_function("baseline_serde_typed_args", |b| {
            b.iter(|| black_box(baseline_call()))
        });
        group.bench_function("baseline_promql_parse_once", |b| {
            b.iter(|| black_box(parse_only(&expr)))
        });
        group.finish();
    }
    c.final_summary();

    let runs = 5000;
    let t = Instant::now();
    for _ in 0..runs {
        black_box(lock_call(&policy, &scope));
    }
    let lock_s = t.elapsed().as_secs_f64() / f64::from(runs);
    let t = Instant::now();
    for _ in 0..runs {
        black_box(baseline_call());
    }
    let base_s = t.elapsed().as_secs_f64() / f64::from(runs);
    let t = Instant::now();
    for _ in 0..runs {
        black_box(parse_only(&expr));
    }
    let parse_s = t.elapsed().as_secs_f64() / f64::from(runs);
    let goal = if lock_s * 1e6 <= 50.0 {
        "met"
    } else {
        "missed"
    };
    println!(
        "lock summary: parse + lock + digest {:.1} us per call (goal <= 50 us: {goal}); \
         serde typed-argument parse {:.2} us (ratio {:.1}x); one PromQL parse {:.1} us (ratio {:.2}x)",
        lock_s * 1e6,
        base_s * 1e6,
        lock_s / base_s,
        parse_s * 1e6,
        lock_s / parse_s
    );
}
