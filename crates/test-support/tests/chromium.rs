//! Real Chromium and ChromeDriver started by test support reach the Grafana test front.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use evidence_test_support::*;
use serde_json::{Value, json};

/// A minimal W3C WebDriver client over reqwest, enough to prove the setup works.
struct Session {
    http: reqwest::Client,
    base: String,
}

impl Session {
    async fn new(driver: &ChromeDriver, profile: &std::path::Path) -> Self {
        let http = reqwest::Client::new();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": driver.chromium().path(),
                "args": Chromium::launch_args(profile),
            }
        }}});
        let resp: Value = http
            .post(format!("{}/session", driver.url()))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = resp["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {resp}"));
        Session {
            http,
            base: format!("{}/session/{id}", driver.url()),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if !body.is_null() {
            request = request.json(&body);
        }
        let resp: Value = request.send().await.unwrap().json().await.unwrap();
        resp["value"].clone()
    }

    async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", json!({"url": url}))
            .await;
    }

    async fn current_path(&self) -> String {
        let url = self.call(reqwest::Method::GET, "/url", Value::Null).await;
        let text = url.as_str().unwrap_or_else(|| panic!("no url: {url}"));
        url::Url::parse(text).unwrap().path().to_owned()
    }

    async fn script(&self, script: &str, args: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/async",
            json!({"script": script, "args": args}),
        )
        .await
    }

    async fn close(self) {
        self.http.delete(&self.base).send().await.unwrap();
    }
}

#[tokio::test]
async fn chromium_reaches_the_grafana_front_through_chromedriver() {
    let slot = BrowserSlot::acquire().await;
    let baseline = chromium_process_count();
    let prom = Prometheus::start(Fixture::Main).await.unwrap();
    let grafana = GrafanaFront::start(&prom.url()).await.unwrap();
    let driver = ChromeDriver::start(&slot).await.unwrap();
    assert!(chromedriver_process_count() >= 1);
    // No browser yet: the driver alone starts none.
    assert_eq!(chromium_process_count(), baseline);

    let profile = tempfile::tempdir().unwrap();
    let session = Session::new(&driver, profile.path()).await;
    assert!(chromium_process_count() > baseline);

    // Without the session cookie an HTML route lands on the login page.
    session
        .goto(&format!("{}/explore", grafana.base_url()))
        .await;
    assert_eq!(session.current_path().await, "/login");

    // The browser's client hints agree with the browser binary's major version.
    let brands = session
        .script(
            "const done = arguments[arguments.length - 1];
             done(navigator.userAgentData.brands.map(b => b.brand + ' ' + b.version));",
            json!([]),
        )
        .await;
    let major = driver.chromium().major_version().unwrap();
    assert!(
        brands
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b.as_str().unwrap() == format!("Chromium {major}")),
        "{brands}"
    );

    // With the cookie, a page fetch through the datasource proxy reaches Prometheus.
    session
        .call(
            reqwest::Method::POST,
            "/cookie",
            json!({"cookie": {
                "name": GRAFANA_SESSION_COOKIE_NAME,
                "value": GRAFANA_SESSION_COOKIE_VALUE,
                "domain": "127.0.0.1",
                "path": "/",
                "sameSite": "Lax",
                "httpOnly": true,
                "secure": false
            }}),
        )
        .await;
    session
        .goto(&format!("{}/explore", grafana.base_url()))
        .await;
    assert_eq!(session.current_path().await, "/explore");
    let answer = session
        .script(
            "const [path, body, done] = arguments;
             fetch(path, {method: 'POST', credentials: 'same-origin',
                          headers: {'content-type': 'application/x-www-form-urlencoded'}, body})
               .then(async r => done({status: r.status, body: await r.text()}))
               .catch(e => done({status: 0, body: String(e)}));",
            json!([
                grafana.query_range_path(),
                url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("query", TIDB_CPU.expr)
                    .append_pair("start", &TIDB_CPU.start.to_string())
                    .append_pair("end", &TIDB_CPU.end.to_string())
                    .append_pair("step", &TIDB_CPU.step_seconds.to_string())
                    .finish()
            ]),
        )
        .await;
    assert_eq!(answer["status"], 200, "{answer}");
    let body: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["data"]["result"].as_array().unwrap().len(), 56);

    session.close().await;
    assert_eq!(wait_for_chromium_count(baseline).await, baseline);
    drop(driver);
    drop(slot);
}

#[tokio::test]
async fn chromium_reports_its_version() {
    // `chromium --version` runs the browser program too: hold the slot.
    let _slot = BrowserSlot::acquire().await;
    let chromium = Chromium::find().unwrap();
    let version = chromium.version().unwrap();
    assert_eq!(version.split('.').count(), 4);
    assert!(chromium.major_version().unwrap() >= 100);
    let args = Chromium::launch_args(std::path::Path::new("/tmp/p"));
    assert!(args.contains(&"--headless=new".to_owned()));
    assert_eq!(args.last().unwrap(), "--user-data-dir=/tmp/p");
}

#[tokio::test]
async fn dropping_the_driver_kills_a_browser_left_open() {
    let slot = BrowserSlot::acquire().await;
    let baseline = chromium_process_count();
    let driver = ChromeDriver::start(&slot).await.unwrap();
    let profile = tempfile::tempdir().unwrap();
    let _session = Session::new(&driver, profile.path()).await;
    assert!(chromium_process_count() > baseline);
    // The session is never closed, as after a failing test.
    drop(driver);
    assert_eq!(wait_for_chromium_count(baseline).await, baseline);
}
