//! Skills the workspace installs itself, such as the transport skill
//! `managed-evidence-tools` that explains the managed evidence tools to the evidence agent.
//! Each is a `SKILL.md` written to `.opencode/skill/<name>/SKILL.md`, where OpenCode finds
//! project skills (the user's `.opencode/skills` flow is left alone), and joins a catalog
//! group, so that the agents' skill permissions follow the group: a `data-access` skill is
//! allowed to the evidence agent and denied to the analyst.

use super::error::GenerateError;
use crate::layout::WORKSPACE_SKILLS_DIR;
use crate::names::{GroupName, SkillName};
use crate::skills::SkillMeta;

/// A skill the generator installs in the workspace, in a catalog group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceSkill {
    name: SkillName,
    group: GroupName,
    text: String,
}

impl WorkspaceSkill {
    /// The skill `name` of `group` with the `SKILL.md` text `text`, whose frontmatter must
    /// name it (see [`SkillMeta::parse`]).
    pub fn new(name: &str, group: &str, text: impl Into<String>) -> Result<Self, GenerateError> {
        let text = text.into();
        let invalid = |reason: String| GenerateError::InvalidOption {
            option: "workspace skill",
            reason,
        };
        let name = SkillName::new(name).map_err(|e| invalid(e.to_string()))?;
        let group = GroupName::new(group).map_err(|e| invalid(e.to_string()))?;
        SkillMeta::parse(name.as_str(), &text).map_err(|e| invalid(format!("{name}: {e}")))?;
        Ok(Self { name, group, text })
    }

    /// The skill's name.
    pub fn name(&self) -> &SkillName {
        &self.name
    }

    /// The catalog group it joins.
    pub fn group(&self) -> &GroupName {
        &self.group
    }

    /// The `SKILL.md` text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its folder, workspace-relative.
    pub fn folder(&self) -> String {
        format!("{WORKSPACE_SKILLS_DIR}/{}", self.name)
    }

    /// Its `SKILL.md`, workspace-relative.
    pub fn path(&self) -> String {
        format!("{}/SKILL.md", self.folder())
    }
}
