//! Reading the skill catalog from a `SKILL_CATALOG.md` source file (the plan's
//! `agentkit/config/SKILL_CATALOG.md`) instead of the built-in one.
//!
//! Two Markdown shapes are understood (parsed with `pulldown-cmark`), and may be mixed:
//!
//! ```markdown
//! # Skill Catalog
//!
//! - `core`: basics every subagent loads
//!   - `time-conversion`
//!   - `tidb-knowledge-base`
//! - `data-access`
//!   - `clinic-cli`
//!
//! ## `diagnosis`
//!
//! Diagnosis playbooks.
//!
//! - `tidb-clinic-diagnosis`: anything after the name is ignored
//! ```
//!
//! A nested list names groups at its first level and their skills at its second; a
//! heading (level 2 or deeper) whose text is a group name opens that group, its first
//! paragraph is the group's purpose and its list items are the skills. Headings that are
//! not names (`## Loading rules`) close the group, and lists without nested items outside
//! a group are prose and ignored, so the catalog the generator writes reads back. Names
//! may be written with or without backticks. Skill descriptions always come from each
//! skill's `SKILL.md`. The default load groups are the standard ones
//! (`evidence-agent`: `core` + `data-access`; `diagnosis-analyst`: `core` + `diagnosis`),
//! and [`SkillCatalog::validate`] checks the result like any catalog.

use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

use super::model::{SkillCatalog, SkillGroup};
use crate::io_error::IoError;
use crate::names::{GroupName, NameError, SkillName};

/// Largest `SKILL_CATALOG.md` that is read, in bytes.
pub const MAX_CATALOG_BYTES: u64 = 1024 * 1024;

/// Why a `SKILL_CATALOG.md` source gives no catalog.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogSourceError {
    /// The file could not be read.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The file is malformed (or larger than [`MAX_CATALOG_BYTES`]).
    #[error("malformed skill catalog {path}, line {line}: {reason}")]
    Malformed {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// One-based line of the problem (0 when it concerns the whole file).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A standard default load group has an invalid name (never for the built-in names).
    #[error(transparent)]
    Name(#[from] NameError),
}

/// One list item: its first words, the rest of its first line, and nested items.
#[derive(Debug, Default)]
struct Item {
    line: usize,
    head: String,
    children: Vec<Item>,
}

impl Item {
    /// The name at the start of the item (before `:` or whitespace) and what follows.
    fn name_and_rest(&self) -> (&str, &str) {
        let text = self.head.trim();
        let end = text
            .find(|c: char| c == ':' || c.is_whitespace())
            .unwrap_or(text.len());
        let rest = text[end..].trim_start_matches(':').trim();
        (&text[..end], rest)
    }
}

/// A group being read: name, purpose, skills, where it started.
#[derive(Debug)]
struct Draft {
    name: GroupName,
    purpose: String,
    skills: Vec<SkillName>,
    line: usize,
}

/// Collected text of the current heading, paragraph or list item.
#[derive(Debug)]
enum Capture {
    Heading {
        level: HeadingLevel,
        text: String,
        line: usize,
    },
    Paragraph(String),
}

/// The reading state: the groups found so far and where the parser stands.
struct Reader<'a> {
    path: &'a Path,
    text: &'a str,
    groups: Vec<Draft>,
    /// `Some(index)` while inside a heading-opened group section.
    section: Option<usize>,
    capture: Option<Capture>,
    /// Open list items, innermost last; a finished top-level item goes to `top`.
    stack: Vec<Item>,
    top: Vec<Item>,
    /// While inside an item, text goes to its head until its first nested block ends it.
    head_open: bool,
}

impl<'a> Reader<'a> {
    fn new(path: &'a Path, text: &'a str) -> Self {
        Self {
            path,
            text,
            groups: Vec::new(),
            section: None,
            capture: None,
            stack: Vec::new(),
            top: Vec::new(),
            head_open: false,
        }
    }

    fn error(&self, line: usize, reason: impl Into<String>) -> CatalogSourceError {
        CatalogSourceError::Malformed {
            path: self.path.to_path_buf(),
            line,
            reason: reason.into(),
        }
    }

    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .bytes()
            .filter(|b| *b == b'\n')
            .count()
            + 1
    }

    fn skill(&self, item: &Item) -> Result<SkillName, CatalogSourceError> {
        let (name, _) = item.name_and_rest();
        if !item.children.is_empty() {
            return Err(self.error(item.line, format!("skill {name:?} has a nested list")));
        }
        SkillName::new(name).map_err(|e| self.error(item.line, e.to_string()))
    }

    /// One Markdown event starting at byte `start`.
    fn event(&mut self, event: Event<'_>, start: usize) -> Result<(), CatalogSourceError> {
        let in_list = !self.stack.is_empty();
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                self.capture = Some(Capture::Heading {
                    level,
                    text: String::new(),
                    line: self.line_of(start),
                });
            }
            Event::End(TagEnd::Heading(_)) => self.end_heading(),
            Event::Start(Tag::Paragraph) if !in_list => {
                self.capture = Some(Capture::Paragraph(String::new()));
            }
            Event::End(TagEnd::Paragraph) if !in_list => self.end_paragraph(),
            Event::Start(Tag::Item) => {
                let line = self.line_of(start);
                self.stack.push(Item {
                    line,
                    ..Item::default()
                });
                self.head_open = true;
            }
            Event::Start(Tag::List(_)) | Event::End(TagEnd::Paragraph) | Event::SoftBreak
                if in_list =>
            {
                self.head_open = false;
            }
            Event::End(TagEnd::Item) => self.end_item(),
            Event::End(TagEnd::List(_)) if !in_list => self.end_list()?,
            Event::SoftBreak | Event::HardBreak => self.capture_text(" "),
            Event::Text(piece) | Event::Code(piece) => {
                if self.head_open
                    && let Some(item) = self.stack.last_mut()
                {
                    item.head.push_str(&piece);
                } else {
                    self.capture_text(&piece);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Adds text to the heading or paragraph being read, if any.
    fn capture_text(&mut self, piece: &str) {
        if let Some(Capture::Heading { text, .. } | Capture::Paragraph(text)) = &mut self.capture {
            text.push_str(piece);
        }
    }

    /// A heading whose text is a group name (level 2 or deeper) opens that group; any
    /// heading closes the previous one.
    fn end_heading(&mut self) {
        if let Some(Capture::Heading { level, text, line }) = self.capture.take() {
            self.section = None;
            let name = text.trim();
            if level != HeadingLevel::H1
                && let Ok(name) = GroupName::new(name)
            {
                self.groups.push(Draft {
                    name,
                    purpose: String::new(),
                    skills: Vec::new(),
                    line,
                });
                self.section = Some(self.groups.len() - 1);
            }
        }
    }

    /// The first paragraph of a group section is the group's purpose.
    fn end_paragraph(&mut self) {
        if let (Some(Capture::Paragraph(text)), Some(index)) = (self.capture.take(), self.section)
            && let Some(group) = self.groups.get_mut(index)
            && group.purpose.is_empty()
            && group.skills.is_empty()
        {
            group.purpose = text.split_whitespace().collect::<Vec<_>>().join(" ");
        }
    }

    /// A finished item joins its parent, or the top-level list.
    fn end_item(&mut self) {
        self.head_open = false;
        let Some(item) = self.stack.pop() else {
            return;
        };
        match self.stack.last_mut() {
            Some(parent) => parent.children.push(item),
            None => self.top.push(item),
        }
    }

    /// A finished top-level list: the skills of the open group section, or a free list.
    fn end_list(&mut self) -> Result<(), CatalogSourceError> {
        let items = std::mem::take(&mut self.top);
        match self
            .section
            .and_then(|index| self.groups.get(index).map(|_| index))
        {
            Some(index) => {
                let skills = items
                    .iter()
                    .map(|item| self.skill(item))
                    .collect::<Result<Vec<_>, _>>()?;
                if let Some(group) = self.groups.get_mut(index) {
                    group.skills.extend(skills);
                }
                Ok(())
            }
            None => self.free_list(items),
        }
    }

    /// A top-level list outside any group section.
    fn free_list(&mut self, items: Vec<Item>) -> Result<(), CatalogSourceError> {
        if items.iter().all(|item| item.children.is_empty()) {
            return Ok(()); // prose
        }
        for item in items {
            let (name, purpose) = item.name_and_rest();
            let name = GroupName::new(name).map_err(|e| self.error(item.line, e.to_string()))?;
            if item.children.is_empty() {
                return Err(self.error(item.line, format!("group {name} lists no skill")));
            }
            let skills = item
                .children
                .iter()
                .map(|child| self.skill(child))
                .collect::<Result<Vec<_>, _>>()?;
            self.groups.push(Draft {
                name,
                purpose: purpose.to_owned(),
                skills,
                line: item.line,
            });
        }
        Ok(())
    }

    /// The catalog of the groups read: each must list a skill.
    fn finish(self) -> Result<SkillCatalog, CatalogSourceError> {
        if self.groups.is_empty() {
            return Err(self.error(0, "no group found: write `- group` items with nested `- skill` items, or `## group` headings followed by `- skill` items"));
        }
        let mut groups = Vec::new();
        for draft in self.groups {
            if draft.skills.is_empty() {
                return Err(CatalogSourceError::Malformed {
                    path: self.path.to_path_buf(),
                    line: draft.line,
                    reason: format!("group {} lists no skill", draft.name),
                });
            }
            let purpose = if draft.purpose.is_empty() {
                format!("Skills of the `{}` group.", draft.name)
            } else {
                draft.purpose
            };
            groups.push(SkillGroup::new(draft.name, purpose, draft.skills));
        }
        Ok(SkillCatalog::new(groups)?)
    }
}

fn parse(path: &Path, text: &str) -> Result<SkillCatalog, CatalogSourceError> {
    let mut reader = Reader::new(path, text);
    for (event, range) in Parser::new(text).into_offset_iter() {
        reader.event(event, range.start)?;
    }
    reader.finish()
}

impl SkillCatalog {
    /// Reads a catalog from `SKILL_CATALOG.md` text (see the module documentation for the
    /// shape). A malformed text is a [`CatalogSourceError::Malformed`] naming the line.
    pub fn from_markdown(text: &str) -> Result<Self, CatalogSourceError> {
        parse(Path::new("<memory>"), text)
    }

    /// Reads a catalog from a `SKILL_CATALOG.md` file (at most [`MAX_CATALOG_BYTES`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, CatalogSourceError> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path).map_err(|e| IoError::new("read", path, e))?;
        if meta.len() > MAX_CATALOG_BYTES {
            return Err(CatalogSourceError::Malformed {
                path: PathBuf::from(path),
                line: 0,
                reason: format!("larger than {MAX_CATALOG_BYTES} bytes"),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|e| IoError::new("read", path, e))?;
        parse(path, &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_lists_and_headings_both_read() {
        let text = "# Skill Catalog\n\nIntro prose.\n\n- not a group, just prose\n\nThe groups:\n\n\
                    - `core`: basics\n  - `time-conversion`\n  - tidb-knowledge-base\n\
                    - `data-access`\n  - `clinic-cli`: Clinic\n\n\
                    ## `diagnosis`\n\nPlaybooks for\nthe analyst.\n\n- `tikv-memory`\n- pd-scheduling: PD\n\n\
                    ## Loading rules\n\n- evidence-agent loads core\n";
        let catalog = SkillCatalog::from_markdown(text).unwrap();
        let expected: [(&str, &[&str]); 3] = [
            ("core", &["time-conversion", "tidb-knowledge-base"]),
            ("data-access", &["clinic-cli"]),
            ("diagnosis", &["tikv-memory", "pd-scheduling"]),
        ];
        assert_eq!(catalog.groups().len(), expected.len());
        for (group, (name, skills)) in catalog.groups().iter().zip(expected) {
            assert_eq!(group.name().as_str(), name);
            let read: Vec<&str> = group.skills().iter().map(SkillName::as_str).collect();
            assert_eq!(read, skills);
        }
        assert_eq!(catalog.groups()[0].purpose(), "basics");
        assert_eq!(catalog.groups()[2].purpose(), "Playbooks for the analyst.");
        assert_eq!(
            catalog.groups()[1].purpose(),
            "Skills of the `data-access` group."
        );
    }

    #[test]
    fn malformed_files_name_the_line() {
        for (text, line, needle) in [
            ("# Only a title\n", 0, "no group found"),
            ("- core\n  - Bad_Skill\n", 2, "invalid skill name"),
            ("- Core Group\n  - x\n", 1, "invalid group name"),
            ("- core\n  - a\n- data-access\n", 3, "lists no skill"),
            ("## core\n\nNothing here.\n", 1, "lists no skill"),
            ("## core\n\n- a\n  - b\n", 3, "nested list"),
        ] {
            let err = SkillCatalog::from_markdown(text).unwrap_err();
            match &err {
                CatalogSourceError::Malformed {
                    line: l, reason, ..
                } => {
                    assert_eq!(*l, line, "{text:?}: {err}");
                    assert!(reason.contains(needle), "{text:?}: {err}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }
}
