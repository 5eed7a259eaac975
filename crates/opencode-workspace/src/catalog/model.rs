//! The typed skill catalog: groups of skills and the default load groups of the two
//! subagents. What is wrong with a catalog is the checker's business (`checker.rs`), how it
//! reads as Markdown the renderer's (`render.rs`), reading one from a file the source
//! reader's (`source.rs`).

use std::collections::BTreeSet;

use crate::names::{AgentRole, GroupName, NameError, SkillName};

/// The group every subagent loads.
pub const CORE_GROUP: &str = "core";
/// The group of evidence-source skills, loaded only by `evidence-agent`.
pub const DATA_ACCESS_GROUP: &str = "data-access";
/// The group of diagnosis skills, loaded only by `diagnosis-analyst`.
pub const DIAGNOSIS_GROUP: &str = "diagnosis";

/// One group of the skill catalog: a name, what it is for, and its skills in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillGroup {
    name: GroupName,
    purpose: String,
    skills: Vec<SkillName>,
}

impl SkillGroup {
    /// A group; `purpose` is one sentence shown in the catalog.
    pub fn new(name: GroupName, purpose: impl Into<String>, skills: Vec<SkillName>) -> Self {
        Self {
            name,
            purpose: purpose.into(),
            skills,
        }
    }

    /// The group's name.
    pub fn name(&self) -> &GroupName {
        &self.name
    }

    /// What the group is for.
    pub fn purpose(&self) -> &str {
        &self.purpose
    }

    /// The group's skills, in catalog order.
    pub fn skills(&self) -> &[SkillName] {
        &self.skills
    }
}

/// The typed skill catalog: groups of skills plus the default load groups of the two
/// subagents. The orchestrator loads no skill; it reads the catalog and workspace files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillCatalog {
    groups: Vec<SkillGroup>,
    evidence_defaults: Vec<GroupName>,
    analyst_defaults: Vec<GroupName>,
}

fn names<T>(
    items: &[&str],
    make: impl Fn(&str) -> Result<T, NameError>,
) -> Result<Vec<T>, NameError> {
    items.iter().map(|s| make(s)).collect()
}

impl SkillCatalog {
    /// A catalog of `groups` with the standard default load groups: `evidence-agent` loads
    /// `core` + `data-access`, `diagnosis-analyst` loads `core` + `diagnosis`.
    pub fn new(groups: Vec<SkillGroup>) -> Result<Self, NameError> {
        Ok(Self {
            groups,
            evidence_defaults: names(&[CORE_GROUP, DATA_ACCESS_GROUP], |s| GroupName::new(s))?,
            analyst_defaults: names(&[CORE_GROUP, DIAGNOSIS_GROUP], |s| GroupName::new(s))?,
        })
    }

    /// Replaces the default load groups of a subagent (the orchestrator has none and is
    /// left unchanged). Validation refuses groups that break the loading rules.
    pub fn with_default_groups(mut self, role: AgentRole, groups: Vec<GroupName>) -> Self {
        match role {
            AgentRole::EvidenceAgent => self.evidence_defaults = groups,
            AgentRole::DiagnosisAnalyst => self.analyst_defaults = groups,
            AgentRole::DiagnosisOrchestrator => {}
        }
        self
    }

    /// The Investibook catalog from the plan: `core`, `data-access` and `diagnosis`.
    pub fn investibook() -> Result<Self, NameError> {
        let group = |name: &str, purpose: &str, skills: &[&str]| -> Result<SkillGroup, NameError> {
            Ok(SkillGroup::new(
                GroupName::new(name)?,
                purpose,
                names(skills, |s| SkillName::new(s))?,
            ))
        };
        Self::new(vec![
            group(
                CORE_GROUP,
                "Basics every subagent loads: time conversion and the TiDB knowledge base.",
                &["time-conversion", "tidb-knowledge-base"],
            )?,
            group(
                DATA_ACCESS_GROUP,
                "Evidence sources, loaded only by evidence-agent: Clinic, Jira, DevOps, O11Y data and metrics, GitHub issues.",
                &[
                    "clinic-cli",
                    "jira",
                    "devops",
                    "o11y-data",
                    "o11y-metrics-api",
                    "github-issue-search",
                ],
            )?,
            group(
                DIAGNOSIS_GROUP,
                "Diagnosis playbooks, loaded only by diagnosis-analyst: TiDB, TiKV, PD, transactions, TiCDC and the autoscaler.",
                &[
                    "tidb-clinic-diagnosis",
                    "tidb-query-tuning",
                    "tikv-fast-tune",
                    "tikv-performance",
                    "tikv-memory",
                    "pd-oncall-handbook",
                    "pd-scheduling",
                    "pd-resource-control",
                    "transaction-oncall-handbook",
                    "ticdc-health-inspection",
                    "autoscaler-dashboard",
                ],
            )?,
        ])
    }

    /// The catalog with `skill` added to the group `group` (when that group exists and
    /// does not list it yet).
    pub fn with_skill_in(mut self, group: &GroupName, skill: &SkillName) -> Self {
        if let Some(target) = self.groups.iter_mut().find(|g| &g.name == group)
            && !target.skills.contains(skill)
        {
            target.skills.push(skill.clone());
        }
        self
    }

    /// All groups, in catalog order.
    pub fn groups(&self) -> &[SkillGroup] {
        &self.groups
    }

    /// The group named `name`.
    pub fn group(&self, name: &str) -> Option<&SkillGroup> {
        self.groups.iter().find(|g| g.name.as_str() == name)
    }

    /// The default load groups of `role` (empty for the orchestrator).
    pub fn default_groups(&self, role: AgentRole) -> &[GroupName] {
        match role {
            AgentRole::DiagnosisOrchestrator => &[],
            AgentRole::EvidenceAgent => &self.evidence_defaults,
            AgentRole::DiagnosisAnalyst => &self.analyst_defaults,
        }
    }

    /// The skills `role` loads by default, which are also the only skills it may load:
    /// the skills of its default groups, without repeats, in catalog order.
    pub fn default_skills(&self, role: AgentRole) -> Vec<SkillName> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for group_name in self.default_groups(role) {
            for group in self.groups.iter().filter(|g| &g.name == group_name) {
                for skill in &group.skills {
                    if seen.insert(skill.clone()) {
                        out.push(skill.clone());
                    }
                }
            }
        }
        out
    }

    /// Every skill the catalog references, without repeats, in catalog order.
    pub fn skills(&self) -> Vec<&SkillName> {
        let mut seen = BTreeSet::new();
        self.groups
            .iter()
            .flat_map(|g| g.skills.iter())
            .filter(|s| seen.insert(*s))
            .collect()
    }

    /// The skills of the groups named `name`.
    pub(super) fn group_skills(&self, name: &str) -> BTreeSet<&SkillName> {
        self.groups
            .iter()
            .filter(|g| g.name.as_str() == name)
            .flat_map(|g| g.skills.iter())
            .collect()
    }
}

/// A skills tree in memory holding every skill of a catalog with a valid `SKILL.md`.
#[cfg(test)]
pub(crate) fn complete_tree(catalog: &SkillCatalog) -> crate::skills::SkillsTree {
    let texts: Vec<(String, String)> = catalog
        .skills()
        .into_iter()
        .map(|s| {
            (
                s.to_string(),
                format!("---\nname: {s}\ndescription: About {s}.\n---\n"),
            )
        })
        .collect();
    crate::skills::SkillsTree::from_texts(
        "mem",
        texts.iter().map(|(a, b)| (a.as_str(), b.as_str())),
    )
}
