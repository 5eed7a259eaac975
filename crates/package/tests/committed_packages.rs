//! The committed package sources under `packages/`: argument schemas from
//! `evidence-policy`, golden source digests, the catalog, the Auto-oncall profile, and
//! that a source holds no built binary (packaging adds it: `evidence-tool`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use evidence_package::{
    AgentProfile, Catalog, MANIFEST_FILE, Manifest, Package, PackageKind, Revision,
    arguments::argument_schema, catalog::CATALOG_FILE, catalog::CatalogFile, error::CatalogError,
    error::LoadError, manifest::Template,
};
use evidence_result::{Digest, PackageId, PolicySource, Provider};

const PROFILE_FILE: &str = "auto_oncall_agent.json";

/// Golden source digests of the committed packages. A change here is a reviewed change of what
/// ships: regenerate the records with `UPDATE_PACKAGES=1` and copy the new digests here.
const GOLDEN: [(&str, &str, &str); 4] = [
    (
        "managed_auto_oncall_clinic",
        "v2",
        "sha256:bac79b6b0c973a2858e02849e7a60832d7ea8eadb37c73cfcec1618cf944993b",
    ),
    (
        "managed_auto_oncall_clinic",
        "v3",
        "sha256:5b55841f4a7c8324c11e85e76261970dae9a0709d77d26a20e031d4278da90e0",
    ),
    (
        "managed_auto_oncall_manus",
        "v2",
        "sha256:e158056239c8f23c003bb189b7fde4711a7841e7567901b42573f0300a02a5d5",
    ),
    (
        "managed_auto_oncall_wetech",
        "v2",
        "sha256:ae1ce5b986b52a0bf2af638d66b4815ca2547b502effe201ba612908bd3ccd3a",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packages")
}

fn package_dir(identity: &str, revision: &str) -> PathBuf {
    root().join(identity).join(revision)
}

fn updating() -> bool {
    std::env::var_os("UPDATE_PACKAGES").is_some_and(|v| v == "1")
}

fn stale(what: &str) -> ! {
    panic!(
        "{what} is stale; run `UPDATE_PACKAGES=1 cargo test -p evidence-package --test committed_packages` \
         to regenerate it, review the diff and update the golden digests"
    )
}

#[test]
fn manifests_carry_the_policy_argument_schemas() {
    for (identity, revision, _) in GOLDEN {
        let path = package_dir(identity, revision).join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut manifest = Manifest::from_json(&text).unwrap();
        let expected = argument_schema(manifest.provider);
        if manifest.arguments != expected {
            if updating() {
                manifest.arguments = expected;
                let mut out = serde_json::to_string_pretty(&manifest).unwrap();
                out.push('\n');
                std::fs::write(&path, out).unwrap();
            } else {
                stale(&path.display().to_string());
            }
        }
        // Taken from the policy crate's types: no provider argument anywhere.
        assert!(!manifest.arguments.to_string().contains("\"provider\""));
    }
}

fn load_all() -> Vec<Package> {
    GOLDEN
        .iter()
        .map(|(identity, revision, _)| {
            Package::load_source(&package_dir(identity, revision)).unwrap()
        })
        .collect()
}

#[test]
fn catalog_and_profile_record_the_recomputed_digests() {
    let packages = load_all();
    let mut catalog = Catalog::new();
    for p in &packages {
        catalog.register(p.clone()).unwrap();
    }
    let clinic = PackageId::clinic();
    catalog.install(&clinic, "v3".parse().unwrap()).unwrap();
    catalog
        .install(&PackageId::manus(), "v2".parse().unwrap())
        .unwrap();
    catalog
        .install(&PackageId::wetech(), "v2".parse().unwrap())
        .unwrap();
    let expected_catalog = serde_json::to_value(catalog.to_file()).unwrap();

    let catalog_path = root().join(CATALOG_FILE);
    let committed: Option<serde_json::Value> = std::fs::read_to_string(&catalog_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    if committed.as_ref() != Some(&expected_catalog) {
        if updating() {
            let mut out = serde_json::to_string_pretty(&catalog.to_file()).unwrap();
            out.push('\n');
            std::fs::write(&catalog_path, out).unwrap();
        } else {
            stale(&catalog_path.display().to_string());
        }
    }

    let profile_path = root().join(PROFILE_FILE);
    let mut profile =
        AgentProfile::from_json(&std::fs::read_to_string(&profile_path).unwrap()).unwrap();
    let mut changed = false;
    for pin in &mut profile.pins {
        let digest = catalog
            .package(&pin.identity, pin.revision)
            .unwrap()
            .digest();
        if pin.digest != digest {
            pin.digest = digest;
            changed = true;
        }
    }
    if changed {
        if updating() {
            let mut out = serde_json::to_string_pretty(&profile).unwrap();
            out.push('\n');
            std::fs::write(&profile_path, out).unwrap();
        } else {
            stale(&profile_path.display().to_string());
        }
    }
}

#[test]
fn golden_digests_of_the_committed_packages() {
    let packages = load_all();
    let actual: Vec<String> = packages.iter().map(|p| p.digest().to_string()).collect();
    let golden: Vec<String> = GOLDEN.iter().map(|(_, _, d)| (*d).to_owned()).collect();
    assert_eq!(
        actual, golden,
        "a committed package changed; if intended, update GOLDEN after review"
    );
    // Loading twice recomputes the same digest; all four differ.
    assert_eq!(
        load_all().iter().map(Package::digest).collect::<Vec<_>>(),
        packages.iter().map(Package::digest).collect::<Vec<_>>()
    );
    let distinct: BTreeSet<Digest> = packages.iter().map(Package::digest).collect();
    assert_eq!(distinct.len(), 4);
}

#[test]
fn committed_catalog_loads_and_the_auto_oncall_profile_validates() {
    let catalog = Catalog::load(&root()).unwrap();
    let profile =
        AgentProfile::from_json(&std::fs::read_to_string(root().join(PROFILE_FILE)).unwrap())
            .unwrap();
    assert!(!profile.memory && !profile.session_recall && !profile.knowledge_base);
    assert_eq!(profile.skills.len(), 6);
    let report = profile.validate(&catalog).unwrap();

    let pinned: Vec<(String, String)> = report
        .packages
        .iter()
        .map(|p| (p.identity.to_string(), p.revision.to_string()))
        .collect();
    assert_eq!(
        pinned,
        [
            ("managed_auto_oncall_clinic".to_owned(), "v3".to_owned()),
            ("managed_auto_oncall_manus".to_owned(), "v2".to_owned()),
            ("managed_auto_oncall_wetech".to_owned(), "v2".to_owned()),
        ]
    );
    // Every committed pin is installed, so every one is offered; none is passive.
    assert!(report.passive.is_empty());
    assert!(report.packages.iter().all(|p| p.state.is_installed()));
    // Three independent identities: own secrets, own hosts, own audit streams.
    let secrets: BTreeSet<&String> = report.packages.iter().flat_map(|p| &p.secrets).collect();
    assert_eq!(
        secrets.len(),
        report
            .packages
            .iter()
            .map(|p| p.secrets.len())
            .sum::<usize>()
    );
    let streams: BTreeSet<&String> = report.packages.iter().map(|p| &p.audit_stream).collect();
    assert_eq!(streams.len(), 3);
    for p in &report.packages {
        assert!(!p.hosts.is_empty());
        assert_eq!(p.policy_source, PolicySource::TrustedEnvelope);
    }
    let wetech = report
        .packages
        .iter()
        .find(|p| p.provider == Provider::Wetech)
        .unwrap();
    assert_eq!(wetech.template, Template::Browser);

    // Clinic v2 stays registered but uninstalled: the bounded rollback.
    let v2: Revision = "v2".parse().unwrap();
    let v3: Revision = "v3".parse().unwrap();
    assert!(catalog.package(&PackageId::clinic(), v2).is_some());
    assert!(!catalog.is_installed(&PackageId::clinic(), v2));
    assert_eq!(catalog.installed_revisions(&PackageId::clinic()), vec![v3]);
    assert_eq!(report.rollback.len(), 1);
    assert_eq!(report.rollback[0].revision, v2);
    assert_eq!(
        catalog.to_file(),
        serde_json::from_str::<CatalogFile>(
            &std::fs::read_to_string(root().join(CATALOG_FILE)).unwrap()
        )
        .unwrap()
    );
}

#[cfg(unix)]
#[test]
fn committed_sources_hold_no_binary_and_no_executable_file() {
    for p in load_all() {
        assert_eq!(p.kind(), PackageKind::Source);
        for f in p.files() {
            assert!(!f.is_executable(), "{} {}", p.identity(), f.path());
            assert_ne!(f.path(), p.manifest().entrypoint);
        }
        // A source is not deployable: the entrypoint binary is missing.
        let dir = package_dir(p.identity().as_str(), &p.revision().to_string());
        assert!(matches!(
            Package::load(&dir),
            Err(LoadError::MissingFile(f)) if f == p.manifest().entrypoint
        ));
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The recorded digest of the committed Clinic v3 package.
fn recorded_clinic_v3() -> Digest {
    let original = Catalog::load(&root()).unwrap();
    let v3: Revision = "v3".parse().unwrap();
    original.package(&PackageId::clinic(), v3).unwrap().digest()
}

/// A fresh copy of the committed packages folder.
fn fresh_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&root(), dir.path());
    dir
}

/// The Clinic v3 package folder inside a copy.
fn clinic_v3(copy: &Path) -> PathBuf {
    copy.join("managed_auto_oncall_clinic/v3")
}

#[test]
fn an_untouched_copy_loads_with_the_same_digests() {
    let copy = fresh_copy();
    assert_eq!(
        Package::load_source(&clinic_v3(copy.path()))
            .unwrap()
            .digest(),
        recorded_clinic_v3()
    );
    Catalog::load(copy.path()).unwrap();
}

#[cfg(unix)]
#[test]
fn a_changed_byte_or_mode_of_a_file_changes_the_digest() {
    use std::os::unix::fs::PermissionsExt;

    let recorded = recorded_clinic_v3();
    // One byte of a file.
    let copy = fresh_copy();
    let readme = clinic_v3(copy.path()).join("README.md");
    let mut bytes = std::fs::read(&readme).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&readme, bytes).unwrap();
    assert_ne!(
        Package::load_source(&clinic_v3(copy.path()))
            .unwrap()
            .digest(),
        recorded
    );
    assert!(matches!(
        Catalog::load(copy.path()),
        Err(CatalogError::DigestMismatch(_))
    ));

    // A file's mode.
    let copy = fresh_copy();
    std::fs::set_permissions(
        clinic_v3(copy.path()).join("README.md"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    assert_ne!(
        Package::load_source(&clinic_v3(copy.path()))
            .unwrap()
            .digest(),
        recorded
    );
}

#[cfg(unix)]
#[test]
fn a_built_added_removed_or_linked_file_is_refused() {
    // A binary placed in the source at the entrypoint's path.
    let copy = fresh_copy();
    let pkg = clinic_v3(copy.path());
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    std::fs::write(pkg.join("bin/clinic-tool"), "#!/bin/sh\nenv\n").unwrap();
    assert!(matches!(
        Package::load_source(&pkg),
        Err(LoadError::BuiltFileInSource(p)) if p == "bin/clinic-tool"
    ));

    // An added file, a removed file.
    let copy = fresh_copy();
    let pkg = clinic_v3(copy.path());
    std::fs::write(pkg.join("extra.sh"), "echo hi\n").unwrap();
    assert!(matches!(
        Package::load_source(&pkg),
        Err(LoadError::UnlistedFile(p)) if p == "extra.sh"
    ));
    let copy = fresh_copy();
    let pkg = clinic_v3(copy.path());
    std::fs::remove_file(pkg.join("README.md")).unwrap();
    assert!(matches!(
        Package::load_source(&pkg),
        Err(LoadError::MissingFile(p)) if p == "README.md"
    ));

    // A symbolic link in the package is refused.
    let copy = fresh_copy();
    let pkg = clinic_v3(copy.path());
    std::os::unix::fs::symlink("/etc/hostname", pkg.join("link")).unwrap();
    assert!(matches!(
        Package::load_source(&pkg),
        Err(LoadError::InvalidPath { .. })
    ));
}

#[test]
fn a_manifest_field_changes_the_digest_and_its_key_order_does_not() {
    let recorded = recorded_clinic_v3();
    // A manifest field.
    let copy = fresh_copy();
    let path = clinic_v3(copy.path()).join(MANIFEST_FILE);
    let mut manifest = Manifest::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest.limits.timeout_ms += 1;
    std::fs::write(&path, serde_json::to_string(&manifest).unwrap()).unwrap();
    assert_ne!(
        Package::load_source(&clinic_v3(copy.path()))
            .unwrap()
            .digest(),
        recorded
    );

    // Reordered manifest JSON (compact, keys reversed) keeps the digest.
    let copy = fresh_copy();
    let path = clinic_v3(copy.path()).join(MANIFEST_FILE);
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::write(&path, reverse_keys(&value)).unwrap();
    assert_eq!(
        Package::load_source(&clinic_v3(copy.path()))
            .unwrap()
            .digest(),
        recorded
    );
}

/// Writes a JSON value with every object's keys in reverse order.
fn reverse_keys(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            keys.reverse();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(k).unwrap(),
                        reverse_keys(&map[k])
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        serde_json::Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(reverse_keys).collect::<Vec<_>>().join(",")
            )
        }
        other => other.to_string(),
    }
}
