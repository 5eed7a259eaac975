//! Agent profiles: the dedicated Auto-oncall agent's exact pins to one revision of each
//! identity, and their validation against a catalog.

use std::collections::{BTreeMap, BTreeSet};

use evidence_result::{Digest, PackageId, PolicySource, Provider};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::manifest::{check_argument_schema, known_identities};
use thiserror::Error;

use crate::manifest::ManifestError;
use crate::package::DigestMismatch;
use crate::{Catalog, Revision, manifest::NetworkPolicy, manifest::Template};

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
    pub fn from_json(json: &str) -> Result<Self, ProfileError> {
        serde_json::from_str(json).map_err(|source| ProfileError::Json {
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
    pub fn validate(&self, catalog: &Catalog) -> Result<ProfileReport, ProfileError> {
        self.check_agent()?;
        let pins = self.pins_by_identity(catalog)?;
        let packages = pinned_packages(&pins, catalog)?;
        self.check_rollback(&pins, catalog)?;
        Ok(ProfileReport {
            agent: self.agent.clone(),
            packages,
            rollback: self.rollback.clone(),
        })
    }

    /// The agent itself: a name, no memory, session recall or knowledge base, and its
    /// skills.
    fn check_agent(&self) -> Result<(), ProfileError> {
        if self.agent.trim().is_empty() {
            return Err(ProfileError::invalid("agent", "the agent has a name"));
        }
        if self.memory {
            return Err(ProfileError::FeatureEnabled("memory"));
        }
        if self.session_recall {
            return Err(ProfileError::FeatureEnabled("session_recall"));
        }
        if self.knowledge_base {
            return Err(ProfileError::FeatureEnabled("knowledge_base"));
        }
        check_skills(&self.skills)
    }

    /// The pins by identity: each of a known identity and pinned once, every identity
    /// pinned, and none with two installed revisions.
    fn pins_by_identity(
        &self,
        catalog: &Catalog,
    ) -> Result<BTreeMap<&PackageId, &Pin>, ProfileError> {
        let known: Vec<PackageId> = known_identities().into_iter().map(|(id, _)| id).collect();
        let mut pins: BTreeMap<&PackageId, &Pin> = BTreeMap::new();
        for pin in &self.pins {
            if !known.contains(&pin.identity) {
                return Err(ProfileError::UnknownIdentity(pin.identity.clone()));
            }
            if pins.insert(&pin.identity, pin).is_some() {
                return Err(ProfileError::DuplicatePin(pin.identity.clone()));
            }
        }
        for identity in &known {
            if !pins.contains_key(identity) {
                return Err(ProfileError::MissingPin(identity.clone()));
            }
            let installed = catalog.installed_revisions(identity);
            if installed.len() > 1 {
                return Err(ProfileError::TwoInstalledRevisions {
                    identity: identity.clone(),
                    revisions: installed,
                });
            }
        }
        Ok(pins)
    }

    /// Each rollback revision: registered, uninstalled, not the pinned one, at most one
    /// per identity.
    fn check_rollback(
        &self,
        pins: &BTreeMap<&PackageId, &Pin>,
        catalog: &Catalog,
    ) -> Result<(), ProfileError> {
        let mut rollback_ids = BTreeSet::new();
        for r in &self.rollback {
            let invalid = |reason| ProfileError::InvalidRollback {
                identity: r.identity.clone(),
                revision: r.revision,
                reason,
            };
            if catalog.package(&r.identity, r.revision).is_none() {
                return Err(ProfileError::UnknownRevision {
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
        Ok(())
    }
}

/// Every pinned package, in identity order, each checked on its own
/// ([`pinned_package`]) and then against the others: no two share a secret name or an
/// audit stream.
fn pinned_packages(
    pins: &BTreeMap<&PackageId, &Pin>,
    catalog: &Catalog,
) -> Result<Vec<PinnedPackage>, ProfileError> {
    let mut report = Vec::new();
    let mut secret_owner: BTreeMap<String, PackageId> = BTreeMap::new();
    let mut stream_owner: BTreeMap<String, PackageId> = BTreeMap::new();
    for pin in pins.values() {
        let pinned = pinned_package(pin, catalog)?;
        for (i, secret) in pinned.secrets.iter().enumerate() {
            if let Some(other) = secret_owner.insert(secret.clone(), pin.identity.clone()) {
                return Err(ProfileError::SharedSecretName {
                    field: format!("auth.secrets[{i}].name"),
                    name: secret.clone(),
                    other,
                });
            }
        }
        if let Some(first) = stream_owner.insert(pinned.audit_stream.clone(), pin.identity.clone())
        {
            return Err(ProfileError::SharedAuditStream {
                stream: pinned.audit_stream.clone(),
                first,
                second: pin.identity.clone(),
            });
        }
        report.push(pinned);
    }
    Ok(report)
}

/// One pin: a registered and installed revision whose recomputed digest is the pinned
/// one, with a restricted, non-empty network and an argument schema without a
/// `provider`.
fn pinned_package(pin: &Pin, catalog: &Catalog) -> Result<PinnedPackage, ProfileError> {
    let package = catalog
        .package(&pin.identity, pin.revision)
        .ok_or_else(|| ProfileError::UnknownRevision {
            identity: pin.identity.clone(),
            revision: pin.revision,
        })?;
    if !catalog.is_installed(&pin.identity, pin.revision) {
        return Err(ProfileError::PinNotInstalled {
            identity: pin.identity.clone(),
            revision: pin.revision,
        });
    }
    package.verify_digest(&pin.digest)?;
    let manifest = package.manifest();
    let hosts = match &manifest.network {
        NetworkPolicy::Restricted { hosts } if !hosts.is_empty() => hosts.clone(),
        NetworkPolicy::Restricted { .. } => return Err(ManifestError::EmptyHostList.into()),
        NetworkPolicy::Unrestricted => return Err(ManifestError::UnrestrictedNetwork.into()),
    };
    check_argument_schema(&manifest.arguments)?;
    Ok(PinnedPackage {
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
    })
}

fn check_skills(skills: &[String]) -> Result<(), ProfileError> {
    if skills.is_empty() {
        return Err(ProfileError::invalid(
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
            return Err(ProfileError::invalid(
                format!("skills[{i}]"),
                format!("{skill:?}: use lower-case letters, digits and '-'"),
            ));
        }
        if !seen.insert(skill) {
            return Err(ProfileError::invalid(
                format!("skills[{i}]"),
                format!("skill {skill:?} is listed twice"),
            ));
        }
    }
    Ok(())
}

/// An agent profile refused while parsing it or validating it against a catalog.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ProfileError {
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
    /// A JSON document could not be parsed.
    #[error("cannot parse {what}: {source}")]
    Json {
        /// What was parsed.
        what: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A pinned package's manifest is refused (its network or argument schema).
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A pinned digest does not match the recomputed one.
    #[error(transparent)]
    DigestMismatch(#[from] DigestMismatch),
}

impl ProfileError {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ProfileError::InvalidField {
            field: field.into(),
            reason: reason.into(),
        }
    }
}
