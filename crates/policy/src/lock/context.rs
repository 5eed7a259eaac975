//! The locking context of one request: the validated policy, the resolved scope
//! bindings, and the steps and read bounds derived from the policy window and limits.

use jiff::Timestamp;

use super::code::Code;
use super::scope::tier_bindings;
use super::types::{LockRejection, ScopeBinding};
use crate::TrustedPolicy;
use crate::promql::ReadBounds;

/// The locking context of one request.
pub(super) struct Ctx<'a> {
    /// The validated policy.
    pub(super) policy: &'a TrustedPolicy,
    /// The scope bindings that apply: `(label, policy value)`.
    pub(super) bindings: Vec<(&'a str, &'a str)>,
    /// The policy window, in seconds.
    pub(super) window_seconds: u64,
    /// The step of a query that names none.
    pub(super) default_step: u64,
    /// The smallest step within both the minimum step and the points limit.
    pub(super) smallest_step: u64,
    /// What an expression may read.
    pub(super) bounds: ReadBounds,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(
        policy: &'a TrustedPolicy,
        scope: &'a [ScopeBinding],
    ) -> Result<Self, LockRejection> {
        let internal = |detail: String| LockRejection {
            query_id: None,
            request_digest: None,
            failure: Box::new(Code::TrustedPolicyRejected.failure(detail, "")),
        };
        policy.validate().map_err(|e| internal(e.to_string()))?;
        let bindings = tier_bindings(policy, scope).map_err(internal)?;
        let window_seconds = policy.window.seconds();
        let max_points = u64::from(policy.limits.max_points_per_series);
        let min_step = policy.limits.min_step.as_secs().max(1);
        let smallest_step = min_step.max(window_seconds / max_points.max(1) + 1);
        let promtool_default = window_seconds.div_ceil(250).max(1);
        let default_step = promtool_default.max(smallest_step);
        let start = i128::from(policy.window.start.as_millisecond());
        let lookback = i128::try_from(policy.lookback.as_millis()).unwrap_or(i128::MAX);
        Ok(Ctx {
            policy,
            bindings,
            window_seconds,
            default_step,
            smallest_step,
            bounds: ReadBounds {
                start,
                end: i128::from(policy.window.end.as_millisecond()),
                earliest: start.saturating_sub(lookback),
                max_subquery_points: max_points,
                step_ms: u128::from(default_step) * 1000,
            },
        })
    }

    pub(super) fn format_ms(ms: i128) -> String {
        i64::try_from(ms)
            .ok()
            .and_then(|m| Timestamp::from_millisecond(m).ok())
            .map_or_else(|| format!("{ms} ms"), |t| t.to_string())
    }

    pub(super) fn window_text(&self) -> String {
        format!(
            "{} to {} plus {}s of look-back",
            self.policy.window.start,
            self.policy.window.end,
            self.policy.lookback.as_secs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::fixtures::clinic;

    #[test]
    fn default_step_is_promtool_like() {
        let p = clinic();
        let ctx = Ctx::new(&p, &[]).unwrap();
        // 900 s / 250 = 3.6 -> 4 s, but at least the 15 s minimum.
        assert_eq!(ctx.default_step, 15);
        let mut p = clinic();
        p.window.end = "2026-07-21T14:50:00Z".parse().unwrap();
        p.limits.min_step = std::time::Duration::from_secs(1);
        let ctx = Ctx::new(&p, &[]).unwrap();
        assert_eq!(ctx.default_step, 15, "3600 s / 250 = 14.4 -> 15 s");
    }
}
