//! A cheap stamp of a package folder on disk: for every entry below it, its path, device,
//! inode, size, mode and change times. A process that hashed its package once takes the
//! stamp just before reading the folder and compares a fresh one on every call; any
//! difference (a file written, replaced by rename, added or removed, the binary swapped)
//! means the folder no longer is what the process hashed and serves.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use crate::ToolError;

/// What identifies one entry's state.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    path: PathBuf,
    dev: u64,
    ino: u64,
    mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// The stamp of a folder (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FolderStamp {
    dir: PathBuf,
    entries: Vec<Entry>,
}

impl FolderStamp {
    /// Stamps `dir` and everything below it.
    pub(crate) fn take(dir: &Path) -> Result<Self, ToolError> {
        let mut entries = Vec::new();
        walk(dir, &mut entries).map_err(|e| ToolError::io("stamp the package folder", dir, e))?;
        Ok(FolderStamp {
            dir: dir.to_path_buf(),
            entries,
        })
    }

    /// Whether the folder differs now from when it was stamped. A folder that cannot be
    /// read any more has changed.
    pub(crate) fn changed(&self) -> bool {
        FolderStamp::take(&self.dir).map_or(true, |now| now != *self)
    }
}

fn walk(dir: &Path, out: &mut Vec<Entry>) -> std::io::Result<()> {
    let mut paths = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()?;
    paths.sort();
    for path in paths {
        let meta = std::fs::symlink_metadata(&path)?;
        out.push(Entry {
            path: path.clone(),
            dev: meta.dev(),
            ino: meta.ino(),
            mode: meta.mode(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        });
        if meta.is_dir() {
            walk(&path, out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_change_below_the_folder_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/tool"), b"code").unwrap();
        std::fs::write(dir.path().join("README.md"), b"# r").unwrap();
        let stamp = FolderStamp::take(dir.path()).unwrap();
        assert!(!stamp.changed());

        // Replaced by rename with the same bytes: another inode.
        std::fs::write(dir.path().join("new"), b"code").unwrap();
        std::fs::rename(dir.path().join("new"), dir.path().join("bin/tool")).unwrap();
        assert!(stamp.changed());

        let stamp = FolderStamp::take(dir.path()).unwrap();
        std::fs::write(dir.path().join("README.md"), b"# other").unwrap();
        assert!(stamp.changed());

        let stamp = FolderStamp::take(dir.path()).unwrap();
        std::fs::write(dir.path().join("bin/extra"), b"").unwrap();
        assert!(stamp.changed());

        let stamp = FolderStamp::take(dir.path()).unwrap();
        std::fs::remove_dir_all(dir.path()).unwrap();
        assert!(stamp.changed());
    }
}
