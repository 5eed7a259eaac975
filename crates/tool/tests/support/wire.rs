//! A raw JSON-RPC line client of a tool's MCP server over stdio, for tests that need the
//! wire itself (message order, concurrency, several calls in flight) rather than the
//! official SDK's view of it.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// One server process spoken to line by line (JSON-RPC over stdio, as the transport
/// defines it), to see results exactly as they go on the wire.
pub struct Wire {
    pub child: std::process::Child,
    pub stdin: std::process::ChildStdin,
    pub stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Wire {
    /// The Clinic server `bin` with a complete runtime context that reaches no provider
    /// ([`super::ready_env`]).
    pub fn start_clinic(bin: &Path) -> Self {
        Self::start_with(bin, &super::ready_env("managed_auto_oncall_clinic"))
    }

    pub fn start_with(bin: &Path, env: &[(&'static str, String)]) -> Self {
        let mut command = Command::new(bin);
        command
            .arg("--mcp")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        Self::spawn(command)
    }

    pub fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        Wire {
            child,
            stdin,
            stdout,
        }
    }

    /// The 2025-11-25 handshake: `initialize` (id 0), then `notifications/initialized`.
    pub fn initialize(&mut self) {
        self.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "wire-test", "version": "1"}}),
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send(&mut self, message: Value) {
        use std::io::Write as _;
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message the server writes (a response or a notification); fails when
    /// the server ended instead.
    pub fn next_message(&mut self) -> Value {
        use std::io::BufRead as _;
        let mut line = String::new();
        assert!(
            self.stdout.read_line(&mut line).unwrap() > 0,
            "the server ended"
        );
        serde_json::from_str(&line).unwrap()
    }

    /// Sends request `id` and returns its response (skipping notifications).
    pub fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.next_message();
            if message["id"] == id {
                return message;
            }
        }
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        super::stop::stop(&mut self.child);
    }
}
