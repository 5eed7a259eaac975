//! What is wrong with a skill catalog against a skills tree and the loading rules, and the
//! error that lists it.

use std::collections::BTreeSet;
use std::fmt;

use super::model::{CORE_GROUP, DATA_ACCESS_GROUP, DIAGNOSIS_GROUP, SkillCatalog};
use crate::names::{AgentRole, GroupName, SkillName};
use crate::skills::SkillsTree;

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
    /// A referenced skill is neither in the skills tree nor installed by the workspace.
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
                "skill {skill} of group {group} does not exist in the skills tree or the workspace"
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

/// The skill catalog does not hold against the skills tree or the loading rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// Every problem found, in the order the checks run.
    #[error("invalid skill catalog: {}", join(.0))]
    Invalid(Vec<CatalogProblem>),
}

impl CatalogError {
    /// The problems found.
    pub fn problems(&self) -> &[CatalogProblem] {
        match self {
            Self::Invalid(problems) => problems,
        }
    }
}

fn join(problems: &[CatalogProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl SkillCatalog {
    /// Everything wrong with the catalog against `skills`: every referenced skill must
    /// exist with a valid `SKILL.md`; no `data-access` skill may be reachable from the
    /// analyst's default groups and no `diagnosis` skill from the evidence agent's; no
    /// subagent may end with an empty required skill list.
    pub fn problems(&self, skills: &SkillsTree) -> Vec<CatalogProblem> {
        let mut problems = Vec::new();
        let mut group_names = BTreeSet::new();
        for group in self.groups() {
            if !group_names.insert(group.name().clone()) {
                problems.push(CatalogProblem::DuplicateGroup(group.name().clone()));
            }
            let mut seen = BTreeSet::new();
            for skill in group.skills() {
                if !seen.insert(skill) {
                    problems.push(CatalogProblem::DuplicateSkill {
                        group: group.name().clone(),
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
        for group in self.groups() {
            for skill in group.skills() {
                match skills.get(skill.as_str()) {
                    None => problems.push(CatalogProblem::MissingSkill {
                        group: group.name().clone(),
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
    pub fn validate(&self, skills: &SkillsTree) -> Result<(), CatalogError> {
        let problems = self.problems(skills);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(CatalogError::Invalid(problems))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::{SkillGroup, complete_tree};

    #[test]
    fn the_investibook_catalog_is_valid_against_a_complete_tree() {
        let catalog = SkillCatalog::investibook().unwrap();
        assert_eq!(catalog.problems(&complete_tree(&catalog)), vec![]);
        assert_eq!(catalog.skills().len(), 19);
    }

    #[test]
    fn a_skill_shared_with_core_leaks_into_the_wrong_agent() {
        let base = SkillCatalog::investibook().unwrap();
        let mut groups = base.groups().to_vec();
        let core = &groups[0];
        let mut skills = core.skills().to_vec();
        skills.push(SkillName::new("jira").unwrap());
        skills.push(SkillName::new("tikv-memory").unwrap());
        let widened = SkillGroup::new(core.name().clone(), core.purpose(), skills);
        groups[0] = widened;
        let catalog = SkillCatalog::new(groups).unwrap();
        let problems = catalog.problems(&complete_tree(&catalog));
        assert!(problems.contains(&CatalogProblem::DataAccessForAnalyst(
            SkillName::new("jira").unwrap()
        )));
        assert!(
            problems.contains(&CatalogProblem::DiagnosisForEvidenceAgent(
                SkillName::new("tikv-memory").unwrap()
            ))
        );
    }
}
