//! The package digest covers every file and the normalized manifest.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{files, manifest, manifest_json};
use evidence_package::error::LoadError;
use evidence_package::{Package, PackageFile};
use evidence_result::Provider;
use proptest::prelude::*;
use serde_json::{Value, json};

fn digest(manifest_value: &Value, files: Vec<PackageFile>) -> evidence_result::Digest {
    Package::new(&manifest(manifest_value), files)
        .unwrap()
        .digest()
}

#[test]
fn digest_is_sha256_hex_and_documented_framing_is_stable() {
    let d = digest(&manifest_json(Provider::Clinic, 1), files());
    let text = d.to_string();
    assert!(text.starts_with("sha256:"));
    assert_eq!(text.len(), 7 + 64);
    assert!(
        text[7..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );
    // File order given to the constructor does not matter; the framing sorts by path bytes.
    let mut reversed = files();
    reversed.reverse();
    assert_eq!(digest(&manifest_json(Provider::Clinic, 1), reversed), d);
}

#[test]
fn framing_matches_its_documentation() {
    use sha2::{Digest as _, Sha256};
    let value = manifest_json(Provider::Clinic, 1);
    let package = Package::new(&manifest(&value), files()).unwrap();
    let mut sorted = files();
    sorted.sort_by(|a, b| a.path().as_bytes().cmp(b.path().as_bytes()));
    let mut h = Sha256::new();
    h.update(b"evidence-package-digest/v2\0");
    h.update((sorted.len() as u64).to_be_bytes());
    for f in &sorted {
        h.update((f.path().len() as u64).to_be_bytes());
        h.update(f.path().as_bytes());
        h.update([u8::from(f.is_executable())]);
        h.update((f.contents().unwrap().len() as u64).to_be_bytes());
        h.update(blake3::hash(f.contents().unwrap()).as_bytes());
    }
    let canonical = package.manifest().canonical_json().unwrap();
    h.update(Sha256::digest(canonical.as_bytes()));
    let expected: [u8; 32] = h.finalize().into();
    assert_eq!(package.digest(), evidence_result::Digest::Sha256(expected));
}

#[test]
fn array_order_of_normalized_fields_does_not_matter() {
    let a = manifest_json(Provider::Manus, 1);
    let mut b = a.clone();
    for pointer in ["/network/hosts", "/files", "/auth/secrets"] {
        b.pointer_mut(pointer)
            .unwrap()
            .as_array_mut()
            .unwrap()
            .reverse();
    }
    assert_eq!(digest(&a, files()), digest(&b, files()));
}

#[test]
fn verify_digest_compares_with_the_recomputed_one() {
    let p = Package::new(&manifest(&manifest_json(Provider::Clinic, 1)), files()).unwrap();
    p.verify_digest(&p.digest()).unwrap();
    let other = Package::new(&manifest(&manifest_json(Provider::Clinic, 2)), files()).unwrap();
    assert!(matches!(
        p.verify_digest(&other.digest()),
        Err(evidence_package::error::DigestMismatch { .. })
    ));
}

/// A manifest field change that stays valid.
fn manifest_mutation() -> impl Strategy<Value = (&'static str, Value)> {
    prop_oneof![
        Just(("/revision", json!("v7"))),
        Just(("/network/hosts", json!(["clinic.internal.example"]))),
        Just(("/limits/timeout_ms", json!(60001))),
        Just(("/limits/concurrency", json!(3))),
        Just(("/limits/max_output_bytes", json!(1048577))),
        Just(("/audit_stream", json!("auto_oncall.other"))),
        Just(("/scope_labels", json!([]))),
        Just((
            "/scope_labels",
            json!([{"label": "keyspace_id", "value": "keyspace_id", "tiers": ["starter"]}])
        )),
        Just(("/auth/secrets/0/env", json!("CLINIC_TOKEN"))),
        Just(("/auth/secrets/0/name", json!("clinic_token"))),
        Just(("/entrypoint", json!("lib/helper.sh"))),
        Just((
            "/policy_delivery",
            json!({"mode": "static_canary", "file": "README.md"})
        )),
        Just((
            "/arguments/description",
            json!(format!(
                "Changed. {}",
                evidence_result::SAME_TURN_CORRECTION_RULE
            ))
        )),
    ]
}

fn base_reordered_json(v: &Value, seed: u64) -> String {
    // Same content, keys written in a seed-dependent order.
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let n = keys.len().max(1);
            keys.rotate_left((seed as usize) % n);
            if seed % 2 == 1 {
                keys.reverse();
            }
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(k).unwrap(),
                        base_reordered_json(&map[k], seed / 2 + 1)
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|i| base_reordered_json(i, seed))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Changing any byte of any file changes the digest.
    #[test]
    fn any_file_byte_change_changes_the_digest(which in 0usize..3, at in any::<prop::sample::Index>(), xor in 1u8..=255) {
        let base = manifest_json(Provider::Clinic, 1);
        let original = digest(&base, files());
        let mut changed = files();
        let f = &changed[which];
        let mut bytes = f.contents().unwrap().to_vec();
        let i = at.index(bytes.len());
        bytes[i] ^= xor;
        changed[which] = PackageFile::new(f.path(), f.is_executable(), bytes);
        // Keep the entrypoint executable so the package stays valid.
        prop_assert_ne!(digest(&base, changed), original);
    }

    /// Changing a file's mode changes the digest (the entrypoint stays executable).
    #[test]
    fn mode_change_changes_the_digest(which in 1usize..3) {
        let base = manifest_json(Provider::Clinic, 1);
        let original = digest(&base, files());
        let mut changed = files();
        let f = &changed[which];
        changed[which] = PackageFile::new(f.path(), !f.is_executable(), f.contents().unwrap().to_vec());
        prop_assert_ne!(digest(&base, changed), original);
    }

    /// Adding a file (listed) or removing one (unlisted) changes the digest.
    #[test]
    fn adding_or_removing_a_file_changes_the_digest(name in "[a-z]{1,8}\\.txt", content in prop::collection::vec(any::<u8>(), 0..64)) {
        let base = manifest_json(Provider::Clinic, 1);
        let original = digest(&base, files());
        let mut more = base.clone();
        more["files"].as_array_mut().unwrap().push(json!(name.clone()));
        let mut more_files = files();
        more_files.push(PackageFile::new(name.clone(), false, content));
        prop_assert_ne!(digest(&more, more_files), original);

        let mut fewer = base.clone();
        fewer["files"].as_array_mut().unwrap().retain(|f| f != "lib/helper.sh");
        let fewer_files: Vec<PackageFile> = files().into_iter().filter(|f| f.path() != "lib/helper.sh").collect();
        prop_assert_ne!(digest(&fewer, fewer_files), original);
    }

    /// A file that is present but unlisted, or listed but absent, is refused outright.
    #[test]
    fn file_list_and_files_must_agree(name in "[a-z]{1,8}\\.bin") {
        let base = manifest_json(Provider::Clinic, 1);
        let mut extra = files();
        extra.push(PackageFile::new(name.clone(), false, vec![1, 2, 3]));
        let unlisted = matches!(Package::new(&manifest(&base), extra), Err(LoadError::UnlistedFile(_)));
        prop_assert!(unlisted);
        let mut listed = base.clone();
        listed["files"].as_array_mut().unwrap().push(json!(name));
        let missing = matches!(Package::new(&manifest(&listed), files()), Err(LoadError::MissingFile(_)));
        prop_assert!(missing);
    }

    /// Changing any manifest field changes the digest.
    #[test]
    fn any_manifest_field_change_changes_the_digest((pointer, new) in manifest_mutation()) {
        let base = manifest_json(Provider::Clinic, 1);
        let original = digest(&base, files());
        let mut changed = base.clone();
        *changed.pointer_mut(pointer).unwrap() = new;
        let mut changed_files = files();
        if pointer == "/entrypoint" {
            changed_files[2] = PackageFile::new("lib/helper.sh", true, changed_files[2].contents().unwrap().to_vec());
        }
        prop_assert_ne!(digest(&changed, changed_files), original);
    }

    /// Reordering the manifest's JSON keeps the digest.
    #[test]
    fn reordering_manifest_json_keeps_the_digest(seed in any::<u64>()) {
        let base = manifest_json(Provider::Wetech, 1);
        let original = digest(&base, files());
        let text = base_reordered_json(&base, seed);
        let reparsed = evidence_package::Manifest::from_json(&text).unwrap();
        prop_assert_eq!(Package::new(&reparsed, files()).unwrap().digest(), original);
    }
}

/// Writes the test package as a deployable folder; returns the folder.
fn write_folder(root: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = root.join("pkg");
    std::fs::create_dir_all(&dir).unwrap();
    let value = manifest_json(Provider::Clinic, 1);
    std::fs::write(dir.join("manifest.json"), value.to_string()).unwrap();
    for f in files() {
        let path = dir.join(f.path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, f.contents().unwrap()).unwrap();
        let mode = if f.is_executable() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    dir
}

/// A folder loads to the digest of its files whether the entrypoint is read from its
/// path or through another name of that very file (as `/proc/self/exe` names the
/// running binary); the entrypoint binary is hashed, not held. Another file (even one
/// with the same bytes) is refused, so the digest always covers the running file.
#[test]
fn a_running_entrypoint_is_hashed_from_the_running_file_itself() {
    let root = tempfile::tempdir().unwrap();
    let dir = write_folder(root.path());
    let expected = digest(&manifest_json(Provider::Clinic, 1), files());
    let loaded = Package::load(&dir).unwrap();
    assert_eq!(loaded.digest(), expected);
    let entry = loaded
        .files()
        .iter()
        .find(|f| f.path() == "bin/tool")
        .unwrap();
    assert_eq!(entry.contents(), None);
    assert_eq!(entry.size(), b"\x7fELF tool binary".len() as u64);
    assert!(
        loaded
            .files()
            .iter()
            .filter(|f| f.path() != "bin/tool")
            .all(|f| f.contents().is_some())
    );

    // A hard link elsewhere names the same file, as /proc/self/exe does.
    let running = root.path().join("running");
    std::fs::hard_link(dir.join("bin/tool"), &running).unwrap();
    assert_eq!(
        Package::load_running(&dir, &running).unwrap().digest(),
        expected
    );

    // The same bytes in another file are not the running file.
    let copy = root.path().join("copy");
    std::fs::copy(dir.join("bin/tool"), &copy).unwrap();
    let refused = Package::load_running(&dir, &copy).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("not the file the running process was started from"),
        "{refused}"
    );

    // The entrypoint replaced by rename: the running file is no longer the folder's
    // entrypoint.
    std::fs::rename(&copy, dir.join("bin/tool")).unwrap();
    assert!(Package::load_running(&dir, &running).is_err());
}

/// A binary larger than one hash block hashes to the digest of its whole content.
#[test]
fn an_entrypoint_larger_than_a_block_is_hashed_whole() {
    let root = tempfile::tempdir().unwrap();
    let dir = write_folder(root.path());
    let big: Vec<u8> = (0..(3 << 20) + 12_345).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.join("bin/tool"), &big).unwrap();
    let mut with_big = files();
    with_big[0] = PackageFile::new("bin/tool", true, big);
    assert_eq!(
        Package::load(&dir).unwrap().digest(),
        digest(&manifest_json(Provider::Clinic, 1), with_big)
    );
}
