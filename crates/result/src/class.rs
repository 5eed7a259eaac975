//! Failure classes: why a call failed, and the groups of classes that decide what the
//! caller may do next (correct once, report, or stop the turn).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a call failed. The class decides what the caller may do next.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// A model argument is malformed (bad JSON shape, bad PromQL, bad unit, bad reference).
    /// Correctable once in the same turn.
    InvalidArgument,
    /// The provider rejected the query (HTTP 400 `bad_data`, 422 `execution`).
    /// Correctable once in the same turn.
    QueryRejected,
    /// The request tried to leave or widen the trusted policy. Correctable only by
    /// removing the offending part, never by widening.
    PolicyViolation,
    /// Credentials were refused. Shared: stops the turn.
    Authentication,
    /// A provider session could not be established. Shared: stops the turn.
    SessionBootstrap,
    /// The provider is not ready (health check failed). Shared: stops the turn.
    Readiness,
    /// The credentials are valid but not allowed. Shared: stops the turn.
    Authorization,
    /// The browser or its driver failed to start or died. Shared: stops the turn.
    BrowserRuntime,
    /// The provider is unreachable, overloaded or failing (429, 5xx, connection errors).
    ProviderUnavailable,
    /// The call ran out of time.
    Timeout,
    /// The output held a bound secret and was replaced by this error. Shared: stops the
    /// turn, because whether an output is blocked confirms or refutes a guessed secret
    /// (a value the model wrote into a label): one guess per turn.
    OutputBlocked,
    /// A fault inside the tool itself, including a trusted policy that does not verify.
    Internal,
}

/// The groups of failure classes, which decide turn control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureGroup {
    /// `invalid_argument`, `query_rejected`: one changed attempt in the same turn.
    SameTurnCorrectable,
    /// `policy_violation`: correctable only by removing the offending part.
    Policy,
    /// `authentication`, `session_bootstrap`, `readiness`, `authorization`,
    /// `browser_runtime`, `output_blocked`: stop the turn, never retried per objective.
    Shared,
    /// `provider_unavailable`, `timeout`, `internal`.
    Other,
}

impl FailureClass {
    /// Every class, in declaration order.
    pub const ALL: [FailureClass; 12] = [
        FailureClass::InvalidArgument,
        FailureClass::QueryRejected,
        FailureClass::PolicyViolation,
        FailureClass::Authentication,
        FailureClass::SessionBootstrap,
        FailureClass::Readiness,
        FailureClass::Authorization,
        FailureClass::BrowserRuntime,
        FailureClass::ProviderUnavailable,
        FailureClass::Timeout,
        FailureClass::OutputBlocked,
        FailureClass::Internal,
    ];

    /// The group this class belongs to.
    pub fn group(self) -> FailureGroup {
        use FailureClass::*;
        match self {
            InvalidArgument | QueryRejected => FailureGroup::SameTurnCorrectable,
            PolicyViolation => FailureGroup::Policy,
            Authentication | SessionBootstrap | Readiness | Authorization | BrowserRuntime
            | OutputBlocked => FailureGroup::Shared,
            ProviderUnavailable | Timeout | Internal => FailureGroup::Other,
        }
    }

    /// True for the classes a caller may correct once in the same turn by changing its
    /// own request (`invalid_argument`, `query_rejected`).
    pub fn is_same_turn_correctable(self) -> bool {
        self.group() == FailureGroup::SameTurnCorrectable
    }

    /// True for `policy_violation`.
    pub fn is_policy(self) -> bool {
        self.group() == FailureGroup::Policy
    }

    /// True for the shared classes that stop the current turn.
    pub fn is_shared(self) -> bool {
        self.group() == FailureGroup::Shared
    }

    /// True when one changed attempt with the same query id is allowed in this turn:
    /// the same-turn correctable classes and `policy_violation` (by removal only).
    pub fn allows_correction(self) -> bool {
        matches!(
            self.group(),
            FailureGroup::SameTurnCorrectable | FailureGroup::Policy
        )
    }

    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        use FailureClass::*;
        match self {
            InvalidArgument => "invalid_argument",
            QueryRejected => "query_rejected",
            PolicyViolation => "policy_violation",
            Authentication => "authentication",
            SessionBootstrap => "session_bootstrap",
            Readiness => "readiness",
            Authorization => "authorization",
            BrowserRuntime => "browser_runtime",
            ProviderUnavailable => "provider_unavailable",
            Timeout => "timeout",
            OutputBlocked => "output_blocked",
            Internal => "internal",
        }
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_match_the_design() {
        use FailureClass::*;
        let shared: Vec<_> = FailureClass::ALL.iter().filter(|c| c.is_shared()).collect();
        assert_eq!(
            shared,
            [
                &Authentication,
                &SessionBootstrap,
                &Readiness,
                &Authorization,
                &BrowserRuntime,
                &OutputBlocked
            ]
        );
        assert!(!OutputBlocked.allows_correction());
        assert!(InvalidArgument.is_same_turn_correctable());
        assert!(QueryRejected.is_same_turn_correctable());
        assert!(PolicyViolation.is_policy() && PolicyViolation.allows_correction());
        assert!(!PolicyViolation.is_same_turn_correctable());
        for c in [ProviderUnavailable, Timeout, Internal] {
            assert_eq!(c.group(), FailureGroup::Other);
            assert!(!c.allows_correction());
        }
        for c in FailureClass::ALL {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
        }
    }
}
