//! Turn control: shared-failure stop, limits, corrections, in-flight and result checks,
//! batch attribution and unattributed attempts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use evidence_materialize::*;
use evidence_result::{FailureClass, Item, PackageId, Provider, QueryId, ToolResult};
use support::*;

const MS: Duration = Duration::from_millis(1);

fn admit(turn: &mut Turn, call: &Call) -> CallTicket {
    match turn.admit(call).unwrap() {
        Admission::Admit(t) => t,
        Admission::Refuse(r) => panic!("refused: {}", r.result.text()),
    }
}

fn refused(turn: &mut Turn, call: &Call) -> Refusal {
    match turn.admit(call).unwrap() {
        Admission::Admit(_) => panic!("admitted"),
        Admission::Refuse(r) => *r,
    }
}

fn wetech(q: &QueryId, d: u32) -> Call {
    Call::single(
        PackageId::wetech(),
        Provider::Wetech,
        q.clone(),
        Some(digest(d)),
    )
}

fn wetech_fail(q: &QueryId, d: u32, class: FailureClass) -> ToolResult {
    single_fail(
        PackageId::wetech(),
        Provider::Wetech,
        Some(q),
        Some(digest(d)),
        failure(class),
    )
}

fn wetech_ok(q: &QueryId, d: u32) -> ToolResult {
    single_ok(
        PackageId::wetech(),
        Provider::Wetech,
        q,
        digest(d),
        data("cores", 2, 1.0),
    )
}

#[test]
fn a_shared_failure_stops_the_turn_for_every_package_and_objective() {
    for class in FailureClass::ALL.into_iter().filter(|c| c.is_shared()) {
        let mut turn = Turn::new(TurnLimits::new(10));
        let a = qid("a");
        let t = admit(&mut turn, &wetech(&a, 1));
        turn.record(t, wetech_fail(&a, 1, class), MS).unwrap();
        assert!(turn.is_stopped());

        for call in [
            wetech(&qid("b"), 2),
            wetech(&a, 3),
            Call::new(PackageId::clinic(), Provider::Clinic).with_query(qid("c"), None),
            Call::single(
                PackageId::manus(),
                Provider::Manus,
                qid("d"),
                Some(digest(4)),
            ),
        ] {
            let r = refused(&mut turn, &call);
            assert_eq!(r.code, RefusalCode::TurnStopped);
            let d = r.result.details();
            assert_eq!(d.failure_class(), Some(FailureClass::PolicyViolation));
            assert_eq!(d.package, call.package);
            let c = d.correction.as_ref().unwrap();
            assert!(!c.allowed);
            assert!(d.detail_error.as_ref().unwrap().contains(class.as_str()));
        }
        let h = turn.handoff().unwrap();
        let stop = h.turn_stop.as_ref().unwrap();
        assert_eq!((stop.class, stop.call), (class, 0));
        assert_eq!(stop.query_id, Some(a.clone()));
        assert_eq!(h.acquisition, AcquisitionStatus::Failed);
        assert_eq!(h.objectives.len(), 4);
        assert!(
            h.objectives[1..]
                .iter()
                .all(|o| o.outcome == Outcome::Refused)
        );
        let wetech = h
            .providers
            .iter()
            .find(|p| p.provider == Provider::Wetech)
            .unwrap();
        assert_eq!(wetech.capability, Capability::Failed);
        let clinic = h
            .providers
            .iter()
            .find(|p| p.provider == Provider::Clinic)
            .unwrap();
        assert_eq!(clinic.capability, Capability::Unverified);
        assert_eq!((clinic.admitted_calls, clinic.refused_calls), (0, 1));
    }
}

/// A blocked output confirms a guessed secret (`label_replace(vector(1), "x", "<guess>",
/// "", "")` is blocked exactly when the guess is right), so it stops the turn: one guess
/// per turn. Both forms the guard produces stop it: the failure of the query and the
/// fixed withheld result without a query id.
#[test]
fn a_blocked_output_stops_the_turn_so_a_model_gets_one_guess() {
    let withheld = ToolResult::withheld(origin(PackageId::wetech(), Provider::Wetech));
    for blocked in [
        wetech_fail(&qid("guess1"), 1, FailureClass::OutputBlocked),
        withheld,
    ] {
        let mut turn = Turn::new(TurnLimits::new(10));
        let t = admit(&mut turn, &wetech(&qid("guess1"), 1));
        // The blocked result itself invites no correction.
        let c = blocked.details().correction.clone().unwrap();
        assert!(!c.allowed, "{}", blocked.text());
        assert!(c.instruction.contains("stop"), "{}", c.instruction);
        turn.record(t, blocked, MS).unwrap();
        assert!(turn.is_stopped(), "a blocked output stops the turn");
        assert_eq!(turn.stop().unwrap().class, FailureClass::OutputBlocked);
        // The next guess (a new queryId, a changed expression) and every other call are
        // refused without running.
        for call in [
            wetech(&qid("guess2"), 2),
            wetech(&qid("guess1"), 3),
            Call::new(PackageId::clinic(), Provider::Clinic).with_query(qid("c"), None),
        ] {
            let r = refused(&mut turn, &call);
            assert_eq!(r.code, RefusalCode::TurnStopped);
            assert!(!r.result.details().correction.as_ref().unwrap().allowed);
        }
        assert_eq!(turn.admitted_calls(), 1);
        let h = turn.handoff().unwrap();
        assert_eq!(
            h.turn_stop.as_ref().unwrap().class,
            FailureClass::OutputBlocked
        );
    }
}

#[test]
fn call_limits_come_from_the_caller() {
    let mut turn = Turn::new(TurnLimits::new(2));
    for (i, q) in ["a", "b"].into_iter().enumerate() {
        let q = qid(q);
        let t = admit(&mut turn, &wetech(&q, i as u32));
        turn.record(t, wetech_ok(&q, i as u32), MS).unwrap();
    }
    let r = refused(&mut turn, &wetech(&qid("c"), 9));
    assert_eq!(r.code, RefusalCode::TurnCallLimit);
    assert!(
        r.result
            .details()
            .detail_error
            .as_ref()
            .unwrap()
            .contains("allows 2")
    );
    assert_eq!(turn.admitted_calls(), 2);

    let mut turn = Turn::new(TurnLimits::new(10).with_max_calls_per_package(1));
    let t = admit(&mut turn, &wetech(&qid("a"), 1));
    turn.record(t, wetech_ok(&qid("a"), 1), MS).unwrap();
    assert_eq!(
        refused(&mut turn, &wetech(&qid("b"), 2)).code,
        RefusalCode::PackageCallLimit
    );
    // Another package still has its own budget.
    let manus = Call::single(PackageId::manus(), Provider::Manus, qid("b"), None);
    admit(&mut turn, &manus);
}

#[test]
fn one_correction_then_the_objective_ends_failed() {
    let mut turn = Turn::new(TurnLimits::new(10));
    let q = qid("q");
    let t = admit(&mut turn, &wetech(&q, 1));
    turn.record(t, wetech_fail(&q, 1, FailureClass::QueryRejected), MS)
        .unwrap();
    let t = admit(&mut turn, &wetech(&q, 2));
    turn.record(t, wetech_fail(&q, 2, FailureClass::InvalidArgument), MS)
        .unwrap();
    let r = refused(&mut turn, &wetech(&q, 3));
    assert_eq!(r.code, RefusalCode::CorrectionExhausted);
    assert!(!r.result.details().correction.as_ref().unwrap().allowed);
    // Repeating either failed request is an unchanged retry, with no correction left.
    for d in [1, 2] {
        let r = refused(&mut turn, &wetech(&q, d));
        assert_eq!(r.code, RefusalCode::UnchangedRetry);
        assert!(!r.result.details().correction.as_ref().unwrap().allowed);
    }
    let h = turn.handoff().unwrap();
    let o = &h.objectives[0];
    assert_eq!(o.outcome, Outcome::Failed);
    assert_eq!(
        o.details.failure_class(),
        Some(FailureClass::InvalidArgument)
    );
    assert_eq!(
        (o.attempts.total, o.attempts.admitted, o.attempts.refused),
        (5, 2, 3)
    );
    assert_eq!(h.acquisition, AcquisitionStatus::Failed);
}

#[test]
fn a_policy_violation_may_be_corrected_once() {
    let mut turn = Turn::new(TurnLimits::new(10));
    let q = qid("q");
    let t = admit(&mut turn, &wetech(&q, 1));
    turn.record(t, wetech_fail(&q, 1, FailureClass::PolicyViolation), MS)
        .unwrap();
    let t = admit(&mut turn, &wetech(&q, 2));
    turn.record(t, wetech_ok(&q, 2), MS).unwrap();
    assert_eq!(
        turn.handoff().unwrap().acquisition,
        AcquisitionStatus::Complete
    );
}

#[test]
fn failures_a_change_cannot_fix_are_not_retried() {
    for class in [
        FailureClass::ProviderUnavailable,
        FailureClass::Timeout,
        FailureClass::Internal,
    ] {
        let mut turn = Turn::new(TurnLimits::new(10));
        let q = qid("q");
        let t = admit(&mut turn, &wetech(&q, 1));
        turn.record(t, wetech_fail(&q, 1, class), MS).unwrap();
        assert!(!turn.is_stopped());
        let r = refused(&mut turn, &wetech(&q, 2));
        assert_eq!(r.code, RefusalCode::ObjectiveFailed);
        assert!(
            r.result
                .details()
                .detail_error
                .as_ref()
                .unwrap()
                .contains(class.as_str())
        );
        // Other objectives still run.
        admit(&mut turn, &wetech(&qid("other"), 3));
    }
}

#[test]
fn an_answered_objective_is_not_asked_again() {
    let mut turn = Turn::new(TurnLimits::new(10));
    let q = qid("q");
    let t = admit(&mut turn, &wetech(&q, 1));
    turn.record(t, wetech_ok(&q, 1), MS).unwrap();
    let r = refused(&mut turn, &wetech(&q, 2));
    assert_eq!(r.code, RefusalCode::ObjectiveAnswered);
    let h = turn.handoff().unwrap();
    // The refusal does not replace the answer.
    assert_eq!(h.objectives[0].outcome, Outcome::Ok);
    assert_eq!(h.objectives[0].attempts.latest().status, Outcome::Refused);
}

#[test]
fn one_call_per_objective_at_a_time_and_no_duplicates_in_a_batch() {
    let mut turn = Turn::new(TurnLimits::new(10));
    let q = qid("q");
    let t = admit(&mut turn, &wetech(&q, 1));
    assert_eq!(
        refused(&mut turn, &wetech(&q, 2)).code,
        RefusalCode::QueryInFlight
    );
    assert!(matches!(
        turn.handoff(),
        Err(MaterializeError::CallsInFlight(1))
    ));
    turn.record(t, wetech_ok(&q, 1), MS).unwrap();
    assert!(matches!(
        turn.record(t, wetech_ok(&q, 1), MS),
        Err(MaterializeError::UnknownTicket)
    ));

    let dup = Call::new(PackageId::clinic(), Provider::Clinic)
        .with_query(qid("x"), Some(digest(5)))
        .with_query(qid("x"), Some(digest(6)));
    let r = refused(&mut turn, &dup);
    assert_eq!(r.code, RefusalCode::DuplicateQueryId);
    assert!(r.result.details().correction.as_ref().unwrap().allowed);
    // A refused batch is one failed result naming no single query.
    assert!(r.result.details().query_id.is_none());
    let back = ToolResult::from_json(&r.result.to_json().unwrap()).unwrap();
    assert_eq!(back, r.result);
}

#[test]
fn a_batch_is_split_into_its_objectives() {
    let mut turn = Turn::new(TurnLimits::new(10));
    let (a, b) = (qid("a"), qid("b"));
    let call = Call::new(PackageId::clinic(), Provider::Clinic)
        .with_query(a.clone(), Some(digest(1)))
        .with_query(b.clone(), Some(digest(2)));
    let t = admit(&mut turn, &call);
    turn.record(
        t,
        batch(vec![
            Item::success(a.clone(), Some(digest(1)), data("%", 5, 40.0)),
            Item::failure(
                b.clone(),
                Some(digest(2)),
                failure(FailureClass::QueryRejected),
            ),
        ]),
        MS,
    )
    .unwrap();
    // Resending the whole batch: `a` is answered and `b` unchanged.
    let r = refused(&mut turn, &call);
    assert_eq!(r.code, RefusalCode::ObjectiveAnswered);
    let detail = r.result.details().detail_error.clone().unwrap();
    assert!(detail.contains("objective_answered") && detail.contains("unchanged_retry"));
    // Only the corrected query.
    let fix =
        Call::new(PackageId::clinic(), Provider::Clinic).with_query(b.clone(), Some(digest(3)));
    let t = admit(&mut turn, &fix);
    turn.record(
        t,
        batch(vec![Item::success(
            b.clone(),
            Some(digest(3)),
            data("%", 1, 2.0),
        )]),
        MS,
    )
    .unwrap();

    let h = turn.handoff().unwrap();
    assert_eq!(h.acquisition, AcquisitionStatus::Complete);
    assert_eq!(h.objectives.len(), 2);
    let ob = h.objective(&PackageId::clinic(), &b).unwrap();
    assert_eq!(
        (ob.attempts.total, ob.attempts.admitted, ob.attempts.refused),
        (3, 2, 1)
    );
    assert_eq!(ob.attempts.first.status, Outcome::Failed);
    assert_eq!(ob.outcome, Outcome::Ok);
}

#[test]
fn a_batch_that_fails_as_a_whole_fails_each_declared_objective() {
    let mut turn = Turn::new(TurnLimits::new(10));
    let call = Call::new(PackageId::clinic(), Provider::Clinic)
        .with_query(qid("a"), Some(digest(1)))
        .with_query(qid("b"), Some(digest(2)));
    let t = admit(&mut turn, &call);
    let whole = single_fail(
        PackageId::clinic(),
        Provider::Clinic,
        None,
        None,
        failure(FailureClass::ProviderUnavailable),
    );
    turn.record(t, whole, MS).unwrap();
    let h = turn.handoff().unwrap();
    assert_eq!(h.objectives.len(), 2);
    for (o, d) in h.objectives.iter().zip([1, 2]) {
        assert_eq!(o.outcome, Outcome::Failed);
        assert_eq!(o.attempts.first.request_digest, Some(digest(d)));
        assert_eq!(o.details.query_id.as_ref(), Some(&o.query_id));
    }
    assert_eq!(h.providers[0].capability, Capability::Failed);
    assert_eq!(turn.into_handoff().unwrap(), h);
}

#[test]
fn a_call_without_query_id_is_unattributed() {
    let mut turn = Turn::new(TurnLimits::new(10));
    let no_id = Call::new(PackageId::wetech(), Provider::Wetech);
    let t = admit(&mut turn, &no_id);
    let rejected = single_fail(
        PackageId::wetech(),
        Provider::Wetech,
        None,
        None,
        failure(FailureClass::InvalidArgument),
    );
    turn.record(t, rejected, MS).unwrap();
    let q = qid("q");
    let t = admit(&mut turn, &wetech(&q, 1));
    turn.record(t, wetech_ok(&q, 1), MS).unwrap();
    let h = turn.handoff().unwrap();
    assert_eq!(h.objectives.len(), 1);
    assert_eq!(h.acquisition, AcquisitionStatus::Complete);
    let u = h.unattributed.as_ref().unwrap();
    assert_eq!((u.total, u.first.status), (1, Outcome::Failed));
}

#[test]
fn results_must_belong_to_their_call() {
    let mut turn = Turn::new(TurnLimits::new(10));
    let q = qid("q");
    let t = admit(&mut turn, &wetech(&q, 1));
    let other_pkg = single_fail(
        PackageId::manus(),
        Provider::Manus,
        Some(&q),
        Some(digest(1)),
        failure(FailureClass::Timeout),
    );
    assert!(matches!(
        turn.record(t, other_pkg, MS),
        Err(MaterializeError::PackageMismatch { .. })
    ));
    assert!(matches!(
        turn.record(t, wetech_ok(&qid("r"), 1), MS),
        Err(MaterializeError::UndeclaredQuery(_))
    ));
    assert!(matches!(
        turn.record(t, wetech_ok(&q, 2), MS),
        Err(MaterializeError::DigestMismatch(_))
    ));
    // Nothing was recorded; the right result still is.
    assert_eq!(turn.in_flight(), 1);
    turn.record(t, wetech_ok(&q, 1), MS).unwrap();

    let call = Call::new(PackageId::clinic(), Provider::Clinic)
        .with_query(qid("a"), None)
        .with_query(qid("b"), None);
    let t = admit(&mut turn, &call);
    let only_a = batch(vec![Item::success(
        qid("a"),
        Some(digest(1)),
        data("%", 1, 1.0),
    )]);
    assert!(matches!(
        turn.record(t, only_a, MS),
        Err(MaterializeError::MissingQuery(_))
    ));
    let twice = batch(vec![
        Item::success(qid("a"), None, data("%", 1, 1.0)),
        Item::success(qid("a"), None, data("%", 1, 1.0)),
        Item::success(qid("b"), None, data("%", 1, 1.0)),
    ]);
    assert!(matches!(
        turn.record(t, twice, MS),
        Err(MaterializeError::DuplicateQuery(_))
    ));
}

#[test]
fn refusal_codes_are_error_codes() {
    for code in RefusalCode::ALL {
        let ec = evidence_result::ErrorCode::new(code.as_str()).unwrap();
        assert_eq!(RefusalCode::from_code(&ec), Some(code));
        assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
    }
}

/// A turn rebuilt from a log of its admitted calls (`Turn::enter`, then `Turn::record`
/// for those that answered) judges the next call as the original does: counts, the
/// failed digests, a call still in flight and a shared stop all carry over.
#[test]
fn a_turn_rebuilt_from_its_admitted_calls_judges_as_the_original() {
    let limits = TurnLimits::new(4);
    let (q, r, s) = (qid("q"), qid("r"), qid("s"));
    let log = [
        (
            wetech(&q, 1),
            Some(wetech_fail(&q, 1, FailureClass::QueryRejected)),
        ),
        (wetech(&r, 2), None),
    ];
    let mut original = Turn::new(limits);
    let mut rebuilt = Turn::new(limits);
    for (call, answer) in &log {
        let t = admit(&mut original, call);
        let u = rebuilt.enter(call);
        if let Some(answer) = answer {
            original.record(t, answer.clone(), MS).unwrap();
            rebuilt.record(u, answer.clone(), MS).unwrap();
        }
    }
    for turn in [&mut original, &mut rebuilt] {
        assert_eq!(turn.admitted_calls(), 2);
        assert_eq!(turn.in_flight(), 1);
        assert_eq!(
            refused(turn, &wetech(&q, 1)).code,
            RefusalCode::UnchangedRetry
        );
        assert_eq!(
            refused(turn, &wetech(&r, 3)).code,
            RefusalCode::QueryInFlight
        );
        let t = admit(turn, &wetech(&s, 4));
        turn.record(t, wetech_fail(&s, 4, FailureClass::Authentication), MS)
            .unwrap();
        assert_eq!(refused(turn, &wetech(&q, 5)).code, RefusalCode::TurnStopped);
    }
}
