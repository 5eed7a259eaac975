#![doc = include_str!("../README.md")]

pub mod arguments;
mod audit;
pub mod catalog;
mod credential;
pub mod error;
pub mod guard;
pub mod manifest;
pub mod package;
mod problem;
pub mod profile;
mod revision;
pub mod secrets;
pub mod storage_state;
mod traceparent;

// What a packager, a sandbox or a catalog reader starts from: the package and its
// manifest, the secret binding, the output guard, audit records, the catalog and agent
// profiles and revisions. The rest lives in the named modules: `error` (one error per
// operation and their union), `manifest` (its parts and rules), `guard` (verdicts and limits), `catalog`, `profile`,
// `package` (digest framing), `secrets`, `arguments` and `storage_state`.
pub use audit::{AuditRecord, CallContext};
pub use catalog::Catalog;
pub use guard::{GuardBuilder, OutputGuard};
pub use manifest::{MANIFEST_FILE, MIN_SECRET_BYTES, Manifest};
pub use package::{Package, PackageFile, PackageKind};
pub use profile::AgentProfile;
pub use revision::Revision;
pub use secrets::{SecretBinding, SecretValues};
pub use traceparent::{Traceparent, TraceparentError};

/// Items that exist for tests and benches. Not part of the stable interface: they may
/// change or go away in any release.
#[doc(hidden)]
pub mod internal {
    pub use crate::guard::searched_forms;
}
