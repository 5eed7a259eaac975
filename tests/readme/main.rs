//! The root README, tried as a newcomer tries it: every shell and Python block is run as
//! written (or its fence says why it is not), the output a block says a reader sees is
//! checked, each command's usage block is the program's own `--help`, JSON examples
//! follow their committed schemas, and the configuration a block shows is what its
//! command writes. A renamed flag, a changed default or a drifted example fails here.
//!
//! Blocks are grouped into sessions by their fence (`sh session=first-hour`); see
//! `blocks.rs` for the fence attributes and `session.rs` for what a session's run adapts.
//! Sessions run one at a time: they build and run the same binaries. The programs a
//! session needs (Prometheus, Chromium, OpenCode, the Python MCP SDK) fail the test with
//! their install command when missing; nothing is skipped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod blocks;
mod init_workspace;
mod session;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, PoisonError};

use blocks::{Block, blocks, json_values};
use session::{CHROMIUM, CURL, PROMETHEUS, ROOT};

const README: &str = include_str!("../../README.md");

/// The sessions of the README, each run by one test below.
const SESSIONS: [&str; 4] = ["first-hour", "clinic-demo", "opencode-config", "cutover"];

/// The commands whose usage the README shows, each in a `text usage=NAME` block.
const PROGRAMS: [&str; 8] = [
    "canary",
    "clinic-tool",
    "manus-tool",
    "wetech-tool",
    "package-tool",
    "sign-policy",
    "init_workspace",
    "local_fronts",
];

/// One README command at a time: sessions build and replace the same binaries.
pub(crate) static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn readme_blocks() -> Vec<Block> {
    blocks(README).unwrap_or_else(|e| panic!("{e}"))
}

fn session_blocks<'b>(all: &'b [Block], name: &str) -> Vec<&'b Block> {
    all.iter()
        .filter(|b| b.attr("session") == Some(name))
        .collect()
}

/// Runs session `name` with `vars` and checks what its blocks say it prints.
fn run_session(name: &str, vars: &[(&str, &OsStr)]) -> (Vec<Block>, session::Outcome) {
    let all = readme_blocks();
    let outcome = {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let blocks = session_blocks(&all, name);
        session::run(name, &blocks, vars)
    };
    session::check_expectations(name, &session_blocks(&all, name), &outcome);
    (all, outcome)
}

#[test]
fn every_command_block_runs_or_says_why_not() {
    let all = readme_blocks();
    let mut sessions = BTreeSet::new();
    for block in &all {
        if block.is_command() {
            match (block.attr("session"), block.attr("not-run")) {
                (Some(name), None) => {
                    sessions.insert(name.to_owned());
                }
                (None, Some(reason)) => assert!(
                    reason.split_whitespace().count() >= 3,
                    "README line {}: say why the block is not run",
                    block.line
                ),
                _ => panic!(
                    "README line {}: a {} block needs session=NAME (run by tests/readme) or not-run=\"why\"",
                    block.line, block.lang
                ),
            }
            if matches!(block.lang.as_str(), "python" | "py") && block.attr("session").is_some() {
                assert!(
                    block.attr("file").is_some(),
                    "README line {}: a Python block names the file the reader saves it as (file=NAME)",
                    block.line
                );
            }
        }
        if block.lang == "json" {
            json_values(block).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let known: BTreeSet<String> = SESSIONS.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(
        sessions, known,
        "each README session is run by one test here"
    );
    let usages: BTreeSet<&str> = all.iter().filter_map(|b| b.attr("usage")).collect();
    assert_eq!(
        usages,
        PROGRAMS.into_iter().collect(),
        "a usage block per program"
    );
}

#[test]
fn json_examples_follow_their_schemas() {
    let mut checked = 0;
    for block in readme_blocks() {
        let Some(schema) = block.attr("schema") else {
            continue;
        };
        let text = std::fs::read_to_string(Path::new(ROOT).join(schema))
            .unwrap_or_else(|e| panic!("README line {}: schema {schema}: {e}", block.line));
        let schema_value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let validator = jsonschema::validator_for(&schema_value).unwrap();
        for value in json_values(&block).unwrap_or_else(|e| panic!("{e}")) {
            let errors: Vec<String> = validator
                .iter_errors(&value)
                .map(|e| e.to_string())
                .collect();
            assert!(
                errors.is_empty(),
                "README line {}: the example does not follow {schema}: {errors:?}",
                block.line
            );
            checked += 1;
        }
    }
    assert!(checked >= 4, "the result and argument examples are checked");
}

#[test]
fn usage_blocks_are_the_programs_own_help() {
    let all = readme_blocks();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    // The builds the README's own commands make (`cargo build -p evidence-tool`,
    // `cargo run --example ...`): nothing is built twice.
    let mut programs = session::built(&["-p", "evidence-tool", "--bins"]);
    programs.extend(session::built(&[
        "--example",
        "init_workspace",
        "--example",
        "local_fronts",
    ]));
    for block in all.iter().filter(|b| b.attr("usage").is_some()) {
        let name = block.attr("usage").unwrap_or_default();
        let program = programs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p)
            .unwrap_or_else(|| panic!("README line {}: no program {name} is built", block.line));
        let output = Command::new(program).arg("--help").output().unwrap();
        assert!(
            output.status.success(),
            "{name} --help exits {:?}",
            output.status
        );
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim_end(),
            block.text.trim_end(),
            "README line {}: the usage of {name} differs from its --help",
            block.line
        );
    }
}

/// The first hour: the replay, one call of each package against the local test fronts
/// (real Prometheus, real Chromium), the workspace and `opencode mcp list`.
#[test]
fn first_hour() {
    for program in PROMETHEUS.into_iter().chain(CHROMIUM) {
        session::require(program);
    }
    let opencode = session::opencode();
    // Wetech runs a browser: hold the machine's browser slot as every browser test does.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _slot = runtime.block_on(evidence_test_support::BrowserSlot::acquire());
    run_session("first-hour", &[("OPENCODE_BIN", opencode.as_os_str())]);
}

/// The complete Clinic run against a plain Prometheus over its own `promtool` fixture,
/// then the same package over MCP with the official Python SDK; run twice on the same
/// port, as a reader runs it again: nothing of the first run is in the second's way.
#[test]
fn clinic_demo() {
    for program in PROMETHEUS.into_iter().chain([CURL]) {
        session::require(program);
    }
    let python = session::mcp_python();
    let port = session::free_port().to_string();
    for _ in 0..2 {
        run_session(
            "clinic-demo",
            &[
                ("MCP_PYTHON", python.as_os_str()),
                ("PORT", OsStr::new(&port)),
            ],
        );
    }
}

/// The cutover runbook: the canary against the local test fronts (every provider
/// verified, then the Clinic API unreachable), and every rotation step, the policy
/// signing key, the Manus reference key ring, a provider credential and the Wetech
/// storage state, with the alert counts over the audit records they left.
#[test]
fn cutover() {
    for program in PROMETHEUS.into_iter().chain(CHROMIUM) {
        session::require(program);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _slot = runtime.block_on(evidence_test_support::BrowserSlot::acquire());
    run_session("cutover", &[]);
}

/// The runbook's ownership table names every secret of every committed package, with
/// its variable and the auth binding of its own package, and the policy keys with the
/// variable the tools read them from.
#[test]
fn ownership_table_names_every_secret() {
    let start = README
        .find("### Ownership")
        .expect("the README has an Ownership section");
    let table: Vec<&str> = README[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    let packages = Path::new(ROOT).join("packages");
    let mut checked = 0;
    for identity in std::fs::read_dir(&packages).unwrap() {
        let identity = identity.unwrap().path();
        if !identity.is_dir() {
            continue;
        }
        for revision in std::fs::read_dir(&identity).unwrap() {
            let manifest = revision.unwrap().path().join("manifest.json");
            let manifest: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
            let owner = format!(
                "Agent9 auth binding of `{}`",
                manifest["identity"].as_str().unwrap()
            );
            for secret in manifest["auth"]["secrets"].as_array().unwrap() {
                let (name, env) = (
                    secret["name"].as_str().unwrap(),
                    secret["env"].as_str().unwrap(),
                );
                assert!(
                    table.iter().any(|row| row.contains(&format!("`{name}`"))
                        && row.contains(&format!("`{env}`"))
                        && row.contains(&owner)),
                    "the ownership table has no row for {name} ({env}) owned by the {owner}"
                );
                assert!(
                    evidence_tool::context::CONTEXT_VARS
                        .iter()
                        .any(|v| v.name == env),
                    "{env} is not a runtime-context variable"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 5, "every package's secrets are checked");
    let keys = evidence_tool::context::POLICY_KEYS_ENV;
    assert!(
        table
            .iter()
            .any(|row| row.contains(&format!("`{keys}`")) && row.contains("| Auto-oncall |")),
        "the policy verification keys row names {keys}"
    );
    assert!(
        table
            .iter()
            .any(|row| row.starts_with("| policy signing key") && row.contains("| Auto-oncall |")),
        "Auto-oncall owns the policy signing key"
    );
}

/// The OpenCode registration of the three servers: the configuration the README shows
/// is what `init_workspace` writes.
#[test]
fn opencode_config() {
    let (all, outcome) = run_session("opencode-config", &[]);
    let mut compared = 0;
    for block in session_blocks(&all, "opencode-config") {
        if block.attr("matches").is_none() {
            continue;
        }
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(outcome.copy(block.line)).unwrap())
                .unwrap();
        for shown in json_values(block).unwrap() {
            for (key, value) in shown.as_object().unwrap() {
                assert_eq!(
                    &written[key], value,
                    "README line {}: `{key}` is not what the command wrote",
                    block.line
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 0, "the written configuration is compared");
}
