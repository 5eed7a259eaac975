//! What the operators' metrics cost: the counts one served call records (its six phases,
//! slots, HTTP request, store uses and audit counts) against the warm call itself, a
//! Clinic query through the connector on real Prometheus behind the Clinic front,
//! measured in the same run (goal: the metrics at most 3 % of the call); and a scrape
//! (the text exposition) of a registry that recorded 10,000 calls of varied outcomes
//! (goal: under 10 ms).
//!
//!     cargo bench --bench metrics
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use criterion::Criterion;
use evidence_test_support as support;
use managed_evidence::connectors::{ClinicConnector, ClinicSecrets, Connector};
use secrecy::SecretString;
use serde_json::json;

#[path = "support/clinic.rs"]
mod clinic;

const TOKEN: &str = "bench-metrics-token-0001";

/// An audit record of a call with `status`, `class` and `code`.
fn record(
    status: &str,
    class: Option<&str>,
    code: Option<&str>,
) -> managed_evidence::package::AuditRecord {
    serde_json::from_value(json!({
        "time": "2026-12-06T00:00:00Z", "stream": "auto_oncall.managed_auto_oncall_clinic",
        "package": "managed_auto_oncall_clinic", "query_ids": ["cpu"], "request_digests": [],
        "status": status, "failure_class": class, "error_codes": code.into_iter().collect::<Vec<_>>(),
        "duration_ms": 3, "output_bytes": 900, "blocked": false, "blocked_secrets": [],
        "unguarded": [], "folder_changed": false, "cancelled": false,
    }))
    .unwrap()
}

fn main() {
    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(30)
        .measurement_time(Duration::from_secs(4));
    let tool = managed_evidence::tool::internal::fresh_metrics();
    let ok = record("ok", None, None);
    let mut group = criterion.benchmark_group("metrics");
    group.bench_function("one call's counts", |b| {
        b.iter(|| managed_evidence::tool::internal::record_one_call(&tool, &ok));
    });

    // A scrape of 10,000 calls of varied outcomes.
    let scraped = managed_evidence::tool::internal::fresh_metrics();
    let outcomes = [
        record("ok", None, None),
        record("error", Some("policy_violation"), Some("scope_violation")),
        record("error", Some("query_rejected"), Some("clinic_http_422")),
        record("error", Some("authorization"), Some("session_missing")),
        record(
            "partial",
            Some("query_rejected"),
            Some("promql_parse_error"),
        ),
    ];
    for n in 0..10_000 {
        managed_evidence::tool::internal::record_one_call(&scraped, &outcomes[n % outcomes.len()]);
    }
    group.bench_function("a scrape of 10,000 calls", |b| b.iter(|| scraped.encode()));
    group.finish();

    // The warm call, in the same run.
    let (runtime, prometheus, front) = clinic::provider(TOKEN);
    let q = support::TIDB_CPU;
    let locked = clinic::locked(
        4,
        json!([{"queryId": "cpu", "expr": q.expr, "step": "15s", "unit": "cores"}]),
    );
    let config = clinic::config(&front);
    let secrets = ClinicSecrets::new(SecretString::from(TOKEN.to_owned()));
    let connector = ClinicConnector::new().unwrap();
    let call = || {
        let t = Instant::now();
        let result = runtime
            .block_on(connector.call(&locked, &config, &secrets))
            .unwrap();
        assert_eq!(
            result.details().status,
            managed_evidence::result::Status::Ok
        );
        t.elapsed()
    };
    let counts = || {
        let t = Instant::now();
        managed_evidence::tool::internal::record_one_call(&tool, &ok);
        t.elapsed()
    };
    for _ in 0..5 {
        call();
    }
    let (mut calls, mut costs) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        calls.push(call());
        // A single record is below the clock's resolution: time 100 of them.
        let t = Instant::now();
        for _ in 0..100 {
            counts();
        }
        costs.push(t.elapsed() / 100);
    }
    let median = |xs: &mut Vec<Duration>| {
        xs.sort();
        xs[xs.len() / 2]
    };
    let (call, cost) = (median(&mut calls), median(&mut costs));
    let share = cost.as_secs_f64() / call.as_secs_f64() * 100.0;
    let t = Instant::now();
    let text = scraped.encode();
    let scrape = t.elapsed();
    println!(
        "\nmetrics: one call's counts {cost:?} against the warm call {call:?} ({share:.3} %, goal <= 3 %: {}); \
         a scrape of 10,000 calls {scrape:?} ({} bytes, goal < 10 ms: {})",
        if share <= 3.0 { "met" } else { "NOT MET" },
        text.len(),
        if scrape < Duration::from_millis(10) {
            "met"
        } else {
            "NOT MET"
        },
    );
    drop((front, prometheus));
}
