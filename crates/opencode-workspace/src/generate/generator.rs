//! The [`Generator`]: it checks the catalog and the options, renders every file the
//! workspace holds, and merges its agents into an `opencode.json`. Writing the rendered
//! files is `write.rs`.

use super::error::GenerateError;
use super::files::on_skill_path;
use super::options::{GenerateOptions, check_options};
use super::report::Mode;
use super::skill::WorkspaceSkill;
use crate::catalog::SkillCatalog;
use crate::config::{AgentMode, AgentSpec, TaskSupport, agent_specs};
use crate::layout::{
    ANALYST_SCHEMA_PATH, CATALOG_PATH, CONFIG_PATH, CONFIG_SCHEMA_URL, EVIDENCE_SCHEMA_PATH,
    prompt_path,
};
use crate::mcp::McpServer;
use crate::names::{AgentRole, FALLBACK_AGENT};
use crate::ordered_json::{Json, Object};
use crate::outputs::{diagnosis_analyst_schema, evidence_agent_schema};
use crate::placement::Placement;
use crate::protocol::{
    analyst_prompt, evidence_agent_prompt, fallback_prompt, orchestrator_prompt,
};
use crate::skills::SkillsTree;

/// A file the generator owns, with its exact bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    path: String,
    contents: String,
}

impl GeneratedFile {
    fn new(path: impl Into<String>, contents: String) -> Self {
        Self {
            path: path.into(),
            contents,
        }
    }

    /// Workspace-relative path, `/`-separated.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The exact contents.
    pub fn contents(&self) -> &str {
        &self.contents
    }
}

/// Renders and writes an Investibook workspace: `.opencode/opencode.json` (merged), the
/// agent prompts, the read-only skill catalog, the output schemas and the `evidences/`
/// layout. Idempotent; never deletes a file; never touches `.opencode/skills` or
/// `.opencode/.all-skills`.
#[derive(Debug, Clone)]
pub struct Generator {
    specs: Vec<AgentSpec>,
    files: Vec<GeneratedFile>,
    mode: Mode,
    mcp_servers: Vec<McpServer>,
    /// The folders of the workspace's own skills, workspace-relative.
    skill_folders: Vec<String>,
}

impl Generator {
    /// Validates `catalog` against `skills` and the options, and renders every file.
    pub fn new(
        catalog: &SkillCatalog,
        skills: &SkillsTree,
        options: GenerateOptions,
    ) -> Result<Self, GenerateError> {
        check_options(&options)?;
        let (catalog, skills) = &with_workspace_skills(catalog, skills, &options.workspace_skills);
        catalog.validate(skills)?;
        let support = options.task_support;
        let specs = agent_specs(
            catalog,
            support,
            options.steps,
            &options.evidence_commands,
            &options.evidence_tools,
        );
        let (mut files, mode) = render_files(catalog, skills, support)?;
        if let Some(bad) = files.iter().find(|f| on_skill_path(&f.path)) {
            return Err(GenerateError::UnsafePath {
                path: bad.path.clone().into(),
                reason: "it is on a skill discovery path",
            });
        }
        files.extend(
            options
                .workspace_skills
                .iter()
                .map(|s| GeneratedFile::new(s.path(), s.text().to_owned())),
        );
        Ok(Self {
            specs,
            files,
            mode,
            mcp_servers: options.mcp_servers,
            skill_folders: options
                .workspace_skills
                .iter()
                .map(|s| s.folder())
                .collect(),
        })
    }

    /// Which configuration this generator writes.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The folders of the skills the workspace installs itself, workspace-relative.
    pub(super) fn skill_folders(&self) -> &[String] {
        &self.skill_folders
    }

    /// The files the generator owns (everything but `opencode.json`), in write order.
    pub fn files(&self) -> &[GeneratedFile] {
        &self.files
    }

    /// The `opencode.json` text for a workspace at `placement`: `existing` (when given)
    /// with `$schema` added if absent, `default_agent` set, the generated agents set under
    /// `agent` and the MCP servers under `mcp`; every other key keeps its place and value.
    /// Reserved Investibook agents this mode does not use are removed from `agent`.
    ///
    /// A `default_agent` naming an agent other than the Investibook ones is the user's
    /// choice: it is never overwritten, the call fails with
    /// [`GenerateError::DefaultAgentConflict`].
    pub fn render_config(
        &self,
        existing: Option<&str>,
        placement: &Placement,
    ) -> Result<String, GenerateError> {
        let mut root = match existing {
            None => Object::new(),
            Some(text) => match serde_json::from_str::<Json>(text) {
                Ok(Json::Object(object)) => object,
                Ok(_) => return Err(unreadable("the top level is not an object")),
                Err(e) => return Err(unreadable(format!("not plain JSON ({e})"))),
            },
        };
        root.insert_front_if_absent("$schema", Json::str(CONFIG_SCHEMA_URL));
        self.set_default_agent(&mut root)?;
        self.set_agents(&mut root, placement)?;
        self.set_mcp_servers(&mut root)?;
        Json::Object(root)
            .to_pretty()
            .map_err(|e| GenerateError::Serialize {
                what: "opencode.json",
                reason: e.to_string(),
            })
    }

    /// Sets `default_agent` to the primary agent, unless the user chose another agent.
    fn set_default_agent(&self, root: &mut Object) -> Result<(), GenerateError> {
        let primary = self
            .specs
            .iter()
            .find(|s| s.mode == AgentMode::Primary)
            .map(|s| s.name.clone())
            .unwrap_or_default();
        let reserved = |name: &str| AgentRole::from_name(name).is_some() || name == FALLBACK_AGENT;
        if let Some(existing) = root.get("default_agent") {
            match existing.as_str() {
                Some(name) if reserved(name) => {}
                other => {
                    return Err(GenerateError::DefaultAgentConflict {
                        existing: other.map_or_else(|| "(not a string)".to_owned(), str::to_owned),
                        generated: primary,
                    });
                }
            }
        }
        root.insert("default_agent", Json::str(primary));
        Ok(())
    }

    /// Sets the generated agents under `agent` and removes the reserved ones this mode
    /// does not use; other agents keep their place.
    fn set_agents(&self, root: &mut Object, placement: &Placement) -> Result<(), GenerateError> {
        let mut agents = match root.remove("agent") {
            None => Object::new(),
            Some(Json::Object(agents)) => agents,
            Some(_) => return Err(unreadable("`agent` is not an object")),
        };
        let reserved = AgentRole::ALL
            .iter()
            .map(|r| r.as_str())
            .chain([FALLBACK_AGENT]);
        for name in reserved {
            if !self.specs.iter().any(|s| s.name == name) {
                agents.remove(name);
            }
        }
        for spec in &self.specs {
            agents.insert(spec.name.clone(), spec.to_json(placement));
        }
        root.insert("agent", Json::Object(agents));
        Ok(())
    }

    /// Sets the MCP servers under `mcp`, when there are any.
    fn set_mcp_servers(&self, root: &mut Object) -> Result<(), GenerateError> {
        if self.mcp_servers.is_empty() {
            return Ok(());
        }
        let mut servers = match root.remove("mcp") {
            None => Object::new(),
            Some(Json::Object(servers)) => servers,
            Some(_) => return Err(unreadable("`mcp` is not an object")),
        };
        for server in &self.mcp_servers {
            servers.insert(server.name().to_owned(), server.to_json());
        }
        root.insert("mcp", Json::Object(servers));
        Ok(())
    }
}

/// The catalog with each workspace skill in its group, and the skills tree with each
/// workspace skill's `SKILL.md`: a required skill resolves to the tree or the workspace.
fn with_workspace_skills(
    catalog: &SkillCatalog,
    skills: &SkillsTree,
    installed: &[WorkspaceSkill],
) -> (SkillCatalog, SkillsTree) {
    installed.iter().fold(
        (catalog.clone(), skills.clone()),
        |(catalog, skills), skill| {
            (
                catalog.with_skill_in(skill.group(), skill.name()),
                skills.with_text(skill.name().as_str(), skill.text()),
            )
        },
    )
}

/// The existing `opencode.json` cannot be merged into.
fn unreadable(reason: impl Into<String>) -> GenerateError {
    GenerateError::Unreadable {
        path: CONFIG_PATH.into(),
        reason: reason.into(),
    }
}

/// Every file the generator owns for `support`, in write order: the catalog, then the
/// three prompts and the two output schemas, or the fallback's one prompt.
fn render_files(
    catalog: &SkillCatalog,
    skills: &SkillsTree,
    support: TaskSupport,
) -> Result<(Vec<GeneratedFile>, Mode), GenerateError> {
    let mut files = vec![GeneratedFile::new(
        CATALOG_PATH,
        catalog.render_markdown(skills),
    )];
    if !support.is_multi_agent() {
        files.push(GeneratedFile::new(
            prompt_path(FALLBACK_AGENT),
            fallback_prompt(catalog),
        ));
        return Ok((files, Mode::SingleAgentFallback));
    }
    files.extend([
        GeneratedFile::new(
            prompt_path(AgentRole::DiagnosisOrchestrator.as_str()),
            orchestrator_prompt(catalog, support),
        ),
        GeneratedFile::new(
            prompt_path(AgentRole::EvidenceAgent.as_str()),
            evidence_agent_prompt(catalog),
        ),
        GeneratedFile::new(
            prompt_path(AgentRole::DiagnosisAnalyst.as_str()),
            analyst_prompt(catalog),
        ),
        GeneratedFile::new(
            EVIDENCE_SCHEMA_PATH,
            pretty(evidence_agent_schema(), "evidence-agent schema")?,
        ),
        GeneratedFile::new(
            ANALYST_SCHEMA_PATH,
            pretty(diagnosis_analyst_schema(), "diagnosis-analyst schema")?,
        ),
    ]);
    Ok((files, Mode::MultiAgent))
}

/// Pretty JSON with a final newline.
fn pretty(value: serde_json::Value, what: &'static str) -> Result<String, GenerateError> {
    serde_json::to_string_pretty(&value)
        .map(|mut s| {
            s.push('\n');
            s
        })
        .map_err(|e| GenerateError::Serialize {
            what,
            reason: e.to_string(),
        })
}
