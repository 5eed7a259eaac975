//! The rollout evidence as a short Markdown summary: the verdict, one line per provider,
//! the package digests, and a table of calls per target.

use std::fmt::Write as _;

use evidence_result::evidence::EvidenceOutcome;

use super::report::{CallReport, Expectation, RolloutReport};

/// The Markdown summary of `report`.
pub fn summary(report: &RolloutReport) -> String {
    let mut md = String::new();
    let verdict = if report.verified {
        "VERIFIED"
    } else {
        "NOT VERIFIED"
    };
    // Writing to a String cannot fail.
    let _ = writeln!(md, "# Rollout evidence: {verdict}\n");
    let _ = writeln!(
        md,
        "Run {} to {}, deployment `{}`.\n",
        report.started_at, report.finished_at, report.deployment
    );
    head(
        &mut md,
        &[
            "provider",
            "package",
            "verified",
            "targets verified",
            "targets not verified",
        ],
    );
    for p in &report.providers {
        let verified = if p.verified { "yes" } else { "**no**" };
        row(
            &mut md,
            &[
                &p.provider.to_string(),
                p.package.as_str(),
                verified,
                &list(&p.targets_verified),
                &list(&p.targets_unverified),
            ],
        );
    }
    let _ = writeln!(md, "\n## Packages\n");
    head(&mut md, &["identity", "revision", "digest"]);
    for p in &report.packages {
        row(
            &mut md,
            &[p.identity.as_str(), &p.revision, &format!("`{}`", p.digest)],
        );
    }
    for t in &report.targets {
        let _ = writeln!(
            md,
            "\n## {} {}: {}\n\n{}; policy `{}`.\n",
            t.provider,
            t.target,
            if t.verified {
                "verified"
            } else {
                "NOT verified"
            },
            t.capability,
            t.policy_id.as_deref().unwrap_or("(none verified)")
        );
        head(
            &mut md,
            &[
                "step", "queryId", "expected", "outcome", "series", "peak", "latency",
            ],
        );
        for c in &t.calls {
            row(
                &mut md,
                &[
                    &c.step,
                    &format!("`{}`", c.query_id),
                    expected(c.expected),
                    &outcome(c),
                    &c.series_count.map(|n| n.to_string()).unwrap_or_default(),
                    &peak(c),
                    &format!("{} ms", c.latency_ms),
                ],
            );
        }
    }
    md
}

/// A table's header row and its separator.
fn head(md: &mut String, columns: &[&str]) {
    row(md, columns);
    row(md, &vec!["---"; columns.len()]);
}

/// One table row.
fn row(md: &mut String, cells: &[&str]) {
    let _ = writeln!(md, "| {} |", cells.join(" | "));
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "-".to_owned()
    } else {
        names.join(", ")
    }
}

fn expected(e: Expectation) -> &'static str {
    match e {
        Expectation::Data => "data",
        Expectation::NoData => "no_data",
        Expectation::Correction => "correction offered",
        Expectation::SameInstance => "same instance",
    }
}

/// What came back, and whether it met the expectation.
fn outcome(c: &CallReport) -> String {
    let what = match (&c.failure, c.outcome) {
        (Some(f), _) => match f.class {
            Some(class) => format!("{} ({class})", f.code),
            None => f.code.clone(),
        },
        (None, Some(EvidenceOutcome::Data)) => "data".to_owned(),
        (None, Some(EvidenceOutcome::NoData)) => "no_data".to_owned(),
        (None, None) => "no result".to_owned(),
    };
    match (&c.note, c.met) {
        (_, true) => format!("{what}: met"),
        (Some(note), false) => format!("{what}: **not met** ({note})"),
        (None, false) => format!("{what}: **not met**"),
    }
}

fn peak(c: &CallReport) -> String {
    match (c.peak, &c.unit) {
        (Some(p), Some(u)) => format!("{p} {u}"),
        (Some(p), None) => p.to_string(),
        _ => String::new(),
    }
}
