//! The catalog of identities and revisions, install state and Auto-oncall profile
//! validation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{files, manifest, manifest_json, package};
use evidence_package::{
    AgentProfile, Catalog, Package, Revision, error::CatalogError, error::ProfileError,
    profile::Pin, profile::PinState, profile::RevisionRef,
};
use evidence_result::{PackageId, Provider};
use serde_json::json;

fn rev(n: u32) -> Revision {
    Revision::new(n).unwrap()
}

/// Clinic v2 (registered, uninstalled) and v3, Manus v2 and Wetech v2 (installed).
fn catalog() -> Catalog {
    let mut c = Catalog::new();
    for (p, r) in [
        (Provider::Clinic, 2),
        (Provider::Clinic, 3),
        (Provider::Manus, 2),
        (Provider::Wetech, 2),
    ] {
        c.register(package(p, r)).unwrap();
    }
    c.install(&PackageId::clinic(), rev(3)).unwrap();
    c.install(&PackageId::manus(), rev(2)).unwrap();
    c.install(&PackageId::wetech(), rev(2)).unwrap();
    c
}

fn profile(c: &Catalog) -> AgentProfile {
    let pin = |id: PackageId, r: u32| Pin {
        digest: c.package(&id, rev(r)).unwrap().digest(),
        identity: id,
        revision: rev(r),
        state: PinState::Installed,
    };
    AgentProfile {
        agent: "auto_oncall".to_owned(),
        memory: false,
        session_recall: false,
        knowledge_base: false,
        skills: vec![
            "evidence-transport".to_owned(),
            "latency-diagnosis".to_owned(),
        ],
        pins: vec![
            pin(PackageId::clinic(), 3),
            pin(PackageId::manus(), 2),
            pin(PackageId::wetech(), 2),
        ],
        rollback: vec![RevisionRef {
            identity: PackageId::clinic(),
            revision: rev(2),
        }],
    }
}

#[test]
fn a_valid_profile_reports_three_independent_identities() {
    let c = catalog();
    let report = profile(&c).validate(&c).unwrap();
    assert_eq!(report.packages.len(), 3);
    let ids: Vec<&str> = report
        .packages
        .iter()
        .map(|p| p.identity.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "managed_auto_oncall_clinic",
            "managed_auto_oncall_manus",
            "managed_auto_oncall_wetech"
        ]
    );
    assert_eq!(report.packages[0].revision, rev(3));
    assert!(c.package(&PackageId::clinic(), rev(2)).is_some());
    assert!(!c.is_installed(&PackageId::clinic(), rev(2)));
    assert_eq!(c.revisions(&PackageId::clinic()), vec![rev(2), rev(3)]);
}

#[test]
fn agent_features_must_be_off() {
    let c = catalog();
    for field in ["memory", "session_recall", "knowledge_base"] {
        let mut p = serde_json::to_value(profile(&c)).unwrap();
        p[field] = json!(true);
        let p: AgentProfile = serde_json::from_value(p).unwrap();
        let e = p.validate(&c).unwrap_err();
        assert!(
            matches!(e, ProfileError::FeatureEnabled(f) if f == field),
            "{e:?}"
        );
    }
    let mut p = profile(&c);
    p.skills.clear();
    assert!(p.validate(&c).is_err());
    let mut p = profile(&c);
    p.skills.push("latency-diagnosis".to_owned());
    assert!(p.validate(&c).is_err());
}

#[test]
fn pins_must_be_installed_known_and_exact() {
    let c = catalog();
    // Pin to the uninstalled rollback revision.
    let mut p = profile(&c);
    p.pins[0].revision = rev(2);
    p.pins[0].digest = c.package(&PackageId::clinic(), rev(2)).unwrap().digest();
    p.rollback.clear();
    assert!(matches!(
        p.validate(&c),
        Err(ProfileError::PinNotInstalled { .. })
    ));
    // Pin to an unknown revision.
    let mut p = profile(&c);
    p.pins[1].revision = rev(9);
    assert!(matches!(
        p.validate(&c),
        Err(ProfileError::UnknownRevision { .. })
    ));
    // A digest other than the recomputed one.
    let mut p = profile(&c);
    p.pins[2].digest = c.package(&PackageId::clinic(), rev(3)).unwrap().digest();
    assert!(matches!(
        p.validate(&c),
        Err(ProfileError::DigestMismatch(_))
    ));
    // Missing and duplicate identities.
    let mut p = profile(&c);
    p.pins.pop();
    assert!(
        matches!(p.validate(&c), Err(ProfileError::MissingPin(id)) if id == PackageId::wetech())
    );
    let mut p = profile(&c);
    let first = p.pins[0].clone();
    p.pins.push(first);
    assert!(matches!(p.validate(&c), Err(ProfileError::DuplicatePin(_))));
    let mut p = profile(&c);
    p.pins[0].identity = PackageId::new("managed_auto_oncall_other").unwrap();
    assert!(matches!(
        p.validate(&c),
        Err(ProfileError::UnknownIdentity(_))
    ));
}

#[test]
fn two_installed_revisions_of_one_identity_are_refused() {
    let mut c = catalog();
    c.install(&PackageId::clinic(), rev(2)).unwrap();
    let e = profile(&c).validate(&c).unwrap_err();
    assert!(
        matches!(e, ProfileError::TwoInstalledRevisions { ref identity, .. } if *identity == PackageId::clinic()),
        "{e:?}"
    );
    c.uninstall(&PackageId::clinic(), rev(2)).unwrap();
    profile(&c).validate(&c).unwrap();
}

#[test]
fn rollback_is_registered_uninstalled_and_bounded() {
    let c = catalog();
    let mut p = profile(&c);
    p.rollback[0].revision = rev(3);
    assert!(matches!(
        p.validate(&c),
        Err(ProfileError::InvalidRollback { .. })
    ));
    let mut p = profile(&c);
    p.rollback[0].revision = rev(1);
    assert!(matches!(
        p.validate(&c),
        Err(ProfileError::UnknownRevision { .. })
    ));
    let mut c4 = catalog();
    c4.register(package(Provider::Clinic, 1)).unwrap();
    let mut p = profile(&c4);
    p.rollback.push(RevisionRef {
        identity: PackageId::clinic(),
        revision: rev(1),
    });
    assert!(matches!(
        p.validate(&c4),
        Err(ProfileError::InvalidRollback { .. })
    ));
}

#[test]
fn secret_names_are_never_shared_between_identities() {
    let mut c = catalog();
    let mut v = manifest_json(Provider::Manus, 3);
    v["auth"]["secrets"][0]["name"] = json!("clinic_api_token");
    let shared = Package::new(&manifest(&v), files()).unwrap();
    let e = c.register(shared).unwrap_err();
    match e {
        CatalogError::SharedSecretName { field, name, other } => {
            assert_eq!(field, "auth.secrets[0].name");
            assert_eq!(name, "clinic_api_token");
            assert_eq!(other, PackageId::clinic());
        }
        other => panic!("{other:?}"),
    }
    // Revisions of one identity share their names freely.
    c.register(package(Provider::Clinic, 4)).unwrap();
}

#[test]
fn a_revision_is_registered_once() {
    let mut c = catalog();
    c.register(package(Provider::Clinic, 3)).unwrap();
    let mut v = manifest_json(Provider::Clinic, 3);
    v["limits"]["timeout_ms"] = json!(1234);
    let other = Package::new(&manifest(&v), files()).unwrap();
    assert!(matches!(
        c.register(other),
        Err(CatalogError::RevisionConflict { .. })
    ));
    assert!(matches!(
        c.install(&PackageId::clinic(), rev(8)),
        Err(CatalogError::UnknownRevision { .. })
    ));
}

#[test]
fn the_catalog_file_round_trips_with_recomputed_digests() {
    let c = catalog();
    let file = c.to_file();
    assert_eq!(file.revisions.len(), 4);
    let clinic_v2 = &file.revisions[0];
    assert_eq!(clinic_v2.revision, rev(2));
    assert!(!clinic_v2.installed);
    assert_eq!(
        clinic_v2.digest,
        c.package(&PackageId::clinic(), rev(2)).unwrap().digest()
    );
}

/// The pin of a registered revision with its recomputed digest.
fn pin_of(c: &Catalog, identity: PackageId, r: u32, state: PinState) -> Pin {
    Pin {
        digest: c.package(&identity, rev(r)).unwrap().digest(),
        identity,
        revision: rev(r),
        state,
    }
}

#[test]
fn a_passive_pin_is_checked_like_a_pin_and_never_offered() {
    let c = catalog();
    let mut p = profile(&c);
    p.rollback.clear();
    p.pins
        .push(pin_of(&c, PackageId::clinic(), 2, PinState::Passive));
    let report = p.validate(&c).unwrap();
    // Offered: the three installed pins, never the passive one.
    let offered: Vec<(&str, Revision)> = report
        .packages
        .iter()
        .map(|p| (p.identity.as_str(), p.revision))
        .collect();
    assert_eq!(
        offered,
        [
            ("managed_auto_oncall_clinic", rev(3)),
            ("managed_auto_oncall_manus", rev(2)),
            ("managed_auto_oncall_wetech", rev(2)),
        ]
    );
    assert!(
        report
            .packages
            .iter()
            .all(|p| p.state == PinState::Installed)
    );
    assert!(report.offers(&PackageId::clinic(), rev(3)));
    assert!(!report.offers(&PackageId::clinic(), rev(2)));
    // The passive one is reported apart, with its recomputed digest.
    assert_eq!(report.passive.len(), 1);
    let passive = &report.passive[0];
    assert_eq!(
        (&passive.identity, passive.revision, passive.state),
        (&PackageId::clinic(), rev(2), PinState::Passive)
    );
    assert_eq!(
        passive.digest,
        c.package(&PackageId::clinic(), rev(2)).unwrap().digest()
    );

    // Digest-exact and registered, like any pin.
    let mut wrong = p.clone();
    wrong.pins[3].digest = c.package(&PackageId::clinic(), rev(3)).unwrap().digest();
    assert!(matches!(
        wrong.validate(&c),
        Err(ProfileError::DigestMismatch(_))
    ));
    let mut unknown = p.clone();
    unknown.pins[3].revision = rev(9);
    assert!(matches!(
        unknown.validate(&c),
        Err(ProfileError::UnknownRevision { .. })
    ));
    // The passive revision is no rollback candidate.
    let mut rollback = p.clone();
    rollback.rollback = profile(&c).rollback;
    assert!(matches!(
        rollback.validate(&c),
        Err(ProfileError::InvalidRollback { reason, .. }) if reason.contains("passive")
    ));
}

#[test]
fn a_passive_revision_installed_for_the_agent_is_refused() {
    // Pinned installed and passive at once.
    let c = catalog();
    let mut p = profile(&c);
    p.pins
        .push(pin_of(&c, PackageId::clinic(), 3, PinState::Passive));
    let e = p.validate(&c).unwrap_err();
    assert!(
        matches!(&e, ProfileError::PassiveRevisionInstalled { identity, revision, .. }
            if *identity == PackageId::clinic() && *revision == rev(3)),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "field `pins`: passive managed_auto_oncall_clinic v3 is installed for the agent: it is also pinned installed"
    );

    // Deployed (marked installed in the catalog) but passive: valid, and not offered.
    let c = catalog();
    let mut p = profile(&c);
    p.pins[1].state = PinState::Passive;
    let report = p.validate(&c).unwrap();
    assert!(!report.offers(&PackageId::manus(), rev(2)));
    assert_eq!(report.passive[0].identity, PackageId::manus());
}

#[test]
fn an_identity_has_at_most_one_passive_pin() {
    let mut c = catalog();
    c.register(package(Provider::Clinic, 4)).unwrap();
    let mut p = profile(&c);
    p.rollback.clear();
    p.pins
        .push(pin_of(&c, PackageId::clinic(), 2, PinState::Passive));
    p.validate(&c).unwrap();
    // The same passive pin twice, and two passive revisions of one identity.
    for other in [2, 4] {
        let mut twice = p.clone();
        twice
            .pins
            .push(pin_of(&c, PackageId::clinic(), other, PinState::Passive));
        assert!(
            matches!(twice.validate(&c), Err(ProfileError::DuplicatePassivePin(id)) if id == PackageId::clinic()),
            "v{other}"
        );
    }
    // Still at most one installed pin per identity.
    let mut two = p.clone();
    two.pins[3].state = PinState::Installed;
    assert!(matches!(
        two.validate(&c),
        Err(ProfileError::DuplicatePin(_))
    ));
    // Every identity is pinned, installed or passive.
    let mut none = p.clone();
    none.pins.remove(1);
    assert!(
        matches!(none.validate(&c), Err(ProfileError::MissingPin(id)) if id == PackageId::manus())
    );
}

#[test]
fn one_line_of_the_profile_switches_a_provider_from_passive_to_installed() {
    // Manus v2 is deployed (installed in the catalog) and pinned passive: the provider
    // is run by the canary but not offered yet.
    let c = catalog();
    let mut p = profile(&c);
    p.pins[1].state = PinState::Passive;
    let passive_text = serde_json::to_string_pretty(&p).unwrap();
    let report = AgentProfile::from_json(&passive_text)
        .unwrap()
        .validate(&c)
        .unwrap();
    assert!(!report.offers(&PackageId::manus(), rev(2)));
    assert_eq!(report.packages.len(), 2);
    assert_eq!(report.passive[0].identity, PackageId::manus());

    // The switch: one line of the profile ...
    let installed_text = passive_text.replace(r#""state": "passive""#, r#""state": "installed""#);
    let changed: Vec<(&str, &str)> = passive_text
        .lines()
        .zip(installed_text.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(
        changed,
        [(
            r#"      "state": "passive""#,
            r#"      "state": "installed""#
        )]
    );
    assert_eq!(passive_text.lines().count(), installed_text.lines().count());
    // ... and nothing else: the catalog already deploys the revision.
    let installed = AgentProfile::from_json(&installed_text).unwrap();
    let report = installed.validate(&c).unwrap();
    assert!(report.offers(&PackageId::manus(), rev(2)));
    assert_eq!(report.packages.len(), 3);
    assert!(report.passive.is_empty());
    // An installed pin is written without `state`: today's profiles read unchanged.
    assert!(!serde_json::to_string(&installed).unwrap().contains("state"));
}
