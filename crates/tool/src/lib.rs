#![doc = include_str!("../README.md")]

mod binary;
mod call;
mod context;
mod deploy;
mod entry;
mod error;
mod failure;
mod mcp;
mod output;
mod plan;
mod runtime;
mod runtime_context;
mod sandbox;
mod stamp;
mod tool_kind;
mod tools;

pub use binary::run_tool_binary;
pub use call::{PolicyInput, PreparedCall, SandboxCall, SandboxOutcome, prepare, run_sandbox_call};
pub use context::{
    AUDIT_LOG_ENV, CLINIC_BASE_URL_ENV, CLINIC_QUERY_PATH_TEMPLATE_ENV, CONTEXT_VARS, ContextVar,
    DEFAULT_CHROMEDRIVER, DEFAULT_CHROMIUM, MANUS_MONICA_URL_ENV, MANUS_VIDA_URL_ENV,
    POLICY_KEYS_ENV, ReadBy, SIGNING_KEY_ENV, SIGNING_KID_ENV, SetBy, TRUSTED_CONTEXT_ENV,
    WETECH_CHROMEDRIVER_ENV, WETECH_CHROMIUM_ENV, WETECH_GRAFANA_URL_ENV,
};
pub use deploy::{build_deployable, own_package, sibling_binary};
pub use entry::run_entrypoint;
pub use error::ToolError;
pub use failure::{RuntimeFailure, RuntimeFailureKind};
pub use mcp::{
    MCP_FLAG, PROCESS_BASICS, SUPPORTED_PROTOCOL_VERSIONS, details_output_schema, serve_mcp,
    server_variables, tool_listing,
};
pub use output::write_outputs;
pub use plan::{plan_answered, plan_locked};
pub use runtime_context::RuntimeContext;
pub use sandbox::Sandbox;
pub use tool_kind::Tool;
pub use tools::{ClinicTool, ManusTool, PackageTool, Transport, WetechTool};

/// Items that exist for tests. Not part of the stable interface: they may change or go
/// away in any release.
#[doc(hidden)]
pub mod internal {
    use evidence_result::FailureClass;

    /// Every code this crate produces, with its class: the sandbox call's own codes and
    /// every runtime-context failure.
    pub fn tool_codes() -> Vec<(&'static str, FailureClass)> {
        let mut codes = crate::call::CALL_CODES.to_vec();
        codes.extend(
            crate::RuntimeFailureKind::ALL
                .iter()
                .map(|k| (k.code(), k.class())),
        );
        codes
    }
}
