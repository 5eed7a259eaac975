//! The skill catalog against the committed fixture skills tree, and the load-group rules.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::fs;

use common::{catalog, fixture_skills, write};
use opencode_workspace::{
    AgentRole, GenerateError, GenerateOptions, Generator, SkillCatalog, SkillsTree, TaskSupport,
    catalog::{
        CORE_GROUP, CatalogProblem, CatalogSourceError, DATA_ACCESS_GROUP, DIAGNOSIS_GROUP,
        SkillGroup,
    },
    layout::CATALOG_PATH,
    names::{GroupName, SkillName},
};
use proptest::prelude::*;

#[test]
fn every_catalog_skill_exists_with_valid_frontmatter() {
    let skills = SkillsTree::load(fixture_skills()).unwrap();
    let catalog = catalog();
    assert_eq!(catalog.problems(&skills), vec![]);
    let names: Vec<&str> = catalog.skills().iter().map(|s| s.as_str()).collect();
    assert_eq!(names.len(), 19);
    for name in names {
        let entry = skills.get(name).unwrap_or_else(|| panic!("{name} missing"));
        let meta = entry.meta().unwrap();
        assert_eq!(meta.name(), name);
        assert_eq!(entry.folder(), name);
        assert!(!meta.description().is_empty());
        assert!(fixture_skills().join(name).join("SKILL.md").is_file());
    }
}

#[test]
fn the_catalog_groups_are_the_plan_groups() {
    let catalog = catalog();
    let groups: Vec<&str> = catalog.groups().iter().map(|g| g.name().as_str()).collect();
    assert_eq!(groups, [CORE_GROUP, DATA_ACCESS_GROUP, DIAGNOSIS_GROUP]);
    let all: Vec<&str> = catalog.skills().iter().map(|s| s.as_str()).collect();
    // Every name the plan lists is either a group or a skill of the catalog.
    for name in [
        "core",
        "time-conversion",
        "tidb-knowledge-base",
        "data-access",
        "clinic-cli",
        "jira",
        "devops",
        "o11y-data",
        "o11y-metrics-api",
        "github-issue-search",
        "diagnosis",
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
    ] {
        assert!(groups.contains(&name) || all.contains(&name), "{name}");
    }
}

#[test]
fn load_groups_follow_the_rules() {
    let catalog = catalog();
    let group = |name: &str| -> BTreeSet<SkillName> {
        catalog
            .group(name)
            .unwrap()
            .skills()
            .iter()
            .cloned()
            .collect()
    };
    let analyst: BTreeSet<SkillName> = catalog
        .default_skills(AgentRole::DiagnosisAnalyst)
        .into_iter()
        .collect();
    let evidence: BTreeSet<SkillName> = catalog
        .default_skills(AgentRole::EvidenceAgent)
        .into_iter()
        .collect();
    assert!(
        analyst.is_disjoint(&group(DATA_ACCESS_GROUP)),
        "data-access in analyst defaults"
    );
    assert!(
        evidence.is_disjoint(&group(DIAGNOSIS_GROUP)),
        "diagnosis in evidence defaults"
    );
    assert!(!analyst.is_empty() && !evidence.is_empty());
    assert!(group(CORE_GROUP).is_subset(&analyst) && group(CORE_GROUP).is_subset(&evidence));
    assert_eq!(
        catalog.default_skills(AgentRole::DiagnosisOrchestrator),
        vec![]
    );
    let names = |role| -> Vec<String> {
        catalog
            .default_groups(role)
            .iter()
            .map(|g| g.to_string())
            .collect()
    };
    assert_eq!(names(AgentRole::EvidenceAgent), ["core", "data-access"]);
    assert_eq!(names(AgentRole::DiagnosisAnalyst), ["core", "diagnosis"]);
}

fn copy_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(fixture_skills()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let text = fs::read_to_string(entry.path().join("SKILL.md")).unwrap();
        write(dir.path(), &format!("{name}/SKILL.md"), &text);
    }
    dir
}

#[test]
fn validation_reports_missing_and_invalid_skills() {
    let dir = copy_fixture();
    fs::remove_dir_all(dir.path().join("jira")).unwrap();
    write(
        dir.path(),
        "devops/SKILL.md",
        "---\nname: dev-ops\ndescription: d\n---\n",
    );
    write(dir.path(), "tikv-memory/SKILL.md", "no frontmatter\n");
    write(
        dir.path(),
        "pd-scheduling/SKILL.md",
        &format!(
            "---\nname: pd-scheduling\ndescription: {}\n---\n",
            "x".repeat(1025)
        ),
    );
    write(
        dir.path(),
        "o11y-data/SKILL.md",
        "---\nname: o11y-data\ndescription: Fetch logs: unquoted colon\n---\n",
    );
    fs::remove_file(dir.path().join("pd-oncall-handbook/SKILL.md")).unwrap();
    let skills = SkillsTree::load(dir.path()).unwrap();
    let err = catalog().validate(&skills).unwrap_err();
    let problems = err.problems();
    let text = err.to_string();
    assert!(problems.contains(&CatalogProblem::MissingSkill {
        group: GroupName::new("data-access").unwrap(),
        skill: SkillName::new("jira").unwrap(),
    }));
    for (skill, needle) in [
        ("devops", "differs from its folder"),
        ("tikv-memory", "does not open with"),
        ("pd-scheduling", "more than 1024"),
        ("o11y-data", "not valid YAML"),
        ("pd-oncall-handbook", "SKILL.md is missing"),
    ] {
        assert!(
            problems.iter().any(|p| matches!(p,
                CatalogProblem::InvalidSkill { skill: s, reason } if s.as_str() == skill && reason.contains(needle))),
            "{skill}: {text}"
        );
    }
    assert_eq!(problems.len(), 6, "{text}");
    // The generator refuses the same tree.
    let generated = Generator::new(&catalog(), &skills, GenerateOptions::default());
    assert!(matches!(generated, Err(GenerateError::Catalog(_))));
}

#[test]
fn validation_refuses_broken_load_groups() {
    let skills = SkillsTree::load(fixture_skills()).unwrap();
    let group = |n: &str| GroupName::new(n).unwrap();

    let analyst_with_data = catalog().with_default_groups(
        AgentRole::DiagnosisAnalyst,
        vec![group("core"), group("diagnosis"), group("data-access")],
    );
    let problems = analyst_with_data.problems(&skills);
    assert_eq!(problems.len(), 6, "{problems:?}");
    assert!(
        problems
            .iter()
            .all(|p| matches!(p, CatalogProblem::DataAccessForAnalyst(_)))
    );

    let evidence_with_diagnosis =
        catalog().with_default_groups(AgentRole::EvidenceAgent, vec![group("diagnosis")]);
    let problems = evidence_with_diagnosis.problems(&skills);
    assert_eq!(problems.len(), 11, "{problems:?}");

    let empty = SkillCatalog::new(vec![
        SkillGroup::new(group("core"), "c", vec![]),
        SkillGroup::new(group("data-access"), "d", vec![]),
        SkillGroup::new(
            group("diagnosis"),
            "g",
            vec![SkillName::new("tikv-memory").unwrap()],
        ),
    ])
    .unwrap();
    assert_eq!(
        empty.problems(&skills),
        vec![CatalogProblem::EmptyRequiredSkills(
            AgentRole::EvidenceAgent
        )]
    );

    let unknown = catalog().with_default_groups(AgentRole::EvidenceAgent, vec![group("nope")]);
    let problems = unknown.problems(&skills);
    assert!(problems.contains(&CatalogProblem::UnknownDefaultGroup {
        role: AgentRole::EvidenceAgent,
        group: group("nope"),
    }));
    assert!(problems.contains(&CatalogProblem::EmptyRequiredSkills(
        AgentRole::EvidenceAgent
    )));

    let missing_group = SkillCatalog::new(vec![catalog().groups()[0].clone()]).unwrap();
    let problems = missing_group.problems(&skills);
    assert!(problems.contains(&CatalogProblem::MissingGroup(DIAGNOSIS_GROUP)));
}

#[test]
fn the_rendered_catalog_is_a_read_only_index() {
    let dir = tempfile::tempdir().unwrap();
    common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap();
    let text = fs::read_to_string(dir.path().join(CATALOG_PATH)).unwrap();
    assert!(text.contains("read-only index"));
    assert!(text.contains("It is not a skill"));
    assert!(
        !text.starts_with("---"),
        "must not look like a skill frontmatter"
    );
    for skill in catalog().skills() {
        assert!(text.contains(&format!("- `{skill}`: ")), "{skill}");
    }
    assert!(text.contains("| `evidence-agent` | `core` + `data-access` |"));
    assert!(text.contains("| `diagnosis-analyst` | `core` + `diagnosis` |"));
    assert!(text.contains("Read the Jira ticket of the incident: description"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The validator reports a data-access skill for the analyst exactly when one is
    /// reachable from the analyst's default groups, and likewise for diagnosis skills and
    /// the evidence agent.
    #[test]
    fn leak_detection_is_exact(placement in prop::collection::vec(0u8..8, 19)) {
        let skills = SkillsTree::load(fixture_skills()).unwrap();
        let base = catalog();
        let all: Vec<SkillName> = base.skills().into_iter().cloned().collect();
        // Each bit of `placement` puts the skill in core (1), data-access (2), diagnosis (4).
        let mut members: [Vec<SkillName>; 3] = Default::default();
        for (skill, bits) in all.iter().zip(&placement) {
            for (i, group) in members.iter_mut().enumerate() {
                if bits & (1 << i) != 0 {
                    group.push(skill.clone());
                }
            }
        }
        let names = [CORE_GROUP, DATA_ACCESS_GROUP, DIAGNOSIS_GROUP];
        let groups = names
            .iter()
            .zip(members.clone())
            .map(|(n, s)| SkillGroup::new(GroupName::new(*n).unwrap(), "p", s))
            .collect();
        let catalog = SkillCatalog::new(groups).unwrap();
        let problems = catalog.problems(&skills);
        let set = |i: usize| members[i].iter().cloned().collect::<BTreeSet<_>>();
        let (core, data, diag) = (set(0), set(1), set(2));
        let analyst: BTreeSet<_> = core.union(&diag).cloned().collect();
        let evidence: BTreeSet<_> = core.union(&data).cloned().collect();
        for skill in &all {
            let leak_analyst = data.contains(skill) && analyst.contains(skill);
            let leak_evidence = diag.contains(skill) && evidence.contains(skill);
            prop_assert_eq!(
                problems.contains(&CatalogProblem::DataAccessForAnalyst(skill.clone())),
                leak_analyst
            );
            prop_assert_eq!(
                problems.contains(&CatalogProblem::DiagnosisForEvidenceAgent(skill.clone())),
                leak_evidence
            );
        }
        prop_assert_eq!(
            problems.contains(&CatalogProblem::EmptyRequiredSkills(AgentRole::DiagnosisAnalyst)),
            analyst.is_empty()
        );
        prop_assert_eq!(
            problems.contains(&CatalogProblem::EmptyRequiredSkills(AgentRole::EvidenceAgent)),
            evidence.is_empty()
        );
        if problems.is_empty() {
            let generator = Generator::new(&catalog, &skills, GenerateOptions::default());
            prop_assert!(generator.is_ok());
        }
    }
}

fn group_names(catalog: &SkillCatalog) -> Vec<(String, Vec<String>)> {
    catalog
        .groups()
        .iter()
        .map(|g| {
            (
                g.name().to_string(),
                g.skills().iter().map(ToString::to_string).collect(),
            )
        })
        .collect()
}

#[test]
fn the_seed_shaped_source_file_reads_as_the_built_in_catalog() {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agentkit/config/SKILL_CATALOG.md");
    let loaded = SkillCatalog::load(&source).unwrap();
    let built_in = SkillCatalog::investibook().unwrap();
    assert_eq!(group_names(&loaded), group_names(&built_in));
    assert_eq!(
        loaded.default_skills(AgentRole::EvidenceAgent),
        built_in.default_skills(AgentRole::EvidenceAgent)
    );
    let skills = SkillsTree::load(common::fixture_skills()).unwrap();
    loaded.validate(&skills).unwrap();
    let dir = tempfile::tempdir().unwrap();
    Generator::new(&loaded, &skills, GenerateOptions::default())
        .unwrap()
        .write(dir.path())
        .unwrap();
    // The catalog the generator writes reads back to the same groups.
    let written = SkillCatalog::load(dir.path().join(CATALOG_PATH)).unwrap();
    assert_eq!(group_names(&written), group_names(&built_in));
}

#[test]
fn a_malformed_source_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("SKILL_CATALOG.md");
    std::fs::write(&path, "# Catalog\n\n- `core`\n  - `Time Conversion`\n").unwrap();
    let err = SkillCatalog::load(&path).unwrap_err();
    assert!(
        matches!(&err, CatalogSourceError::Malformed { line: 4, .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("SKILL_CATALOG.md"), "{message}");
    assert!(message.contains("line 4"), "{message}");
    // A well-formed file whose groups break the loading rules is refused by validation.
    std::fs::write(
        &path,
        "- core\n  - jira\n- data-access\n  - jira\n- diagnosis\n  - tikv-memory\n",
    )
    .unwrap();
    let catalog = SkillCatalog::load(&path).unwrap();
    let skills = SkillsTree::load(common::fixture_skills()).unwrap();
    assert!(
        catalog
            .problems(&skills)
            .contains(&CatalogProblem::DataAccessForAnalyst(
                SkillName::new("jira").unwrap()
            ))
    );
    assert!(matches!(
        SkillCatalog::load(dir.path().join("missing.md")),
        Err(CatalogSourceError::Io(_))
    ));
}
