//! The alert rules an operator loads (`deploy/prometheus/evidence-alerts.yml`), checked
//! by Prometheus' own `promtool`: the rules file passes `promtool check rules`, the
//! example configuration that loads it passes `promtool check config`, and
//! `promtool test rules` passes the unit tests, among which every alert has a case that
//! fires and one that does not. Every alert has a `for`, a severity, a summary and a
//! runbook link to a section of `docs/operations/alerts.md` that exists.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus")
}

/// Runs `promtool ARGS` in the rules' folder; fails with the install command when it is
/// missing, and with promtool's own words when it refuses.
fn promtool(args: &[&str]) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "promtool: {e} (apt-get install -y prometheus; bash scripts/test.sh installs it)"
            )
        });
    assert!(
        out.status.success(),
        "promtool {args:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn load(name: &str) -> Yaml {
    let text = std::fs::read_to_string(dir().join(name)).unwrap();
    YamlLoader::load_from_str(&text).unwrap().remove(0)
}

#[test]
fn promtool_checks_the_rules_and_the_configuration_and_passes_their_unit_tests() {
    promtool(&["check", "rules", "evidence-alerts.yml"]);
    promtool(&["check", "config", "prometheus.yml"]);
    promtool(&["test", "rules", "evidence-alerts.test.yml"]);
}

#[test]
fn every_alert_has_its_for_severity_summary_runbook_and_both_test_cases() {
    let rules = load("evidence-alerts.yml");
    let runbook = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations/alerts.md"),
    )
    .unwrap();
    let anchors: Vec<String> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(|h| h.trim().to_lowercase())
        .collect();
    let mut names = Vec::new();
    for group in rules["groups"].as_vec().unwrap() {
        for rule in group["rules"].as_vec().unwrap() {
            let name = rule["alert"].as_str().unwrap().to_owned();
            assert!(rule["for"].as_str().is_some(), "{name}: no for");
            let severity = rule["labels"]["severity"].as_str();
            assert!(
                matches!(severity, Some("critical" | "warning")),
                "{name}: severity {severity:?}"
            );
            assert!(rule["annotations"]["summary"].as_str().is_some(), "{name}");
            let link = rule["annotations"]["runbook"].as_str().unwrap();
            let anchor = link
                .strip_prefix("docs/operations/alerts.md#")
                .unwrap_or_else(|| panic!("{name}: {link}"));
            assert_eq!(anchor, name.to_lowercase(), "{name}: {link}");
            assert!(
                anchors.contains(&anchor.to_owned()),
                "{name}: docs/operations/alerts.md has no section {anchor}"
            );
            names.push(name);
        }
    }
    assert!(names.len() >= 9, "{names:?}");
    // Each alert is tested firing (expected alerts) and not firing (none expected).
    let tests = load("evidence-alerts.test.yml");
    let mut cases: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for test in tests["tests"].as_vec().unwrap() {
        for check in test["alert_rule_test"].as_vec().unwrap() {
            let name = check["alertname"].as_str().unwrap().to_owned();
            let fires = !check["exp_alerts"].as_vec().unwrap().is_empty();
            let entry = cases.entry(name).or_default();
            if fires {
                entry.0 = true;
            } else {
                entry.1 = true;
            }
        }
    }
    for name in &names {
        assert_eq!(
            cases.get(name),
            Some(&(true, true)),
            "{name}: a case that fires and one that does not"
        );
    }
}
