//! Every Markdown file of the repository, tried as a newcomer tries it: every shell and
//! Python block is run as written (or its fence says why it is not), the output a block
//! says a reader sees is checked, each command's usage block is the program's own
//! `--help`, JSON examples follow their committed schemas, the files a block shows are
//! what its session wrote, links between the files and to their headings resolve, and no
//! file names a superseded format outside a section about superseded formats, every
//! `crate::path::item` a file names is in the committed public API (`api/*.txt`), and
//! every flag a file shows for a documented program is in that program's `--help`. A
//! renamed flag or item, a changed default or a drifted example fails here with its
//! `FILE:LINE`.
//!
//! Blocks are grouped into sessions by their fence (`sh session=first-hour`); see
//! `blocks.rs` for the fence attributes and `session.rs` for what a session's run adapts.
//! Sessions run one at a time: they build and run the same binaries. The programs a
//! session needs (Prometheus, Chromium, OpenCode, the Python MCP SDK) fail the test with
//! their install command when missing; nothing is skipped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod api_paths;
mod blocks;
mod drift;
mod files;
mod flags;
mod init_workspace;
mod links;
mod lists;
mod session;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, PoisonError};

use blocks::{Block, blocks, json_values};
use session::{CHROMIUM, CURL, OPENSSL, PROMETHEUS, REDIS, ROOT};

/// The sessions, each run by one test below, and the one file that holds each.
const SESSIONS: [(&str, &str); 6] = [
    ("quick-start", "README.md"),
    ("first-hour", "docs/first-hour.md"),
    ("clinic-demo", "docs/guides/clinic-on-prometheus.md"),
    ("opencode-config", "docs/guides/opencode-diagnosis.md"),
    ("cutover", "docs/operations/cutover.md"),
    ("deploy", "docs/operations/deploy.md"),
];

/// Where the runbook's ownership table lives.
const OWNERSHIP_FILE: &str = "docs/operations/cutover.md";

/// The commands whose usage the documentation shows, each in one `text usage=NAME` block.
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

/// One documented command at a time: sessions build and replace the same binaries.
pub(crate) static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Every fenced block of every Markdown file.
fn all_blocks() -> Vec<Block> {
    files::markdown_files()
        .iter()
        .flat_map(|f| blocks(&f.path, &f.text).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// The blocks of session `name`, all of which must be in the file `SESSIONS` names.
fn session_blocks<'b>(all: &'b [Block], name: &str) -> Vec<&'b Block> {
    let file = SESSIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .unwrap_or_else(|| panic!("session {name} is not in SESSIONS"));
    let blocks: Vec<&Block> = all
        .iter()
        .filter(|b| b.attr("session") == Some(name))
        .collect();
    for block in &blocks {
        assert_eq!(
            block.file,
            file,
            "{}: session {name} lives in {file}; a session's blocks are in one file",
            block.at()
        );
    }
    blocks
}

/// Runs session `name` with `vars`, checks what its blocks say it prints, and that each
/// `json ... matches=PATH` block shows what the session wrote there (and that the whole
/// file written follows the block's `schema=`, when it names one).
fn run_session(name: &str, vars: &[(&str, &OsStr)]) {
    let all = all_blocks();
    let blocks = session_blocks(&all, name);
    let outcome = {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        session::run(name, &blocks, vars)
    };
    session::check_expectations(name, &blocks, &outcome);
    for block in blocks.iter().filter(|b| b.attr("matches").is_some()) {
        let copy = outcome.copy(block.line);
        let written: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&copy)
                .unwrap_or_else(|e| panic!("{}: the copy {}: {e}", block.at(), copy.display())),
        )
        .unwrap_or_else(|e| panic!("{}: the file written is not JSON: {e}", block.at()));
        let mut compared = 0;
        for shown in json_values(block).unwrap_or_else(|e| panic!("{e}")) {
            for (key, value) in shown.as_object().unwrap() {
                assert_eq!(
                    &written[key],
                    value,
                    "{}: `{key}` is not what the session wrote",
                    block.at()
                );
                compared += 1;
            }
        }
        assert!(compared > 0, "{}: the block shows no member", block.at());
        if let Some(schema) = block.attr("schema") {
            let errors = schema_errors(block, schema, &written);
            assert!(
                errors.is_empty(),
                "{}: the file the session wrote does not follow {schema}: {errors:?}",
                block.at()
            );
        }
    }
}

/// What `value` breaks of the committed schema `schema` (a path from the root).
fn schema_errors(block: &Block, schema: &str, value: &serde_json::Value) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(ROOT).join(schema))
        .unwrap_or_else(|e| panic!("{}: schema {schema}: {e}", block.at()));
    let schema_value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let validator = jsonschema::validator_for(&schema_value).unwrap();
    validator
        .iter_errors(value)
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn every_command_block_runs_or_says_why_not() {
    let all = all_blocks();
    let mut sessions = BTreeSet::new();
    for block in &all {
        if block.is_command() {
            match (block.attr("session"), block.attr("not-run")) {
                (Some(name), None) => {
                    sessions.insert(name.to_owned());
                }
                (None, Some(reason)) => assert!(
                    reason.split_whitespace().count() >= 3,
                    "{}: say why the block is not run",
                    block.at()
                ),
                _ => panic!(
                    "{}: a {} block needs session=NAME (run by tests/readme) or not-run=\"why\"",
                    block.at(),
                    block.lang
                ),
            }
            if matches!(block.lang.as_str(), "python" | "py") && block.attr("session").is_some() {
                assert!(
                    block.attr("file").is_some(),
                    "{}: a Python block names the file the reader saves it as (file=NAME)",
                    block.at()
                );
            }
        }
        if block.lang == "json" {
            json_values(block).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let known: BTreeSet<String> = SESSIONS.iter().map(|(s, _)| (*s).to_owned()).collect();
    assert_eq!(sessions, known, "each session is run by one test here");
    for (name, _) in SESSIONS {
        session_blocks(&all, name);
    }
    let mut usages: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for block in &all {
        if let Some(name) = block.attr("usage") {
            usages.entry(name).or_default().push(block.at());
        }
    }
    for (name, places) in &usages {
        assert_eq!(
            places.len(),
            1,
            "the usage of {name} is shown once, not at {places:?}"
        );
    }
    assert_eq!(
        usages.keys().copied().collect::<BTreeSet<_>>(),
        PROGRAMS.into_iter().collect(),
        "a usage block per program"
    );
}

#[test]
fn json_examples_follow_their_schemas() {
    let mut checked = 0;
    for block in all_blocks() {
        // A block that shows part of a written file: its session checks the file.
        let (Some(schema), None) = (block.attr("schema"), block.attr("matches")) else {
            continue;
        };
        for value in json_values(&block).unwrap_or_else(|e| panic!("{e}")) {
            let errors = schema_errors(&block, schema, &value);
            assert!(
                errors.is_empty(),
                "{}: the example does not follow {schema}: {errors:?}",
                block.at()
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 7,
        "the result, argument and policy examples are checked"
    );
}

/// Each program of [`PROGRAMS`] with its `--help`, built as the documented commands
/// build it (`cargo build -p evidence-tool`, `cargo run --example ...`: nothing is built
/// twice).
fn program_helps() -> BTreeMap<String, String> {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let mut programs = session::built(&["-p", "evidence-tool", "--bins"]);
    programs.extend(session::built(&[
        "--example",
        "init_workspace",
        "--example",
        "local_fronts",
    ]));
    PROGRAMS
        .iter()
        .map(|name| {
            let program = programs
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, p)| p)
                .unwrap_or_else(|| panic!("no program {name} is built"));
            let output = Command::new(program).arg("--help").output().unwrap();
            assert!(
                output.status.success(),
                "{name} --help exits {:?}",
                output.status
            );
            (
                (*name).to_owned(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
            )
        })
        .collect()
}

#[test]
fn usage_blocks_are_the_programs_own_help() {
    let all = all_blocks();
    let helps = program_helps();
    for block in all.iter().filter(|b| b.attr("usage").is_some()) {
        let name = block.attr("usage").unwrap_or_default();
        let help = helps
            .get(name)
            .unwrap_or_else(|| panic!("{}: no program {name} is built", block.at()));
        assert_eq!(
            help.trim_end(),
            block.text.trim_end(),
            "{}: the usage of {name} differs from its --help",
            block.at()
        );
    }
}

/// Every flag a Markdown file shows for a documented program is one its `--help` names.
#[test]
fn flags_shown_for_a_program_are_in_its_help() {
    let helps = program_helps();
    let shown = flags::shown_flags(&files::markdown_files(), &PROGRAMS);
    assert!(shown.len() >= 40, "the commands of the documents are read");
    let unknown: Vec<String> = shown
        .iter()
        .filter(|s| !flags::help_has(&helps[&s.program], &s.flag))
        .map(|s| format!("{}: {} has no flag {}", s.at, s.program, s.flag))
        .collect();
    assert!(
        unknown.is_empty(),
        "flags that no --help names:\n{}",
        unknown.join("\n")
    );
}

/// The quick start of the README: the offline replay.
#[test]
fn quick_start() {
    run_session("quick-start", &[]);
}

/// The first hour: one call of each package against the local test fronts (real
/// Prometheus, real Chromium), the workspace and `opencode mcp list`, and two replicas
/// sharing a real Redis turn ledger.
#[test]
fn first_hour() {
    for program in PROMETHEUS.into_iter().chain(CHROMIUM).chain(REDIS) {
        session::require(program);
    }
    let opencode = session::opencode();
    let _slot = browser_slot();
    run_session("first-hour", &[("OPENCODE_BIN", opencode.as_os_str())]);
}

/// The machine's browser slot, held as every browser test holds it while a session
/// runs Wetech.
fn browser_slot() -> evidence_test_support::BrowserSlot {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(evidence_test_support::BrowserSlot::acquire())
}

/// The deployment guide: secrets as files (and a file open to others refused), Redis
/// with its password in a file, a private CA made with `openssl`, the three servers over
/// TLS with their operator listeners, the real OpenCode connecting through the CA (and
/// failing without it), a rotated audit log with SIGHUP, and two revisions side by side.
#[test]
fn deploy() {
    for program in PROMETHEUS
        .into_iter()
        .chain(CHROMIUM)
        .chain(REDIS)
        .chain([CURL, OPENSSL])
    {
        session::require(program);
    }
    let opencode = session::opencode();
    let _slot = browser_slot();
    run_session("deploy", &[("OPENCODE_BIN", opencode.as_os_str())]);
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
    let _slot = browser_slot();
    run_session("cutover", &[]);
}

/// The OpenCode registration of the servers: the configuration the guide shows is what
/// `init_workspace` writes (the `matches=` block of the session).
#[test]
fn opencode_config() {
    run_session("opencode-config", &[]);
}

/// The runbook's ownership table names every secret of every committed package, with
/// its variable and the auth binding of its own package, and the policy keys with the
/// variable the tools read them from.
#[test]
fn ownership_table_names_every_secret() {
    let runbook = files::markdown_file(OWNERSHIP_FILE).text;
    let start = runbook
        .find("## Ownership")
        .unwrap_or_else(|| panic!("{OWNERSHIP_FILE} has an Ownership section"));
    let table: Vec<&str> = runbook[start..]
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

/// Every relative link between the Markdown files reaches a file, and every `#anchor`
/// a heading of its file.
#[test]
fn links_resolve() {
    let files = files::markdown_files();
    let broken = links::broken_links(&files, Path::new(ROOT));
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        links::count_links(&files) >= 50,
        "the documents link to each other"
    );
}

/// No Markdown file names a compact evidence format but the current one outside a
/// section about superseded formats.
#[test]
fn no_superseded_format_outside_its_section() {
    let current = serde_json::to_value(evidence_result::evidence::EvidenceFormat::CompactV3)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    let stale = drift::stale_format_names(&files::markdown_files(), &current);
    assert!(
        stale.is_empty(),
        "compact evidence formats other than {current} outside a superseded-formats section:\n{}",
        stale.join("\n")
    );
}

/// Every `crate::path::item` a Markdown file names is in the committed public API of its
/// crate (`api/*.txt`).
#[test]
fn named_rust_paths_are_in_the_public_api() {
    let snapshots = api_paths::Snapshots::read(Path::new(ROOT));
    let files = files::markdown_files();
    let named: usize = files
        .iter()
        .map(|f| api_paths::named_paths(&f.text).len())
        .sum();
    assert!(named >= 40, "the documents name the crates' items");
    let unresolved = api_paths::unresolved_paths(&files, &snapshots);
    assert!(
        unresolved.is_empty(),
        "paths the public API snapshots do not have:\n{}",
        unresolved.join("\n")
    );
}

/// The README's `[dependencies]` block names every crate its Rust blocks use (the
/// doctest compiles them with the root package's dependencies; an adopter compiles them
/// with that block), and each crate of this workspace it names is one of its library
/// crates.
#[test]
fn the_readme_dependencies_cover_its_rust_blocks() {
    let readme = files::markdown_file("README.md");
    let fenced = blocks(&readme.path, &readme.text).unwrap_or_else(|e| panic!("{e}"));
    let toml: Vec<&Block> = fenced.iter().filter(|b| b.lang == "toml").collect();
    assert_eq!(toml.len(), 1, "the README shows one [dependencies] block");
    let declared = lists::dependency_names(&toml[0].text);
    let used: BTreeSet<String> = fenced
        .iter()
        .filter(|b| b.lang.starts_with("rust"))
        .flat_map(|b| lists::crates_used(&b.text))
        .collect();
    assert!(!used.is_empty(), "the README shows the call in Rust");
    let missing: Vec<&String> = used.difference(&declared).collect();
    assert!(
        missing.is_empty(),
        "{}: the README's Rust uses crates its [dependencies] block does not name: {missing:?}",
        toml[0].at()
    );
    let libraries: BTreeSet<String> = std::fs::read_dir(Path::new(ROOT).join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src/lib.rs").is_file())
        .map(|p| {
            let manifest = std::fs::read_to_string(p.join("Cargo.toml")).unwrap();
            let name = manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = "))
                .unwrap_or_default();
            name.trim_matches('"').replace('-', "_")
        })
        .collect();
    for name in declared
        .iter()
        .filter(|n| n.starts_with("evidence_") || n.starts_with("opencode_"))
    {
        assert!(
            libraries.contains(name),
            "{}: {name} is not a library crate of this workspace",
            toml[0].at()
        );
    }
}

/// CONTRIBUTING.md's test command section names every package `scripts/test.sh` installs
/// with apt-get: the install list has that one home, kept equal to the script.
#[test]
fn the_install_list_is_what_the_test_command_installs() {
    let script = std::fs::read_to_string(Path::new(ROOT).join("scripts/test.sh")).unwrap();
    let installed = lists::installed_by_script(&script);
    assert!(installed.contains("redis-server"), "the script is read");
    let contributing = files::markdown_file("CONTRIBUTING.md").text;
    let start = contributing
        .find("## The test command")
        .expect("CONTRIBUTING.md has a test command section");
    let section = &contributing[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let unnamed: Vec<&String> = installed
        .iter()
        .filter(|p| !section.contains(&format!("`{p}`")))
        .collect();
    assert!(
        unnamed.is_empty(),
        "CONTRIBUTING.md#the-test-command does not name what scripts/test.sh installs: {unnamed:?}"
    );
}
