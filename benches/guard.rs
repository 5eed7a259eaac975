//! Output guard over a 10 MB tool output with 64 bound secrets: throughput (goal at least
//! 1 GB/s) and the ratio against a naive loop that calls `str::contains` once per searched
//! form of every secret, measured in the same run (goal at least 10x).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use managed_evidence::package::internal::searched_forms;
use managed_evidence::package::{GuardBuilder, OutputGuard, guard::GuardLimits};
use secrecy::SecretString;

const OUTPUT_BYTES: usize = 10 * 1024 * 1024;
const SECRETS: usize = 64;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A Prometheus `query_range` matrix answer as a tool sees it: labelled series with
/// timestamped string values.
fn output(rng: &mut Rng) -> String {
    let mut out = String::from(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
    let mut series = 0;
    while out.len() < OUTPUT_BYTES {
        if series > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            r#"{{"metric":{{"__name__":"tidb_server_cpu_seconds_total","cluster_id":"1379661944646413{:03}","instance":"tidb-{}.tidb-peer.tidb{:04}.svc:10080","job":"tidb"}},"values":["#,
            series % 1000,
            series % 64,
            series % 10000
        ));
        for p in 0..240 {
            if p > 0 {
                out.push(',');
            }
            let ts = 1_722_950_400 + p * 15;
            out.push_str(&format!(
                r#"[{ts},"{}.{:06}"]"#,
                rng.below(64),
                rng.below(1_000_000)
            ));
        }
        out.push_str("]}");
        series += 1;
    }
    out.push_str("]}}");
    out
}

fn secrets(rng: &mut Rng) -> Vec<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_./+=";
    (0..SECRETS)
        .map(|_| {
            (0..32)
                .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize] as char)
                .collect()
        })
        .collect()
}

fn guard(secrets: &[String]) -> OutputGuard {
    let mut b = GuardBuilder::new(GuardLimits {
        max_output_bytes: 16 * 1024 * 1024,
        ..GuardLimits::default()
    });
    for (i, s) in secrets.iter().enumerate() {
        b.add_secret(&format!("secret_{i}"), &SecretString::from(s.clone()))
            .unwrap();
    }
    b.build().unwrap()
}

/// CPU time this thread has run, from `/proc/thread-self/schedstat` (Linux); the machine
/// may be shared, so the summary reports CPU time next to wall time.
fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// Wall and CPU seconds per run of `f`.
fn timed(runs: u32, mut f: impl FnMut()) -> (f64, Option<f64>) {
    let cpu0 = thread_cpu();
    let t = Instant::now();
    for _ in 0..runs {
        f();
    }
    let wall = t.elapsed().as_secs_f64() / f64::from(runs);
    let cpu = cpu0
        .zip(thread_cpu())
        .map(|(a, b)| (b - a).as_secs_f64() / f64::from(runs));
    (wall, cpu)
}

fn naive(haystack: &str, needles: &[String]) -> bool {
    needles.iter().any(|n| haystack.contains(n.as_str()))
}

fn main() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let out = output(&mut rng);
    let secrets = secrets(&mut rng);
    let guard = guard(&secrets);
    let needles: Vec<String> = secrets.iter().flat_map(|s| searched_forms(s)).collect();
    assert!(!guard.scan_text(&out).is_blocked());
    assert!(!naive(&out, &needles));
    let mut leaked = out.clone();
    leaked.insert_str(OUTPUT_BYTES / 2, &secrets[SECRETS - 1]);
    assert!(guard.scan_text(&leaked).is_blocked());

    let mut c = Criterion::default().configure_from_args();
    {
        let mut group = c.benchmark_group("guard_10mb_64_secrets");
        group.throughput(Throughput::Bytes(out.len() as u64));
        group.sample_size(10);
        group.bench_function("output_guard", |b| {
            b.iter(|| black_box(guard.scan_text(black_box(&out))))
        });
        group.bench_function("naive_contains_per_needle", |b| {
            b.iter(|| black_box(naive(black_box(&out), &needles)))
        });
        group.finish();
    }
    c.final_summary();

    let (guard_wall, guard_cpu) = timed(20, || {
        black_box(guard.scan_text(black_box(&out)));
    });
    let (naive_wall, naive_cpu) = timed(3, || {
        black_box(naive(black_box(&out), &needles));
    });
    let gbps = |s: f64| out.len() as f64 / s / 1e9;
    println!(
        "guard summary: {} bytes, {} secrets, {} searched forms",
        out.len(),
        SECRETS,
        needles.len()
    );
    println!(
        "  wall: output guard {:.2} ms ({:.2} GB/s, goal >= 1); naive contains loop {:.1} ms; ratio {:.1}x (goal >= 10x)",
        guard_wall * 1e3,
        gbps(guard_wall),
        naive_wall * 1e3,
        naive_wall / guard_wall
    );
    if let (Some(g), Some(n)) = (guard_cpu, naive_cpu) {
        println!(
            "  cpu:  output guard {:.2} ms ({:.2} GB/s, goal >= 1); naive contains loop {:.1} ms; ratio {:.1}x (goal >= 10x)",
            g * 1e3,
            gbps(g),
            n * 1e3,
            n / g
        );
    }
}
