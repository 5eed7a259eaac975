//! The one deadline of a call, from its package manifest's `limits.timeout_ms`: the
//! runtime ends a tool sandbox when `timeout_ms` passes, so every call must have
//! written its result and its audit record before then. The call's work (reading the
//! envelope and keys, waiting for an MCP call slot, the turn ledger's admission, the
//! connector's every step, the output guard) gets `timeout_ms` less a margin
//! ([`deadline_margin`]) kept for what follows the deadline: writing the audit record
//! and the result, logging the answer in the turn ledger, and the process' exit.
//!
//! The deadline counts from the start of the call: the start of the process for the
//! one-shot entrypoint (so hashing its own package counts too), the arrival of the
//! `tools/call` request for the MCP server.
//!
//! ```
//! use std::time::Duration;
//! use evidence_tool::deadline::{call_budget, deadline_margin};
//!
//! // 10 % of timeout_ms, at least 250 ms, at most 5 s.
//! assert_eq!(deadline_margin(Duration::from_secs(4)), Duration::from_millis(400));
//! assert_eq!(deadline_margin(Duration::from_secs(60)), Duration::from_secs(5));
//! assert_eq!(call_budget(Duration::from_secs(60)), Duration::from_secs(55));
//! assert_eq!(call_budget(Duration::from_secs(1)), Duration::from_millis(750));
//! ```

use std::time::{Duration, Instant};

use evidence_connectors::Deadline;
use evidence_package::Package;

/// The share of `timeout_ms` kept as the margin: one tenth.
pub const MARGIN_DIVISOR: u32 = 10;
/// The smallest margin: 250 ms, enough to guard a compact result, append one audit
/// line, write one result line and exit, on a loaded machine.
pub const MIN_MARGIN: Duration = Duration::from_millis(250);
/// The largest margin: 5 s. A longer `timeout_ms` gives its extra time to the work.
pub const MAX_MARGIN: Duration = Duration::from_secs(5);

/// How long after the deadline a connector that has not answered is given up on (a
/// connector races every step against the deadline, so this is a guard against a step
/// that does not): a quarter of the margin, so the result and its record still fit.
pub(crate) fn give_up_after(timeout: Duration) -> Duration {
    deadline_margin(timeout) / 4
}

/// The margin kept after the deadline of a call whose package has `timeout`:
/// [`MARGIN_DIVISOR`]th of it, within [`MIN_MARGIN`] and [`MAX_MARGIN`].
pub fn deadline_margin(timeout: Duration) -> Duration {
    (timeout / MARGIN_DIVISOR).clamp(MIN_MARGIN, MAX_MARGIN)
}

/// The time a call of a package with `timeout` has for its work: `timeout` less
/// [`deadline_margin`] (zero when the margin takes it all).
pub fn call_budget(timeout: Duration) -> Duration {
    timeout.saturating_sub(deadline_margin(timeout))
}

/// The package's `limits.timeout_ms`.
pub fn package_timeout(package: &Package) -> Duration {
    Duration::from_millis(package.manifest().limits.timeout_ms)
}

/// The deadline of a call of `package` that started at `started`.
pub fn call_deadline(package: &Package, started: Instant) -> Deadline {
    let budget = call_budget(package_timeout(package));
    Deadline::at(tokio::time::Instant::from_std(started) + budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_a_tenth_within_its_bounds_and_the_budget_never_underflows() {
        let ms = Duration::from_millis;
        assert_eq!(deadline_margin(ms(1)), MIN_MARGIN);
        assert_eq!(call_budget(ms(1)), Duration::ZERO);
        assert_eq!(call_budget(ms(250)), Duration::ZERO);
        assert_eq!(call_budget(ms(8_000)), ms(7_200));
        assert_eq!(call_budget(ms(45_000)), ms(40_500));
        assert_eq!(call_budget(ms(120_000)), ms(115_000));
        for t in [1, 100, 999, 2_500, 4_000, 49_999, 600_000] {
            let t = ms(t);
            assert_eq!(call_budget(t) + deadline_margin(t).min(t), t);
            assert!(give_up_after(t) < deadline_margin(t));
        }
    }
}
