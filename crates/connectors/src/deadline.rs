//! The deadline of one call: the instant by which a connector hands back its result,
//! and the cancellation that ends the call at once. A connector races each of its steps
//! against it ([`Deadline::run`]), derives the provider's own `timeout` parameter from
//! what is left of it ([`Deadline::limit`]), and answers a step it cut off with the one
//! typed timeout failure of [`deadline_failure`], whose correction says whether a
//! narrower query may help.

use std::time::Duration;

use evidence_result::{Correction, Failure, FailureClass, Provider};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::codes::OriginCode;

/// When a call must be answered by, and the signal that cancels it. Cheap to clone; the
/// clones share the cancellation.
///
/// ```
/// use std::time::Duration;
/// use evidence_connectors::Deadline;
///
/// let unbounded = Deadline::none();
/// assert_eq!(unbounded.limit(Duration::from_secs(30)), Duration::from_secs(30));
/// let soon = Deadline::after(Duration::from_secs(2));
/// assert!(soon.limit(Duration::from_secs(30)) <= Duration::from_secs(2));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Deadline {
    at: Option<Instant>,
    cancel: Option<CancellationToken>,
}

/// The deadline passed (or the call was cancelled) before the raced work finished; the
/// work was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the call's deadline passed")]
pub struct DeadlinePassed;

impl Deadline {
    /// No deadline: only the connector configuration's own time limits apply.
    pub fn none() -> Self {
        Deadline::default()
    }

    /// A deadline at `at`.
    pub fn at(at: Instant) -> Self {
        Deadline {
            at: Some(at),
            cancel: None,
        }
    }

    /// A deadline `budget` from now.
    pub fn after(budget: Duration) -> Self {
        Deadline::at(Instant::now() + budget)
    }

    /// The same deadline, also over as soon as `token` is cancelled.
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// The same cancellation with an instant `by` earlier (a connector keeping time for
    /// its own cleanup before the deadline). No deadline stays none.
    pub fn earlier_by(&self, by: Duration) -> Self {
        Deadline {
            at: self
                .at
                .map(|at| at.checked_sub(by).unwrap_or_else(Instant::now)),
            cancel: self.cancel.clone(),
        }
    }

    /// The instant, when there is one.
    pub fn instant(&self) -> Option<Instant> {
        self.at
    }

    /// The time left: `None` without an instant, zero once over (passed or cancelled).
    pub fn remaining(&self) -> Option<Duration> {
        if self.is_cancelled() {
            return Some(Duration::ZERO);
        }
        self.at
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// `limit`, or the time left when that is shorter.
    pub fn limit(&self, limit: Duration) -> Duration {
        self.remaining().map_or(limit, |left| left.min(limit))
    }

    /// True once the call was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
    }

    /// True once the instant passed or the call was cancelled.
    pub fn is_over(&self) -> bool {
        self.remaining().is_some_and(|left| left.is_zero())
    }

    /// Resolves when the instant passes or the call is cancelled (never, for
    /// [`Deadline::none`] without a cancellation).
    pub async fn over(&self) {
        let passed = async {
            match self.at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending::<()>().await,
            }
        };
        match &self.cancel {
            Some(token) => {
                tokio::select! {
                    () = passed => {}
                    () = token.cancelled() => {}
                }
            }
            None => passed.await,
        }
    }

    /// Runs `work` until it finishes or the deadline is over, whichever is first; the
    /// work is dropped when the deadline wins.
    pub async fn run<F: Future>(&self, work: F) -> Result<F::Output, DeadlinePassed> {
        if self.is_over() {
            return Err(DeadlinePassed);
        }
        tokio::select! {
            biased;
            out = work => Ok(out),
            () = self.over() => Err(DeadlinePassed),
        }
    }
}

/// Where a call was when its deadline cut it off, which decides whether a narrower
/// query may help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CutOff {
    /// Before the query reached the provider: waiting for a call slot or for the turn
    /// ledger, the session bootstrap, the browser start, readiness, the Grafana login.
    /// A narrower query would not help.
    BeforeQuery(&'static str),
    /// While the provider evaluated or sent the query's answer (no headers yet, or a
    /// body still arriving). A narrower query may answer in time.
    DuringQuery,
}

impl CutOff {
    /// True when a narrower query may answer within the deadline.
    pub fn narrower_may_help(self) -> bool {
        matches!(self, CutOff::DuringQuery)
    }

    fn step(self) -> &'static str {
        match self {
            CutOff::BeforeQuery(step) => step,
            CutOff::DuringQuery => "while the provider was evaluating or sending the answer",
        }
    }
}

/// What a timeout correction adds when a narrower query may help.
pub const NARROWER_MAY_HELP: &str = "The deadline passed while the provider was evaluating \
or sending the answer: a narrower query (fewer series, a shorter range, a larger step) may \
answer in time in a later turn; say so in the report.";
/// What a timeout correction adds when a narrower query would not help.
pub const NARROWER_WILL_NOT_HELP: &str = "The deadline passed before the query reached the \
provider: a narrower query would not help.";

/// The typed timeout failure of a call `deadline` cut off at `cut`: `<origin>_timeout`
/// (`clinic_timeout`, `manus_timeout`, `grafana_timeout`), class `timeout`, its detail
/// saying where the call was (or that it was cancelled), its correction saying whether a
/// narrower query may help.
pub fn deadline_failure(provider: Provider, deadline: &Deadline, cut: CutOff) -> Failure {
    let detail = if deadline.is_cancelled() {
        format!("the call was cancelled {}", cut.step())
    } else {
        format!("the call's deadline passed {}", cut.step())
    };
    let hint = if cut.narrower_may_help() {
        NARROWER_MAY_HELP
    } else {
        NARROWER_WILL_NOT_HELP
    };
    let code = OriginCode::Timeout;
    Failure::new(code.code(provider), code.class(), detail).with_correction(Correction::for_class(
        FailureClass::Timeout,
        Some(hint),
        Correction::default_keep(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn run_gives_the_work_or_the_passed_deadline() {
        let d = Deadline::after(Duration::from_millis(50));
        assert_eq!(d.run(async { 7 }).await, Ok(7));
        let slow = d.run(tokio::time::sleep(Duration::from_secs(5)));
        let started = std::time::Instant::now();
        assert_eq!(slow.await, Err(DeadlinePassed));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(d.is_over());
        assert_eq!(d.remaining(), Some(Duration::ZERO));
        assert_eq!(Deadline::none().remaining(), None);
        assert!(!Deadline::none().is_over());
    }

    #[tokio::test]
    async fn cancellation_ends_the_deadline_at_once() {
        let token = CancellationToken::new();
        let d = Deadline::after(Duration::from_secs(60)).with_cancellation(token.clone());
        assert!(!d.is_over());
        let work = d.run(tokio::time::sleep(Duration::from_secs(30)));
        token.cancel();
        assert_eq!(work.await, Err(DeadlinePassed));
        assert!(d.is_cancelled() && d.is_over());
        assert_eq!(d.limit(Duration::from_secs(5)), Duration::ZERO);
        let none = Deadline::none().with_cancellation(token);
        assert!(none.is_over());
    }

    #[test]
    fn earlier_keeps_the_cancellation_and_never_underflows() {
        let d = Deadline::after(Duration::from_secs(10));
        let earlier = d.earlier_by(Duration::from_secs(3));
        let left = earlier.remaining().unwrap();
        assert!(left <= Duration::from_secs(7) && left > Duration::from_secs(6));
        let gone = d.earlier_by(Duration::from_secs(3600));
        assert!(gone.is_over());
        assert_eq!(
            Deadline::none()
                .earlier_by(Duration::from_secs(1))
                .instant(),
            None
        );
    }

    #[test]
    fn the_failure_is_a_typed_timeout_that_says_whether_narrowing_helps() {
        let d = Deadline::after(Duration::ZERO);
        let during = deadline_failure(Provider::Clinic, &d, CutOff::DuringQuery);
        assert_eq!(during.error.code.as_str(), "clinic_timeout");
        assert_eq!(during.error.class, FailureClass::Timeout);
        assert!(during.correction.instruction.contains("may answer in time"));
        assert!(!during.correction.allowed);
        let before = deadline_failure(
            Provider::Wetech,
            &d,
            CutOff::BeforeQuery("while the browser started"),
        );
        assert_eq!(before.error.code.as_str(), "grafana_timeout");
        assert!(before.detail_error.contains("while the browser started"));
        assert!(before.correction.instruction.contains("would not help"));
    }
}
