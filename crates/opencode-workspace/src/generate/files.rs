//! The generator's edge to the file system: which paths it may own, refusing symbolic
//! links, reading a file that may be missing, and atomic writes.

use std::fs;
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

use super::error::GenerateError;
use crate::io_error::IoError;
use crate::layout::SKILL_DISCOVERY_DIRS;

/// `true` when `path` lies in a skill discovery folder or is named `SKILL.md`.
pub(super) fn on_skill_path(path: &str) -> bool {
    SKILL_DISCOVERY_DIRS
        .iter()
        .any(|dir| path == *dir || path.starts_with(&format!("{dir}/")))
        || path.rsplit('/').next() == Some("SKILL.md")
}

/// `true` for a `/`-separated relative path of normal components.
pub(super) fn is_plain_relative(path: &str) -> bool {
    !path.is_empty()
        && Path::new(path)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        && !on_skill_path(path)
}

/// Refuses when any existing component of `root/relative` is a symbolic link.
pub(super) fn check_no_symlink(root: &Path, relative: &str) -> Result<(), GenerateError> {
    let mut current = root.to_path_buf();
    for part in relative.split('/') {
        current.push(part);
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(GenerateError::UnsafePath {
                    path: current,
                    reason: "it is a symbolic link",
                });
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(());
            }
            Err(e) => return Err(IoError::new("inspect", current, e).into()),
        }
    }
    Ok(())
}

/// The bytes of `path`, `None` when it does not exist.
pub(super) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, IoError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(IoError::new("read", path, e)),
    }
}

/// Writes through a temporary file in the same folder and renames it into place.
pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    let dir: PathBuf = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut tmp =
        tempfile::NamedTempFile::new_in(&dir).map_err(|e| IoError::new("write", path, e))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| IoError::new("write", path, e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = fs::metadata(path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0o644);
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(mode))
            .map_err(|e| IoError::new("write", path, e))?;
    }
    tmp.persist(path)
        .map_err(|e| IoError::new("write", path, e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::CATALOG_PATH;

    #[test]
    fn skill_paths_are_recognized() {
        assert!(on_skill_path(".opencode/skills/x/SKILL_CATALOG.md"));
        assert!(on_skill_path(".opencode/.all-skills"));
        assert!(on_skill_path(".opencode/investibook/SKILL.md"));
        assert!(!on_skill_path(CATALOG_PATH));
        assert!(!on_skill_path(".opencode/skillset/x"));
    }

    #[test]
    fn plain_relative_paths_only() {
        assert!(is_plain_relative(".opencode/investibook/agents/a.md"));
        for bad in ["", "/etc/x", "../x", "a/../b", ".opencode/skills/x"] {
            assert!(!is_plain_relative(bad), "{bad}");
        }
    }
}
