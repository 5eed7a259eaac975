//! The three managed tool packages deployed as an OpenCode workspace registers them:
//! deployable folders made by `package-tool`, a signed Ed25519 envelope each, real
//! Prometheus behind the Clinic and Manus test fronts, the Grafana test front and real
//! Chromium for Wetech, and one MCP server per package in one of two [`Shape`]s:
//! - [`Shape::Stdio`]: a local server OpenCode starts, whose secrets come from OpenCode's
//!   environment (`{env:NAME}`), never from the workspace's files;
//! - [`Shape::Remote`]: a server over Streamable HTTP started apart, in its own process
//!   with only its own variables, which OpenCode reaches with the session's token as its
//!   one credential; the runtime delivers each envelope (signed for the session) to the
//!   server.
//!
//! The three servers share one turn ledger (`EVIDENCE_TURN_LEDGER`), as the runtime of
//! one evidence turn gives them; each package also has a second envelope signed under
//! a new `policy_id`, which [`Deployment::next_turn`] puts in place of the first: the
//! next evidence pass is a new turn.
//!
//! Each server is started through a wrapper that writes its process id before it
//! becomes the package's entrypoint (`exec` keeps the id, and so does the server's own
//! re-execution with only its variables), so a test can read the environment the
//! serving process holds while OpenCode runs it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use evidence_test_support as test_support;
use evidence_test_support::{
    BrowserSlot, Chromium, ClinicFront, GRAFANA_SESSION_COOKIE_NAME, GRAFANA_SESSION_COOKIE_VALUE,
    GrafanaFront, ManusFront, Prometheus,
};
use evidence_tool::Tool;
use opencode_workspace::McpServer;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::support::{
    HttpServer, audit_records, deploy, entrypoint, limits, new_ledger, policy, runtime_env_sharing,
    sign,
};
use evidence_policy::SessionToken;

/// The id of the trusted policy of the diagnosed turn, the same in each package's
/// envelope.
pub const POLICY_ID: &str = "pol-APID-29213-e2e-1";

/// The id of the trusted policy of the next evidence turn (the extra pass).
pub const NEXT_POLICY_ID: &str = "pol-APID-29213-e2e-2";

/// The variable naming the scripted model's API key in OpenCode's environment.
pub const MODEL_KEY_ENV: &str = "SCRIPTED_MODEL_API_KEY";

/// How the packages' servers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Local servers OpenCode starts over stdio, the secrets in OpenCode's environment.
    Stdio,
    /// Servers over Streamable HTTP started apart, OpenCode holding only the session token.
    Remote,
}

/// One package as deployed and registered.
pub struct Package {
    /// Which tool binary serves it.
    pub tool: Tool,
    /// Its deployable folder.
    pub dir: PathBuf,
    /// Its audit log.
    pub audit: PathBuf,
    /// The envelope its server reads on each call.
    pub envelope: PathBuf,
    /// Its envelope of the next turn ([`NEXT_POLICY_ID`]), until it is put in place.
    pub next_envelope: PathBuf,
    /// Where its server writes its process id when it starts.
    pub pid_file: PathBuf,
    /// The server OpenCode starts.
    pub server: McpServer,
    /// The names of its own secrets (its auth binding's variables).
    pub own_secrets: Vec<&'static str>,
    /// Its server over HTTP, in the remote shape.
    pub http: Option<HttpServer>,
}

impl Package {
    /// The package identity, which is also its server's and its tool's name.
    pub fn identity(&self) -> String {
        self.tool.identity().to_string()
    }

    /// The name OpenCode gives its tool: `<server>_<tool>`.
    pub fn tool_name(&self) -> String {
        self.server.tool_name(&self.identity())
    }

    /// Its audit records so far.
    pub fn audit_records(&self) -> Vec<Value> {
        audit_records(&self.audit)
            .into_iter()
            .filter(|r| r.get("record").is_none())
            .collect()
    }
}

/// The environment the serving process of package `identity`, whose process id is in
/// `pid_file`, holds now, by variable.
pub fn serving_environment(identity: &str, pid_file: &Path) -> BTreeMap<String, String> {
    let pid = std::fs::read_to_string(pid_file)
        .unwrap_or_else(|e| panic!("{identity}: no server started ({e})"));
    let environ = std::fs::read(format!("/proc/{}/environ", pid.trim()))
        .unwrap_or_else(|e| panic!("{identity}: the server is not running ({e})"));
    environ
        .split(|b| *b == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (name, value) = entry.split_once('=').unwrap_or((&entry, ""));
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

/// The deployed packages with the real providers behind them.
pub struct Deployment {
    /// The packages, Clinic, Manus and Wetech in that order.
    pub packages: Vec<Package>,
    /// The Clinic front (bearer token, cluster path) before the main Prometheus.
    pub clinic_front: ClinicFront,
    /// The Manus front (session login) before the `vida` Prometheus.
    pub manus_front: ManusFront,
    /// The Grafana front Wetech's Chromium talks to.
    pub grafana: GrafanaFront,
    /// Every secret value, by the variable OpenCode's environment holds it in.
    pub secrets: Vec<(&'static str, String)>,
    /// Secret values that are not a whole variable (the cookie and the localStorage
    /// token inside the storage state).
    pub inner_secrets: Vec<String>,
    _main: Prometheus,
    _vida: Prometheus,
    _slot: BrowserSlot,
    /// The session's token, in the remote shape: what OpenCode holds.
    pub session: Option<SessionToken>,
    signing_material: Vec<String>,
    ledger: PathBuf,
    dir: tempfile::TempDir,
}

fn wrapper(dir: &Path, pid_file: &Path, entrypoint: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("serve");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho $$ > {}\nexec {} \"$@\"\n",
            pid_file.display(),
            entrypoint.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The local server of package `identity` OpenCode starts over stdio (through the
/// wrapper that writes its process id to `pid_file`), its runtime variables and
/// deployment configuration in its entry and its secrets named as `{env:NAME}`.
#[allow(clippy::too_many_arguments)]
fn stdio_server(
    identity: &str,
    home: &Path,
    pid_file: &Path,
    package_dir: &Path,
    signed: &crate::support::Signed,
    audit: &Path,
    ledger: &Path,
    deployment: Vec<(&'static str, String)>,
    own: &[&'static str],
) -> McpServer {
    let command = wrapper(home, pid_file, &entrypoint(package_dir));
    let mut server = McpServer::new(identity.to_owned(), command.display().to_string())
        .unwrap()
        .arg(evidence_tool::mcp::MCP_FLAG);
    for (name, value) in runtime_env_sharing(signed, audit, ledger)
        .into_iter()
        .chain(deployment)
    {
        server = server.env(name, value);
    }
    // OpenCode substitutes `{env:NAME}` into the configuration text as it is, so
    // a value holding JSON (the storage state) would break the file and OpenCode
    // would print it: that secret reaches its server through the environment
    // OpenCode starts it with, named nowhere in the configuration.
    for name in own.iter().filter(|n| **n != "WETECH_STORAGE_STATE") {
        server = server.env(*name, format!("{{env:{name}}}"));
    }
    server
}

const CLINIC_TOKEN: &str = "e2e-clinic-token-5e6f7a8b9c";
const MANUS_USER: &str = "e2e-manus-reader-7f3a2b";
const MANUS_PASSWORD: &str = "e2e-manus-password-0b9c1d2e";
const LOCAL_STORAGE_TOKEN: &str = "e2e-ls-token-4d5e6f7a8b9c";
/// The scripted model's API key: OpenCode sends it to the model, no server may hold it.
pub const MODEL_KEY: &str = "e2e-model-key-1c2d3e4f5a";

impl Deployment {
    /// Deploys the three packages (Clinic v3, Manus v2 on `vida`, Wetech v2), signs one
    /// envelope each for the APID-29213 window (for the session, in the remote shape), and
    /// starts the providers, and in the remote shape the three servers (each envelope of
    /// the first turn delivered). Holds the browser slot for Wetech's Chromium until
    /// dropped.
    pub async fn start(shape: Shape) -> Self {
        let slot = BrowserSlot::acquire().await;
        let main = Prometheus::start(test_support::Fixture::Main)
            .await
            .unwrap();
        let vida = Prometheus::start(test_support::Fixture::Vida)
            .await
            .unwrap();
        let clinic_front =
            ClinicFront::start(&main.url(), SecretString::from(CLINIC_TOKEN.to_owned()))
                .await
                .unwrap();
        let manus_front = ManusFront::start(
            "vida",
            &vida.url(),
            SecretString::from(MANUS_USER.to_owned()),
            SecretString::from(MANUS_PASSWORD.to_owned()),
        )
        .await
        .unwrap();
        let grafana = GrafanaFront::start(&main.url()).await.unwrap();
        let storage_state = json!({
            "cookies": [{"name": GRAFANA_SESSION_COOKIE_NAME, "value": GRAFANA_SESSION_COOKIE_VALUE,
                         "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": true,
                         "secure": false, "sameSite": "Lax"}],
            "origins": [{"origin": grafana.base_url(), "localStorage": [
                {"name": "grafana.auth", "value": format!("{{\"token\":\"{LOCAL_STORAGE_TOKEN}\"}}")}]}]
        })
        .to_string();
        let ref_keys = format!(
            "k1:{}",
            base64::engine::general_purpose::STANDARD.encode([7u8; 32])
        );
        let secrets = vec![
            ("CLINIC_API_TOKEN", CLINIC_TOKEN.to_owned()),
            ("MANUS_USERNAME", MANUS_USER.to_owned()),
            ("MANUS_PASSWORD", MANUS_PASSWORD.to_owned()),
            ("MANUS_REF_KEYS", ref_keys),
            ("WETECH_STORAGE_STATE", storage_state),
        ];
        let chromedriver = test_support::chromedriver_program()
            .unwrap_or_else(|e| panic!("{e}"))
            .display()
            .to_string();
        let chromium = Chromium::find().unwrap_or_else(|e| panic!("{e}"));

        let dir = tempfile::tempdir().unwrap();
        let ledger = new_ledger(dir.path());
        let session = (shape == Shape::Remote).then(SessionToken::mint);
        let mut packages = Vec::new();
        for (tool, revision, binary, extra, deployment, own) in [
            (
                Tool::Clinic,
                "v3",
                crate::support::CLINIC_TOOL,
                json!({"discovery": {"max_items": 20}}),
                vec![
                    ("CLINIC_BASE_URL", clinic_front.base_url()),
                    (
                        "CLINIC_QUERY_PATH_TEMPLATE",
                        ClinicFront::QUERY_RANGE_PATH_TEMPLATE.to_owned(),
                    ),
                ],
                vec!["CLINIC_API_TOKEN"],
            ),
            (
                Tool::Manus,
                "v2",
                crate::support::MANUS_TOOL,
                json!({"manus_target": "vida"}),
                vec![("MANUS_VIDA_URL", manus_front.base_url())],
                vec!["MANUS_USERNAME", "MANUS_PASSWORD", "MANUS_REF_KEYS"],
            ),
            (
                Tool::Wetech,
                "v2",
                crate::support::WETECH_TOOL,
                json!({"wetech_query_ids": ["tidb_cpu"],
                       "wetech_datasource": GrafanaFront::DATASOURCE_UID,
                       "limits": limits(1)}),
                vec![
                    ("WETECH_GRAFANA_URL", grafana.base_url()),
                    ("WETECH_CHROMIUM", chromium.path().display().to_string()),
                    ("WETECH_CHROMEDRIVER", chromedriver.clone()),
                ],
                vec!["WETECH_STORAGE_STATE"],
            ),
        ] {
            let identity = tool.identity().to_string();
            let home = dir.path().join(&identity);
            std::fs::create_dir_all(&home).unwrap();
            let (package_dir, _) = deploy(&home, &identity, revision, binary);
            let mut extra = extra;
            if let Some(token) = &session {
                extra["session"] = json!(token.digest().to_string());
            }
            extra["policy_id"] = json!(NEXT_POLICY_ID);
            let next = sign(
                &home,
                "next-envelope.json",
                &package_dir,
                &policy(tool.provider().as_str(), &identity, extra.clone()),
            );
            extra["policy_id"] = json!(POLICY_ID);
            // The first turn's policy was issued before the next one's: a session's
            // envelopes are ordered by when they were issued.
            let issued = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(30);
            extra["issued_at"] = json!(issued.to_string());
            let signed = sign(
                &home,
                "envelope.json",
                &package_dir,
                &policy(tool.provider().as_str(), &identity, extra),
            );
            let audit = home.join("audit.jsonl");
            let pid_file = home.join("server.pid");
            let (server, http) = if shape == Shape::Remote {
                // Its own process with only its own variables: the runtime's (no envelope
                // file), its deployment configuration and its own secrets.
                let env: Vec<(&'static str, String)> =
                    runtime_env_sharing(&signed, &audit, &ledger)
                        .into_iter()
                        .filter(|(name, _)| *name != "EVIDENCE_TRUSTED_CONTEXT")
                        .chain(deployment)
                        .chain(
                            secrets
                                .iter()
                                .filter(|(name, _)| own.contains(name))
                                .cloned(),
                        )
                        .collect();
                let http = HttpServer::start(&entrypoint(&package_dir), &env);
                std::fs::write(&pid_file, http.child.id().to_string()).unwrap();
                let first = std::fs::read_to_string(&signed.envelope).unwrap();
                let (status, answer) = http.deliver(&first, None);
                assert_eq!(status, 200, "{identity}: {answer}");
                let server = McpServer::remote(identity.clone(), http.url()).unwrap();
                (server, Some(http))
            } else {
                (
                    stdio_server(
                        &identity,
                        &home,
                        &pid_file,
                        &package_dir,
                        &signed,
                        &audit,
                        &ledger,
                        deployment,
                        &own,
                    ),
                    None,
                )
            };
            packages.push(Package {
                tool,
                dir: package_dir,
                audit,
                envelope: signed.envelope,
                next_envelope: next.envelope,
                pid_file,
                server,
                own_secrets: own,
                http,
            });
        }
        let mut signing_material = vec![crate::support::signing_key()];
        for package in &packages {
            for path in [&package.envelope, &package.next_envelope] {
                let envelope: Value =
                    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
                for part in ["signature", "payload"] {
                    signing_material.push(envelope[part].as_str().unwrap().to_owned());
                }
            }
        }
        Deployment {
            signing_material,
            packages,
            clinic_front,
            manus_front,
            grafana,
            secrets,
            inner_secrets: vec![
                GRAFANA_SESSION_COOKIE_VALUE.to_owned(),
                LOCAL_STORAGE_TOKEN.to_owned(),
            ],
            _main: main,
            _vida: vida,
            _slot: slot,
            session,
            ledger,
            dir,
        }
    }

    /// The package served by `tool`.
    pub fn package(&self, tool: Tool) -> &Package {
        self.packages.iter().find(|p| p.tool == tool).unwrap()
    }

    /// The folder holding the packages, envelopes and audit logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The turn ledger the three servers share.
    pub fn ledger(&self) -> &Path {
        &self.ledger
    }

    /// What the runtime does before the next evidence turn: it writes each package's
    /// envelope of [`NEXT_POLICY_ID`] where the package's stdio server reads its envelope,
    /// or delivers it to the package's server over HTTP (once; later calls change
    /// nothing).
    pub fn next_turn(&self) {
        for package in &self.packages {
            if !package.next_envelope.exists() {
                continue;
            }
            if let Some(http) = &package.http {
                let next = std::fs::read_to_string(&package.next_envelope).unwrap();
                let (status, answer) = http.deliver(&next, None);
                assert_eq!(status, 200, "{}: {answer}", package.identity());
                assert_eq!(answer["replaced"], POLICY_ID, "{answer}");
                std::fs::remove_file(&package.next_envelope).unwrap();
            } else {
                std::fs::rename(&package.next_envelope, &package.envelope).unwrap();
            }
        }
    }

    /// Every envelope's signature and payload and the signing key: what no process or
    /// file of the agent side may hold.
    pub fn signing_material(&self) -> &[String] {
        &self.signing_material
    }

    /// Every secret value that must appear nowhere the model, the workspace or a log
    /// can see.
    pub fn secret_values(&self) -> Vec<String> {
        self.secrets
            .iter()
            .map(|(_, v)| v.clone())
            .chain(self.inner_secrets.iter().cloned())
            .chain([MODEL_KEY.to_owned()])
            .collect()
    }

    /// The variable names of [`Self::secret_values`], in the same order.
    pub fn secret_names(&self) -> Vec<&'static str> {
        self.secrets
            .iter()
            .map(|(n, _)| *n)
            .chain([
                "WETECH_STORAGE_STATE cookie",
                "WETECH_STORAGE_STATE localStorage",
            ])
            .chain([MODEL_KEY_ENV])
            .collect()
    }

    /// The provider requests that reached each package's provider (`query_range` only).
    pub fn provider_queries(&self, tool: Tool) -> usize {
        let requests = match tool {
            Tool::Clinic => self.clinic_front.requests(),
            Tool::Manus => self.manus_front.requests(),
            Tool::Wetech => self.grafana.requests(),
        };
        requests
            .iter()
            .filter(|r| r.path.ends_with("/query_range"))
            .count()
    }
}
