//! The fail-closed output guard: a protected value in any encoding is always blocked;
//! text without protected values is never blocked.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod encodings;

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use evidence_package::internal::searched_forms;
use evidence_package::{
    GuardBuilder, OutputGuard, guard::BlockCause, guard::GuardLimits, guard::ScanFailure,
    guard::Verdict,
};
use evidence_result::{
    Details, ErrorCode, Evidence, FailureClass, Operation, Origin, PackageId, Provider, QueryId,
    RequestDigest, ToolResult, evidence::EvidenceOutcome, series::NonFiniteCounts,
    series::PeakSpread, series::SeriesStats, series::SeriesSummary,
};
use proptest::prelude::*;
use secrecy::SecretString;
use serde_json::json;

use encodings::{ENCODINGS, blocked_names, embed, filler, guard_for, secret_value};

proptest! {
    // Each case builds a guard (a DFA), slow in unoptimized test builds: keep counts modest.
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A secret embedded anywhere in random text, in any encoding, is always blocked, and
    /// the block names the secret, never its value.
    #[test]
    fn a_secret_in_any_encoding_is_always_blocked(
        secret in secret_value(),
        others in prop::collection::vec("[A-Za-z0-9]{12,20}", 0..4),
        which in 0usize..ENCODINGS.len(),
        before in filler(),
        after in filler(),
        pad in prop::collection::vec(any::<u8>(), 0..3),
    ) {
        let mut values: Vec<(String, String)> = others
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("other_{i}"), v.clone()))
            .collect();
        values.push(("target_secret".to_owned(), secret.clone()));
        let guard = guard_for(&values);
        let output = embed(secret.as_bytes(), ENCODINGS[which], &before, &after, &pad);
        let verdict = guard.scan_text(&output);
        let names = blocked_names(&verdict);
        prop_assert!(names.contains(&"target_secret".to_owned()), "{:?} {:?} not blocked in {:?}", ENCODINGS[which], secret, output);
        if let Verdict::Blocked(b) = &verdict {
            prop_assert!(!b.detail().contains(&secret));
            prop_assert_eq!(&b.cause, &BlockCause::SecretFound);
        }
    }

    /// Nested encodings (base64 or percent of hex, JSON, percent, base64) are decoded and
    /// rescanned.
    #[test]
    fn nested_encodings_are_blocked(
        secret in "[A-Za-z0-9 ./+=_-]{8,24}",
        inner in 0usize..ENCODINGS.len(),
        outer in prop::sample::select(vec![1usize, 2, 3, 4, 7, 8, 10]),
        before in "[a-z ]{0,12}",
    ) {
        let guard = guard_for(&[("target_secret".to_owned(), secret.clone())]);
        let once = embed(secret.as_bytes(), ENCODINGS[inner], "", "", &[]);
        let twice = embed(once.as_bytes(), ENCODINGS[outer], &before, " tail", &[]);
        prop_assert!(guard.scan_text(&twice).is_blocked(), "{:?} in {:?}: {:?}", ENCODINGS[inner], ENCODINGS[outer], twice);
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A scan that cannot complete (here the size cap) fails closed, names no secret (none
    /// matched), and its replacement says the scan could not complete, never that a
    /// protected value was there; it keeps the class `output_blocked`, since what was not
    /// scanned may hold a secret. A found secret is still named and still says so.
    #[test]
    fn an_incomplete_scan_names_no_secret(
        secrets in prop::collection::vec("[A-Za-z0-9]{12,32}", 1..5),
        extra in 1usize..512,
    ) {
        let values: Vec<(String, String)> = secrets
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("s_{i}"), v.clone()))
            .collect();
        let mut b = GuardBuilder::new(GuardLimits {
            max_output_bytes: 256,
            ..GuardLimits::default()
        });
        for (name, value) in &values {
            b.add_secret(name, &SecretString::from(value.clone())).unwrap();
        }
        let guard = b.build().unwrap();
        let Verdict::Blocked(blocked) = guard.scan_text(&"-".repeat(256 + extra)) else {
            panic!("an output over the cap must block");
        };
        prop_assert!(blocked.secrets.is_empty());
        prop_assert!(matches!(blocked.cause, BlockCause::ScanFailed(_)));
        let replaced = guard.blocked_result(origin(), None, &blocked);
        let details = replaced.details();
        prop_assert_eq!(details.failure_class(), Some(FailureClass::OutputBlocked));
        let instruction = &details.correction.as_ref().unwrap().instruction;
        prop_assert!(instruction.contains("could not complete"), "{}", instruction);
        prop_assert!(!instruction.contains("contained a protected value"), "{}", instruction);
        let Verdict::Blocked(found) = guard.scan_text(&secrets[0]) else {
            panic!("a secret must block");
        };
        prop_assert_eq!(&found.cause, &BlockCause::SecretFound);
        prop_assert!(found.secrets.contains(&"s_0".to_owned()));
        let replaced = guard.blocked_result(origin(), None, &found);
        let details = replaced.details();
        let instruction = &details.correction.as_ref().unwrap().instruction;
        prop_assert!(instruction.contains("contained a protected value"), "{}", instruction);
    }

    /// Text without protected values is never blocked, including base64, hex, percent and
    /// JSON-escaped runs of unrelated data.
    #[test]
    fn text_without_secrets_is_never_blocked(
        secrets in prop::collection::vec("[A-Za-z0-9]{12,32}", 1..8),
        text in "[ -~]{0,600}",
        noise in prop::collection::vec(any::<u8>(), 0..200),
        which in 0usize..ENCODINGS.len(),
    ) {
        let values: Vec<(String, String)> = secrets
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("s_{i}"), v.clone()))
            .collect();
        let guard = guard_for(&values);
        prop_assume!(!secrets.iter().any(|s| text.contains(s.as_str())));
        let noise_text = embed(hex::encode(&noise).as_bytes(), ENCODINGS[which], "", "", &[1]);
        let output = format!("{text}{noise_text}{}", STANDARD.encode(&noise));
        prop_assert_eq!(guard.scan_text(&output), Verdict::Clean);
        let metrics = json!({"status": "success", "data": {"result": [{"metric": {"__name__": "tidb_cpu", "instance": text}, "values": [[1722950400, "0.5"]]}]}});
        prop_assert_eq!(guard.scan_text(&metrics.to_string()), Verdict::Clean);
    }
}

fn origin() -> Origin {
    Origin {
        package: PackageId::clinic(),
        provider: Provider::Clinic,
        operation: Operation::QueryRange,
        policy_source: None,
    }
}

fn success_with_label(value: &str) -> ToolResult {
    let mut labels = BTreeMap::new();
    labels.insert("instance".to_owned(), value.to_owned());
    let evidence = Evidence {
        outcome: EvidenceOutcome::Data,
        unit: Some("cores".to_owned()),
        expr: Some("rate(x[1m])".to_owned()),
        window: None,
        series_count: 1,
        point_count: 2,
        non_finite: Some(NonFiniteCounts::default()),
        peak_spread: PeakSpread::from_peaks([3.0]),
        top_k: 10,
        truncated: false,
        common_labels: BTreeMap::new(),
        series: vec![SeriesSummary {
            labels,
            points: 2,
            non_finite_points: 0,
            stats: SeriesStats::from_points(&[(1.0, 1.0), (2.0, 3.0)]),
        }],
        warnings: Vec::new(),
    };
    let details = Details::success(
        origin(),
        QueryId::new("tidb_cpu").unwrap(),
        RequestDigest::of(&json!({"expr": "rate(x[1m])"})).unwrap(),
        evidence,
    );
    ToolResult::new(details).unwrap()
}

#[test]
fn a_blocked_result_is_replaced_whole_by_output_blocked() {
    let secret = "tok_9f8e7d6c5b4a\"quoted\"";
    let guard = guard_for(&[("clinic_api_token".to_owned(), secret.to_owned())]);
    let clean = success_with_label("tidb-0");
    let guarded = guard.enforce(clean.clone());
    assert_eq!(guarded.verdict, Verdict::Clean);
    assert_eq!(guarded.into_result(), clean);

    let leaked = success_with_label(&format!("tidb-0 {secret}"));
    let guarded = guard.enforce(leaked);
    // The verdict names the secret for the audit record; the result names neither the
    // secret nor its value.
    assert_eq!(
        guarded.blocked().map(|b| b.secrets.clone()),
        Some(vec!["clinic_api_token".to_owned()])
    );
    let replaced = guarded.result;
    let d = replaced.details();
    assert!(replaced.is_failed());
    assert!(d.evidence.is_none() && d.items.is_empty());
    let error = d.error.as_ref().unwrap();
    assert_eq!(error.code, ErrorCode::output_blocked());
    assert_eq!(error.class, FailureClass::OutputBlocked);
    assert_eq!(d.query_id.as_ref().unwrap().as_str(), "tidb_cpu");
    let detail = d.detail_error.as_ref().unwrap();
    assert!(!detail.contains("clinic_api_token"), "{detail}");
    assert!(detail.contains("protected value"), "{detail}");
    let json = replaced.to_json().unwrap();
    assert!(!json.contains("tok_9f8e7d6c5b4a"));
    assert!(!guard.scan_result(&replaced).is_blocked());
    assert!(!d.correction.as_ref().unwrap().allowed);
}

#[test]
fn a_secret_inside_the_query_id_is_not_kept() {
    let secret = "queryIdSecret1";
    let guard = guard_for(&[("k".to_owned(), secret.to_owned())]);
    let failure = evidence_result::Failure::new(
        ErrorCode::promql_parse_error(),
        FailureClass::QueryRejected,
        "bad",
    );
    let details = Details::failure(origin(), Some(QueryId::new(secret).unwrap()), None, failure);
    let replaced = guard.enforce(ToolResult::new(details).unwrap()).result;
    assert!(replaced.details().query_id.is_none());
    assert!(!replaced.to_json().unwrap().contains(secret));
}

#[test]
fn a_secret_that_is_also_a_name_is_never_echoed() {
    // The value equals another secret's name: the replacement leaves names out.
    let guard = guard_for(&[
        ("alpha_name_1".to_owned(), "beta_name_22".to_owned()),
        ("beta_name_22".to_owned(), "zzzzzzzzzzzz".to_owned()),
    ]);
    let replaced = guard.enforce(success_with_label("beta_name_22")).result;
    assert!(replaced.is_failed());
    assert!(!replaced.to_json().unwrap().contains("beta_name_22"));
}

#[test]
fn scan_failures_block_name_no_secret_and_say_what_happened() {
    let mut b = GuardBuilder::new(GuardLimits {
        max_output_bytes: 1024,
        ..GuardLimits::default()
    });
    b.add_secret(
        "clinic_api_token",
        &SecretString::from("abcdefgh12345".to_owned()),
    )
    .unwrap();
    let guard = b.build().unwrap();
    let verdict = guard.scan_bytes(&[b'x'; 1025]);
    let Verdict::Blocked(blocked) = verdict else {
        panic!()
    };
    assert!(matches!(
        blocked.cause,
        BlockCause::ScanFailed(ScanFailure::TooLarge {
            bytes: 1025,
            limit: 1024
        })
    ));
    // Nothing matched: the audit names no secret.
    assert!(blocked.secrets.is_empty(), "{:?}", blocked.secrets);
    let replaced = guard.blocked_result(origin(), None, &blocked);
    assert_eq!(
        replaced.details().failure_class(),
        Some(FailureClass::OutputBlocked)
    );
    assert!(
        replaced
            .details()
            .detail_error
            .as_ref()
            .unwrap()
            .contains("scan could not complete")
    );

    // A decode bomb: nested base64 that expands past the decode budget.
    let mut b = GuardBuilder::new(GuardLimits {
        max_output_bytes: 16 * 1024 * 1024,
        max_decode_depth: 6,
        decode_budget_factor: 1,
    });
    b.add_secret("k", &SecretString::from("abcdefgh12345".to_owned()))
        .unwrap();
    let guard = b.build().unwrap();
    let bomb: String = "QUFB".repeat(400_000);
    let verdict = guard.scan_text(&bomb);
    assert!(
        matches!(verdict, Verdict::Blocked(ref b) if matches!(b.cause, BlockCause::ScanFailed(ScanFailure::DecodeBudget { .. }))),
        "{verdict:?}"
    );
    let Verdict::Blocked(blocked) = verdict else {
        panic!()
    };
    assert!(blocked.secrets.is_empty(), "{:?}", blocked.secrets);
    let replaced = guard.blocked_result(origin(), None, &blocked);
    let details = replaced.details();
    let correction = details.correction.as_ref().unwrap();
    // What happened (the decoding budget), never "a protected value"; the turn stops.
    assert!(!correction.allowed);
    assert!(
        correction
            .instruction
            .contains("decoding nested encodings exceeded")
            && !correction.instruction.contains("protected value.")
            && !correction
                .instruction
                .contains("contained a protected value"),
        "{}",
        correction.instruction
    );
    assert!(
        details
            .detail_error
            .as_deref()
            .unwrap()
            .contains("decoding nested encodings exceeded")
    );
}

#[test]
fn an_empty_guard_still_enforces_the_size_cap() {
    let guard = OutputGuard::empty(GuardLimits {
        max_output_bytes: 4,
        ..GuardLimits::default()
    })
    .unwrap();
    assert!(!guard.scan_text("1234").is_blocked());
    assert!(guard.scan_text("12345").is_blocked());
}

#[test]
fn searched_forms_cover_the_documented_encodings() {
    let forms = searched_forms("a/b c+d\"é");
    assert!(forms.contains(&"a/b c+d\"é".to_owned()));
    assert!(forms.contains(&hex::encode("a/b c+d\"é")));
    assert!(forms.contains(&"a%2Fb%20c%2Bd%22%C3%A9".to_owned()));
    assert!(forms.contains(&"a%2fb%20c%2bd%22%c3%a9".to_owned()));
    assert!(forms.contains(&"a/b c+d\\\"é".to_owned()));
    assert!(
        forms.contains(&"a\\/b c+d\\\"\\u00e9".to_owned())
            || forms.contains(&"a/b c+d\\\"\\u00e9".to_owned())
    );
    assert!(forms.iter().all(|f| f.len() >= 8));
}
