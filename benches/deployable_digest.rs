//! Loading a deployable package whose entrypoint binary is as large as a packaged tool
//! binary (8 MiB, the goal's bound), as a running tool does (`Package::load_running`:
//! the binary hashed with BLAKE3 through a memory map on every core, the other files,
//! normalization, the framing) and as any other reader does (`Package::load`: the binary
//! read in 1 MiB blocks), against a plain SHA-256 of the same binary already in memory
//! (digest framing v1's content hash), in the same run; prints the ratios and speeds,
//! and whether this CPU has the SHA extensions (`sha2` takes them through its runtime
//! detection, so the baseline is SHA-256 at its fastest here).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use criterion::{Criterion, Throughput};
use managed_evidence::package::Package;
use rand::RngCore as _;
use sha2::{Digest as _, Sha256};

const BINARY_BYTES: usize = 8 << 20;

#[cfg(target_arch = "x86_64")]
fn sha_extensions() -> bool {
    std::arch::is_x86_feature_detected!("sha")
}

#[cfg(not(target_arch = "x86_64"))]
fn sha_extensions() -> bool {
    false
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packages/managed_auto_oncall_clinic/v3");
    let mut binary = vec![0u8; BINARY_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut binary);
    let bin = dir.path().join("clinic-tool");
    std::fs::write(&bin, &binary).unwrap();
    let out = dir.path().join("deployable");
    managed_evidence::tool::build_deployable(&source, &bin, &out).unwrap();
    let loaded = Package::load(&out).unwrap();
    let entry = out.join(&loaded.manifest().entrypoint);
    println!(
        "deployable digest: {} MiB binary; SHA extensions on this CPU: {}",
        BINARY_BYTES >> 20,
        sha_extensions()
    );

    let mut c = Criterion::default().configure_from_args();
    {
        let mut group = c.benchmark_group("deployable_digest");
        group.throughput(Throughput::Bytes(BINARY_BYTES as u64));
        group.bench_function("package_load_running", |b| {
            b.iter(|| {
                black_box(
                    Package::load_running(black_box(&out), &entry)
                        .unwrap()
                        .digest(),
                )
            })
        });
        group.bench_function("package_load_streamed", |b| {
            b.iter(|| black_box(Package::load(black_box(&out)).unwrap().digest()))
        });
        group.bench_function("plain_sha256_in_memory", |b| {
            b.iter(|| black_box(Sha256::digest(black_box(&binary))))
        });
        group.finish();
    }
    c.final_summary();

    let runs = 50;
    let t = Instant::now();
    for _ in 0..runs {
        assert_eq!(
            Package::load_running(&out, &entry).unwrap().digest(),
            loaded.digest()
        );
    }
    let running_s = t.elapsed().as_secs_f64() / f64::from(runs);
    let t = Instant::now();
    for _ in 0..runs {
        assert_eq!(Package::load(&out).unwrap().digest(), loaded.digest());
    }
    let load_s = t.elapsed().as_secs_f64() / f64::from(runs);
    let t = Instant::now();
    for _ in 0..runs {
        black_box(Sha256::digest(black_box(&binary)));
    }
    let sha_s = t.elapsed().as_secs_f64() / f64::from(runs);
    let gbps = |s: f64| BINARY_BYTES as f64 / s / 1e9;
    println!(
        "deployable digest summary: Package::load_running {:.2} ms ({:.2} GB/s of binary, {:.2}x the baseline's time); Package::load {:.2} ms ({:.2} GB/s, {:.2}x); plain SHA-256 in memory {:.2} ms ({:.2} GB/s)",
        running_s * 1e3,
        gbps(running_s),
        running_s / sha_s,
        load_s * 1e3,
        gbps(load_s),
        load_s / sha_s,
        sha_s * 1e3,
        gbps(sha_s),
    );
}
