//! The skills source tree (`agentkit/skills/<name>/SKILL.md`) and the checked frontmatter
//! of each skill. Loading keeps one result per folder; the catalog decides which of them
//! matter.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

use crate::io_error::IoError;
use crate::names::{MAX_NAME_LEN, is_valid_name};

/// Longest `description` a skill may have, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// Largest `SKILL.md` that is read, in bytes.
const MAX_SKILL_FILE_BYTES: u64 = 1024 * 1024;

/// The `name` and `description` of a skill, read from its `SKILL.md` frontmatter and
/// checked: the name matches `^[a-z0-9]+(-[a-z0-9]+)*$`, has at most 64 characters and
/// equals its folder; the description has 1 to 1024 characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillMeta {
    name: String,
    description: String,
}

impl SkillMeta {
    /// The skill's name (equal to its folder).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The skill's description, as written in the frontmatter.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Parses and checks the frontmatter of a `SKILL.md` whose folder is `folder`.
    ///
    /// The file must open with a `---` line and close the frontmatter with another `---`
    /// line; the block between is YAML (parsed with `yaml-rust2`) holding a mapping with
    /// string `name` and `description`. Other keys (`license`, `metadata`, ...) are allowed
    /// and ignored.
    pub fn parse(folder: &str, text: &str) -> Result<Self, String> {
        let block = frontmatter_block(text)?;
        let docs = YamlLoader::load_from_str(block)
            .map_err(|e| format!("frontmatter is not valid YAML: {e}"))?;
        let [doc] = docs.as_slice() else {
            return Err("frontmatter must hold exactly one YAML document".to_owned());
        };
        let Yaml::Hash(map) = doc else {
            return Err("frontmatter must be a YAML mapping".to_owned());
        };
        let field = |key: &str| -> Result<String, String> {
            match map.get(&Yaml::String(key.to_owned())) {
                Some(Yaml::String(value)) => Ok(value.clone()),
                Some(_) => Err(format!("frontmatter field `{key}` must be a string")),
                None => Err(format!("frontmatter has no `{key}`")),
            }
        };
        let name = field("name")?;
        let description = field("description")?;
        if name.len() > MAX_NAME_LEN {
            return Err(format!(
                "name {name:?} is longer than {MAX_NAME_LEN} characters"
            ));
        }
        if !is_valid_name(&name) {
            return Err(format!(
                "name {name:?} does not match ^[a-z0-9]+(-[a-z0-9]+)*$"
            ));
        }
        if name != folder {
            return Err(format!("name {name:?} differs from its folder {folder:?}"));
        }
        let chars = description.chars().count();
        if description.trim().is_empty() {
            return Err("description is empty".to_owned());
        }
        if chars > MAX_DESCRIPTION_CHARS {
            return Err(format!(
                "description has {chars} characters, more than {MAX_DESCRIPTION_CHARS}"
            ));
        }
        Ok(Self { name, description })
    }
}

/// The text between the opening `---` line and the closing `---` line.
fn frontmatter_block(text: &str) -> Result<&str, String> {
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end_matches(['\r', '\n']) != "---" {
        return Err("SKILL.md does not open with a `---` frontmatter line".to_owned());
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            return text
                .get(start..offset)
                .ok_or_else(|| "frontmatter boundaries are not on characters".to_owned());
        }
        offset += line.len();
    }
    Err("SKILL.md frontmatter is not closed by a `---` line".to_owned())
}

/// One folder of the skills tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillEntry {
    folder: String,
    meta: Result<SkillMeta, String>,
}

impl SkillEntry {
    /// The folder name.
    pub fn folder(&self) -> &str {
        &self.folder
    }

    /// The checked frontmatter, or why it is missing or invalid.
    pub fn meta(&self) -> Result<&SkillMeta, &str> {
        self.meta.as_ref().map_err(String::as_str)
    }
}

/// A skills source tree: `<root>/<name>/SKILL.md` for every skill.
///
/// Loading never fails because of one bad skill: each folder keeps its own result, and the
/// catalog validation reports the ones it references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillsTree {
    root: PathBuf,
    entries: BTreeMap<String, SkillEntry>,
}

impl SkillsTree {
    /// Reads every folder of `root` (for example `agentkit/skills`).
    pub fn load(root: impl AsRef<Path>) -> Result<Self, IoError> {
        let root = root.as_ref().to_path_buf();
        let dir = fs::read_dir(&root).map_err(|e| IoError::new("read", &root, e))?;
        let mut entries = BTreeMap::new();
        for item in dir {
            let item = item.map_err(|e| IoError::new("read", &root, e))?;
            let path = item.path();
            if !path.is_dir() {
                continue;
            }
            let Some(folder) = item.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if folder.starts_with('.') {
                continue;
            }
            let meta = read_skill_file(&path.join("SKILL.md"))
                .and_then(|text| SkillMeta::parse(&folder, &text));
            entries.insert(folder.clone(), SkillEntry { folder, meta });
        }
        Ok(Self { root, entries })
    }

    /// Builds a tree from in-memory `SKILL.md` texts keyed by folder (for tests and tools).
    pub fn from_texts<'a>(
        root: impl Into<PathBuf>,
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        let entries = files
            .into_iter()
            .map(|(folder, text)| {
                let entry = SkillEntry {
                    folder: folder.to_owned(),
                    meta: SkillMeta::parse(folder, text),
                };
                (folder.to_owned(), entry)
            })
            .collect();
        Self {
            root: root.into(),
            entries,
        }
    }

    /// The tree with one more folder `folder` holding the `SKILL.md` text `text`
    /// (replacing a folder of that name).
    pub(crate) fn with_text(mut self, folder: &str, text: &str) -> Self {
        let entry = SkillEntry {
            folder: folder.to_owned(),
            meta: SkillMeta::parse(folder, text),
        };
        self.entries.insert(folder.to_owned(), entry);
        self
    }

    /// The folder the tree was read from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder named `name`, if present.
    pub fn get(&self, name: &str) -> Option<&SkillEntry> {
        self.entries.get(name)
    }

    /// All folders, sorted by name.
    pub fn entries(&self) -> impl Iterator<Item = &SkillEntry> {
        self.entries.values()
    }
}

fn read_skill_file(path: &Path) -> Result<String, String> {
    let file = fs::File::open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            "SKILL.md is missing".to_owned()
        } else {
            format!("SKILL.md cannot be read: {e}")
        }
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_SKILL_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("SKILL.md cannot be read: {e}"))?;
    if bytes.len() as u64 > MAX_SKILL_FILE_BYTES {
        return Err(format!(
            "SKILL.md is larger than {MAX_SKILL_FILE_BYTES} bytes"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "SKILL.md is not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_a_valid_frontmatter() {
        let text =
            "---\nname: jira\ndescription: Read Jira tickets.\nlicense: Apache-2.0\n---\n# Jira\n";
        let meta = SkillMeta::parse("jira", text).unwrap();
        assert_eq!(meta.name(), "jira");
        assert_eq!(meta.description(), "Read Jira tickets.");
    }

    #[test]
    fn accepts_crlf_and_folded_descriptions() {
        let text =
            "---\r\nname: jira\r\ndescription: >\r\n  Read Jira\r\n  tickets.\r\n---\r\nbody";
        let meta = SkillMeta::parse("jira", text).unwrap();
        assert_eq!(meta.description(), "Read Jira tickets.\n");
    }

    #[test]
    fn refuses_bad_frontmatter() {
        let long = format!("---\nname: jira\ndescription: {}\n---\n", "x".repeat(1025));
        let at_limit = format!("---\nname: jira\ndescription: {}\n---\n", "é".repeat(1024));
        assert!(SkillMeta::parse("jira", &at_limit).is_ok());
        let long_name = format!("---\nname: {}\ndescription: d\n---\n", "a".repeat(65));
        let cases = [
            ("no opening", "name: jira\ndescription: d\n"),
            ("not closed", "---\nname: jira\ndescription: d\n"),
            ("no name", "---\ndescription: d\n---\n"),
            ("no description", "---\nname: jira\n---\n"),
            (
                "empty description",
                "---\nname: jira\ndescription: \"  \"\n---\n",
            ),
            ("name not string", "---\nname: 12\ndescription: d\n---\n"),
            ("bad name", "---\nname: Jira_Tool\ndescription: d\n---\n"),
            (
                "folder mismatch",
                "---\nname: devops\ndescription: d\n---\n",
            ),
            ("list", "---\n- a\n- b\n---\n"),
            ("bad yaml", "---\nname: [jira\ndescription: d\n---\n"),
            ("long description", long.as_str()),
            ("long name", long_name.as_str()),
        ];
        for (case, text) in cases {
            assert!(SkillMeta::parse("jira", text).is_err(), "{case} accepted");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn never_panics_on_arbitrary_frontmatter(body in "\\PC{0,200}", folder in "[a-z-]{0,10}") {
            let text = format!("---\n{body}\n---\n");
            let _ = SkillMeta::parse(&folder, &text);
            let _ = SkillMeta::parse(&folder, &body);
        }
    }
}
