//! Package digest of the Clinic v3 package against a plain SHA-256 of the same bytes
//! (every file's content plus the manifest), measured in the same run; prints the ratio.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use criterion::{Criterion, Throughput};
use managed_evidence::package::{Manifest, Package, PackageFile};
use sha2::{Digest as _, Sha256};

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("packages/managed_auto_oncall_clinic/v3");
    let loaded = Package::load(&dir).unwrap();
    let manifest_json = std::fs::read(dir.join("manifest.json")).unwrap();
    let manifest = Manifest::from_json(std::str::from_utf8(&manifest_json).unwrap()).unwrap();
    let files: Vec<PackageFile> = loaded.files().to_vec();
    let mut bytes = manifest_json.clone();
    for f in &files {
        bytes.extend_from_slice(f.contents().unwrap());
    }
    assert_eq!(
        Package::new(&manifest, files.clone()).unwrap().digest(),
        loaded.digest()
    );

    let mut c = Criterion::default().configure_from_args();
    {
        let mut group = c.benchmark_group("package_digest");
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function("package_digest_with_normalization", |b| {
            b.iter(|| {
                black_box(
                    Package::new(black_box(&manifest), files.clone())
                        .unwrap()
                        .digest(),
                )
            })
        });
        group.bench_function("plain_sha256_same_bytes", |b| {
            b.iter(|| black_box(Sha256::digest(black_box(&bytes))))
        });
        group.finish();
    }
    c.final_summary();

    let runs = 2000;
    let t = Instant::now();
    for _ in 0..runs {
        black_box(
            Package::new(black_box(&manifest), files.clone())
                .unwrap()
                .digest(),
        );
    }
    let digest_s = t.elapsed().as_secs_f64() / f64::from(runs);
    let t = Instant::now();
    for _ in 0..runs {
        black_box(Sha256::digest(black_box(&bytes)));
    }
    let sha_s = t.elapsed().as_secs_f64() / f64::from(runs);
    println!(
        "digest summary: {} bytes (manifest and {} files); package digest {:.1} us; plain SHA-256 {:.1} us; ratio {:.1}x the baseline's time",
        bytes.len(),
        files.len(),
        digest_s * 1e6,
        sha_s * 1e6,
        digest_s / sha_s
    );
}
