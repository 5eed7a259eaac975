//! Deterministic OpenMetrics fixtures that reproduce the shapes of the seed incidents.
//!
//! Every value is a pure function of the fixture, the series index and the sample time,
//! so the same fixture always produces the same bytes (and so the same blocks).

use std::fmt::Write as _;

/// 2026-07-21 21:50:00 UTC+8 (13:50:00 UTC): start of the APID-29213 window.
pub const APID_29213_START: i64 = 1_784_641_800;
/// 2026-07-21 22:05:00 UTC+8 (14:05:00 UTC): end of the APID-29213 window.
pub const APID_29213_END: i64 = 1_784_642_700;
/// 2026-08-05 14:00:00 UTC+8 (06:00:00 UTC): start of the 60-minute ST-2865 window.
pub const ST_2865_START: i64 = 1_785_909_600;
/// 2026-08-05 15:00:00 UTC+8 (07:00:00 UTC): end of the 60-minute ST-2865 window.
pub const ST_2865_END: i64 = 1_785_913_200;

/// The cluster of the APID-29213 TiDB CPU incident (label `cluster_id`).
pub const CPU_CLUSTER: &str = "SaaS01";
/// The cluster of the ST-2865 memory incident (label `cluster_id`).
pub const MEMORY_CLUSTER: &str = "SaaS02";
/// Another cluster with higher values on the same metrics, so scope tests can prove it
/// is never read.
pub const OTHER_CLUSTER: &str = "SaaS99";

/// Name of the Grafana session cookie the Grafana test front checks.
pub const GRAFANA_SESSION_COOKIE_NAME: &str = "grafana_session";
/// The session cookie value the Grafana test front accepts by default. The `Main`
/// fixture also plants it as the `session_id` label of `tidb_server_session_info`, so
/// the Wetech output guard has a real secret to catch in real provider output.
pub const GRAFANA_SESSION_COOKIE_VALUE: &str = "7f3c9a1e5b2d48c6a0e4f1b39d8c2a57";

/// The Starter / Essential cluster of the tier fixtures (`Main` only): one shared
/// cluster whose `tidb_tenant_request_units` series carry a `keyspace_id` per tenant.
pub const SERVERLESS_CLUSTER: &str = "SaaS03";
/// The ticket's keyspace on [`SERVERLESS_CLUSTER`].
pub const TICKET_KEYSPACE: &str = "ks-1001";
/// Another tenant's keyspace on [`SERVERLESS_CLUSTER`], with higher values, so tier
/// scope tests can prove it is never read.
pub const OTHER_KEYSPACE: &str = "ks-1002";
/// The Premium cluster of the tier fixtures (`Main` only), whose
/// `tidb_tenant_request_units` series carry a `parent_id`.
pub const PREMIUM_CLUSTER: &str = "SaaS04";
/// The ticket's parent on [`PREMIUM_CLUSTER`].
pub const TICKET_PARENT: &str = "p-2001";
/// Another parent on [`PREMIUM_CLUSTER`], with higher values.
pub const OTHER_PARENT: &str = "p-2002";

/// Allowed difference between an expected fixture figure and a computed one.
pub const FIGURE_TOLERANCE: f64 = 0.005;

/// Which data set a Prometheus server holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fixture {
    /// The Clinic and Grafana data set: the APID-29213 and ST-2865 shapes on host:port
    /// instances (`tidb-07.saas01.svc:10080`, `node-130.saas02.svc:9100`), the other
    /// cluster, and the Grafana session-cookie canary series.
    Main,
    /// The Manus target `vida`: the same figures as `Main` on IP:port instances
    /// `10.21.x.y:port`, memory series with an extra `host_ip` label holding a bare IP,
    /// and `tidb_server_info` (see [`VIDA_HOST_NAMES`]) carrying host names in other
    /// labels.
    Vida,
    /// The Manus target `monica`: different figures (24 TiDB series, 17.36 cores; 96
    /// memory series, 64.25 %) on IP:port instances `10.42.x.y:port`.
    Monica,
}

/// The shape a fixture gives an expression: how many series and the top peak.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesShape {
    /// Number of series the query returns.
    pub series: usize,
    /// The highest value over all series and points.
    pub peak: f64,
}

/// A documented query over a fixture: expression, window and step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixtureQuery {
    /// Short name used in test output.
    pub name: &'static str,
    /// The PromQL expression.
    pub expr: &'static str,
    /// Start, Unix seconds.
    pub start: i64,
    /// End, Unix seconds.
    pub end: i64,
    /// Step, seconds.
    pub step_seconds: u64,
}

impl FixtureQuery {
    /// Number of points per series the window and step give (`(end - start) / step + 1`).
    pub fn points(&self) -> u64 {
        let span = u64::try_from(self.end - self.start).unwrap_or(0);
        span / self.step_seconds.max(1) + 1
    }
}

/// APID-29213: per-instance TiDB CPU cores of `SaaS01`. `Main` and `Vida`: 56 series,
/// top-instance peak 22.84 cores; `Monica`: 24 series, 17.36.
pub const TIDB_CPU: FixtureQuery = FixtureQuery {
    name: "tidb_cpu",
    expr: r#"sum by (instance) (rate(process_cpu_seconds_total{cluster_id="SaaS01",job="tidb"}[1m]))"#,
    start: APID_29213_START,
    end: APID_29213_END,
    step_seconds: 15,
};

/// ST-2865: memory used percent of `SaaS02` over 60 minutes (241 points at 15 s).
/// `Main` and `Vida`: 261 series, peak 78.64 %; `Monica`: 96 series, 64.25 %.
pub const MEMORY_USED_PERCENT: FixtureQuery = FixtureQuery {
    name: "memory_used_percent",
    expr: r#"100 * (1 - node_memory_MemAvailable_bytes{cluster_id="SaaS02",job="node"} / node_memory_MemTotal_bytes{cluster_id="SaaS02",job="node"})"#,
    start: ST_2865_START,
    end: ST_2865_END,
    step_seconds: 15,
};

/// ST-2865's TiKV-specific query: the metric exists only for the other cluster, so for
/// `SaaS02` it returns no series (HTTP 200, `"result":[]`): `no_data`, never zero.
pub const TIKV_NO_DATA: FixtureQuery = FixtureQuery {
    name: "tikv_no_data",
    expr: r#"sum by (instance) (tikv_engine_size_bytes{cluster_id="SaaS02",job="tikv"})"#,
    start: ST_2865_START,
    end: ST_2865_END,
    step_seconds: 15,
};

/// Many-to-many matching: both sides hold 261 series that share `cluster_id`, so the
/// real server answers HTTP 422 `execution` "found duplicate series for the match group
/// {cluster_id="SaaS02"} ... many-to-many matching not allowed". Its correction is
/// [`MEMORY_USED_PERCENT`].
pub const MEMORY_MANY_TO_MANY: FixtureQuery = FixtureQuery {
    name: "memory_many_to_many",
    expr: r#"node_memory_MemAvailable_bytes{cluster_id="SaaS02",job="node"} / on(cluster_id) node_memory_MemTotal_bytes{cluster_id="SaaS02",job="node"}"#,
    start: ST_2865_START,
    end: ST_2865_END,
    step_seconds: 15,
};

/// Many-to-many matching on the TiDB window: CPU rate divided `on(cluster_id)` by the
/// per-instance `tidb_server_maxprocs` gauge (56 series each side): HTTP 422. Its
/// correction is [`TIDB_CPU_SATURATION`].
pub const TIDB_MANY_TO_MANY: FixtureQuery = FixtureQuery {
    name: "tidb_many_to_many",
    expr: r#"rate(process_cpu_seconds_total{cluster_id="SaaS01",job="tidb"}[1m]) / on(cluster_id) tidb_server_maxprocs{cluster_id="SaaS01",job="tidb"}"#,
    start: APID_29213_START,
    end: APID_29213_END,
    step_seconds: 15,
};

/// The corrected form of [`TIDB_MANY_TO_MANY`]: matched `on(instance)`, one-to-one.
/// Every `tidb_server_maxprocs` is 32, so the peak is 22.84 / 32 = 0.71375 on `Main`.
pub const TIDB_CPU_SATURATION: FixtureQuery = FixtureQuery {
    name: "tidb_cpu_saturation",
    expr: r#"rate(process_cpu_seconds_total{cluster_id="SaaS01",job="tidb"}[1m]) / on(instance) tidb_server_maxprocs{cluster_id="SaaS01",job="tidb"}"#,
    start: APID_29213_START,
    end: APID_29213_END,
    step_seconds: 15,
};

/// A PromQL parse error (unclosed parenthesis): HTTP 400 `bad_data`, text starting
/// with the position and `parse error`.
pub const PARSE_ERROR: FixtureQuery = FixtureQuery {
    name: "parse_error",
    expr: r#"sum by (instance) (rate(process_cpu_seconds_total{cluster_id="SaaS01",job="tidb"}[1m])"#,
    start: APID_29213_START,
    end: APID_29213_END,
    step_seconds: 15,
};

/// The TiDB CPU query without a cluster matcher, per cluster and instance: it reads the
/// other cluster too (56 + 8 series on `Main`, peak 31.5 cores from `SaaS99`). Only for
/// proving that the other cluster's data exists; a scoped query never sees it.
pub const UNSCOPED_TIDB_CPU: FixtureQuery = FixtureQuery {
    name: "unscoped_tidb_cpu",
    expr: r#"sum by (cluster_id, instance) (rate(process_cpu_seconds_total{job="tidb"}[1m]))"#,
    start: APID_29213_START,
    end: APID_29213_END,
    step_seconds: 15,
};

/// The session-cookie canary (`Main` only): one series whose `session_id` label is
/// [`GRAFANA_SESSION_COOKIE_VALUE`].
pub const SESSION_CANARY: FixtureQuery = FixtureQuery {
    name: "session_canary",
    expr: r#"tidb_server_session_info{cluster_id="SaaS01",job="tidb"}"#,
    start: APID_29213_START,
    end: APID_29213_END,
    step_seconds: 15,
};

/// Request units of the ticket's keyspace on the serverless cluster (`Main` only):
/// [`TICKET_KEYSPACE_UNITS`]; the cluster's other keyspace holds
/// [`OTHER_KEYSPACE_UNITS`].
pub const KEYSPACE_REQUEST_UNITS: FixtureQuery = FixtureQuery {
    name: "keyspace_request_units",
    expr: r#"tidb_tenant_request_units{cluster_id="SaaS03",job="tidb",keyspace_id="ks-1001"}"#,
    start: APID_29213_START,
    end: APID_29213_END,
    step_seconds: 15,
};

/// Request units under the ticket's parent on the Premium cluster (`Main` only):
/// [`TICKET_PARENT_UNITS`]; the cluster's other parent holds [`OTHER_PARENT_UNITS`].
pub const PARENT_REQUEST_UNITS: FixtureQuery = FixtureQuery {
    name: "parent_request_units",
    expr: r#"tidb_tenant_request_units{cluster_id="SaaS04",job="tidb",parent_id="p-2001"}"#,
    start: APID_29213_START,
    end: APID_29213_END,
    step_seconds: 15,
};

/// `tidb_tenant_request_units` of [`TICKET_KEYSPACE`]: 3 series, 100, 110 and 120.
pub const TICKET_KEYSPACE_UNITS: SeriesShape = SeriesShape {
    series: 3,
    peak: 120.0,
};
/// `tidb_tenant_request_units` of [`OTHER_KEYSPACE`]: 2 series, 500 and 510.
pub const OTHER_KEYSPACE_UNITS: SeriesShape = SeriesShape {
    series: 2,
    peak: 510.0,
};
/// `tidb_tenant_request_units` of [`TICKET_PARENT`]: 4 series, 40 to 55 by 5.
pub const TICKET_PARENT_UNITS: SeriesShape = SeriesShape {
    series: 4,
    peak: 55.0,
};
/// `tidb_tenant_request_units` of [`OTHER_PARENT`]: 2 series, 900 and 910.
pub const OTHER_PARENT_UNITS: SeriesShape = SeriesShape {
    series: 2,
    peak: 910.0,
};

/// One hour at 15 s ending where the APID-29213 window ends: the window of the
/// side-by-side queries ([`TIDB_CPU_RATE_HOUR`], [`TIDB_CPU_BY_INSTANCE_HOUR`],
/// [`TIDB_MEMORY_WITH_NAN`]), 241 points per series.
pub const SIDE_BY_SIDE_START: i64 = APID_29213_END - 3600;

/// Per-series TiDB CPU rate of `SaaS01` over [`SIDE_BY_SIDE_START`]..[`APID_29213_END`]:
/// 56 series whose `cluster_id` and `job` labels are the same in every series (`rate`
/// drops `__name__`), peak 22.84 cores.
pub const TIDB_CPU_RATE_HOUR: FixtureQuery = FixtureQuery {
    name: "tidb_cpu_rate_hour",
    expr: r#"rate(process_cpu_seconds_total{cluster_id="SaaS01",job="tidb"}[1m])"#,
    start: SIDE_BY_SIDE_START,
    end: APID_29213_END,
    step_seconds: 15,
};

/// [`TIDB_CPU`] over the hour of [`SIDE_BY_SIDE_START`]: 56 series, peak 22.84 cores.
pub const TIDB_CPU_BY_INSTANCE_HOUR: FixtureQuery = FixtureQuery {
    name: "tidb_cpu_by_instance_hour",
    expr: r#"sum by (instance) (rate(process_cpu_seconds_total{cluster_id="SaaS01",job="tidb"}[1m]))"#,
    start: SIDE_BY_SIDE_START,
    end: APID_29213_END,
    step_seconds: 15,
};

/// A memory gauge with `NaN` samples (`Main` only): `process_resident_memory_bytes` of
/// the 12 TiDB instances `tidb-00`..`tidb-11` of `SaaS01`. The lowest series,
/// `tidb-00`, holds [`TIDB_MEMORY_NAN_SAMPLES`] `NaN` samples, so it ranks out of any
/// top k below 12 while its `NaN`s still exist. The top series is `tidb-11` at
/// [`TIDB_MEMORY_PEAK_BYTES`]; the other cluster has 4 larger series.
pub const TIDB_MEMORY_WITH_NAN: FixtureQuery = FixtureQuery {
    name: "tidb_memory_with_nan",
    expr: r#"process_resident_memory_bytes{cluster_id="SaaS01",job="tidb"}"#,
    start: SIDE_BY_SIDE_START,
    end: APID_29213_END,
    step_seconds: 15,
};

/// Series of [`TIDB_MEMORY_WITH_NAN`] in `SaaS01`.
pub const TIDB_MEMORY_SERIES: usize = 12;

/// `NaN` samples of `tidb-00` in [`TIDB_MEMORY_WITH_NAN`]'s window (a 5-minute gap
/// written as `NaN`, 20 samples at 15 s).
pub const TIDB_MEMORY_NAN_SAMPLES: u64 = 20;

/// The peak of [`TIDB_MEMORY_WITH_NAN`]: `tidb-11` at 8.5 GiB.
pub const TIDB_MEMORY_PEAK_BYTES: u64 = 17 << 29;

/// The queries of the token benchmark and the side-by-side comparison, each with its
/// unit label and the cluster its policy binds: the issue's three one-hour queries
/// (per-series CPU rate, the memory gauge with `NaN` samples, CPU by instance) and the
/// two seed queries (APID-29213, ST-2865).
pub const SIDE_BY_SIDE_QUERIES: [(FixtureQuery, &str, &str); 5] = [
    (TIDB_CPU_RATE_HOUR, "cores", CPU_CLUSTER),
    (TIDB_MEMORY_WITH_NAN, "bytes", CPU_CLUSTER),
    (TIDB_CPU_BY_INSTANCE_HOUR, "cores", CPU_CLUSTER),
    (TIDB_CPU, "cores", CPU_CLUSTER),
    (MEMORY_USED_PERCENT, "%", MEMORY_CLUSTER),
];

/// TiDB series of the other cluster (`SaaS99`), in every fixture.
pub const OTHER_CLUSTER_TIDB: SeriesShape = SeriesShape {
    series: 8,
    peak: 31.5,
};
/// Memory series of the other cluster (`SaaS99`), in every fixture.
pub const OTHER_CLUSTER_MEMORY: SeriesShape = SeriesShape {
    series: 10,
    peak: 95.5,
};

/// Value of every `tidb_server_maxprocs` series.
pub const TIDB_MAXPROCS: f64 = 32.0;

impl Fixture {
    /// Every fixture.
    pub const ALL: [Fixture; 3] = [Fixture::Main, Fixture::Vida, Fixture::Monica];

    /// A short lower-case name (`main`, `vida`, `monica`).
    pub fn name(self) -> &'static str {
        match self {
            Fixture::Main => "main",
            Fixture::Vida => "vida",
            Fixture::Monica => "monica",
        }
    }

    /// What [`TIDB_CPU`] returns on this fixture.
    pub fn tidb_cpu(self) -> SeriesShape {
        match self {
            Fixture::Main | Fixture::Vida => SeriesShape {
                series: 56,
                peak: 22.84,
            },
            Fixture::Monica => SeriesShape {
                series: 24,
                peak: 17.36,
            },
        }
    }

    /// What [`MEMORY_USED_PERCENT`] returns on this fixture.
    pub fn memory(self) -> SeriesShape {
        match self {
            Fixture::Main | Fixture::Vida => SeriesShape {
                series: 261,
                peak: 78.64,
            },
            Fixture::Monica => SeriesShape {
                series: 96,
                peak: 64.25,
            },
        }
    }

    /// The `instance` label of TiDB series `i` of the incident cluster.
    pub fn tidb_instance(self, i: usize) -> String {
        match self {
            Fixture::Main => format!("tidb-{i:02}.saas01.svc:10080"),
            Fixture::Vida => format!("10.21.1.{}:10080", 10 + i),
            Fixture::Monica => format!("10.42.1.{}:10080", 10 + i),
        }
    }

    /// The host of memory series `i` of the incident cluster (an IP for the Manus
    /// targets, a host name for `Main`).
    pub fn memory_host(self, i: usize) -> String {
        match self {
            Fixture::Main => format!("node-{i:03}.saas02.svc"),
            Fixture::Vida => format!("10.21.{}.{}", 2 + i / 200, 10 + i % 200),
            Fixture::Monica => format!("10.42.{}.{}", 2 + i / 200, 10 + i % 200),
        }
    }

    /// The index of the TiDB series that holds the peak.
    pub fn tidb_top_index(self) -> usize {
        7
    }

    /// The index of the memory series that holds the peak.
    pub fn memory_top_index(self) -> usize {
        self.memory().series / 2
    }

    /// The complete OpenMetrics text of this fixture, ending in `# EOF`.
    pub fn openmetrics(self) -> String {
        let mut out = String::with_capacity(16 << 20);
        let cpu = self.tidb_cpu();
        let memory = self.memory();
        let other_cpu = CpuSet {
            cluster: OTHER_CLUSTER,
            shape: OTHER_CLUSTER_TIDB,
            top: 3,
            instance: &|i| format!("tidb-{i}.saas99.svc:10080"),
        };
        let incident_cpu = CpuSet {
            cluster: CPU_CLUSTER,
            shape: cpu,
            top: self.tidb_top_index(),
            instance: &|i| self.tidb_instance(i),
        };
        let manus = matches!(self, Fixture::Vida | Fixture::Monica);
        let other_memory = MemorySet {
            cluster: OTHER_CLUSTER,
            shape: OTHER_CLUSTER_MEMORY,
            top: 5,
            host: &|i| format!("node-{i}.saas99.svc"),
            host_ip_label: false,
        };
        let incident_memory = MemorySet {
            cluster: MEMORY_CLUSTER,
            shape: memory,
            top: self.memory_top_index(),
            host: &|i| self.memory_host(i),
            host_ip_label: manus,
        };

        out.push_str(
            "# HELP process_cpu_seconds Total user and system CPU time spent in seconds.\n",
        );
        out.push_str("# TYPE process_cpu_seconds counter\n");
        for set in [&incident_cpu, &other_cpu] {
            write_cpu(&mut out, set);
        }

        out.push_str("# HELP tidb_server_maxprocs The value of GOMAXPROCS.\n");
        out.push_str("# TYPE tidb_server_maxprocs gauge\n");
        for i in 0..cpu.series {
            let labels = [
                ("cluster_id", CPU_CLUSTER.to_owned()),
                ("instance", self.tidb_instance(i)),
                ("job", "tidb".to_owned()),
            ];
            for t in (cpu_first_sample()..=cpu_last_sample()).step_by(60) {
                sample(&mut out, "tidb_server_maxprocs", &labels, "32", t);
            }
        }

        for (family, help) in [
            (
                "node_memory_MemAvailable_bytes",
                "Memory information field MemAvailable_bytes.",
            ),
            (
                "node_memory_MemTotal_bytes",
                "Memory information field MemTotal_bytes.",
            ),
        ] {
            let _ = writeln!(out, "# HELP {family} {help}");
            let _ = writeln!(out, "# TYPE {family} gauge");
            let available = family == "node_memory_MemAvailable_bytes";
            for set in [&incident_memory, &other_memory] {
                write_memory(&mut out, set, family, available);
            }
        }

        out.push_str("# HELP tikv_engine_size_bytes Sizes of each column families.\n");
        out.push_str("# TYPE tikv_engine_size_bytes gauge\n");
        for i in 0..6usize {
            let labels = [
                ("cluster_id", OTHER_CLUSTER.to_owned()),
                ("instance", format!("tikv-{i}.saas99.svc:20180")),
                ("job", "tikv".to_owned()),
                ("type", "default".to_owned()),
            ];
            let value = (40 + 3 * i as u64) << 30;
            for t in (memory_first_sample()..=memory_last_sample()).step_by(60) {
                sample(
                    &mut out,
                    "tikv_engine_size_bytes",
                    &labels,
                    &value.to_string(),
                    t,
                );
            }
        }

        if self == Fixture::Main {
            write_tidb_memory(&mut out, self);
        }

        if self == Fixture::Vida {
            write_tidb_server_info(&mut out, self);
        }

        if self == Fixture::Main {
            write_tenant_units(&mut out);
        }

        if self == Fixture::Main {
            out.push_str("# HELP tidb_server_session_info Session canary for the output guard.\n");
            out.push_str("# TYPE tidb_server_session_info gauge\n");
            let labels = [
                ("cluster_id", CPU_CLUSTER.to_owned()),
                ("instance", self.tidb_instance(0)),
                ("job", "tidb".to_owned()),
                ("session_id", GRAFANA_SESSION_COOKIE_VALUE.to_owned()),
            ];
            for t in (cpu_first_sample()..=cpu_last_sample()).step_by(60) {
                sample(&mut out, "tidb_server_session_info", &labels, "1", t);
            }
        }

        out.push_str("# EOF\n");
        out
    }
}

/// CPU samples start an hour before the APID window, for look-back, every 15 s.
fn cpu_first_sample() -> i64 {
    APID_29213_START - 3600
}

/// CPU samples end ten minutes after the APID window.
fn cpu_last_sample() -> i64 {
    APID_29213_END + 600
}

/// Memory samples start 30 minutes before the ST-2865 window, every 30 s.
fn memory_first_sample() -> i64 {
    ST_2865_START - 1800
}

/// Memory samples end ten minutes after the ST-2865 window.
fn memory_last_sample() -> i64 {
    ST_2865_END + 600
}

/// A deterministic fraction in [0, 1) per series index.
fn spread(i: usize) -> f64 {
    ((i * 37 + 11) % 101) as f64 / 101.0
}

/// A deterministic wiggle in [0, 1] per series index and sample index.
fn wiggle(i: usize, k: usize) -> f64 {
    ((k * 7 + i * 13) % 17) as f64 / 16.0
}

struct CpuSet<'a> {
    cluster: &'static str,
    shape: SeriesShape,
    top: usize,
    instance: &'a dyn Fn(usize) -> String,
}

/// CPU cores used by series `i` during the 15-second interval that starts at `t`.
///
/// The top series runs at exactly the peak from 21:58 to 22:01 (UTC+8), so `rate(...[1m])`
/// equals the peak at every evaluation time whose minute lies inside that plateau; all
/// other intervals of every series stay below the peak, and a 1-minute rate is an average
/// of interval slopes, so it never exceeds the peak.
fn cpu_cores(set: &CpuSet<'_>, i: usize, k: usize, t: i64) -> f64 {
    let peak = set.shape.peak;
    if i != set.top {
        return (0.12 + 0.6 * spread(i) + 0.08 * wiggle(i, k)) * peak;
    }
    let ramp_start = APID_29213_START + 180;
    let plateau_start = APID_29213_START + 480;
    let plateau_end = APID_29213_START + 660;
    let ramp_end = plateau_end + 240;
    if (plateau_start..plateau_end).contains(&t) {
        peak
    } else if (ramp_start..plateau_start).contains(&t) {
        let f = (t - ramp_start) as f64 / (plateau_start - ramp_start) as f64;
        (0.6 + 0.34 * f) * peak
    } else if (plateau_end..ramp_end).contains(&t) {
        let f = (t - plateau_end) as f64 / (ramp_end - plateau_end) as f64;
        (0.9 - 0.3 * f) * peak
    } else {
        (0.55 + 0.1 * wiggle(i, k)) * peak
    }
}

fn write_cpu(out: &mut String, set: &CpuSet<'_>) {
    for i in 0..set.shape.series {
        let labels = [
            ("cluster_id", set.cluster.to_owned()),
            ("instance", (set.instance)(i)),
            ("job", "tidb".to_owned()),
        ];
        // Counter values in whole milliseconds of CPU time, so the text is exact decimals.
        let mut millis: i64 = 500_000_000 + 1_000_000 * i as i64;
        for (k, t) in (cpu_first_sample()..=cpu_last_sample())
            .step_by(15)
            .enumerate()
        {
            let value = format!("{}.{:03}", millis / 1000, millis % 1000);
            sample(out, "process_cpu_seconds_total", &labels, &value, t);
            let cores = cpu_cores(set, i, k, t);
            millis += (cores * 15_000.0).round() as i64;
        }
    }
}

struct MemorySet<'a> {
    cluster: &'static str,
    shape: SeriesShape,
    top: usize,
    host: &'a dyn Fn(usize) -> String,
    host_ip_label: bool,
}

/// Memory used percent of series `i` at sample `k` (time `t`). The top series sits at
/// exactly the peak from 14:20 to 14:25 (UTC+8); everything else stays below it.
fn memory_percent(set: &MemorySet<'_>, i: usize, k: usize, t: i64) -> f64 {
    let peak = set.shape.peak;
    if i != set.top {
        return (0.3 + 0.5 * spread(i) + 0.1 * wiggle(i, k)) * peak;
    }
    let ramp_start = ST_2865_START + 600;
    let plateau_start = ST_2865_START + 1200;
    let plateau_end = ST_2865_START + 1500;
    if (plateau_start..plateau_end).contains(&t) {
        peak
    } else if (ramp_start..plateau_start).contains(&t) {
        let f = (t - ramp_start) as f64 / (plateau_start - ramp_start) as f64;
        (0.7 + 0.25 * f) * peak
    } else {
        (0.62 + 0.08 * wiggle(i, k)) * peak
    }
}

/// Total memory of series `i`: 32, 64, 128 or 256 GiB; the top series has 64 GiB.
fn memory_total(set: &MemorySet<'_>, i: usize) -> u64 {
    if i == set.top {
        64 << 30
    } else {
        (32u64 << 30) << (i % 4)
    }
}

fn write_memory(out: &mut String, set: &MemorySet<'_>, family: &str, available: bool) {
    for i in 0..set.shape.series {
        let host = (set.host)(i);
        let mut labels = vec![
            ("cluster_id", set.cluster.to_owned()),
            ("instance", format!("{host}:9100")),
            ("job", "node".to_owned()),
        ];
        if set.host_ip_label {
            labels.push(("host_ip", host));
        }
        let total = memory_total(set, i);
        for (k, t) in (memory_first_sample()..=memory_last_sample())
            .step_by(30)
            .enumerate()
        {
            let value = if available {
                let used = memory_percent(set, i, k, t) / 100.0;
                (total as f64 * (1.0 - used)).round() as u64
            } else {
                total
            };
            sample(out, family, &labels, &value.to_string(), t);
        }
    }
}

/// `tidb_server_info` (`Vida` only): one constant series per `SaaS01` TiDB instance,
/// every 60 s over the CPU sample range, whose labels carry the instance's host name
/// outside the address labels: `hostname` a bare host name (`tidb-07.vida01.svc`),
/// `advertise_address` a host name with a port (`tidb-07.vida01.svc:4000`),
/// `status_url` one inside a URL (`http://tidb-07.vida01.svc:10080/status`).
pub const VIDA_HOST_NAMES: &str = "tidb_server_info";

fn write_tidb_server_info(out: &mut String, fixture: Fixture) {
    out.push_str("# HELP tidb_server_info TiDB server host names.\n");
    out.push_str("# TYPE tidb_server_info gauge\n");
    for i in 0..fixture.tidb_cpu().series {
        let host = format!("tidb-{i:02}.vida01.svc");
        let labels = [
            ("advertise_address", format!("{host}:4000")),
            ("cluster_id", CPU_CLUSTER.to_owned()),
            ("hostname", host.clone()),
            ("instance", fixture.tidb_instance(i)),
            ("job", "tidb".to_owned()),
            ("status_url", format!("http://{host}:10080/status")),
        ];
        for t in (cpu_first_sample()..=cpu_last_sample()).step_by(60) {
            sample(out, VIDA_HOST_NAMES, &labels, "1", t);
        }
    }
}

/// `process_resident_memory_bytes` of [`TIDB_MEMORY_WITH_NAN`]: 12 `SaaS01` series at
/// 15 s over the CPU sample range (series `i` around `3 + 0.4 i` GiB, `tidb-11` reaching
/// the peak for one sample, `tidb-00` `NaN` for 5 minutes of the side-by-side hour) and 4
/// larger `SaaS99` series.
fn write_tidb_memory(out: &mut String, fixture: Fixture) {
    out.push_str("# HELP process_resident_memory_bytes Resident memory size in bytes.\n");
    out.push_str("# TYPE process_resident_memory_bytes gauge\n");
    let gib = f64::from(1u32 << 30);
    let nan_start = SIDE_BY_SIDE_START + 1800;
    let nan_end = nan_start + 15 * TIDB_MEMORY_NAN_SAMPLES as i64;
    let peak_at = SIDE_BY_SIDE_START + 2700;
    let sets = [
        (CPU_CLUSTER, TIDB_MEMORY_SERIES, 3.0),
        (OTHER_CLUSTER, 4, 12.0),
    ];
    for (cluster, series, base) in sets {
        for i in 0..series {
            let instance = if cluster == CPU_CLUSTER {
                fixture.tidb_instance(i)
            } else {
                format!("tidb-{i}.saas99.svc:10080")
            };
            let labels = [
                ("cluster_id", cluster.to_owned()),
                ("instance", instance),
                ("job", "tidb".to_owned()),
            ];
            for (k, t) in (cpu_first_sample()..=cpu_last_sample())
                .step_by(15)
                .enumerate()
            {
                let top = cluster == CPU_CLUSTER && i == TIDB_MEMORY_SERIES - 1;
                let value = if cluster == CPU_CLUSTER && i == 0 && (nan_start..nan_end).contains(&t)
                {
                    "NaN".to_owned()
                } else if top && t == peak_at {
                    TIDB_MEMORY_PEAK_BYTES.to_string()
                } else {
                    let gb = base + 0.4 * i as f64 + 0.2 * wiggle(i, k);
                    ((gb * gib).round() as u64).to_string()
                };
                sample(out, "process_resident_memory_bytes", &labels, &value, t);
            }
        }
    }
}

/// `tidb_tenant_request_units` (`Main` only): constant gauges per series, every 60 s
/// over the CPU sample range, for the keyspaces of [`SERVERLESS_CLUSTER`] and the
/// parents of [`PREMIUM_CLUSTER`]. Series `i` of a set holds `base + step * i`.
fn write_tenant_units(out: &mut String) {
    out.push_str("# HELP tidb_tenant_request_units Request units per tenant.\n");
    out.push_str("# TYPE tidb_tenant_request_units gauge\n");
    let sets = [
        (
            SERVERLESS_CLUSTER,
            "keyspace_id",
            TICKET_KEYSPACE,
            TICKET_KEYSPACE_UNITS,
            100,
            10,
        ),
        (
            SERVERLESS_CLUSTER,
            "keyspace_id",
            OTHER_KEYSPACE,
            OTHER_KEYSPACE_UNITS,
            500,
            10,
        ),
        (
            PREMIUM_CLUSTER,
            "parent_id",
            TICKET_PARENT,
            TICKET_PARENT_UNITS,
            40,
            5,
        ),
        (
            PREMIUM_CLUSTER,
            "parent_id",
            OTHER_PARENT,
            OTHER_PARENT_UNITS,
            900,
            10,
        ),
    ];
    for (cluster, label, tenant, shape, base, step) in sets {
        for i in 0..shape.series {
            let labels = [
                ("cluster_id", cluster.to_owned()),
                (
                    "instance",
                    format!(
                        "tidb-{i}.{tenant}.{}.svc:10080",
                        cluster.to_ascii_lowercase()
                    ),
                ),
                ("job", "tidb".to_owned()),
                (label, tenant.to_owned()),
            ];
            let value = (base + step * i).to_string();
            for t in (cpu_first_sample()..=cpu_last_sample()).step_by(60) {
                sample(out, "tidb_tenant_request_units", &labels, &value, t);
            }
        }
    }
}

fn sample(out: &mut String, name: &str, labels: &[(&str, String)], value: &str, t: i64) {
    out.push_str(name);
    out.push('{');
    for (n, (k, v)) in labels.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    let _ = writeln!(out, "}} {value} {t}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_deterministic_and_ends_in_eof() {
        let a = Fixture::Monica.openmetrics();
        let b = Fixture::Monica.openmetrics();
        assert_eq!(a, b);
        assert!(a.ends_with("# EOF\n"));
        assert!(!a.contains(GRAFANA_SESSION_COOKIE_VALUE));
        assert!(
            Fixture::Main
                .openmetrics()
                .contains(GRAFANA_SESSION_COOKIE_VALUE)
        );
    }

    #[test]
    fn tenant_unit_peaks_are_the_documented_ones() {
        for (shape, base, step) in [
            (TICKET_KEYSPACE_UNITS, 100, 10),
            (OTHER_KEYSPACE_UNITS, 500, 10),
            (TICKET_PARENT_UNITS, 40, 5),
            (OTHER_PARENT_UNITS, 900, 10),
        ] {
            assert_eq!(
                shape.peak,
                f64::from(base + step * (shape.series as u32 - 1))
            );
        }
        let text = Fixture::Main.openmetrics();
        assert!(text.contains(r#"keyspace_id="ks-1002""#));
        assert!(
            !Fixture::Vida
                .openmetrics()
                .contains("tidb_tenant_request_units")
        );
    }

    #[test]
    fn points_follow_window_and_step() {
        assert_eq!(MEMORY_USED_PERCENT.points(), 241);
        assert_eq!(TIDB_CPU.points(), 61);
    }
}
