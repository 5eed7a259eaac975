#![doc = include_str!("../README.md")]

mod arguments;
mod audit;
mod catalog;
mod credential;
mod error;
mod guard;
mod manifest;
mod package;
mod profile;
mod revision;
mod secrets;
pub mod storage_state;

pub use arguments::argument_schema;
pub use audit::{AuditRecord, CallContext};
pub use catalog::{CATALOG_FILE, Catalog, CatalogEntry, CatalogFile};
pub use error::PackageError;
pub use guard::{
    BlockCause, Blocked, GuardBuilder, GuardLimits, Guarded, OutputGuard, ScanFailure, Verdict,
    cut_at_char_boundary, searched_forms,
};
pub use manifest::{
    AuthBinding, Limits, MANIFEST_FILE, MAX_OUTPUT_BYTES_LIMIT, MIN_SECRET_BYTES, Manifest,
    NetworkPolicy, NormalizedManifest, PolicyDelivery, RUNTIME_ENV_PREFIX, SecretKind, SecretSpec,
    Template, known_identities,
};
pub use package::{PACKAGE_DIGEST_TAG, Package, PackageFile, PackageKind, SOURCE_DIGEST_TAG};
pub use profile::{AgentProfile, Pin, PinnedPackage, ProfileReport, RevisionRef};
pub use revision::Revision;
pub use secrets::{BindingReport, SandboxEnv, SecretBinding, SecretValues};

/// Items that exist for tests and benches. Not part of the stable interface: they may
/// change or go away in any release.
#[doc(hidden)]
pub mod internal {
    pub use crate::guard::searched_forms;
}
