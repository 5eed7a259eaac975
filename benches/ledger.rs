//! What the turn ledger costs a call: one admission and its answer logged, in a turn of
//! `CALLS` calls, with the file ledger (a directory, `flock`) and with the Redis ledger
//! (a real `redis-server` on loopback with `appendonly yes`, `appendfsync always`,
//! started here), against the baseline of the same admission and record in one
//! in-process `Turn` (what an embedder that owns the turn pays). Prints the ratios.
//! Every admission rebuilds its turn from the entries logged so far, so a turn's later
//! calls cost more; each measured turn runs `CALLS` calls, as a diagnosis pass does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::Criterion;
use managed_evidence::materialize::{Admission, Call, Turn, TurnLimits};
use managed_evidence::result::{
    Details, Evidence, Operation, Origin, PackageId, Provider, QueryId, RequestDigest, ToolResult,
};
use managed_evidence::tool::internal::AdmissionBench;

/// The calls of one measured turn.
const CALLS: u32 = 8;

/// A turn of `CALLS` calls in the ledger `bench`, under a policy id of its own.
fn one_turn(bench: &AdmissionBench, turn: u64) {
    let policy = format!("pol-bench-{turn}");
    for q in 0..CALLS {
        let admitted = bench
            .admit_and_answer(&policy, &format!("q{q}"), CALLS)
            .unwrap();
        assert!(admitted);
    }
}

/// The same turn in one in-process `Turn`: admit, then record an `ok` answer.
fn in_memory_turn() {
    let package = PackageId::new("managed_auto_oncall_clinic").unwrap();
    let digest: RequestDigest = "0123456789abcdef0123456789abcdef".parse().unwrap();
    let mut turn = Turn::new(TurnLimits::new(CALLS));
    for q in 0..CALLS {
        let query = QueryId::new(format!("q{q}")).unwrap();
        let call = Call::single(
            package.clone(),
            Provider::Clinic,
            query.clone(),
            Some(digest),
        );
        let Admission::Admit(ticket) = turn.admit(&call).unwrap() else {
            panic!("refused")
        };
        let origin = Origin {
            package: package.clone(),
            provider: Provider::Clinic,
            operation: Operation::QueryRange,
            policy_source: None,
        };
        let result = ToolResult::new(Details::success(
            origin,
            query,
            digest,
            Evidence::no_data(None, 5),
        ))
        .unwrap();
        turn.record(ticket, result, Duration::ZERO).unwrap();
    }
    black_box(turn.admitted_calls());
}

/// Seconds per call of `runs` turns of `f`.
fn per_call(runs: u32, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..runs {
        f();
    }
    t.elapsed().as_secs_f64() / f64::from(runs * CALLS)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let file = AdmissionBench::open(dir.path().to_str().unwrap()).unwrap();
    let redis_server = evidence_test_support::RedisServer::start().unwrap();
    let redis = AdmissionBench::open(&redis_server.url()).unwrap();
    let next = AtomicU64::new(0);
    let fresh = || next.fetch_add(1, Ordering::Relaxed);

    let mut c = Criterion::default().configure_from_args();
    {
        let mut group = c.benchmark_group("ledger");
        group.bench_function("turn_of_8_in_memory", |b| b.iter(in_memory_turn));
        group.bench_function("turn_of_8_file_ledger", |b| {
            b.iter(|| one_turn(&file, fresh()))
        });
        group.bench_function("turn_of_8_redis_ledger", |b| {
            b.iter(|| one_turn(&redis, fresh()))
        });
        group.finish();
    }
    c.final_summary();

    // The summary: the three in turns, alternating, in one run.
    let (mut memory, mut on_file, mut on_redis) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        memory.push(per_call(200, in_memory_turn));
        on_file.push(per_call(50, || one_turn(&file, fresh())));
        on_redis.push(per_call(50, || one_turn(&redis, fresh())));
    }
    let median = |xs: &mut Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    let (memory, on_file, on_redis) = (
        median(&mut memory),
        median(&mut on_file),
        median(&mut on_redis),
    );
    println!(
        "ledger summary: per call (admission + answer, turns of {CALLS}): in-memory Turn {:.1} us; \
         file ledger {:.1} us ({:.0}x); Redis ledger on loopback {:.1} us ({:.0}x; {:.2}x the file ledger)",
        memory * 1e6,
        on_file * 1e6,
        on_file / memory,
        on_redis * 1e6,
        on_redis / memory,
        on_redis / on_file
    );
}
