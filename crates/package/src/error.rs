//! The one error type of this crate.

use std::path::PathBuf;

use evidence_result::{Digest, PackageId};
use thiserror::Error;

use crate::Revision;

/// Everything that can go wrong with a package, the catalog, a secret binding, the output
/// guard or an audit record.
///
/// Manifest refusals name the offending field (`network.hosts[1]`, `files[0]`,
/// `arguments.properties.provider`, ...). No message ever contains a secret value.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PackageError {
    /// A field has a value outside its documented shape or range.
    #[error("field `{field}`: {reason}")]
    InvalidField {
        /// The offending field.
        field: String,
        /// Why it is refused.
        reason: String,
    },
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
    /// A secret name is also used by another package identity of the catalog.
    #[error("field `{field}`: secret name `{name}` is already bound by package `{other}`")]
    SharedSecretName {
        /// The offending field.
        field: String,
        /// The secret name.
        name: String,
        /// The other identity.
        other: PackageId,
    },
    /// The package directory holds a file the manifest does not list.
    #[error("field `files`: file {0:?} is in the package but not listed")]
    UnlistedFile(String),
    /// The manifest lists a file the package does not hold.
    #[error("field `files`: listed file {0:?} is missing")]
    MissingFile(String),
    /// The entrypoint is not an executable file of the package.
    #[error("field `entrypoint`: {0:?} is not executable")]
    EntrypointNotExecutable(String),
    /// A package's reviewable source holds its entrypoint, which only packaging builds in.
    #[error(
        "{0:?} is the entrypoint binary: package source holds no built binary (packaging adds it)"
    )]
    BuiltFileInSource(String),
    /// A package file or folder could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON document could not be parsed.
    #[error("cannot parse {what}: {source}")]
    Json {
        /// What was parsed.
        what: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// Canonical JSON or a digest could not be computed.
    #[error("cannot compute canonical JSON: {0}")]
    Canonical(String),
    /// A digest written somewhere does not match the recomputed one.
    #[error("{what}: stated digest {stated} does not match recomputed digest {actual}")]
    DigestMismatch {
        /// What was checked.
        what: String,
        /// The digest as written.
        stated: Digest,
        /// The digest recomputed from the content.
        actual: Digest,
    },
    /// A package's folder does not match its manifest's identity or revision.
    #[error("package folder {path} does not match manifest {identity} {revision}")]
    FolderMismatch {
        /// The folder.
        path: PathBuf,
        /// The manifest's identity.
        identity: PackageId,
        /// The manifest's revision.
        revision: Revision,
    },
    /// The revision is already registered with other content.
    #[error("{identity} {revision} is already registered with digest {existing}")]
    RevisionConflict {
        /// The identity.
        identity: PackageId,
        /// The revision.
        revision: Revision,
        /// The digest already registered.
        existing: Digest,
    },
    /// The catalog holds no such revision.
    #[error("{identity} {revision} is not registered")]
    UnknownRevision {
        /// The identity.
        identity: PackageId,
        /// The revision.
        revision: Revision,
    },
    /// A profile pins a revision that is registered but not installed.
    #[error("pin {identity} {revision} is not installed")]
    PinNotInstalled {
        /// The identity.
        identity: PackageId,
        /// The revision.
        revision: Revision,
    },
    /// Two revisions of one identity are installed at once.
    #[error("{identity} has more than one installed revision: {revisions:?}")]
    TwoInstalledRevisions {
        /// The identity.
        identity: PackageId,
        /// The installed revisions.
        revisions: Vec<Revision>,
    },
    /// A profile pins an identity twice.
    #[error("field `pins`: {0} is pinned more than once")]
    DuplicatePin(PackageId),
    /// A profile does not pin one of the three identities.
    #[error("field `pins`: {0} is not pinned")]
    MissingPin(PackageId),
    /// A profile enables a feature the Auto-oncall agent must not have.
    #[error("field `{0}`: must be disabled for the Auto-oncall agent")]
    FeatureEnabled(&'static str),
    /// A rollback revision is installed or pinned, or more than one per identity.
    #[error("field `rollback`: {identity} {revision}: {reason}")]
    InvalidRollback {
        /// The identity.
        identity: PackageId,
        /// The revision.
        revision: Revision,
        /// Why it is refused.
        reason: &'static str,
    },
    /// Two pinned packages share an audit stream.
    #[error("field `audit_stream`: stream `{stream}` is used by both {first} and {second}")]
    SharedAuditStream {
        /// The stream.
        stream: String,
        /// One identity.
        first: PackageId,
        /// The other identity.
        second: PackageId,
    },
    /// A secret value is missing from a binding.
    #[error("secret `{0}` of the auth binding has no value")]
    MissingSecret(String),
    /// A value was given for a secret the auth binding does not name.
    #[error("secret `{0}` is not part of the package's auth binding")]
    UnknownSecret(String),
    /// A secret value is too short to be guarded without false positives.
    #[error(
        "secret `{name}`: {what} is shorter than {min} bytes and cannot be guarded without false positives; refused"
    )]
    SecretTooShort {
        /// The secret name.
        name: String,
        /// Which value (the secret itself or a storage-state entry, never the value).
        what: String,
        /// The minimum length.
        min: usize,
    },
    /// A browser storage state secret is not valid Playwright storage state.
    #[error("secret `{name}`: not a Playwright storage state: {reason}")]
    InvalidStorageState {
        /// The secret name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A browser storage state holds no credential: nothing to sign in with and nothing
    /// the output guard could tell apart from page state.
    #[error(
        "secret `{name}`: the storage state holds no credential (no httpOnly cookie, no cookie, localStorage entry or JSON leaf named like a session or credential, no JWT); refused"
    )]
    StorageStateWithoutCredential {
        /// The secret name.
        name: String,
    },
    /// A secret binding was asked for another package digest.
    #[error(
        "secrets are bound to {bound} {bound_revision} ({bound_digest}), not to {requested} {requested_revision} ({requested_digest}); no environment is produced"
    )]
    BindingMismatch {
        /// The bound identity.
        bound: PackageId,
        /// The bound revision.
        bound_revision: Revision,
        /// The bound digest.
        bound_digest: Digest,
        /// The requested identity.
        requested: PackageId,
        /// The requested revision.
        requested_revision: Revision,
        /// The requested digest.
        requested_digest: Digest,
    },
    /// The output guard automaton could not be built.
    #[error("cannot build the output guard: {0}")]
    Guard(String),
    /// A result could not be built or serialized.
    #[error(transparent)]
    Result(#[from] evidence_result::ResultError),
}

impl PackageError {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        PackageError::InvalidField {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        PackageError::Io {
            path: path.into(),
            source,
        }
    }
}
