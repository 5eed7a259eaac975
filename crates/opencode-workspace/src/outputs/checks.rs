//! The protocol rules a child output must satisfy beyond its schema: the Go GC check of a
//! TiDB high CPU diagnosis, concrete gaps, a named root cause, evidence paths inside the
//! workspace.

use super::model::{CheckResult, DiagnosisAnalystOutput, EvidenceAgentOutput, RunStatus};

/// The `check` name of the quality check a TiDB high CPU diagnosis must record.
pub const GO_GC_CHECK: &str = "tidb_go_gc_metrics";

/// What the backend knows about the diagnosis, for the quality checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiagnosisContext {
    tidb_high_cpu: bool,
}

impl DiagnosisContext {
    /// Marks the diagnosis as a TiDB high CPU case (from the alert or ticket
    /// classification), which requires the Go GC metrics check.
    pub fn tidb_high_cpu(mut self) -> Self {
        self.tidb_high_cpu = true;
        self
    }
}

/// `true` when the output itself describes TiDB CPU trouble.
fn mentions_tidb_cpu(output: &DiagnosisAnalystOutput) -> bool {
    [&output.root_cause, &output.final_response]
        .into_iter()
        .chain(output.key_evidence.iter())
        .any(|text| {
            let text = text.to_lowercase();
            text.contains("tidb") && text.contains("cpu")
        })
}

/// The protocol rules an analyst output must satisfy beyond its schema: a TiDB high CPU
/// diagnosis (by context, or because the output talks about TiDB and CPU) records a
/// `tidb_go_gc_metrics` check that was performed, with detail; `needs_more_evidence`
/// comes with concrete gaps; an `ok` output names a root cause.
pub fn analyst_output_problems(
    output: &DiagnosisAnalystOutput,
    context: &DiagnosisContext,
) -> Vec<String> {
    let mut problems = Vec::new();
    if context.tidb_high_cpu || mentions_tidb_cpu(output) {
        let recorded = output.quality_checks.iter().any(|c| {
            c.check == GO_GC_CHECK
                && c.result != CheckResult::Skipped
                && !c.detail.trim().is_empty()
        });
        if !recorded {
            problems.push(format!(
                "TiDB high CPU diagnosis without a performed {GO_GC_CHECK} quality check"
            ));
        }
    }
    if output.needs_more_evidence && output.missing_evidence.iter().all(|m| m.trim().is_empty()) {
        problems.push("needs_more_evidence without concrete missing_evidence".to_owned());
    }
    if output.status == RunStatus::Ok
        && !output.needs_more_evidence
        && output.root_cause.trim().is_empty()
    {
        problems.push("status ok without a root_cause".to_owned());
    }
    problems
}

/// `true` for a workspace-relative path that stays inside the workspace.
fn is_safe_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && !path.contains(':')
        && path.split('/').all(|part| part != ".." && !part.is_empty())
}

/// The protocol rules an evidence agent output must satisfy beyond its schema: every
/// evidence file is a workspace-relative path that stays inside the workspace.
pub fn evidence_output_problems(output: &EvidenceAgentOutput) -> Vec<String> {
    output
        .evidence_files
        .iter()
        .filter(|p| !is_safe_relative(p))
        .map(|p| {
            format!("evidence file {p:?} is not a workspace-relative path inside the workspace")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_inside() {
        for ok in ["evidences/metrics.json", "a/b.c", "evidences/raw/x.log"] {
            assert!(is_safe_relative(ok), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../b",
            "a//b",
            "C:\\x",
            "a\\b",
            "./",
        ] {
            assert!(!is_safe_relative(bad), "{bad}");
        }
    }
}
