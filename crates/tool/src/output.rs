//! Output writing of an entrypoint: the one `ToolResult` JSON (`text` and `details`) on
//! stdout and the one audit record appended to the audit log the runtime context names
//! (`EVIDENCE_AUDIT_LOG`; stderr when unset).

use std::io::Write as _;
use std::path::Path;

use evidence_package::AuditRecord;
use evidence_result::ToolResult;

use crate::ToolError;

/// Writes the audit record (appended to `audit_log`, stderr when `None`), then the result
/// (`{"text": ..., "details": ...}`, one line) on stdout. The audit record goes first so
/// a result is never returned without its record.
pub fn write_outputs(
    result: &ToolResult,
    audit: &AuditRecord,
    audit_log: Option<&Path>,
) -> Result<(), ToolError> {
    write_audit(audit, audit_log)?;
    let json = result.to_json()?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(json.as_bytes())
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush())
        .map_err(|e| ToolError::io("write the result to", "stdout", e))
}

/// Appends the audit record to `audit_log` (stderr when `None`).
pub(crate) fn write_audit(audit: &AuditRecord, audit_log: Option<&Path>) -> Result<(), ToolError> {
    let started = std::time::Instant::now();
    let what = ("append the audit record to", "write the audit record to");
    let written = append_line(&audit.to_json_line()?, what, audit_log);
    // Every answered call is counted where its record is written, in every shape.
    let metrics = crate::metrics::global();
    metrics.phase(
        audit.package.as_str(),
        crate::metrics::Phase::Audit,
        started.elapsed(),
    );
    metrics.call(audit, written.is_ok());
    written
}

/// Appends `line` and a newline to `audit_log` (stderr when `None`); `what` says what
/// failed, for a file and for stderr.
pub(crate) fn append_line(
    line: &str,
    what: (&'static str, &'static str),
    audit_log: Option<&Path>,
) -> Result<(), ToolError> {
    let line = format!("{line}\n");
    match audit_log {
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(|e| ToolError::io(what.0, path, e))?,
        None => std::io::stderr()
            .write_all(line.as_bytes())
            .map_err(|e| ToolError::io(what.1, "stderr", e))?,
    }
    Ok(())
}
