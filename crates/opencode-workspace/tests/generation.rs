//! Workspace generation: files, skill discovery paths, idempotence, merging, conflicts,
//! fallback, and never deleting a user's file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;
use std::path::Path;

use common::{Node, contents, generator, snapshot, write};
use opencode_workspace::{
    CheckError, FileChange, GenerateError, GenerateOptions, Generator, Mode, OpenCodeConfig,
    Placement, SkillCatalog, SkillsTree, TaskSupport, WorkspaceSkill,
    catalog::{CatalogProblem, SkillGroup},
    check_placement,
    config::config_problems_at,
    layout::{
        CATALOG_PATH, CONFIG_PATH, CONFIG_SCHEMA_URL, EVIDENCE_AGENT_OUTPUT, EVIDENCE_SCHEMA_PATH,
        INVESTIBOOK_DIR, MANIFEST_PATH, REPORT_PATH, SKILL_DISCOVERY_DIRS,
    },
    names::{FALLBACK_AGENT, SkillName},
    protocol::{FALLBACK_NOTICE, FALLBACK_PROTOCOL_TITLE, PROTOCOL_TITLE},
};
use proptest::prelude::*;

#[test]
fn files_exist_after_initialization() {
    let dir = tempfile::tempdir().unwrap();
    let report = generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap();
    assert_eq!(report.mode, Mode::MultiAgent);
    assert_eq!(report.notice(), None);
    for path in [
        ".opencode/opencode.json",
        ".opencode/investibook/SKILL_CATALOG.md",
        ".opencode/investibook/schemas/evidence-agent-output.schema.json",
        ".opencode/investibook/schemas/diagnosis-analyst-output.schema.json",
        ".opencode/investibook/agents/diagnosis-orchestrator.md",
        ".opencode/investibook/agents/evidence-agent.md",
        ".opencode/investibook/agents/diagnosis-analyst.md",
        MANIFEST_PATH,
    ] {
        assert!(dir.path().join(path).is_file(), "{path} missing");
    }
    assert!(dir.path().join("evidences").is_dir());
    assert!(dir.path().join("evidences/agent-runs").is_dir());
    // The report artifact and child outputs are the agents' to write; their absence keeps
    // the frontend's artifact detection as it was.
    assert!(!dir.path().join(REPORT_PATH).exists());
    assert!(!dir.path().join(EVIDENCE_AGENT_OUTPUT).exists());
    for (path, change) in &report.files {
        assert_eq!(*change, FileChange::Created, "{path}");
    }
    assert_eq!(report.files.len(), 7);
}

#[test]
fn catalog_is_not_under_skill_discovery_paths() {
    let dir = tempfile::tempdir().unwrap();
    let generator = generator(TaskSupport::PromptList);
    generator.write(dir.path()).unwrap();
    for discovery in SKILL_DISCOVERY_DIRS {
        assert!(
            !dir.path().join(discovery).exists(),
            "{discovery} was created"
        );
        assert!(!CATALOG_PATH.starts_with(discovery));
    }
    for file in generator.files() {
        assert!(!file.path().ends_with("SKILL.md"), "{}", file.path());
        for discovery in SKILL_DISCOVERY_DIRS {
            assert!(!file.path().starts_with(discovery), "{}", file.path());
        }
    }
    let snap = snapshot(dir.path());
    assert!(snap.keys().all(|p| !p.ends_with("SKILL.md")), "{snap:?}");
}

fn seed_skill_flow(root: &Path) {
    write(
        root,
        ".opencode/.all-skills/jira/SKILL.md",
        "---\nname: jira\ndescription: d\n---\n",
    );
    write(
        root,
        ".opencode/.all-skills/devops/SKILL.md",
        "---\nname: devops\ndescription: d\n---\n",
    );
    write(
        root,
        ".opencode/.all-skills/devops/scripts/run.sh",
        "#!/bin/sh\necho devops\n",
    );
    write(
        root,
        ".opencode/skills/jira/SKILL.md",
        "---\nname: jira\ndescription: enabled copy\n---\n",
    );
    write(root, ".opencode/skills/.disabled", "devops\n");
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        "../.all-skills/devops",
        root.join(".opencode/skills/devops"),
    )
    .unwrap();
}

#[test]
fn existing_skill_flow_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    seed_skill_flow(dir.path());
    let skill_paths = |snap: &std::collections::BTreeMap<String, Node>| {
        snap.iter()
            .filter(|(p, _)| SKILL_DISCOVERY_DIRS.iter().any(|d| p.starts_with(d)))
            .map(|(p, n)| (p.clone(), n.clone()))
            .collect::<Vec<_>>()
    };
    let before = skill_paths(&snapshot(dir.path()));
    assert!(before.len() >= 8, "{before:?}");
    let generator = generator(TaskSupport::PromptList);
    generator.write(dir.path()).unwrap();
    assert_eq!(skill_paths(&snapshot(dir.path())), before);
    generator.write(dir.path()).unwrap();
    common::generator(TaskSupport::Unavailable)
        .write(dir.path())
        .unwrap();
    // Same bytes, same modification times, same modes, same links.
    assert_eq!(skill_paths(&snapshot(dir.path())), before);
}

#[test]
fn regeneration_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let generator = generator(TaskSupport::PromptList);
    generator.write(dir.path()).unwrap();
    let first = snapshot(dir.path());
    let report = generator.write(dir.path()).unwrap();
    assert!(report.is_unchanged(), "{report:?}");
    assert_eq!(
        snapshot(dir.path()),
        first,
        "second run changed bytes or times"
    );

    // Deterministic across workspaces at the same placement and generator instances too.
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let root = Placement::worktree_root();
    generator.write_at(one.path(), &root).unwrap();
    common::generator(TaskSupport::PromptList)
        .write_at(two.path(), &root)
        .unwrap();
    assert_eq!(
        contents(&snapshot(one.path())),
        contents(&snapshot(two.path()))
    );
}

const USER_CONFIG: &str = r#"{
  "model": "anthropic/claude-sonnet-4-5",
  "permission": {
    "*": "ask",
    "$HOME/projects/*": "allow",
    "bash": "allow"
  },
  "mcp": {
    "managed_auto_oncall_clinic": { "type": "local", "command": ["clinic-tool"] }
  },
  "agent": {
    "reviewer": { "description": "Reviews", "mode": "subagent", "temperature": 0.1 },
    "evidence-agent": { "description": "stale", "mode": "all" }
  },
  "default_agent": "evidence-agent"
}
"#;

#[test]
fn existing_opencode_json_is_merged_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), CONFIG_PATH, USER_CONFIG);
    let generator = generator(TaskSupport::PromptList);
    let report = generator.write(dir.path()).unwrap();
    assert!(
        report
            .files
            .contains(&(CONFIG_PATH.to_owned(), FileChange::Updated))
    );
    let text = fs::read_to_string(dir.path().join(CONFIG_PATH)).unwrap();

    // User keys keep their values and their order; `$schema` comes first.
    let keys: Vec<&str> = [
        "\"$schema\"",
        "\"model\"",
        "\"permission\"",
        "\"mcp\"",
        "\"default_agent\"",
        "\"agent\"",
    ]
    .into_iter()
    .collect();
    let positions: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
    let star = text.find("\"*\": \"ask\"").unwrap();
    let home = text.find("\"$HOME/projects/*\": \"allow\"").unwrap();
    assert!(star < home, "user permission order changed");
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["model"], "anthropic/claude-sonnet-4-5");
    assert_eq!(
        value["mcp"]["managed_auto_oncall_clinic"]["command"][0],
        "clinic-tool"
    );
    assert_eq!(value["agent"]["reviewer"]["temperature"], 0.1);
    assert_eq!(value["default_agent"], "diagnosis-orchestrator");
    assert_eq!(value["$schema"], CONFIG_SCHEMA_URL);
    // The reserved agent is replaced by the generated one.
    assert_eq!(value["agent"]["evidence-agent"]["mode"], "subagent");

    let config = OpenCodeConfig::parse(&text).unwrap();
    assert_eq!(
        config_problems_at(
            &config,
            &common::catalog(),
            TaskSupport::PromptList,
            &report.placement
        ),
        vec![]
    );
    assert!(generator.write(dir.path()).unwrap().is_unchanged());
}

#[test]
fn a_default_agent_the_user_chose_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let user = USER_CONFIG.replace(
        "\"default_agent\": \"evidence-agent\"",
        "\"default_agent\": \"build\"",
    );
    write(dir.path(), CONFIG_PATH, &user);
    let before = snapshot(dir.path());
    let err = generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap_err();
    match &err {
        GenerateError::DefaultAgentConflict {
            existing,
            generated,
        } => {
            assert_eq!(existing, "build");
            assert_eq!(generated, "diagnosis-orchestrator");
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("\"build\""), "{err}");
    assert_eq!(snapshot(dir.path()), before, "something was written");
}

#[test]
fn an_edited_generated_file_is_a_conflict_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap();
    let prompt = ".opencode/investibook/agents/evidence-agent.md";
    write(dir.path(), prompt, "my own prompt\n");
    let before = snapshot(dir.path());
    // A different mode would rewrite the orchestrator prompt, but the edit blocks all writes.
    let err = common::generator(TaskSupport::LoadSkillsArgument)
        .write(dir.path())
        .unwrap_err();
    match &err {
        GenerateError::Conflict(paths) => {
            assert_eq!(paths, &vec![dir.path().join(prompt)]);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("evidence-agent.md"));
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_user_file_at_a_generated_path_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), CATALOG_PATH, "user notes\n");
    let err = common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap_err();
    assert!(matches!(err, GenerateError::Conflict(_)), "{err:?}");
    assert_eq!(
        fs::read_to_string(dir.path().join(CATALOG_PATH)).unwrap(),
        "user notes\n"
    );
    assert!(!dir.path().join(CONFIG_PATH).exists());
}

#[test]
fn unedited_own_files_are_updated() {
    let dir = tempfile::tempdir().unwrap();
    common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap();
    let report = common::generator(TaskSupport::LoadSkillsArgument)
        .write(dir.path())
        .unwrap();
    let orchestrator = ".opencode/investibook/agents/diagnosis-orchestrator.md";
    for (path, change) in &report.files {
        let expected = if path == orchestrator {
            FileChange::Updated
        } else {
            FileChange::Unchanged
        };
        assert_eq!(*change, expected, "{path}");
    }
    let text = fs::read_to_string(dir.path().join(orchestrator)).unwrap();
    assert!(text.contains("`load_skills`"));
}

#[test]
fn fallback_is_one_agent_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap();
    let generator = common::generator(TaskSupport::Unavailable);
    assert_eq!(generator.mode(), Mode::SingleAgentFallback);
    let report = generator.write(dir.path()).unwrap();
    assert_eq!(report.notice(), Some(FALLBACK_NOTICE));
    assert!(FALLBACK_NOTICE.contains("Multi-agent diagnosis is not in effect"));

    let text = fs::read_to_string(dir.path().join(CONFIG_PATH)).unwrap();
    let config = OpenCodeConfig::parse(&text).unwrap();
    assert_eq!(
        config.agent_names().collect::<Vec<_>>(),
        vec![FALLBACK_AGENT]
    );
    assert_eq!(config.default_agent.as_deref(), Some(FALLBACK_AGENT));
    assert_eq!(
        config_problems_at(
            &config,
            &common::catalog(),
            TaskSupport::Unavailable,
            &report.placement
        ),
        vec![]
    );
    let prompt = fs::read_to_string(
        dir.path()
            .join(".opencode/investibook/agents/investibook-diagnosis.md"),
    )
    .unwrap();
    assert!(prompt.contains(FALLBACK_NOTICE));
    assert!(prompt.contains(FALLBACK_PROTOCOL_TITLE));
    assert!(!prompt.contains(PROTOCOL_TITLE));

    // Files of the three-agent mode are left in place, never deleted.
    for old in [
        ".opencode/investibook/agents/evidence-agent.md",
        EVIDENCE_SCHEMA_PATH,
    ] {
        assert!(dir.path().join(old).is_file(), "{old} deleted");
        assert!(report.stale.contains(&old.to_owned()), "{old}");
    }
    assert!(generator.write(dir.path()).unwrap().is_unchanged());
    // And back: the three agents return, the fallback agent leaves the configuration.
    let back = common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap();
    let text = fs::read_to_string(dir.path().join(CONFIG_PATH)).unwrap();
    let config = OpenCodeConfig::parse(&text).unwrap();
    assert_eq!(
        config_problems_at(
            &config,
            &common::catalog(),
            TaskSupport::PromptList,
            &back.placement
        ),
        vec![]
    );
}

#[test]
fn unreadable_config_stops_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        CONFIG_PATH,
        "{ // jsonc comment\n \"model\": \"x\" }\n",
    );
    let err = common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap_err();
    assert!(matches!(err, GenerateError::Unreadable { .. }), "{err:?}");
    assert!(!dir.path().join(INVESTIBOOK_DIR).exists());
}

#[cfg(unix)]
#[test]
fn refuses_to_write_through_symbolic_links() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join(".opencode")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join(INVESTIBOOK_DIR)).unwrap();
    let err = common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap_err();
    assert!(matches!(err, GenerateError::UnsafePath { .. }), "{err:?}");
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn a_tampered_manifest_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        MANIFEST_PATH,
        "{\"generator\":\"someone-else\",\"files\":{}}",
    );
    let err = common::generator(TaskSupport::PromptList)
        .write(dir.path())
        .unwrap_err();
    assert!(matches!(err, GenerateError::Unreadable { .. }), "{err:?}");
}

fn user_path() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        Just(".opencode".to_owned()),
        Just("investibook".to_owned()),
        Just("evidences".to_owned()),
        Just("agent-runs".to_owned()),
        Just("agents".to_owned()),
        Just("skills".to_owned()),
        Just(".all-skills".to_owned()),
        "[a-z]{1,6}(\\.json|\\.md)?",
    ];
    prop_oneof![
        4 => prop::collection::vec(segment, 1..5).prop_map(|parts| parts.join("/")),
        1 => prop_oneof![
            Just(CATALOG_PATH.to_owned()),
            Just(".opencode/investibook/agents/evidence-agent.md".to_owned()),
            Just(".opencode/investibook/agents/investibook-diagnosis.md".to_owned()),
            Just(EVIDENCE_SCHEMA_PATH.to_owned()),
            Just(MANIFEST_PATH.to_owned()),
            Just(REPORT_PATH.to_owned()),
            Just(EVIDENCE_AGENT_OUTPUT.to_owned()),
        ],
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever a user has in the workspace, generation and regeneration leave every one of
    /// their files in place with the same bytes (or stop with a conflict, writing nothing).
    #[test]
    fn never_deletes_or_changes_a_user_file(
        files in prop::collection::btree_map(user_path(), "[ -~]{0,40}", 0..12),
        support in prop_oneof![Just(TaskSupport::PromptList), Just(TaskSupport::Unavailable)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut written = Vec::new();
        for (path, text) in &files {
            let full = dir.path().join(path);
            // Skip paths that collide with an earlier file or folder.
            if full.exists() || full.ancestors().skip(1).any(|a| a.is_file()) {
                continue;
            }
            if path == CONFIG_PATH {
                continue; // merged on purpose; covered by its own test
            }
            write(dir.path(), path, text);
            written.push((path.clone(), text.clone()));
        }
        let before = snapshot(dir.path());
        let generator = common::generator(support);
        match generator.write(dir.path()) {
            Ok(_) => {
                for (path, text) in &written {
                    let now = fs::read_to_string(dir.path().join(path)).ok();
                    prop_assert_eq!(now.as_deref(), Some(text.as_str()), "{}", path);
                }
                prop_assert!(generator.write(dir.path()).unwrap().is_unchanged());
            }
            Err(
                GenerateError::Conflict(_)
                | GenerateError::UnsafePath { .. }
                | GenerateError::Unreadable { .. },
            ) => {
                prop_assert_eq!(snapshot(dir.path()), before);
            }
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
    }
}

#[test]
fn the_placement_check_reads_what_generation_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let err = check_placement(&ws).unwrap_err();
    assert!(matches!(err, CheckError::NotGenerated { .. }), "{err:?}");

    // Patterns written for another placement are what a moved workspace carries.
    let elsewhere = Placement::new("somewhere/else").unwrap();
    generator(TaskSupport::PromptList)
        .write_at(&ws, &elsewhere)
        .unwrap();
    let err = check_placement(&ws).unwrap_err();
    match &err {
        CheckError::Moved {
            recorded,
            recorded_worktree,
            current,
            ..
        } => {
            assert_eq!(recorded, "somewhere/else");
            assert_eq!(
                recorded_worktree.as_deref(),
                ws.parent().and_then(Path::parent),
                "two folders up from the workspace"
            );
            assert_eq!(current, Placement::detect(&ws).unwrap().relative());
        }
        other => panic!("expected Moved, got {other:?}"),
    }
    assert!(err.to_string().contains("regenerate"), "{err}");

    let report = generator(TaskSupport::PromptList).write(&ws).unwrap();
    let checked = check_placement(&ws).unwrap();
    assert_eq!(checked.placement, report.placement);
    let recorded: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(ws.join(MANIFEST_PATH)).unwrap()).unwrap();
    assert_eq!(
        ws.join(recorded["worktree"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        checked.worktree.path().canonicalize().unwrap()
    );

    // A manifest of an older version records no placement.
    let mut older = recorded.clone();
    let object = older.as_object_mut().unwrap();
    object.remove("worktree");
    object.remove("placement");
    write(&ws, MANIFEST_PATH, &older.to_string());
    let err = check_placement(&ws).unwrap_err();
    assert!(matches!(err, CheckError::NotRecorded { .. }), "{err:?}");
    assert!(err.to_string().contains("regenerate"), "{err}");

    write(&ws, MANIFEST_PATH, "{\"generator\": \"someone else\"}");
    let err = check_placement(&ws).unwrap_err();
    assert!(matches!(err, CheckError::Unreadable { .. }), "{err:?}");
}

#[test]
fn a_required_skill_resolves_to_the_tree_or_the_workspace() {
    let transport = "---\nname: managed-evidence-tools\ndescription: How to call the managed evidence tools.\n---\nqueryId\n";
    let skills = SkillsTree::load(common::fixture_skills()).unwrap();
    // A catalog whose data-access group names the transport skill.
    let groups = common::catalog()
        .groups()
        .iter()
        .map(|g| {
            let mut names = g.skills().to_vec();
            if g.name().as_str() == "data-access" {
                names.push(SkillName::new("managed-evidence-tools").unwrap());
            }
            SkillGroup::new(g.name().clone(), g.purpose(), names)
        })
        .collect();
    let catalog = SkillCatalog::new(groups).unwrap();
    let options = GenerateOptions::default().with_task_support(TaskSupport::PromptList);

    let err = Generator::new(&catalog, &skills, options.clone()).unwrap_err();
    assert!(
        err.catalog_problems().iter().any(|p| matches!(
            p,
            CatalogProblem::MissingSkill { skill, .. } if skill.as_str() == "managed-evidence-tools"
        )),
        "{err}"
    );
    assert!(err.to_string().contains("managed-evidence-tools"), "{err}");

    let skill = WorkspaceSkill::new("managed-evidence-tools", "data-access", transport).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let generator = Generator::new(&catalog, &skills, options.with_workspace_skill(skill)).unwrap();
    let report = generator.write(dir.path()).unwrap();
    let path = ".opencode/skill/managed-evidence-tools/SKILL.md";
    assert!(
        report
            .files
            .contains(&(path.to_owned(), FileChange::Created))
    );
    assert_eq!(
        fs::read_to_string(dir.path().join(path)).unwrap(),
        transport
    );
    assert!(generator.write(dir.path()).unwrap().is_unchanged());

    let config: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.path().join(CONFIG_PATH)).unwrap()).unwrap();
    let skill_rule = |agent: &str| config["agent"][agent]["permission"]["skill"].clone();
    assert_eq!(
        skill_rule("evidence-agent")["managed-evidence-tools"],
        "allow"
    );
    assert_eq!(
        skill_rule("diagnosis-analyst")["managed-evidence-tools"],
        serde_json::Value::Null
    );
    assert_eq!(skill_rule("diagnosis-analyst")["*"], "deny");

    // A workspace skill whose frontmatter does not name it is refused.
    let err = WorkspaceSkill::new(
        "managed-evidence-tools",
        "data-access",
        "---\nname: other\ndescription: d\n---\n",
    )
    .unwrap_err();
    assert!(
        matches!(err, GenerateError::InvalidOption { .. }),
        "{err:?}"
    );
}
