//! The official Python MCP SDK (`mcp` 2.3.0 in the venv `scripts/test.sh` makes) as the
//! tests' client: where its Python is, and running the committed client script
//! (`tests/mcp_client.py`) with a plan.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The environment variable naming the Python of the venv with the MCP SDK.
const PYTHON_ENV: &str = "EVIDENCE_MCP_PYTHON";
/// The pinned SDK `scripts/test.sh` installs.
const INSTALL: &str = "python3 -m venv .tools/venv && .tools/venv/bin/pip install mcp==2.3.0 (or run scripts/test.sh)";

/// The Python with the MCP SDK: `EVIDENCE_MCP_PYTHON`, by default the workspace venv.
pub fn python() -> PathBuf {
    let python = std::env::var_os(PYTHON_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/venv/bin/python")
        });
    let probe = Command::new(&python)
        .args([
            "-c",
            "import mcp, importlib.metadata as m; print(m.version('mcp'))",
        ])
        .output();
    match probe {
        Ok(out) if out.status.success() => python,
        _ => panic!(
            "no Python with the MCP SDK at {} ({PYTHON_ENV}): {INSTALL}",
            python.display()
        ),
    }
}

/// Runs the committed client script with `plan`; returns its JSON output.
pub fn run_client(plan: &Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let mut child = Command::new(python())
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(plan.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the MCP client failed:\n{stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("client output is not JSON ({e}):\n{stderr}"))
}
