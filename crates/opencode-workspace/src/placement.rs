//! Where the workspace sits inside the project worktree OpenCode uses, so that edit
//! permissions name exactly the agents' own files wherever the workspace lives.
//!
//! OpenCode (checked with `opencode-ai` 1.18.33) matches an `edit` permission pattern
//! against the edited file's path relative to the project *worktree*, not relative to the
//! folder it was started in. The worktree is the top level of the git repository that
//! contains the folder (found by walking up to the first `.git`), or `/` when the folder
//! is in no repository. A workspace at `/srv/ws` in no repository is therefore checked as
//! `srv/ws/evidences/metrics.json`, and a workspace in the subfolder `sub` of a repository
//! as `sub/evidences/metrics.json`. The generator writes every edit pattern as the
//! workspace's [`Placement`] prefix followed by the workspace-relative file, each pattern
//! a literal path: nothing is widened with a wildcard, and a workspace whose path holds a
//! wildcard character (`*`, `?`) or a backslash is refused, since such a pattern would
//! match other paths too.
//!
//! A pattern is bound to the place the workspace was generated in: after moving the
//! workspace, every write is denied (fail closed) until it is generated again.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use crate::io_error::IoError;

/// The workspace's path relative to the OpenCode project worktree: empty when the
/// workspace is the worktree itself (a git root), otherwise `/`-separated normal components.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Placement {
    /// Components joined with `/`, without leading or trailing `/`; empty at the root.
    relative: String,
}

/// What kind of worktree OpenCode will use for a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Worktree {
    /// The top level of the git repository holding the workspace.
    Git(PathBuf),
    /// No repository holds the workspace: OpenCode uses `/`.
    FilesystemRoot,
}

impl Worktree {
    /// The folder edit paths are relative to.
    pub fn path(&self) -> &Path {
        match self {
            Self::Git(path) => path,
            Self::FilesystemRoot => Path::new("/"),
        }
    }
}

/// Why a workspace's place in the OpenCode worktree cannot be found or named.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    /// The workspace's path inside the OpenCode worktree cannot be written as a literal
    /// permission pattern.
    #[error("cannot confine edits for a workspace at {path}: {reason}")]
    Unsupported {
        /// The workspace (or relative path) refused.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The workspace folder could not be resolved.
    #[error(transparent)]
    Io(#[from] IoError),
}

fn unsupported(path: impl Into<PathBuf>, reason: impl Into<String>) -> PlacementError {
    PlacementError::Unsupported {
        path: path.into(),
        reason: reason.into(),
    }
}

/// Why one path component cannot appear in a literal OpenCode pattern, if it cannot.
fn component_problem(part: &str) -> Option<&'static str> {
    if part.is_empty() || part == "." || part == ".." {
        Some("it has an empty, `.` or `..` component")
    } else if part.contains(['*', '?']) {
        Some("it contains `*` or `?`, which OpenCode reads as wildcards")
    } else if part.contains('\\') {
        Some("it contains a backslash, which OpenCode reads as a separator")
    } else if part.chars().any(char::is_control) {
        Some("it contains a control character")
    } else {
        None
    }
}

/// The worktree OpenCode uses for a folder: the folder holding the first `.git` found
/// walking up from the folder's real path (when that `.git` is a repository folder with a
/// `HEAD`, or a `gitdir:` file of a linked worktree or submodule), otherwise `/`.
///
/// OpenCode asks `git rev-parse --show-toplevel` in the folder holding that `.git`, so it
/// needs the `git` program; without it, OpenCode itself falls back to `/`.
pub fn project_worktree(folder: &Path) -> Result<Worktree, PlacementError> {
    let real = folder
        .canonicalize()
        .map_err(|e| IoError::new("resolve", folder, e))?;
    for dir in real.ancestors() {
        let dot_git = dir.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
            continue;
        };
        let is_repository = if meta.is_dir() {
            dot_git.join("HEAD").is_file()
        } else {
            std::fs::read_to_string(&dot_git).is_ok_and(|text| text.starts_with("gitdir:"))
        };
        // OpenCode stops at the first `.git`, usable or not.
        return Ok(if is_repository {
            Worktree::Git(dir.to_path_buf())
        } else {
            Worktree::FilesystemRoot
        });
    }
    Ok(Worktree::FilesystemRoot)
}

impl Placement {
    /// The workspace is the worktree itself (a git root): patterns are workspace-relative.
    pub fn worktree_root() -> Self {
        Self::default()
    }

    /// A workspace at `relative` (`/`-separated, e.g. `srv/ws` or `sub`) below the worktree.
    pub fn new(relative: &str) -> Result<Self, PlacementError> {
        let trimmed = relative.trim_matches('/');
        if trimmed.is_empty() {
            return Ok(Self::worktree_root());
        }
        if let Some(reason) = trimmed.split('/').find_map(component_problem) {
            return Err(unsupported(relative, reason));
        }
        Ok(Self {
            relative: trimmed.to_owned(),
        })
    }

    /// The placement of `workspace` inside the worktree OpenCode will use for it (see
    /// [`project_worktree`]).
    pub fn detect(workspace: &Path) -> Result<Self, PlacementError> {
        let worktree = project_worktree(workspace)?;
        let real = workspace
            .canonicalize()
            .map_err(|e| IoError::new("resolve", workspace, e))?;
        Self::within(&real, worktree.path())
    }

    /// The placement of the folder `workspace` below `worktree` (both absolute, resolved).
    pub fn within(workspace: &Path, worktree: &Path) -> Result<Self, PlacementError> {
        let relative = workspace
            .strip_prefix(worktree)
            .map_err(|_| unsupported(workspace, "it is not inside the worktree"))?;
        let mut parts = Vec::new();
        for component in relative.components() {
            match component {
                Component::Normal(part) => {
                    let part = part
                        .to_str()
                        .ok_or_else(|| unsupported(workspace, "it is not valid UTF-8"))?;
                    parts.push(part);
                }
                _ => return Err(unsupported(workspace, "it is not a plain path")),
            }
        }
        Self::new(&parts.join("/")).map_err(|_| {
            unsupported(
                workspace,
                "it holds `*`, `?`, a backslash or a control character, which an OpenCode pattern cannot name literally",
            )
        })
    }

    /// The path relative to the worktree; empty at the root.
    pub fn relative(&self) -> &str {
        &self.relative
    }

    /// `true` when the workspace is the worktree itself.
    pub fn is_worktree_root(&self) -> bool {
        self.relative.is_empty()
    }

    /// The worktree a workspace at `workspace` (absolute, resolved) has with this placement:
    /// `workspace` without the placement's trailing components; `None` when `workspace`
    /// does not end with them.
    pub fn worktree_of(&self, workspace: &Path) -> Option<PathBuf> {
        if self.relative.is_empty() {
            return Some(workspace.to_path_buf());
        }
        if !workspace.ends_with(&self.relative) {
            return None;
        }
        let depth = self.relative.split('/').count();
        workspace.ancestors().nth(depth).map(Path::to_path_buf)
    }

    /// The OpenCode permission pattern of a workspace-relative file: the literal path
    /// OpenCode will check.
    pub fn pattern(&self, workspace_relative: &str) -> String {
        if self.relative.is_empty() {
            workspace_relative.to_owned()
        } else {
            format!("{}/{workspace_relative}", self.relative)
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.relative.is_empty() {
            f.write_str("the worktree root")
        } else {
            f.write_str(&self.relative)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_prefixed_literals() {
        let root = Placement::worktree_root();
        assert_eq!(root.pattern("evidences/a.json"), "evidences/a.json");
        let sub = Placement::new("/srv/ws/").unwrap();
        assert_eq!(sub.pattern("evidences/a.json"), "srv/ws/evidences/a.json");
        for bad in ["a/*/b", "a?", "a\\b", "a/../b", "a//b", "a/\u{7}"] {
            assert!(Placement::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_worktree_is_the_workspace_without_its_placement() {
        let ws = Path::new("/srv/repo/team/ws");
        let sub = Placement::new("team/ws").unwrap();
        assert_eq!(sub.worktree_of(ws), Some(PathBuf::from("/srv/repo")));
        assert_eq!(
            Placement::worktree_root().worktree_of(ws),
            Some(ws.to_path_buf())
        );
        let absolute = Placement::new("srv/repo/team/ws").unwrap();
        assert_eq!(absolute.worktree_of(ws), Some(PathBuf::from("/")));
        assert_eq!(Placement::new("other/ws").unwrap().worktree_of(ws), None);
    }

    #[test]
    fn detection_follows_the_first_dot_git() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        let ws = real.join("repo/sub/ws");
        std::fs::create_dir_all(&ws).unwrap();
        let expected_no_repo = real.join("repo/sub/ws");
        let no_repo = Placement::detect(&ws).unwrap();
        // Without a repository the worktree is `/` (unless the temp folder is in one).
        if project_worktree(&ws).unwrap() == Worktree::FilesystemRoot {
            assert_eq!(
                no_repo.relative(),
                expected_no_repo.to_str().unwrap().trim_start_matches('/')
            );
        }
        std::fs::create_dir_all(real.join("repo/.git")).unwrap();
        std::fs::write(real.join("repo/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(Placement::detect(&ws).unwrap().relative(), "sub/ws");
        assert_eq!(
            Placement::detect(&real.join("repo")).unwrap(),
            Placement::worktree_root()
        );
        std::fs::write(real.join("repo/sub/.git"), "not a repository").unwrap();
        assert_eq!(
            project_worktree(&ws).unwrap(),
            Worktree::FilesystemRoot,
            "the first .git decides, usable or not"
        );
    }
}
