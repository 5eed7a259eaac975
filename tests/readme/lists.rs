//! Lists a document keeps that something else also states: the crates the README's
//! `[dependencies]` block names against the crates its Rust blocks use and the
//! workspace's library crates, and the programs the test command installs against
//! the list CONTRIBUTING.md gives of them.

use std::collections::BTreeSet;

/// The dependency names of a `[dependencies]` table (`evidence-tool = { ... }`), with `-`
/// read as `_`, as Rust code names them.
pub(crate) fn dependency_names(toml: &str) -> BTreeSet<String> {
    let mut in_dependencies = false;
    let mut out = BTreeSet::new();
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if let (true, Some((name, _))) = (in_dependencies, line.split_once('=')) {
            out.insert(name.trim().replace('-', "_"));
        }
    }
    out
}

/// The crates Rust code names by a path (`evidence_tool::Sandbox`, `secrecy::SecretString`,
/// `use evidence_tool::{...}`), besides the language's own.
pub(crate) fn crates_used(rust: &str) -> BTreeSet<String> {
    const OWN: [&str; 6] = ["std", "core", "alloc", "crate", "self", "super"];
    let mut out = BTreeSet::new();
    for (at, _) in rust.match_indices("::") {
        let head = &rust[..at];
        let start = head
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let name = &head[start..];
        let after_path = head[..start].ends_with(':');
        let is_crate = name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !after_path && is_crate && !OWN.contains(&name) {
            out.insert(name.to_owned());
        }
    }
    out
}

/// The Debian packages `scripts/test.sh` installs when missing (`missing+=(NAME)`, and
/// the `apt-get install` of a fallback).
pub(crate) fn installed_by_script(script: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in script.lines().filter(|l| !l.trim_start().starts_with('#')) {
        for (at, _) in line.match_indices("missing+=(") {
            let rest = &line[at + "missing+=(".len()..];
            if let Some(end) = rest.find(')') {
                out.insert(rest[..end].to_owned());
            }
        }
        if let Some((_, rest)) = line.split_once("apt-get install -y -qq ") {
            for word in rest.split([' ', '&', ';']).take_while(|w| !w.is_empty()) {
                if !word.starts_with(['"', '$']) {
                    out.insert(word.to_owned());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_are_read() {
        let toml = "[package]\nname = \"x\"\n\n[dependencies]\nevidence-tool = { git = \"u\" }\nsecrecy = \"0.10\"\n[dev-dependencies]\nproptest = \"1\"\n";
        assert_eq!(
            dependency_names(toml),
            BTreeSet::from(["evidence_tool".to_owned(), "secrecy".to_owned()])
        );
        let rust = "use evidence_tool::{A, B};\nfn f(x: secrecy::SecretString, p: &std::path::Path) -> Result<evidence_result::ToolResult, Box<dyn std::error::Error>> { A::new() }";
        assert_eq!(
            crates_used(rust),
            BTreeSet::from([
                "evidence_result".to_owned(),
                "evidence_tool".to_owned(),
                "secrecy".to_owned()
            ])
        );
        let script = "command -v rg || missing+=(ripgrep)\n# missing+=(not-this)\npython3 -m venv v || { as_root env X=y apt-get install -y -qq python3-venv && python3; }\n  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \"${missing[@]}\"\n";
        assert_eq!(
            installed_by_script(script),
            BTreeSet::from(["python3-venv".to_owned(), "ripgrep".to_owned()])
        );
    }
}
