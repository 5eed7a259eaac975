//! The turn API for embedders, in process against real Prometheus behind the Clinic
//! test front: `prepare` -> `plan` -> `Turn::admit` -> `run` -> `Turn::record`, with no
//! digest handed in by hand. An unchanged retry of a rejected request is refused through
//! this path; a changed retry is admitted as the objective's one correction and answers.
//! A guessed secret that the output guard blocks stops the turn: one guess per turn.
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
    /// One call through the turn, the way an embedder writes it: the result, and the
    /// refusal code when the turn refused the call (nothing ran).
    async fn call(
        &self,
        turn: &mut Turn,
        args: serde_json::Value,
    ) -> (ToolResult, Option<RefusalCode>) {
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
                session: None,
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
                (outcome.result, None)
            }
            Admission::Refuse(refusal) => (refusal.result, Some(refusal.code)),
        }
    }
}

/// Real Prometheus, the Clinic front and Clinic v3 deployed with its token bound.
struct Setup {
    _prometheus: test_support::Prometheus,
    front: test_support::ClinicFront,
    _dir: tempfile::TempDir,
    deployment: Deployment,
    token: &'static str,
}

async fn setup() -> Setup {
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
    Setup {
        _prometheus: prometheus,
        front,
        _dir: dir,
        deployment,
        token,
    }
}

#[tokio::test]
async fn unchanged_retry_is_refused_and_a_changed_retry_is_the_one_correction() {
    let setup = setup().await;
    let (front, deployment) = (&setup.front, &setup.deployment);
    let expr = r#"sum by (instance) (rate(process_cpu_seconds_total{job="tidb"}[1m]))"#;
    let bad = json!({"queries": [{"queryId": "tidb_cpu", "expr": expr, "unit": "cores!!"}]});
    let good = json!({"queries": [{"queryId": "tidb_cpu", "expr": expr, "unit": "cores"}]});
    let mut turn = Turn::new(TurnLimits::new(8));

    let (first, refused) = deployment.call(&mut turn, bad.clone()).await;
    assert_eq!(refused, None);
    let item = &first.details().items[0];
    assert_eq!(
        item.error.as_ref().unwrap().class,
        FailureClass::InvalidArgument
    );
    assert!(front.requests().is_empty(), "a rejected item sends nothing");

    // The same request again: refused by the turn, nothing runs.
    let (refusal, refused) = deployment.call(&mut turn, bad).await;
    assert_eq!(
        refused,
        Some(RefusalCode::UnchangedRetry),
        "{}",
        refusal.text()
    );
    assert!(front.requests().is_empty());

    // The changed request: admitted, answered with real data.
    let (answered, refused) = deployment.call(&mut turn, good).await;
    assert_eq!(refused, None);
    let evidence = answered.details().items[0].evidence.as_ref().unwrap();
    assert_eq!(evidence.series_count, 56);
    assert_eq!(front.requests().len(), 1);

    let handoff = turn.into_handoff().unwrap();
    let text = serde_json::to_string(&handoff).unwrap();
    assert!(text.contains("tidb_cpu"));
}

/// `label_replace(vector(1), "x", "<guess>", "", "")` puts a guess into a label; real
/// Prometheus returns it, and the output guard blocks it exactly when the guess is the
/// bound token. The blocked result is of a shared class and stops the turn, so the next
/// guess is refused without running: a model gets one guess per turn.
#[tokio::test]
async fn a_guess_the_guard_confirms_stops_the_turn() {
    let setup = setup().await;
    let (front, deployment, token) = (&setup.front, &setup.deployment, setup.token);
    let guess = |q: &str, value: &str| {
        json!({"queries": [{"queryId": q, "unit": "cores",
            "expr": format!(r#"label_replace(vector(1), "x", "{value}", "", "")"#)}]})
    };
    let mut turn = Turn::new(TurnLimits::new(8));

    // A wrong guess runs and answers: the value comes back in the label.
    let (wrong, refused) = deployment
        .call(&mut turn, guess("g1", "turn-api-clinic-token-00"))
        .await;
    assert_eq!(refused, None);
    assert!(!wrong.is_failed(), "{}", wrong.text());
    assert!(wrong.text().contains("turn-api-clinic-token-00"));
    assert!(!turn.is_stopped());

    // The right guess: blocked, of a shared class, no correction invited, turn stopped.
    let (blocked, refused) = deployment.call(&mut turn, guess("g2", token)).await;
    assert_eq!(refused, None);
    assert!(blocked.is_failed());
    assert!(!blocked.text().contains(token));
    let failure = blocked
        .details()
        .items
        .first()
        .and_then(|i| i.error.clone())
        .or_else(|| blocked.details().error.clone())
        .unwrap();
    assert_eq!(failure.class, FailureClass::OutputBlocked);
    assert!(failure.class.is_shared(), "output_blocked stops the turn");
    assert!(evidence_result::codes::is_known(
        failure.code.as_str(),
        failure.class
    ));
    let correction = blocked
        .details()
        .items
        .first()
        .and_then(|i| i.correction.clone())
        .or_else(|| blocked.details().correction.clone())
        .unwrap();
    assert!(!correction.allowed, "{}", blocked.text());
    assert!(turn.is_stopped());
    let sent = front.requests().len();
    assert_eq!(sent, 2);

    // The next guess, and any other call, is refused and sends nothing.
    for (q, value) in [("g3", "turn-api-clinic-token-02"), ("g2", "another")] {
        let (refusal, refused) = deployment.call(&mut turn, guess(q, value)).await;
        assert_eq!(
            refused,
            Some(RefusalCode::TurnStopped),
            "{}",
            refusal.text()
        );
    }
    assert_eq!(front.requests().len(), sent, "nothing ran after the block");
    let handoff = turn.into_handoff().unwrap();
    assert_eq!(
        handoff.turn_stop.as_ref().unwrap().class,
        FailureClass::OutputBlocked
    );
}

/// A discovery is a call of the turn like a query: a bad pattern is rejected before
/// anything is sent and corrected once with the same queryId, the no_data answer of a
/// discovery is kept unverified by queryId, and discoveries count toward the turn's
/// calls: the fourth call of a turn of three is refused with nothing sent.
#[tokio::test]
async fn discoveries_are_calls_of_the_turn() {
    let mut setup = setup().await;
    setup.deployment.policy.discovery =
        Some(evidence_policy::policy::DiscoveryGrant { max_items: 10 });
    let (front, deployment) = (&setup.front, &setup.deployment);
    let mut turn = Turn::new(TurnLimits::new(3));
    let names = |pattern: &str| {
        json!({"queries": [{"queryId": "tikv_names", "discover": "metric_names",
                            "pattern": pattern}]})
    };

    let (bad, refused) = deployment.call(&mut turn, names("tikv_(")).await;
    assert_eq!(refused, None);
    let item = &bad.details().items[0];
    assert_eq!(
        item.error.as_ref().unwrap().code.as_str(),
        "invalid_pattern"
    );
    assert!(item.correction.as_ref().unwrap().allowed);
    assert!(
        front.requests().is_empty(),
        "a rejected discovery sends nothing"
    );

    let (corrected, refused) = deployment.call(&mut turn, names("tikv_.*")).await;
    assert_eq!(refused, None);
    let discovery = corrected.details().items[0].discovery.clone().unwrap();
    // The fixture's TiKV names are another cluster's: nothing in this scope.
    assert_eq!(discovery.total, 0, "{}", corrected.text());
    assert_eq!(front.requests().len(), 1);

    let (_, refused) = deployment
        .call(
            &mut turn,
            json!({"queries": [{"queryId": "labels", "discover": "label_names"}]}),
        )
        .await;
    assert_eq!(refused, None);
    let (_, refused) = deployment
        .call(
            &mut turn,
            json!({"queries": [{"queryId": "series", "discover": "series"}]}),
        )
        .await;
    assert_eq!(refused, Some(RefusalCode::TurnCallLimit));
    assert_eq!(front.requests().len(), 2);

    let handoff = turn.into_handoff().unwrap();
    let names = handoff
        .objectives
        .iter()
        .find(|o| o.query_id.as_str() == "tikv_names")
        .unwrap();
    assert_eq!(names.outcome, evidence_materialize::Outcome::NoData);
    assert!(!names.verified);
    assert_eq!(names.attempts.total, 2);
}
