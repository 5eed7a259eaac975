//! The catalog of package identities and revisions, install state, and agent profiles that
//! pin exact revisions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use evidence_result::{Digest, PackageId, PolicySource, Provider};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::manifest::{check_argument_schema, known_identities};
use crate::{NetworkPolicy, Package, PackageError, Revision, Template};

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
/// does not uninstall other revisions: [`AgentProfile::validate`] refuses an identity with
/// two installed revisions.
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
    pub fn load(root: &Path) -> Result<Self, PackageError> {
        let path = root.join(CATALOG_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| PackageError::io(&path, e))?;
        let file: CatalogFile =
            serde_json::from_str(&text).map_err(|source| PackageError::Json {
                what: path.display().to_string(),
                source,
            })?;
        let mut catalog = Catalog::new();
        for entry in &file.revisions {
            let dir = root
                .join(entry.identity.as_str())
                .join(entry.revision.to_string());
            let package = Package::load_any(&dir)?;
            if package.identity() != &entry.identity || package.revision() != entry.revision {
                return Err(PackageError::FolderMismatch {
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
    pub fn register(&mut self, package: Package) -> Result<Digest, PackageError> {
        let identity = package.identity().clone();
        let revision = package.revision();
        if let Some(existing) = self.entries.get(&identity).and_then(|r| r.get(&revision)) {
            if existing.package.digest() == package.digest() {
                return Ok(package.digest());
            }
            return Err(PackageError::RevisionConflict {
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
                    return Err(PackageError::SharedSecretName {
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
    ) -> Result<&mut Entry, PackageError> {
        self.entries
            .get_mut(identity)
            .and_then(|r| r.get_mut(&revision))
            .ok_or_else(|| PackageError::UnknownRevision {
                identity: identity.clone(),
                revision,
            })
    }

    /// Installs a registered revision.
    pub fn install(
        &mut self,
        identity: &PackageId,
        revision: Revision,
    ) -> Result<(), PackageError> {
        self.entry_mut(identity, revision)?.installed = true;
        Ok(())
    }

    /// Uninstalls a revision; it stays registered (a rollback candidate).
    pub fn uninstall(
        &mut self,
        identity: &PackageId,
        revision: Revision,
    ) -> Result<(), PackageError> {
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

/// An exact pin of an agent to one revision and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    /// The identity.
    pub identity: PackageId,
    /// The exact revision.
    pub revision: Revision,
    /// The exact digest; checked against the recomputed digest.
    pub digest: Digest,
}

/// A revision named without a digest (a rollback candidate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevisionRef {
    /// The identity.
    pub identity: PackageId,
    /// The revision.
    pub revision: Revision,
}

/// The dedicated Auto-oncall agent: no memory, no session recall, no knowledge base, its
/// skills, and exact pins to one revision of each of the three identities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentProfile {
    /// The agent's name.
    pub agent: String,
    /// Long-term memory (must be off).
    pub memory: bool,
    /// Recall of earlier sessions (must be off).
    pub session_recall: bool,
    /// Knowledge base (must be off).
    pub knowledge_base: bool,
    /// The installed skills.
    pub skills: Vec<String>,
    /// Exactly one pin per identity.
    pub pins: Vec<Pin>,
    /// Revisions kept registered but uninstalled for a bounded rollback (at most one per
    /// identity).
    #[serde(default)]
    pub rollback: Vec<RevisionRef>,
}

/// What validation found for one pinned package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinnedPackage {
    /// The identity.
    pub identity: PackageId,
    /// The pinned revision.
    pub revision: Revision,
    /// The recomputed digest (equal to the pin).
    pub digest: Digest,
    /// The provider it runs (an installation fact, never an argument).
    pub provider: Provider,
    /// The sandbox template.
    pub template: Template,
    /// Its own secret names.
    pub secrets: Vec<String>,
    /// Its own exact hosts.
    pub hosts: Vec<String>,
    /// Its own audit stream.
    pub audit_stream: String,
    /// How it receives trusted policy.
    pub policy_source: PolicySource,
}

/// The report of a valid profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileReport {
    /// The agent.
    pub agent: String,
    /// The pinned packages, one per identity, each independent of the others.
    pub packages: Vec<PinnedPackage>,
    /// The rollback revisions, registered and uninstalled.
    pub rollback: Vec<RevisionRef>,
}

impl AgentProfile {
    /// Parses a profile from JSON.
    pub fn from_json(json: &str) -> Result<Self, PackageError> {
        serde_json::from_str(json).map_err(|source| PackageError::Json {
            what: "agent profile".to_owned(),
            source,
        })
    }

    /// Validates the profile against a catalog.
    ///
    /// Refuses: memory, session recall or knowledge base enabled; no or duplicate skills;
    /// anything but exactly one pin for each of the three identities; a pin to an
    /// unknown or uninstalled revision or with a digest other than the recomputed one; an
    /// identity with two installed revisions; a rollback revision that is installed,
    /// pinned, unknown or not the only one of its identity; two pinned packages sharing a
    /// secret name or an audit stream; an unrestricted or empty network; a `provider`
    /// argument anywhere.
    pub fn validate(&self, catalog: &Catalog) -> Result<ProfileReport, PackageError> {
        if self.agent.trim().is_empty() {
            return Err(PackageError::invalid("agent", "the agent has a name"));
        }
        if self.memory {
            return Err(PackageError::FeatureEnabled("memory"));
        }
        if self.session_recall {
            return Err(PackageError::FeatureEnabled("session_recall"));
        }
        if self.knowledge_base {
            return Err(PackageError::FeatureEnabled("knowledge_base"));
        }
        check_skills(&self.skills)?;

        let known: Vec<PackageId> = known_identities().into_iter().map(|(id, _)| id).collect();
        let mut pins: BTreeMap<&PackageId, &Pin> = BTreeMap::new();
        for pin in &self.pins {
            if !known.contains(&pin.identity) {
                return Err(PackageError::UnknownIdentity(pin.identity.clone()));
            }
            if pins.insert(&pin.identity, pin).is_some() {
                return Err(PackageError::DuplicatePin(pin.identity.clone()));
            }
        }
        for identity in &known {
            if !pins.contains_key(identity) {
                return Err(PackageError::MissingPin(identity.clone()));
            }
            let installed = catalog.installed_revisions(identity);
            if installed.len() > 1 {
                return Err(PackageError::TwoInstalledRevisions {
                    identity: identity.clone(),
                    revisions: installed,
                });
            }
        }

        let mut report = Vec::new();
        let mut secret_owner: BTreeMap<String, PackageId> = BTreeMap::new();
        let mut stream_owner: BTreeMap<String, PackageId> = BTreeMap::new();
        for pin in pins.values() {
            let package = catalog
                .package(&pin.identity, pin.revision)
                .ok_or_else(|| PackageError::UnknownRevision {
                    identity: pin.identity.clone(),
                    revision: pin.revision,
                })?;
            if !catalog.is_installed(&pin.identity, pin.revision) {
                return Err(PackageError::PinNotInstalled {
                    identity: pin.identity.clone(),
                    revision: pin.revision,
                });
            }
            package.verify_digest(&pin.digest)?;
            let manifest = package.manifest();
            let hosts = match &manifest.network {
                NetworkPolicy::Restricted { hosts } if !hosts.is_empty() => hosts.clone(),
                NetworkPolicy::Restricted { .. } => return Err(PackageError::EmptyHostList),
                NetworkPolicy::Unrestricted => return Err(PackageError::UnrestrictedNetwork),
            };
            check_argument_schema(&manifest.arguments)?;
            for (i, secret) in manifest.auth.secrets.iter().enumerate() {
                if let Some(other) = secret_owner.insert(secret.name.clone(), pin.identity.clone())
                {
                    return Err(PackageError::SharedSecretName {
                        field: format!("auth.secrets[{i}].name"),
                        name: secret.name.clone(),
                        other,
                    });
                }
            }
            if let Some(first) =
                stream_owner.insert(manifest.audit_stream.clone(), pin.identity.clone())
            {
                return Err(PackageError::SharedAuditStream {
                    stream: manifest.audit_stream.clone(),
                    first,
                    second: pin.identity.clone(),
                });
            }
            report.push(PinnedPackage {
                identity: pin.identity.clone(),
                revision: pin.revision,
                digest: package.digest(),
                provider: manifest.provider,
                template: manifest.template,
                secrets: manifest
                    .auth
                    .secrets
                    .iter()
                    .map(|s| s.name.clone())
                    .collect(),
                hosts,
                audit_stream: manifest.audit_stream.clone(),
                policy_source: manifest.policy_delivery.policy_source(),
            });
        }

        let mut rollback_ids = BTreeSet::new();
        for r in &self.rollback {
            let invalid = |reason| PackageError::InvalidRollback {
                identity: r.identity.clone(),
                revision: r.revision,
                reason,
            };
            if catalog.package(&r.identity, r.revision).is_none() {
                return Err(PackageError::UnknownRevision {
                    identity: r.identity.clone(),
                    revision: r.revision,
                });
            }
            if catalog.is_installed(&r.identity, r.revision) {
                return Err(invalid("a rollback revision stays uninstalled"));
            }
            if pins
                .get(&r.identity)
                .is_some_and(|p| p.revision == r.revision)
            {
                return Err(invalid("a rollback revision is not the pinned one"));
            }
            if !rollback_ids.insert(r.identity.clone()) {
                return Err(invalid("at most one rollback revision per identity"));
            }
        }

        Ok(ProfileReport {
            agent: self.agent.clone(),
            packages: report,
            rollback: self.rollback.clone(),
        })
    }
}

fn check_skills(skills: &[String]) -> Result<(), PackageError> {
    if skills.is_empty() {
        return Err(PackageError::invalid(
            "skills",
            "the agent has at least one skill",
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, skill) in skills.iter().enumerate() {
        let ok = !skill.is_empty()
            && skill.len() <= 64
            && skill
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            return Err(PackageError::invalid(
                format!("skills[{i}]"),
                format!("{skill:?}: use lower-case letters, digits and '-'"),
            ));
        }
        if !seen.insert(skill) {
            return Err(PackageError::invalid(
                format!("skills[{i}]"),
                format!("skill {skill:?} is listed twice"),
            ));
        }
    }
    Ok(())
}
