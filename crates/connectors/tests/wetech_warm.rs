//! The warm Wetech browser of a server against real parts: Chromium and ChromeDriver
//! (Debian), a real Prometheus and the Grafana test front with its isolation probe (the
//! landing page reports what an earlier page left, names only, then plants a cookie, a
//! `localStorage`, a `sessionStorage`, an IndexedDB, a Cache Storage entry, a service
//! worker and a named window). One browser serves the calls of a test, each call in a
//! browser context of its own. Browser tests hold the binary's one `BrowserSlot`.
#![cfg(feature = "wetech")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read as _, Write as _};
use std::time::Duration;

use evidence_connectors::{
    BrowserConfig, BrowserReuse, Connector, Deadline, HostAllowlist, WebDriverEndpoint,
    WetechConfig, WetechConnector, WetechSecrets,
};
use evidence_policy::{LockedRequest, ScopeBinding, TrustedPolicy, lock, lock::ScopeValue};
use evidence_result::{PolicySource, Status, ToolResult};
use evidence_test_support::*;
use secrecy::SecretString;
use serde_json::{Value, json};
use url::Url;

fn locked() -> LockedRequest {
    let mut v = evidence_test_support::policy::apid_29213_policy("wetech").unwrap();
    v["policy_id"] = json!("pol-APID-29213-wetech");
    v["wetech_query_ids"] = json!(["tidb_cpu"]);
    v["wetech_datasource"] = json!(GrafanaFront::DATASOURCE_UID);
    v["limits"]["max_batch"] = json!(1);
    let policy: TrustedPolicy = serde_json::from_value(v).unwrap();
    let args = json!({"queryId": "tidb_cpu", "expr": TIDB_CPU.expr, "unit": "cores"});
    let scope = [ScopeBinding::new("cluster_id", ScopeValue::ClusterId).unwrap()];
    lock(&policy, PolicySource::TrustedEnvelope, &args, &scope).unwrap()
}

/// The storage state of one package deployment: the front's session cookie, plus a
/// script-readable cookie and a localStorage entry named after `deployment`.
fn deployment(grafana: &GrafanaFront, deployment: &str) -> WetechSecrets {
    let state = json!({
        "cookies": [
            {"name": GRAFANA_SESSION_COOKIE_NAME, "value": GRAFANA_SESSION_COOKIE_VALUE,
             "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": true,
             "secure": false, "sameSite": "Lax"},
            {"name": format!("deploy_{deployment}"), "value": format!("cookie-{deployment}-0123456789"),
             "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": false,
             "secure": false, "sameSite": "Lax"}
        ],
        "origins": [{"origin": grafana.base_url(), "localStorage": [
            {"name": format!("deploy.{deployment}"), "value": format!("local-{deployment}-0123456789")}
        ]}]
    });
    WetechSecrets::new(SecretString::from(state.to_string()))
}

/// Real Prometheus, the Grafana front with the probe on, a ChromeDriver, the
/// configuration attached to it, and the folder of the browser profiles.
struct Env {
    _prometheus: Prometheus,
    grafana: GrafanaFront,
    driver: ChromeDriver,
    config: WetechConfig,
    profiles: tempfile::TempDir,
}

impl Env {
    async fn start(slot: &BrowserSlot) -> Self {
        let prometheus = Prometheus::start(Fixture::Main).await.unwrap();
        let grafana = GrafanaFront::start(&prometheus.url()).await.unwrap();
        grafana.set_isolation_probe(true);
        let driver = ChromeDriver::start(slot).await.unwrap();
        let profiles = tempfile::tempdir().unwrap();
        let url = Url::parse(&grafana.base_url()).unwrap();
        let allow = format!("127.0.0.1:{}", url.port().unwrap());
        let config = WetechConfig::new(
            url,
            HostAllowlist::new([allow]).unwrap(),
            BrowserConfig::new(
                Chromium::find().unwrap().path(),
                WebDriverEndpoint::Attach {
                    url: Url::parse(&driver.url()).unwrap(),
                },
            )
            .with_profile_parent(profiles.path()),
        );
        Env {
            _prometheus: prometheus,
            grafana,
            driver,
            config,
            profiles,
        }
    }

    async fn call(&self, connector: &WetechConnector, secrets: &WetechSecrets) -> ToolResult {
        let deadline = Deadline::after(Duration::from_secs(60));
        connector
            .call_within(&locked(), &self.config, secrets, &deadline)
            .await
            .unwrap()
    }

    /// The browser processes the driver started (its Chromium children).
    fn browsers(&self) -> Vec<u32> {
        let driver = self.driver.pid().unwrap();
        processes()
            .into_iter()
            .filter(|(_, parent, comm)| *parent == driver && comm.starts_with("chrom"))
            .map(|(pid, _, _)| pid)
            .collect()
    }

    /// The Grafana pages of the one browser's DevTools endpoint, every context's (not the
    /// session's own page, nor the page readied for the next call, blank or on Grafana's
    /// health page).
    fn pages(&self) -> usize {
        let profiles: Vec<_> = std::fs::read_dir(self.profiles.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(profiles.len(), 1, "one warm browser: {profiles:?}");
        let port = std::fs::read_to_string(profiles[0].join("profile/DevToolsActivePort"))
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_owned();
        // DevTools' HTTP server keeps the connection open: read by Content-Length.
        let mut stream = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        write!(stream, "GET /json/list HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        let mut buf = [0u8; 65536];
        let body = loop {
            let n = stream.read(&mut buf).unwrap();
            assert!(n > 0, "DevTools closed the connection");
            answer.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&answer).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap();
                if body.len() >= length {
                    break body.to_owned();
                }
            }
        };
        let list: Value = serde_json::from_str(&body).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .filter(|t| {
                let url = t["url"].as_str().unwrap();
                t["type"] == "page" && url.starts_with("http") && !url.ends_with("/api/health")
            })
            .count()
    }

    fn reports(&self) -> Vec<Value> {
        self.grafana.isolation_reports()
    }

    fn assert_nothing_left(&self) {
        assert!(
            self.browsers().is_empty(),
            "browsers left: {:?}",
            self.browsers()
        );
        let left: Vec<_> = std::fs::read_dir(self.profiles.path()).unwrap().collect();
        assert!(left.is_empty(), "profiles left: {left:?}");
    }
}

/// Every process: (pid, parent pid, command name).
fn processes() -> Vec<(u32, u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let open = stat.find('(')?;
            let close = stat.rfind(')')?;
            let mut rest = stat[close + 1..].split_whitespace();
            let state = rest.next()?;
            let parent = rest.next()?.parse().ok()?;
            (state != "Z").then(|| (pid, parent, stat[open + 1..close].to_owned()))
        })
        .collect()
}

fn assert_ok(result: &ToolResult) {
    assert_eq!(result.details().status, Status::Ok, "{}", result.text());
    let json = result.to_json().unwrap();
    for secret in [GRAFANA_SESSION_COOKIE_VALUE, "0123456789"] {
        assert!(!json.contains(secret), "secret in output: {json}");
    }
}

fn names(report: &Value, field: &str) -> Vec<String> {
    report[field]
        .as_array()
        .unwrap_or_else(|| panic!("{field} in {report}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// A page found nothing of an earlier visit's: no planted cookie, localStorage,
/// sessionStorage, IndexedDB, cache or service worker, no named window, nobody on the
/// broadcast channel; and every kind of thing was planted by it.
fn assert_clean(report: &Value) {
    for field in ["cookies", "local", "session", "indexeddb", "caches"] {
        let planted: Vec<_> = names(report, field)
            .into_iter()
            .filter(|n| n.starts_with("planted_"))
            .collect();
        assert!(
            planted.is_empty(),
            "{field} left by an earlier call: {report}"
        );
    }
    assert!(names(report, "session").is_empty(), "{report}");
    assert!(names(report, "indexeddb").is_empty(), "{report}");
    assert!(names(report, "caches").is_empty(), "{report}");
    assert!(names(report, "workers").is_empty(), "{report}");
    assert_eq!(report["window"], Value::Null, "{report}");
    assert!(names(report, "broadcast").is_empty(), "{report}");
    assert_eq!(
        names(report, "planted"),
        ["indexeddb", "cache", "worker", "window"],
        "{report}"
    );
}

/// One warm browser serves call after call; each call's page finds nothing an earlier
/// call's page set (cookie, localStorage, sessionStorage, IndexedDB, Cache Storage,
/// service worker), no window or tab of another context (a named window, a
/// `BroadcastChannel` listener), and nothing of another deployment's storage state.
/// Two calls at once get two browsers. Closing leaves no process and no profile.
#[tokio::test]
async fn each_call_of_a_warm_browser_runs_in_a_fresh_context() {
    let slot = BrowserSlot::acquire().await;
    let env = Env::start(&slot).await;
    let connector = WetechConnector::warm(BrowserReuse::default());
    let a = deployment(&env.grafana, "a");
    let b = deployment(&env.grafana, "b");

    for _ in 0..2 {
        assert_ok(&env.call(&connector, &a).await);
    }
    let browser = env.browsers();
    assert_eq!(browser.len(), 1, "one warm browser");
    assert_ok(&env.call(&connector, &b).await);
    assert_eq!(
        env.browsers(),
        browser,
        "the same browser served every call"
    );
    assert_eq!(env.pages(), 0, "no call's page is left");

    let reports = env.reports();
    assert_eq!(reports.len(), 3);
    for report in &reports {
        assert_clean(report);
    }
    // Each deployment's page holds its own storage state and nothing of the other's.
    for (report, own, other) in [(&reports[1], "a", "b"), (&reports[2], "b", "a")] {
        assert!(
            names(report, "cookies").contains(&format!("deploy_{own}")),
            "{report}"
        );
        assert!(
            names(report, "local").contains(&format!("deploy.{own}")),
            "{report}"
        );
        assert!(
            !names(report, "cookies").contains(&format!("deploy_{other}")),
            "{report}"
        );
        assert!(
            !names(report, "local").contains(&format!("deploy.{other}")),
            "{report}"
        );
    }
    let sent = env.grafana.proxy_cookies();
    assert!(
        sent[2].iter().all(|(name, _)| name != "deploy_a"),
        "{:?}",
        sent[2]
    );

    // Two calls at once: two browsers, two contexts, neither sees the other.
    let (first, second) = tokio::join!(env.call(&connector, &a), env.call(&connector, &b));
    assert_ok(&first);
    assert_ok(&second);
    assert_eq!(env.browsers().len(), 2, "two calls at once, two browsers");
    for report in &env.reports()[3..] {
        assert_clean(report);
    }

    connector.close().await.unwrap();
    env.assert_nothing_left();
    drop(slot);
}

/// A call cut off at its deadline (its future dropped, as a server that gives up on a
/// connector drops it) leaves its context behind, and it is gone before the next call
/// starts. A browser that dies during a call answers `wetech_browser_lost`, and the next
/// call gets a new browser; so does the call after `max_calls`.
#[tokio::test]
async fn cut_off_lost_and_worn_browsers_leave_nothing_to_the_next_call() {
    let slot = BrowserSlot::acquire().await;
    let env = Env::start(&slot).await;
    let connector = WetechConnector::warm(BrowserReuse {
        max_calls: 3,
        ..BrowserReuse::default()
    });
    let state = deployment(&env.grafana, "a");
    assert_ok(&env.call(&connector, &state).await);
    let first = env.browsers();

    // Cut off on a landing page that never finishes loading.
    env.grafana.set_page_stalled(true);
    let cut = tokio::time::timeout(Duration::from_secs(3), env.call(&connector, &state)).await;
    assert!(cut.is_err(), "the call was cut off");
    assert_eq!(env.pages(), 1, "the cut-off call's page is still there");
    env.grafana.set_page_stalled(false);
    assert_ok(&env.call(&connector, &state).await);
    assert_clean(env.reports().last().unwrap());
    assert_eq!(env.pages(), 0, "the cut-off call's page is gone");
    assert_eq!(env.browsers(), first, "the same browser");
    // Its third call: worn out, it is ended after it, and the next call has a new
    // browser.
    assert_ok(&env.call(&connector, &state).await);
    assert!(env.browsers().is_empty(), "ended after max_calls");
    assert_ok(&env.call(&connector, &state).await);
    let second = env.browsers();
    assert_eq!(second.len(), 1);
    assert_ne!(second, first, "a new browser after max_calls");

    // The browser dies during a call.
    env.grafana.faults().set_delay(Duration::from_secs(3));
    let call = env.call(&connector, &state);
    let kill = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        kill(second[0]);
    };
    let (lost, ()) = tokio::join!(call, kill);
    env.grafana.faults().clear();
    let error = lost.details().error.clone().unwrap();
    assert_eq!(
        error.code.as_str(),
        "wetech_browser_lost",
        "{}",
        lost.text()
    );
    assert_ok(&env.call(&connector, &state).await);
    let third = env.browsers();
    assert_eq!(third.len(), 1);
    assert_ne!(third, second, "a new browser after the lost one");
    assert_clean(env.reports().last().unwrap());

    connector.close().await.unwrap();
    env.assert_nothing_left();
    drop(slot);
}

fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}
