//! A sandbox of one tool: the package it serves (its digest computed once) and the
//! runtime context it runs under ([`RuntimeContext`]), from which it binds the secrets
//! to that digest, takes the verification keys and builds the transport once. Per call
//! only the model's arguments and the trusted policy (the envelope the runtime writes
//! per request, or the package's static canary when its manifest says so) are read. The
//! one-shot entrypoint serves one call with it, the MCP server every call of its
//! session, and an embedder builds one in memory ([`Sandbox::new`]). When the context
//! names a turn ledger, a call whose policy verified runs only when the turn of that
//! policy admits it there (see `crate::ledger`); a refusal is answered without running,
//! with its audit record.
//!
//! A runtime-context failure answers the model with its code, class and a fixed
//! sentence; its detail (paths, hosts, ports, users, databases) goes to the call's audit
//! record (`operator_detail`) and to stderr, never to the model.
//!
//! Every call runs within its one deadline (`crate::deadline`), counted from the start
//! the caller gives: the admission is raced against it too, and a call it cuts off
//! answers the typed timeout with its audit record.

use std::time::{Duration, Instant};

use evidence_connectors::{Connector as _, CutOff, Deadline};
use evidence_materialize::TurnLimits;
use evidence_package::Traceparent;
use evidence_package::{
    AuditRecord, CallContext, Package, SecretBinding, SecretValues, manifest::PolicyDelivery,
};
use evidence_policy::{CanaryPolicy, TrustedPolicy};
use evidence_result::{Operation, Origin, ToolResult};
use jiff::Timestamp;

use crate::ToolError;
use crate::call::{PolicyInput, SandboxCall, cut_off_result, prepare};
use crate::deadline::{call_deadline, deadline_margin, give_up_after, package_timeout};
use crate::deploy::running_package;
use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::ledger::{Admitted, TurnSpec};
use crate::metrics::{Phase, Store};
use crate::runtime_context::RuntimeContext;
use crate::secret_file::file_variable;
use crate::stamp::FolderStamp;
use crate::tool_kind::Tool;
use crate::tools::{PackageTool, Transport};

/// The envelope of one call under per-request delivery: the runtime context's (its file
/// or the one held), or the current envelope of the session the call presented to a
/// server over HTTP (or the failure of finding it), with the session's digest.
#[derive(Debug, Clone)]
pub(crate) enum CallEnvelope {
    /// The runtime context's envelope.
    Context,
    /// The session's current envelope and the session's digest.
    Session(Result<(evidence_policy::SignedPolicy, evidence_result::Digest), RuntimeFailure>),
}

/// Where a sandbox's trusted policy comes from, as its manifest says.
enum Delivery {
    /// The per-request envelope of the runtime context, verified with its keys.
    Envelope,
    /// The package's own static canary policy (read from its package file at start).
    Canary(Result<Box<TrustedPolicy>, RuntimeFailure>),
}

/// A sandbox of the tool `T` (see the module documentation). Each part of the context
/// that could not be read keeps its failure, which answers every call in the order a
/// call reads them: arguments, secrets, policy, keys, configuration.
/// [`Sandbox::readiness`] reports the first of them without a call.
pub struct Sandbox<T: PackageTool> {
    package: Package,
    context: RuntimeContext,
    stamp: Option<FolderStamp>,
    delivery: Delivery,
    binding: Result<SecretBinding, RuntimeFailure>,
    transport: Result<Transport<T::Connector>, RuntimeFailure>,
}

impl<T: PackageTool> std::fmt::Debug for Sandbox<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("package", &self.package.identity())
            .field("digest", &self.package.digest())
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

/// The origin of a result of `tool` under `package`'s policy delivery.
pub(crate) fn origin(tool: Tool, delivery: Option<&PolicyDelivery>) -> Origin {
    Origin {
        package: tool.identity(),
        provider: tool.provider(),
        operation: Operation::QueryRange,
        policy_source: Some(
            delivery
                .map(PolicyDelivery::policy_source)
                .unwrap_or(evidence_result::PolicySource::TrustedEnvelope),
        ),
    }
}

impl<T: PackageTool> Sandbox<T> {
    /// A sandbox of `package` under `context`: binds the context's secrets to the
    /// package's digest, reads the static canary when the manifest delivers policy that
    /// way, and builds the transport, keeping each failure for the calls. `Err` when the
    /// package is not `T`'s: then no call can run.
    pub fn new(package: Package, context: RuntimeContext) -> Result<Self, RuntimeFailure> {
        let tool = T::TOOL;
        if package.identity() != &tool.identity() || package.manifest().provider != tool.provider()
        {
            return Err(RuntimeFailure::new(
                RuntimeFailureKind::PackageLoadFailed,
                format!(
                    "{} serves {}, but its package is {}",
                    tool.binary_name(),
                    tool.identity(),
                    package.identity()
                ),
            ));
        }
        let delivery = match &package.manifest().policy_delivery {
            PolicyDelivery::PerRequestEnvelope => Delivery::Envelope,
            PolicyDelivery::StaticCanary { file } => {
                Delivery::Canary(canary_policy(&package, file).map(Box::new))
            }
        };
        let binding = bind_secrets(&package, &context);
        let transport = T::transport(&package, &context);
        Ok(Sandbox {
            package,
            context,
            stamp: None,
            delivery,
            binding,
            transport,
        })
    }

    /// The sandbox of this process: its own deployable package (hashed here, once, over
    /// the file the process was started from) under `context`, read from the process
    /// environment ([`RuntimeContext::from_env`]), to which the secret variables the
    /// package's auth binding names are added.
    pub(crate) fn start(mut context: RuntimeContext) -> Result<Self, RuntimeFailure> {
        let failed =
            |detail: String| RuntimeFailure::new(RuntimeFailureKind::PackageLoadFailed, detail);
        let (package, stamp) = running_package().map_err(|e| failed(e.to_string()))?;
        context.read_secrets_from_env(
            package
                .manifest()
                .auth
                .secrets
                .iter()
                .map(|s| s.env.as_str()),
        );
        let mut sandbox = Self::new(package, context)?;
        sandbox.stamp = Some(stamp);
        Ok(sandbox)
    }

    /// The package this sandbox serves, as hashed when it was loaded.
    pub fn package(&self) -> &Package {
        &self.package
    }

    /// Ends what the connector keeps between calls (the Wetech server's warm browser:
    /// its processes stopped, its profile removed); the sandbox's calls fail after it.
    pub async fn close(&self) -> Result<(), evidence_connectors::CloseError> {
        match &self.transport {
            Ok(transport) => transport.connector.close().await,
            Err(_) => Ok(()),
        }
    }

    /// The runtime context it runs under.
    pub fn context(&self) -> &RuntimeContext {
        &self.context
    }

    /// Replaces the envelope the next calls use (an embedder serving one request after
    /// another).
    pub fn set_envelope(&mut self, envelope: evidence_policy::SignedPolicy) {
        self.context.set_envelope(envelope);
    }

    /// What can be checked without a call: the secrets bound, a policy source present
    /// (the envelope file itself is written per request, so only its name is checked),
    /// the verification keys read (for envelopes) and the transport built. `Err` names
    /// the first part that would fail every call.
    pub fn readiness(&self) -> Result<(), RuntimeFailure> {
        self.binding.as_ref().map_err(Clone::clone)?;
        match &self.delivery {
            Delivery::Envelope => {
                self.context.envelope_source()?;
                self.context.keys()?;
            }
            Delivery::Canary(policy) => {
                policy.as_ref().map_err(Clone::clone)?;
            }
        }
        self.transport.as_ref().map(drop).map_err(Clone::clone)
    }

    /// One call with the model's arguments as the JSON text it wrote: the result and
    /// its audit record (written by the caller). Every runtime-context failure is a
    /// result with its audit record; `Err` only when not even a failure result can be
    /// built.
    ///
    /// The call runs within its package's deadline from now.
    pub async fn answer(&self, args: &str) -> Result<(ToolResult, AuditRecord), ToolError> {
        let started = Instant::now();
        self.answer_with(
            || Ok(args.to_owned()),
            CallEnvelope::Context,
            started,
            self.deadline(started),
            None,
        )
        .await
    }

    /// The names of the bound secrets `text` holds, in any encoding the output guard
    /// knows, when it holds any (what a log line is checked with).
    pub(crate) fn secrets_in(&self, text: &str) -> Option<Vec<String>> {
        let binding = self.binding.as_ref().ok()?;
        match binding.guard().scan_text(text) {
            evidence_package::guard::Verdict::Clean => None,
            evidence_package::guard::Verdict::Blocked(blocked) => Some(blocked.secrets),
        }
    }

    /// Whether the package folder on disk changed since this process hashed it.
    pub(crate) fn package_changed(&self) -> bool {
        self.stamp.as_ref().is_some_and(FolderStamp::changed)
    }

    /// The deadline of a call of this sandbox's package that started at `started`.
    pub fn deadline(&self, started: Instant) -> Deadline {
        call_deadline(&self.package, started)
    }

    /// [`Sandbox::answer`] with arguments that may fail to be read, for a call that
    /// started at `started` and runs within `deadline`. The audit record says when the
    /// package folder on disk changed after this process hashed it (the call still ran
    /// with what was hashed: the running code and the manifest read at start).
    pub(crate) async fn answer_with(
        &self,
        args: impl FnOnce() -> Result<String, RuntimeFailure>,
        envelope: CallEnvelope,
        started: Instant,
        deadline: Deadline,
        traceparent: Option<Traceparent>,
    ) -> Result<(ToolResult, AuditRecord), ToolError> {
        let now = Timestamp::now();
        let (result, audit) = match self.call(now, deadline, args, envelope).await {
            Ok(answered) => answered,
            Err(failure) => {
                let origin = origin(T::TOOL, Some(&self.package.manifest().policy_delivery));
                let result = failure.to_tool_result(origin)?;
                let audit = AuditRecord::for_call(
                    &self.package,
                    &context(now, started.elapsed(), &result),
                    &result,
                )?
                .with_operator_detail(failure.detail);
                (result, audit)
            }
        };
        let audit = audit.with_traceparent(traceparent);
        tell_operator(T::TOOL, &audit);
        let changed = self.stamp.as_ref().is_some_and(FolderStamp::changed);
        Ok((result, audit.with_folder_changed(changed)))
    }

    /// The answer of a call that never started its work, cut off by `deadline` at `cut`
    /// (an MCP call that waited for a slot until its deadline): the typed timeout for
    /// the whole call and its audit record.
    pub(crate) fn answer_cut_off(
        &self,
        started: Instant,
        deadline: &Deadline,
        cut: CutOff,
    ) -> Result<(ToolResult, AuditRecord), ToolError> {
        let result = cut_off_result(&self.package, None, deadline, cut)?;
        let audit = AuditRecord::for_call(
            &self.package,
            &context(Timestamp::now(), started.elapsed(), &result),
            &result,
        )?;
        Ok((result, audit))
    }

    async fn call(
        &self,
        now: Timestamp,
        deadline: Deadline,
        args: impl FnOnce() -> Result<String, RuntimeFailure>,
        call_envelope: CallEnvelope,
    ) -> Result<(ToolResult, AuditRecord), RuntimeFailure> {
        let args = args()?;
        let binding = self.binding.as_ref().map_err(Clone::clone)?;
        let (envelope, session, canary);
        let policy = match &self.delivery {
            Delivery::Envelope => {
                (envelope, session) = match call_envelope {
                    CallEnvelope::Context => (self.context.envelope()?, None),
                    CallEnvelope::Session(found) => {
                        let (envelope, session) = found?;
                        (envelope, Some(session))
                    }
                };
                PolicyInput::Envelope {
                    envelope: &envelope,
                    keys: self.context.keys()?,
                    session: session.as_ref(),
                }
            }
            Delivery::Canary(policy) => {
                let policy = policy.as_ref().map_err(Clone::clone)?;
                canary = CanaryPolicy::opt_in(
                    TrustedPolicy::clone(policy),
                    self.package.identity(),
                    self.package.manifest().provider,
                    now,
                )
                .map_err(|e| {
                    RuntimeFailure::new(
                        RuntimeFailureKind::PolicyVerificationFailed,
                        format!("the package's static canary policy: {e}"),
                    )
                })?;
                PolicyInput::Canary(&canary)
            }
        };
        let transport = self.transport.as_ref().map_err(Clone::clone)?;
        let ledger = self.context.turn_ledger()?;
        let call = SandboxCall {
            package: &self.package,
            binding,
            policy,
            args: &args,
            now,
        };
        let no_result = |e: ToolError| {
            RuntimeFailure::new(
                RuntimeFailureKind::ConfigInvalid,
                format!("the call could not produce a result: {e}"),
            )
        };
        let locking = Instant::now();
        let prepared = prepare(call).map_err(no_result)?.within(deadline.clone());
        let package = self.package.identity().as_str();
        let metrics = crate::metrics::global();
        metrics.phase(package, Phase::VerifyLock, locking.elapsed());
        let cut_off = |prepared: crate::PreparedCall<'_>, cut| {
            prepared
                .answer_cut_off(cut)
                .map(|outcome| (outcome.result, outcome.audit))
                .map_err(no_result)
        };
        if deadline.is_over() {
            return cut_off(
                prepared,
                CutOff::BeforeQuery("before the call was admitted"),
            );
        }
        // With a turn ledger, a call whose policy verified runs only when the turn of
        // that policy admits it; a policy that did not verify names no turn, and its call
        // sends nothing anyway.
        // The ledger's file lock may be waited for: off the async workers.
        let admission = match (ledger, prepared.policy()) {
            (Some(ledger), Some(policy)) => {
                let (ledger, plan) = (ledger.clone(), prepared.plan());
                let timeout = package_timeout(&self.package);
                let wait = deadline.remaining().unwrap_or(timeout);
                let spec = TurnSpec {
                    policy_id: policy.policy_id.clone(),
                    limits: TurnLimits::new(policy.limits.max_calls_per_turn),
                    expires_at: policy.expires_at,
                    wait,
                    runs_for: wait + deadline_margin(timeout),
                    log_within: give_up_after(timeout),
                };
                let backend = ledger.backend();
                let admitting = Instant::now();
                let admit = off_workers(move || ledger.admit(&spec, &plan));
                let Ok(admitted) = deadline.run(admit).await else {
                    metrics.store(Store::TurnLedger, backend, admitting.elapsed(), true);
                    // An admission that completes after this still holds its running
                    // file until the worker ends; the next admission finds it abandoned.
                    let cut = CutOff::BeforeQuery("while the turn ledger was waited for");
                    return cut_off(prepared, cut);
                };
                let failed = !matches!(admitted, Ok(Ok(_)));
                metrics.store(Store::TurnLedger, backend, admitting.elapsed(), failed);
                metrics.phase(package, Phase::Admission, admitting.elapsed());
                Some(admitted?.map_err(|e| e.to_failure())?)
            }
            _ => None,
        };
        let running = match admission {
            None => None,
            Some(Admitted::Refused(refusal)) => {
                let outcome = prepared.answer_unrun(refusal.result).map_err(no_result)?;
                return Ok((outcome.result, outcome.audit));
            }
            Some(Admitted::Run(running)) => Some(running),
        };
        let outcome = prepared
            .run(&transport.connector, &transport.config, &transport.secrets)
            .await
            .map_err(no_result)?;
        // The result is there: an answer the ledger cannot take leaves the call to be
        // found abandoned by the next admission.
        if let Some(running) = running {
            let answer = running.answer(&outcome.result);
            if let Err(e) = off_workers(move || answer.log())
                .await
                .and_then(|logged| logged.map_err(|e| e.to_failure()))
            {
                crate::log::error(
                    "ledger_answer_not_logged",
                    &format!("{}: {e}", T::TOOL.binary_name()),
                );
            }
        }
        Ok((outcome.result, outcome.audit))
    }
}

/// Runs blocking file work (the turn ledger's lock) on the blocking pool.
async fn off_workers<R: Send + 'static>(
    work: impl FnOnce() -> R + Send + 'static,
) -> Result<R, RuntimeFailure> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        RuntimeFailure::new(
            RuntimeFailureKind::ContextInvalid,
            format!("the turn ledger could not be used: {e}"),
        )
    })
}

/// The answer of a process whose own package did not load: the failure as a result and
/// the audit record of an unloaded package.
pub(crate) fn unloaded(
    tool: Tool,
    failure: &RuntimeFailure,
    started: Instant,
) -> Result<(ToolResult, AuditRecord), ToolError> {
    let now = Timestamp::now();
    let result = failure.to_tool_result(origin(tool, None))?;
    let audit = AuditRecord::for_unloaded(
        &tool.identity(),
        &context(now, started.elapsed(), &result),
        &result,
    )?
    .with_operator_detail(failure.detail.clone());
    tell_operator(tool, &audit);
    Ok((result, audit))
}

/// Writes the operator's detail of a call's failure, when its record carries one, to
/// stderr (the serving process' log), with the call's error codes: what the model reads
/// only in generic words.
fn tell_operator(tool: Tool, audit: &AuditRecord) {
    if let Some(detail) = &audit.operator_detail {
        let codes: Vec<&str> = audit.error_codes.iter().map(|c| c.as_str()).collect();
        let trace = audit.traceparent.as_ref().map(|t| t.trace_id());
        let shown = trace.map(|t| format!(" (trace {t})")).unwrap_or_default();
        crate::log::line(
            crate::log::Level::Warn,
            "call_failed",
            &format!(
                "{}: {}: {detail}{shown}",
                tool.binary_name(),
                codes.join(",")
            ),
            trace,
        );
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

/// The static canary policy a package ships as its file `file` (the manifest's
/// `static_canary` delivery): unsigned trusted-policy JSON, covered by the digest.
fn canary_policy(package: &Package, file: &str) -> Result<TrustedPolicy, RuntimeFailure> {
    let invalid = |detail: String| RuntimeFailure::new(RuntimeFailureKind::ContextInvalid, detail);
    let contents = package
        .files()
        .iter()
        .find(|f| f.path() == file)
        .and_then(|f| f.contents())
        .ok_or_else(|| {
            invalid(format!(
                "the static canary policy file {file} is not in the package"
            ))
        })?;
    serde_json::from_slice(contents).map_err(|e| {
        invalid(format!(
            "the static canary policy file {file} is not a trusted policy: {e}"
        ))
    })
}

/// Binds the secrets the package's auth binding names, taken from the variables it
/// injects them as, to exactly this package's digest.
fn bind_secrets(
    package: &Package,
    context: &RuntimeContext,
) -> Result<SecretBinding, RuntimeFailure> {
    let kind = RuntimeFailureKind::SecretNotBound;
    let mut values = SecretValues::new();
    for spec in &package.manifest().auth.secrets {
        let what = format!("{} (or {})", spec.env, file_variable(&spec.env));
        let value = context
            .secret(&spec.env)
            .require(&what, kind, kind)
            .map_err(|f| {
                RuntimeFailure::new(
                    kind,
                    format!("secret {} is not injected: {}", spec.name, f.detail),
                )
            })?;
        values.insert(spec.name.clone(), value.clone());
    }
    // The binding's error names secrets and rules, never values.
    SecretBinding::bind(package, values).map_err(|e| {
        RuntimeFailure::new(kind, format!("the injected secrets cannot be bound: {e}"))
    })
}
