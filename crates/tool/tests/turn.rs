//! The turn API for embedders, in process against real Prometheus behind the Clinic
//! test front: `prepare` -> `plan` -> `Turn::admit` -> `run` -> `Turn::record`, with no
//! digest handed in by hand. An unchanged retry of a rejected request is refused through
//! this path; a changed retry is admitted as the objective's one correction and answers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Instant;

use evidence_connectors::{ClinicConfig, ClinicConnector, ClinicSecrets, HostAllowlist};
use evidence_materialize::{Admission, RefusalCode, Turn, TurnLimits};
use evidence_package::{Package, SecretBinding, SecretValues};
use evidence_policy::{KeyRing, PolicySigner, TrustedPolicy};
use evidence_result::{FailureClass, ToolResult};
use evidence_test_support as test_support;
use evidence_tool::{PolicyInput, SandboxCall, prepare};
use secrecy::SecretString;
use serde_json::json;
use support::*;

struct Deployment {
    package: Package,
    binding: SecretBinding,
    keys: KeyRing,
    signer: PolicySigner,
    policy: TrustedPolicy,
    connector: ClinicConnector,
    config: ClinicConfig,
    secrets: ClinicSecrets,
}

impl Deployment {
    /// One call through the turn, the way an embedder writes it.
    async fn call(&self, turn: &mut Turn, args: serde_json::Value) -> (ToolResult, bool) {
        let envelope = self
            .signer
            .sign(&self.policy, self.package.digest())
            .unwrap();
        let args = args.to_string();
        let prepared = prepare(SandboxCall {
            package: &self.package,
            binding: &self.binding,
            policy: PolicyInput::Envelope {
                envelope: &envelope,
                keys: &self.keys,
            },
            args: &args,
            now: jiff::Timestamp::now(),
        })
        .unwrap();
        match turn.admit(&prepared.plan()).unwrap() {
            Admission::Admit(ticket) => {
                let started = Instant::now();
                let outcome = prepared
                    .run(&self.connector, &self.config, &self.secrets)
                    .await
                    .unwrap();
                turn.record(ticket, outcome.result.clone(), started.elapsed())
                    .unwrap();
                (outcome.result, true)
            }
            Admission::Refuse(refusal) => {
                assert_eq!(refusal.code, RefusalCode::UnchangedRetry);
                (refusal.result, false)
            }
        }
    }
}

#[tokio::test]
async fn unchanged_retry_is_refused_and_a_changed_retry_is_the_one_correction() {
    let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
        .await
        .unwrap();
    let token = "turn-api-clinic-token-01";
    let front =
        test_support::ClinicFront::start(&prometheus.url(), SecretString::from(token.to_owned()))
            .await
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let package = Package::load(&path).unwrap();
    let mut values = SecretValues::new();
    values.insert("clinic_api_token", SecretString::from(token.to_owned()));
    let binding = SecretBinding::bind(&package, values).unwrap();
    let keys: KeyRing = policy_keys().parse().unwrap();
    let signer = test_signer();
    let policy: TrustedPolicy =
        serde_json::from_value(policy("clinic", "managed_auto_oncall_clinic", json!({}))).unwrap();
    let config = ClinicConfig::new(
        url::Url::parse(&front.base_url()).unwrap(),
        HostAllowlist::new(["127.0.0.1"]).unwrap(),
    );
    let deployment = Deployment {
        package,
        binding,
        keys,
        signer,
        policy,
        connector: ClinicConnector::new().unwrap(),
        config,
        secrets: ClinicSecrets::new(SecretString::from(token.to_owned())),
    };
    let expr = r#"sum by (instance) (rate(process_cpu_seconds_total{job="tidb"}[1m]))"#;
    let bad = json!({"queries": [{"queryId": "tidb_cpu", "expr": expr, "unit": "cores!!"}]});
    let good = json!({"queries": [{"queryId": "tidb_cpu", "expr": expr, "unit": "cores"}]});
    let mut turn = Turn::new(TurnLimits::new(8));

    let (first, ran) = deployment.call(&mut turn, bad.clone()).await;
    assert!(ran);
    let item = &first.details().items[0];
    assert_eq!(
        item.error.as_ref().unwrap().class,
        FailureClass::InvalidArgument
    );
    assert!(front.requests().is_empty(), "a rejected item sends nothing");

    // The same request again: refused by the turn, nothing runs.
    let (refused, ran) = deployment.call(&mut turn, bad).await;
    assert!(!ran, "{}", refused.text());
    assert!(front.requests().is_empty());

    // The changed request: admitted, answered with real data.
    let (answered, ran) = deployment.call(&mut turn, good).await;
    assert!(ran);
    let evidence = answered.details().items[0].evidence.as_ref().unwrap();
    assert_eq!(evidence.series_count, 56);
    assert_eq!(front.requests().len(), 1);

    let handoff = turn.into_handoff().unwrap();
    let text = serde_json::to_string(&handoff).unwrap();
    assert!(text.contains("tidb_cpu"));
}
