//! What is wrong with a manifest: a field out of shape, a host or path refused, an
//! argument schema that names a provider, a document that does not parse.

use crate::problem::{InvalidField, JsonError};
use evidence_result::PackageId;
use thiserror::Error;

/// A manifest refused while parsing or normalizing it.
///
/// Each refusal names the offending field (`network.hosts[1]`, `files[0]`,
/// `arguments.properties.provider`, ...). No message ever contains a secret value.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// A field has a value outside its documented shape or range.
    #[error(transparent)]
    InvalidField(#[from] InvalidField),
    /// The identity is not one of the three Managed Tool identities.
    #[error("field `identity`: unknown package identity `{0}`")]
    UnknownIdentity(PackageId),
    /// The identity and the provider do not belong together.
    #[error("field `provider`: identity `{identity}` runs provider `{expected}`, not `{found}`")]
    ProviderMismatch {
        /// The manifest's identity.
        identity: PackageId,
        /// The provider that identity runs.
        expected: &'static str,
        /// The provider the manifest names.
        found: &'static str,
    },
    /// The package needs another sandbox template.
    #[error("field `template`: {0}")]
    TemplateMismatch(String),
    /// The network policy is `unrestricted`, which these packages may never use.
    #[error("field `network.mode`: unrestricted network is refused; use an exact host allowlist")]
    UnrestrictedNetwork,
    /// The host allowlist is empty.
    #[error("field `network.hosts`: the host allowlist is empty")]
    EmptyHostList,
    /// A host is a wildcard or a domain suffix.
    #[error("field `{field}`: wildcard host {host:?} is refused; list exact hosts")]
    WildcardHost {
        /// The offending field.
        field: String,
        /// The host as written.
        host: String,
    },
    /// A host carries a URL scheme.
    #[error("field `{field}`: host {host:?} carries a scheme; list the bare host")]
    HostWithScheme {
        /// The offending field.
        field: String,
        /// The host as written.
        host: String,
    },
    /// A host carries a path, query or fragment.
    #[error("field `{field}`: host {host:?} carries a path; list the bare host")]
    HostWithPath {
        /// The offending field.
        field: String,
        /// The host as written.
        host: String,
    },
    /// A host is a CIDR range.
    #[error("field `{field}`: CIDR range {host:?} is refused; list exact hosts")]
    HostIsCidr {
        /// The offending field.
        field: String,
        /// The host as written.
        host: String,
    },
    /// A host is not a valid DNS name or IP address (with an optional port).
    #[error("field `{field}`: invalid host {host:?}: {reason}")]
    InvalidHost {
        /// The offending field.
        field: String,
        /// The host as written.
        host: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A file path is absolute.
    #[error("field `{field}`: absolute path {path:?} is refused")]
    AbsolutePath {
        /// The offending field.
        field: String,
        /// The path as written.
        path: String,
    },
    /// A file path climbs out of the package.
    #[error("field `{field}`: path traversal in {path:?} is refused")]
    PathTraversal {
        /// The offending field.
        field: String,
        /// The path as written.
        path: String,
    },
    /// A file path is malformed.
    #[error("field `{field}`: invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The offending field.
        field: String,
        /// The path as written.
        path: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A file path is listed twice.
    #[error("field `{field}`: duplicate path {path:?}")]
    DuplicatePath {
        /// The offending field.
        field: String,
        /// The path as written.
        path: String,
    },
    /// Two file paths differ only by letter case.
    #[error("field `{field}`: path {path:?} collides with {other:?} when case is ignored")]
    CaseCollidingPath {
        /// The offending field.
        field: String,
        /// The path as written.
        path: String,
        /// The path it collides with.
        other: String,
    },
    /// A path is used both as a file and as a folder.
    #[error("field `{field}`: path {path:?} is both a file and a folder of {other:?}")]
    PathConflict {
        /// The offending field.
        field: String,
        /// The path as written.
        path: String,
        /// The path below it.
        other: String,
    },
    /// The Agent-visible argument schema has a `provider` property.
    #[error(
        "field `{field}`: the argument schema has a provider property; provider is never a tool argument"
    )]
    ProviderArgument {
        /// Where in the schema.
        field: String,
    },
    /// The Agent-visible argument schema accepts properties it does not name.
    #[error(
        "field `{field}`: the argument schema accepts unnamed properties; set additionalProperties to false"
    )]
    OpenArgumentObject {
        /// Where in the schema.
        field: String,
    },
    /// A JSON document could not be parsed.
    #[error(transparent)]
    Json(#[from] JsonError),
    /// Canonical JSON or a digest could not be computed.
    #[error("cannot compute canonical JSON: {0}")]
    Canonical(String),
}

impl ManifestError {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ManifestError::InvalidField(InvalidField::new(field, reason))
    }
}
