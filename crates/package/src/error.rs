//! Every error of this crate in one place: one type per operation, each living beside
//! the code that finds its problems, and [`PackageError`], their union for a caller that
//! does several operations and keeps one error type.
//!
//! | operation | error |
//! |---|---|
//! | parsing or normalizing a manifest | [`ManifestError`] |
//! | building or loading a package, checking its digest | [`LoadError`], [`DigestMismatch`] |
//! | loading a catalog, registering or installing a revision | [`CatalogError`] |
//! | parsing or validating an agent profile | [`ProfileError`] |
//! | binding secrets, parsing a storage state, building the output guard | [`SecretError`] |
//! | building or writing an audit record | [`AuditError`] |
//! | parsing a revision | [`RevisionError`] |
//!
//! The problem shapes several of them share, with one message each: [`InvalidField`],
//! [`ReadError`] and [`JsonError`].

use thiserror::Error;

pub use crate::audit::AuditError;
pub use crate::catalog::CatalogError;
pub use crate::manifest::ManifestError;
pub use crate::package::{DigestMismatch, LoadError};
pub use crate::problem::{InvalidField, JsonError, ReadError};
pub use crate::profile::ProfileError;
pub use crate::revision::RevisionError;
pub use crate::secrets::SecretError;

/// Any error of this crate: the union of the per-operation errors, with the same
/// messages. No message ever contains a secret value.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PackageError {
    /// A manifest is refused.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A package is refused while building or loading it.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A digest does not match the recomputed one.
    #[error(transparent)]
    DigestMismatch(#[from] DigestMismatch),
    /// A catalog operation is refused.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// An agent profile is refused.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// Secret values, a storage state or the output guard are refused.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// An audit record is refused.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// A revision is refused.
    #[error(transparent)]
    Revision(#[from] RevisionError),
}
