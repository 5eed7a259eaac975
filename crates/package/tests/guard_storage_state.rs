//! The output guard over a browser storage state: every value derived from it (cookies
//! raw and percent-decoded, localStorage values whole and their JSON leaves, JWT
//! segments) is blocked in any encoding; a short credential is refused; short page state
//! is left unguarded and listed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod encodings;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use evidence_package::{GuardBuilder, guard::Verdict};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use proptest::prelude::*;
use secrecy::SecretString;
use serde_json::json;

use encodings::{ENCODINGS, blocked_names, embed, filler};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

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
        let is_too_short = matches!(e, evidence_package::error::SecretError::SecretTooShort { .. });
        prop_assert!(is_too_short, "{e}");
    }
}
