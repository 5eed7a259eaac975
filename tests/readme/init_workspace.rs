//! What the README says `init_workspace` does with a wrong command line: a server name
//! that no `--mcp` registers, a `--mcp-env` without its variable, a remote server's URL
//! that is not https (or plain http to loopback), arguments given to a remote server, a
//! server registered twice, a server name the evidence agent's tool pattern does not
//! match, and an `opencode` that cannot start are each an error that says what to give
//! instead.

use std::path::PathBuf;
use std::process::Command;
use std::sync::PoisonError;

use crate::ONE_AT_A_TIME;
use crate::session::built;

/// The example as `cargo run --example init_workspace` builds it.
fn init_workspace() -> PathBuf {
    built(&["--example", "init_workspace"])
        .into_iter()
        .find(|(name, _)| name == "init_workspace")
        .map(|(_, path)| path)
        .unwrap_or_else(|| panic!("cargo built no init_workspace"))
}

/// Runs it with `args` (and `OPENCODE_BIN` removed): exit code and standard error.
fn run(program: &PathBuf, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(program)
        .args(args)
        .env_remove("OPENCODE_BIN")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_wrong_command_line_says_what_to_give_instead() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let program = init_workspace();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let ws = ws.to_str().unwrap();
    let clinic = "managed_auto_oncall_clinic=/srv/clinic-v3/bin/clinic-tool";

    let remote = "managed_auto_oncall_clinic=http://127.0.0.1:8931/mcp";
    let cases: [(&[&str], i32, &str); 8] = [
        // A misspelled server name in --mcp-arg or --mcp-env is an error, not a server
        // registered without its argument or variable.
        (
            &[
                ws,
                "--mcp",
                clinic,
                "--mcp-arg",
                "managed_auto_oncall_clinc=--mcp",
            ],
            2,
            r#"--mcp-arg names the server "managed_auto_oncall_clinc", which no --mcp registers (registered: managed_auto_oncall_clinic)"#,
        ),
        (
            &[
                ws,
                "--mcp-env",
                "managed_auto_oncall_clinic=CLINIC_BASE_URL=x",
            ],
            2,
            "which no --mcp registers (no --mcp was given)",
        ),
        // --mcp-env states its whole format.
        (
            &[
                ws,
                "--mcp",
                clinic,
                "--mcp-env",
                "managed_auto_oncall_clinic=CLINIC_BASE_URL",
            ],
            2,
            "--mcp-env takes <name>=<KEY>=<VALUE>",
        ),
        // A remote server: plain HTTP only to loopback, http(s) only, no arguments or
        // environment of its own, and one server per name.
        (
            &[
                ws,
                "--mcp-remote",
                "managed_auto_oncall_clinic=http://tools.internal:8931/mcp",
            ],
            1,
            "which is not a loopback address: a tool server serves plain HTTP on loopback only, so use https://",
        ),
        (
            &[
                ws,
                "--mcp-remote",
                "managed_auto_oncall_clinic=ftp://127.0.0.1/mcp",
            ],
            1,
            "is not an http:// or https:// URL",
        ),
        (
            &[
                ws,
                "--mcp-remote",
                remote,
                "--mcp-env",
                "managed_auto_oncall_clinic=A=b",
            ],
            2,
            r#"--mcp-env names the remote server "managed_auto_oncall_clinic": a remote server runs apart"#,
        ),
        (
            &[ws, "--mcp", clinic, "--mcp-remote", remote],
            2,
            r#"the server "managed_auto_oncall_clinic" is registered twice"#,
        ),
        // A server whose tools the evidence agent may not use, named as people read it.
        (
            &[ws, "--mcp", "clinic=/srv/clinic-v3/bin/clinic-tool"],
            1,
            "the tools of server clinic (clinic_<tool>) match no evidence tool pattern",
        ),
    ];
    for (args, code, says) in cases {
        let (exit, err) = run(&program, args);
        assert_eq!(exit, Some(code), "{args:?}: {err}");
        assert!(
            err.contains(says) && !err.contains("__tool_"),
            "{args:?}: {err}"
        );
    }

    // An opencode that cannot start: the error names --opencode and OPENCODE_BIN.
    for args in [
        vec![
            ws,
            "--task-tool",
            "detect",
            "--opencode",
            "/nonexistent/opencode",
        ],
        vec![ws, "--task-tool", "detect"],
    ] {
        let mut command = Command::new(&program);
        command
            .args(&args)
            .env("PATH", "/nonexistent")
            .env_remove("OPENCODE_BIN");
        let out = command.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("cannot start"), "{err}");
        assert!(
            err.contains("--opencode <path>") && err.contains("OPENCODE_BIN"),
            "{err}"
        );
    }
}
