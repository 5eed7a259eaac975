//! The entrypoint flow of a tool binary: find its own deployable package, read the
//! runtime context (model arguments on stdin, the policy envelope, the verification keys,
//! the injected secrets, the deployment configuration), run the one sandbox call, and
//! write one result and one audit record. A runtime-context failure is a result too
//! (exit 0); a non-zero exit only when not even a result could be written.

use std::io::Read as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use evidence_connectors::Connector;
use evidence_package::{AuditRecord, CallContext, Package, SecretBinding, SecretValues};
use evidence_policy::{KeyRing, PolicyError, SignedPolicy, read_runtime_envelope};
use evidence_result::{Operation, Origin, PolicySource, ToolResult};
use jiff::Timestamp;
use secrecy::SecretString;

use crate::ToolError;
use crate::binary::block_on_to_exit;
use crate::call::{PolicyInput, SandboxCall, run_sandbox_call};
use crate::context::{POLICY_KEYS_ENV, SIGNING_KEY_ENV, TRUSTED_CONTEXT_ENV, get};
use crate::deploy::own_package;
use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::output::write_outputs;
use crate::tools::{self, Tool};

/// Runs the entrypoint of `tool` in this process and returns its exit status: success
/// whenever a result was written.
pub fn run_entrypoint(tool: Tool) -> ExitCode {
    let name = tool.binary_name();
    block_on_to_exit(name, &format!("{name}: no result produced"), entry(tool))
}

fn origin(tool: Tool) -> Origin {
    Origin {
        package: tool.identity(),
        provider: tool.provider(),
        operation: Operation::QueryRange,
        policy_source: Some(PolicySource::TrustedEnvelope),
    }
}

async fn entry(tool: Tool) -> Result<(), ToolError> {
    let (result, audit) = answer(tool, read_args).await?;
    write_outputs(&result, &audit)
}

/// One call of `tool` in this process: its own deployable package located and loaded
/// (its digest recomputed), the runtime context read (`args` gives the model's
/// arguments), and the one sandbox call run. Every runtime-context failure is a result
/// with its audit record; `Err` only when not even a failure result can be built. The
/// entrypoint runs it once; the MCP server once per `tools/call`.
pub(crate) async fn answer(
    tool: Tool,
    args: impl FnOnce() -> Result<String, RuntimeFailure>,
) -> Result<(ToolResult, AuditRecord), ToolError> {
    let started = Instant::now();
    let now = Timestamp::now();
    let package = match locate(tool) {
        Ok(package) => package,
        Err(failure) => {
            eprintln!("{}: {failure}", tool.binary_name());
            let result = failure.to_tool_result(origin(tool))?;
            let audit = AuditRecord::for_unloaded(
                &tool.identity(),
                &context(now, started.elapsed(), &result),
                &result,
            )?;
            return Ok((result, audit));
        }
    };
    match call(tool, &package, now, args).await {
        Ok(answered) => Ok(answered),
        Err(failure) => {
            eprintln!("{}: {failure}", tool.binary_name());
            let result = failure.to_tool_result(origin(tool))?;
            let audit = AuditRecord::for_call(
                &package,
                &context(now, started.elapsed(), &result),
                &result,
            )?;
            Ok((result, audit))
        }
    }
}

fn context(now: Timestamp, duration: Duration, result: &ToolResult) -> CallContext {
    CallContext {
        time: now,
        policy_id: None,
        ticket: None,
        duration,
        output_bytes: u64::try_from(result.text().len()).unwrap_or(u64::MAX),
        blocked_secrets: Vec::new(),
    }
}

/// The running binary's own deployable package, for this tool's identity.
pub(crate) fn locate(tool: Tool) -> Result<Package, RuntimeFailure> {
    let failed =
        |detail: String| RuntimeFailure::new(RuntimeFailureKind::PackageLoadFailed, detail);
    let exe = std::env::current_exe()
        .map_err(|e| failed(format!("the running binary cannot be located: {e}")))?;
    let package = own_package(&exe).map_err(|e| failed(e.to_string()))?;
    if package.identity() != &tool.identity() || package.manifest().provider != tool.provider() {
        return Err(failed(format!(
            "{} serves {}, but its package folder is {}",
            tool.binary_name(),
            tool.identity(),
            package.identity()
        )));
    }
    Ok(package)
}

/// Reads the runtime context and runs the call; a runtime-context failure is returned for
/// the caller to turn into a result.
async fn call(
    tool: Tool,
    package: &Package,
    now: Timestamp,
    args: impl FnOnce() -> Result<String, RuntimeFailure>,
) -> Result<(ToolResult, AuditRecord), RuntimeFailure> {
    let args = args()?;
    let binding = bind_secrets(package)?;
    let envelope = read_envelope()?;
    let keys = read_keys()?;
    let call = SandboxCall {
        package,
        binding: &binding,
        policy: PolicyInput::Envelope {
            envelope: &envelope,
            keys: &keys,
        },
        args: &args,
        now,
    };
    match tool {
        Tool::Clinic => {
            let (connector, config, secrets) = tools::clinic(package)?;
            run(&connector, &config, &secrets, call).await
        }
        Tool::Manus => {
            let (connector, config, secrets) = tools::manus(package)?;
            run(&connector, &config, &secrets, call).await
        }
        Tool::Wetech => {
            let (connector, config, secrets) = tools::wetech(package)?;
            run(&connector, &config, &secrets, call).await
        }
    }
}

async fn run<C: Connector>(
    connector: &C,
    config: &C::Config,
    secrets: &C::Secrets,
    call: SandboxCall<'_>,
) -> Result<(ToolResult, AuditRecord), RuntimeFailure> {
    let outcome = run_sandbox_call(connector, config, secrets, call)
        .await
        .map_err(|e| {
            RuntimeFailure::new(
                RuntimeFailureKind::ConfigInvalid,
                format!("the call could not produce a result: {e}"),
            )
        })?;
    Ok((outcome.result, outcome.audit))
}

fn read_args() -> Result<String, RuntimeFailure> {
    let mut args = String::new();
    std::io::stdin().read_to_string(&mut args).map_err(|e| {
        RuntimeFailure::new(
            RuntimeFailureKind::InputUnreadable,
            format!("the arguments on stdin cannot be read as UTF-8 text: {e}"),
        )
    })?;
    Ok(args)
}

/// Binds the secrets the package's auth binding names, read from the variables it
/// injects them as, to exactly this package's digest.
fn bind_secrets(package: &Package) -> Result<SecretBinding, RuntimeFailure> {
    let failed = |detail: String| RuntimeFailure::new(RuntimeFailureKind::SecretNotBound, detail);
    let mut values = SecretValues::new();
    for spec in &package.manifest().auth.secrets {
        let value = get(&spec.env).ok_or_else(|| {
            failed(format!(
                "secret {} is not injected: {} is not set",
                spec.name, spec.env
            ))
        })?;
        values.insert(spec.name.clone(), SecretString::from(value));
    }
    // The binding's error names secrets and rules, never values.
    SecretBinding::bind(package, values)
        .map_err(|e| failed(format!("the injected secrets cannot be bound: {e}")))
}

fn read_envelope() -> Result<SignedPolicy, RuntimeFailure> {
    read_runtime_envelope().map_err(|e| {
        let kind = match e {
            PolicyError::RuntimeContext(_) => RuntimeFailureKind::ContextMissing,
            _ => RuntimeFailureKind::ContextInvalid,
        };
        RuntimeFailure::new(
            kind,
            format!("the trusted policy envelope ({TRUSTED_CONTEXT_ENV}): {e}"),
        )
    })
}

/// The verification key ring. A sandbox that was also given the signing key (a
/// misdeployment: anything running in it could sign policy) runs nothing.
fn read_keys() -> Result<KeyRing, RuntimeFailure> {
    if get(SIGNING_KEY_ENV).is_some() {
        return Err(RuntimeFailure::new(
            RuntimeFailureKind::ContextInvalid,
            format!(
                "{SIGNING_KEY_ENV} is set in a tool sandbox: the policy signing key must stay \
                 with the signer; give the sandbox only {POLICY_KEYS_ENV}"
            ),
        ));
    }
    let keys = get(POLICY_KEYS_ENV).ok_or_else(|| {
        RuntimeFailure::new(
            RuntimeFailureKind::ContextMissing,
            format!("{POLICY_KEYS_ENV} is not set: no verification keys"),
        )
    })?;
    keys.parse::<KeyRing>().map_err(|e| {
        RuntimeFailure::new(
            RuntimeFailureKind::ContextInvalid,
            format!("{POLICY_KEYS_ENV} cannot be read: {e}"),
        )
    })
}
