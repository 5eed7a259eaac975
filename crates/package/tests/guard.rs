//! The fail-closed output guard: a protected value in any encoding is always blocked;
//! text without protected values is never blocked.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use evidence_package::internal::searched_forms;
use evidence_package::{BlockCause, GuardBuilder, GuardLimits, OutputGuard, ScanFailure, Verdict};
use evidence_result::{
    Details, ErrorCode, Evidence, EvidenceOutcome, FailureClass, NonFiniteCounts, Operation,
    Origin, PackageId, PeakSpread, Provider, QueryId, RequestDigest, SeriesStats, SeriesSummary,
    ToolResult,
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use proptest::prelude::*;
use secrecy::SecretString;
use serde_json::json;

/// Every encoding the issue names, each applied independently of the guard's own encoder.
#[derive(Debug, Clone, Copy)]
enum Encoding {
    Raw,
    /// Base64 of `prefix bytes + value + suffix bytes`: the value sits at any of the three
    /// byte alignments inside longer base64 text.
    Base64 {
        url_safe: bool,
        padded: bool,
    },
    HexLower,
    HexUpper,
    PercentAll,
    PercentNonAlnum,
    PercentComponent,
    PercentLowerHex,
    Json,
    JsonSlash,
    JsonAsciiOnly,
    JsonAllUnicode,
    JsonTwice,
}

const ENCODINGS: [Encoding; 16] = [
    Encoding::Raw,
    Encoding::Base64 {
        url_safe: false,
        padded: true,
    },
    Encoding::Base64 {
        url_safe: false,
        padded: false,
    },
    Encoding::Base64 {
        url_safe: true,
        padded: true,
    },
    Encoding::Base64 {
        url_safe: true,
        padded: false,
    },
    Encoding::HexLower,
    Encoding::HexUpper,
    Encoding::PercentAll,
    Encoding::PercentNonAlnum,
    Encoding::PercentComponent,
    Encoding::PercentLowerHex,
    Encoding::Json,
    Encoding::JsonSlash,
    Encoding::JsonAsciiOnly,
    Encoding::JsonAllUnicode,
    Encoding::JsonTwice,
];

const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

fn json_escape_ascii(s: &str, all: bool) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if !all && c.is_ascii() && c != '"' && c != '\\' && !c.is_ascii_control() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// Embeds `value` in `before`/`after` text using `encoding`.
fn embed(value: &[u8], encoding: Encoding, before: &str, after: &str, pad_bytes: &[u8]) -> String {
    let text = || String::from_utf8(value.to_vec()).unwrap();
    let encoded = match encoding {
        Encoding::Raw => text(),
        Encoding::Base64 { url_safe, padded } => {
            let mut bytes = pad_bytes.to_vec();
            bytes.extend_from_slice(value);
            bytes.extend_from_slice(pad_bytes);
            match (url_safe, padded) {
                (false, true) => STANDARD.encode(&bytes),
                (false, false) => STANDARD_NO_PAD.encode(&bytes),
                (true, true) => URL_SAFE.encode(&bytes),
                (true, false) => URL_SAFE_NO_PAD.encode(&bytes),
            }
        }
        Encoding::HexLower => hex::encode(value),
        Encoding::HexUpper => hex::encode_upper(value),
        Encoding::PercentAll => value.iter().map(|b| format!("%{b:02X}")).collect(),
        Encoding::PercentNonAlnum => utf8_percent_encode(&text(), NON_ALPHANUMERIC).to_string(),
        Encoding::PercentComponent => utf8_percent_encode(&text(), COMPONENT).to_string(),
        Encoding::PercentLowerHex => {
            let upper = utf8_percent_encode(&text(), NON_ALPHANUMERIC).to_string();
            let mut out = String::new();
            let mut hex_left = 0;
            for c in upper.chars() {
                if c == '%' {
                    hex_left = 2;
                    out.push(c);
                } else if hex_left > 0 {
                    out.push(c.to_ascii_lowercase());
                    hex_left -= 1;
                } else {
                    out.push(c);
                }
            }
            out
        }
        Encoding::Json => {
            let q = serde_json::to_string(&text()).unwrap();
            q[1..q.len() - 1].to_owned()
        }
        Encoding::JsonSlash => {
            let q = serde_json::to_string(&text()).unwrap();
            q[1..q.len() - 1].replace('/', "\\/")
        }
        Encoding::JsonAsciiOnly => json_escape_ascii(&text(), false),
        Encoding::JsonAllUnicode => json_escape_ascii(&text(), true),
        Encoding::JsonTwice => {
            let once = serde_json::to_string(&json!({"v": text()})).unwrap();
            serde_json::to_string(&once).unwrap()
        }
    };
    format!("{before}{encoded}{after}")
}

fn guard_for(values: &[(String, String)]) -> OutputGuard {
    let mut b = GuardBuilder::default();
    for (name, value) in values {
        b.add_secret(name, &SecretString::from(value.clone()))
            .unwrap();
    }
    b.build().unwrap()
}

fn blocked_names(v: &Verdict) -> Vec<String> {
    match v {
        Verdict::Blocked(b) => b.secrets.clone(),
        Verdict::Clean => Vec::new(),
    }
}

/// Secret values: printable text with unicode, punctuation and spaces, 8 to 40 bytes.
fn secret_value() -> impl Strategy<Value = String> {
    "[A-Za-z0-9 !#$%&()*+,./:;<=>?@\\[\\]^_`{|}~'\"\\\\éü€日本😀-]{8,24}"
        .prop_filter("at least 8 bytes", |s| s.len() >= 8)
}

/// Surrounding text: anything printable, including quotes, backslashes and percent signs.
fn filler() -> impl Strategy<Value = String> {
    "[ -~]{0,40}"
}

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

    /// A scan that cannot complete fails closed, names no secret (none matched), and
    /// its replacement says the scan could not complete, never that a protected value
    /// was there; a found secret is still named and still says so.
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

    /// Every value derived from a browser storage state (cookie raw and percent-decoded,
    /// localStorage whole and JSON leaves, JWT segments) is blocked in any encoding.
    #[test]
    fn storage_state_values_are_always_blocked(
        session in "[A-Za-z0-9]{16,32}",
        decoded_part in "[a-z/+=]{8,16}",
        leaf in "[A-Za-z0-9._~-]{10,24}",
        jwt_body in prop::collection::vec(any::<u8>(), 12..40),
        jwt_sig in prop::collection::vec(any::<u8>(), 16..32),
        target in 0usize..5,
        which in 0usize..ENCODINGS.len(),
        before in filler(),
    ) {
        let jwt_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(&jwt_body);
        let signature = URL_SAFE_NO_PAD.encode(&jwt_sig);
        let jwt = format!("{jwt_header}.{payload}.{signature}");
        let encoded_cookie = utf8_percent_encode(&decoded_part, NON_ALPHANUMERIC).to_string();
        let state = json!({
            "cookies": [
                {"name": "grafana_session", "value": session, "domain": "grafana.wetech.internal.example", "path": "/", "expires": -1, "httpOnly": true, "secure": true, "sameSite": "Lax"},
                {"name": "grafana_hint", "value": encoded_cookie, "domain": "grafana.wetech.internal.example", "path": "/", "expires": -1, "httpOnly": false, "secure": true, "sameSite": "Lax"}
            ],
            "origins": [{
                "origin": "https://grafana.wetech.internal.example",
                "localStorage": [{"name": "grafana.auth", "value": json!({"token": jwt, "profile": {"id": leaf}}).to_string()}]
            }]
        });
        let mut b = GuardBuilder::default();
        b.add_storage_state("wetech_storage_state", &SecretString::from(state.to_string())).unwrap();
        let guard = b.build().unwrap();
        let value: String = match target {
            0 => session.clone(),
            1 => decoded_part.clone(),
            2 => leaf.clone(),
            3 => payload.clone(),
            _ => signature.clone(),
        };
        let output = embed(value.as_bytes(), ENCODINGS[which], &before, "\"}", &[7, 7]);
        let verdict = guard.scan_text(&output);
        let names = blocked_names(&verdict);
        prop_assert!(names.iter().any(|n| n.starts_with("wetech_storage_state")), "{:?} {:?} not blocked: {:?}", ENCODINGS[which], value, output);
        if let Verdict::Blocked(b) = verdict {
            prop_assert!(!b.detail().contains(&value));
        }
    }
}

#[test]
fn short_storage_state_credentials_are_refused_and_short_page_state_is_not_a_needle() {
    let refuse = |state: serde_json::Value| {
        GuardBuilder::default()
            .add_storage_state(
                "wetech_storage_state",
                &SecretString::from(state.to_string()),
            )
            .unwrap_err()
    };
    let session = json!({"name": "grafana_session", "value": "0123456789abcdef0123456789abcdef", "httpOnly": true});
    // A short session cookie refuses the state, naming the entry and never the value.
    let e = refuse(
        json!({"cookies": [{"name": "grafana_session", "value": "s3cr3t", "httpOnly": true}]}),
    );
    let text = e.to_string();
    assert!(
        text.contains("wetech_storage_state") && text.contains("cookie `grafana_session`"),
        "{text}"
    );
    assert!(!text.contains("s3cr3t"), "{text}");
    // Short page state alone is no credential: nothing to sign in with.
    let e = refuse(json!({"cookies": [{"name": "lang", "value": "en"}], "origins": []}));
    assert!(e.to_string().contains("holds no credential"), "{e}");
    // Beside a credential, it binds, and the words it holds never block.
    let mut b = GuardBuilder::default();
    b.add_storage_state(
        "wetech_storage_state",
        &SecretString::from(
            json!({"cookies": [session, {"name": "lang", "value": "en"}]}).to_string(),
        ),
    )
    .unwrap();
    assert_eq!(
        b.unguarded(),
        ["wetech_storage_state: cookie `lang` (page state, shorter than 8 bytes)"]
    );
    let guard = b.build().unwrap();
    assert!(
        !guard
            .scan_text("{\"lang\":\"en\",\"text\":\"when\"}")
            .is_blocked()
    );
    assert!(
        guard
            .scan_text("0123456789abcdef0123456789abcdef")
            .is_blocked()
    );
    let e = refuse(json!({"cookies": 5}));
    assert!(
        e.to_string().contains("not a Playwright storage state"),
        "{e}"
    );
}

/// Names of page state in generated storage states (none names a credential).
const PAGE_STATE_NAMES: [&str; 6] = [
    "lang",
    "theme",
    "grafana.navigation.docked",
    "grafana.preferences.language",
    "grafana_session_expiry",
    "sidebar",
];

/// Names of credentials in generated storage states.
const CREDENTIAL_NAMES: [&str; 5] = [
    "grafana_session",
    "JSESSIONID",
    "connect.sid",
    "XSRF-TOKEN",
    "grafana.auth",
];

/// A generated value of a storage state: short (under 8 bytes) or long.
fn state_value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]{1,7}",
        "[A-Za-z0-9_~-]{8,28}",
        "[A-Za-z0-9%/+=]{8,20}"
    ]
}

/// A generated storage state and every value in it that must be guarded (8 bytes or
/// more: raw and percent-decoded cookies, whole localStorage values, JSON string
/// leaves, JWT segments), with the number of short page-state values it holds.
#[derive(Debug, Clone)]
struct GeneratedState {
    state: serde_json::Value,
    guarded: Vec<String>,
    short_page_state: usize,
}

fn generated_state() -> impl Strategy<Value = GeneratedState> {
    (
        prop::sample::select(CREDENTIAL_NAMES.to_vec()),
        "[0-9a-f]{32}",
        any::<bool>(),
        prop::collection::vec((prop::sample::select(PAGE_STATE_NAMES.to_vec()), state_value()), 0..4),
        prop::collection::vec((prop::sample::select(PAGE_STATE_NAMES.to_vec()), state_value()), 0..4),
        prop::collection::vec((prop::sample::select(vec!["uid", "title", "theme", "tz", "folder"]), state_value()), 0..4),
        prop::option::of((prop::collection::vec(any::<u8>(), 4..30), prop::collection::vec(any::<u8>(), 16..32))),
    )
        .prop_map(|(credential, session, http_only, cookies, entries, leaves, jwt)| {
            let mut guarded = Vec::new();
            let mut short_page_state = 0;
            let mut count = |v: &str, guarded: &mut Vec<String>| {
                if v.len() >= 8 {
                    guarded.push(v.to_owned());
                } else {
                    short_page_state += 1;
                }
            };
            let mut cookie_list = vec![json!({"name": credential, "value": session, "httpOnly": http_only})];
            guarded.push(session.clone());
            for (i, (name, value)) in cookies.iter().enumerate() {
                cookie_list.push(json!({"name": format!("c{i}_{name}"), "value": value, "httpOnly": false}));
                count(value, &mut guarded);
                let decoded = percent_encoding::percent_decode_str(value).collect::<Vec<u8>>();
                if decoded != value.as_bytes() {
                    if decoded.len() < 8 {
                        count("", &mut guarded);
                    } else if let Ok(d) = String::from_utf8(decoded) {
                        guarded.push(d);
                    }
                }
            }
            let mut storage = Vec::new();
            for (i, (name, value)) in entries.iter().enumerate() {
                storage.push(json!({"name": format!("{i}.{name}"), "value": value}));
                count(value, &mut guarded);
            }
            let mut object = serde_json::Map::new();
            for (key, value) in &leaves {
                object.insert((*key).to_owned(), json!(value));
            }
            if let Some((body, sig)) = &jwt {
                let token = format!(
                    "{}.{}.{}",
                    URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256"}"#),
                    URL_SAFE_NO_PAD.encode(body),
                    URL_SAFE_NO_PAD.encode(sig)
                );
                for segment in token.split('.') {
                    count(segment, &mut guarded);
                }
                guarded.push(token.clone());
                object.insert("profile".to_owned(), json!({"id_token": token}));
            }
            if !object.is_empty() {
                let whole = serde_json::Value::Object(object.clone()).to_string();
                for value in object.values().filter_map(|v| v.as_str()) {
                    count(value, &mut guarded);
                }
                guarded.push(whole.clone());
                storage.push(json!({"name": "grafana.dashboard.recent", "value": whole}));
            }
            GeneratedState {
                state: json!({"cookies": cookie_list, "origins": [{"origin": "https://grafana.example", "localStorage": storage}]}),
                guarded,
                short_page_state,
            }
        })
}

proptest! {
    // A case builds one guard over a whole generated state and checks every guarded value
    // of it, each in a generated encoding.
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// A generated storage state with a long credential binds; every value of 8 bytes or
    /// more in it is blocked in any encoding; exactly its short page state is left
    /// unguarded and listed; a copy whose credential is too short is refused.
    #[test]
    fn every_guarded_storage_state_value_is_blocked_in_any_encoding(
        generated in generated_state(),
        encodings in prop::collection::vec(0usize..ENCODINGS.len(), 64),
        before in filler(),
        short in "[0-9a-f]{0,7}",
    ) {
        let mut b = GuardBuilder::default();
        b.add_storage_state("wetech_storage_state", &SecretString::from(generated.state.to_string())).unwrap();
        prop_assert_eq!(b.unguarded().len(), generated.short_page_state, "{:?}", b.unguarded());
        let guard = b.build().unwrap();
        for (i, value) in generated.guarded.iter().enumerate() {
            let encoding = ENCODINGS[encodings[i % encodings.len()]];
            let output = embed(value.as_bytes(), encoding, &before, "\"}", &[7, 7]);
            let verdict = guard.scan_text(&output);
            prop_assert!(
                blocked_names(&verdict).iter().any(|n| n.starts_with("wetech_storage_state")),
                "{:?} {:?} not blocked: {:?}", encoding, value, output
            );
            if let Verdict::Blocked(blocked) = verdict {
                prop_assert!(!blocked.detail().contains(value.as_str()));
            }
        }
        let mut refused = generated.state.clone();
        refused["cookies"][0]["value"] = json!(short);
        let e = GuardBuilder::default()
            .add_storage_state("wetech_storage_state", &SecretString::from(refused.to_string()))
            .unwrap_err();
        let is_too_short = matches!(e, evidence_package::PackageError::SecretTooShort { .. });
        prop_assert!(is_too_short, "{e}");
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
