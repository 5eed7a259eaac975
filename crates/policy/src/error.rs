//! The error of reading, verifying, signing and binding trusted policy.

use evidence_result::{Correction, Digest, ErrorCode, Failure, FailureClass, PackageId, Provider};
use jiff::Timestamp;
use thiserror::Error;

/// Everything that can go wrong with trusted policy: reading, verifying, signing and
/// binding labels. None of these is correctable by the model, except the PromQL errors of
/// [`crate::promql::bind_label`], which concern a model-authored expression.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The envelope is not the expected JSON shape, or a field is not well-formed.
    #[error("malformed policy envelope: {0}")]
    MalformedEnvelope(String),
    /// The envelope's format version is not supported.
    #[error("unsupported policy envelope version {0}")]
    UnsupportedVersion(u32),
    /// The envelope is in the HMAC-SHA256 format of version 1, which is no longer
    /// accepted: its verification keys could also sign.
    #[error(
        "policy envelope version 1 (HMAC-SHA256) is no longer accepted: re-sign the policy with an Ed25519 key (envelope version 2)"
    )]
    LegacyHmacEnvelope,
    /// The envelope names a key id that the key ring does not hold.
    #[error("unknown policy key id {0:?}")]
    UnknownKey(String),
    /// The envelope's signature does not verify under the named public key.
    #[error("policy envelope signature does not verify")]
    BadSignature,
    /// The envelope is bound to another package digest.
    #[error("policy envelope is bound to package digest {found}, expected {expected}")]
    DigestMismatch {
        /// The digest of the running package.
        expected: Digest,
        /// The digest the envelope is bound to.
        found: Digest,
    },
    /// The policy is for another package.
    #[error("trusted policy is for package {found}, expected {expected}")]
    PackageMismatch {
        /// The running package.
        expected: PackageId,
        /// The package named by the policy.
        found: PackageId,
    },
    /// The policy is for another provider.
    #[error("trusted policy is for provider {found}, expected {expected}")]
    ProviderMismatch {
        /// The provider of the running package.
        expected: Provider,
        /// The provider named by the policy.
        found: Provider,
    },
    /// The policy was issued in the future (beyond the allowed clock skew).
    #[error("trusted policy is not valid before {issued_at}")]
    NotYetValid {
        /// When the policy was issued.
        issued_at: Timestamp,
    },
    /// The policy has expired.
    #[error("trusted policy expired at {expires_at}")]
    Expired {
        /// When the policy expired.
        expires_at: Timestamp,
    },
    /// The policy breaks one of its consistency rules (tier, target, limits, window).
    #[error("invalid trusted policy: {0}")]
    InvalidPolicy(String),
    /// A key or key ring is malformed. The message never holds key material.
    #[error("invalid policy key: {0}")]
    InvalidKey(String),
    /// A session token is malformed. The message never holds the text given.
    #[error("invalid session token: {0}")]
    InvalidSessionToken(String),
    /// The policy is bound to another session than the one the call presents, or to a
    /// session where the call presents none, or to none where the call presents one.
    #[error("{0}")]
    SessionMismatch(String),
    /// The policy could not be encoded.
    #[error("cannot encode trusted policy: {0}")]
    Encode(String),
    /// A PromQL expression does not parse or cannot be bound.
    #[error("promql parse error: {0}")]
    Promql(String),
    /// A selector already carries another matcher on a label that must be bound.
    #[error("a selector already has a different matcher on label {label:?}: {matcher}")]
    LabelConflict {
        /// The bound label.
        label: String,
        /// The conflicting matcher as written.
        matcher: String,
    },
    /// A label name or value cannot be bound.
    #[error("invalid label binding: {0}")]
    InvalidLabel(String),
}

impl PolicyError {
    /// The failure a tool reports for this error.
    ///
    /// Policy verification errors are `internal` (the model cannot fix
    /// them and must not retry); a label conflict is a `policy_violation`
    /// (`scope_violation`); a PromQL error is `invalid_argument` (`promql_parse_error`).
    pub fn to_failure(&self) -> Failure {
        match self {
            PolicyError::LabelConflict { label, .. } => Failure::new(
                ErrorCode::scope_violation(),
                FailureClass::PolicyViolation,
                self.to_string(),
            )
            .with_correction(Correction::for_class(
                FailureClass::PolicyViolation,
                Some(&format!(
                    "The platform binds the {label:?} label; remove every matcher on it."
                )),
                Correction::default_keep(),
            )),
            PolicyError::Promql(_) => Failure::new(
                ErrorCode::promql_parse_error(),
                FailureClass::InvalidArgument,
                self.to_string(),
            ),
            _ => Failure::new(
                crate::lock::Code::TrustedPolicyRejected.error_code(),
                FailureClass::Internal,
                self.to_string(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_code_is_in_the_contract_table_with_its_class() {
        for error in [
            PolicyError::LabelConflict {
                label: "cluster_id".to_owned(),
                matcher: "cluster_id=\"x\"".to_owned(),
            },
            PolicyError::Promql("unexpected end".to_owned()),
            PolicyError::BadSignature,
            PolicyError::LegacyHmacEnvelope,
        ] {
            let failure = error.to_failure();
            assert!(
                evidence_result::codes::is_known(failure.error.code.as_str(), failure.error.class),
                "{} ({})",
                failure.error.code,
                failure.error.class
            );
        }
    }
}
