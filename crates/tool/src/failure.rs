//! Runtime-context failures as results: a missing or unreadable envelope, unset or
//! malformed keys, an unset or unbindable secret, configuration that cannot be used, or a
//! package folder that does not load. Each becomes one failed `ToolResult` of a shared
//! class (it stops the turn), never silence.
//!
//! A failure has two readers. The model reads its code, its class and a fixed sentence
//! per kind ([`RuntimeFailureKind::model_detail`]): nothing of the infrastructure (no
//! host, port, user, database, path or variable value) reaches a model-visible result,
//! whatever the failure's detail holds. The operator reads the detail
//! ([`RuntimeFailure::detail`]: the variable, file, host, port, user or database it
//! concerns, never a password or secret value) in the call's audit record
//! (`operator_detail`) and on the serving process' stderr.

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

    /// What the model reads of a failure of this kind (`detail_error`): a fixed sentence
    /// that says which part of the sandbox failed, whether anything was sent, and that
    /// the detail is the operator's. It names no host, port, user, database, path or
    /// variable value: the detail of the failure goes to the audit record and stderr
    /// only.
    pub fn model_detail(self) -> &'static str {
        match self {
            RuntimeFailureKind::ContextMissing => {
                "A part of this tool's runtime context (its trusted policy, verification \
                 keys or turn ledger) is not available in the sandbox; nothing was sent. \
                 Nothing in the arguments can fix it; the operator has the detail in this \
                 call's audit record."
            }
            RuntimeFailureKind::ContextInvalid => {
                "A part of this tool's runtime context (its trusted policy, verification \
                 keys or turn ledger) is present but cannot be used; nothing was sent. \
                 Nothing in the arguments can fix it; the operator has the detail in this \
                 call's audit record."
            }
            RuntimeFailureKind::PolicyVerificationFailed => {
                "The trusted policy of this call does not verify for this tool's package \
                 (changed, expired or issued for another package); nothing was sent. The \
                 operator has the detail in this call's audit record."
            }
            RuntimeFailureKind::SecretNotBound => {
                "This tool's credentials are not bound to its package; nothing was sent. \
                 The operator has the detail in this call's audit record."
            }
            RuntimeFailureKind::PackageLoadFailed => {
                "This tool's package did not load; nothing was sent. The operator has the \
                 detail in this call's audit record."
            }
            RuntimeFailureKind::ConfigInvalid => {
                "This tool's deployment configuration cannot be used, or the call could not \
                 produce a result. The operator has the detail in this call's audit record."
            }
            RuntimeFailureKind::InputUnreadable => {
                "The tool could not read the call's arguments as text; nothing was sent. \
                 The operator has the detail in this call's audit record."
            }
            RuntimeFailureKind::SessionMissing => {
                "The call presented no valid session of this tool server (the agent \
                 runtime sets it, not the arguments); nothing was sent. The operator has \
                 the detail in this call's audit record."
            }
            RuntimeFailureKind::SessionUnknown => {
                "No trusted policy was delivered to this tool server for the call's \
                 session; nothing was sent. The operator has the detail in this call's \
                 audit record."
            }
            RuntimeFailureKind::SessionExpired => {
                "The trusted policy of the call's session has expired; nothing was sent. \
                 The operator has the detail in this call's audit record."
            }
            RuntimeFailureKind::TurnLedgerUnavailable => {
                "The shared turn ledger could not be used to admit or look up this call; \
                 nothing was sent. Nothing in the arguments can fix it; the operator has \
                 the detail in this call's audit record."
            }
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

/// A runtime-context failure: its kind (what the model reads) and its detail (what the
/// operator reads). `Display` shows both, for the operator's stderr.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {detail}", kind.code())]
pub struct RuntimeFailure {
    /// What failed.
    pub kind: RuntimeFailureKind,
    /// Why, for the operator only: it may name variables, files, hosts, ports, users and
    /// databases, never a password or secret value. It never reaches a model-visible
    /// result ([`RuntimeFailure::failure`] carries [`RuntimeFailureKind::model_detail`]).
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

    /// The failure of the result contract, as the model reads it: code, class, the
    /// kind's fixed sentence ([`RuntimeFailureKind::model_detail`], never the detail)
    /// and the shared-class correction (do not retry).
    pub fn failure(&self) -> Result<Failure, ResultError> {
        let class = self.kind.class();
        Ok(Failure::new(
            ErrorCode::new(self.kind.code())?,
            class,
            self.kind.model_detail(),
        )
        .with_correction(Correction::for_class(class, None, Vec::new())))
    }

    /// The failed result of the whole call, as the model reads it (see
    /// [`RuntimeFailure::failure`]); the detail goes to the audit record
    /// (`AuditRecord::with_operator_detail`).
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

    /// Each kind's sentence is plain words: no path separator, no `host:port`, no URL,
    /// no digit (a port, a database, an address), no variable name.
    #[test]
    fn every_model_detail_names_nothing_of_the_infrastructure() {
        for kind in RuntimeFailureKind::ALL {
            let text = kind.model_detail();
            assert!(text.ends_with('.'), "{text}");
            assert!(!text.contains('/') && !text.contains("://"), "{text}");
            assert!(!text.contains(':'), "{text}");
            assert!(!text.bytes().any(|b| b.is_ascii_digit()), "{text}");
            assert!(!text.contains("EVIDENCE_") && !text.contains('_'), "{text}");
        }
    }
}
