//! Writing a rendered workspace, as a pipeline of named steps: check every path it would
//! write through, plan each file against what is there and what the manifest recorded,
//! stop on any conflict before writing, then create the folders, write the changed files
//! and record their digests.

use std::fs;
use std::path::{Path, PathBuf};

use super::error::GenerateError;
use super::files::{check_no_symlink, read_optional, write_atomic};
use super::generator::Generator;
use super::manifest::{Manifest, Target};
use super::report::{FileChange, GenerationReport, Mode};
use crate::io_error::IoError;
use crate::layout::{
    AGENT_RUNS_DIR, AGENTS_DIR, CONFIG_PATH, EVIDENCES_DIR, INVESTIBOOK_DIR, MANIFEST_PATH,
    WORKSPACE_SKILLS_DIR,
};
use crate::placement::Placement;

/// What one write does to each file, decided before anything is written.
struct Plan {
    /// Each generated file with its contents and what happens to it, in write order.
    files: Vec<(String, String, FileChange)>,
    /// The merged `opencode.json` and what happens to it.
    config: (String, FileChange),
}

impl Generator {
    /// Writes the workspace under `root` (which must exist), with edit patterns for the
    /// placement OpenCode will see ([`Placement::detect`]).
    pub fn write(&self, root: &Path) -> Result<GenerationReport, GenerateError> {
        let placement = Placement::detect(root)?;
        self.write_at(root, &placement)
    }

    /// Writes the workspace under `root` (which must exist) for a workspace at `placement`
    /// inside the OpenCode worktree.
    ///
    /// A file is written only when it is missing, or when it is the generator's own
    /// (its bytes match the digest recorded in `.opencode/investibook/generated.json`) and
    /// its content changes. A file that differs from what the generator last wrote is a
    /// conflict: nothing at all is written and the error lists it. `opencode.json` is
    /// merged, not replaced. The manifest records the worktree and placement the edit
    /// patterns were written for, which [`check_placement`](super::check_placement)
    /// compares with the worktree OpenCode would use now. No file is ever deleted, and nothing under
    /// `.opencode/skills` or `.opencode/.all-skills` is read or written.
    pub fn write_at(
        &self,
        root: &Path,
        placement: &Placement,
    ) -> Result<GenerationReport, GenerateError> {
        check_root(root)?;
        let dirs = self.folders();
        self.check_targets(root, &dirs)?;
        let manifest_path = root.join(MANIFEST_PATH);
        let old_manifest = Manifest::read(&manifest_path)?;
        let plan = self.plan(root, placement, &old_manifest)?;
        let target = Target::of(placement);
        let (manifest, stale) = old_manifest.next(root, target, self.files())?;
        let manifest_text = manifest.to_text()?;

        let created_dirs = create_folders(root, &dirs)?;
        let files = apply(root, &plan)?;
        if read_optional(&manifest_path)?.as_deref() != Some(manifest_text.as_bytes()) {
            write_atomic(&manifest_path, manifest_text.as_bytes())?;
        }
        Ok(GenerationReport {
            mode: self.mode(),
            files,
            created_dirs,
            stale,
            placement: placement.clone(),
        })
    }

    /// The folders this mode uses, parents first.
    fn folders(&self) -> Vec<String> {
        let multi = self.mode() == Mode::MultiAgent;
        let skills = !self.skill_folders().is_empty();
        let mut folders: Vec<String> = [
            (".opencode", true),
            (INVESTIBOOK_DIR, true),
            (AGENTS_DIR, true),
            (".opencode/investibook/schemas", multi),
            (EVIDENCES_DIR, true),
            (AGENT_RUNS_DIR, multi),
            (WORKSPACE_SKILLS_DIR, skills),
        ]
        .into_iter()
        .filter(|(_, used)| *used)
        .map(|(dir, _)| dir.to_owned())
        .collect();
        folders.extend(self.skill_folders().iter().cloned());
        folders
    }

    /// Refuses to write through a symbolic link, into something that is not a folder or
    /// over something that is not a file.
    fn check_targets(&self, root: &Path, dirs: &[String]) -> Result<(), GenerateError> {
        let mut targets: Vec<&str> = self.files().iter().map(|f| f.path()).collect();
        targets.push(CONFIG_PATH);
        targets.push(MANIFEST_PATH);
        for path in dirs
            .iter()
            .map(String::as_str)
            .chain(targets.iter().copied())
        {
            check_no_symlink(root, path)?;
        }
        for dir in dirs {
            let full = root.join(dir);
            if full.exists() && !full.is_dir() {
                return Err(GenerateError::UnsafePath {
                    path: full,
                    reason: "it exists and is not a folder",
                });
            }
        }
        for target in &targets {
            let full = root.join(target);
            if full.exists() && !full.is_file() {
                return Err(GenerateError::UnsafePath {
                    path: full,
                    reason: "it exists and is not a file",
                });
            }
        }
        Ok(())
    }

    /// What happens to each file; any generated file edited since the last write is a
    /// conflict that stops the write.
    fn plan(
        &self,
        root: &Path,
        placement: &Placement,
        old_manifest: &Manifest,
    ) -> Result<Plan, GenerateError> {
        let mut files = Vec::new();
        let mut conflicts = Vec::new();
        for file in self.files() {
            let existing = read_optional(&root.join(file.path()))?;
            let change = match existing {
                None => FileChange::Created,
                Some(bytes) if bytes == file.contents().as_bytes() => FileChange::Unchanged,
                Some(bytes) if old_manifest.records(file.path(), &bytes) => FileChange::Updated,
                Some(_) => {
                    conflicts.push(root.join(file.path()));
                    continue;
                }
            };
            files.push((file.path().to_owned(), file.contents().to_owned(), change));
        }
        let config = self.plan_config(root, placement)?;
        if !conflicts.is_empty() {
            return Err(GenerateError::Conflict(conflicts));
        }
        Ok(Plan { files, config })
    }

    /// The merged `opencode.json` and whether it changes.
    fn plan_config(
        &self,
        root: &Path,
        placement: &Placement,
    ) -> Result<(String, FileChange), GenerateError> {
        let config_path = root.join(CONFIG_PATH);
        let existing = read_optional(&config_path)?;
        let existing_text = match &existing {
            None => None,
            Some(bytes) => {
                Some(
                    std::str::from_utf8(bytes).map_err(|_| GenerateError::Unreadable {
                        path: config_path.clone(),
                        reason: "not UTF-8".to_owned(),
                    })?,
                )
            }
        };
        let config = self.render_config(existing_text, placement)?;
        let change = match existing_text {
            None => FileChange::Created,
            Some(text) if text == config => FileChange::Unchanged,
            Some(_) => FileChange::Updated,
        };
        Ok((config, change))
    }
}

/// The workspace root must be a folder, not a symbolic link to one.
fn check_root(root: &Path) -> Result<(), GenerateError> {
    let meta = fs::symlink_metadata(root).map_err(|e| IoError::new("inspect", root, e))?;
    if meta.is_dir() {
        Ok(())
    } else {
        Err(GenerateError::UnsafePath {
            path: root.to_path_buf(),
            reason: "the workspace root is not a folder",
        })
    }
}

/// Creates the missing folders; returns the ones created.
fn create_folders(root: &Path, dirs: &[String]) -> Result<Vec<String>, IoError> {
    let mut created = Vec::new();
    for dir in dirs {
        let full: PathBuf = root.join(dir);
        if !full.exists() {
            fs::create_dir_all(&full).map_err(|e| IoError::new("create folder", &full, e))?;
            created.push(dir.clone());
        }
    }
    Ok(created)
}

/// Writes every changed file of `plan`, then `opencode.json`; returns what happened to
/// each, in write order.
fn apply(root: &Path, plan: &Plan) -> Result<Vec<(String, FileChange)>, IoError> {
    let mut report = Vec::new();
    for (path, contents, change) in &plan.files {
        if *change != FileChange::Unchanged {
            write_atomic(&root.join(path), contents.as_bytes())?;
        }
        report.push((path.clone(), *change));
    }
    let (config, change) = &plan.config;
    if *change != FileChange::Unchanged {
        write_atomic(&root.join(CONFIG_PATH), config.as_bytes())?;
    }
    report.push((CONFIG_PATH.to_owned(), *change));
    Ok(report)
}
