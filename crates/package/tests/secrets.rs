//! Secrets bound to one exact package digest.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{files, manifest, manifest_json, package};
use evidence_package::error::SecretError;
use evidence_package::{Package, PackageFile, SecretBinding, SecretValues};
use evidence_result::Provider;
use proptest::prelude::*;
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

const TOKEN: &str = "clinic-token-0123456789";

fn clinic_values() -> SecretValues {
    let mut v = SecretValues::new();
    v.insert("clinic_api_token", SecretString::from(TOKEN.to_owned()));
    v
}

#[test]
fn the_bound_digest_gets_exactly_its_environment() {
    let p = package(Provider::Clinic, 3);
    let binding = SecretBinding::bind(&p, clinic_values()).unwrap();
    assert_eq!(binding.digest(), p.digest());
    let env = binding.sandbox_env(&p).unwrap();
    let vars: Vec<(&str, &str)> = env.vars().map(|(k, v)| (k, v.expose_secret())).collect();
    assert_eq!(vars, [("CLINIC_API_TOKEN", TOKEN)]);
    for debug in [
        format!("{binding:?}"),
        format!("{env:?}"),
        format!("{:?}", clinic_values()),
    ] {
        assert!(!debug.contains(TOKEN), "{debug}");
    }
}

#[cfg(unix)]
#[test]
fn the_environment_reaches_a_sandbox_process() {
    let p = package(Provider::Clinic, 3);
    let binding = SecretBinding::bind(&p, clinic_values()).unwrap();
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("printf %s \"$CLINIC_API_TOKEN\"")
        .env_clear();
    binding.sandbox_env(&p).unwrap().apply(&mut cmd);
    let out = cmd.output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), TOKEN);
}

#[test]
fn an_older_revision_or_another_identity_gets_nothing() {
    let v3 = package(Provider::Clinic, 3);
    let binding = SecretBinding::bind(&v3, clinic_values()).unwrap();
    let v2 = package(Provider::Clinic, 2);
    let e = binding.sandbox_env(&v2).unwrap_err();
    assert!(matches!(e, SecretError::BindingMismatch { .. }));
    assert!(!e.to_string().contains(TOKEN));
    let manus = package(Provider::Manus, 3);
    assert!(binding.sandbox_env(&manus).is_err());
}

#[test]
fn values_must_match_the_auth_binding() {
    let p = package(Provider::Manus, 2);
    let mut v = SecretValues::new();
    v.insert(
        "manus_api_token",
        SecretString::from("manus-token-123456".to_owned()),
    );
    assert!(matches!(
        SecretBinding::bind(&p, v),
        Err(SecretError::MissingSecret(name)) if name == "manus_reference_key"
    ));
    let mut v = SecretValues::new();
    v.insert(
        "manus_api_token",
        SecretString::from("manus-token-123456".to_owned()),
    );
    v.insert(
        "manus_reference_key",
        SecretString::from("reference-key-0123456789abcdef".to_owned()),
    );
    v.insert("clinic_api_token", SecretString::from(TOKEN.to_owned()));
    assert!(matches!(
        SecretBinding::bind(&p, v),
        Err(SecretError::UnknownSecret(name)) if name == "clinic_api_token"
    ));
}

#[test]
fn a_wetech_storage_state_binds_and_guards_its_entries() {
    let p = package(Provider::Wetech, 2);
    let state = json!({
        "cookies": [{"name": "grafana_session", "value": "5f4dcc3b5aa765d61d8327deb882cf99", "domain": "grafana.wetech.internal.example", "path": "/", "expires": -1, "httpOnly": true, "secure": true, "sameSite": "Lax"}],
        "origins": []
    });
    let mut v = SecretValues::new();
    v.insert(
        "wetech_storage_state",
        SecretString::from(state.to_string()),
    );
    let binding = SecretBinding::bind(&p, v).unwrap();
    let env = binding.sandbox_env(&p).unwrap();
    assert_eq!(env.names(), ["WETECH_STORAGE_STATE"]);
    let verdict = binding
        .guard()
        .scan_text("{\"cookie\":\"grafana_session=5f4dcc3b5aa765d61d8327deb882cf99\"}");
    assert!(verdict.is_blocked());
    assert!(
        binding
            .guard()
            .protected()
            .iter()
            .any(|l| l == "wetech_storage_state: cookie `grafana_session`")
    );

    let mut v = SecretValues::new();
    v.insert(
        "wetech_storage_state",
        SecretString::from("not json at all".to_owned()),
    );
    assert!(matches!(
        SecretBinding::bind(&p, v),
        Err(SecretError::InvalidStorageState { .. })
    ));
}

#[test]
fn the_guard_takes_the_package_output_cap() {
    let mut v = manifest_json(Provider::Clinic, 3);
    v["limits"]["max_output_bytes"] = json!(64);
    let p = Package::new(&manifest(&v), files()).unwrap();
    let binding = SecretBinding::bind(&p, clinic_values()).unwrap();
    assert_eq!(binding.guard().limits().max_output_bytes, 64);
    assert!(binding.guard().scan_text(&"x".repeat(65)).is_blocked());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A one-byte change of any file, a mode change or any manifest change yields another
    /// digest, and the binding produces nothing for it.
    #[test]
    fn any_other_digest_gets_nothing(which in 0usize..3, at in any::<prop::sample::Index>(), xor in 1u8..=255, mode in any::<bool>()) {
        let bound = package(Provider::Clinic, 3);
        let binding = SecretBinding::bind(&bound, clinic_values()).unwrap();
        let mut changed = files();
        let f = &changed[which];
        let (contents, executable) = if mode && which != 0 {
            (f.contents().unwrap().to_vec(), !f.is_executable())
        } else {
            let mut bytes = f.contents().unwrap().to_vec();
            let i = at.index(bytes.len());
            bytes[i] ^= xor;
            (bytes, f.is_executable())
        };
        changed[which] = PackageFile::new(f.path(), executable, contents);
        let other = Package::new(&manifest(&manifest_json(Provider::Clinic, 3)), changed).unwrap();
        prop_assert_ne!(other.digest(), bound.digest());
        let refused = matches!(binding.sandbox_env(&other), Err(SecretError::BindingMismatch { .. }));
        prop_assert!(refused);
        prop_assert!(binding.sandbox_env(&bound).is_ok());
    }

    /// Values under 8 bytes are refused at binding time, naming the secret, not the value.
    #[test]
    fn short_values_are_refused_at_binding_time(value in "[A-Za-z0-9]{1,7}") {
        let p = package(Provider::Clinic, 3);
        let mut v = SecretValues::new();
        v.insert("clinic_api_token", SecretString::from(value.clone()));
        let e = SecretBinding::bind(&p, v).unwrap_err();
        let refused = matches!(&e, SecretError::SecretTooShort { name, .. } if name == "clinic_api_token");
        prop_assert!(refused, "{:?}", e);
        let quoted = format!("{value:?}");
        prop_assert!(!e.to_string().contains(&quoted));
    }
}

/// The session cookie a real Grafana login leaves: 32 hex characters, `httpOnly`.
const GRAFANA_SESSION: &str = "7f3c9a1e5b2d48c6a0e4f1b39d8c2a57";

/// A Playwright storage state as a real Grafana login leaves it: the `httpOnly` session
/// cookie, the script-readable `grafana_session_expiry` cookie (a 10-digit epoch), short
/// localStorage page state (`"true"`, `"en"`) and a longer JSON localStorage value.
fn grafana_state(session: &str) -> serde_json::Value {
    json!({
        "cookies": [
            {"name": "grafana_session", "value": session, "domain": "grafana.wetech.internal.example",
             "path": "/", "expires": 1893456000.0, "httpOnly": true, "secure": true, "sameSite": "Lax"},
            {"name": "grafana_session_expiry", "value": "1893456000", "domain": "grafana.wetech.internal.example",
             "path": "/", "expires": 1893456000.0, "httpOnly": false, "secure": true, "sameSite": "Lax"}
        ],
        "origins": [{
            "origin": "https://grafana.wetech.internal.example",
            "localStorage": [
                {"name": "grafana.navigation.docked", "value": "true"},
                {"name": "grafana.preferences.language", "value": "en"},
                {"name": "grafana.explore.richHistory.activeDatasourceOnly", "value": "false"},
                {"name": "grafana.dashboard.recent", "value": "{\"uid\":\"tidb-overview-01\",\"title\":\"TiDB\",\"starred\":\"1\"}"}
            ]
        }]
    })
}

fn bind_state(state: &serde_json::Value) -> Result<SecretBinding, SecretError> {
    let mut v = SecretValues::new();
    v.insert(
        "wetech_storage_state",
        SecretString::from(state.to_string()),
    );
    SecretBinding::bind(&package(Provider::Wetech, 2), v)
}

#[test]
fn a_real_grafana_storage_state_binds() {
    let binding = bind_state(&grafana_state(GRAFANA_SESSION)).unwrap();
    let guard = binding.guard();
    // The session cookie, the expiry epoch and the long JSON value and its long leaf are
    // guarded; the short page state is not a needle (it would block ordinary words).
    for needle in [
        GRAFANA_SESSION,
        "1893456000",
        "tidb-overview-01",
        "{\"uid\":\"tidb-overview-01\",\"title\":\"TiDB\",\"starred\":\"1\"}",
    ] {
        assert!(
            guard
                .scan_text(&format!(
                    "{{\"label\":\"{}\"}}",
                    needle.replace('"', "\\\"")
                ))
                .is_blocked(),
            "{needle} not guarded"
        );
    }
    let ordinary = "{\"status\":\"ok\",\"flags\":[\"true\",\"false\",\"en\",\"TiDB\",\"1\"],\"note\":\"when the user sent true\"}";
    assert!(!guard.scan_text(ordinary).is_blocked());
}

#[test]
fn the_binding_report_lists_unguarded_page_state_never_a_value() {
    let binding = bind_state(&grafana_state(GRAFANA_SESSION)).unwrap();
    let report = binding.report();
    assert_eq!(report.secrets, ["wetech_storage_state"]);
    assert_eq!(report.digest, package(Provider::Wetech, 2).digest());
    assert!(
        report
            .guarded
            .contains(&"wetech_storage_state: cookie `grafana_session`".to_owned()),
        "{:?}",
        report.guarded
    );
    let origin = "https://grafana.wetech.internal.example";
    let want = |key: &str, leaf: &str| {
        format!(
            "wetech_storage_state: localStorage `{key}` of {origin}{leaf} (page state, shorter than 8 bytes)"
        )
    };
    let mut expected = vec![
        want("grafana.navigation.docked", ""),
        want("grafana.preferences.language", ""),
        want("grafana.explore.richHistory.activeDatasourceOnly", ""),
        want("grafana.dashboard.recent", " (JSON leaf /starred)"),
        want("grafana.dashboard.recent", " (JSON leaf /title)"),
    ];
    expected.sort();
    let mut unguarded = report.unguarded.clone();
    unguarded.sort();
    assert_eq!(unguarded, expected);
    let line = report.to_json_line().unwrap();
    for value in [
        GRAFANA_SESSION,
        "1893456000",
        "\"true\"",
        "\"en\"",
        "tidb-overview-01",
    ] {
        assert!(!line.contains(value), "{line}");
    }
}

#[test]
fn a_session_cookie_too_short_to_guard_refuses_the_state() {
    for short in ["", "a1", "7f3c9a1"] {
        let e = bind_state(&grafana_state(short)).unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(&e, SecretError::SecretTooShort { name, .. } if name == "wetech_storage_state"),
            "{e:?}"
        );
        assert!(
            text.contains("cookie `grafana_session` (an httpOnly cookie)")
                && text.contains("shorter than 8 bytes"),
            "{text}"
        );
        if !short.is_empty() {
            assert!(!text.contains(short), "{text}");
        }
    }
    // Not httpOnly, but named like a session: still a credential.
    let mut state = grafana_state("abc");
    state["cookies"][0]["httpOnly"] = json!(false);
    let e = bind_state(&state).unwrap_err();
    assert!(
        e.to_string()
            .contains("cookie `grafana_session` (a cookie named like a session or credential)"),
        "{e}"
    );
    // A short token anywhere is refused too: a localStorage key or JSON key named like a
    // credential, an httpOnly cookie of any name.
    let mut state = grafana_state(GRAFANA_SESSION);
    state["origins"][0]["localStorage"][3]["value"] = json!("{\"access_token\":\"t0k\"}");
    let e = bind_state(&state).unwrap_err();
    assert!(e.to_string().contains("(JSON leaf /access_token)"), "{e}");
    let mut state = grafana_state(GRAFANA_SESSION);
    state["cookies"][1]["httpOnly"] = json!(true);
    state["cookies"][1]["value"] = json!("42");
    let e = bind_state(&state).unwrap_err();
    assert!(
        e.to_string()
            .contains("cookie `grafana_session_expiry` (an httpOnly cookie)"),
        "{e}"
    );
    // A state without any credential cannot sign in and is refused.
    let mut state = grafana_state(GRAFANA_SESSION);
    state["cookies"].as_array_mut().unwrap().remove(0);
    assert!(matches!(
        bind_state(&state),
        Err(SecretError::StorageStateWithoutCredential { name }) if name == "wetech_storage_state"
    ));
}
