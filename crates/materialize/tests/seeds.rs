//! The seed scenarios: a Wetech `unit` rejection corrected in the same turn, and the
//! ST-2865 Clinic replay whose second query returned no series.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use evidence_materialize::*;
use evidence_result::{
    ErrorCode, Evidence, Failure, FailureClass, Item, PackageId, Provider, RequestDigest, Status,
    evidence::EvidenceOutcome,
};
use serde_json::json;
use support::*;

fn admit(turn: &mut Turn, call: &Call) -> CallTicket {
    match turn.admit(call).unwrap() {
        Admission::Admit(t) => t,
        Admission::Refuse(r) => panic!("refused: {}", r.result.text()),
    }
}

/// Both attempts of the corrected Wetech objective are in the compact report: the
/// `invalid_unit` rejection first (4 ms), the changed request last (1.8 s).
fn assert_rejected_then_corrected(
    attempts: &AttemptTrail,
    rejected: RequestDigest,
    changed: RequestDigest,
) {
    assert_eq!(
        (attempts.total, attempts.admitted, attempts.refused),
        (2, 2, 0)
    );
    let first = &attempts.first;
    assert_eq!(first.status, Outcome::Failed);
    assert_eq!(first.code.as_ref().unwrap().as_str(), "invalid_unit");
    assert_eq!(first.class, Some(FailureClass::InvalidArgument));
    assert_eq!(first.request_digest, Some(rejected));
    assert_eq!(first.duration_ms, Some(4));
    let last = attempts.last.as_ref().unwrap();
    assert_eq!(last.status, Outcome::Ok);
    assert_eq!(last.request_digest, Some(changed));
    assert_eq!((last.code.as_ref(), last.class), (None, None));
    assert_eq!(last.duration_ms, Some(1800));
}

#[test]
fn wetech_unit_rejection_then_changed_same_turn_success() {
    let mut turn = Turn::new(TurnLimits::new(6));
    let q = qid("saas01_tidb_cpu");
    let rejected = RequestDigest::of(&json!({
        "queryId": "saas01_tidb_cpu",
        "expr": "sum by (instance) (rate(process_cpu_seconds_total{component=\"tidb\"}[1m]))",
        "unit": "CPU cores, summed over all TiDB instances of the cluster"
    }))
    .unwrap();
    let changed = RequestDigest::of(&json!({
        "queryId": "saas01_tidb_cpu",
        "expr": "sum by (instance) (rate(process_cpu_seconds_total{component=\"tidb\"}[1m]))",
        "unit": "cores"
    }))
    .unwrap();

    let call = Call::single(
        PackageId::wetech(),
        Provider::Wetech,
        q.clone(),
        Some(rejected),
    );
    let t = admit(&mut turn, &call);
    let unit_rejection = Failure::new(
        ErrorCode::new("invalid_unit").unwrap(),
        FailureClass::InvalidArgument,
        "unit must be a short plain string label such as cores, bytes or %",
    );
    turn.record(
        t,
        single_fail(
            PackageId::wetech(),
            Provider::Wetech,
            Some(&q),
            Some(rejected),
            unit_rejection,
        ),
        Duration::from_millis(4),
    )
    .unwrap();

    let call = Call::single(
        PackageId::wetech(),
        Provider::Wetech,
        q.clone(),
        Some(changed),
    );
    let t = admit(&mut turn, &call);
    turn.record(
        t,
        single_ok(
            PackageId::wetech(),
            Provider::Wetech,
            &q,
            changed,
            data("cores", 56, 22.84),
        ),
        Duration::from_millis(1800),
    )
    .unwrap();

    let handoff = turn.handoff().unwrap();
    assert_eq!(handoff.acquisition, AcquisitionStatus::Complete);
    assert_eq!(handoff.turn_stop, None);
    assert_eq!(
        handoff.objectives.len(),
        1,
        "a correction is not a second objective"
    );
    let o = &handoff.objectives[0];
    assert_eq!(o.query_id, q);
    assert_eq!(o.outcome, Outcome::Ok);
    assert!(o.verified);
    // No terminal error: the final details are the success.
    assert_eq!(o.details.status, Status::Ok);
    assert!(o.details.error.is_none() && o.details.detail_error.is_none());
    assert_eq!(o.details.request_digest, Some(changed));
    assert_eq!(o.details.evidence.as_ref().unwrap().top_peak(), Some(22.84));
    assert_rejected_then_corrected(&o.attempts, rejected, changed);
    assert_eq!(handoff.providers.len(), 1);
    assert_eq!(handoff.providers[0].capability, Capability::Verified);

    let v: serde_json::Value = serde_json::from_str(&handoff.to_json().unwrap()).unwrap();
    assert_eq!(v["acquisition"], "complete");
    assert_eq!(
        v["objectives"][0]["attempts"]["first"]["code"],
        "invalid_unit"
    );
    assert_eq!(v["objectives"][0]["attempts"]["last"]["status"], "ok");
    assert!(v["objectives"][0]["details"].get("error").is_none());
}

#[test]
fn unchanged_retry_between_rejection_and_correction_is_refused_and_not_a_correction() {
    let mut turn = Turn::new(TurnLimits::new(6));
    let q = qid("tidb_cpu");
    let call = Call::single(
        PackageId::wetech(),
        Provider::Wetech,
        q.clone(),
        Some(digest(1)),
    );
    let t = admit(&mut turn, &call);
    let fail = single_fail(
        PackageId::wetech(),
        Provider::Wetech,
        Some(&q),
        Some(digest(1)),
        failure(FailureClass::QueryRejected),
    );
    turn.record(t, fail, Duration::from_millis(2)).unwrap();

    // The same request again: refused without running.
    let Admission::Refuse(refusal) = turn.admit(&call).unwrap() else {
        panic!("an unchanged retry was admitted");
    };
    assert_eq!(refusal.code, RefusalCode::UnchangedRetry);
    let d = refusal.result.details();
    assert_eq!(d.failure_class(), Some(FailureClass::InvalidArgument));
    assert_eq!(d.error.as_ref().unwrap().code.as_str(), "unchanged_retry");
    let correction = d.correction.as_ref().unwrap();
    assert!(correction.allowed, "the one correction is still available");
    assert!(correction.instruction.contains("not a correction"));

    // A changed request is still admitted as the correction.
    let changed = Call::single(
        PackageId::wetech(),
        Provider::Wetech,
        q.clone(),
        Some(digest(2)),
    );
    let t = admit(&mut turn, &changed);
    turn.record(
        t,
        single_ok(
            PackageId::wetech(),
            Provider::Wetech,
            &q,
            digest(2),
            data("cores", 4, 3.5),
        ),
        Duration::from_millis(9),
    )
    .unwrap();

    let handoff = turn.handoff().unwrap();
    assert_eq!(handoff.acquisition, AcquisitionStatus::Complete);
    let o = &handoff.objectives[0];
    assert_eq!(o.outcome, Outcome::Ok);
    assert_eq!(
        (o.attempts.total, o.attempts.admitted, o.attempts.refused),
        (3, 2, 1)
    );
    assert_eq!(o.attempts.first.status, Outcome::Failed);
    assert_eq!(o.attempts.last.as_ref().unwrap().status, Outcome::Ok);
    assert_eq!(handoff.providers[0].refused_calls, 1);
}

/// The ST-2865 replay: the first Clinic query answers 261 series (peak 78.64 %) and is
/// verified; the second returns no series and is handed off as `no_data`, unverified,
/// with no peak and no series: never a zero value.
#[test]
fn st_2865_second_clinic_query_without_series_stays_no_data_and_unverified() {
    let mut turn = Turn::new(TurnLimits::new(4));
    let mem = qid("tikv_mem_available_ratio");
    let tikv = qid("tikv_memory_pressure");

    let call =
        Call::new(PackageId::clinic(), Provider::Clinic).with_query(mem.clone(), Some(digest(10)));
    let t = admit(&mut turn, &call);
    let mut evidence = data("%", 261, 78.64);
    evidence.expr =
        Some("100 * (1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes)".to_owned());
    turn.record(
        t,
        batch(vec![Item::success(mem.clone(), Some(digest(10)), evidence)]),
        Duration::from_millis(640),
    )
    .unwrap();

    let call =
        Call::new(PackageId::clinic(), Provider::Clinic).with_query(tikv.clone(), Some(digest(11)));
    let t = admit(&mut turn, &call);
    turn.record(
        t,
        batch(vec![Item::success(
            tikv.clone(),
            Some(digest(11)),
            Evidence::no_data(Some("%".to_owned()), 3),
        )]),
        Duration::from_millis(210),
    )
    .unwrap();

    let handoff = turn.handoff().unwrap();
    assert_eq!(handoff.acquisition, AcquisitionStatus::Complete);
    assert_eq!(handoff.objectives.len(), 2);
    let first = handoff.objective(&PackageId::clinic(), &mem).unwrap();
    assert_eq!(first.outcome, Outcome::Ok);
    assert!(first.verified);
    let e = first.details.evidence.as_ref().unwrap();
    assert_eq!(e.series_count, 261);
    assert_eq!(e.top_peak(), Some(78.64));

    let second = handoff.objective(&PackageId::clinic(), &tikv).unwrap();
    assert_eq!(second.outcome, Outcome::NoData);
    assert!(!second.verified, "no data is never verified");
    let e = second.details.evidence.as_ref().unwrap();
    assert_eq!(e.outcome, EvidenceOutcome::NoData);
    assert_eq!(e.top_peak(), None, "no data is not a zero value");
    assert!(e.series.is_empty());
    // The batch item is handed off as the details of one operation.
    assert_eq!(second.details.query_id.as_ref(), Some(&tikv));
    assert_eq!(second.details.request_digest, Some(digest(11)));
    assert!(second.details.items.is_empty());

    assert_eq!(handoff.objectives[0].query_id, mem, "first-call order");
    assert_eq!(handoff.providers.len(), 1);
    let clinic = &handoff.providers[0];
    assert_eq!(clinic.capability, Capability::Verified);
    assert_eq!((clinic.admitted_calls, clinic.refused_calls), (2, 0));

    let v: serde_json::Value = serde_json::from_str(&handoff.to_json().unwrap()).unwrap();
    assert_eq!(v["objectives"][1]["outcome"], "no_data");
    assert_eq!(v["objectives"][1]["verified"], false);
    assert_eq!(
        v["objectives"][1]["details"]["evidence"]["outcome"],
        "no_data"
    );
}

#[test]
fn only_no_data_leaves_the_provider_unverified() {
    let mut turn = Turn::new(TurnLimits::new(4));
    let q = qid("tikv_memory_pressure");
    let call =
        Call::new(PackageId::clinic(), Provider::Clinic).with_query(q.clone(), Some(digest(3)));
    let t = admit(&mut turn, &call);
    turn.record(
        t,
        batch(vec![Item::success(
            q,
            Some(digest(3)),
            Evidence::no_data(None, 3),
        )]),
        Duration::from_millis(1),
    )
    .unwrap();
    let handoff = turn.handoff().unwrap();
    assert_eq!(handoff.acquisition, AcquisitionStatus::Complete);
    assert_eq!(handoff.providers[0].capability, Capability::Unverified);
}
