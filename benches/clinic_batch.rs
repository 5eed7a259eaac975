//! A 20-query Clinic batch through the Clinic connector (bounded concurrency, one call)
//! against 20 sequential `promtool query range` calls for the same locked expressions,
//! on the same local Prometheus (real, started by test support, behind the Clinic test
//! front for the connector). Prints the ratio measured in this run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::{Duration, Instant};

use criterion::Criterion;
use evidence_test_support as support;
use managed_evidence::connectors::{ClinicConfig, ClinicConnector, ClinicSecrets, Connector};
use managed_evidence::policy::lock::LockedItem;
use secrecy::SecretString;
use serde_json::json;

#[path = "support/clinic.rs"]
mod clinic;

const TOKEN: &str = "bench-clinic-token-0001";

struct Setup {
    runtime: tokio::runtime::Runtime,
    prometheus: support::Prometheus,
    _front: support::ClinicFront,
    config: ClinicConfig,
    locked: managed_evidence::policy::LockedRequest,
    exprs: Vec<String>,
}

fn setup() -> Setup {
    let (runtime, prometheus, front) = clinic::provider(TOKEN);
    let queries: Vec<_> = (1..=20)
        .map(|k| json!({
            "queryId": format!("q{k}"),
            "expr": format!("topk({k}, sum by (instance) (rate(process_cpu_seconds_total{{job=\"tidb\"}}[1m])))"),
            "step": "15s", "unit": "cores"
        }))
        .collect();
    let locked = clinic::locked(20, json!(queries));
    let exprs = locked
        .items
        .iter()
        .map(|i| match i {
            LockedItem::Ready(q) => q.expr.clone(),
            LockedItem::Rejected { .. } => panic!("bench query rejected"),
        })
        .collect();
    let config = clinic::config(&front).with_concurrency(4);
    Setup {
        runtime,
        prometheus,
        _front: front,
        config,
        locked,
        exprs,
    }
}

fn batch(s: &Setup, connector: &ClinicConnector, secrets: &ClinicSecrets) -> Duration {
    let started = Instant::now();
    let result = s
        .runtime
        .block_on(connector.call(&s.locked, &s.config, secrets))
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(result.details().items.len(), 20);
    assert!(
        result.details().items.iter().all(|i| !i.is_failed()),
        "{}",
        result.text()
    );
    elapsed
}

fn promtool_sequential(s: &Setup) -> Duration {
    let started = Instant::now();
    for expr in &s.exprs {
        let out = Command::new("promtool")
            .args([
                "query",
                "range",
                "--start",
                &support::APID_29213_START.to_string(),
                "--end",
                &support::APID_29213_END.to_string(),
                "--step",
                "15s",
                &s.prometheus.url(),
                expr,
            ])
            .output()
            .expect("promtool runs (apt-get install -y prometheus)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    started.elapsed()
}

fn benches() {
    let s = setup();
    let connector = ClinicConnector::new().unwrap();
    let secrets = ClinicSecrets::new(SecretString::from(TOKEN.to_owned()));
    let mut c = Criterion::default().configure_from_args().sample_size(10);
    c.bench_function("clinic_batch_20_queries", |b| {
        b.iter(|| batch(&s, &connector, &secrets))
    });
    c.bench_function("promtool_20_sequential_queries", |b| {
        b.iter(|| promtool_sequential(&s))
    });
    if std::env::args().any(|a| a == "--bench") {
        let rounds = 5u32;
        let (mut ours, mut base) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..rounds {
            ours += batch(&s, &connector, &secrets);
            base += promtool_sequential(&s);
        }
        let (ours, base) = (ours / rounds, base / rounds);
        println!(
            "SUMMARY clinic batch of 20: {:.1} ms; 20 sequential promtool query range: {:.1} ms; promtool/batch = {:.2}x",
            ours.as_secs_f64() * 1e3,
            base.as_secs_f64() * 1e3,
            base.as_secs_f64() / ours.as_secs_f64()
        );
    }
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
