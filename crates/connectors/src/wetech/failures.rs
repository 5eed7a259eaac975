//! How browser and WebDriver failures of a Wetech call become result failures (redacted,
//! classed), and how the cleanup's own failure combines with the call's outcome.

use evidence_result::{Failure, Provider};

use super::browser::{BrowserError, CommandFailure};
use crate::codes::{Code, OriginCode};
use crate::prometheus::Redactor;

pub(super) fn browser_failure(e: &BrowserError, redactor: &Redactor) -> Box<Failure> {
    let (c, what, message) = match e {
        BrowserError::Start(m) => (
            Code::WetechBrowserStartFailed,
            "ChromeDriver or Chromium did not start",
            m,
        ),
        BrowserError::Lost(m) => (Code::WetechBrowserLost, "the browser stopped answering", m),
    };
    Box::new(Failure::new(
        c.code(),
        c.class(),
        format!("{what}: {}", redactor.redact(message)),
    ))
}

pub(super) fn command_failure(f: &CommandFailure, redactor: &Redactor) -> Box<Failure> {
    match f {
        CommandFailure::Lost(m) => browser_failure(&BrowserError::Lost(m.clone()), redactor),
        CommandFailure::Timeout(m) => Box::new(Failure::new(
            OriginCode::Timeout.code(Provider::Wetech),
            OriginCode::Timeout.class(),
            format!("the browser did not finish in time: {}", redactor.redact(m)),
        )),
        CommandFailure::Navigation(m) => Box::new(Failure::new(
            OriginCode::Unavailable.code(Provider::Wetech),
            OriginCode::Unavailable.class(),
            format!("the page did not load: {}", redactor.redact(m)),
        )),
        CommandFailure::Other(m) => Box::new(Failure::new(
            Code::WetechBrowserCommandFailed.code(),
            Code::WetechBrowserCommandFailed.class(),
            format!("a browser command failed: {}", redactor.redact(m)),
        )),
    }
}

/// The outcome, unless the cleanup failed: a profile left on disk is an error.
pub(super) fn finish_cleanup<T>(
    outcome: Result<T, Box<Failure>>,
    cleanup: Result<(), String>,
) -> Result<T, Box<Failure>> {
    match cleanup {
        Ok(()) => outcome,
        Err(problem) => Err(Box::new(Failure::new(
            Code::WetechCleanupFailed.code(),
            Code::WetechCleanupFailed.class(),
            format!("the browser profile could not be removed after the call: {problem}"),
        ))),
    }
}
