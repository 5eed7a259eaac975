//! The manifest model: what a package revision's `manifest.json` says (identity,
//! provider, template, files, network, auth binding, policy delivery, scope labels,
//! limits, audit stream, argument schema), and the manifest that passed its checks.

use evidence_result::{PackageId, PolicySource, Provider};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use evidence_policy::ScopeBinding;

use super::error::ManifestError;
use crate::Revision;
use crate::problem::JsonError;

/// The file name of a package's manifest inside its folder.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Smallest secret value (in bytes) the output guard can scan without false positives.
pub const MIN_SECRET_BYTES: usize = 8;

/// The sandbox template a package runs in.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Template {
    /// The plain tool sandbox.
    Default,
    /// The browser-capable tool sandbox (Chromium available).
    Browser,
}

/// Network egress of a package's tool sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum NetworkPolicy {
    /// Egress only to the exact hosts listed (`host` or `host:port`).
    Restricted {
        /// Exact hosts, lower-cased, sorted and de-duplicated by normalization.
        hosts: Vec<String>,
    },
    /// Unrestricted internet: never accepted for a Managed Tool package.
    Unrestricted,
}

/// What a secret holds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SecretKind {
    /// An opaque value (token, password, key).
    Value,
    /// A browser storage state in Playwright format; its cookie and localStorage values are
    /// guarded one by one.
    BrowserStorageState,
}

/// One secret of a package's auth binding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretSpec {
    /// The secret's name, unique in the whole catalog (`clinic_api_token`).
    pub name: String,
    /// The environment variable it is injected as (`CLINIC_API_TOKEN`).
    pub env: String,
    /// What it holds.
    pub kind: SecretKind,
}

/// The secrets a package receives, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthBinding {
    /// The package's secrets, sorted by name by normalization.
    pub secrets: Vec<SecretSpec>,
}

/// How trusted policy reaches the tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum PolicyDelivery {
    /// A signed envelope per request, bound to the package digest, in a file the runtime
    /// names through `EVIDENCE_TRUSTED_CONTEXT` (read by `evidence_tool::RuntimeContext`).
    PerRequestEnvelope,
    /// An explicit canary: a fixed policy shipped as one of the package's files.
    StaticCanary {
        /// The package file holding the canary policy.
        file: String,
    },
}

impl PolicyDelivery {
    /// The result contract's name for this delivery.
    pub fn policy_source(&self) -> PolicySource {
        match self {
            PolicyDelivery::PerRequestEnvelope => PolicySource::TrustedEnvelope,
            PolicyDelivery::StaticCanary { .. } => PolicySource::StaticCanary,
        }
    }
}

/// Execution limits the runtime enforces for the package.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock limit per call, in milliseconds (1..=600000).
    pub timeout_ms: u64,
    /// Calls running at once (1..=64).
    pub concurrency: u32,
    /// Largest tool output in bytes (1..=64 MiB); the output guard refuses more.
    pub max_output_bytes: u64,
    /// Largest batch per call (1 for the one-operation Manus and Wetech packages, at most
    /// `evidence_policy::policy::MAX_BATCH` for Clinic).
    pub max_batch: u32,
}

/// Largest accepted `max_output_bytes`.
pub const MAX_OUTPUT_BYTES_LIMIT: u64 = 64 * 1024 * 1024;

/// A package revision's manifest, as written.
///
/// [`Manifest::normalize`] checks it and gives the [`NormalizedManifest`] that the
/// package digest covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// One of the three identities.
    pub identity: PackageId,
    /// The revision (`v3`).
    pub revision: Revision,
    /// The provider this identity runs (fixed per identity; never a tool argument).
    pub provider: Provider,
    /// The sandbox template.
    pub template: Template,
    /// The executable file the sandbox runs.
    pub entrypoint: String,
    /// Every file of the package, as relative `/`-separated paths.
    pub files: Vec<String>,
    /// Network egress.
    pub network: NetworkPolicy,
    /// Secrets and the environment variables they are injected as.
    pub auth: AuthBinding,
    /// How trusted policy is delivered.
    pub policy_delivery: PolicyDelivery,
    /// Selector labels bound to policy values (`evidence_policy::ScopeBinding`), each for
    /// every cluster tier or for the tiers it lists; every listed tier must carry the
    /// value (`keyspace_id` for Starter and Essential, `parent_id` for Premium).
    #[serde(default)]
    pub scope_labels: Vec<ScopeBinding>,
    /// Execution limits.
    pub limits: Limits,
    /// The package's own audit stream.
    pub audit_stream: String,
    /// The Agent-visible argument schema (JSON Schema) with the tool description, as
    /// [`crate::arguments::argument_schema`] generates it from `evidence-policy`'s argument types.
    pub arguments: Value,
}

impl Manifest {
    /// Parses a manifest from JSON.
    pub fn from_json(json: &str) -> Result<Self, ManifestError> {
        serde_json::from_str(json)
            .map_err(|source| ManifestError::Json(JsonError::new("manifest".to_owned(), source)))
    }
}

/// A manifest that passed [`Manifest::normalize`]: hosts lower-cased, sorted and
/// de-duplicated, files, secrets and scope labels sorted, every rule checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct NormalizedManifest(pub(super) Manifest);

impl NormalizedManifest {
    /// The normalized manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.0
    }

    /// RFC 8785 canonical JSON of the normalized manifest: what the package digest covers.
    pub fn canonical_json(&self) -> Result<String, ManifestError> {
        evidence_result::digest::canonical_json(&self.0)
            .map_err(|e| ManifestError::Canonical(e.to_string()))
    }
}

impl std::ops::Deref for NormalizedManifest {
    type Target = Manifest;
    fn deref(&self) -> &Manifest {
        &self.0
    }
}

/// The three Managed Tool identities and the provider each one runs.
pub fn known_identities() -> [(PackageId, Provider); 3] {
    [
        (PackageId::clinic(), Provider::Clinic),
        (PackageId::manus(), Provider::Manus),
        (PackageId::wetech(), Provider::Wetech),
    ]
}

/// The provider an identity runs, if it is one of the three.
pub(super) fn provider_of(identity: &PackageId) -> Option<Provider> {
    known_identities()
        .into_iter()
        .find(|(id, _)| id == identity)
        .map(|(_, p)| p)
}
