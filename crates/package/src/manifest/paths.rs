//! Package-relative paths: the rules of one path, and the file list (no duplicates, no
//! two paths that differ only in case, no path that is also a folder of another).

use std::collections::BTreeMap;

use super::error::ManifestError;
use super::model::MANIFEST_FILE;

/// Checks one package-relative path: relative, `/`-separated, no `.` or `..` components,
/// ASCII letters, digits and `._-+` only.
pub(super) fn check_path(field: &str, path: &str) -> Result<(), ManifestError> {
    let invalid = |reason| ManifestError::InvalidPath {
        field: field.to_owned(),
        path: path.to_owned(),
        reason,
    };
    if path.is_empty() {
        return Err(invalid("empty path"));
    }
    let bytes = path.as_bytes();
    if bytes[0] == b'/'
        || bytes[0] == b'\\'
        || (bytes.len() >= 2 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic())
    {
        return Err(ManifestError::AbsolutePath {
            field: field.to_owned(),
            path: path.to_owned(),
        });
    }
    if path.split(['/', '\\']).any(|c| c == "..") {
        return Err(ManifestError::PathTraversal {
            field: field.to_owned(),
            path: path.to_owned(),
        });
    }
    if path.len() > 255 {
        return Err(invalid("longer than 255 bytes"));
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+' | b'/'))
    {
        return Err(invalid(
            "use ASCII letters, digits, '.', '_', '-', '+' and '/' only",
        ));
    }
    for component in path.split('/') {
        if component.is_empty() {
            return Err(invalid("empty path component"));
        }
        if component == "." {
            return Err(invalid("'.' component"));
        }
    }
    if path.eq_ignore_ascii_case(MANIFEST_FILE) {
        return Err(invalid("reserved for the manifest"));
    }
    Ok(())
}

pub(super) fn normalize_files(files: &[String]) -> Result<Vec<String>, ManifestError> {
    if files.is_empty() {
        return Err(ManifestError::invalid(
            "files",
            "a package has at least one file",
        ));
    }
    if files.len() > 1024 {
        return Err(ManifestError::invalid("files", "more than 1024 files"));
    }
    let mut folded: BTreeMap<String, (usize, &str)> = BTreeMap::new();
    for (i, path) in files.iter().enumerate() {
        let field = format!("files[{i}]");
        check_path(&field, path)?;
        let lower = path.to_ascii_lowercase();
        if let Some((_, other)) = folded.get(&lower) {
            if *other == path.as_str() {
                return Err(ManifestError::DuplicatePath {
                    field,
                    path: path.clone(),
                });
            }
            return Err(ManifestError::CaseCollidingPath {
                field,
                path: path.clone(),
                other: (*other).to_owned(),
            });
        }
        folded.insert(lower, (i, path));
    }
    // A path may not also be a folder of another path (case ignored).
    let mut folders: BTreeMap<String, &str> = BTreeMap::new();
    for (lower, (_, path)) in &folded {
        let mut end = 0;
        while let Some(pos) = lower[end..].find('/') {
            end += pos;
            folders.entry(lower[..end].to_owned()).or_insert(path);
            end += 1;
        }
    }
    for (lower, (i, path)) in &folded {
        if let Some(below) = folders.get(lower) {
            return Err(ManifestError::PathConflict {
                field: format!("files[{i}]"),
                path: (*path).to_owned(),
                other: (*below).to_owned(),
            });
        }
    }
    let mut out: Vec<String> = files.to_vec();
    out.sort();
    Ok(out)
}
