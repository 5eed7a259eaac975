//! The committed handoff JSON Schema is up to date, and handoffs validate against it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;
use std::time::Duration;

use evidence_materialize::*;
use evidence_result::{Evidence, FailureClass, Item, PackageId, Provider};
use support::*;

fn schema_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas/handoff.schema.json")
}

#[test]
fn committed_handoff_schema_is_current() {
    let generated = serde_json::to_string_pretty(&Handoff::json_schema()).unwrap() + "\n";
    let path = schema_path();
    if std::env::var_os("UPDATE_SCHEMAS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale or missing; regenerate it with \
         `UPDATE_SCHEMAS=1 cargo test -p evidence-materialize --test schema`",
        path.display()
    );
}

fn busy_handoff() -> Handoff {
    let mut turn = Turn::new(TurnLimits::new(10));
    let call = Call::new(PackageId::clinic(), Provider::Clinic)
        .with_query(qid("cpu"), Some(digest(1)))
        .with_query(qid("mem"), Some(digest(2)));
    let Admission::Admit(t) = turn.admit(&call).unwrap() else {
        panic!()
    };
    turn.record(
        t,
        batch(vec![
            Item::success(qid("cpu"), Some(digest(1)), data("cores", 56, 22.84)),
            Item::success(qid("mem"), Some(digest(2)), Evidence::no_data(None, 3)),
        ]),
        Duration::from_millis(5),
    )
    .unwrap();
    let _ = turn.admit(&call).unwrap();
    let no_id = Call::new(PackageId::wetech(), Provider::Wetech);
    let Admission::Admit(t) = turn.admit(&no_id).unwrap() else {
        panic!()
    };
    let fail = single_fail(
        PackageId::wetech(),
        Provider::Wetech,
        None,
        None,
        failure(FailureClass::InvalidArgument),
    );
    turn.record(t, fail, Duration::from_millis(1)).unwrap();
    let q = qid("tidb_cpu");
    let w = Call::single(
        PackageId::wetech(),
        Provider::Wetech,
        q.clone(),
        Some(digest(7)),
    );
    let Admission::Admit(t) = turn.admit(&w).unwrap() else {
        panic!()
    };
    let fail = single_fail(
        PackageId::wetech(),
        Provider::Wetech,
        Some(&q),
        Some(digest(7)),
        failure(FailureClass::BrowserRuntime),
    );
    turn.record(t, fail, Duration::from_millis(900)).unwrap();
    let _ = turn
        .admit(&Call::single(
            PackageId::manus(),
            Provider::Manus,
            qid("m"),
            None,
        ))
        .unwrap();
    turn.handoff().unwrap()
}

#[test]
fn handoffs_validate_against_the_committed_schema() {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let h = busy_handoff();
    assert!(h.turn_stop.is_some() && h.unattributed.is_some());
    let value = serde_json::to_value(&h).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");

    let mut broken = value.clone();
    broken["acquisition"] = "done".into();
    assert!(!validator.is_valid(&broken));
    let mut broken = value;
    broken["objectives"][0]["outcome"] = "zero".into();
    assert!(!validator.is_valid(&broken));
}

#[test]
fn handoff_json_is_deterministic_and_round_trips() {
    let a = busy_handoff();
    let b = busy_handoff();
    assert_eq!(a.to_json().unwrap(), b.to_json().unwrap());
    assert_eq!(a.to_json_pretty().unwrap(), b.to_json_pretty().unwrap());
    assert_eq!(Handoff::from_json(&a.to_json().unwrap()).unwrap(), a);
}
