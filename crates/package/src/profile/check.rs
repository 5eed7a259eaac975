//! What is wrong with an agent profile, checked against a catalog: the agent's
//! features and skills, its pins (installed and passive), the identities' independence
//! and the rollback bound.

use std::collections::{BTreeMap, BTreeSet};

use evidence_result::PackageId;

use super::error::ProfileError;
use super::{AgentProfile, Pin, PinState, PinnedPackage, ProfileReport};
use crate::Catalog;
use crate::manifest::{ManifestError, NetworkPolicy, check_argument_schema, known_identities};

/// The pins of one identity: at most one installed, at most one passive.
#[derive(Debug, Default, Clone, Copy)]
struct IdentityPins<'a> {
    installed: Option<&'a Pin>,
    passive: Option<&'a Pin>,
}

impl<'a> IdentityPins<'a> {
    /// The installed pin first, then the passive one.
    fn all(self) -> impl Iterator<Item = &'a Pin> {
        self.installed.into_iter().chain(self.passive)
    }
}

impl AgentProfile {
    /// Validates the profile against a catalog.
    ///
    /// Refuses: memory, session recall or knowledge base enabled; no or duplicate skills;
    /// an identity of the three without a pin, or with more than one installed or more
    /// than one passive pin; a pin to an unknown revision or with a digest other than the
    /// recomputed one; an installed pin to a revision the catalog does not mark
    /// installed (deployed); a passive pin to a revision the profile also pins installed
    /// (a passive revision is never installed for the agent); an identity with two installed
    /// revisions; a rollback revision that is installed, pinned (installed or passive),
    /// unknown or not the only one of its identity; two identities sharing a secret name
    /// or an audit stream; an unrestricted or empty network; a `provider` argument
    /// anywhere.
    ///
    /// The report's `packages` are what the model is offered: the installed pins only. A
    /// passive pin may name a revision the catalog marks installed (deployed, so a canary
    /// can run it): the profile's pin state alone decides whether the model is offered it,
    /// so switching a provider from passive to installed is the one line of its `state`.
    pub fn validate(&self, catalog: &Catalog) -> Result<ProfileReport, ProfileError> {
        self.check_agent()?;
        let pins = self.pins_by_identity()?;
        let (packages, passive) = pinned_packages(&pins, catalog)?
            .into_iter()
            .partition(|p| p.state.is_installed());
        check_installed_once(catalog)?;
        self.check_rollback(&pins, catalog)?;
        Ok(ProfileReport {
            agent: self.agent.clone(),
            packages,
            passive,
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

    /// The pins by identity: each of a known identity, at most one installed and one
    /// passive pin per identity, never the same revision in both states, and every
    /// identity pinned.
    fn pins_by_identity(&self) -> Result<BTreeMap<&PackageId, IdentityPins<'_>>, ProfileError> {
        let known: Vec<PackageId> = known_identities().into_iter().map(|(id, _)| id).collect();
        let mut pins: BTreeMap<&PackageId, IdentityPins<'_>> = BTreeMap::new();
        for pin in &self.pins {
            if !known.contains(&pin.identity) {
                return Err(ProfileError::UnknownIdentity(pin.identity.clone()));
            }
            let of = pins.entry(&pin.identity).or_default();
            let doubled = match pin.state {
                PinState::Installed => of.installed.replace(pin).is_some(),
                PinState::Passive => of.passive.replace(pin).is_some(),
            };
            if doubled {
                return Err(match pin.state {
                    PinState::Installed => ProfileError::DuplicatePin(pin.identity.clone()),
                    PinState::Passive => ProfileError::DuplicatePassivePin(pin.identity.clone()),
                });
            }
        }
        for of in pins.values() {
            if let (Some(installed), Some(passive)) = (of.installed, of.passive)
                && installed.revision == passive.revision
            {
                return Err(ProfileError::PassiveRevisionInstalled {
                    identity: passive.identity.clone(),
                    revision: passive.revision,
                    reason: "it is also pinned installed",
                });
            }
        }
        if let Some(missing) = known.iter().find(|id| !pins.contains_key(id)) {
            return Err(ProfileError::MissingPin(missing.clone()));
        }
        Ok(pins)
    }

    /// Each rollback revision: registered, uninstalled, not a pinned one (installed or
    /// passive), at most one per identity.
    fn check_rollback(
        &self,
        pins: &BTreeMap<&PackageId, IdentityPins<'_>>,
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
            let of = pins.get(&r.identity).copied().unwrap_or_default();
            if of.installed.is_some_and(|p| p.revision == r.revision) {
                return Err(invalid("a rollback revision is not the pinned one"));
            }
            if of.passive.is_some_and(|p| p.revision == r.revision) {
                return Err(invalid("a rollback revision is not the passive one"));
            }
            if !rollback_ids.insert(r.identity.clone()) {
                return Err(invalid("at most one rollback revision per identity"));
            }
        }
        Ok(())
    }
}

/// No identity has two revisions installed in the catalog.
fn check_installed_once(catalog: &Catalog) -> Result<(), ProfileError> {
    for (identity, _) in known_identities() {
        let installed = catalog.installed_revisions(&identity);
        if installed.len() > 1 {
            return Err(ProfileError::TwoInstalledRevisions {
                identity,
                revisions: installed,
            });
        }
    }
    Ok(())
}

/// Every pinned package, in identity order (an identity's installed pin before its
/// passive one), each checked on its own ([`pinned_package`]) and then against the other
/// identities: no two share a secret name or an audit stream. The revisions of one
/// identity share theirs.
fn pinned_packages(
    pins: &BTreeMap<&PackageId, IdentityPins<'_>>,
    catalog: &Catalog,
) -> Result<Vec<PinnedPackage>, ProfileError> {
    let mut report = Vec::new();
    let mut secret_owner: BTreeMap<String, PackageId> = BTreeMap::new();
    let mut stream_owner: BTreeMap<String, PackageId> = BTreeMap::new();
    for pin in pins.values().flat_map(|of| of.all()) {
        let pinned = pinned_package(pin, catalog)?;
        for (i, secret) in pinned.secrets.iter().enumerate() {
            let owner = secret_owner
                .entry(secret.clone())
                .or_insert_with(|| pin.identity.clone());
            if *owner != pin.identity {
                return Err(ProfileError::SharedSecretName {
                    field: format!("auth.secrets[{i}].name"),
                    name: secret.clone(),
                    other: owner.clone(),
                });
            }
        }
        let first = stream_owner
            .entry(pinned.audit_stream.clone())
            .or_insert_with(|| pin.identity.clone());
        if *first != pin.identity {
            return Err(ProfileError::SharedAuditStream {
                stream: pinned.audit_stream.clone(),
                first: first.clone(),
                second: pin.identity.clone(),
            });
        }
        report.push(pinned);
    }
    Ok(report)
}

/// One pin: a registered revision whose recomputed digest is the pinned one, installed
/// (deployed) in the catalog when the pin is installed, with a
/// restricted, non-empty network and an argument schema without a `provider`.
fn pinned_package(pin: &Pin, catalog: &Catalog) -> Result<PinnedPackage, ProfileError> {
    let package = catalog
        .package(&pin.identity, pin.revision)
        .ok_or_else(|| ProfileError::UnknownRevision {
            identity: pin.identity.clone(),
            revision: pin.revision,
        })?;
    // An installed pin needs its revision deployed; a passive one may be deployed or not
    // (the canary runs deployed folders): it is never offered either way.
    if pin.state.is_installed() && !catalog.is_installed(&pin.identity, pin.revision) {
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
        state: pin.state,
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
