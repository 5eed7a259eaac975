//! What the replay prints and writes: one line per result, a turn's handoff summary, and
//! the evidence agent's output document.

use std::error::Error;

use managed_evidence::materialize::{Handoff, Outcome};
use managed_evidence::result::ToolResult;
use serde_json::{Value, json};

/// One line about a result: status, series, points and peaks, or the error.
pub(crate) fn describe(result: &ToolResult) -> String {
    let d = result.details();
    let one = |status: &str,
               evidence: Option<&managed_evidence::result::Evidence>,
               discovery: Option<&managed_evidence::result::Discovery>,
               error: Option<&managed_evidence::result::ErrorInfo>|
     -> String {
        if let Some(d) = discovery {
            return discovered(d);
        }
        match (evidence, error) {
            (Some(e), _) if e.is_no_data() => {
                "no_data (no series; kept unverified, never zero)".to_owned()
            }
            (Some(e), _) => format!(
                "{status}: {} series, {} points, top peak {} {}; peaks of all series min/p50/p90/max {}; non-finite points {}",
                e.series_count,
                e.point_count,
                e.top_peak().map_or("n/a".to_owned(), |p| p.to_string()),
                e.unit.as_deref().unwrap_or(""),
                e.peak_spread.map_or("n/a".to_owned(), |s| format!(
                    "{}/{}/{}/{}",
                    s.min, s.p50, s.p90, s.max
                )),
                e.non_finite.map_or(0, |n| n.points)
            ),
            (None, Some(err)) => format!("{status}: {} ({})", err.code, err.class),
            _ => status.to_owned(),
        }
    };
    if d.items.is_empty() {
        let status = serde_json::to_value(d.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        one(
            &status,
            d.evidence.as_deref(),
            d.discovery.as_deref(),
            d.error.as_ref(),
        )
    } else {
        d.items
            .iter()
            .map(|i| {
                format!(
                    "[{}] {}",
                    i.query_id,
                    one(
                        if i.is_failed() { "error" } else { "ok" },
                        i.evidence.as_deref(),
                        i.discovery.as_deref(),
                        i.error.as_ref()
                    )
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// A discovery's answer in one line: what was found (or `no_data`) and the first items.
fn discovered(d: &managed_evidence::result::Discovery) -> String {
    use managed_evidence::result::discovery::Cell;
    if d.total == 0 {
        return format!(
            "no_data: no {} in this scope and window (not proof of absence elsewhere)",
            serde_json::to_value(d.discover)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        );
    }
    let rows: Vec<String> = d
        .rows
        .iter()
        .take(5)
        .map(|row| {
            row.iter()
                .map(|c| match c {
                    Cell::Count(n) => n.to_string(),
                    Cell::Text(t) => t.clone().unwrap_or_else(|| "-".to_owned()),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    format!(
        "ok: {} found, {} more not listed; {}",
        d.total,
        d.more,
        rows.join(", ")
    )
}

/// Prints a turn's handoff summary.
pub(crate) fn print_handoff(handoff: &Handoff) -> Result<(), Box<dyn Error>> {
    println!("  acquisition: {:?}", handoff.acquisition);
    for p in &handoff.providers {
        println!("  provider {}: capability {:?}", p.provider, p.capability);
    }
    for o in &handoff.objectives {
        println!(
            "  objective {} ({}): {:?}, verified={}, attempts total={} admitted={} refused={}",
            o.query_id,
            o.package,
            o.outcome,
            o.verified,
            o.attempts.total,
            o.attempts.admitted,
            o.attempts.refused
        );
    }
    Ok(())
}

/// The evidence agent's output over the scenarios' handoffs, in the Investibook schema.
pub(crate) fn evidence_agent_output(handoffs: &[(&str, Handoff)]) -> Result<Value, Box<dyn Error>> {
    let mut missing = Vec::new();
    let mut summary = Vec::new();
    let mut all_ok = true;
    for (title, h) in handoffs {
        for o in &h.objectives {
            match o.outcome {
                Outcome::Ok => summary.push(format!("{title}/{}: ok", o.query_id)),
                Outcome::NoData => missing.push(format!(
                    "{title}/{}: no series returned (unverified, not zero)",
                    o.query_id
                )),
                _ => {
                    all_ok = false;
                    missing.push(format!("{title}/{}: {:?}", o.query_id, o.outcome));
                }
            }
        }
    }
    Ok(json!({
        "agent": "evidence-agent",
        "status": if all_ok { "ok" } else { "partial" },
        "summary": format!("Replayed seed incidents: {}.", summary.join(", ")),
        "scope": {"cluster_id": "SaaS01", "time_range": {"start": "2026-07-21T21:50:00+08:00", "end": "2026-07-21T22:05:00+08:00", "timezone": "Asia/Shanghai"},
                  "tier": "dedicated", "parent_id": "", "keyspace_id": ""},
        "evidence_files": ["evidences/metrics.json"],
        "missing_evidence": missing,
        "warnings": [],
        "next_recommended_skills": ["tidb-clinic-diagnosis"]
    }))
}
