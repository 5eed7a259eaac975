//! The systemd units an operator installs (`deploy/systemd/`), checked by systemd's own
//! `systemd-analyze`: each unit, with its drop-ins, passes `systemd-analyze verify`, and
//! `systemd-analyze security --offline=yes` scores its exposure at most 2.0 (Clinic,
//! Manus) or 4.0 (Wetech, which gives up what Chromium needs). Both run against a root
//! folder the test builds: the host's own systemd units (the targets the units depend
//! on), the deploy folder installed in `etc/systemd/system`, and an executable stand-in
//! at each `ExecStart=` path, since `verify` refuses a command that is not there (the
//! real file is the deployable folder's binary, tested everywhere else). Neither needs
//! systemd as PID 1.
//!
//! Beside the scores, what `security` does not weigh: every secret of the package's
//! auth binding arrives as a file (`LoadCredential=` and `NAME_FILE=%d/...`, never the
//! variable itself), every host of the package's manifest has its `IPAddressAllow=`
//! line after `IPAddressDeny=any`, and the audit log is in the unit's `LogsDirectory=`.
//! And what only the server knows: it takes each unit's command line
//! (`HttpListen::from_args`, TLS on both listeners) and keeps each variable the unit sets
//! when it re-executes itself with its own package's variables.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use evidence_tool::Tool;
use evidence_tool::mcp::{HttpListen, server_variables};

/// The units, with the highest exposure `systemd-analyze security` may give each (its
/// `--threshold=` is in tenths).
const UNITS: [(&str, u32); 3] = [
    ("managed-evidence-clinic.service", 20),
    ("managed-evidence-manus.service", 20),
    ("managed-evidence-wetech.service", 40),
];

/// Where the host's systemd keeps its units (Debian's `systemd` package).
const HOST_UNITS: &str = "/usr/lib/systemd/system";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn deploy() -> PathBuf {
    repo().join("deploy/systemd")
}

/// Runs `systemd-analyze ARGS`; fails with the install command when it is missing.
fn analyze(args: &[&str]) -> Output {
    Command::new("systemd-analyze")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "systemd-analyze: {e} (apt-get install -y systemd; bash scripts/test.sh installs it)"
            )
        })
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A unit's settings as systemd reads them: the unit file, then its drop-ins in the
/// order of their file names (the prefix folder `managed-evidence-.service.d` and the
/// unit's own), each a `(key, value)` in order; continuation lines joined.
fn settings(unit: &str) -> Vec<(String, String)> {
    let mut files = vec![deploy().join(unit)];
    let mut dropins: Vec<PathBuf> = [
        "managed-evidence-.service.d".to_owned(),
        format!("{unit}.d"),
    ]
    .iter()
    .map(|d| deploy().join(d))
    .filter(|d| d.is_dir())
    .flat_map(|d| std::fs::read_dir(d).unwrap().map(|e| e.unwrap().path()))
    .filter(|p| p.extension().is_some_and(|e| e == "conf"))
    .collect();
    dropins.sort_by_key(|p| p.file_name().unwrap().to_owned());
    files.extend(dropins);
    let mut out = Vec::new();
    for file in files {
        let body = std::fs::read_to_string(&file).unwrap().replace("\\\n", " ");
        for line in body.lines().map(str::trim) {
            if line.is_empty() || line.starts_with(['#', ';', '[']) {
                continue;
            }
            let (key, value) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("{}: not a setting: {line}", file.display()));
            out.push((key.trim().to_owned(), value.trim().to_owned()));
        }
    }
    out
}

/// The last value of `key` (what systemd keeps of a setting given more than once).
fn last<'a>(settings: &'a [(String, String)], key: &str) -> Option<&'a str> {
    settings
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The root folder `verify` and `security` read: the host's units, the deploy folder
/// as installed, and an executable stand-in at each `ExecStart=` path.
fn root() -> tempfile::TempDir {
    assert!(
        Path::new(HOST_UNITS).is_dir(),
        "{HOST_UNITS} is missing (apt-get install -y systemd; bash scripts/test.sh installs it)"
    );
    let root = tempfile::tempdir().unwrap();
    let copy = |from: &Path, to: &Path| {
        let status = Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "cp -a {} {}",
            from.display(),
            to.display()
        );
    };
    std::fs::create_dir_all(root.path().join("usr/lib/systemd")).unwrap();
    copy(Path::new(HOST_UNITS), &root.path().join("usr/lib/systemd"));
    let installed = root.path().join("etc/systemd/system");
    std::fs::create_dir_all(&installed).unwrap();
    for entry in std::fs::read_dir(deploy()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        copy(&path, &installed);
    }
    for (unit, _) in UNITS {
        let exec = exec_start(&settings(unit));
        let stand_in = root.path().join(exec.strip_prefix('/').unwrap());
        std::fs::create_dir_all(stand_in.parent().unwrap()).unwrap();
        std::fs::write(&stand_in, "#!/bin/sh\nexit 1\n").unwrap();
        let mut permissions = std::fs::metadata(&stand_in).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&stand_in, permissions).unwrap();
    }
    root
}

/// The program `ExecStart=` runs.
fn exec_start(settings: &[(String, String)]) -> String {
    last(settings, "ExecStart")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn systemd_analyze_verifies_every_unit() {
    let root = root();
    let root_arg = format!("--root={}", root.path().display());
    let mut args = vec!["verify", root_arg.as_str()];
    args.extend(UNITS.iter().map(|(unit, _)| *unit));
    let out = analyze(&args);
    // A warning is a finding too: verify exits 0 on some of them.
    assert!(
        out.status.success() && text(&out).trim().is_empty(),
        "systemd-analyze {args:?}:\n{}",
        text(&out)
    );
}

#[test]
fn systemd_analyze_security_scores_each_unit_within_its_bound() {
    let root = root();
    let root_arg = format!("--root={}", root.path().display());
    let mut scores = BTreeMap::new();
    for (unit, tenths) in UNITS {
        let threshold = format!("--threshold={tenths}");
        let args = ["security", "--offline=yes", &root_arg, &threshold, unit];
        let out = analyze(&args);
        let report = text(&out);
        // "→ Overall exposure level for UNIT: 1.1 OK 🙂"
        let score = report
            .lines()
            .find_map(|l| {
                l.split_once(&format!("Overall exposure level for {unit}: "))
                    .map(|(_, rest)| rest.split_whitespace().next().unwrap().to_owned())
            })
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("systemd-analyze {args:?} gave no exposure:\n{report}"));
        assert!(
            out.status.success() && score * 10.0 <= f64::from(tenths) + 1e-9,
            "{unit}: exposure {score} over {:.1}:\nsystemd-analyze {args:?}:\n{report}",
            f64::from(tenths) / 10.0
        );
        scores.insert(unit, score);
    }
    println!("exposure: {scores:?}");
}

/// The package a unit serves: its manifest, found from the deployable folder its
/// `ExecStart=` runs (`/srv/managed-evidence/<provider>-<revision>/bin/<provider>-tool`).
fn manifest(unit: &str, settings: &[(String, String)]) -> serde_json::Value {
    let exec = exec_start(settings);
    let folder = exec
        .strip_prefix("/srv/managed-evidence/")
        .and_then(|p| p.split('/').next())
        .unwrap_or_else(|| panic!("{unit}: ExecStart {exec} is not in /srv/managed-evidence"));
    let (provider, revision) = folder.rsplit_once('-').unwrap();
    let path = repo().join(format!(
        "packages/managed_auto_oncall_{provider}/{revision}/manifest.json"
    ));
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{unit}: {path:?}: {e}")),
    )
    .unwrap();
    let entrypoint = manifest["entrypoint"].as_str().unwrap();
    assert!(
        exec.ends_with(&format!("/{folder}/{entrypoint}")),
        "{unit}: ExecStart {exec} is not the entrypoint {entrypoint} of {folder}"
    );
    manifest
}

#[test]
fn every_secret_is_a_credential_file_and_every_manifest_host_is_allowed_after_deny_any() {
    for (unit, _) in UNITS {
        let settings = settings(unit);
        let manifest = manifest(unit, &settings);
        let env: BTreeMap<&str, &str> = settings
            .iter()
            .filter(|(k, _)| k == "Environment")
            .filter_map(|(_, v)| v.split_once('='))
            .collect();
        let credentials: Vec<&str> = settings
            .iter()
            .filter(|(k, _)| k == "LoadCredential")
            .map(|(_, v)| v.split_once(':').unwrap().0)
            .collect();
        let mut secrets: Vec<String> = manifest["auth"]["secrets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["env"].as_str().unwrap().to_owned())
            .collect();
        // The Redis URL of the turn ledger carries its password.
        secrets.push("EVIDENCE_TURN_LEDGER".to_owned());
        for secret in &secrets {
            assert!(
                !env.contains_key(secret.as_str()),
                "{unit}: {secret} is set in the environment"
            );
            let file = env
                .get(format!("{secret}_FILE").as_str())
                .unwrap_or_else(|| panic!("{unit}: no Environment={secret}_FILE=%d/..."));
            let name = file
                .strip_prefix("%d/")
                .unwrap_or_else(|| panic!("{unit}: {secret}_FILE={file} is not in %d"));
            assert!(
                credentials.contains(&name),
                "{unit}: {secret}_FILE names {name}, which no LoadCredential= loads"
            );
        }
        let exec = last(&settings, "ExecStart").unwrap();
        for flag in [
            "--tls-cert %d/",
            "--tls-key %d/",
            "--operator ",
            "--allow-host ",
        ] {
            assert!(
                exec.contains(flag),
                "{unit}: ExecStart has no {flag}: {exec}"
            );
        }
        // The allowlist: deny first, then one IPAddressAllow= per manifest host, the
        // host named in the comment just above it.
        let body = std::fs::read_to_string(deploy().join(unit)).unwrap();
        let lines: Vec<&str> = body.lines().collect();
        let deny = lines
            .iter()
            .position(|l| *l == "IPAddressDeny=any")
            .unwrap_or_else(|| panic!("{unit}: no IPAddressDeny=any"));
        for host in manifest["network"]["hosts"].as_array().unwrap() {
            let host = host.as_str().unwrap();
            let allowed = lines.windows(2).enumerate().any(|(i, pair)| {
                i > deny
                    && pair[0].starts_with('#')
                    && pair[0].split_whitespace().any(|w| w == host)
                    && pair[1].starts_with("IPAddressAllow=")
                    && pair[1].len() > "IPAddressAllow=".len()
            });
            assert!(
                allowed,
                "{unit}: no IPAddressAllow= line after IPAddressDeny=any under a comment naming {host}"
            );
        }
        // Nothing wider: no IPAddressAllow= names any address, the whole internet or a
        // network wider than a /16 (the widest is an agents' network).
        for line in lines.iter().filter(|l| l.starts_with("IPAddressAllow=")) {
            for entry in line["IPAddressAllow=".len()..].split_whitespace() {
                let prefix = entry
                    .split_once('/')
                    .map(|(_, p)| p.parse::<u32>().unwrap());
                assert!(
                    entry != "any" && entry != "internet" && prefix.is_none_or(|p| p >= 16),
                    "{unit}: {line} allows more than hosts and one network"
                );
            }
        }
        let logs = last(&settings, "LogsDirectory").unwrap_or_else(|| panic!("{unit}"));
        assert_eq!(
            env.get("EVIDENCE_AUDIT_LOG").copied(),
            Some(format!("%L/{logs}/audit.jsonl").as_str()),
            "{unit}: the audit log is not in LogsDirectory={logs}"
        );
        for (key, value) in [
            ("DynamicUser", "yes"),
            ("ProtectSystem", "strict"),
            ("PrivateTmp", "yes"),
            ("NoNewPrivileges", "yes"),
            ("CapabilityBoundingSet", ""),
            ("SystemCallFilter", "~@privileged"),
        ] {
            assert_eq!(last(&settings, key), Some(value), "{unit}: {key}");
        }
        assert!(
            settings
                .iter()
                .any(|(k, v)| k == "SystemCallFilter" && v == "@system-service"),
            "{unit}: SystemCallFilter=@system-service"
        );
        assert!(
            last(&settings, "RestrictAddressFamilies").is_some(),
            "{unit}: RestrictAddressFamilies="
        );
    }
}

#[test]
fn the_server_takes_each_units_command_line_and_keeps_its_variables() {
    for (unit, _) in UNITS {
        let settings = settings(unit);
        let exec = last(&settings, "ExecStart").unwrap();
        let mut words = exec.split_whitespace();
        let program = words.next().unwrap();
        let tool = Tool::ALL
            .into_iter()
            .find(|t| program.ends_with(&format!("/{}", t.binary_name())))
            .unwrap_or_else(|| panic!("{unit}: {program} is no tool binary"));
        assert_eq!(words.next(), Some("--mcp-http"), "{unit}: {exec}");
        let args: Vec<std::ffi::OsString> = words.map(Into::into).collect();
        let listen = HttpListen::from_args(&args)
            .unwrap_or_else(|e| panic!("{unit}: the server refuses {exec}: {e}"));
        assert_eq!(listen.scheme(), "https", "{unit}: both listeners serve TLS");
        assert!(listen.operator().is_some(), "{unit}: an operator listener");
        // The server re-executes itself with only its own package's variables (the
        // NAME_FILE forms of its secrets among them): one it would drop is a setting lost.
        let kept = server_variables(tool);
        for (_, assignment) in settings.iter().filter(|(k, _)| k == "Environment") {
            let name = assignment.split_once('=').unwrap().0;
            assert!(
                kept.contains(&name),
                "{unit}: {tool:?}'s server does not keep {name}"
            );
        }
    }
}
