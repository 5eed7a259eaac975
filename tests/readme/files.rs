//! The Markdown files of the repository that `tests/readme` reads: every `*.md` below
//! the repository root, outside build output, installed tools and hidden folders, by
//! path relative to the root.

use std::path::{Path, PathBuf};

use crate::session::ROOT;

/// Folders below the root whose Markdown is not the project's: build output, the
/// project-local tool installs, and what npm or a venv brings.
const SKIPPED: [&str; 3] = ["target", "node_modules", "venv"];

/// One Markdown file: its path relative to the repository root and its text.
#[derive(Debug, Clone)]
pub(crate) struct MarkdownFile {
    /// The path relative to the root, with `/` separators (`docs/first-hour.md`).
    pub(crate) path: String,
    /// The whole text.
    pub(crate) text: String,
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path()
        })
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if !name.starts_with('.') && !SKIPPED.contains(&name) {
                walk(&path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// Every Markdown file of the repository, sorted by path.
pub(crate) fn markdown_files() -> Vec<MarkdownFile> {
    let root = Path::new(ROOT);
    let mut paths = Vec::new();
    walk(root, &mut paths);
    paths
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let path = p
                .strip_prefix(root)
                .unwrap_or(&p)
                .to_string_lossy()
                .replace('\\', "/");
            MarkdownFile { path, text }
        })
        .collect()
}

/// The Markdown file at `path` (relative to the root).
pub(crate) fn markdown_file(path: &str) -> MarkdownFile {
    let text = std::fs::read_to_string(Path::new(ROOT).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    MarkdownFile {
        path: path.to_owned(),
        text,
    }
}
