//! A large deterministic fixture for answers of any size: TiKV thread-level CPU of a
//! big cluster, `tikv_thread_cpu_seconds_total` for `series` threads (50 per instance),
//! so that `rate(tikv_thread_cpu_seconds_total[1m])` over 60 minutes at 15 s answers
//! `series` x 241 points (about 7.5 KB of body per series: 37 MB for 5,000 series,
//! 150 MB for 20,000).
//!
//! Every value is a pure function of the series index and the sample time. One thread,
//! [`TikvThreads::top_index`], runs hot for one minute in the middle of the window at
//! [`TIKV_THREAD_PEAK`] cores; every other thread stays below 0.6 cores.

use std::io::Write as _;
use std::path::Path;

use crate::{FixtureQuery, TestSupportError};

/// 2026-08-10 08:00:00 UTC: start of the thread-CPU window.
pub const TIKV_THREADS_START: i64 = 1_786_348_800;
/// One hour later: end of the window.
pub const TIKV_THREADS_END: i64 = TIKV_THREADS_START + 3600;
/// The cluster of the thread-CPU fixture (label `cluster_id`).
pub const TIKV_THREADS_CLUSTER: &str = "SaaS01";
/// The hot thread's rate, in cores, for one minute.
pub const TIKV_THREAD_PEAK: f64 = 3.25;
/// The thread-level query of the issue: every thread's CPU rate over the hour.
pub const TIKV_THREAD_CPU_RATE: FixtureQuery = FixtureQuery {
    name: "tikv_thread_cpu_rate",
    expr: "rate(tikv_thread_cpu_seconds_total[1m])",
    start: TIKV_THREADS_START,
    end: TIKV_THREADS_END,
    step_seconds: 15,
};

/// Thread names of one TiKV instance (50 threads).
const THREADS: [&str; 10] = [
    "raftstore",
    "apply",
    "grpc-server",
    "sched-worker-pool",
    "unified-read-pool",
    "rocksdb:low",
    "rocksdb:high",
    "store-writer",
    "cdc",
    "backup-stream",
];
const THREADS_PER_INSTANCE: usize = 50;
/// Samples start five minutes before the window so that `rate(...[1m])` has data.
const LEAD: i64 = 300;
const STEP: i64 = 15;

/// The thread-CPU data set for `series` threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TikvThreads {
    /// Number of threads (series of the query).
    pub series: usize,
}

impl TikvThreads {
    /// The data set with `series` threads.
    pub fn new(series: usize) -> Self {
        TikvThreads { series }
    }

    /// The name keying the block cache (`tikv-threads-<series>`).
    pub fn name(self) -> String {
        format!("tikv-threads-{}", self.series)
    }

    /// The index of the hot thread.
    pub fn top_index(self) -> usize {
        self.series * 3 / 7
    }

    /// The `instance` label of thread `i`.
    pub fn instance(self, i: usize) -> String {
        format!("tikv-{:04}.saas01.svc:20180", i / THREADS_PER_INSTANCE)
    }

    /// The `name` label of thread `i`.
    pub fn thread_name(self, i: usize) -> String {
        let k = i % THREADS_PER_INSTANCE;
        format!("{}-{}", THREADS[k % THREADS.len()], k / THREADS.len())
    }

    /// The `tid` label of thread `i`.
    pub fn tid(self, i: usize) -> String {
        (10_000 + i).to_string()
    }

    /// Thread `i`'s CPU rate (cores) during the 15 s that end at `t`.
    fn rate(self, i: usize, t: i64) -> f64 {
        let middle = TIKV_THREADS_START + 1800;
        if i == self.top_index() && t > middle && t <= middle + 75 {
            return TIKV_THREAD_PEAK;
        }
        let base = ((i as u64).wrapping_mul(2_654_435_761) % 1000) as f64 / 2000.0;
        let wobble = (((t / STEP) as u64 + i as u64) % 5) as f64 / 100.0;
        0.05 + base + wobble
    }

    /// Writes the OpenMetrics text of the data set to `path`.
    pub(crate) fn write_openmetrics(self, path: &Path) -> Result<(), TestSupportError> {
        let file = std::fs::File::create(path)
            .map_err(|e| TestSupportError::io("writing the fixture", path, e))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        let io = |e| TestSupportError::io("writing the fixture", path, e);
        out.write_all(b"# HELP tikv_thread_cpu_seconds Total CPU time of each TiKV thread.\n")
            .map_err(io)?;
        out.write_all(b"# TYPE tikv_thread_cpu_seconds counter\n")
            .map_err(io)?;
        let first = TIKV_THREADS_START - LEAD;
        for i in 0..self.series {
            let labels = format!(
                "cluster_id=\"{TIKV_THREADS_CLUSTER}\",instance=\"{}\",job=\"tikv\",name=\"{}\",tid=\"{}\"",
                self.instance(i),
                self.thread_name(i),
                self.tid(i)
            );
            let mut total = 1000.0 + i as f64;
            let mut t = first;
            while t <= TIKV_THREADS_END {
                writeln!(
                    out,
                    "tikv_thread_cpu_seconds_total{{{labels}}} {total:.4} {t}"
                )
                .map_err(io)?;
                t += STEP;
                total += self.rate(i, t) * STEP as f64;
            }
        }
        out.write_all(b"# EOF\n").map_err(io)?;
        out.flush().map_err(io)
    }
}
