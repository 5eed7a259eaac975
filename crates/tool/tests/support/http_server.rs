//! A package's MCP server over Streamable HTTP as a test starts it: its own process with
//! exactly the environment given, on a free loopback port with its operator listener on
//! another, and the runtime's delivery of an envelope to it (`POST /envelopes` on the
//! operator listener, with curl).

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use evidence_tool::mcp::{ENVELOPES_PATH, MCP_HTTP_FLAG, OPERATOR_FLAG};
use serde_json::{Value, json};

/// A package server over HTTP, started with exactly `env` (plus `PATH`) on
/// `127.0.0.1:0` (or with the arguments given); killed when dropped.
pub struct HttpServer {
    /// The serving process.
    pub child: Child,
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The operator listener's address (where envelopes are delivered), when it has one.
    pub operator: Option<SocketAddr>,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// Every stderr line so far.
    pub lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl HttpServer {
    /// Starts `bin --mcp-http 127.0.0.1:0 --operator 127.0.0.1:0` with exactly `env`
    /// (plus `PATH`).
    pub fn start(bin: &Path, env: &[(&'static str, String)]) -> HttpServer {
        HttpServer::start_with(
            bin,
            &[MCP_HTTP_FLAG, "127.0.0.1:0", OPERATOR_FLAG, "127.0.0.1:0"],
            env,
        )
    }

    /// Starts `bin` with `args` and exactly `env` (plus `PATH`).
    pub fn start_with(bin: &Path, args: &[&str], env: &[(&'static str, String)]) -> HttpServer {
        let mut child = Command::new(bin)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The server names the address it bound on stderr once it listens.
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("server: {line}");
                kept.lock().unwrap().push(line.clone());
                let _sent = tx.send(line);
            }
        });
        let mut seen = Vec::new();
        let mut operator = None;
        let (scheme, addr) = loop {
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(line) => {
                    // A JSON log line (the default) says it in its message.
                    let line = serde_json::from_str::<Value>(&line)
                        .ok()
                        .and_then(|v| v["message"].as_str().map(str::to_owned))
                        .unwrap_or(line);
                    // The operator listener is named first, then the MCP endpoint.
                    if line.contains(&format!("{OPERATOR_FLAG}: serving ")) {
                        let url = line.split("://").nth(1).unwrap();
                        operator = Some(url.parse().unwrap());
                        continue;
                    }
                    if let Some(url) = line.split("serving ").nth(1) {
                        let (scheme, rest) = url.split_once("://").unwrap();
                        let scheme = if scheme == "https" { "https" } else { "http" };
                        let addr = rest.strip_suffix("/mcp").unwrap();
                        break (scheme, addr.parse().unwrap());
                    }
                    seen.push(line);
                }
                Err(e) => {
                    let _killed = child.kill();
                    panic!("the server did not say it listens ({e}): {seen:?}");
                }
            }
        };
        HttpServer {
            child,
            addr,
            operator,
            scheme,
            lines,
        }
    }

    /// The MCP endpoint's URL.
    pub fn url(&self) -> String {
        format!("{}://{}/mcp", self.scheme, self.addr)
    }

    /// Delivers `envelope` as the runtime does (`POST /envelopes` on the operator
    /// listener, or on the MCP port of a server without one, with curl, trusting `ca_file`
    /// over HTTPS); returns the status and the JSON answer.
    pub fn deliver(&self, envelope: &str, ca_file: Option<&Path>) -> (u16, Value) {
        deliver_to(
            &format!(
                "{}://{}{ENVELOPES_PATH}",
                self.scheme,
                self.operator.unwrap_or(self.addr)
            ),
            envelope,
            ca_file,
        )
    }

    /// SIGTERM; waits (at most 10 s) for the exit.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let kill = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the server did not exit within 10 s of SIGTERM");
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        super::stop::stop(&mut self.child);
    }
}

/// `POST`s `envelope` to `url` with curl; returns the status and the JSON answer.
pub fn deliver_to(url: &str, envelope: &str, ca_file: Option<&Path>) -> (u16, Value) {
    let mut curl = Command::new("curl");
    curl.args(["-sS", "-X", "POST", "-H", "Content-Type: application/json"])
        .args(["--data-binary", "@-", "-w", "\n%{http_code}"]);
    if let Some(ca) = ca_file {
        curl.arg("--cacert").arg(ca);
    }
    let mut child = curl
        .arg(url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("curl (apt-get install curl; bash scripts/test.sh installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(envelope.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap();
    (
        status.parse().unwrap(),
        serde_json::from_str(body).unwrap_or(json!(body)),
    )
}
