//! The refinement gate: at most once, only for a distinct new question derived from
//! materialized evidence; repair and unchanged retries are refused with a reason.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use evidence_materialize::*;
use evidence_result::{Evidence, FailureClass, Item, PackageId, Provider, QueryId};
use support::*;

/// `cpu` ok (digest 1), `mem` no_data (digest 2), `gc` failed (digest 3).
fn handoff() -> Handoff {
    let mut turn = Turn::new(TurnLimits::new(10));
    let call = Call::new(PackageId::clinic(), Provider::Clinic)
        .with_query(qid("cpu"), Some(digest(1)))
        .with_query(qid("mem"), Some(digest(2)))
        .with_query(qid("gc"), Some(digest(3)));
    let Admission::Admit(t) = turn.admit(&call).unwrap() else {
        panic!()
    };
    turn.record(
        t,
        batch(vec![
            Item::success(qid("cpu"), Some(digest(1)), data("cores", 56, 22.84)),
            Item::success(qid("mem"), Some(digest(2)), Evidence::no_data(None, 3)),
            Item::failure(qid("gc"), Some(digest(3)), failure(FailureClass::Timeout)),
        ]),
        Duration::from_millis(5),
    )
    .unwrap();
    turn.handoff().unwrap()
}

fn request(question: &str, from: &[&str], ids: &[&str]) -> RefinementRequest {
    RefinementRequest {
        question: question.to_owned(),
        derived_from: from.iter().map(|s| qid(s)).collect(),
        query_ids: ids.iter().map(|s| qid(s)).collect(),
        request_digests: vec![digest(100)],
    }
}

fn refused_code(gate: &mut RefinementGate, r: &RefinementRequest) -> RefinementCode {
    match gate.request(r) {
        RefinementDecision::Refused(refusal) => {
            assert!(!refusal.reason.is_empty());
            refusal.code
        }
        RefinementDecision::Allowed(g) => panic!("allowed: {g:?}"),
    }
}

#[test]
fn one_distinct_derived_question_is_allowed_once() {
    let h = handoff();
    let mut gate = RefinementGate::new(&h).with_question("Is TiDB CPU saturated?");
    let r = request(
        "Which TiDB instance's Go GC pause explains the 22.84-core peak?",
        &["cpu", "mem"],
        &["tidb_gc_pause"],
    );
    let RefinementDecision::Allowed(grant) = gate.request(&r) else {
        panic!()
    };
    assert_eq!(grant.query_ids, vec![qid("tidb_gc_pause")]);
    assert!(gate.is_spent());
    let again = request("A second new question", &["cpu"], &["other"]);
    assert_eq!(
        refused_code(&mut gate, &again),
        RefinementCode::AlreadyRefined
    );

    // The granted round admits only its query ids.
    let mut turn = Turn::for_refinement(TurnLimits::new(4), &grant);
    let wrong = Call::new(PackageId::clinic(), Provider::Clinic).with_query(qid("cpu"), None);
    let Admission::Refuse(r) = turn.admit(&wrong).unwrap() else {
        panic!()
    };
    assert_eq!(r.code, RefusalCode::QueryNotGranted);
    let none = Call::new(PackageId::clinic(), Provider::Clinic);
    let Admission::Refuse(r) = turn.admit(&none).unwrap() else {
        panic!()
    };
    assert_eq!(r.code, RefusalCode::QueryNotGranted);
    let right =
        Call::new(PackageId::clinic(), Provider::Clinic).with_query(qid("tidb_gc_pause"), None);
    assert!(matches!(turn.admit(&right).unwrap(), Admission::Admit(_)));
}

#[test]
fn repair_and_unchanged_retries_are_refused_with_a_reason() {
    let h = handoff();
    let gate = RefinementGate::new(&h).with_question("Is TiDB CPU saturated?");
    let cases: Vec<(RefinementRequest, RefinementCode)> = vec![
        (
            request("  ", &["cpu"], &["n"]),
            RefinementCode::EmptyQuestion,
        ),
        (
            request("new question", &[], &["n"]),
            RefinementCode::NotDerived,
        ),
        (
            request("new question", &["nope"], &["n"]),
            RefinementCode::UnknownObjective,
        ),
        // Deriving from a failed objective is repairing it.
        (
            request("new question", &["cpu", "gc"], &["n"]),
            RefinementCode::SourceNotAnswered,
        ),
        (
            request("is tidb   CPU saturated", &["cpu"], &["n"]),
            RefinementCode::NotDistinct,
        ),
        // Restating an objective's query id or expression is not a new question.
        (
            request("CPU", &["cpu"], &["n"]),
            RefinementCode::NotDistinct,
        ),
        (
            request(
                "sum by(instance)(rate(process_cpu_seconds_total[1m]))",
                &["cpu"],
                &["n"],
            ),
            RefinementCode::NotDistinct,
        ),
        (
            request("new question", &["cpu"], &[]),
            RefinementCode::NoQuery,
        ),
        (
            request("new question", &["cpu"], &["gc"]),
            RefinementCode::QueryIdReused,
        ),
        (
            request("new question", &["cpu"], &["n", "n"]),
            RefinementCode::QueryIdReused,
        ),
        (
            RefinementRequest {
                request_digests: vec![digest(3)],
                ..request("new question", &["cpu"], &["n"])
            },
            RefinementCode::UnchangedRetry,
        ),
    ];
    for (r, code) in cases {
        let mut g = gate.clone();
        assert_eq!(refused_code(&mut g, &r), code, "{r:?}");
        assert!(!g.is_spent(), "a refusal does not spend the gate");
    }
}

#[test]
fn normalization() {
    assert_eq!(
        normalize_question("  Is TiDB-CPU   HIGH?? "),
        "is tidb cpu high"
    );
    assert_eq!(normalize_question("?!"), "");
    let _: QueryId = qid("x");
}
