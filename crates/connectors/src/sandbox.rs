//! One tool-sandbox call, end to end: verify the trusted policy for this exact package
//! digest, read and lock the model's arguments, run the connector, pass the result
//! through the output guard, and produce the audit record. Everything before the
//! connector is local: nothing leaves the sandbox and no browser starts until the
//! request is locked.

use std::time::Instant;

use evidence_package::{AuditRecord, CallContext, Package, SecretBinding};
use evidence_policy::{CanaryPolicy, KeyRing, SignedPolicy, TrustedPolicy, lock, verify};
use evidence_result::{Correction, Details, Failure, Operation, Origin, PolicySource, ToolResult};
use jiff::Timestamp;

use crate::codes::Code;
use crate::{Connector, ConnectorError};

/// Where the trusted policy of a call comes from.
#[derive(Debug, Clone, Copy)]
pub enum PolicyInput<'a> {
    /// A signed per-request envelope from the runtime context, verified with these keys.
    Envelope {
        /// The envelope.
        envelope: &'a SignedPolicy,
        /// The verification key ring.
        keys: &'a KeyRing,
    },
    /// The explicit static canary policy the caller opted into; results say so.
    Canary(&'a CanaryPolicy),
}

/// Everything one call needs besides the connector and its configuration.
#[derive(Debug, Clone, Copy)]
pub struct SandboxCall<'a> {
    /// The package, loaded and its digest recomputed from its files.
    pub package: &'a Package,
    /// The secrets bound to exactly this package digest (their output guard included).
    pub binding: &'a SecretBinding,
    /// The trusted policy source.
    pub policy: PolicyInput<'a>,
    /// The model's arguments, as the raw JSON text it wrote.
    pub args: &'a str,
    /// The current time.
    pub now: Timestamp,
}

/// The guarded result of a call and its audit record.
#[derive(Debug, Clone)]
pub struct SandboxOutcome {
    /// The result, after the output guard.
    pub result: ToolResult,
    /// The audit record of the call.
    pub audit: AuditRecord,
}

fn local_failure(origin: Origin, code: Code, detail: String) -> Result<ToolResult, ConnectorError> {
    let class = code.class();
    let mut failure = Failure::new(code.code(), class, detail);
    if !class.allows_correction() {
        failure = failure.with_correction(Correction::for_class(class, None, Vec::new()));
    }
    ToolResult::new(Details::failure(origin, None, None, failure)).map_err(ConnectorError::from)
}

/// Runs one call in a tool sandbox. An `Err` means no result could be produced at all
/// (the caller must then exit without output); every other outcome, rejections and
/// provider failures included, is a guarded `ToolResult`.
pub async fn run_sandbox_call<C: Connector>(
    connector: &C,
    config: &C::Config,
    secrets: &C::Secrets,
    call: SandboxCall<'_>,
) -> Result<SandboxOutcome, ConnectorError> {
    let started = Instant::now();
    let package = call.package;
    let manifest = package.manifest();
    if call.binding.digest() != package.digest() {
        return Err(ConnectorError::Config(
            "the secrets are bound to another package digest".to_owned(),
        ));
    }
    let source = match call.policy {
        PolicyInput::Envelope { .. } => PolicySource::TrustedEnvelope,
        PolicyInput::Canary(_) => PolicySource::StaticCanary,
    };
    let origin = Origin {
        package: package.identity().clone(),
        provider: manifest.provider,
        operation: Operation::QueryRange,
        policy_source: Some(source),
    };

    let policy: Result<TrustedPolicy, String> = match call.policy {
        PolicyInput::Envelope { envelope, keys } => verify(
            envelope,
            keys,
            &package.digest(),
            package.identity(),
            manifest.provider,
            call.now,
        )
        .map_err(|e| e.to_string()),
        PolicyInput::Canary(canary) => Ok(canary.policy().clone()),
    };
    let result = match policy {
        Err(ref why) => local_failure(
            origin,
            Code::PolicyVerificationFailed,
            format!("the trusted policy did not verify for this package: {why}"),
        )?,
        Ok(ref policy) => match serde_json::from_str::<serde_json::Value>(call.args) {
            Err(e) => local_failure(
                origin,
                Code::InvalidJson,
                format!("the arguments are not valid JSON: {e}"),
            )?,
            Ok(args) => match lock(policy, source, &args, &manifest.scope_labels) {
                Err(rejection) => rejection.to_tool_result(origin)?,
                Ok(locked) => connector.call(&locked, config, secrets).await?,
            },
        },
    };

    let output_bytes = result.to_json().map(|j| j.len()).unwrap_or(0);
    let result = call.binding.guard().enforce(result).result;
    let (policy_id, ticket) = match &policy {
        Ok(p) => (Some(p.policy_id.to_string()), Some(p.ticket.to_string())),
        Err(_) => (None, None),
    };
    let audit = AuditRecord::for_call(
        package,
        &CallContext {
            time: call.now,
            policy_id,
            ticket,
            duration: started.elapsed(),
            output_bytes: u64::try_from(output_bytes).unwrap_or(u64::MAX),
        },
        &result,
    )?;
    Ok(SandboxOutcome { result, audit })
}

/// Binds the secrets a package's auth binding names, read from the environment
/// variables the binding injects them as, to exactly this package's digest.
pub fn bind_from_env(package: &Package) -> Result<SecretBinding, ConnectorError> {
    let mut values = evidence_package::SecretValues::new();
    for spec in &package.manifest().auth.secrets {
        let value = std::env::var(&spec.env).map_err(|_| {
            ConnectorError::Config(format!(
                "secret {} is not injected: {} is not set",
                spec.name, spec.env
            ))
        })?;
        values.insert(spec.name.clone(), secrecy::SecretString::from(value));
    }
    Ok(SecretBinding::bind(package, values)?)
}
