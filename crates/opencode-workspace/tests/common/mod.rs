//! Shared helpers of the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use opencode_workspace::{GenerateOptions, Generator, SkillCatalog, SkillsTree, TaskSupport};

/// The committed fixture skills tree.
pub(crate) fn fixture_skills() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentkit/skills")
}

pub(crate) fn catalog() -> SkillCatalog {
    SkillCatalog::investibook().unwrap()
}

pub(crate) fn generator(support: TaskSupport) -> Generator {
    let skills = SkillsTree::load(fixture_skills()).unwrap();
    Generator::new(
        &catalog(),
        &skills,
        GenerateOptions::default().with_task_support(support),
    )
    .unwrap()
}

/// What a path in a snapshot is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    Dir,
    File {
        bytes: Vec<u8>,
        modified: std::time::SystemTime,
        mode: u32,
    },
    Link(PathBuf),
}

/// Every path under `root` (relative, `/`-separated) with its kind, bytes, mtime and mode;
/// symbolic links are recorded, not followed.
pub(crate) fn snapshot(root: &Path) -> BTreeMap<String, Node> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Node>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let meta = fs::symlink_metadata(&path).unwrap();
        if meta.file_type().is_symlink() {
            out.insert(rel, Node::Link(fs::read_link(&path).unwrap()));
        } else if meta.is_dir() {
            out.insert(rel, Node::Dir);
            walk(root, &path, out);
        } else {
            #[cfg(unix)]
            let mode = {
                use std::os::unix::fs::PermissionsExt as _;
                meta.permissions().mode()
            };
            #[cfg(not(unix))]
            let mode = 0;
            out.insert(
                rel,
                Node::File {
                    bytes: fs::read(&path).unwrap(),
                    modified: meta.modified().unwrap(),
                    mode,
                },
            );
        }
    }
}

/// Only the contents (no times) of a snapshot.
pub(crate) fn contents(snap: &BTreeMap<String, Node>) -> BTreeMap<String, Option<Vec<u8>>> {
    snap.iter()
        .map(|(k, v)| {
            let bytes = match v {
                Node::File { bytes, .. } => Some(bytes.clone()),
                _ => None,
            };
            (k.clone(), bytes)
        })
        .collect()
}

pub(crate) fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// The pinned OpenCode, run isolated in `home` (HOME and XDG folders inside it, offline
/// switches set). Fails the test, naming the install command, when it is not installed.
pub(crate) fn opencode(home: &Path) -> opencode_workspace::OpenCodeCli {
    let program = opencode_workspace::internal::pinned_opencode().unwrap_or_else(|e| panic!("{e}"));
    opencode_workspace::OpenCodeCli::new(program).isolated(home)
}

/// Runs `git` with the given arguments in `dir`, failing the test when it fails.
pub(crate) fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap_or_else(|e| panic!("git is needed (apt-get install -y git): {e}"));
    assert!(status.success(), "git {args:?} failed in {}", dir.display());
}

/// The files a subagent may edit, workspace-relative (none for the orchestrator).
pub(crate) fn own_files(agent: &str) -> Vec<&'static str> {
    use opencode_workspace::layout::{
        ANALYST_OUTPUT, EVIDENCE_AGENT_OUTPUT, EVIDENCE_FILES, REPORT_PATH,
    };
    match agent {
        "evidence-agent" => EVIDENCE_FILES
            .iter()
            .copied()
            .chain([EVIDENCE_AGENT_OUTPUT])
            .collect(),
        "diagnosis-analyst" => vec![ANALYST_OUTPUT, REPORT_PATH],
        _ => vec![],
    }
}
