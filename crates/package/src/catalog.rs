//! The catalog of package identities and revisions, and their install state. The agent
//! profiles that pin exact revisions are checked against it in `profile`.

use std::collections::BTreeMap;
use std::path::Path;

use evidence_result::{Digest, PackageId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use std::path::PathBuf;

use thiserror::Error;

use crate::package::{DigestMismatch, LoadError};
use crate::problem::{JsonError, ReadError};
use crate::{Package, Revision};

/// The file in a packages folder that lists registered revisions and their install state.
pub const CATALOG_FILE: &str = "catalog.json";

#[derive(Debug, Clone)]
struct Entry {
    package: Package,
    installed: bool,
}

/// Registered package revisions and which of them are installed.
///
/// Registering checks that no secret name is shared with another identity. Installing
/// does not uninstall other revisions:
/// [`AgentProfile::validate`](crate::AgentProfile::validate) refuses an identity with two
/// installed revisions.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    entries: BTreeMap<PackageId, BTreeMap<Revision, Entry>>,
}

/// One registered revision as recorded in a catalog file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogEntry {
    /// The identity.
    pub identity: PackageId,
    /// The revision.
    pub revision: Revision,
    /// The digest as recorded; checked against the recomputed digest on load.
    pub digest: Digest,
    /// Whether the revision is installed.
    pub installed: bool,
}

/// A catalog file: registered revisions and their install state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogFile {
    /// Registered revisions.
    pub revisions: Vec<CatalogEntry>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Catalog::default()
    }

    /// Loads a packages folder: reads `catalog.json`, loads each listed revision from
    /// `<identity>/<revision>/` (a deployable folder, or reviewable source when the
    /// entrypoint binary is not built in: see [`Package::load_any`]), recomputes its
    /// digest, refuses a recorded digest that differs, registers it and applies the
    /// recorded install state.
    pub fn load(root: &Path) -> Result<Self, CatalogError> {
        let path = root.join(CATALOG_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| CatalogError::io(&path, e))?;
        let file: CatalogFile = serde_json::from_str(&text).map_err(|source| {
            CatalogError::Json(JsonError::new(path.display().to_string(), source))
        })?;
        let mut catalog = Catalog::new();
        for entry in &file.revisions {
            let dir = root
                .join(entry.identity.as_str())
                .join(entry.revision.to_string());
            let package = Package::load_any(&dir)?;
            if package.identity() != &entry.identity || package.revision() != entry.revision {
                return Err(CatalogError::FolderMismatch {
                    path: dir,
                    identity: package.identity().clone(),
                    revision: package.revision(),
                });
            }
            package.verify_digest(&entry.digest)?;
            catalog.register(package)?;
            if entry.installed {
                catalog.install(&entry.identity, entry.revision)?;
            }
        }
        Ok(catalog)
    }

    /// The catalog file describing this catalog (digests recomputed, never copied).
    pub fn to_file(&self) -> CatalogFile {
        CatalogFile {
            revisions: self
                .entries
                .values()
                .flat_map(|revs| revs.values())
                .map(|e| CatalogEntry {
                    identity: e.package.identity().clone(),
                    revision: e.package.revision(),
                    digest: e.package.digest(),
                    installed: e.installed,
                })
                .collect(),
        }
    }

    /// Registers a revision (uninstalled). Registering the same content twice is a no-op;
    /// other content under a registered revision is refused, and so is a secret name
    /// already bound by another identity.
    pub fn register(&mut self, package: Package) -> Result<Digest, CatalogError> {
        let identity = package.identity().clone();
        let revision = package.revision();
        if let Some(existing) = self.entries.get(&identity).and_then(|r| r.get(&revision)) {
            if existing.package.digest() == package.digest() {
                return Ok(package.digest());
            }
            return Err(CatalogError::RevisionConflict {
                identity,
                revision,
                existing: existing.package.digest(),
            });
        }
        for (i, secret) in package.manifest().auth.secrets.iter().enumerate() {
            for (other_id, revisions) in &self.entries {
                if *other_id == identity {
                    continue;
                }
                let shared = revisions.values().any(|e| {
                    e.package
                        .manifest()
                        .auth
                        .secrets
                        .iter()
                        .any(|s| s.name == secret.name)
                });
                if shared {
                    return Err(CatalogError::SharedSecretName {
                        field: format!("auth.secrets[{i}].name"),
                        name: secret.name.clone(),
                        other: other_id.clone(),
                    });
                }
            }
        }
        let digest = package.digest();
        self.entries.entry(identity).or_default().insert(
            revision,
            Entry {
                package,
                installed: false,
            },
        );
        Ok(digest)
    }

    fn entry_mut(
        &mut self,
        identity: &PackageId,
        revision: Revision,
    ) -> Result<&mut Entry, CatalogError> {
        self.entries
            .get_mut(identity)
            .and_then(|r| r.get_mut(&revision))
            .ok_or_else(|| CatalogError::UnknownRevision {
                identity: identity.clone(),
                revision,
            })
    }

    /// Installs a registered revision.
    pub fn install(
        &mut self,
        identity: &PackageId,
        revision: Revision,
    ) -> Result<(), CatalogError> {
        self.entry_mut(identity, revision)?.installed = true;
        Ok(())
    }

    /// Uninstalls a revision; it stays registered (a rollback candidate).
    pub fn uninstall(
        &mut self,
        identity: &PackageId,
        revision: Revision,
    ) -> Result<(), CatalogError> {
        self.entry_mut(identity, revision)?.installed = false;
        Ok(())
    }

    /// A registered revision.
    pub fn package(&self, identity: &PackageId, revision: Revision) -> Option<&Package> {
        self.entries
            .get(identity)
            .and_then(|r| r.get(&revision))
            .map(|e| &e.package)
    }

    /// Whether a revision is registered and installed.
    pub fn is_installed(&self, identity: &PackageId, revision: Revision) -> bool {
        self.entries
            .get(identity)
            .and_then(|r| r.get(&revision))
            .is_some_and(|e| e.installed)
    }

    /// The registered revisions of an identity, in order.
    pub fn revisions(&self, identity: &PackageId) -> Vec<Revision> {
        self.entries
            .get(identity)
            .map(|r| r.keys().copied().collect())
            .unwrap_or_default()
    }

    /// The installed revisions of an identity, in order.
    pub fn installed_revisions(&self, identity: &PackageId) -> Vec<Revision> {
        self.entries
            .get(identity)
            .map(|r| {
                r.iter()
                    .filter(|(_, e)| e.installed)
                    .map(|(rev, _)| *rev)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every registered package.
    pub fn packages(&self) -> impl Iterator<Item = &Package> {
        self.entries
            .values()
            .flat_map(|r| r.values())
            .map(|e| &e.package)
    }
}

/// A catalog refused while loading it or registering, installing or uninstalling a
/// revision.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CatalogError {
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
    /// A package file or folder could not be read.
    #[error(transparent)]
    Io(#[from] ReadError),
    /// A JSON document could not be parsed.
    #[error(transparent)]
    Json(#[from] JsonError),
    /// A listed package is refused.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A recorded digest does not match the recomputed one.
    #[error(transparent)]
    DigestMismatch(#[from] DigestMismatch),
}

impl CatalogError {
    fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CatalogError::Io(ReadError::new(path, source))
    }
}
