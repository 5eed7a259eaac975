//! What a tool process reads once and keeps for all its calls: its own deployable
//! package (its digest computed once, over the file the process was started from), the
//! secrets bound to that digest, the verification keys and the transport built from the
//! deployment configuration. Per call only the model's arguments and the trusted policy
//! envelope are read: the envelope changes with every request, while the rest cannot
//! change during the process's life (its environment is its own, its running code is
//! the file it hashed). The one-shot entrypoint serves one call with it, the MCP server
//! every call of its session.

use std::time::{Duration, Instant};

use evidence_package::{AuditRecord, CallContext, Package, SecretBinding, SecretValues};
use evidence_policy::{KeyRing, PolicyError, SignedPolicy, read_runtime_envelope};
use evidence_result::{Operation, Origin, PolicySource, ToolResult};
use jiff::Timestamp;
use secrecy::SecretString;

use crate::ToolError;
use crate::call::{PolicyInput, SandboxCall, run_sandbox_call};
use crate::context::{POLICY_KEYS_ENV, SIGNING_KEY_ENV, TRUSTED_CONTEXT_ENV, get};
use crate::deploy::running_package;
use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::stamp::FolderStamp;
use crate::tools::{PackageTool, Tool, Transport};

/// The fixed part of a tool process's runtime context (see the module documentation).
/// Each part that could not be read keeps its failure, which answers every call in the
/// order a call reads them: arguments, secrets, envelope, keys, configuration.
pub(crate) struct Served<T: PackageTool> {
    package: Package,
    stamp: FolderStamp,
    binding: Result<SecretBinding, RuntimeFailure>,
    keys: Result<KeyRing, RuntimeFailure>,
    transport: Result<Transport<T::Connector>, RuntimeFailure>,
}

impl<T: PackageTool> std::fmt::Debug for Served<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Served")
            .field("package", &self.package.identity())
            .field("digest", &self.package.digest())
            .finish_non_exhaustive()
    }
}

/// The origin of a result of `tool` under a trusted envelope.
pub(crate) fn origin(tool: Tool) -> Origin {
    Origin {
        package: tool.identity(),
        provider: tool.provider(),
        operation: Operation::QueryRange,
        policy_source: Some(PolicySource::TrustedEnvelope),
    }
}

impl<T: PackageTool> Served<T> {
    /// Loads the process's own package (hashed here, once) and reads the fixed runtime
    /// context. `Err` when the package does not load or is not this tool's: then no call
    /// can run.
    pub(crate) fn start() -> Result<Self, RuntimeFailure> {
        let tool = T::TOOL;
        let failed =
            |detail: String| RuntimeFailure::new(RuntimeFailureKind::PackageLoadFailed, detail);
        let (package, stamp) = running_package().map_err(|e| failed(e.to_string()))?;
        if package.identity() != &tool.identity() || package.manifest().provider != tool.provider()
        {
            return Err(failed(format!(
                "{} serves {}, but its package folder is {}",
                tool.binary_name(),
                tool.identity(),
                package.identity()
            )));
        }
        let binding = bind_secrets(&package);
        let keys = read_keys();
        let transport = T::transport(&package);
        Ok(Served {
            package,
            stamp,
            binding,
            keys,
            transport,
        })
    }

    /// The package this process serves, as hashed at start.
    pub(crate) fn package(&self) -> &Package {
        &self.package
    }

    /// One call: `args` gives the model's arguments; the envelope is read now. Every
    /// runtime-context failure is a result with its audit record; `Err` only when not
    /// even a failure result can be built. The audit record says when the package
    /// folder on disk changed after this process hashed it (the call still ran with
    /// what was hashed: the running code and the manifest read at start).
    pub(crate) async fn answer(
        &self,
        args: impl FnOnce() -> Result<String, RuntimeFailure>,
    ) -> Result<(ToolResult, AuditRecord), ToolError> {
        let started = Instant::now();
        let now = Timestamp::now();
        let (result, audit) = match self.call(now, args).await {
            Ok(answered) => answered,
            Err(failure) => {
                eprintln!("{}: {failure}", T::TOOL.binary_name());
                let result = failure.to_tool_result(origin(T::TOOL))?;
                let audit = AuditRecord::for_call(
                    &self.package,
                    &context(now, started.elapsed(), &result),
                    &result,
                )?;
                (result, audit)
            }
        };
        Ok((result, audit.with_folder_changed(self.stamp.changed())))
    }

    async fn call(
        &self,
        now: Timestamp,
        args: impl FnOnce() -> Result<String, RuntimeFailure>,
    ) -> Result<(ToolResult, AuditRecord), RuntimeFailure> {
        let args = args()?;
        let binding = self.binding.as_ref().map_err(Clone::clone)?;
        let envelope = read_envelope()?;
        let keys = self.keys.as_ref().map_err(Clone::clone)?;
        let transport = self.transport.as_ref().map_err(Clone::clone)?;
        let call = SandboxCall {
            package: &self.package,
            binding,
            policy: PolicyInput::Envelope {
                envelope: &envelope,
                keys,
            },
            args: &args,
            now,
        };
        let outcome = run_sandbox_call(
            &transport.connector,
            &transport.config,
            &transport.secrets,
            call,
        )
        .await
        .map_err(|e| {
            RuntimeFailure::new(
                RuntimeFailureKind::ConfigInvalid,
                format!("the call could not produce a result: {e}"),
            )
        })?;
        Ok((outcome.result, outcome.audit))
    }
}

/// The answer of a process whose own package did not load: the failure as a result and
/// the audit record of an unloaded package.
pub(crate) fn unloaded(
    tool: Tool,
    failure: &RuntimeFailure,
    started: Instant,
) -> Result<(ToolResult, AuditRecord), ToolError> {
    eprintln!("{}: {failure}", tool.binary_name());
    let now = Timestamp::now();
    let result = failure.to_tool_result(origin(tool))?;
    let audit = AuditRecord::for_unloaded(
        &tool.identity(),
        &context(now, started.elapsed(), &result),
        &result,
    )?;
    Ok((result, audit))
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
