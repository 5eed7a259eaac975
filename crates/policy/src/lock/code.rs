//! The code table of lock rejections: every code locking can produce, its name and its
//! failure class, and the failure (with its correction) built from it.

use evidence_result::{Correction, ErrorCode, Failure, FailureClass};

/// The error codes of lock rejections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    InvalidArguments,
    MissingQueryId,
    InvalidQueryId,
    DuplicateQueryId,
    QueryIdNotAllowed,
    ForbiddenArgument,
    UnknownArgument,
    MissingArgument,
    InvalidExpr,
    InvalidStep,
    StepBelowMinimum,
    TooManyPoints,
    InvalidUnit,
    InvalidInstanceRef,
    EmptyBatch,
    BatchTooLarge,
    PromqlParseError,
    PromqlTooDeep,
    UnsupportedPromql,
    ScopeViolation,
    WindowViolation,
    AddressLabelMatcher,
    AddressLabelRewrite,
    TrustedPolicyRejected,
    DiscoveryNotGranted,
    InvalidDiscovery,
    InvalidPattern,
}

impl Code {
    /// Every code, in declaration order.
    pub(crate) const ALL: [Code; 27] = [
        Code::InvalidArguments,
        Code::MissingQueryId,
        Code::InvalidQueryId,
        Code::DuplicateQueryId,
        Code::QueryIdNotAllowed,
        Code::ForbiddenArgument,
        Code::UnknownArgument,
        Code::MissingArgument,
        Code::InvalidExpr,
        Code::InvalidStep,
        Code::StepBelowMinimum,
        Code::TooManyPoints,
        Code::InvalidUnit,
        Code::InvalidInstanceRef,
        Code::EmptyBatch,
        Code::BatchTooLarge,
        Code::PromqlParseError,
        Code::PromqlTooDeep,
        Code::UnsupportedPromql,
        Code::ScopeViolation,
        Code::WindowViolation,
        Code::AddressLabelMatcher,
        Code::AddressLabelRewrite,
        Code::TrustedPolicyRejected,
        Code::DiscoveryNotGranted,
        Code::InvalidDiscovery,
        Code::InvalidPattern,
    ];

    /// The snake_case code.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Code::InvalidArguments => "invalid_arguments",
            Code::MissingQueryId => "missing_query_id",
            Code::InvalidQueryId => "invalid_query_id",
            Code::DuplicateQueryId => "duplicate_query_id",
            Code::QueryIdNotAllowed => "query_id_not_allowed",
            Code::ForbiddenArgument => "forbidden_argument",
            Code::UnknownArgument => "unknown_argument",
            Code::MissingArgument => "missing_argument",
            Code::InvalidExpr => "invalid_expr",
            Code::InvalidStep => "invalid_step",
            Code::StepBelowMinimum => "step_below_minimum",
            Code::TooManyPoints => "too_many_points",
            Code::InvalidUnit => "invalid_unit",
            Code::InvalidInstanceRef => "invalid_instance_ref",
            Code::EmptyBatch => "empty_batch",
            Code::BatchTooLarge => "batch_too_large",
            Code::PromqlParseError => "promql_parse_error",
            Code::PromqlTooDeep => "promql_too_deep",
            Code::UnsupportedPromql => "unsupported_promql",
            Code::ScopeViolation => "scope_violation",
            Code::WindowViolation => "window_violation",
            Code::AddressLabelMatcher => "address_label_matcher",
            Code::AddressLabelRewrite => "address_label_rewrite",
            Code::TrustedPolicyRejected => "trusted_policy_rejected",
            Code::DiscoveryNotGranted => "discovery_not_granted",
            Code::InvalidDiscovery => "invalid_discovery",
            Code::InvalidPattern => "invalid_pattern",
        }
    }

    /// The failure class the code carries.
    pub(crate) fn class(self) -> FailureClass {
        match self {
            Code::QueryIdNotAllowed
            | Code::ForbiddenArgument
            | Code::ScopeViolation
            | Code::WindowViolation
            | Code::AddressLabelMatcher
            | Code::AddressLabelRewrite
            | Code::DiscoveryNotGranted => FailureClass::PolicyViolation,
            Code::TrustedPolicyRejected => FailureClass::Internal,
            _ => FailureClass::InvalidArgument,
        }
    }

    /// The error code. Every code is a valid snake_case identifier (tested), so the
    /// fallback is never taken.
    pub(crate) fn error_code(self) -> ErrorCode {
        ErrorCode::new(self.as_str()).unwrap_or_else(|_| ErrorCode::scope_violation())
    }

    pub(super) fn failure(self, detail: String, hint: &str) -> Failure {
        let class = self.class();
        let correction = if class == FailureClass::Internal {
            Correction::for_class(class, None, Vec::new())
        } else {
            Correction::for_class(class, Some(hint), Correction::default_keep())
        };
        Failure::new(self.error_code(), class, detail).with_correction(correction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_in_the_contract_table_with_its_class() {
        for c in Code::ALL {
            let known = evidence_result::codes::known_code(c.as_str())
                .unwrap_or_else(|| panic!("{} is not in ERROR_CODES", c.as_str()));
            assert_eq!(known.classes, [c.class()], "{}", c.as_str());
            assert_eq!(known.source, evidence_result::codes::CodeSource::Lock);
        }
        let lock_entries = evidence_result::codes::ERROR_CODES
            .iter()
            .filter(|k| k.source == evidence_result::codes::CodeSource::Lock)
            .count();
        assert_eq!(
            lock_entries,
            Code::ALL.len(),
            "the table lists no other lock code"
        );
    }

    #[test]
    fn every_code_is_a_valid_error_code() {
        for c in Code::ALL {
            assert_eq!(ErrorCode::new(c.as_str()).unwrap().as_str(), c.as_str());
        }
    }
}
