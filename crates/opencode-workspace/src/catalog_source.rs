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

use crate::catalog::{SkillCatalog, SkillGroup};
use crate::error::WorkspaceError;
use crate::names::{GroupName, SkillName};

/// Largest `SKILL_CATALOG.md` that is read, in bytes.
pub const MAX_CATALOG_BYTES: u64 = 1024 * 1024;

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

struct Reader<'a> {
    path: &'a Path,
    text: &'a str,
    groups: Vec<Draft>,
}

impl Reader<'_> {
    fn error(&self, line: usize, reason: impl Into<String>) -> WorkspaceError {
        WorkspaceError::CatalogSource {
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

    fn skill(&self, item: &Item) -> Result<SkillName, WorkspaceError> {
        let (name, _) = item.name_and_rest();
        if !item.children.is_empty() {
            return Err(self.error(item.line, format!("skill {name:?} has a nested list")));
        }
        SkillName::new(name).map_err(|e| self.error(item.line, e.to_string()))
    }

    /// A top-level list outside any group section.
    fn free_list(&mut self, items: Vec<Item>) -> Result<(), WorkspaceError> {
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

fn parse(path: &Path, text: &str) -> Result<SkillCatalog, WorkspaceError> {
    let mut reader = Reader {
        path,
        text,
        groups: Vec::new(),
    };
    // `Some(index)` while inside a heading-opened group section.
    let mut section: Option<usize> = None;
    let mut capture: Option<Capture> = None;
    // Open list items, innermost last; a finished top-level item goes to `top`.
    let mut stack: Vec<Item> = Vec::new();
    let mut top: Vec<Item> = Vec::new();
    // While inside an item, text goes to its head until its first nested block ends it.
    let mut head_open = false;
    for (event, range) in Parser::new(text).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                capture = Some(Capture::Heading {
                    level,
                    text: String::new(),
                    line: reader.line_of(range.start),
                });
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(Capture::Heading { level, text, line }) = capture.take() {
                    section = None;
                    let name = text.trim();
                    if level != HeadingLevel::H1
                        && let Ok(name) = GroupName::new(name)
                    {
                        reader.groups.push(Draft {
                            name,
                            purpose: String::new(),
                            skills: Vec::new(),
                            line,
                        });
                        section = Some(reader.groups.len() - 1);
                    }
                }
            }
            Event::Start(Tag::Paragraph) if stack.is_empty() => {
                capture = Some(Capture::Paragraph(String::new()));
            }
            Event::End(TagEnd::Paragraph) if stack.is_empty() => {
                if let (Some(Capture::Paragraph(text)), Some(index)) = (capture.take(), section)
                    && let Some(group) = reader.groups.get_mut(index)
                    && group.purpose.is_empty()
                    && group.skills.is_empty()
                {
                    group.purpose = text.split_whitespace().collect::<Vec<_>>().join(" ");
                }
            }
            Event::Start(Tag::Item) => {
                stack.push(Item {
                    line: reader.line_of(range.start),
                    ..Item::default()
                });
                head_open = true;
            }
            Event::Start(Tag::List(_)) | Event::End(TagEnd::Paragraph) | Event::SoftBreak
                if !stack.is_empty() =>
            {
                head_open = false;
            }
            Event::End(TagEnd::Item) => {
                head_open = false;
                let Some(item) = stack.pop() else { continue };
                match stack.last_mut() {
                    Some(parent) => parent.children.push(item),
                    None => top.push(item),
                }
            }
            Event::End(TagEnd::List(_)) if stack.is_empty() => {
                let items = std::mem::take(&mut top);
                match section.and_then(|index| reader.groups.get(index).map(|_| index)) {
                    Some(index) => {
                        let skills = items
                            .iter()
                            .map(|item| reader.skill(item))
                            .collect::<Result<Vec<_>, _>>()?;
                        if let Some(group) = reader.groups.get_mut(index) {
                            group.skills.extend(skills);
                        }
                    }
                    None => reader.free_list(items)?,
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(Capture::Heading { text, .. } | Capture::Paragraph(text)) = &mut capture
                {
                    text.push(' ');
                }
            }
            Event::Text(piece) | Event::Code(piece) => {
                if head_open && let Some(item) = stack.last_mut() {
                    item.head.push_str(&piece);
                } else {
                    match &mut capture {
                        Some(Capture::Heading { text, .. } | Capture::Paragraph(text)) => {
                            text.push_str(&piece);
                        }
                        None => {}
                    }
                }
            }
            _ => {}
        }
    }
    if reader.groups.is_empty() {
        return Err(reader.error(0, "no group found: write `- group` items with nested `- skill` items, or `## group` headings followed by `- skill` items"));
    }
    let mut groups = Vec::new();
    for draft in reader.groups {
        if draft.skills.is_empty() {
            return Err(WorkspaceError::CatalogSource {
                path: path.to_path_buf(),
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
    SkillCatalog::new(groups)
}

impl SkillCatalog {
    /// Reads a catalog from `SKILL_CATALOG.md` text (see the module documentation for the
    /// shape). A malformed text is a [`WorkspaceError::CatalogSource`] naming the line.
    pub fn from_markdown(text: &str) -> Result<Self, WorkspaceError> {
        parse(Path::new("<memory>"), text)
    }

    /// Reads a catalog from a `SKILL_CATALOG.md` file (at most [`MAX_CATALOG_BYTES`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, WorkspaceError> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path).map_err(|e| WorkspaceError::io("read", path, e))?;
        if meta.len() > MAX_CATALOG_BYTES {
            return Err(WorkspaceError::CatalogSource {
                path: PathBuf::from(path),
                line: 0,
                reason: format!("larger than {MAX_CATALOG_BYTES} bytes"),
            });
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| WorkspaceError::io("read", path, e))?;
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
                WorkspaceError::CatalogSource {
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
