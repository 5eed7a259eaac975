use std::collections::BTreeSet;
use std::fmt;
use std::fmt::Write as _;

use crate::error::WorkspaceError;
use crate::names::{AgentRole, GroupName, SkillName};
use crate::skills::SkillsTree;

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

/// Why a catalog does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogProblem {
    /// Two groups share a name.
    DuplicateGroup(GroupName),
    /// A group lists the same skill twice.
    DuplicateSkill {
        /// The group.
        group: GroupName,
        /// The repeated skill.
        skill: SkillName,
    },
    /// One of `core`, `data-access`, `diagnosis` is absent.
    MissingGroup(&'static str),
    /// A default load group of an agent is not in the catalog.
    UnknownDefaultGroup {
        /// The agent.
        role: AgentRole,
        /// The unknown group.
        group: GroupName,
    },
    /// A referenced skill has no folder in the skills tree.
    MissingSkill {
        /// The group that references it.
        group: GroupName,
        /// The skill.
        skill: SkillName,
    },
    /// A referenced skill's `SKILL.md` is missing or its frontmatter is invalid.
    InvalidSkill {
        /// The skill.
        skill: SkillName,
        /// What is wrong.
        reason: String,
    },
    /// A subagent's default load groups yield no skill: its Task calls would carry an empty
    /// required skill list.
    EmptyRequiredSkills(AgentRole),
    /// A `data-access` skill is reachable through the analyst's default groups.
    DataAccessForAnalyst(SkillName),
    /// A `diagnosis` skill is reachable through the evidence agent's default groups.
    DiagnosisForEvidenceAgent(SkillName),
}

impl fmt::Display for CatalogProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateGroup(g) => write!(f, "group {g} appears twice"),
            Self::DuplicateSkill { group, skill } => {
                write!(f, "group {group} lists skill {skill} twice")
            }
            Self::MissingGroup(g) => write!(f, "required group {g} is missing"),
            Self::UnknownDefaultGroup { role, group } => {
                write!(f, "default group {group} of {role} is not in the catalog")
            }
            Self::MissingSkill { group, skill } => write!(
                f,
                "skill {skill} of group {group} does not exist in the skills tree"
            ),
            Self::InvalidSkill { skill, reason } => write!(f, "skill {skill}: {reason}"),
            Self::EmptyRequiredSkills(role) => {
                write!(f, "{role} would get an empty required skill list")
            }
            Self::DataAccessForAnalyst(s) => write!(
                f,
                "data-access skill {s} is in the default load groups of diagnosis-analyst"
            ),
            Self::DiagnosisForEvidenceAgent(s) => write!(
                f,
                "diagnosis skill {s} is in the default load groups of evidence-agent"
            ),
        }
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
    make: impl Fn(&str) -> Result<T, WorkspaceError>,
) -> Result<Vec<T>, WorkspaceError> {
    items.iter().map(|s| make(s)).collect()
}

impl SkillCatalog {
    /// A catalog of `groups` with the standard default load groups: `evidence-agent` loads
    /// `core` + `data-access`, `diagnosis-analyst` loads `core` + `diagnosis`.
    pub fn new(groups: Vec<SkillGroup>) -> Result<Self, WorkspaceError> {
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
    pub fn investibook() -> Result<Self, WorkspaceError> {
        let group =
            |name: &str, purpose: &str, skills: &[&str]| -> Result<SkillGroup, WorkspaceError> {
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

    fn group_skills(&self, name: &str) -> BTreeSet<&SkillName> {
        self.groups
            .iter()
            .filter(|g| g.name.as_str() == name)
            .flat_map(|g| g.skills.iter())
            .collect()
    }

    /// Everything wrong with the catalog against `skills`: every referenced skill must
    /// exist with a valid `SKILL.md`; no `data-access` skill may be reachable from the
    /// analyst's default groups and no `diagnosis` skill from the evidence agent's; no
    /// subagent may end with an empty required skill list.
    pub fn problems(&self, skills: &SkillsTree) -> Vec<CatalogProblem> {
        let mut problems = Vec::new();
        let mut group_names = BTreeSet::new();
        for group in &self.groups {
            if !group_names.insert(group.name.clone()) {
                problems.push(CatalogProblem::DuplicateGroup(group.name.clone()));
            }
            let mut seen = BTreeSet::new();
            for skill in &group.skills {
                if !seen.insert(skill) {
                    problems.push(CatalogProblem::DuplicateSkill {
                        group: group.name.clone(),
                        skill: skill.clone(),
                    });
                }
            }
        }
        for required in [CORE_GROUP, DATA_ACCESS_GROUP, DIAGNOSIS_GROUP] {
            if self.group(required).is_none() {
                problems.push(CatalogProblem::MissingGroup(required));
            }
        }
        for role in AgentRole::SUBAGENTS {
            for group in self.default_groups(role) {
                if self.group(group.as_str()).is_none() {
                    problems.push(CatalogProblem::UnknownDefaultGroup {
                        role,
                        group: group.clone(),
                    });
                }
            }
            if self.default_skills(role).is_empty() {
                problems.push(CatalogProblem::EmptyRequiredSkills(role));
            }
        }
        let mut reported = BTreeSet::new();
        for group in &self.groups {
            for skill in &group.skills {
                match skills.get(skill.as_str()) {
                    None => problems.push(CatalogProblem::MissingSkill {
                        group: group.name.clone(),
                        skill: skill.clone(),
                    }),
                    Some(entry) => {
                        if let Err(reason) = entry.meta()
                            && reported.insert(skill.clone())
                        {
                            problems.push(CatalogProblem::InvalidSkill {
                                skill: skill.clone(),
                                reason: reason.to_owned(),
                            });
                        }
                    }
                }
            }
        }
        let data_access = self.group_skills(DATA_ACCESS_GROUP);
        for skill in self.default_skills(AgentRole::DiagnosisAnalyst) {
            if data_access.contains(&skill) {
                problems.push(CatalogProblem::DataAccessForAnalyst(skill));
            }
        }
        let diagnosis = self.group_skills(DIAGNOSIS_GROUP);
        for skill in self.default_skills(AgentRole::EvidenceAgent) {
            if diagnosis.contains(&skill) {
                problems.push(CatalogProblem::DiagnosisForEvidenceAgent(skill));
            }
        }
        problems
    }

    /// Checks the catalog against `skills`; the error lists every problem.
    pub fn validate(&self, skills: &SkillsTree) -> Result<(), WorkspaceError> {
        let problems = self.problems(skills);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(WorkspaceError::InvalidCatalog(problems))
        }
    }

    /// The read-only `SKILL_CATALOG.md`; descriptions come from the skills tree. Call it on
    /// a validated catalog.
    pub(crate) fn render_markdown(&self, skills: &SkillsTree) -> String {
        let mut out = String::new();
        out.push_str(
            "<!-- Generated by opencode-workspace. Read-only: regenerated from the typed catalog; edits are refused, not merged. -->\n",
        );
        out.push_str("# Investibook Skill Catalog\n\n");
        out.push_str(
            "A read-only index of the skills the Investibook diagnosis agents may load. It is \
             not a skill: it is never placed under `.opencode/skills/` or \
             `.opencode/.all-skills/`, no agent loads it with the skill tool, and its name is \
             not `SKILL.md`. Read it with the read tool.\n\n",
        );
        out.push_str("## Loading rules\n\n");
        out.push_str("| agent | loads by default | may load |\n| --- | --- | --- |\n");
        out.push_str(
            "| `diagnosis-orchestrator` | no skill: reads this catalog and the workspace files | no skill |\n",
        );
        for role in AgentRole::SUBAGENTS {
            let groups = self
                .default_groups(role)
                .iter()
                .map(|g| format!("`{g}`"))
                .collect::<Vec<_>>()
                .join(" + ");
            let _ = writeln!(out, "| `{role}` | {groups} | only the skills of {groups} |");
        }
        out.push('\n');
        out.push_str(
            "- Every Task call to `evidence-agent` or `diagnosis-analyst` names a non-empty list of \
             required skills, taken from that agent's default groups.\n\
             - `diagnosis-analyst` never loads a `data-access` skill; `evidence-agent` never loads \
             a `diagnosis` skill. The agents' `skill` permissions enforce this.\n\
             - Groups that are no agent's default are listed for reference only.\n\n",
        );
        out.push_str("## Groups\n");
        for group in &self.groups {
            let users = AgentRole::SUBAGENTS
                .into_iter()
                .filter(|role| self.default_groups(*role).contains(&group.name))
                .map(|role| format!("`{role}`"))
                .collect::<Vec<_>>();
            let loaded_by = if users.is_empty() {
                "no agent by default".to_owned()
            } else {
                users.join(", ")
            };
            let _ = write!(
                out,
                "\n### `{}`\n\n{}\n\nLoaded by: {loaded_by}.\n\n",
                group.name,
                one_line(&group.purpose)
            );
            for skill in &group.skills {
                let description = skills
                    .get(skill.as_str())
                    .and_then(|e| e.meta().ok())
                    .map(|m| one_line(m.description()))
                    .unwrap_or_default();
                let _ = writeln!(out, "- `{skill}`: {description}");
            }
        }
        out
    }
}

/// Collapses all runs of whitespace to one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(catalog: &SkillCatalog) -> SkillsTree {
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
        SkillsTree::from_texts("mem", texts.iter().map(|(a, b)| (a.as_str(), b.as_str())))
    }

    #[test]
    fn the_investibook_catalog_is_valid_against_a_complete_tree() {
        let catalog = SkillCatalog::investibook().unwrap();
        assert_eq!(catalog.problems(&tree(&catalog)), vec![]);
        assert_eq!(catalog.skills().len(), 19);
    }

    #[test]
    fn a_skill_shared_with_core_leaks_into_the_wrong_agent() {
        let base = SkillCatalog::investibook().unwrap();
        let mut groups = base.groups().to_vec();
        groups[0].skills.push(SkillName::new("jira").unwrap());
        groups[0]
            .skills
            .push(SkillName::new("tikv-memory").unwrap());
        let catalog = SkillCatalog::new(groups).unwrap();
        let problems = catalog.problems(&tree(&catalog));
        assert!(problems.contains(&CatalogProblem::DataAccessForAnalyst(
            SkillName::new("jira").unwrap()
        )));
        assert!(
            problems.contains(&CatalogProblem::DiagnosisForEvidenceAgent(
                SkillName::new("tikv-memory").unwrap()
            ))
        );
    }

    #[test]
    fn markdown_lists_every_skill_and_the_rules() {
        let catalog = SkillCatalog::investibook().unwrap();
        let md = catalog.render_markdown(&tree(&catalog));
        for skill in catalog.skills() {
            assert!(
                md.contains(&format!("- `{skill}`: About {skill}.")),
                "{skill}"
            );
        }
        assert!(md.contains("| `evidence-agent` | `core` + `data-access` |"));
        assert!(md.contains("| `diagnosis-analyst` | `core` + `diagnosis` |"));
    }
}
