//! Property tests over random sequences of attempts: one final outcome per objective,
//! equal to the last admitted attempt; bounded, exact attempt metadata; nothing admitted
//! after a shared failure; no unchanged retry admitted; the refinement gate's rules.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use evidence_materialize::*;
use evidence_result::{
    Details, ErrorCode, Evidence, FailureClass, Item, PackageId, Provider, QueryId, RequestDigest,
    ToolResult,
};
use proptest::prelude::*;
use support::*;

#[derive(Debug, Clone, Copy)]
enum Kind {
    Data,
    NoData,
    Fail(FailureClass),
}

#[derive(Debug, Clone)]
struct Op {
    package: u8,
    queries: Vec<(u8, Option<u8>, Kind)>,
    whole: Option<FailureClass>,
    refused: bool,
    millis: u64,
}

fn class() -> impl Strategy<Value = FailureClass> {
    use FailureClass::*;
    prop_oneof![
        6 => prop::sample::select(vec![InvalidArgument, QueryRejected, PolicyViolation]),
        2 => prop::sample::select(vec![ProviderUnavailable, Timeout, Internal]),
        1 => prop::sample::select(vec![
            Authentication,
            SessionBootstrap,
            Readiness,
            Authorization,
            BrowserRuntime,
            OutputBlocked
        ]),
    ]
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![3 => Just(Kind::Data), 2 => Just(Kind::NoData), 5 => class().prop_map(Kind::Fail)]
}

fn op() -> impl Strategy<Value = Op> {
    (
        0u8..3,
        prop::collection::vec((0u8..4, prop::option::weighted(0.8, 0u8..3), kind()), 0..=3),
        prop::option::weighted(0.1, class()),
        any::<bool>(),
        0u64..5000,
    )
        .prop_map(|(package, mut queries, whole, refused, millis)| {
            if package != 1 {
                queries.truncate(1);
            }
            Op {
                package,
                queries,
                whole,
                refused,
                millis,
            }
        })
}

fn package(p: u8) -> (PackageId, Provider) {
    match p {
        0 => (PackageId::wetech(), Provider::Wetech),
        1 => (PackageId::clinic(), Provider::Clinic),
        _ => (PackageId::manus(), Provider::Manus),
    }
}

fn q(i: u8) -> QueryId {
    qid(&format!("q{i}"))
}

fn d(i: u8) -> RequestDigest {
    digest(u32::from(i))
}

/// What one attempt is expected to look like in the handoff.
#[derive(Debug, Clone, PartialEq)]
struct Exp {
    key: Option<(PackageId, QueryId)>,
    status: Outcome,
    digest: Option<RequestDigest>,
    code: Option<String>,
    class: Option<FailureClass>,
    ran: bool,
}

fn call_of(op: &Op) -> Call {
    let (pkg, provider) = package(op.package);
    op.queries
        .iter()
        .fold(Call::new(pkg, provider), |c, (i, dg, _)| {
            c.with_query(q(*i), dg.map(d))
        })
}

fn code_of(class: FailureClass) -> String {
    failure(class).error.code.as_str().to_owned()
}

/// The result an admitted call returns, and its expected attempts (written out here,
/// independently of the crate's attribution code).
fn result_of(op: &Op, ran: bool) -> (ToolResult, Vec<Exp>) {
    let (pkg, provider) = package(op.package);
    let status = |k: Kind| match (ran, k) {
        (false, _) => Outcome::Refused,
        (true, Kind::Data) => Outcome::Ok,
        (true, Kind::NoData) => Outcome::NoData,
        (true, Kind::Fail(_)) => Outcome::Failed,
    };
    let exp = |qi: Option<u8>, digest, k: Kind| {
        let cls = match k {
            Kind::Fail(c) => Some(c),
            _ => None,
        };
        Exp {
            key: qi.map(|i| (pkg.clone(), q(i))),
            status: status(k),
            digest,
            code: cls.map(code_of),
            class: cls,
            ran,
        }
    };
    if op.queries.is_empty() {
        let k = Kind::Fail(FailureClass::InvalidArgument);
        let r = single_fail(
            pkg.clone(),
            provider,
            None,
            None,
            failure(FailureClass::InvalidArgument),
        );
        return (r, vec![exp(None, None, k)]);
    }
    if let Some(c) = op.whole.filter(|_| op.package == 1) {
        let r = single_fail(pkg.clone(), provider, None, None, failure(c));
        let exps = op
            .queries
            .iter()
            .map(|(i, dg, _)| exp(Some(*i), dg.map(d), Kind::Fail(c)))
            .collect();
        return (r, exps);
    }
    if op.package == 1 {
        let items = op
            .queries
            .iter()
            .map(|(i, dg, k)| match k {
                Kind::Data => Item::success(q(*i), dg.map(d), data("%", 4, 9.5)),
                Kind::NoData => Item::success(q(*i), dg.map(d), Evidence::no_data(None, 3)),
                Kind::Fail(c) => Item::failure(q(*i), dg.map(d), failure(*c)),
            })
            .collect();
        let exps = op
            .queries
            .iter()
            .map(|(i, dg, k)| exp(Some(*i), dg.map(d), *k))
            .collect();
        return (batch(items), exps);
    }
    let (i, dg, k) = op.queries[0];
    let r = match k {
        Kind::Data | Kind::NoData => {
            let ev = if matches!(k, Kind::Data) {
                data("cores", 2, 3.0)
            } else {
                Evidence::no_data(None, 3)
            };
            let reported = dg.map_or(digest(99), d);
            let r = single_ok(pkg.clone(), provider, &q(i), reported, ev);
            return (r, vec![exp(Some(i), Some(reported), k)]);
        }
        Kind::Fail(c) => single_fail(pkg.clone(), provider, Some(&q(i)), dg.map(d), failure(c)),
    };
    (r, vec![exp(Some(i), dg.map(d), k)])
}

fn meta_matches(m: &AttemptMeta, e: &Exp) -> bool {
    m.status == e.status
        && m.request_digest == e.digest
        && m.code.as_ref().map(|c| c.as_str().to_owned()) == e.code
        && m.class == e.class
        && m.duration_ms.is_some() == e.ran
}

fn check_handoff(exps: &[Exp], h: &Handoff) -> Result<(), TestCaseError> {
    let mut order: Vec<(PackageId, QueryId)> = Vec::new();
    let mut groups: HashMap<(PackageId, QueryId), Vec<&Exp>> = HashMap::new();
    let mut unattributed = Vec::new();
    for e in exps {
        match &e.key {
            Some(k) => {
                if !groups.contains_key(k) {
                    order.push(k.clone());
                }
                groups.entry(k.clone()).or_default().push(e);
            }
            None => unattributed.push(e),
        }
    }
    // Exactly one objective per (package, queryId), in first-call order.
    prop_assert_eq!(h.objectives.len(), order.len());
    for (o, key) in h.objectives.iter().zip(&order) {
        prop_assert_eq!(&(o.package.clone(), o.query_id.clone()), key);
        let atts = &groups[key];
        // The final outcome is the last admitted attempt's, else refused.
        let last_ran = atts.iter().rev().find(|a| a.ran);
        let expected = last_ran.map_or(Outcome::Refused, |a| a.status);
        prop_assert_eq!(o.outcome, expected);
        prop_assert_eq!(o.verified, expected == Outcome::Ok);
        if let Some(a) = last_ran {
            prop_assert_eq!(o.details.request_digest, a.digest);
            prop_assert_eq!(o.details.is_failed(), a.status == Outcome::Failed);
            prop_assert_eq!(
                o.details.evidence.as_deref().map(Evidence::is_no_data),
                match a.status {
                    Outcome::Ok => Some(false),
                    Outcome::NoData => Some(true),
                    _ => None,
                }
            );
        }
        prop_assert_eq!(o.details.query_id.as_ref(), Some(&o.query_id));
        prop_assert!(o.details.items.is_empty());
        check_trail(&o.attempts, atts)?;
    }
    match h.unattributed.as_ref() {
        None => prop_assert!(unattributed.is_empty()),
        Some(t) => check_trail(t, &unattributed)?,
    }
    let answered = h
        .objectives
        .iter()
        .filter(|o| o.outcome.is_answered())
        .count();
    let expected = if answered == 0 {
        AcquisitionStatus::Failed
    } else if answered == h.objectives.len() {
        AcquisitionStatus::Complete
    } else {
        AcquisitionStatus::Partial
    };
    prop_assert_eq!(h.acquisition, expected);
    // Deterministic and round-tripping.
    let json = h.to_json().unwrap();
    prop_assert_eq!(&Handoff::from_json(&json).unwrap(), h);
    Ok(())
}

fn check_trail(t: &AttemptTrail, atts: &[&Exp]) -> Result<(), TestCaseError> {
    prop_assert_eq!(t.total as usize, atts.len());
    prop_assert_eq!(t.admitted as usize, atts.iter().filter(|a| a.ran).count());
    prop_assert_eq!(t.refused as usize, atts.iter().filter(|a| !a.ran).count());
    prop_assert!(
        meta_matches(&t.first, atts[0]),
        "first {:?} vs {:?}",
        t.first,
        atts[0]
    );
    match (&t.last, atts.len()) {
        (None, 1) => {}
        (Some(last), n) if n > 1 => {
            prop_assert!(
                meta_matches(last, atts[n - 1]),
                "last {:?} vs {:?}",
                last,
                atts[n - 1]
            );
        }
        (last, n) => prop_assert!(false, "last {:?} with {} attempts", last, n),
    }
    // Bounded: the serialized trail does not grow with the number of attempts.
    prop_assert!(serde_json::to_string(t).unwrap().len() < 700);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn turn_control_and_materialization(
        ops in prop::collection::vec(op(), 1..40),
        max_calls in 1u32..30,
        per_package in prop::option::of(1u32..10),
    ) {
        let limits = TurnLimits { max_calls, max_calls_per_package: per_package };
        let mut turn = Turn::new(limits);
        let mut exps: Vec<Exp> = Vec::new();
        let mut shared_seen = false;
        let mut failed: HashMap<(PackageId, QueryId), HashSet<RequestDigest>> = HashMap::new();
        let mut admitted_per_key: HashMap<(PackageId, QueryId), u32> = HashMap::new();
        let mut admitted_calls = 0u32;
        for op in &ops {
            let call = call_of(op);
            match turn.admit(&call).unwrap() {
                Admission::Refuse(r) => {
                    if shared_seen {
                        prop_assert_eq!(r.code, RefusalCode::TurnStopped);
                    }
                    prop_assert!(r.result.is_failed());
                    let code = Some(r.code.as_str().to_owned());
                    let class = Some(r.code.class());
                    let refused = |key, digest| Exp {
                        key, status: Outcome::Refused, digest, code: code.clone(), class, ran: false,
                    };
                    if call.queries.is_empty() {
                        exps.push(refused(None, None));
                    }
                    for pq in &call.queries {
                        exps.push(refused(
                            Some((call.package.clone(), pq.query_id.clone())),
                            pq.request_digest,
                        ));
                    }
                }
                Admission::Admit(t) => {
                    prop_assert!(!shared_seen, "a call was admitted after a shared failure");
                    admitted_calls += 1;
                    prop_assert!(admitted_calls <= max_calls);
                    for pq in &call.queries {
                        let key = (call.package.clone(), pq.query_id.clone());
                        if let Some(dg) = pq.request_digest {
                            prop_assert!(
                                !failed.get(&key).is_some_and(|s| s.contains(&dg)),
                                "an unchanged retry was admitted"
                            );
                        }
                        let n = admitted_per_key.entry(key).or_default();
                        *n += 1;
                        prop_assert!(*n <= 2, "more than one correction in a turn");
                    }
                    let (result, new) = result_of(op, true);
                    turn.record(t, result, Duration::from_millis(op.millis)).unwrap();
                    for e in &new {
                        if e.status == Outcome::Failed {
                            if e.class.is_some_and(FailureClass::is_shared) {
                                shared_seen = true;
                            }
                            if let (Some(k), Some(dg)) = (&e.key, e.digest) {
                                failed.entry(k.clone()).or_default().insert(dg);
                            }
                        }
                    }
                    exps.extend(new);
                }
            }
        }
        prop_assert_eq!(turn.is_stopped(), shared_seen);
        let h = turn.handoff().unwrap();
        prop_assert_eq!(h.turn_stop.is_some(), shared_seen);
        check_handoff(&exps, &h)?;
        prop_assert_eq!(&turn.into_handoff().unwrap(), &h);
    }

    #[test]
    fn any_record_sequence_materializes_to_the_last_admitted_attempt(
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let mut records = Vec::new();
        let mut exps = Vec::new();
        for op in &ops {
            let (result, new) = result_of(op, !op.refused);
            let call = call_of(op);
            records.push(if op.refused {
                CallRecord::refused(call, result)
            } else {
                CallRecord::admitted(call, result, Duration::from_millis(op.millis))
            });
            exps.extend(new);
        }
        let h = materialize(&records);
        check_handoff(&exps, &h)?;
        prop_assert_eq!(materialize(&records).to_json().unwrap(), h.to_json().unwrap());
        // Moving the details out gives the same handoff as copying them.
        prop_assert_eq!(&materialize_owned(records.clone()), &h);
        let first_shared = exps.iter().position(|e| {
            e.status == Outcome::Failed && e.class.is_some_and(FailureClass::is_shared)
        });
        prop_assert_eq!(h.turn_stop.is_some(), first_shared.is_some());
    }

    #[test]
    fn the_refinement_gate_only_grants_a_distinct_derived_question_once(
        ops in prop::collection::vec(op(), 1..20),
        asks in prop::collection::vec((
            prop::sample::select(vec!["q1", "Q 2", "new question", "why is gc slow", " ", "Q3?"]),
            prop::collection::vec(0u8..6, 0..3),
            prop::collection::vec(0u8..8, 0..3),
            prop::collection::vec(0u8..4, 0..2),
        ), 1..6),
    ) {
        let records: Vec<CallRecord> = ops.iter().map(|op| {
            let (result, _) = result_of(op, !op.refused);
            if op.refused {
                CallRecord::refused(call_of(op), result)
            } else {
                CallRecord::admitted(call_of(op), result, Duration::ZERO)
            }
        }).collect();
        let h = materialize(&records);
        let mut gate = RefinementGate::new(&h);
        let mut granted = false;
        for (question, from, ids, digests) in asks {
            let r = RefinementRequest {
                question: question.to_owned(),
                derived_from: from.into_iter().map(q).collect(),
                query_ids: ids.into_iter().map(q).collect(),
                request_digests: digests.into_iter().map(d).collect(),
            };
            match gate.request(&r) {
                RefinementDecision::Allowed(g) => {
                    prop_assert!(!granted, "a second refinement was granted");
                    granted = true;
                    prop_assert!(!r.derived_from.is_empty());
                    for src in &r.derived_from {
                        let os: Vec<_> = h.objectives.iter().filter(|o| &o.query_id == src).collect();
                        prop_assert!(!os.is_empty());
                        prop_assert!(os.iter().all(|o| o.outcome.is_answered()));
                    }
                    prop_assert!(!g.query_ids.is_empty());
                    let nq = normalize_question(&r.question);
                    prop_assert!(!nq.is_empty());
                    for o in &h.objectives {
                        prop_assert!(!g.query_ids.contains(&o.query_id));
                        prop_assert_ne!(&nq, &normalize_question(o.query_id.as_str()));
                        for m in [Some(&o.attempts.first), o.attempts.last.as_ref()].into_iter().flatten() {
                            if let Some(dg) = m.request_digest {
                                prop_assert!(!r.request_digests.contains(&dg));
                            }
                        }
                    }
                }
                RefinementDecision::Refused(refusal) => {
                    prop_assert_eq!(gate.is_spent(), granted);
                    if granted {
                        prop_assert_eq!(refusal.code, RefinementCode::AlreadyRefined);
                    }
                }
            }
        }
    }
}

#[test]
fn details_of_a_refusal_are_a_contract_failure() {
    // A refusal is an ordinary failed result: the contract's checks hold for it.
    let mut turn = Turn::new(TurnLimits::new(0));
    let call = Call::single(PackageId::wetech(), Provider::Wetech, q(1), Some(d(1)));
    let Admission::Refuse(r) = turn.admit(&call).unwrap() else {
        panic!()
    };
    let details: &Details = r.result.details();
    assert!(details.check().is_ok());
    assert_eq!(
        details.error.as_ref().unwrap().code,
        ErrorCode::new("turn_call_limit").unwrap()
    );
}
