//! `.opencode/investibook/generated.json`: the digest of every file the generator wrote,
//! so that it can tell its own unchanged files from files someone edited, and the place in
//! the OpenCode worktree the edit patterns were written for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::error::GenerateError;
use super::files::{check_no_symlink, is_plain_relative, read_optional};
use super::generator::GeneratedFile;
use crate::placement::Placement;

const GENERATOR_ID: &str = "opencode-workspace";

/// Why a manifest file is refused.
pub(super) const NOT_A_MANIFEST: &str = "not a manifest written by opencode-workspace";

/// `sha256:<hex>` of `bytes`.
pub(super) fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The recorded digests, by workspace-relative path.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Manifest {
    generator: String,
    /// The worktree the generation targeted, relative to the workspace (`.` or `../..`), so
    /// that workspaces at the same placement get the same bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    worktree: Option<String>,
    /// The workspace's placement in that worktree, as the edit patterns carry it
    /// (`/`-separated, empty at the worktree root). Absent in manifests of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    placement: Option<String>,
    files: BTreeMap<String, String>,
}

/// Where a generation put its edit patterns: the worktree it targeted and the workspace's
/// placement in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    /// The worktree relative to the workspace (`.`, `..`, `../..`, ...), when recorded.
    pub(super) worktree: Option<String>,
    /// The placement, `/`-separated, empty at the worktree root.
    pub(super) placement: String,
}

impl Target {
    /// The target of a workspace at `placement`: its worktree is as many folders up as
    /// the placement has components.
    pub(super) fn of(placement: &Placement) -> Self {
        let relative = placement.relative();
        let worktree = if relative.is_empty() {
            ".".to_owned()
        } else {
            vec![".."; relative.split('/').count()].join("/")
        };
        Self {
            worktree: Some(worktree),
            placement: relative.to_owned(),
        }
    }

    /// The recorded worktree as an absolute path, for a workspace whose real path is
    /// `workspace`.
    pub(super) fn worktree_from(&self, workspace: &Path) -> Option<PathBuf> {
        let up = self.worktree.as_deref()?;
        let depth = up.split('/').filter(|part| *part == "..").count();
        workspace.ancestors().nth(depth).map(Path::to_path_buf)
    }
}

impl Manifest {
    /// The manifest at `path`: empty when there is none, an error when it is not one the
    /// generator wrote.
    pub(super) fn read(path: &Path) -> Result<Self, GenerateError> {
        match read_optional(path)? {
            None => Ok(Self::default()),
            Some(bytes) => Self::parse(&bytes).ok_or_else(|| GenerateError::Unreadable {
                path: path.to_path_buf(),
                reason: NOT_A_MANIFEST.to_owned(),
            }),
        }
    }

    /// The manifest in `bytes`, `None` when they are not one the generator wrote.
    pub(super) fn parse(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice::<Self>(bytes)
            .ok()
            .filter(|m| m.generator == GENERATOR_ID)
    }

    /// Where the recorded generation put its edit patterns; `None` for a manifest of an
    /// older version, which did not record it.
    pub(super) fn target(&self) -> Option<Target> {
        self.placement.as_ref().map(|placement| Target {
            worktree: self.worktree.clone(),
            placement: placement.clone(),
        })
    }

    /// `true` when `bytes` are what the generator last recorded for `path`.
    pub(super) fn records(&self, path: &str, bytes: &[u8]) -> bool {
        self.files.get(path) == Some(&digest(bytes))
    }

    /// The next manifest for a workspace at `root`, generated for `target`, that now holds
    /// `files`: every file
    /// written now, plus earlier files still unedited, which are returned as stale (this
    /// mode no longer uses them; they are left in place).
    pub(super) fn next(
        &self,
        root: &Path,
        target: Target,
        files: &[GeneratedFile],
    ) -> Result<(Self, Vec<String>), GenerateError> {
        let mut manifest = Self {
            generator: GENERATOR_ID.to_owned(),
            worktree: target.worktree,
            placement: Some(target.placement),
            files: BTreeMap::new(),
        };
        let mut stale = Vec::new();
        for (path, recorded) in &self.files {
            if files.iter().any(|f| f.path() == path) || !is_plain_relative(path) {
                continue;
            }
            if check_no_symlink(root, path).is_err() {
                continue;
            }
            if let Some(bytes) = read_optional(&root.join(path))?
                && &digest(&bytes) == recorded
            {
                manifest.files.insert(path.clone(), recorded.clone());
                stale.push(path.clone());
            }
        }
        for file in files {
            manifest
                .files
                .insert(file.path().to_owned(), digest(file.contents().as_bytes()));
        }
        Ok((manifest, stale))
    }

    /// The manifest as pretty JSON with a final newline.
    pub(super) fn to_text(&self) -> Result<String, GenerateError> {
        let mut text =
            serde_json::to_string_pretty(self).map_err(|e| GenerateError::Serialize {
                what: "manifest",
                reason: e.to_string(),
            })?;
        text.push('\n');
        Ok(text)
    }
}
