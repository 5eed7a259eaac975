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
pub mod log;
pub mod mcp;
pub mod metrics;
pub mod output;
pub mod plan;
mod readiness;
pub mod rollout;
mod runtime;
mod runtime_context;
mod sandbox;
pub mod secret_file;
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

    /// A registry of its own, for the metrics benchmark.
    pub fn fresh_metrics() -> crate::metrics::Metrics {
        crate::metrics::Metrics::new()
    }

    /// What one served call records in `metrics`, as a server over HTTP records it: its
    /// six phases, the slots taken and freed, its HTTP request, its turn admission and
    /// its audit record's counts.
    pub fn record_one_call(
        metrics: &crate::metrics::Metrics,
        audit: &evidence_package::AuditRecord,
    ) {
        use crate::metrics::{Phase, Store};
        use std::time::Duration;
        let package = audit.package.as_str();
        let took = Duration::from_micros(700);
        metrics.slots(package, 4, 1, 0);
        for phase in [
            Phase::VerifyLock,
            Phase::Admission,
            Phase::SlotWait,
            Phase::Provider,
            Phase::Guard,
            Phase::Audit,
        ] {
            metrics.phase(package, phase, took);
        }
        metrics.store(Store::TurnLedger, "file", took, false);
        metrics.store(Store::SessionStore, "file", took, false);
        metrics.call(audit, true);
        metrics.slots(package, 4, 0, 0);
        metrics.http_request(package, 200, None);
    }

    /// A turn ledger as `EVIDENCE_TURN_LEDGER` names it (a directory, or a Redis URL),
    /// for the admission benchmark: each [`AdmissionBench::admit_and_answer`] is what
    /// one call costs the ledger (its admission, then its answer logged).
    #[derive(Debug)]
    pub struct AdmissionBench {
        ledger: crate::ledger::TurnLedger,
        package: evidence_result::PackageId,
    }

    impl AdmissionBench {
        /// The ledger `value` names, checked (a Redis is connected and its durability
        /// checked).
        pub fn open(value: &str) -> Result<Self, String> {
            let context = if crate::shared_state::is_redis_url(value) {
                crate::RuntimeContext::new()
                    .with_shared_turn_ledger(secrecy::SecretString::from(value.to_owned()), None)
            } else {
                crate::RuntimeContext::new().with_turn_ledger(value)
            };
            let ledger = context
                .require_turn_ledger()
                .map_err(|e| e.to_string())?
                .clone();
            let package = evidence_result::PackageId::new("managed_auto_oncall_clinic")
                .map_err(|e| e.to_string())?;
            Ok(AdmissionBench { ledger, package })
        }

        /// Admits one call of `query` in the turn `policy_id` (at most `max_calls` to a
        /// turn), then logs its answer (`ok`, stand-in evidence); whether it was admitted.
        pub fn admit_and_answer(
            &self,
            policy_id: &str,
            query: &str,
            max_calls: u32,
        ) -> Result<bool, String> {
            Ok(self.call(policy_id, query, max_calls, false)?.is_none())
        }

        /// Admits one call of `query` in the turn `policy_id` (at most `max_calls` to a
        /// turn; the same request whatever the query) and, when it runs, logs its answer:
        /// `ok` with stand-in evidence, or when `rejected` a `query_rejected` failure (so
        /// the same call again is an unchanged retry). The refusal's code when the ledger
        /// refused it, `None` when it ran.
        pub fn call(
            &self,
            policy_id: &str,
            query: &str,
            max_calls: u32,
            rejected: bool,
        ) -> Result<Option<String>, String> {
            use evidence_result::{
                Correction, Details, ErrorCode, Evidence, Failure, FailureClass, Provider, QueryId,
                RequestDigest, ToolResult,
            };
            let error = |e: &dyn std::fmt::Display| e.to_string();
            let digest: RequestDigest = "0123456789abcdef0123456789abcdef"
                .parse()
                .map_err(|e| error(&e))?;
            let query_id = QueryId::new(query).map_err(|e| error(&e))?;
            let call = evidence_materialize::Call::single(
                self.package.clone(),
                Provider::Clinic,
                query_id.clone(),
                Some(digest),
            );
            let spec = crate::ledger::TurnSpec {
                policy_id: evidence_policy::PolicyId::new(policy_id).map_err(|e| error(&e))?,
                limits: evidence_materialize::TurnLimits::new(max_calls),
                expires_at: jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1),
                wait: std::time::Duration::from_secs(10),
                runs_for: std::time::Duration::from_secs(30),
                log_within: std::time::Duration::from_secs(10),
            };
            match self.ledger.admit(&spec, &call).map_err(|e| error(&e))? {
                crate::ledger::Admitted::Refused(refusal) => {
                    Ok(Some(refusal.code.as_str().to_owned()))
                }
                crate::ledger::Admitted::Run(running) => {
                    let origin = crate::ledger::rebuild::origin_of(&call);
                    let details = if rejected {
                        let class = FailureClass::QueryRejected;
                        let code = ErrorCode::new("clinic_http_422").map_err(|e| error(&e))?;
                        Details::failure(
                            origin,
                            Some(query_id),
                            Some(digest),
                            Failure::new(code, class, String::new())
                                .with_correction(Correction::for_class(class, None, Vec::new())),
                        )
                    } else {
                        Details::success(origin, query_id, digest, Evidence::no_data(None, 5))
                    };
                    let result = ToolResult::new(details).map_err(|e| error(&e))?;
                    running.answer(&result).log().map_err(|e| error(&e))?;
                    Ok(None)
                }
            }
        }
    }
}
