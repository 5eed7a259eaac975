#![doc = include_str!("../README.md")]

mod chromium;
mod clinic;
mod error;
mod fixtures;
mod front;
mod grafana;
mod isolation_probe;
mod large;
mod manus;
pub mod model;
mod package_source;
pub mod policy;
mod process;
mod prometheus;
mod recording;
mod redis;
mod relay;
mod stall;
mod terminal;

pub use chromium::{
    BrowserSlot, CHROMIUM_LAUNCH_ARGS, ChromeDriver, Chromium, chromedriver_process_count,
    chromedriver_program, chromium_process_count, wait_for_chromium_count,
};
pub use clinic::ClinicFront;
pub use error::TestSupportError;
pub use fixtures::{
    APID_29213_END, APID_29213_START, CPU_CLUSTER, FIGURE_TOLERANCE, Fixture, FixtureQuery,
    GRAFANA_SESSION_COOKIE_NAME, GRAFANA_SESSION_COOKIE_VALUE, MEMORY_CLUSTER, MEMORY_MANY_TO_MANY,
    MEMORY_USED_PERCENT, OTHER_CLUSTER, OTHER_CLUSTER_MEMORY, OTHER_CLUSTER_TIDB, PARSE_ERROR,
    SESSION_CANARY, SIDE_BY_SIDE_QUERIES, SIDE_BY_SIDE_START, ST_2865_END, ST_2865_START,
    SeriesShape, TIDB_CPU, TIDB_CPU_BY_INSTANCE_HOUR, TIDB_CPU_RATE_HOUR, TIDB_CPU_SATURATION,
    TIDB_MANY_TO_MANY, TIDB_MAXPROCS, TIDB_MEMORY_NAN_SAMPLES, TIDB_MEMORY_PEAK_BYTES,
    TIDB_MEMORY_SERIES, TIDB_MEMORY_WITH_NAN, TIKV_NO_DATA, UNSCOPED_TIDB_CPU, VIDA_HOST_NAMES,
};
pub use fixtures::{
    KEYSPACE_REQUEST_UNITS, OTHER_KEYSPACE, OTHER_KEYSPACE_UNITS, OTHER_PARENT, OTHER_PARENT_UNITS,
    PARENT_REQUEST_UNITS, PREMIUM_CLUSTER, SERVERLESS_CLUSTER, TICKET_KEYSPACE,
    TICKET_KEYSPACE_UNITS, TICKET_PARENT, TICKET_PARENT_UNITS,
};
pub use front::{Fault, FaultControl, RecordedRequest, oversized_matrix_body};
pub use grafana::{ErrorStyle, GrafanaFront, HealthMode};
pub use large::{
    TIKV_THREAD_CPU_RATE, TIKV_THREAD_PEAK, TIKV_THREADS_CLUSTER, TIKV_THREADS_END,
    TIKV_THREADS_START, TikvThreads,
};
pub use manus::{ManusFront, ManusTarget, ManusTargets};
pub use model::{
    ChatRequest, Exchange, MadeCall, Message, OfferedTool, Play, Reply, Role, Script,
    ScriptedModel, Speaker, Steps, ToolCall, ToolOutcome,
};
pub use package_source::loopback_package_source;
pub use prometheus::{LargePrometheus, Prometheus};
pub use recording::{
    QUERY_RANGE_PATH, RecordedPrometheus, Recording, RecordingProxy, RecordingSet,
};
pub use redis::{REDIS_INSTALL, RedisServer, RedisTls};
pub use relay::CountingRelay;
pub use terminal::without_terminal_colours;
