//! The drift check of format names: a Markdown file names the current compact evidence
//! format only, except under a heading about superseded formats (a heading whose text
//! holds "superseded", and everything below it up to the next heading of its level or
//! higher).

use crate::files::MarkdownFile;

/// The `compact_v<N>` names in `line`.
fn format_names(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("compact_v") {
        let after = &rest[at + "compact_v".len()..];
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() {
            out.push(format!("compact_v{digits}"));
        }
        rest = after;
    }
    out
}

/// Every name of a compact evidence format other than `current` outside a superseded
/// section, as `FILE:LINE: NAME`.
pub(crate) fn stale_format_names(files: &[MarkdownFile], current: &str) -> Vec<String> {
    let mut stale = Vec::new();
    for file in files {
        // The open headings: (level, about superseded formats).
        let mut open: Vec<(usize, bool)> = Vec::new();
        let mut in_fence = false;
        for (n, line) in file.text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
            }
            if !in_fence && line.starts_with('#') {
                let level = line.chars().take_while(|c| *c == '#').count();
                open.retain(|(l, _)| *l < level);
                open.push((level, line.to_lowercase().contains("superseded")));
                continue;
            }
            if open.iter().any(|(_, superseded)| *superseded) {
                continue;
            }
            for name in format_names(line) {
                if name != current {
                    stale.push(format!("{}:{}: {name}", file.path, n + 1));
                }
            }
        }
    }
    stale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_superseded_sections_may_name_old_formats() {
        let file = MarkdownFile {
            path: "x.md".into(),
            text: "# X\ncompact_v3 and compact_v2\n## Superseded formats\ncompact_v1\n### v2\ncompact_v2\n## Now\n```\n# not a heading compact_v2\n```\ncompact_v12\n".into(),
        };
        assert_eq!(
            stale_format_names(&[file], "compact_v3"),
            [
                "x.md:2: compact_v2",
                "x.md:9: compact_v2",
                "x.md:11: compact_v12"
            ]
        );
    }
}
