//! One Evidence Agent turn of the replay, over packages deployed locally.

use std::error::Error;
use std::time::{Duration, Instant};

use managed_evidence::connectors::Connector;
use managed_evidence::materialize::{Admission, Call, Handoff, Turn, TurnLimits};
use managed_evidence::package::{Package, SecretBinding};
use managed_evidence::policy::{KeyRing, PolicySigner, TrustedPolicy};
use managed_evidence::result::ToolResult;
use managed_evidence::tool::{PolicyInput, SandboxCall, prepare};
use serde_json::Value;

use crate::report::print_handoff;

/// One package as deployed locally: its connector, configuration, secrets and binding.
pub(crate) struct Deployed<C: Connector> {
    pub(crate) connector: C,
    pub(crate) config: C::Config,
    pub(crate) secrets: C::Secrets,
    pub(crate) package: Package,
    pub(crate) binding: SecretBinding,
}

/// One Evidence Agent turn: each call is locked locally for its request digest, asked
/// of the turn, run through the sandbox path, and recorded.
pub(crate) struct Session<'a> {
    keys: &'a KeyRing,
    signer: &'a PolicySigner,
    turn: Turn,
}

impl<'a> Session<'a> {
    /// A new turn of at most 8 calls.
    pub(crate) fn new(keys: &'a KeyRing, signer: &'a PolicySigner) -> Self {
        Session {
            keys,
            signer,
            turn: Turn::new(TurnLimits::new(8)),
        }
    }

    /// Ends the turn: materializes it, prints its summary and returns the handoff.
    pub(crate) fn finish(self) -> Result<Handoff, Box<dyn Error>> {
        let handoff = self.turn.into_handoff()?;
        print_handoff(&handoff)?;
        Ok(handoff)
    }

    /// Signs `policy` for the package, prepares the call, asks the turn, runs it through
    /// the sandbox path and records it; a refusal's result is returned as the answer.
    pub(crate) async fn call<C: Connector>(
        &mut self,
        deployed: &Deployed<C>,
        policy: &TrustedPolicy,
        args: Value,
    ) -> Result<ToolResult, Box<dyn Error>> {
        let package = &deployed.package;
        let envelope = self.signer.sign(policy, package.digest())?;
        let args = args.to_string();
        let prepared = prepare(SandboxCall {
            package,
            binding: &deployed.binding,
            policy: PolicyInput::Envelope {
                envelope: &envelope,
                keys: self.keys,
                session: None,
            },
            args: &args,
            now: jiff::Timestamp::now(),
        })?;
        let ticket = match self.turn.admit(&prepared.plan())? {
            Admission::Admit(ticket) => ticket,
            Admission::Refuse(refusal) => return Ok(refusal.result),
        };
        let started = Instant::now();
        let outcome = prepared
            .run(&deployed.connector, &deployed.config, &deployed.secrets)
            .await?;
        self.turn
            .record(ticket, outcome.result.clone(), started.elapsed())?;
        Ok(outcome.result)
    }

    /// Records a result made elsewhere (the recorded Wetech browser result) as the
    /// outcome of an admitted call.
    pub(crate) fn record_external(
        &mut self,
        call: Call,
        result: ToolResult,
    ) -> Result<(), Box<dyn Error>> {
        match self.turn.admit(&call)? {
            Admission::Admit(ticket) => Ok(self.turn.record(ticket, result, Duration::ZERO)?),
            Admission::Refuse(refusal) => Err(format!("refused: {}", refusal.result.text()).into()),
        }
    }
}
