//! The generated `opencode.json`: it parses and satisfies the permission rules.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;

use common::catalog;
use opencode_workspace::{
    GenerateError, GenerateOptions, Generator, OpenCodeConfig, Placement, SkillsTree, TaskSupport,
    catalog::{DATA_ACCESS_GROUP, DIAGNOSIS_GROUP},
    config::{
        Action, AgentMode, ConfigProblem, Permission, PermissionValue, config_problems,
        config_problems_at, validate_config,
    },
    layout::{ANALYST_OUTPUT, CATALOG_PATH, CONFIG_PATH, EVIDENCE_AGENT_OUTPUT, REPORT_PATH},
};
use proptest::prelude::*;
use serde_json::{Value, json};

const SUBAGENTS: [&str; 2] = ["evidence-agent", "diagnosis-analyst"];

fn generated(support: TaskSupport) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    // As if the temporary folder were a git root: patterns are workspace-relative.
    common::generator(support)
        .write_at(dir.path(), &Placement::worktree_root())
        .unwrap();
    let text = fs::read_to_string(dir.path().join(CONFIG_PATH)).unwrap();
    (dir, text)
}

fn permission<'a>(config: &'a OpenCodeConfig, agent: &str) -> &'a Permission {
    config.agent(agent).unwrap().permission.as_ref().unwrap()
}

#[test]
fn opencode_json_has_the_three_agents() {
    for support in [TaskSupport::PromptList, TaskSupport::LoadSkillsArgument] {
        let (dir, text) = generated(support);
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["$schema"], "https://opencode.ai/config.json");
        assert_eq!(value["default_agent"], "diagnosis-orchestrator");
        let config = OpenCodeConfig::parse(&text).unwrap();
        assert_eq!(
            config.agent_names().collect::<Vec<_>>(),
            [
                "diagnosis-orchestrator",
                "evidence-agent",
                "diagnosis-analyst"
            ]
        );
        assert_eq!(config_problems(&config, &catalog(), support), vec![]);
        for (name, mode) in [
            ("diagnosis-orchestrator", AgentMode::Primary),
            ("evidence-agent", AgentMode::Subagent),
            ("diagnosis-analyst", AgentMode::Subagent),
        ] {
            let agent = config.agent(name).unwrap();
            assert_eq!(agent.mode, Some(mode));
            assert!(agent.steps.unwrap() > 0);
            assert!(!agent.description.as_deref().unwrap().is_empty());
            // `{file:./...}` resolves relative to the config file.
            let prompt = agent.prompt.as_deref().unwrap();
            assert_eq!(prompt, format!("{{file:./investibook/agents/{name}.md}}"));
            let relative = prompt.trim_start_matches("{file:./").trim_end_matches('}');
            let file = dir.path().join(".opencode").join(relative);
            assert!(file.is_file(), "{}", file.display());
        }
    }
}

#[test]
fn only_the_orchestrator_may_delegate_and_only_to_the_two_subagents() {
    let (_dir, text) = generated(TaskSupport::PromptList);
    let config = OpenCodeConfig::parse(&text).unwrap();
    let orchestrator = permission(&config, "diagnosis-orchestrator");
    assert_eq!(
        orchestrator.get("task"),
        Some(&PermissionValue::Patterns(vec![
            ("*".to_owned(), Action::Deny),
            ("evidence-agent".to_owned(), Action::Allow),
            ("diagnosis-analyst".to_owned(), Action::Allow),
        ]))
    );
    for target in SUBAGENTS {
        assert_eq!(orchestrator.evaluate("task", target), Some(Action::Allow));
    }
    for other in [
        "general",
        "explore",
        "build",
        "diagnosis-orchestrator",
        "evidence-agent-2",
    ] {
        assert_eq!(
            orchestrator.evaluate("task", other),
            Some(Action::Deny),
            "{other}"
        );
    }
    for agent in SUBAGENTS {
        let p = permission(&config, agent);
        assert!(
            p.entries().iter().all(|(k, _)| k != "task"),
            "{agent} has a task rule"
        );
        for target in ["evidence-agent", "diagnosis-analyst", "general"] {
            assert_eq!(p.evaluate("task", target), Some(Action::Deny));
        }
    }
}

#[test]
fn no_rule_asks_and_everything_defaults_to_deny() {
    let (_dir, text) = generated(TaskSupport::PromptList);
    assert!(!text.contains("\"ask\""), "{text}");
    let config = OpenCodeConfig::parse(&text).unwrap();
    for agent in [
        "diagnosis-orchestrator",
        "evidence-agent",
        "diagnosis-analyst",
    ] {
        let p = permission(&config, agent);
        assert_eq!(
            p.entries().first(),
            Some(&("*".to_owned(), PermissionValue::All(Action::Deny)))
        );
        for key in [
            "read",
            "edit",
            "bash",
            "webfetch",
            "external_directory",
            "skill",
        ] {
            assert!(p.get(key).is_some(), "{agent} lacks an explicit {key} rule");
        }
        assert_eq!(
            p.get("external_directory"),
            Some(&PermissionValue::All(Action::Deny))
        );
        assert_eq!(p.evaluate("question", "*"), Some(Action::Deny));
        assert_eq!(p.evaluate("read", "src/lib.rs"), Some(Action::Allow));
        assert_eq!(p.evaluate("read", ".env"), Some(Action::Deny));
    }
}

#[test]
fn edits_are_limited_to_each_subagents_own_outputs() {
    let (_dir, text) = generated(TaskSupport::PromptList);
    let config = OpenCodeConfig::parse(&text).unwrap();
    let own = [
        (
            "evidence-agent",
            vec![
                EVIDENCE_AGENT_OUTPUT,
                "evidences/metrics.json",
                "evidences/logs.json",
                "evidences/queries.json",
                "evidences/events.json",
            ],
        ),
        ("diagnosis-analyst", vec![ANALYST_OUTPUT, REPORT_PATH]),
        ("diagnosis-orchestrator", vec![]),
    ];
    let everything = [
        EVIDENCE_AGENT_OUTPUT,
        ANALYST_OUTPUT,
        REPORT_PATH,
        "evidences/metrics.json",
        "evidences/logs.json",
        "evidences/queries.json",
        "evidences/events.json",
        CONFIG_PATH,
        CATALOG_PATH,
        "evidences/agent-runs/other.json",
    ];
    for (agent, files) in own {
        let p = permission(&config, agent);
        for path in everything {
            let expected = if files.contains(&path) {
                Action::Allow
            } else {
                Action::Deny
            };
            assert_eq!(p.evaluate("edit", path), Some(expected), "{agent} {path}");
        }
        for path in &files {
            assert!(path.starts_with("evidences/"));
        }
    }
    // The analyst does not collect data: no shell, no web, no managed tools.
    let analyst = permission(&config, "diagnosis-analyst");
    assert_eq!(analyst.evaluate("bash", "clinic query"), Some(Action::Deny));
    assert_eq!(
        analyst.evaluate("managed_auto_oncall_clinic_query", "*"),
        Some(Action::Deny)
    );
    let evidence = permission(&config, "evidence-agent");
    assert_eq!(
        evidence.evaluate("managed_auto_oncall_clinic_query", "*"),
        Some(Action::Allow)
    );
}

#[test]
fn skill_permissions_follow_the_load_groups() {
    let (_dir, text) = generated(TaskSupport::PromptList);
    let config = OpenCodeConfig::parse(&text).unwrap();
    let catalog = catalog();
    let data_access: Vec<&str> = catalog
        .group(DATA_ACCESS_GROUP)
        .unwrap()
        .skills()
        .iter()
        .map(|s| s.as_str())
        .collect();
    let diagnosis: Vec<&str> = catalog
        .group(DIAGNOSIS_GROUP)
        .unwrap()
        .skills()
        .iter()
        .map(|s| s.as_str())
        .collect();
    for skill in catalog.skills() {
        let s = skill.as_str();
        let evidence = permission(&config, "evidence-agent").evaluate("skill", s);
        let analyst = permission(&config, "diagnosis-analyst").evaluate("skill", s);
        let orchestrator = permission(&config, "diagnosis-orchestrator").evaluate("skill", s);
        let allow = |yes: bool| Some(if yes { Action::Allow } else { Action::Deny });
        assert_eq!(evidence, allow(!diagnosis.contains(&s)), "evidence {s}");
        assert_eq!(analyst, allow(!data_access.contains(&s)), "analyst {s}");
        assert_eq!(orchestrator, Some(Action::Deny), "orchestrator {s}");
    }
}

fn mutated(text: &str, f: impl Fn(&mut Value)) -> OpenCodeConfig {
    let mut value: Value = serde_json::from_str(text).unwrap();
    f(&mut value);
    OpenCodeConfig::parse(&serde_json::to_string(&value).unwrap()).unwrap()
}

/// Asserts that the checker finds a problem matching `expected` once `mutate` has changed
/// the generated configuration `text`.
fn assert_finds(
    text: &str,
    mutate: impl Fn(&mut Value),
    expected: impl Fn(&ConfigProblem) -> bool,
) {
    let problems = config_problems(&mutated(text, mutate), &catalog(), TaskSupport::PromptList);
    assert!(problems.iter().any(expected), "{problems:?}");
}

#[test]
fn the_checker_catches_each_broken_permission_rule() {
    let (_dir, text) = generated(TaskSupport::PromptList);
    assert_finds(
        &text,
        |v| v["agent"]["evidence-agent"]["permission"]["webfetch"] = json!("ask"),
        |p| matches!(p, ConfigProblem::AskRule { .. }),
    );
    assert_finds(
        &text,
        |v| {
            v["agent"]["diagnosis-analyst"]["permission"]["task"] =
                json!({"*": "deny", "evidence-agent": "allow"})
        },
        |p| matches!(p, ConfigProblem::TaskNotAllowed(a) if a == "diagnosis-analyst"),
    );
    // A task rule at all is refused.
    assert_finds(
        &text,
        |v| v["agent"]["diagnosis-analyst"]["permission"]["task"] = json!("deny"),
        |p| matches!(p, ConfigProblem::TaskNotAllowed(_)),
    );
    assert_finds(
        &text,
        |v| v["agent"]["diagnosis-orchestrator"]["permission"]["task"] = json!({"*": "allow"}),
        |p| matches!(p, ConfigProblem::TaskTargets { .. }),
    );
    assert_finds(
        &text,
        |v| {
            v["agent"]["evidence-agent"]["permission"]["edit"] =
                json!({"*": "deny", "evidences/*": "allow"})
        },
        |p| matches!(p, ConfigProblem::EditScope { .. }),
    );
    assert_finds(
        &text,
        |v| v["agent"]["diagnosis-analyst"]["permission"]["skill"]["jira"] = json!("allow"),
        |p| matches!(p, ConfigProblem::SkillScope { .. }),
    );
    assert_finds(
        &text,
        |v| {
            v["agent"]["evidence-agent"]["permission"]
                .as_object_mut()
                .unwrap()
                .remove("external_directory");
        },
        |p| {
            matches!(
                p,
                ConfigProblem::MissingRule {
                    key: "external_directory",
                    ..
                }
            )
        },
    );
    assert_finds(
        &text,
        |v| {
            v["agent"]["evidence-agent"]["permission"]["external_directory"] =
                json!({"*": "deny", "/tmp/*": "allow"})
        },
        |p| matches!(p, ConfigProblem::ExternalDirectory(_)),
    );
    assert_finds(
        &text,
        |v| v["agent"]["evidence-agent"]["permission"]["*"] = json!("allow"),
        |p| matches!(p, ConfigProblem::NoDenyByDefault(_)),
    );
}

#[test]
fn the_checker_catches_each_broken_agent_field() {
    let (_dir, text) = generated(TaskSupport::PromptList);
    assert_finds(
        &text,
        |v| v["agent"]["evidence-agent"]["mode"] = json!("primary"),
        |p| matches!(p, ConfigProblem::WrongMode(_)),
    );
    assert_finds(
        &text,
        |v| v["agent"]["evidence-agent"]["prompt"] = json!("{file:./agents/x.md}"),
        |p| matches!(p, ConfigProblem::WrongPrompt(_)),
    );
    assert_finds(
        &text,
        |v| {
            v["agent"]
                .as_object_mut()
                .unwrap()
                .remove("diagnosis-analyst");
        },
        |p| matches!(p, ConfigProblem::MissingAgent(_)),
    );
    assert_finds(
        &text,
        |v| v["agent"]["investibook-diagnosis"] = json!({"mode": "primary"}),
        |p| matches!(p, ConfigProblem::UnexpectedAgent(_)),
    );
    assert_finds(
        &text,
        |v| v["default_agent"] = json!("build"),
        |p| matches!(p, ConfigProblem::WrongDefaultAgent(_)),
    );
    assert_finds(
        &text,
        |v| {
            v["agent"]["evidence-agent"]
                .as_object_mut()
                .unwrap()
                .remove("steps");
        },
        |p| matches!(p, ConfigProblem::MissingSteps(_)),
    );
    let err = validate_config(
        &mutated(&text, |v| v["default_agent"] = json!("build")),
        &catalog(),
        TaskSupport::PromptList,
    )
    .unwrap_err();
    assert!(err.to_string().contains("default_agent"), "{err}");
    assert_eq!(err.problems().len(), 1);
}

#[test]
fn evidence_commands_and_tools_are_options() {
    let skills = SkillsTree::load(common::fixture_skills()).unwrap();
    let options = GenerateOptions::default().allow_evidence_command("clinic *");
    let generator = Generator::new(&catalog(), &skills, options).unwrap();
    let config = OpenCodeConfig::parse(
        &generator
            .render_config(None, &Placement::worktree_root())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        config_problems(&config, &catalog(), TaskSupport::PromptList),
        vec![]
    );
    let evidence = permission(&config, "evidence-agent");
    assert_eq!(
        evidence.evaluate("bash", "clinic metrics --cluster c1"),
        Some(Action::Allow)
    );
    assert_eq!(evidence.evaluate("bash", "rm -rf /"), Some(Action::Deny));
    assert_eq!(
        permission(&config, "diagnosis-analyst").evaluate("bash", "clinic x"),
        Some(Action::Deny)
    );

    for bad in [
        GenerateOptions::default().allow_evidence_command("*"),
        GenerateOptions {
            evidence_tools: vec!["t*".to_owned()],
            ..GenerateOptions::default()
        },
    ] {
        let err = Generator::new(&catalog(), &skills, bad).unwrap_err();
        assert!(
            matches!(err, GenerateError::InvalidOption { .. }),
            "{err:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// For any permission and any input, the generated agents decide explicitly (no
    /// default, never ask); a subagent never may start a task; an edit is allowed only on
    /// the agent's own outputs; the orchestrator may start only the two subagents.
    #[test]
    fn permissions_never_ask_and_stay_confined(
        key in prop_oneof![
            Just("task".to_owned()), Just("edit".to_owned()), Just("skill".to_owned()),
            Just("bash".to_owned()), Just("external_directory".to_owned()), Just("read".to_owned()),
            Just("webfetch".to_owned()), Just("glob".to_owned()), Just("grep".to_owned()),
            Just("list".to_owned()), Just("todowrite".to_owned()), Just("question".to_owned()),
            "[a-z_*?]{1,12}",
        ],
        input in prop_oneof![
            Just("evidence-agent".to_owned()), Just("diagnosis-analyst".to_owned()),
            Just(EVIDENCE_AGENT_OUTPUT.to_owned()), Just(REPORT_PATH.to_owned()),
            "[a-z./_*-]{0,30}",
        ],
    ) {
        let text = common::generator(TaskSupport::PromptList).render_config(None, &Placement::worktree_root()).unwrap();
        let config = OpenCodeConfig::parse(&text).unwrap();
        let own: [(&str, Vec<&str>); 3] = [
            ("diagnosis-orchestrator", vec![]),
            ("evidence-agent", vec![EVIDENCE_AGENT_OUTPUT, "evidences/metrics.json", "evidences/logs.json", "evidences/queries.json", "evidences/events.json"]),
            ("diagnosis-analyst", vec![ANALYST_OUTPUT, REPORT_PATH]),
        ];
        for (agent, files) in own {
            let p = permission(&config, agent);
            let action = p.evaluate(&key, &input);
            prop_assert!(matches!(action, Some(Action::Allow | Action::Deny)), "{agent} {key} {input}: {action:?}");
            if key == "edit" && action == Some(Action::Allow) {
                prop_assert!(files.contains(&input.as_str()), "{agent} may edit {input}");
            }
            if key == "task" && action == Some(Action::Allow) {
                prop_assert_eq!(agent, "diagnosis-orchestrator");
                prop_assert!(SUBAGENTS.contains(&input.as_str()));
            }
            if key == "external_directory" {
                prop_assert_eq!(action, Some(Action::Deny));
            }
        }
    }
}

#[test]
fn edit_patterns_carry_the_placement_and_nothing_else() {
    let generator = common::generator(TaskSupport::PromptList);
    let placement = Placement::new("srv/investibook/ws-1").unwrap();
    let text = generator.render_config(None, &placement).unwrap();
    let config = OpenCodeConfig::parse(&text).unwrap();
    assert_eq!(
        config_problems_at(&config, &catalog(), TaskSupport::PromptList, &placement),
        vec![]
    );
    // Checked for another placement, the same file is wrong: its files are elsewhere.
    assert!(
        config_problems(&config, &catalog(), TaskSupport::PromptList)
            .iter()
            .any(|p| matches!(p, ConfigProblem::EditScope { .. }))
    );
    let evidence = permission(&config, "evidence-agent");
    assert_eq!(
        evidence.evaluate("edit", "srv/investibook/ws-1/evidences/metrics.json"),
        Some(Action::Allow)
    );
    // The same name at the worktree root or in another workspace is another file.
    for other in [
        "evidences/metrics.json",
        "srv/investibook/ws-2/evidences/metrics.json",
        "srv/investibook/ws-1/evidences/other.json",
    ] {
        assert_eq!(
            evidence.evaluate("edit", other),
            Some(Action::Deny),
            "{other}"
        );
    }
    assert!(!text.contains("\"todoread\""), "{text}");
    assert!(!text.contains("\"list\""), "{text}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Wherever the workspace lives, a subagent may edit exactly its own files as OpenCode
    /// names them from the worktree, and no other path.
    #[test]
    fn edits_never_reach_outside_the_agents_own_files(
        parts in proptest::collection::vec("[A-Za-z0-9 ._-]{1,8}", 0..4),
        input in prop_oneof![
            Just(String::new()),
            "[a-z./_*-]{0,30}",
        ],
        pick in 0usize..7,
    ) {
        prop_assume!(parts.iter().all(|p| p != "." && p != ".."));
        let placement = Placement::new(&parts.join("/")).unwrap();
        let text = common::generator(TaskSupport::PromptList)
            .render_config(None, &placement)
            .unwrap();
        let config = OpenCodeConfig::parse(&text).unwrap();
        prop_assert_eq!(
            config_problems_at(&config, &catalog(), TaskSupport::PromptList, &placement),
            vec![]
        );
        let all: Vec<&str> = common::own_files("evidence-agent")
            .into_iter()
            .chain(common::own_files("diagnosis-analyst"))
            .collect();
        // Half the inputs are the placed own files of one of the agents, or their suffixes.
        let candidates = [
            input.clone(),
            placement.pattern(all[pick]),
            all[pick].to_owned(),
            format!("x/{}", placement.pattern(all[pick])),
        ];
        for agent in ["diagnosis-orchestrator", "evidence-agent", "diagnosis-analyst"] {
            let p = permission(&config, agent);
            let own: Vec<String> = common::own_files(agent).iter().map(|f| placement.pattern(f)).collect();
            for candidate in &candidates {
                let action = p.evaluate("edit", candidate);
                let expected = if own.contains(candidate) { Action::Allow } else { Action::Deny };
                prop_assert_eq!(action, Some(expected), "{} {}", agent, candidate);
            }
        }
    }
}
