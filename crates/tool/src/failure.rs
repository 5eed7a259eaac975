//! Runtime-context failures as results: a missing or unreadable envelope, unset or
//! malformed keys, an unset or unbindable secret, configuration that cannot be used, or a
//! package folder that does not load. Each becomes one failed `ToolResult` of a shared
//! class (it stops the turn), never silence. The detail names variables and files, never
//! a value.

use evidence_result::{
    Correction, Details, ErrorCode, Failure, FailureClass, Origin, ResultError, ToolResult,
};

/// What kind of runtime-context failure happened; each kind is one error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RuntimeFailureKind {
    /// The policy envelope or the verification keys are not there (unset variable,
    /// missing or unreadable file).
    ContextMissing,
    /// The policy envelope or the verification keys are there but malformed (a version 1
    /// HMAC envelope included), or the sandbox holds the policy signing key.
    ContextInvalid,
    /// The policy does not verify for this package digest (tampered package, wrong key,
    /// expired, other package).
    PolicyVerificationFailed,
    /// A secret of the auth binding is not injected or cannot be bound.
    SecretNotBound,
    /// The package folder of the running binary does not load or is not its own.
    PackageLoadFailed,
    /// The deployment configuration cannot be used.
    ConfigInvalid,
    /// The model arguments could not be read from stdin.
    InputUnreadable,
    /// A call over HTTP presented no session token (header `X-Evidence-Session`), or a
    /// malformed one.
    SessionMissing,
    /// No envelope was delivered for the session the call presents.
    SessionUnknown,
    /// The newest envelope delivered for the session has expired.
    SessionExpired,
    /// The shared turn ledger (a Redis) could not admit or look up the call: not
    /// reachable, not answering within the call's deadline, answering what is not a
    /// ledger, or not durable.
    TurnLedgerUnavailable,
}

impl RuntimeFailureKind {
    /// Every kind.
    pub const ALL: [RuntimeFailureKind; 11] = [
        RuntimeFailureKind::ContextMissing,
        RuntimeFailureKind::ContextInvalid,
        RuntimeFailureKind::PolicyVerificationFailed,
        RuntimeFailureKind::SecretNotBound,
        RuntimeFailureKind::PackageLoadFailed,
        RuntimeFailureKind::ConfigInvalid,
        RuntimeFailureKind::InputUnreadable,
        RuntimeFailureKind::SessionMissing,
        RuntimeFailureKind::SessionUnknown,
        RuntimeFailureKind::SessionExpired,
        RuntimeFailureKind::TurnLedgerUnavailable,
    ];

    /// The error code.
    pub fn code(self) -> &'static str {
        match self {
            RuntimeFailureKind::ContextMissing => "runtime_context_missing",
            RuntimeFailureKind::ContextInvalid => "runtime_context_invalid",
            RuntimeFailureKind::PolicyVerificationFailed => "policy_verification_failed",
            RuntimeFailureKind::SecretNotBound => "secret_not_bound",
            RuntimeFailureKind::PackageLoadFailed => "package_load_failed",
            RuntimeFailureKind::ConfigInvalid => "tool_config_invalid",
            RuntimeFailureKind::InputUnreadable => "tool_input_unreadable",
            RuntimeFailureKind::SessionMissing => "session_missing",
            RuntimeFailureKind::SessionUnknown => "session_unknown",
            RuntimeFailureKind::SessionExpired => "session_expired",
            RuntimeFailureKind::TurnLedgerUnavailable => "turn_ledger_unavailable",
        }
    }

    /// The failure class. Every kind is shared: nothing the model changes fixes it, so
    /// it stops the turn. No trusted authorization (context, verification) is
    /// `authorization`; credentials are `authentication`; the sandbox itself not being
    /// usable is `readiness`. A session that is missing, unknown or expired is
    /// `authorization` too: no current policy authorizes the call. A shared turn ledger
    /// that cannot be used is `readiness`: the sandbox cannot know the turn's state.
    pub fn class(self) -> FailureClass {
        match self {
            RuntimeFailureKind::ContextMissing
            | RuntimeFailureKind::ContextInvalid
            | RuntimeFailureKind::PolicyVerificationFailed
            | RuntimeFailureKind::SessionMissing
            | RuntimeFailureKind::SessionUnknown
            | RuntimeFailureKind::SessionExpired => FailureClass::Authorization,
            RuntimeFailureKind::SecretNotBound => FailureClass::Authentication,
            RuntimeFailureKind::PackageLoadFailed
            | RuntimeFailureKind::ConfigInvalid
            | RuntimeFailureKind::InputUnreadable
            | RuntimeFailureKind::TurnLedgerUnavailable => FailureClass::Readiness,
        }
    }
}

/// A runtime-context failure with its model-visible detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {detail}", kind.code())]
pub struct RuntimeFailure {
    /// What failed.
    pub kind: RuntimeFailureKind,
    /// Why, naming variables and files only.
    pub detail: String,
}

impl RuntimeFailure {
    /// A failure of `kind`.
    pub fn new(kind: RuntimeFailureKind, detail: impl Into<String>) -> Self {
        RuntimeFailure {
            kind,
            detail: detail.into(),
        }
    }

    /// The failure of the result contract: code, class, detail and the shared-class
    /// correction (do not retry).
    pub fn failure(&self) -> Result<Failure, ResultError> {
        let class = self.kind.class();
        Ok(
            Failure::new(ErrorCode::new(self.kind.code())?, class, &self.detail)
                .with_correction(Correction::for_class(class, None, Vec::new())),
        )
    }

    /// The failed result of the whole call.
    pub fn to_tool_result(&self, origin: Origin) -> Result<ToolResult, ResultError> {
        ToolResult::new(Details::failure(origin, None, None, self.failure()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_a_valid_shared_code() {
        let mut codes = std::collections::BTreeSet::new();
        for kind in RuntimeFailureKind::ALL {
            assert!(ErrorCode::new(kind.code()).is_ok(), "{}", kind.code());
            assert!(kind.class().is_shared(), "{}", kind.code());
            assert!(codes.insert(kind.code()));
        }
    }
}
