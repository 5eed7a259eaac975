//! Streaming compaction against a real Prometheus 2.42: the same evidence as the typed
//! compaction of the buffered body on every committed fixture query (with the seed
//! figures), and an answer far above the former 16 MiB cap answered `ok`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use evidence_connectors::internal::*;
use evidence_connectors::limits::DEFAULT_TOP_K;
use evidence_connectors::*;
use evidence_result::{Evidence, Failure, Provider, evidence::EvidenceWindow};
use evidence_test_support::*;
use secrecy::SecretString;

const TOKEN: &str = "clinic-token-5b0c2f9e41d7";

fn window(q: &FixtureQuery) -> EvidenceWindow {
    EvidenceWindow {
        start: q.start,
        end: q.end,
        step_seconds: q.step_seconds,
    }
}

fn mapper() -> ResponseMapper {
    ResponseMapper::new(Provider::Clinic, Redactor::new([SecretString::from(TOKEN)]))
}

fn compaction(q: &FixtureQuery, unit: &str) -> Compaction {
    Compaction::new(DEFAULT_TOP_K)
        .with_unit(unit)
        .with_expr(q.expr)
        .with_window(window(q))
}

/// The answer buffered whole (no size bound) and compacted by the typed parser.
async fn typed(url: &str, q: &FixtureQuery, unit: &str) -> (Result<Evidence, Failure>, usize) {
    let client = reqwest::Client::new();
    let builder = QueryRange::new(q.expr, window(q)).post(&client, url.parse().unwrap());
    let limits = ResponseLimits {
        max_body_bytes: usize::MAX,
        ..ResponseLimits::default()
    };
    let raw = fetch(builder, &limits).await.unwrap();
    let len = raw.body.len();
    (
        mapper().typed_evidence(&raw, &compaction(q, unit), &KeepLabels),
        len,
    )
}

/// The answer streamed and folded as it arrives, with the default limits.
async fn streamed(url: &str, q: &FixtureQuery, unit: &str) -> Result<Evidence, Failure> {
    let client = reqwest::Client::new();
    let builder = QueryRange::new(q.expr, window(q)).post(&client, url.parse().unwrap());
    mapper()
        .fetch_evidence(
            builder,
            &ResponseLimits::default(),
            &compaction(q, unit),
            &KeepLabels,
        )
        .await
}

#[tokio::test]
async fn streaming_gives_the_typed_evidence_on_every_fixture_query() {
    let prometheus = Prometheus::start(Fixture::Main).await.unwrap();
    let url = format!("{}/api/v1/query_range", prometheus.url());
    let mut queries: Vec<(FixtureQuery, &str)> = SIDE_BY_SIDE_QUERIES
        .iter()
        .map(|(q, unit, _)| (*q, *unit))
        .collect();
    queries.extend([
        (TIKV_NO_DATA, "bytes"),
        (UNSCOPED_TIDB_CPU, "cores"),
        (PARSE_ERROR, "cores"),
        (TIDB_MANY_TO_MANY, "cores"),
    ]);
    for (q, unit) in queries {
        let (old, _) = typed(&url, &q, unit).await;
        let new = streamed(&url, &q, unit).await;
        assert_eq!(old, new, "{}", q.name);
    }
    // The seed figures, through the streaming path.
    let cpu = streamed(&url, &TIDB_CPU, "cores").await.unwrap();
    assert_eq!(cpu.series_count, 56);
    assert!((cpu.top_peak().unwrap() - 22.84).abs() <= FIGURE_TOLERANCE);
    let memory = streamed(&url, &MEMORY_USED_PERCENT, "%").await.unwrap();
    assert_eq!(memory.series_count, 261);
    assert!((memory.top_peak().unwrap() - 78.64).abs() <= FIGURE_TOLERANCE);
}

/// The thread-level query of a 5,000-thread cluster: a 37 MB body, more than twice the
/// former cap, is answered `ok` with every series counted, the hot thread on top and
/// the spread of all 5,000 peaks; the very evidence the typed compaction gives the
/// buffered body.
#[tokio::test]
async fn an_answer_far_above_the_former_cap_is_answered() {
    let data = TikvThreads::new(5_000);
    let prometheus = LargePrometheus::start(data).await.unwrap();
    let url = format!("{}/api/v1/query_range", prometheus.url());
    let q = TIKV_THREAD_CPU_RATE;
    let evidence = streamed(&url, &q, "cores").await.unwrap();
    assert_eq!(evidence.series_count, 5_000);
    assert_eq!(evidence.point_count, 5_000 * 241);
    assert!(evidence.truncated);
    let top = &evidence.series[0];
    let hot = data.top_index();
    assert_eq!(top.labels["instance"], data.instance(hot));
    assert_eq!(top.labels["name"], data.thread_name(hot));
    assert!((evidence.top_peak().unwrap() - TIKV_THREAD_PEAK).abs() <= FIGURE_TOLERANCE);
    let spread = evidence.peak_spread.unwrap();
    assert_eq!(spread.series, 5_000);
    assert!(
        spread.p90.get() < 0.7 && spread.min.get() >= 0.05,
        "{spread:?}"
    );
    assert_eq!(evidence.common_labels["cluster_id"], TIKV_THREADS_CLUSTER);

    let (old, body_len) = typed(&url, &q, "cores").await;
    assert!(body_len > 2 * (16 << 20), "{body_len} bytes");
    assert_eq!(old.unwrap(), evidence);
}

/// The call's time limit covers reading and folding the body: a 2xx answer whose body
/// keeps coming slowly (a valid start, then a few bytes at a time) ends as `timeout` at
/// the limit, not when the body would end.
#[tokio::test]
async fn the_time_limit_covers_a_body_that_keeps_coming() {
    use tokio::io::AsyncWriteExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = vec![0u8; 4096];
        let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut request).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        let start = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":["#;
        let chunk = |text: &str| format!("{:x}\r\n{text}\r\n", text.len()).into_bytes();
        socket.write_all(&chunk(start)).await.unwrap();
        for k in 0..10_000 {
            let point = format!("[{},\"1\"],", 1_786_348_800 + 15 * k);
            if socket.write_all(&chunk(&point)).await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    });
    let limits = ResponseLimits {
        timeout: std::time::Duration::from_millis(400),
        ..ResponseLimits::default()
    };
    let q = TIKV_THREAD_CPU_RATE;
    let client = reqwest::Client::new();
    let builder = QueryRange::new(q.expr, window(&q)).post(
        &client,
        format!("http://{addr}/api/v1/query_range").parse().unwrap(),
    );
    let started = std::time::Instant::now();
    let f = mapper()
        .fetch_evidence(builder, &limits, &compaction(&q, "cores"), &KeepLabels)
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(
        f.error.code.as_str(),
        "clinic_timeout",
        "{}",
        f.detail_error
    );
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
    server.abort();
}
