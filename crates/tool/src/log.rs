//! The stderr lines of a package's server over HTTP, for a log collector: one JSON
//! object per line, with `time`, `level`, `event` (a fixed name), `package`, `message`
//! and, for a call, its trace id; `--log-format plain` writes the message alone, as the
//! stdio server and the one-shot entrypoint always do (their stderr is a person's
//! terminal or the runtime's capture).
//!
//! No line carries a secret, a token, an envelope or a model's argument: the messages
//! name codes, variables, files and hosts (an operator's detail), and every line passes
//! the package's output guard first, as an answer does. A line that would carry a bound
//! secret, in any encoding the guard knows, is replaced by one that names only the
//! secret (`log_line_blocked`).

use std::io::Write as _;
use std::sync::{Arc, OnceLock};

use serde_json::json;

/// The flag (after `--mcp-http ADDR`) choosing the log format: `json` (the default) or
/// `plain`.
pub const LOG_FORMAT_FLAG: &str = "--log-format";

/// How stderr lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LogFormat {
    /// One JSON object per line.
    #[default]
    Json,
    /// The message alone.
    Plain,
}

impl LogFormat {
    /// The format a [`LOG_FORMAT_FLAG`] value names.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value {
            "json" => Ok(LogFormat::Json),
            "plain" => Ok(LogFormat::Plain),
            other => Err(format!(
                "{LOG_FORMAT_FLAG} takes json or plain, not {other:?}"
            )),
        }
    }

    /// The flag's value for this format.
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Json => "json",
            LogFormat::Plain => "plain",
        }
    }
}

/// A line's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Info,
    Warn,
    Error,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// Scans a line with the package's output guard: the names of the bound secrets it
/// holds, when it holds any.
pub(crate) type Scan = dyn Fn(&str) -> Option<Vec<String>> + Send + Sync;

struct Sink {
    format: LogFormat,
    package: String,
    scan: Arc<Scan>,
}

static SINK: OnceLock<Sink> = OnceLock::new();

/// Makes this process's stderr lines `format`, for `package`, each scanned by `scan`
/// first. Before it (and in the shapes that never call it) lines are plain.
pub(crate) fn init(format: LogFormat, package: &str, scan: Arc<Scan>) {
    let _set = SINK.set(Sink {
        format,
        package: package.to_owned(),
        scan,
    });
}

/// Writes one line: `event` is a fixed name, `message` the text, `trace` the call's
/// trace id when it has one.
pub(crate) fn line(level: Level, event: &'static str, message: &str, trace: Option<&str>) {
    let text = match SINK.get() {
        None => message.to_owned(),
        Some(sink) => render(sink, level, event, message, trace),
    };
    let _written = writeln!(std::io::stderr(), "{text}");
}

/// The line `sink` writes (see [`line`]).
fn render(
    sink: &Sink,
    level: Level,
    event: &'static str,
    message: &str,
    trace: Option<&str>,
) -> String {
    let (event, message, blocked) = match (sink.scan)(message) {
        None => (event, message.to_owned(), None),
        Some(secrets) => (
            "log_line_blocked",
            format!("a {event} line held a bound secret and was withheld"),
            Some(secrets),
        ),
    };
    match sink.format {
        LogFormat::Plain => message,
        LogFormat::Json => {
            let mut object = json!({
                "time": jiff::Timestamp::now().to_string(),
                "level": level.as_str(),
                "event": event,
                "package": sink.package,
                "message": message,
            });
            if let Some(trace) = trace {
                object["trace_id"] = json!(trace);
            }
            if let Some(secrets) = blocked {
                object["blocked_secrets"] = json!(secrets);
            }
            object.to_string()
        }
    }
}

/// [`line`] at level info.
pub(crate) fn info(event: &'static str, message: &str) {
    line(Level::Info, event, message, None);
}

/// [`line`] at level warn.
pub(crate) fn warn(event: &'static str, message: &str) {
    line(Level::Warn, event, message, None);
}

/// [`line`] at level error.
pub(crate) fn error(event: &'static str, message: &str) {
    line(Level::Error, event, message, None);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(format: LogFormat) -> Sink {
        Sink {
            format,
            package: "managed_auto_oncall_clinic".to_owned(),
            scan: Arc::new(|text: &str| {
                text.contains("s3cr3t-value")
                    .then(|| vec!["CLINIC_API_TOKEN".to_owned()])
            }),
        }
    }

    #[test]
    fn a_line_is_one_json_object_and_a_secret_never_leaves_in_one() {
        let line = render(
            &sink(LogFormat::Json),
            Level::Warn,
            "call_failed",
            "clinic-tool: turn_ledger_unavailable: redis at 127.0.0.1:6379",
            Some("4bf92f3577b34da6a3ce929d0e0e4736"),
        );
        let object: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(object["level"], "warn");
        assert_eq!(object["event"], "call_failed");
        assert_eq!(object["package"], "managed_auto_oncall_clinic");
        assert_eq!(object["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(object["time"].as_str().is_some());
        assert!(!line.contains('\n'));
        for format in [LogFormat::Json, LogFormat::Plain] {
            let line = render(
                &sink(format),
                Level::Error,
                "request_record_failed",
                "the token is s3cr3t-value",
                None,
            );
            assert!(!line.contains("s3cr3t-value"), "{line}");
            assert!(line.contains("withheld"), "{line}");
        }
        let plain = render(
            &sink(LogFormat::Plain),
            Level::Info,
            "serving",
            "serving x",
            None,
        );
        assert_eq!(plain, "serving x");
    }
}
