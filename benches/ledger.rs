//! What the turn ledger costs a call: one admission and its answer logged, in a turn of
//! `CALLS` calls, with the file ledger (a directory, `flock`) and with the Redis ledger
//! (a real `redis-server` on loopback with `appendonly yes`, `appendfsync always`,
//! started here), against the baseline of the same admission and record in one
//! in-process `Turn` (what an embedder that owns the turn pays). Prints the ratios.
//! Every admission rebuilds its turn from the entries logged so far, so a turn's later
//! calls cost more; each measured turn runs `CALLS` calls, as a diagnosis pass does.
//!
//! Then what a turn's refusals cost its later admissions, in both stores: a refused call
//! (an unchanged retry) and a new question admitted and answered, in a turn that refused
//! 10 calls against one that refused `LEDGER_BENCH_REFUSALS` (default 10,000), the two
//! alternating in one run with the same admitted calls. The ratio is the goal's (at most
//! 1.2x): a turn's stored state is bounded by its admitted calls, not by its refusals.
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

/// The refusals of the turn with many, from `LEDGER_BENCH_REFUSALS`.
fn many_refusals() -> u32 {
    std::env::var("LEDGER_BENCH_REFUSALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

/// The calls a refusal turn allows: its questions never reach the limit.
const REFUSAL_TURN_CALLS: u32 = 1_000;

/// A new turn `policy` of `bench` whose first question failed (`query_rejected`), then
/// was retried unchanged `refusals` times, each refused.
fn refused_turn(bench: &AdmissionBench, policy: &str, refusals: u32) {
    let first = bench.call(policy, "q0", REFUSAL_TURN_CALLS, true).unwrap();
    assert_eq!(first, None);
    for _ in 0..refusals {
        refuse(bench, policy);
    }
}

/// One unchanged retry of the turn's failed question, refused.
fn refuse(bench: &AdmissionBench, policy: &str) {
    let code = bench.call(policy, "q0", REFUSAL_TURN_CALLS, true).unwrap();
    assert_eq!(code.as_deref(), Some("unchanged_retry"));
}

/// Seconds of one refusal in the turn `many` (which keeps its refusals) and in a turn of
/// 10 refusals (a new one every 10 measured refusals), alternating, `n` of each.
fn refusal_pair(bench: &AdmissionBench, many: &str, fresh: &dyn Fn() -> u64, n: u32) -> (f64, f64) {
    let (mut few_t, mut many_t) = (Duration::ZERO, Duration::ZERO);
    let mut few = String::new();
    for i in 0..n {
        if i % 10 == 0 {
            few = format!("pol-bench-few-{}", fresh());
            refused_turn(bench, &few, 10);
        }
        let t = Instant::now();
        refuse(bench, &few);
        few_t += t.elapsed();
        let t = Instant::now();
        refuse(bench, many);
        many_t += t.elapsed();
    }
    (
        few_t.as_secs_f64() / f64::from(n),
        many_t.as_secs_f64() / f64::from(n),
    )
}

/// Seconds of a new question admitted and answered in a new turn of 10 refusals and in
/// a new turn of `refusals`, alternating, `CALLS` questions in each.
fn admission_pair(bench: &AdmissionBench, refusals: u32, fresh: &dyn Fn() -> u64) -> (f64, f64) {
    let few = format!("pol-bench-few-{}", fresh());
    let many = format!("pol-bench-many-{}", fresh());
    refused_turn(bench, &few, 10);
    refused_turn(bench, &many, refusals);
    let (mut few_t, mut many_t) = (Duration::ZERO, Duration::ZERO);
    for q in 1..=CALLS {
        let query = format!("q{q}");
        let t = Instant::now();
        assert_eq!(
            bench.call(&few, &query, REFUSAL_TURN_CALLS, false).unwrap(),
            None
        );
        few_t += t.elapsed();
        let t = Instant::now();
        assert_eq!(
            bench
                .call(&many, &query, REFUSAL_TURN_CALLS, false)
                .unwrap(),
            None
        );
        many_t += t.elapsed();
    }
    (
        few_t.as_secs_f64() / f64::from(CALLS),
        many_t.as_secs_f64() / f64::from(CALLS),
    )
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
    let refusals = many_refusals();
    let many_file = format!("pol-bench-many-{}", fresh());
    let many_redis = format!("pol-bench-many-{}", fresh());
    refused_turn(&file, &many_file, refusals);
    refused_turn(&redis, &many_redis, refusals);
    {
        let mut group = c.benchmark_group("ledger_refusals");
        for (store, bench, many) in [("file", &file, &many_file), ("redis", &redis, &many_redis)] {
            group.bench_function(format!("refusal_after_10_{store}"), |b| {
                b.iter_custom(|iters| {
                    let mut took = Duration::ZERO;
                    let mut few = String::new();
                    for i in 0..iters {
                        if i % 10 == 0 {
                            few = format!("pol-bench-few-{}", fresh());
                            refused_turn(bench, &few, 10);
                        }
                        let t = Instant::now();
                        refuse(bench, &few);
                        took += t.elapsed();
                    }
                    took
                })
            });
            group.bench_function(format!("refusal_after_{refusals}_{store}"), |b| {
                b.iter(|| refuse(bench, many))
            });
        }
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

    // The refusals' summary: each store's pairs alternating, medians of 5 rounds.
    let fresh: &dyn Fn() -> u64 = &fresh;
    for (store, bench, many, rounds, per_round) in [
        ("file ledger", &file, &many_file, 5, 400),
        ("Redis ledger", &redis, &many_redis, 5, 100),
    ] {
        let (mut few_r, mut many_r, mut few_a, mut many_a) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let (f, m) = refusal_pair(bench, many, fresh, per_round);
            few_r.push(f);
            many_r.push(m);
            let (f, m) = admission_pair(bench, refusals, fresh);
            few_a.push(f);
            many_a.push(m);
        }
        let (few_r, many_r, few_a, many_a) = (
            median(&mut few_r),
            median(&mut many_r),
            median(&mut few_a),
            median(&mut many_a),
        );
        println!(
            "ledger refusals summary, {store}: a refusal after 10 refusals {:.1} us, after {refusals} \
             {:.1} us ({:.2}x); a new question admitted and answered after 10 refusals {:.1} us, \
             after {refusals} {:.1} us ({:.2}x)",
            few_r * 1e6,
            many_r * 1e6,
            many_r / few_r,
            few_a * 1e6,
            many_a * 1e6,
            many_a / few_a,
        );
    }
}
