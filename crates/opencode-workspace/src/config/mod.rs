//! `opencode.json`: its model ([`OpenCodeConfig`], [`Permission`] and how OpenCode
//! evaluates one), the agents the generator intends ([`TaskSupport`], [`StepLimits`]), and
//! the checker that tells what in a configuration breaks the permission rules
//! ([`config_problems_at`], [`ConfigProblem`]).

mod checker;
mod model;
mod permissions;

pub use checker::{
    ConfigError, ConfigProblem, config_problems, config_problems_at, validate_config,
};
pub use model::{
    Action, AgentConfig, AgentMode, ConfigParseError, OpenCodeConfig, Permission, PermissionValue,
};
pub(crate) use permissions::{AgentSpec, BUILTIN_PERMISSIONS, agent_specs, task_probe_permission};
pub use permissions::{StepLimits, TaskSupport};
