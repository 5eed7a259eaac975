#![doc = include_str!("../README.md")]

mod binary;
mod call;
pub mod context;
pub mod deadline;
pub mod deploy;
mod entry;
mod error;
mod failure;
mod ledger;
pub mod mcp;
pub mod output;
pub mod plan;
pub mod rollout;
mod runtime;
mod runtime_context;
mod sandbox;
mod session_store;
mod shared_state;
mod stamp;
mod tool_kind;
mod tools;

// What an embedder starts from: the runtime context and the sandbox that runs calls
// under it, the tools, the one call path and its errors. The rest lives in the named
// modules: `context` (the variables a sandbox reads), `deadline` (a call's deadline from
// its manifest), `mcp` (the package servers), `deploy` (deployable folders), `plan`
// (turn plans), `output` (result and audit writing) and `rollout` (the rollout canary).
pub use binary::run_tool_binary;
pub use call::{PolicyInput, PreparedCall, SandboxCall, SandboxOutcome, prepare, run_sandbox_call};
pub use deploy::build_deployable;
pub use entry::run_entrypoint;
pub use error::ToolError;
pub use failure::{RuntimeFailure, RuntimeFailureKind};
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
        // A call its deadline cut off outside the connector (waiting for a slot or the
        // turn ledger, a connector given up on) answers its provider's timeout code.
        codes.extend(
            ["clinic_timeout", "manus_timeout", "grafana_timeout"]
                .map(|code| (code, FailureClass::Timeout)),
        );
        codes
    }
}
