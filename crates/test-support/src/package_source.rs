//! Files for tests and bench fixtures: copying a folder tree, and a local copy of a
//! committed package source whose network allowlist names only the loopback address of
//! the test fronts (the digest covers the allowlist, so the copy is a package of its
//! own, to be packaged into a deployable folder).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::TestSupportError;

/// Copies the committed package source folder `source` to `destination` (created) with
/// the manifest's network allowlist replaced by `127.0.0.1` only; returns `destination`.
pub fn loopback_package_source(
    source: &Path,
    destination: &Path,
) -> Result<PathBuf, TestSupportError> {
    copy_tree(source, destination)?;
    let manifest_path = destination.join("manifest.json");
    let text = std::fs::read_to_string(&manifest_path)
        .map_err(|e| TestSupportError::io("reading a package manifest", &manifest_path, e))?;
    let mut manifest: Value = serde_json::from_str(&text).map_err(|e| {
        TestSupportError::PackageSource(format!("{} is not JSON: {e}", manifest_path.display()))
    })?;
    manifest["network"] = json!({"mode": "restricted", "hosts": ["127.0.0.1"]});
    let text = serde_json::to_string_pretty(&manifest)
        .map_err(|e| TestSupportError::PackageSource(format!("writing a package manifest: {e}")))?;
    std::fs::write(&manifest_path, text)
        .map_err(|e| TestSupportError::io("writing a package manifest", &manifest_path, e))?;
    Ok(destination.to_path_buf())
}

/// Copies a folder tree into a new folder.
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<(), TestSupportError> {
    std::fs::create_dir_all(to).map_err(|e| TestSupportError::io("creating a folder", to, e))?;
    let entries =
        std::fs::read_dir(from).map_err(|e| TestSupportError::io("reading a folder", from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| TestSupportError::io("reading a folder", from, e))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| TestSupportError::io("reading a folder", &source, e))?;
        if kind.is_dir() {
            copy_tree(&source, &target)?;
        } else {
            std::fs::copy(&source, &target)
                .map_err(|e| TestSupportError::io("copying a file", &source, e))?;
        }
    }
    Ok(())
}
