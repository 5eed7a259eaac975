//! Recordings made through the proxy in front of a real Prometheus replay byte for
//! byte from the recorded server, and anything not recorded is a clear miss.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use evidence_test_support::*;

fn form(q: &FixtureQuery) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("query", q.expr)
        .append_pair("start", &q.start.to_string())
        .append_pair("end", &q.end.to_string())
        .append_pair("step", &q.step_seconds.to_string())
        .finish()
}

async fn post(base: &str, q: &FixtureQuery) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(format!("{base}{QUERY_RANGE_PATH}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(q))
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[tokio::test]
async fn record_then_replay_without_prometheus() {
    let prometheus = Prometheus::start(Fixture::Main).await.unwrap();
    let proxy = RecordingProxy::start(&prometheus.url()).await.unwrap();
    let ok = post(&proxy.url(), &TIDB_CPU).await;
    let rejected = post(&proxy.url(), &TIDB_MANY_TO_MANY).await;
    assert_eq!(ok.0, 200);
    assert_eq!(rejected.0, 422);
    let set = proxy.recordings("recordings of the Main fixture");
    assert_eq!(set.recordings.len(), 2);
    let json = set.to_json().unwrap();
    drop(proxy);
    drop(prometheus);

    let replay = RecordedPrometheus::start(RecordingSet::from_json(&json).unwrap())
        .await
        .unwrap();
    assert_eq!(post(&replay.url(), &TIDB_CPU).await, ok);
    assert_eq!(post(&replay.url(), &TIDB_MANY_TO_MANY).await, rejected);
    let (status, body) = post(&replay.url(), &TIKV_NO_DATA).await;
    assert_eq!(status, 404);
    assert!(body.contains("no recording"));
    assert_eq!(replay.misses().len(), 1);

    // An edited body is refused when the set is read.
    let tampered = json.replacen("22.84", "22.85", 1);
    assert_ne!(tampered, json);
    assert!(RecordingSet::from_json(&tampered).is_err());
}
