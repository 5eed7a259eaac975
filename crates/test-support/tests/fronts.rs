//! The test fronts add only what Prometheus lacks and pass its answers through.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use evidence_test_support::*;
use secrecy::SecretString;

fn form(q: &FixtureQuery) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("query", q.expr)
        .append_pair("start", &q.start.to_string())
        .append_pair("end", &q.end.to_string())
        .append_pair("step", &q.step_seconds.to_string())
        .finish()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn post(
    url: &str,
    q: &FixtureQuery,
    header: Option<(&str, &str)>,
) -> (u16, Option<String>, Vec<u8>) {
    let mut req = client()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(q));
    if let Some((k, v)) = header {
        req = req.header(k, v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, ct, resp.bytes().await.unwrap().to_vec())
}

async fn direct(prom: &Prometheus, q: &FixtureQuery) -> (u16, Vec<u8>) {
    let (status, _, body) = post(&format!("{}/api/v1/query_range", prom.url()), q, None).await;
    (status, body)
}

/// Checks every fault mode through one front.
async fn check_faults(faults: &FaultControl, url: &str, q: &FixtureQuery, header: (&str, &str)) {
    faults.set_delay(Duration::from_millis(300));
    let started = Instant::now();
    let (status, _, _) = post(url, q, Some(header)).await;
    assert_eq!(status, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));
    faults.clear();

    faults.set_fault(Fault::OversizedBody { bytes: 2 << 20 });
    let (status, _, body) = post(url, q, Some(header)).await;
    assert_eq!(status, 200);
    assert!(body.len() >= 2 << 20);
    let parsed: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(parsed["status"], "success");

    faults.set_fault(Fault::NonJson);
    let (status, ct, body) = post(url, q, Some(header)).await;
    assert_eq!(status, 200);
    assert!(ct.unwrap().starts_with("text/html"));
    assert!(serde_json::from_slice::<serde_json::Value>(&body).is_err());

    for code in [429, 503] {
        faults.set_fault(Fault::Status(code));
        let (status, _, _) = post(url, q, Some(header)).await;
        assert_eq!(status, code);
    }
    faults.clear();
    assert_eq!(faults.fault(), Fault::None);
}

#[tokio::test]
async fn clinic_front_checks_the_bearer_token_and_passes_answers_through() {
    let prom = Prometheus::start(Fixture::Main).await.unwrap();
    let front = ClinicFront::start(&prom.url(), SecretString::from("clinic-test-token"))
        .await
        .unwrap();
    let url = front.query_range_url(CPU_CLUSTER);
    assert!(url.ends_with("/api/v1/clusters/SaaS01/prometheus/api/v1/query_range"));
    let good = ("authorization", "Bearer clinic-test-token");

    assert_eq!(post(&url, &TIDB_CPU, None).await.0, 401);
    assert_eq!(
        post(&url, &TIDB_CPU, Some(("authorization", "Bearer wrong")))
            .await
            .0,
        401
    );

    for q in [&TIDB_CPU, &TIDB_MANY_TO_MANY, &PARSE_ERROR, &TIKV_NO_DATA] {
        let (status, _, body) = post(&url, q, Some(good)).await;
        assert_eq!((status, body), direct(&prom, q).await, "{}", q.name);
    }

    front.set_forbidden(true);
    assert_eq!(post(&url, &TIDB_CPU, Some(good)).await.0, 403);
    front.set_forbidden(false);

    check_faults(front.faults(), &url, &TIDB_CPU, good).await;

    let log = front.requests();
    assert_eq!(log[0].status, 401);
    assert_eq!(
        log[0].path,
        "/api/v1/clusters/SaaS01/prometheus/api/v1/query_range"
    );
    assert_eq!(log[2].param("query"), Some(TIDB_CPU.expr));

    prom.kill();
    let (status, _, _) = post(&url, &TIDB_CPU, Some(good)).await;
    assert_eq!(status, 502);
}

#[tokio::test]
async fn manus_fronts_bootstrap_sessions_per_target() {
    let user = SecretString::from("manus-user");
    let password = SecretString::from("manus-password");
    let targets = ManusTargets::start(&user, &password).await.unwrap();
    let vida = &targets.vida.front;
    let login_url = format!("{}{}", vida.base_url(), ManusFront::LOGIN_PATH);

    let wrong = client()
        .post(&login_url)
        .json(&serde_json::json!({"username": "manus-user", "password": "nope"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401);

    let mut sessions = Vec::new();
    for front in [vida, &targets.monica.front] {
        let resp = client()
            .post(format!("{}{}", front.base_url(), ManusFront::LOGIN_PATH))
            .json(&serde_json::json!({"username": "manus-user", "password": "manus-password"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let body: serde_json::Value = resp.json().await.unwrap();
        sessions.push(body["session"].as_str().unwrap().to_owned());
        assert_eq!(front.sessions_issued(), 1);
    }

    let vida_url = format!("{}{}", vida.base_url(), ManusFront::QUERY_RANGE_PATH);
    let monica_url = format!(
        "{}{}",
        targets.monica.front.base_url(),
        ManusFront::QUERY_RANGE_PATH
    );
    assert_eq!(post(&vida_url, &TIDB_CPU, None).await.0, 401);
    // A session of one target is unknown to the other.
    assert_eq!(
        post(
            &vida_url,
            &TIDB_CPU,
            Some((ManusFront::SESSION_HEADER, &sessions[1]))
        )
        .await
        .0,
        401
    );
    let header = (ManusFront::SESSION_HEADER, sessions[0].as_str());
    let (status, _, body) = post(&vida_url, &TIDB_CPU, Some(header)).await;
    assert_eq!(
        (status, body),
        direct(&targets.vida.prometheus, &TIDB_CPU).await
    );
    let (_, _, monica_body) = post(
        &monica_url,
        &TIDB_CPU,
        Some((ManusFront::SESSION_HEADER, &sessions[1])),
    )
    .await;
    let monica: serde_json::Value = serde_json::from_slice(&monica_body).unwrap();
    assert_eq!(
        monica["data"]["result"].as_array().unwrap().len(),
        Fixture::Monica.tidb_cpu().series
    );

    check_faults(vida.faults(), &vida_url, &TIDB_CPU, header).await;

    vida.login_faults().set_fault(Fault::Status(503));
    let resp = client()
        .post(&login_url)
        .json(&serde_json::json!({"username": "manus-user", "password": "manus-password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 503);
    vida.login_faults().clear();

    vida.set_forbidden(true);
    assert_eq!(post(&vida_url, &TIDB_CPU, Some(header)).await.0, 403);
    vida.set_forbidden(false);

    vida.expire_sessions();
    assert_eq!(post(&vida_url, &TIDB_CPU, Some(header)).await.0, 401);
    assert!(targets.target("monica").is_some() && targets.target("other").is_none());
}

/// A plain `GET` of `url`, without cookies.
async fn get(url: String) -> reqwest::Response {
    client().get(url).send().await.unwrap()
}

/// The Grafana front's health answer as JSON.
async fn health_json(base: &str) -> serde_json::Value {
    get(format!("{base}/api/health"))
        .await
        .json()
        .await
        .unwrap()
}

/// The Grafana front's pages: the login page, the health answer with its version, and
/// the session check of a page (a redirect to the login without the cookie) and of the
/// API (401).
async fn check_grafana_pages(base: &str, cookie: &str) {
    let login = get(format!("{base}/login")).await;
    assert_eq!(login.status().as_u16(), 200);
    assert!(login.text().await.unwrap().contains("login-form"));

    assert_eq!(health_json(base).await["version"], GrafanaFront::VERSION);

    let home = get(format!("{base}/explore")).await;
    assert_eq!(home.status().as_u16(), 302);
    assert_eq!(home.headers()["location"], "/login");
    let home = client()
        .get(format!("{base}/explore"))
        .header("cookie", format!("theme=dark; {cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(home.status().as_u16(), 200);
    let api = get(format!("{base}/api/user")).await;
    assert_eq!(api.status().as_u16(), 401);
}

/// The Grafana front's health modes: unavailable (503), an answer without a version, and
/// back to normal.
async fn check_grafana_health_modes(front: &GrafanaFront, base: &str) {
    front.set_health(HealthMode::Unavailable);
    let health = get(format!("{base}/api/health")).await;
    assert_eq!(health.status().as_u16(), 503);
    front.set_health(HealthMode::NoVersion);
    assert!(health_json(base).await.get("version").is_none());
    front.set_health(HealthMode::Ok);
}

#[tokio::test]
async fn grafana_front_checks_the_session_and_proxies_the_datasource() {
    let prom = Prometheus::start(Fixture::Main).await.unwrap();
    let front = GrafanaFront::start(&prom.url()).await.unwrap();
    let base = front.base_url();
    let cookie = format!("{GRAFANA_SESSION_COOKIE_NAME}={GRAFANA_SESSION_COOKIE_VALUE}");
    let good = ("cookie", cookie.as_str());
    let proxy = format!("{base}{}", front.query_range_path());
    assert!(proxy.ends_with("/api/datasources/proxy/uid/prometheus-fixture/api/v1/query_range"));

    check_grafana_pages(&base, &cookie).await;

    assert_eq!(post(&proxy, &TIDB_CPU, None).await.0, 401);
    assert_eq!(
        post(&proxy, &TIDB_CPU, Some(("cookie", "grafana_session=stale")))
            .await
            .0,
        401
    );
    for q in [
        &TIDB_CPU,
        &MEMORY_MANY_TO_MANY,
        &PARSE_ERROR,
        &SESSION_CANARY,
    ] {
        let (status, _, body) = post(&proxy, q, Some(good)).await;
        assert_eq!((status, body), direct(&prom, q).await, "{}", q.name);
    }
    let unknown = format!("{base}/api/datasources/proxy/uid/other/api/v1/query_range");
    assert_eq!(post(&unknown, &TIDB_CPU, Some(good)).await.0, 404);

    front.set_error_style(ErrorStyle::DsQueryFrame);
    let (status, _, body) = post(&proxy, &MEMORY_MANY_TO_MANY, Some(good)).await;
    assert_eq!(status, 422);
    let frame: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let text = frame["results"]["A"]["error"].as_str().unwrap();
    assert!(text.contains("many-to-many matching not allowed"), "{text}");
    assert_eq!(frame["results"]["A"]["status"], 422);
    front.set_error_style(ErrorStyle::PassThrough);

    front.set_forbidden(true);
    assert_eq!(post(&proxy, &TIDB_CPU, Some(good)).await.0, 403);
    front.set_forbidden(false);

    check_grafana_health_modes(&front, &base).await;

    check_faults(front.faults(), &proxy, &TIDB_CPU, good).await;

    front.expire_sessions(true);
    assert_eq!(post(&proxy, &TIDB_CPU, Some(good)).await.0, 401);
    front.expire_sessions(false);

    prom.kill();
    assert_eq!(post(&proxy, &TIDB_CPU, Some(good)).await.0, 502);
}
