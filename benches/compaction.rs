//! Compaction of `query_range` bodies (261 x 241, 1,000 x 1,441 and 5,000 x 241, the
//! last one the size of a 5,000-thread TiKV answer) by the streaming parser (fed in
//! 64 KiB chunks through `ResponseMapper::response_evidence`, as an HTTP body arrives,
//! and in one piece through `ResponseMapper::evidence`), by the former typed
//! compaction of the whole body (`typed_evidence`), and parsing the same bytes into
//! `serde_json::Value`, with the ratios printed from the same run. Goal: compaction
//! takes at most 1.0x the time of the `Value` parse.
//!
//! The bench also writes the bodies to `<target dir>/bench-data/` and its own timings to
//! `<target dir>/bench-data/rust-timings.json`, so `benches/compaction_python.py` can
//! time Python's json module doing the same summary on the same files and print the
//! comparison.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use managed_evidence::connectors::internal::{
    Compaction, KeepLabels, RawResponse, Redactor, ResponseMapper,
};
use managed_evidence::result::{Evidence, Provider, evidence::EvidenceWindow};

/// The two body shapes: (series, points per series).
const SHAPES: [(usize, usize); 3] = [(261, 241), (1_000, 1_441), (5_000, 241)];
/// The chunk size the streamed variant is fed in (hyper hands over chunks of this order).
const CHUNK: usize = 64 << 10;
const START: i64 = 1_785_909_600;

/// A deterministic `query_range` success body shaped like real Prometheus output.
fn body(series: usize, points: usize) -> Vec<u8> {
    let mut out = String::with_capacity(series * points * 24 + series * 128);
    out.push_str(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15 ^ (series as u64 * 31 + points as u64);
    for i in 0..series {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            r#"{{"metric":{{"cluster_id":"SaaS02","instance":"node-{i:04}.saas02.svc:9100","job":"node"}},"values":["#
        ));
        let base = 20.0 + (i % 60) as f64;
        for k in 0..points {
            if k > 0 {
                out.push(',');
            }
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let t = START + 15 * k as i64;
            if (state >> 40).is_multiple_of(997) {
                out.push_str(&format!(r#"[{t},"NaN"]"#));
            } else {
                let jitter = ((state >> 33) % 10_000) as f64 / 1_000.0;
                let v = ((base + jitter) * 1e6).round() / 1e6;
                out.push_str(&format!(r#"[{t},"{v}"]"#));
            }
        }
        out.push_str("]}");
    }
    out.push_str("]}}");
    out.into_bytes()
}

fn data_dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is `<target dir>/tmp` for benches.
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent()
        .map_or(tmp.clone(), |p| p.to_path_buf())
        .join("bench-data")
}

/// The former path: the typed parser over the whole body.
fn compact(mapper: &ResponseMapper, compaction: &Compaction, raw: &RawResponse) -> Evidence {
    mapper.typed_evidence(raw, compaction, &KeepLabels).unwrap()
}

/// The streaming parser over a complete body in one piece.
fn stream_whole(mapper: &ResponseMapper, compaction: &Compaction, raw: &RawResponse) -> Evidence {
    mapper.evidence(raw, compaction, &KeepLabels).unwrap()
}

/// The streaming parser over an HTTP body arriving in `CHUNK`-byte chunks.
fn stream_chunked(
    runtime: &tokio::runtime::Runtime,
    mapper: &ResponseMapper,
    compaction: &Compaction,
    bytes: &Bytes,
) -> Evidence {
    let chunks: Vec<Result<Bytes, std::io::Error>> = (0..bytes.len())
        .step_by(CHUNK)
        .map(|at| Ok(bytes.slice(at..(at + CHUNK).min(bytes.len()))))
        .collect();
    let response = http::Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .map(reqwest::Response::from)
        .unwrap();
    runtime
        .block_on(mapper.response_evidence(response, usize::MAX, compaction, &KeepLabels))
        .unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn window(points: usize) -> EvidenceWindow {
    EvidenceWindow {
        start: START,
        end: START + 15 * (points as i64 - 1),
        step_seconds: 15,
    }
}

fn bench(c: &mut Criterion) {
    let mapper = ResponseMapper::new(Provider::Clinic, Redactor::default());
    let runtime = runtime();
    let mut group = c.benchmark_group("compaction");
    group.sample_size(10);
    for (series, points) in SHAPES {
        let bytes = body(series, points);
        let raw = RawResponse::new(200, Some("application/json".into()), bytes.clone());
        let shared = Bytes::from(bytes.clone());
        let compaction = Compaction::default().with_window(window(points));
        let id = format!("{series}x{points}");
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("streaming_64k_chunks", &id),
            &shared,
            |b, shared| {
                b.iter(|| stream_chunked(&runtime, &mapper, &compaction, black_box(shared)))
            },
        );
        group.bench_with_input(
            BenchmarkId::new("streaming_one_piece", &id),
            &raw,
            |b, raw| b.iter(|| stream_whole(&mapper, &compaction, black_box(raw))),
        );
        group.bench_with_input(BenchmarkId::new("typed_compaction", &id), &raw, |b, raw| {
            b.iter(|| compact(&mapper, &compaction, black_box(raw)))
        });
        group.bench_with_input(
            BenchmarkId::new("serde_json_value", &id),
            &bytes,
            |b, bytes| {
                b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(bytes)).unwrap())
            },
        );
    }
    group.finish();
}

/// The mean time of one run in the fastest of five batches of `iterations` runs (the
/// machine is shared; the fastest batch is the least disturbed one). The Python script
/// measures the same way.
fn mean(iterations: u32, mut f: impl FnMut()) -> Duration {
    f();
    (0..5)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..iterations {
                f();
            }
            started.elapsed() / iterations
        })
        .min()
        .unwrap_or_default()
}

/// Writes the bodies, times both paths with `Instant`, prints the ratio and writes
/// the timings for the Python comparison.
fn summary() {
    let dir = data_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let mapper = ResponseMapper::new(Provider::Clinic, Redactor::default());
    let runtime = runtime();
    let mut timings = Vec::new();
    println!("\ncompaction summary (mean run of the fastest of 5 batches, same bytes):");
    for (series, points) in SHAPES {
        let bytes = body(series, points);
        let name = format!("body_{series}x{points}.json");
        std::fs::write(dir.join(&name), &bytes).unwrap();
        let raw = RawResponse::new(200, Some("application/json".into()), bytes.clone());
        let compaction = Compaction::default().with_window(window(points));
        let shared = Bytes::from(bytes.clone());
        let n = if series > 500 { 3 } else { 20 };
        let chunked = mean(n, || {
            black_box(stream_chunked(
                &runtime,
                &mapper,
                &compaction,
                black_box(&shared),
            ));
        });
        let whole = mean(n, || {
            black_box(stream_whole(&mapper, &compaction, black_box(&raw)));
        });
        let typed = mean(n, || {
            black_box(compact(&mapper, &compaction, black_box(&raw)));
        });
        let value = mean(n, || {
            black_box(serde_json::from_slice::<serde_json::Value>(black_box(&bytes)).unwrap());
        });
        let evidence = compact(&mapper, &compaction, &raw);
        assert_eq!(
            stream_chunked(&runtime, &mapper, &compaction, &shared),
            evidence
        );
        assert_eq!(stream_whole(&mapper, &compaction, &raw), evidence);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let ratio = chunked.as_secs_f64() / value.as_secs_f64();
        let mb = bytes.len() as f64 / 1e6;
        println!(
            "  {series}x{points} ({mb:.1} MB): streaming (64 KiB chunks) {:.2} ms ({:.0} MB/s), streaming (one piece) {:.2} ms, typed compaction {:.2} ms, serde_json::Value parse {:.2} ms",
            ms(chunked),
            mb / chunked.as_secs_f64(),
            ms(whole),
            ms(typed),
            ms(value),
        );
        println!(
            "    ratios: streaming / typed {:.2}x, streaming / Value {ratio:.2}x (goal <= 1.0x) {}, typed / Value {:.2}x",
            chunked.as_secs_f64() / typed.as_secs_f64(),
            if ratio <= 1.0 { "met" } else { "NOT MET" },
            typed.as_secs_f64() / value.as_secs_f64(),
        );
        println!(
            "    series {}, points {}, top peak {:?}, kept {}, truncated {}",
            evidence.series_count,
            evidence.point_count,
            evidence.top_peak(),
            evidence.series.len(),
            evidence.truncated
        );
        timings.push(format!(
            r#"{{"file":"{name}","streaming_ms":{},"typed_ms":{},"value_ms":{},"series":{},"points":{},"top_peak":{}}}"#,
            chunked.as_secs_f64() * 1e3,
            typed.as_secs_f64() * 1e3,
            value.as_secs_f64() * 1e3,
            evidence.series_count,
            evidence.point_count,
            evidence.top_peak().unwrap_or(f64::NAN)
        ));
    }
    let path = dir.join("rust-timings.json");
    std::fs::write(&path, format!("[{}]\n", timings.join(","))).unwrap();
    println!("  bodies and timings written to {}", dir.display());
    println!(
        "  compare with python3: python3 benches/compaction_python.py {}",
        dir.display()
    );
}

criterion_group!(benches, bench);

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not and only smoke-runs
    // the criterion groups.
    if std::env::args().any(|a| a == "--bench") {
        summary();
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
