//! `wetech-tool` as a process against real Chromium and ChromeDriver (Debian), the
//! Grafana test front and real Prometheus: a success, a `unit` rejection answered with no
//! browser started, and the planted session cookie blocked by the sandbox call's output
//! guard. And, in process, that nothing the lock rejects ever reaches ChromeDriver or
//! Grafana. Browser tests hold the binary's one `BrowserSlot`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use evidence_connectors::{
    BrowserConfig, HostAllowlist, WebDriverEndpoint, WetechConfig, WetechConnector, WetechSecrets,
};
use evidence_package::{Package, SecretBinding, SecretValues};
use evidence_policy::{KeyRing, TrustedPolicy};
use evidence_result::{FailureClass, Status, ToolResult};
use evidence_test_support::*;
use evidence_tool::{PolicyInput, SandboxCall, run_sandbox_call};
use proptest::prelude::*;
use secrecy::SecretString;
use serde_json::{Value, json};
use support::*;

/// The long JSON localStorage value of the storage state (its token leaf is guarded).
const RECENT_DASHBOARDS: &str =
    "{\"uid\":\"tidb-overview-01\",\"token\":\"ls-token-5d1e2f3a4b5c6d7e\",\"starred\":\"1\"}";

/// A Playwright storage state as a real Grafana login leaves it: the `httpOnly` session
/// cookie (32 hex characters, which the front checks), the script-readable
/// `grafana_session_expiry` cookie (a 10-digit epoch), a short cookie, short
/// localStorage page state (`"true"`, `"en"`) and a longer JSON localStorage value.
fn storage_state(grafana: &GrafanaFront) -> String {
    json!({
        "cookies": [
            {"name": GRAFANA_SESSION_COOKIE_NAME, "value": GRAFANA_SESSION_COOKIE_VALUE,
             "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": true,
             "secure": false, "sameSite": "Lax"},
            {"name": "grafana_session_expiry", "value": "1893456000", "domain": "127.0.0.1",
             "path": "/", "expires": 1893456000.0, "httpOnly": false, "secure": false,
             "sameSite": "Lax"},
            {"name": "grafana_lang", "value": "en", "domain": "127.0.0.1", "path": "/",
             "expires": -1, "httpOnly": false, "secure": false, "sameSite": "Lax"}
        ],
        "origins": [{"origin": grafana.base_url(), "localStorage": [
            {"name": "grafana.navigation.docked", "value": "true"},
            {"name": "grafana.preferences.language", "value": "en"},
            {"name": "grafana.dashboard.recent", "value": RECENT_DASHBOARDS}]}]
    })
    .to_string()
}

fn wetech_policy() -> Value {
    policy(
        "wetech",
        "managed_auto_oncall_wetech",
        json!({"wetech_query_ids": ["tidb_cpu", "session_canary"],
               "wetech_datasource": GrafanaFront::DATASOURCE_UID, "limits": limits(1)}),
    )
}

fn which(program: &str) -> PathBuf {
    ["/usr/bin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{program} not found: apt-get install -y chromium chromium-driver")
        })
}

struct Env {
    _prometheus: Prometheus,
    grafana: GrafanaFront,
    dir: tempfile::TempDir,
    package: PathBuf,
    signed: Signed,
}

impl Env {
    async fn start() -> Self {
        let prometheus = Prometheus::start(Fixture::Main).await.unwrap();
        let grafana = GrafanaFront::start(&prometheus.url()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (package, _) = deploy(dir.path(), "managed_auto_oncall_wetech", "v2", WETECH_TOOL);
        let signed = sign(dir.path(), "envelope.json", &package, &wetech_policy());
        Env {
            _prometheus: prometheus,
            grafana,
            dir,
            package,
            signed,
        }
    }

    fn env(&self, chromedriver: &Path) -> Vec<(&'static str, String)> {
        self.env_with(chromedriver, Chromium::find().unwrap().path())
    }

    fn env_with(&self, chromedriver: &Path, chromium: &Path) -> Vec<(&'static str, String)> {
        let mut env = runtime_env(&self.signed, &self.dir.path().join("audit.jsonl"));
        env.push(("WETECH_GRAFANA_URL", self.grafana.base_url()));
        env.push(("WETECH_STORAGE_STATE", storage_state(&self.grafana)));
        env.push(("WETECH_CHROMIUM", chromium.display().to_string()));
        env.push(("WETECH_CHROMEDRIVER", chromedriver.display().to_string()));
        env
    }

    async fn call(&self, chromedriver: &Path, args: Value) -> ToolResult {
        self.call_with(self.env(chromedriver), args).await
    }

    async fn call_with(&self, env: Vec<(&'static str, String)>, args: Value) -> ToolResult {
        let bin = entrypoint(&self.package);
        let (code, out, err) = blocking(move || run(&bin, &[], &env, &args.to_string())).await;
        assert_eq!(code, 0, "{err}");
        ToolResult::from_json(out.trim()).unwrap()
    }

    fn proxy_requests(&self) -> usize {
        let path = self.grafana.query_range_path();
        self.grafana
            .requests()
            .iter()
            .filter(|r| r.path == path)
            .count()
    }
}

/// A wrapper around `program` that records its own `/proc/<pid>/environ` into
/// `dir/environ-<name>-<pid>` and then becomes `program` (`exec` keeps the pid and the
/// environment), so the record is the environment the real process runs with.
fn environ_recorder(dir: &Path, name: &str, program: &Path) -> PathBuf {
    let wrapper = dir.join(format!("{name}-recorder"));
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncat /proc/$$/environ > {}/environ-{name}-$$\nexec {} \"$@\"\n",
            dir.display(),
            program.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

/// The environments recorded for `name`, one list of variable names per process.
fn recorded_environs(dir: &Path, name: &str) -> Vec<Vec<String>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("environ-{name}-")))
        })
        .map(|p| {
            std::fs::read(&p)
                .unwrap()
                .split(|b| *b == 0)
                .filter(|v| !v.is_empty())
                .map(|v| {
                    let v = String::from_utf8_lossy(v);
                    v.split('=').next().unwrap_or_default().to_owned()
                })
                .collect()
        })
        .collect()
}

fn no_secret_in(result: &ToolResult) {
    let json = result.to_json().unwrap();
    for secret in [GRAFANA_SESSION_COOKIE_VALUE, "ls-token-5d1e2f3a4b5c6d7e"] {
        assert!(!json.contains(secret), "secret in output: {json}");
    }
}

/// `wetech-tool` as a process, three calls. A call with a `unit` that is no label is
/// `invalid_unit` with nothing started: its ChromeDriver is a tripwire script that would
/// leave a marker file, and the marker is absent, Grafana saw no request and the count of
/// Chromium processes is unchanged. The corrected call runs in real Chromium, with
/// ChromeDriver and Chromium wrapped so that each records its own `/proc/<pid>/environ`:
/// neither holds any `EVIDENCE_*`, `WETECH_*`, `CLINIC_*` or `MANUS_*` variable. That call
/// binds a storage state as a real Grafana login leaves it (a 32-hex `httpOnly` session, a
/// 10-digit `grafana_session_expiry`, short cookie and localStorage page state, a JSON
/// localStorage value) and answers `ok`, with the short values in the browser as stored.
/// The third call's answer holds the session cookie in a metric label: the guard blocks it
/// (`output_blocked`), the audit record names the secret (`wetech_storage_state`) and the
/// model-visible result names neither the value nor the secret. The audit records list
/// the page state the binding left unguarded, never a value.
#[tokio::test]
async fn wetech_tool_process_rejects_before_any_browser_then_answers_and_blocks_a_secret() {
    let slot = BrowserSlot::acquire().await;
    let env = Env::start().await;
    let chromium_before = chromium_process_count();

    // A `unit` rejection: a ChromeDriver that marks any start proves none happened.
    let marker = env.dir.path().join("chromedriver-started");
    let tripwire = env.dir.path().join("chromedriver-tripwire");
    std::fs::write(
        &tripwire,
        format!("#!/bin/sh\ntouch {}\nexit 1\n", marker.display()),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tripwire, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let rejected = env
        .call(
            &tripwire,
            json!({"queryId": "tidb_cpu", "expr": TIDB_CPU.expr, "unit": "cores per second!"}),
        )
        .await;
    let error = rejected.details().error.as_ref().unwrap();
    assert_eq!(error.code.as_str(), "invalid_unit", "{}", rejected.text());
    assert_eq!(error.class, FailureClass::InvalidArgument);
    assert!(
        !marker.exists(),
        "ChromeDriver was started for a rejected call"
    );
    assert!(env.grafana.requests().is_empty(), "Grafana was contacted");
    assert_eq!(
        chromium_process_count(),
        chromium_before,
        "a browser started"
    );

    // The corrected call runs in a real Chromium. ChromeDriver and Chromium record the
    // environment they run with: nothing of the sandbox's policy keys or secrets.
    let chromedriver = which("chromedriver");
    let records = env.dir.path().join("environs");
    std::fs::create_dir_all(&records).unwrap();
    let driver_recorder = environ_recorder(&records, "chromedriver", &chromedriver);
    let chromium_recorder =
        environ_recorder(&records, "chromium", Chromium::find().unwrap().path());
    let result = env
        .call_with(
            env.env_with(&driver_recorder, &chromium_recorder),
            json!({"queryId": "tidb_cpu", "expr": TIDB_CPU.expr, "unit": "cores"}),
        )
        .await;
    for name in ["chromedriver", "chromium"] {
        let environs = recorded_environs(&records, name);
        assert!(!environs.is_empty(), "{name} did not start");
        for vars in environs {
            assert!(vars.iter().any(|v| v == "PATH"), "{name}: {vars:?}");
            let leaked: Vec<&String> = vars
                .iter()
                .filter(|v| {
                    ["EVIDENCE_", "WETECH_", "CLINIC_", "MANUS_"]
                        .iter()
                        .any(|p| v.starts_with(p))
                })
                .collect();
            assert!(leaked.is_empty(), "{name} inherited {leaked:?}");
        }
    }
    no_secret_in(&result);
    let d = result.details();
    assert_eq!(d.status, Status::Ok, "{}", result.text());
    let evidence = d.evidence.as_ref().unwrap();
    assert_eq!(evidence.series_count, 56);
    assert!((evidence.top_peak().unwrap() - 22.84).abs() < FIGURE_TOLERANCE);
    // The real browser holds the short page state as stored: the short cookies reached
    // Grafana with the query, and the page saw every localStorage entry.
    let cookies = env.grafana.proxy_cookies().pop().unwrap();
    for (name, value) in [
        (GRAFANA_SESSION_COOKIE_NAME, GRAFANA_SESSION_COOKIE_VALUE),
        ("grafana_session_expiry", "1893456000"),
        ("grafana_lang", "en"),
    ] {
        assert!(
            cookies.iter().any(|(n, v)| n == name && v == value),
            "{name} not sent: {cookies:?}"
        );
    }
    assert_eq!(
        env.grafana.page_local_storage().unwrap(),
        json!({"grafana.navigation.docked": "true", "grafana.preferences.language": "en",
               "grafana.dashboard.recent": RECENT_DASHBOARDS})
    );

    // The session cookie planted in a metric label: the provider answered it, the
    // sandbox call's guard withheld it.
    let blocked = env
        .call(
            &chromedriver,
            json!({"queryId": "session_canary", "expr": SESSION_CANARY.expr, "unit": "sessions"}),
        )
        .await;
    assert_eq!(env.proxy_requests(), 2);
    let error = blocked.details().error.as_ref().unwrap();
    assert_eq!(
        error.class,
        FailureClass::OutputBlocked,
        "{}",
        blocked.text()
    );
    assert!(blocked.details().evidence.is_none());
    no_secret_in(&blocked);
    let records = audit_records(&env.dir.path().join("audit.jsonl"));
    assert_eq!(records.len(), 3);
    assert_eq!(records[2]["blocked"], true);
    // Every record lists the page state the binding left unguarded, never a value.
    let origin = env.grafana.base_url();
    let unguarded: Vec<String> = serde_json::from_value(records[1]["unguarded"].clone()).unwrap();
    let expected = [
        "cookie `grafana_lang`".to_owned(),
        format!("localStorage `grafana.navigation.docked` of {origin}"),
        format!("localStorage `grafana.preferences.language` of {origin}"),
        format!("localStorage `grafana.dashboard.recent` of {origin} (JSON leaf /starred)"),
    ];
    for what in expected {
        let want = format!("wetech_storage_state: {what} (page state, shorter than 8 bytes)");
        assert!(unguarded.contains(&want), "{want} not in {unguarded:?}");
    }
    assert_eq!(unguarded.len(), 4, "{unguarded:?}");
    let line = records[1].to_string();
    assert!(
        !line.contains("\"true\"") && !line.contains(GRAFANA_SESSION_COOKIE_VALUE),
        "{line}"
    );
    // The audit record names the secret; the model sees neither its value nor its name.
    let named = records[2]["blocked_secrets"].to_string();
    assert!(named.contains("wetech_storage_state"), "{named}");
    assert!(
        !blocked.text().contains("wetech_storage_state"),
        "{}",
        blocked.text()
    );
    drop(slot);
}

/// The tool process with the ChromeDriver it spawns: a 20 MiB answer (over the former
/// 16 MiB page bound) leaves the page in chunks and is answered `ok`; an answer whose
/// connection breaks mid-body is `grafana_unavailable`, and after each call no
/// ChromeDriver or Chrome process of the call is left.
#[tokio::test]
async fn wetech_tool_process_reads_a_large_body_in_chunks_and_cleans_up_after_a_break() {
    let slot = BrowserSlot::acquire().await;
    let env = Env::start().await;
    let chromium_before = chromium_process_count();
    let drivers_before = chromedriver_process_count();
    let chromedriver = which("chromedriver");
    let args = json!({"queryId": "tidb_cpu", "expr": TIDB_CPU.expr, "unit": "cores"});

    let bytes = 20 << 20;
    let series = String::from_utf8_lossy(&oversized_matrix_body(bytes))
        .matches("{\"metric\"")
        .count() as u64;
    env.grafana
        .faults()
        .set_fault(Fault::OversizedBody { bytes });
    let result = env.call(&chromedriver, args.clone()).await;
    no_secret_in(&result);
    let d = result.details();
    assert_eq!(d.status, Status::Ok, "{}", result.text());
    let evidence = d.evidence.as_ref().unwrap();
    assert_eq!(evidence.series_count, series);
    assert_eq!(evidence.top_peak(), Some(63.5));
    assert_eq!(chromedriver_process_count(), drivers_before);
    assert_eq!(chromium_process_count(), chromium_before);

    env.grafana
        .faults()
        .set_fault(Fault::CutBody { bytes: 3 << 20 });
    let result = env.call(&chromedriver, args).await;
    let error = result.details().error.as_ref().unwrap();
    assert_eq!(
        error.code.as_str(),
        "grafana_unavailable",
        "{}",
        result.text()
    );
    assert_eq!(error.class, FailureClass::ProviderUnavailable);
    assert_eq!(chromedriver_process_count(), drivers_before);
    assert_eq!(chromium_process_count(), chromium_before);
    env.grafana.faults().clear();
    drop(slot);
}

/// Arguments the lock rejects: a unit that is no plain label, a field the platform
/// fixes, a query id the policy does not authorize, another cluster, a read outside the
/// window, PromQL that does not parse.
fn rejected_args() -> impl Strategy<Value = Value> {
    let args =
        |id: &str, expr: &str, unit: &str| json!({"queryId": id, "expr": expr, "unit": unit});
    prop_oneof![
        "[a-z]{1,8}[!@#$^&*(){}<>?;:'\"]{1,3}".prop_map(move |unit| args(
            "tidb_cpu",
            TIDB_CPU.expr,
            &unit
        )),
        prop_oneof![
            Just("provider"),
            Just("cluster"),
            Just("ticket"),
            Just("start"),
            Just("url"),
            Just("host"),
        ]
        .prop_map(move |field| {
            let mut a = args("tidb_cpu", TIDB_CPU.expr, "cores");
            a[field] = json!("SaaS99");
            a
        }),
        "[a-z]{3,10}_x".prop_map(move |id| args(&id, TIDB_CPU.expr, "cores")),
        "[A-Za-z0-9]{3,8}"
            .prop_filter("another cluster", |c| c != CPU_CLUSTER)
            .prop_map(move |c| args("tidb_cpu", &format!("up{{cluster_id=\"{c}\"}}"), "cores")),
        (2u32..400).prop_map(move |d| args(
            "tidb_cpu",
            &format!("rate(process_cpu_seconds_total[5m] offset {d}d)"),
            "cores"
        )),
        "[a-z_]{1,10}\\(\\[".prop_map(move |expr| args("tidb_cpu", &expr, "cores")),
    ]
}

/// The Wetech package deployed in a temporary folder, its secrets bound, and a signed
/// envelope for it: the in-process sandbox call's inputs.
struct InProcess {
    _dir: tempfile::TempDir,
    package: Package,
    binding: SecretBinding,
    keys: KeyRing,
    envelope: evidence_policy::SignedPolicy,
    state: String,
}

/// Built once for all cases: packaging copies the whole binary.
fn in_process() -> &'static InProcess {
    static SETUP: std::sync::OnceLock<InProcess> = std::sync::OnceLock::new();
    SETUP.get_or_init(build_in_process)
}

fn build_in_process() -> InProcess {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = deploy(dir.path(), "managed_auto_oncall_wetech", "v2", WETECH_TOOL);
    let package = Package::load(&path).unwrap();
    let state = json!({"cookies": [{"name": GRAFANA_SESSION_COOKIE_NAME,
        "value": GRAFANA_SESSION_COOKIE_VALUE, "domain": "127.0.0.1", "path": "/"}]})
    .to_string();
    let mut values = SecretValues::new();
    values.insert("wetech_storage_state", SecretString::from(state.clone()));
    let binding = SecretBinding::bind(&package, values).unwrap();
    let keys: KeyRing = policy_keys().parse().unwrap();
    let signer = test_signer();
    let policy: TrustedPolicy = serde_json::from_value(wetech_policy()).unwrap();
    let envelope = signer.sign(&policy, package.digest()).unwrap();
    InProcess {
        _dir: dir,
        package,
        binding,
        keys,
        envelope,
        state,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the lock rejects is answered by the sandbox call without contacting the
    /// WebDriver server or Grafana, or creating a browser profile.
    #[test]
    fn rejected_calls_never_start_a_browser(bad in rejected_args()) {
        let setup = in_process();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let tripwire = TcpListener::bind("127.0.0.1:0").unwrap();
            tripwire.set_nonblocking(true).unwrap();
            let grafana = TcpListener::bind("127.0.0.1:0").unwrap();
            grafana.set_nonblocking(true).unwrap();
            let profiles = tempfile::tempdir().unwrap();
            let config = WetechConfig::new(
                url::Url::parse(&format!("http://{}", grafana.local_addr().unwrap())).unwrap(),
                HostAllowlist::new(["127.0.0.1"]).unwrap(),
                BrowserConfig::new(
                    "/usr/bin/chromium",
                    WebDriverEndpoint::Attach {
                        url: url::Url::parse(&format!("http://{}", tripwire.local_addr().unwrap())).unwrap(),
                    },
                )
                .with_profile_parent(profiles.path()),
            );
            let secrets = WetechSecrets::new(SecretString::from(setup.state.clone()));
            let args = bad.to_string();
            let outcome = run_sandbox_call(&WetechConnector::new(), &config, &secrets, SandboxCall {
                package: &setup.package,
                binding: &setup.binding,
                policy: PolicyInput::Envelope { envelope: &setup.envelope, keys: &setup.keys, session: None },
                args: &args,
                now: jiff::Timestamp::now(),
            })
            .await
            .unwrap();
            let class = outcome.result.details().error.as_ref().unwrap().class;
            assert!(
                matches!(class, FailureClass::InvalidArgument | FailureClass::PolicyViolation),
                "{}", outcome.result.text()
            );
            for listener in [&tripwire, &grafana] {
                assert!(matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock));
            }
            assert_eq!(std::fs::read_dir(profiles.path()).unwrap().count(), 0);
        });
    }
}

/// The processes below `root` (children, their children, ...), with their command lines.
fn descendants(root: u32) -> Vec<(u32, String)> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
            let state = rest.next()?;
            (state != "Z").then_some((pid, rest.next()?.parse().ok()?))
        })
        .collect();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    tree.into_iter()
        .skip(1)
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            (pid, String::from_utf8_lossy(&cmdline).replace('\0', " "))
        })
        .collect()
}

/// `wetech-tool --mcp-http` keeps one browser warm: calls of one protocol session and of
/// another (each session its own token and envelope) run in the same browser, each in a
/// browser context of its own, and the landing page of each finds nothing an earlier
/// call's page set (the Grafana front's isolation probe: cookie, localStorage,
/// sessionStorage, IndexedDB, Cache Storage, service worker, named window, broadcast
/// channel). SIGTERM ends the server with its browser: no process of it is left, and
/// no profile folder.
#[tokio::test]
async fn wetech_server_keeps_one_browser_warm_and_leaves_nothing_at_sigterm() {
    let _slot = BrowserSlot::acquire().await;
    let env = Env::start().await;
    env.grafana.set_isolation_probe(true);
    let server = HttpServer::start(
        &entrypoint(&env.package),
        &http_env(&env.env(&which("chromedriver"))),
    );
    let here = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    let package = "managed_auto_oncall_wetech";
    let session = |policy_id: &str| {
        let token = evidence_policy::SessionToken::mint();
        let extra = json!({"policy_id": policy_id,
                           "wetech_query_ids": ["tidb_cpu", "session_canary"],
                           "wetech_datasource": GrafanaFront::DATASOURCE_UID,
                           "limits": limits(1)});
        let policy = session_policy_of("wetech", package, &token, extra);
        let (status, answer) = server.deliver(&sign_session(&env.package, &policy), None);
        assert_eq!(status, 200, "{answer}");
        token
    };
    let (first, second) = (session("pol-warm-1"), session("pol-warm-2"));
    // The canary's answer carries the session cookie's value: the output guard still
    // blocks it (and that stops the first session's turn).
    let calls = [
        (
            &first,
            json!({"queryId": "tidb_cpu", "expr": TIDB_CPU.expr, "unit": "cores"}),
            "ok",
        ),
        (
            &first,
            json!({"queryId": "session_canary", "expr": SESSION_CANARY.expr, "unit": "sessions"}),
            "output_blocked",
        ),
        (
            &second,
            json!({"queryId": "tidb_cpu", "expr": TIDB_CPU.expr, "unit": "cores"}),
            "ok",
        ),
    ];
    let mut browsers = Vec::new();
    for (token, args, expected) in calls {
        let id = support::raw::open_session(server.addr, here).await;
        let reply =
            support::raw::call_tool(server.addr, here, &id, Some(token.expose()), package, args)
                .await;
        let details = &reply.message()["result"]["structuredContent"];
        let outcome = details["error"]["code"].as_str().unwrap_or("ok");
        assert_eq!(outcome, expected, "{:?}", reply.message());
        let text = reply.message().to_string();
        assert!(!text.contains(GRAFANA_SESSION_COOKIE_VALUE), "{text}");
        let chrome: Vec<_> = descendants(server.child.id())
            .into_iter()
            .filter(|(_, cmd)| cmd.contains("--user-data-dir=") && !cmd.contains("--type="))
            .collect();
        assert_eq!(chrome.len(), 1, "one warm browser: {chrome:?}");
        browsers.push(chrome[0].clone());
    }
    assert!(browsers.iter().all(|b| *b == browsers[0]), "{browsers:?}");
    let reports = env.grafana.isolation_reports();
    assert_eq!(reports.len(), 3);
    for report in &reports {
        let listed = |field: &str| report[field].as_array().unwrap().clone();
        for field in ["session", "indexeddb", "caches", "workers", "broadcast"] {
            assert!(
                listed(field).is_empty(),
                "{field} left by an earlier call: {report}"
            );
        }
        for field in ["cookies", "local"] {
            assert!(
                listed(field)
                    .iter()
                    .all(|n| !n.as_str().unwrap().starts_with("planted_")),
                "{field} left by an earlier call: {report}"
            );
        }
        assert_eq!(report["window"], Value::Null, "{report}");
        assert_eq!(
            report["planted"],
            json!(["indexeddb", "cache", "worker", "window"])
        );
    }

    let profile = browsers[0]
        .1
        .split_whitespace()
        .find_map(|a| a.strip_prefix("--user-data-dir="))
        .map(PathBuf::from)
        .unwrap();
    assert!(profile.exists());
    let tree: Vec<u32> = descendants(server.child.id())
        .iter()
        .map(|(p, _)| *p)
        .collect();
    assert!(!tree.is_empty());
    let status = server.terminate();
    assert!(status.success(), "{status}");
    let alive: Vec<_> = tree
        .iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s[s.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'))
        })
        .collect();
    assert!(alive.is_empty(), "processes left after SIGTERM: {alive:?}");
    assert!(
        !profile.exists(),
        "profile left after SIGTERM: {}",
        profile.display()
    );
    assert!(!profile.parent().unwrap().exists(), "{}", profile.display());
}
