//! The fixtures give the seed incidents' figures against the real Prometheus.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use evidence_test_support::*;
use serde_json::Value;

struct Answer {
    status: u16,
    body: Value,
}

impl Answer {
    fn series(&self) -> &Vec<Value> {
        assert_eq!(self.status, 200, "{}", self.body);
        assert_eq!(self.body["status"], "success");
        assert_eq!(self.body["data"]["resultType"], "matrix");
        self.body["data"]["result"].as_array().unwrap()
    }

    fn peak(&self) -> f64 {
        self.series()
            .iter()
            .flat_map(|s| s["values"].as_array().unwrap())
            .map(|p| p[1].as_str().unwrap().parse::<f64>().unwrap())
            .fold(f64::NEG_INFINITY, f64::max)
    }

    fn error(&self) -> (&str, &str) {
        assert_eq!(self.body["status"], "error", "{}", self.body);
        (
            self.body["errorType"].as_str().unwrap(),
            self.body["error"].as_str().unwrap(),
        )
    }
}

async fn query(base: &str, q: &FixtureQuery, extra: &[(&str, &str)]) -> Answer {
    let mut form = vec![
        ("query".to_owned(), q.expr.to_owned()),
        ("start".to_owned(), q.start.to_string()),
        ("end".to_owned(), q.end.to_string()),
        ("step".to_owned(), q.step_seconds.to_string()),
    ];
    form.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&form)
        .finish();
    let resp = reqwest::Client::new()
        .post(format!("{base}/api/v1/query_range"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
    Answer { status, body }
}

fn assert_close(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= FIGURE_TOLERANCE,
        "{what}: expected {expected}, got {actual}"
    );
}

#[tokio::test]
async fn main_fixture_reproduces_the_seed_figures() {
    let prom = Prometheus::start(Fixture::Main).await.unwrap();
    let base = prom.url();

    // APID-29213: 56 TiDB series, top-instance peak 22.84 cores.
    let cpu = query(&base, &TIDB_CPU, &[]).await;
    assert_eq!(cpu.series().len(), 56);
    assert_close(cpu.peak(), 22.84, "tidb cpu peak");
    let top = cpu
        .series()
        .iter()
        .max_by(|a, b| {
            let peak = |s: &Value| {
                s["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p[1].as_str().unwrap().parse::<f64>().unwrap())
                    .fold(f64::NEG_INFINITY, f64::max)
            };
            peak(a).total_cmp(&peak(b))
        })
        .unwrap();
    assert_eq!(top["metric"]["instance"], Fixture::Main.tidb_instance(7));
    assert!(
        cpu.series()
            .iter()
            .all(|s| s["values"].as_array().unwrap().len() == 61)
    );

    // ST-2865: 261 memory series over 241 points, peak 78.64 %.
    let mem = query(&base, &MEMORY_USED_PERCENT, &[]).await;
    assert_eq!(mem.series().len(), 261);
    assert!(
        mem.series()
            .iter()
            .all(|s| s["values"].as_array().unwrap().len() == 241)
    );
    assert_close(mem.peak(), 78.64, "memory peak");

    // The TiKV-specific query: HTTP 200 and no series.
    let none = query(&base, &TIKV_NO_DATA, &[]).await;
    assert!(none.series().is_empty());

    // Many-to-many matching on cluster_id: 422 execution with the duplicate context.
    for q in [&MEMORY_MANY_TO_MANY, &TIDB_MANY_TO_MANY] {
        let rejected = query(&base, q, &[]).await;
        assert_eq!(rejected.status, 422, "{}", q.name);
        let (kind, text) = rejected.error();
        assert_eq!(kind, "execution");
        assert!(
            text.contains("found duplicate series for the match group"),
            "{text}"
        );
        assert!(text.contains("many-to-many matching not allowed"), "{text}");
    }

    // The corrected form of the TiDB many-to-many query runs.
    let saturation = query(&base, &TIDB_CPU_SATURATION, &[]).await;
    assert_eq!(saturation.series().len(), 56);
    assert_close(saturation.peak(), 22.84 / TIDB_MAXPROCS, "saturation peak");

    // A parse error: 400 bad_data.
    let bad = query(&base, &PARSE_ERROR, &[]).await;
    assert_eq!(bad.status, 400);
    let (kind, text) = bad.error();
    assert_eq!(kind, "bad_data");
    assert!(text.contains("parse error"), "{text}");

    // A query timeout: 503 timeout.
    let slow = query(&base, &TIDB_CPU, &[("timeout", "0.000000001")]).await;
    assert_eq!(slow.status, 503);
    assert_eq!(slow.error().0, "timeout");

    // The other cluster exists and is higher, so scoped results prove scope.
    let all = query(&base, &UNSCOPED_TIDB_CPU, &[]).await;
    assert_eq!(all.series().len(), 56 + OTHER_CLUSTER_TIDB.series);
    assert_close(all.peak(), OTHER_CLUSTER_TIDB.peak, "other cluster peak");
    assert!(
        all.series()
            .iter()
            .any(|s| s["metric"]["cluster_id"] == OTHER_CLUSTER)
    );

    // The session-cookie canary is a real label value.
    let canary = query(&base, &SESSION_CANARY, &[]).await;
    assert_eq!(canary.series().len(), 1);
    assert_eq!(
        canary.series()[0]["metric"]["session_id"],
        GRAFANA_SESSION_COOKIE_VALUE
    );

    // Killed mid-run: the port stops answering.
    assert!(prom.is_running());
    prom.kill();
    assert!(!prom.is_running());
    assert!(reqwest::get(format!("{base}/-/ready")).await.is_err());
}

#[tokio::test]
async fn manus_targets_hold_different_data_on_address_instances() {
    let (vida, monica) = tokio::join!(
        Prometheus::start(Fixture::Vida),
        Prometheus::start(Fixture::Monica)
    );
    let (vida, monica) = (vida.unwrap(), monica.unwrap());
    for prom in [&vida, &monica] {
        let fixture = prom.fixture();
        let cpu = query(&prom.url(), &TIDB_CPU, &[]).await;
        assert_eq!(cpu.series().len(), fixture.tidb_cpu().series);
        assert_close(cpu.peak(), fixture.tidb_cpu().peak, fixture.name());
        let mem = query(&prom.url(), &MEMORY_USED_PERCENT, &[]).await;
        assert_eq!(mem.series().len(), fixture.memory().series);
        assert_close(mem.peak(), fixture.memory().peak, fixture.name());
        let prefix = if fixture == Fixture::Vida {
            "10.21."
        } else {
            "10.42."
        };
        for s in cpu.series().iter().chain(mem.series()) {
            let instance = s["metric"]["instance"].as_str().unwrap();
            let (host, port) = instance.rsplit_once(':').unwrap();
            assert!(host.parse::<std::net::Ipv4Addr>().is_ok() && host.starts_with(prefix));
            assert!(port.parse::<u16>().is_ok());
        }
        for s in mem.series() {
            let ip = s["metric"]["host_ip"].as_str().unwrap();
            assert!(ip.parse::<std::net::Ipv4Addr>().is_ok());
        }
        let rejected = query(&prom.url(), &MEMORY_MANY_TO_MANY, &[]).await;
        assert_eq!(rejected.status, 422);
        let canary = query(&prom.url(), &SESSION_CANARY, &[]).await;
        assert!(canary.series().is_empty());
    }
    assert_ne!(vida.fixture().tidb_cpu(), monica.fixture().tidb_cpu());
}
