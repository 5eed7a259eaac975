//! The one tool-sandbox call: verify the trusted policy for this exact package digest,
//! read and lock the model's arguments, run the connector, pass the result through the
//! output guard, and produce the audit record. Everything before the connector is local:
//! nothing leaves the sandbox and no browser starts until the request is locked.
//!
//! [`run_sandbox_call`] does it all at once. An embedder that keeps turn control splits
//! it: [`prepare`] (verify and lock, local), [`PreparedCall::plan`] (the call
//! `Turn::admit` judges), [`PreparedCall::run`] (connector, guard, audit). Both go through
//! the same code; there is no other way to run a connector from this crate.
//!
//! A prepared call has one deadline, by default its package's ([`crate::deadline`])
//! counted from [`prepare`]; [`PreparedCall::within`] sets an earlier start or a
//! cancellation. The connector gets it, and a connector that overruns it all the same
//! is given up on shortly after it, with the typed timeout as its result.

use std::time::Instant;

use evidence_connectors::{Connector, CutOff, Deadline, deadline_failure};
use evidence_materialize::Call;
use evidence_package::{AuditRecord, CallContext, Package, SecretBinding};
use evidence_policy::{
    CanaryPolicy, KeyRing, LockedRequest, SignedPolicy, TrustedPolicy, lock, lock::LockedItem,
};
use evidence_result::{
    Correction, Details, Digest, ErrorCode, Failure, FailureClass, Item, Operation, Origin,
    PolicySource, Provider, ToolResult,
};
use jiff::Timestamp;

use crate::ToolError;
use crate::deadline::{call_deadline, give_up_after, package_timeout};
use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::plan::{plan_answered, plan_locked};

/// Where the trusted policy of a call comes from.
#[derive(Debug, Clone, Copy)]
pub enum PolicyInput<'a> {
    /// A signed per-request envelope from the runtime context, verified with these keys.
    Envelope {
        /// The envelope.
        envelope: &'a SignedPolicy,
        /// The verification key ring.
        keys: &'a KeyRing,
        /// The digest of the session token the call presented (a call over HTTP), or
        /// `None`: the verified policy must name exactly this session
        /// ([`evidence_policy::session::check_session`]).
        session: Option<&'a Digest>,
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

/// What preparing decided: a locked request to run, or the result that answers the call
/// without any network work.
#[derive(Debug, Clone)]
enum Prepared {
    Locked(LockedRequest),
    Answered(Box<ToolResult>),
}

/// A call verified and locked, not yet run. Made by [`prepare`].
#[derive(Debug, Clone)]
pub struct PreparedCall<'a> {
    package: &'a Package,
    binding: &'a SecretBinding,
    now: Timestamp,
    started: Instant,
    deadline: Deadline,
    policy: Option<TrustedPolicy>,
    prepared: Prepared,
    /// The detail of a runtime-context failure that answered the call, for the audit
    /// record only (the result holds the kind's fixed sentence).
    operator_detail: Option<String>,
}

/// The origin of results of `package` under `source`.
fn origin_of(package: &Package, source: PolicySource) -> Origin {
    Origin {
        package: package.identity().clone(),
        provider: package.manifest().provider,
        operation: Operation::QueryRange,
        policy_source: Some(source),
    }
}

/// The codes the sandbox call itself produces (besides [`RuntimeFailureKind`] and the
/// codes of locking, connectors and the guard), with their class.
pub(crate) const CALL_CODES: [(&str, FailureClass); 2] = [
    (INVALID_JSON, FailureClass::InvalidArgument),
    (RESULT_CONTRACT, FailureClass::Internal),
];
const INVALID_JSON: &str = "invalid_json";
const RESULT_CONTRACT: &str = "result_contract";

fn local_failure(
    origin: Origin,
    code: &str,
    class: FailureClass,
    detail: String,
) -> Result<ToolResult, ToolError> {
    let mut failure = Failure::new(ErrorCode::new(code)?, class, detail);
    if !class.allows_correction() {
        failure = failure.with_correction(Correction::for_class(class, None, Vec::new()));
    }
    Ok(ToolResult::new(Details::failure(
        origin, None, None, failure,
    ))?)
}

/// Verifies the trusted policy for the package's recomputed digest and locks the model's
/// arguments. Local only: nothing is sent and no browser starts. Every outcome is a
/// [`PreparedCall`]; `Err` only when not even a failure result can be built.
pub fn prepare(call: SandboxCall<'_>) -> Result<PreparedCall<'_>, ToolError> {
    let started = Instant::now();
    let package = call.package;
    let source = match call.policy {
        PolicyInput::Envelope { .. } => PolicySource::TrustedEnvelope,
        PolicyInput::Canary(_) => PolicySource::StaticCanary,
    };
    let origin = origin_of(package, source);
    let deadline = call_deadline(package, started);
    let answered = |result: ToolResult, policy: Option<TrustedPolicy>| PreparedCall {
        package,
        binding: call.binding,
        now: call.now,
        started,
        deadline: deadline.clone(),
        policy,
        prepared: Prepared::Answered(Box::new(result)),
        operator_detail: None,
    };
    // A runtime-context failure: the model reads its kind, the audit record its detail.
    let failed = |failure: RuntimeFailure| -> Result<PreparedCall<'_>, ToolError> {
        let mut prepared = answered(failure.to_tool_result(origin.clone())?, None);
        prepared.operator_detail = Some(failure.detail);
        Ok(prepared)
    };
    if call.binding.digest() != package.digest() || call.binding.identity() != package.identity() {
        return failed(RuntimeFailure::new(
            RuntimeFailureKind::SecretNotBound,
            "the injected secrets are bound to another package digest",
        ));
    }
    let policy = match call.policy {
        PolicyInput::Envelope {
            envelope,
            keys,
            session,
        } => evidence_policy::verify(
            envelope,
            keys,
            &package.digest(),
            package.identity(),
            package.manifest().provider,
            call.now,
        )
        .and_then(|policy| {
            evidence_policy::session::check_session(&policy, session).map(|()| policy)
        }),
        PolicyInput::Canary(canary) => Ok(canary.policy().clone()),
    };
    let policy = match policy {
        Ok(policy) => policy,
        Err(why) => {
            return failed(RuntimeFailure::new(
                RuntimeFailureKind::PolicyVerificationFailed,
                format!("the trusted policy did not verify for this package: {why}"),
            ));
        }
    };
    let args = match serde_json::from_str::<serde_json::Value>(call.args) {
        Ok(args) => args,
        Err(e) => {
            let result = local_failure(
                origin,
                INVALID_JSON,
                FailureClass::InvalidArgument,
                format!("the arguments are not valid JSON: {e}"),
            )?;
            return Ok(answered(result, Some(policy)));
        }
    };
    match lock(&policy, source, &args, &package.manifest().scope_labels) {
        Ok(locked) => Ok(PreparedCall {
            package,
            binding: call.binding,
            now: call.now,
            started,
            deadline,
            policy: Some(policy),
            prepared: Prepared::Locked(locked),
            operator_detail: None,
        }),
        Err(rejection) => {
            let result = rejection.to_tool_result(origin)?;
            Ok(answered(result, Some(policy)))
        }
    }
}

impl PreparedCall<'_> {
    /// The call as `Turn::admit` judges it: package, each `queryId` and its request
    /// digest, taken from the locked request (or from the local answer).
    pub fn plan(&self) -> Call {
        match &self.prepared {
            Prepared::Locked(request) => plan_locked(request),
            Prepared::Answered(result) => plan_answered(
                self.package.identity().clone(),
                self.package.manifest().provider,
                result,
            ),
        }
    }

    /// The same call with `deadline` instead of its package's deadline counted from
    /// [`prepare`] (a call that started earlier, or one its client may cancel).
    pub fn within(mut self, deadline: Deadline) -> Self {
        self.deadline = deadline;
        self
    }

    /// The deadline the call runs within.
    pub fn deadline(&self) -> &Deadline {
        &self.deadline
    }

    /// Answers the call, without running it, with the typed timeout of its deadline cut
    /// off `cut` (waiting for the turn ledger, for instance): guarded and audited as
    /// every call.
    pub(crate) fn answer_cut_off(self, cut: CutOff) -> Result<SandboxOutcome, ToolError> {
        let result = cut_off_result(self.package, self.locked(), &self.deadline, cut)?;
        self.finish(result)
    }

    /// The trusted policy, when it verified.
    pub(crate) fn policy(&self) -> Option<&TrustedPolicy> {
        self.policy.as_ref()
    }

    /// Answers the call with `result` without running anything (a turn's refusal): the
    /// output guard and the audit record as for every call.
    pub(crate) fn answer_unrun(self, result: ToolResult) -> Result<SandboxOutcome, ToolError> {
        self.finish(result)
    }

    /// The locked request, when the arguments locked.
    pub fn locked(&self) -> Option<&LockedRequest> {
        match &self.prepared {
            Prepared::Locked(request) => Some(request),
            Prepared::Answered(_) => None,
        }
    }

    /// Runs the connector on the locked request within the call's deadline (nothing
    /// runs for a call answered locally), passes the result through the output guard and
    /// makes the audit record. A call whose deadline is already over sends nothing and
    /// answers the typed timeout; a connector still running a quarter of the margin after
    /// the deadline is dropped and answered the same way.
    pub async fn run<C: Connector>(
        self,
        connector: &C,
        config: &C::Config,
        secrets: &C::Secrets,
    ) -> Result<SandboxOutcome, ToolError> {
        let result = match &self.prepared {
            Prepared::Answered(result) => (**result).clone(),
            Prepared::Locked(_) if self.deadline.is_over() => {
                let cut = CutOff::BeforeQuery("before the connector started");
                cut_off_result(self.package, self.locked(), &self.deadline, cut)?
            }
            Prepared::Locked(request) => {
                let asked = std::time::Instant::now();
                let call = connector.call_within(request, config, secrets, &self.deadline);
                let given_up = self
                    .deadline
                    .instant()
                    .map(|at| at + give_up_after(package_timeout(self.package)));
                let ran = match given_up {
                    Some(at) => tokio::time::timeout_at(at, call).await.ok(),
                    None => Some(call.await),
                };
                crate::metrics::global().phase(
                    self.package.identity().as_str(),
                    crate::metrics::Phase::Provider,
                    asked.elapsed(),
                );
                match ran {
                    Some(Ok(result)) => result,
                    Some(Err(e)) => local_failure(
                        request.origin(),
                        RESULT_CONTRACT,
                        FailureClass::Internal,
                        format!("the connector's result was refused by the contract: {e}"),
                    )?,
                    None => cut_off_result(
                        self.package,
                        Some(request),
                        &self.deadline,
                        CutOff::DuringQuery,
                    )?,
                }
            }
        };
        self.finish(result)
    }

    /// Guards `result` and makes the audit record. The output guard never fails open: a
    /// scan that cannot complete blocks like a found secret. The secrets it matched are
    /// named in the audit record only, and so is the detail of a runtime-context failure
    /// that answered the call (the result holds its kind's fixed sentence).
    fn finish(self, result: ToolResult) -> Result<SandboxOutcome, ToolError> {
        let guarding = std::time::Instant::now();
        let output_bytes = result.text().len();
        let guarded = self.binding.guard().enforce(result);
        let blocked_secrets = guarded
            .blocked()
            .map(|b| b.secrets.clone())
            .unwrap_or_default();
        let result = guarded.into_result();
        let (policy_id, ticket) = match &self.policy {
            Some(p) => (Some(p.policy_id.to_string()), Some(p.ticket.to_string())),
            None => (None, None),
        };
        let mut audit = AuditRecord::for_call(
            self.package,
            &CallContext {
                time: self.now,
                policy_id,
                ticket,
                duration: self.started.elapsed(),
                output_bytes: u64::try_from(output_bytes).unwrap_or(u64::MAX),
                blocked_secrets,
            },
            &result,
        )?
        .with_unguarded(self.binding.report().unguarded);
        if let Some(detail) = self.operator_detail {
            audit = audit.with_operator_detail(detail);
        }
        crate::metrics::global().phase(
            self.package.identity().as_str(),
            crate::metrics::Phase::Guard,
            guarding.elapsed(),
        );
        Ok(SandboxOutcome { result, audit })
    }
}

/// The typed timeout result of a call of `package` its deadline cut off at `cut`: per
/// query of the locked request when there is one (a Clinic batch answers each of its
/// queries; a query rejected while locking keeps its rejection), else for the whole
/// call.
pub(crate) fn cut_off_result(
    package: &Package,
    locked: Option<&LockedRequest>,
    deadline: &Deadline,
    cut: CutOff,
) -> Result<ToolResult, ToolError> {
    let provider = package.manifest().provider;
    let failure = deadline_failure(provider, deadline, cut);
    let Some(request) = locked else {
        let origin = origin_of(package, package.manifest().policy_delivery.policy_source());
        return Ok(ToolResult::new(Details::failure(
            origin, None, None, failure,
        ))?);
    };
    let origin = request.origin();
    let item = |item: &LockedItem| match item {
        LockedItem::Ready(q) => {
            Item::failure(q.query_id.clone(), Some(q.request_digest), failure.clone())
        }
        LockedItem::Rejected {
            query_id,
            request_digest,
            failure,
        } => Item::failure(query_id.clone(), *request_digest, failure.clone()),
    };
    let details = match (provider, request.items.as_slice()) {
        (Provider::Clinic, items) => {
            Details::batch(origin.clone(), items.iter().map(item).collect())
        }
        (_, [LockedItem::Ready(q)]) => Some(Details::failure(
            origin.clone(),
            Some(q.query_id.clone()),
            Some(q.request_digest),
            failure.clone(),
        )),
        _ => None,
    };
    let details = details.unwrap_or_else(|| Details::failure(origin, None, None, failure));
    Ok(ToolResult::new(details)?)
}

/// Runs one call in a tool sandbox: [`prepare`], then [`PreparedCall::run`]. An `Err`
/// means no result could be produced at all; every other outcome, rejections, policy
/// failures and provider failures included, is a guarded `ToolResult`.
pub async fn run_sandbox_call<C: Connector>(
    connector: &C,
    config: &C::Config,
    secrets: &C::Secrets,
    call: SandboxCall<'_>,
) -> Result<SandboxOutcome, ToolError> {
    prepare(call)?.run(connector, config, secrets).await
}

#[cfg(test)]
mod tests {
    /// Every code this crate produces is in the contract's table with the class it uses.
    #[test]
    fn every_code_is_in_the_contract_table() {
        for (code, class) in crate::internal::tool_codes() {
            assert!(evidence_result::codes::is_known(code, class), "{code}");
        }
    }
}
