//! `package-tool check-storage-state`, the real binary: the Grafana front's storage state
//! is accepted with its session cookie guarded and never printed, a state with a short
//! credential is refused with the reason, text that is not `storageState` JSON is a usage
//! error, and stdin (`-`) is read like a file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use evidence_test_support::{GRAFANA_SESSION_COOKIE_NAME, GRAFANA_SESSION_COOKIE_VALUE};
use serde_json::{Value, json};

/// The Playwright storage state of a user logged in to the Grafana front, as
/// `examples/local_fronts.rs` writes it: its `httpOnly` session cookie.
fn grafana_storage_state() -> String {
    json!({
        "cookies": [{"name": GRAFANA_SESSION_COOKIE_NAME,
                     "value": GRAFANA_SESSION_COOKIE_VALUE,
                     "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": true,
                     "secure": false, "sameSite": "Lax"}],
        "origins": [{"origin": "http://127.0.0.1:3000", "localStorage": [
            {"name": "grafana.navigation.docked", "value": "true"}
        ]}]
    })
    .to_string()
}

/// Runs `package-tool` with `args`, `stdin` on its standard input: the exit code,
/// stdout and stderr.
fn package_tool(args: &[&str], stdin: &str) -> (i32, String, String) {
    support::run(Path::new(support::PACKAGE_TOOL), args, &[], stdin)
}

/// Writes `text` to a file in a new temporary directory.
fn file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    std::fs::write(&path, text).unwrap();
    (dir, path.display().to_string())
}

#[test]
fn the_grafana_state_is_accepted_and_its_cookie_guarded() {
    let (_dir, path) = file(&grafana_storage_state());
    let (code, stdout, stderr) = package_tool(&["check-storage-state", &path], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains(": accepted"), "{stdout}");
    let row = stdout
        .lines()
        .find(|l| l.contains(&format!("cookie `{GRAFANA_SESSION_COOKIE_NAME}`")))
        .unwrap_or_else(|| panic!("no cookie row in {stdout}"));
    assert!(row.starts_with("guarded"), "{row}");
    assert!(row.contains("an httpOnly cookie"), "{row}");
    let docked = stdout
        .lines()
        .find(|l| l.contains("grafana.navigation.docked"))
        .unwrap();
    assert!(docked.starts_with("unguarded"), "{docked}");
    assert!(!stdout.contains(GRAFANA_SESSION_COOKIE_VALUE));
    assert!(!stderr.contains(GRAFANA_SESSION_COOKIE_VALUE));

    let (code, stdout, stderr) = package_tool(&["check-storage-state", "--json", &path], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stdout.contains(GRAFANA_SESSION_COOKIE_VALUE));
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["verdict"], "accepted");
    assert_eq!(report["refusals"], json!([]));
    assert_eq!(
        report["values"][0],
        json!({"source": {"kind": "cookie", "name": GRAFANA_SESSION_COOKIE_NAME,
                          "domain": "127.0.0.1", "path": "/"},
               "part": "value", "role": "credential: an httpOnly cookie", "verdict": "guarded"})
    );
    assert_eq!(report["values"][1]["verdict"], "unguarded_short_page_state");
}

#[test]
fn a_state_with_a_short_credential_is_refused_with_the_reason() {
    let state = json!({"cookies": [
        {"name": GRAFANA_SESSION_COOKIE_NAME, "value": "a1b2c3", "httpOnly": true}
    ]})
    .to_string();
    let (_dir, path) = file(&state);
    let (code, stdout, stderr) = package_tool(&["check-storage-state", &path], "");
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains(": refused"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "refused: cookie `{GRAFANA_SESSION_COOKIE_NAME}` value: a credential (an httpOnly cookie) shorter than 8 bytes"
        )),
        "{stdout}"
    );
    assert!(!stdout.contains("a1b2c3") && !stderr.contains("a1b2c3"));

    let (code, stdout, _) = package_tool(&["check-storage-state", &path, "--json"], "");
    assert_eq!(code, 1);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["verdict"], "refused");
    assert_eq!(report["values"][0]["verdict"], "refused");
}

#[test]
fn not_a_storage_state_is_a_usage_error_that_quotes_nothing() {
    let (_dir, path) = file(r#"{"cookies": "SECRETSESSION123"}"#);
    let (code, stdout, stderr) = package_tool(&["check-storage-state", &path], "");
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("not a Playwright storage state"),
        "{stderr}"
    );
    assert!(!stderr.contains("SECRETSESSION123"), "{stderr}");

    for args in [
        vec!["check-storage-state"],
        vec!["check-storage-state", "/nonexistent/state.json"],
        vec!["check-storage-state", "--yaml", &path],
        vec!["check-storage-state", &path, &path],
    ] {
        let (code, _, stderr) = package_tool(&args, "");
        assert_eq!(code, 2, "{args:?}");
        assert!(stderr.contains("usage:"));
    }
}

#[test]
fn stdin_is_read_with_a_dash() {
    let (code, stdout, stderr) =
        package_tool(&["check-storage-state", "-"], &grafana_storage_state());
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.starts_with("storage state `stdin`: accepted"),
        "{stdout}"
    );
    assert!(!stdout.contains(GRAFANA_SESSION_COOKIE_VALUE));

    let (code, _, _) = package_tool(&["check-storage-state", "--json", "-"], "not json");
    assert_eq!(code, 2);
}

#[test]
fn packaging_still_answers_its_usage() {
    let (code, stdout, _) = package_tool(&["--help"], "");
    assert_eq!(code, 0);
    assert!(stdout.contains("--source DIR --out DIR"), "{stdout}");
    assert!(stdout.contains("check-storage-state"), "{stdout}");
    let (code, _, stderr) = package_tool(&["--out", "/tmp/x"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("--source is required"));
}
