//! The links of the Markdown files: every relative link reaches a file or folder of the
//! repository, and every `#anchor` (to the same file or another Markdown file) names one
//! of that file's headings, slugged as GitHub slugs them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::files::MarkdownFile;

/// GitHub's anchor of a heading's text: lower-cased, every character but letters,
/// digits, `-`, `_` and spaces dropped, spaces made `-`.
pub(crate) fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of `markdown`'s headings; a repeated heading gets `-1`, `-2`, ... as on
/// GitHub.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(markdown, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    let base = slug(&h);
                    let n = seen.entry(base.clone()).or_insert(0);
                    out.insert(if *n == 0 {
                        base.clone()
                    } else {
                        format!("{base}-{n}")
                    });
                    *n += 1;
                }
            }
            _ => {}
        }
    }
    out
}

/// The link destinations of `markdown` with their lines.
fn links(markdown: &str) -> Vec<(usize, String)> {
    Parser::new_ext(markdown, Options::ENABLE_TABLES)
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => Some((
                markdown[..range.start].matches('\n').count() + 1,
                dest_url.into_string(),
            )),
            _ => None,
        })
        .collect()
}

/// True for a destination this check leaves alone: one with a scheme (`https:`,
/// `mailto:`), and a rustdoc intra-doc link of a crate README (`fn@lock`,
/// `crate::Turn`, `Sandbox`), which rustdoc resolves and `cargo doc` checks.
fn is_external(dest: &str) -> bool {
    let scheme = dest
        .split(['/', '#'])
        .next()
        .is_some_and(|first| first.contains(':'));
    let intra_doc = dest.contains('@')
        || dest.contains("::")
        || !(dest.starts_with('#') || dest.contains('/') || dest.contains('.'));
    scheme || intra_doc
}

/// `path` with `.` and `..` resolved, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// How many relative links the files hold.
pub(crate) fn count_links(files: &[MarkdownFile]) -> usize {
    files
        .iter()
        .flat_map(|f| links(&f.text))
        .filter(|(_, d)| !is_external(d))
        .count()
}

/// Every relative link of `files` that does not resolve, as `FILE:LINE: why`.
pub(crate) fn broken_links(files: &[MarkdownFile], root: &Path) -> Vec<String> {
    let anchors_of: BTreeMap<&str, BTreeSet<String>> = files
        .iter()
        .map(|f| (f.path.as_str(), anchors(&f.text)))
        .collect();
    let mut broken = Vec::new();
    for file in files {
        let dir = Path::new(&file.path).parent().unwrap_or(Path::new(""));
        for (line, dest) in links(&file.text) {
            if is_external(&dest) {
                continue;
            }
            let (path, anchor) = dest.split_once('#').unwrap_or((&dest, ""));
            let target = if path.is_empty() {
                file.path.clone()
            } else {
                normalize(&dir.join(path)).to_string_lossy().into_owned()
            };
            if !path.is_empty() && !root.join(&target).exists() {
                broken.push(format!("{}:{line}: {dest}: no file {target}", file.path));
                continue;
            }
            if anchor.is_empty() {
                continue;
            }
            match anchors_of.get(target.as_str()) {
                Some(known) if known.contains(anchor) => {}
                Some(_) => broken.push(format!(
                    "{}:{line}: {dest}: {target} has no heading #{anchor}",
                    file.path
                )),
                None => broken.push(format!(
                    "{}:{line}: {dest}: an anchor into {target}, which is not a Markdown file",
                    file.path
                )),
            }
        }
    }
    broken
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_githubs() {
        assert_eq!(
            slug("Compact evidence, contract `compact_v3`"),
            "compact-evidence-contract-compact_v3"
        );
        assert_eq!(
            slug("Secrets in `opencode.json`"),
            "secrets-in-opencodejson"
        );
        assert_eq!(slug("The operator's sequence"), "the-operators-sequence");
        assert_eq!(slug("1. Build the tool"), "1-build-the-tool");
    }

    #[test]
    fn broken_links_are_found_with_their_line() {
        let files = vec![
            MarkdownFile {
                path: "docs/a.md".into(),
                text: "# A\n\n## Two words\n\n[ok](#two-words) [x](#nope)\n[b](b.md#b) [c](b.md#c)\n[gone](missing.md) [web](https://example.com/x.md) [f](fn@lock) [t](crate::Turn)\n".into(),
            },
            MarkdownFile {
                path: "docs/b.md".into(),
                text: "# B\n".into(),
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("docs")).unwrap();
        for f in &files {
            std::fs::write(dir.path().join(&f.path), &f.text).unwrap();
        }
        let broken = broken_links(&files, dir.path());
        assert_eq!(
            broken,
            [
                "docs/a.md:5: #nope: docs/a.md has no heading #nope",
                "docs/a.md:6: b.md#c: docs/b.md has no heading #c",
                "docs/a.md:7: missing.md: no file docs/missing.md",
            ]
        );
        assert_eq!(count_links(&files), 5);
    }
}
