//! Running one session: the shell blocks of one `session=` name, in the order of the
//! Markdown file that holds them, as one `bash -euo pipefail` script from the repository
//! root, exactly as written.
//!
//! What the test adapts is only what the file leaves to its reader through variables
//! it sets itself (`PORT=${PORT:-19090}`, `MCP_PYTHON=${MCP_PYTHON:-...}`,
//! `OPENCODE_BIN`): the test gives a free port, the pinned Python MCP SDK's venv and the
//! pinned OpenCode. Every session runs with its own temporary folder (`TMPDIR`, so each
//! `mktemp -d` is fresh and removed afterwards) and its own `HOME` and XDG folders (the
//! user's OpenCode configuration is never read; Cargo's and rustup's homes are kept),
//! with OpenCode's offline switches set. A Python block with `file=NAME` is saved under
//! that name where the script stands when it reaches the block, as the file tells the
//! reader to; a `json` block with `matches=PATH` gets a copy of that file made at that
//! point of the script, for the comparison afterwards. The script runs in its own
//! process group, which is stopped afterwards, so a server a block left running (or a
//! session that failed half-way) leaves nothing behind.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::blocks::Block;

/// The repository root: where the documented commands start.
pub(crate) const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// How long one session may run.
const SESSION_TIMEOUT: Duration = Duration::from_secs(600);

/// A program a session needs, and how to install it when it is missing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Program {
    /// The program name, looked up on `PATH`.
    pub(crate) name: &'static str,
    /// The command that installs it.
    pub(crate) install: &'static str,
}

/// The programs of `apt-get install -y prometheus`.
pub(crate) const PROMETHEUS: [Program; 2] = [
    Program {
        name: "prometheus",
        install: "apt-get install -y prometheus",
    },
    Program {
        name: "promtool",
        install: "apt-get install -y prometheus",
    },
];
/// Chromium and ChromeDriver, for Wetech.
pub(crate) const CHROMIUM: [Program; 2] = [
    Program {
        name: "chromium",
        install: "apt-get install -y chromium chromium-driver",
    },
    Program {
        name: "chromedriver",
        install: "apt-get install -y chromium chromium-driver",
    },
];
/// Redis, for the turn ledger of replicas on several hosts (the first hour).
pub(crate) const REDIS: [Program; 2] = [
    Program {
        name: "redis-server",
        install: "apt-get install -y redis-server",
    },
    Program {
        name: "redis-cli",
        install: "apt-get install -y redis-server",
    },
];
/// openssl, for the deployment guide's private CA.
pub(crate) const OPENSSL: Program = Program {
    name: "openssl",
    install: "apt-get install -y openssl",
};
/// curl, for the readiness wait of the Clinic demo.
pub(crate) const CURL: Program = Program {
    name: "curl",
    install: "apt-get install -y curl",
};

/// `program` on `PATH`, or a failure naming its install command.
pub(crate) fn require(program: Program) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(program.name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{}` is not installed (the documented commands need it): {} (bash scripts/test.sh installs it)",
                program.name, program.install
            )
        })
}

/// The Python of the pinned MCP SDK venv the test command makes.
pub(crate) fn mcp_python() -> PathBuf {
    let python = std::env::var_os("EVIDENCE_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(ROOT).join(".tools/venv/bin/python"));
    assert!(
        python.is_file(),
        "no Python with the MCP SDK at {}: python3 -m venv .tools/venv && .tools/venv/bin/pip install mcp==2.3.0 \
         (bash scripts/test.sh does this), or set EVIDENCE_MCP_PYTHON",
        python.display()
    );
    python
}

/// The pinned OpenCode the test command installs.
pub(crate) fn opencode() -> PathBuf {
    opencode_workspace::internal::pinned_opencode().unwrap_or_else(|e| panic!("{e}"))
}

/// A free loopback port (bound, then released).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

/// What a session printed, and the copies its `matches=` blocks asked for (removed with
/// the session's folder when this is dropped).
#[derive(Debug)]
pub(crate) struct Outcome {
    /// Standard output, without terminal colours.
    pub(crate) stdout: String,
    /// Standard error.
    pub(crate) stderr: String,
    dir: tempfile::TempDir,
}

impl Outcome {
    /// The copy made for the `json` block at line `line` of the session's file.
    pub(crate) fn copy(&self, line: usize) -> PathBuf {
        self.dir.path().join("copies").join(format!("{line}.json"))
    }
}

/// The script of a session: its blocks in order, each announced on stderr.
fn script(name: &str, blocks: &[&Block]) -> String {
    let mut script = String::from("set -euo pipefail\n");
    for block in blocks {
        let _ = writeln!(
            script,
            "printf '%s\\n' '--- {} (session {name})' >&2",
            block.at()
        );
        match (
            block.lang.as_str(),
            block.attr("file"),
            block.attr("matches"),
        ) {
            ("python" | "py", Some(file), _) => {
                let _ = write!(
                    script,
                    "cat > {file} <<'README_FILE_END'\n{}README_FILE_END\n",
                    block.text
                );
            }
            ("json", _, Some(path)) => {
                let _ = writeln!(
                    script,
                    "cp -- {path} \"$README_TEST_COPIES/{}.json\"",
                    block.line
                );
            }
            _ => script.push_str(&block.text),
        }
    }
    script
}

/// Stops every process of the group `pgid`: SIGTERM, then SIGKILL for what is left.
fn stop_group(pgid: u32) {
    let group = format!("-{pgid}");
    let signal = |sig: &str| {
        Command::new("kill")
            .args([sig, "--", &group])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !signal("-TERM") {
        return; // nothing left
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !signal("-0") {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    signal("-KILL");
}

/// Runs the session `name` made of `blocks` with `vars` added to its environment;
/// fails the test when the script fails, with its output and the block it was in.
pub(crate) fn run(name: &str, blocks: &[&Block], vars: &[(&str, &OsStr)]) -> Outcome {
    assert!(
        !blocks.is_empty(),
        "no Markdown file has a block of session {name}"
    );
    let dir = tempfile::Builder::new()
        .prefix(&format!("readme-{name}-"))
        .tempdir()
        .unwrap_or_else(|e| panic!("{e}"));
    let tmp = dir.path().join("tmp");
    let home = dir.path().join("home");
    let copies = dir.path().join("copies");
    for d in [&tmp, &home, &copies] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
    }
    let script_path = dir.path().join("session.sh");
    std::fs::write(&script_path, script(name, blocks)).unwrap_or_else(|e| panic!("{e}"));
    let stdout_path = dir.path().join("stdout");
    let stderr_path = dir.path().join("stderr");
    let real_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let mut command = Command::new("bash");
    command
        .arg(&script_path)
        .current_dir(ROOT)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap_or_else(|e| panic!("{e}")))
        .stderr(std::fs::File::create(&stderr_path).unwrap_or_else(|e| panic!("{e}")))
        .process_group(0)
        .env("TMPDIR", &tmp)
        .env("HOME", &home)
        .env("README_TEST_COPIES", &copies)
        // Cargo and rustup keep their homes (their caches, the toolchain).
        .env(
            "CARGO_HOME",
            std::env::var_os("CARGO_HOME").unwrap_or_else(|| real_home.join(".cargo").into()),
        )
        .env(
            "RUSTUP_HOME",
            std::env::var_os("RUSTUP_HOME").unwrap_or_else(|| real_home.join(".rustup").into()),
        );
    for (key, folder) in [
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_STATE_HOME", "state"),
    ] {
        command.env(key, home.join(folder));
    }
    for (key, value) in opencode_workspace::cli::OFFLINE_ENV {
        command.env(key, value);
    }
    for (key, value) in vars {
        command.env(key, value);
    }
    let started = Instant::now();
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start bash: {e}"));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("{e}")) {
            break Some(status);
        }
        if started.elapsed() > SESSION_TIMEOUT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    stop_group(child.id());
    let _ = child.wait();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let stdout = evidence_test_support::without_terminal_colours(&read(&stdout_path));
    let stderr = read(&stderr_path);
    eprintln!("session {name}: {:.1} s", started.elapsed().as_secs_f64());
    let tail = |text: &str| {
        let start = text.len().saturating_sub(6000);
        let start = (start..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text[start..].to_owned()
    };
    match status {
        Some(s) if s.success() => {}
        Some(s) => panic!(
            "session {name} failed ({s}).\n--- stdout (end) ---\n{}\n--- stderr (end; the last '--- FILE:LINE' is the failing block) ---\n{}",
            tail(&stdout),
            tail(&stderr)
        ),
        None => panic!(
            "session {name} did not finish within {} s.\n--- stdout (end) ---\n{}\n--- stderr (end) ---\n{}",
            SESSION_TIMEOUT.as_secs(),
            tail(&stdout),
            tail(&stderr)
        ),
    }
    Outcome {
        stdout,
        stderr,
        dir,
    }
}

/// Fails unless `stdout` holds every `#>` text of `blocks`, in order.
pub(crate) fn check_expectations(name: &str, blocks: &[&Block], outcome: &Outcome) {
    let mut from = 0;
    for block in blocks {
        for expected in block.expectations() {
            match outcome.stdout[from..].find(&expected) {
                Some(at) => from += at + expected.len(),
                None => panic!(
                    "{} (session {name}) says the output shows\n    {expected}\nbut it does not (after what the earlier lines matched).\n--- stdout ---\n{}\n--- stderr ---\n{}",
                    block.at(),
                    outcome.stdout,
                    outcome.stderr
                ),
            }
        }
    }
}

/// The executables `cargo build ARGS` makes (from the repository root, as the documented
/// commands build them), by target name.
pub(crate) fn built(args: &[&str]) -> Vec<(String, PathBuf)> {
    let output = Command::new(env!("CARGO"))
        .args(["build", "--message-format=json-render-diagnostics"])
        .args(args)
        .current_dir(ROOT)
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo: {e}"));
    assert!(
        output.status.success(),
        "cargo build {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|m| {
            let name = m["target"]["name"].as_str()?.to_owned();
            let path = PathBuf::from(m["executable"].as_str()?);
            Some((name, path))
        })
        .collect()
}
