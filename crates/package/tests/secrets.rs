//! Secrets bound to one exact package digest.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{files, manifest, manifest_json, package};
use evidence_package::{Package, PackageError, PackageFile, SecretBinding, SecretValues};
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
    assert!(matches!(e, PackageError::BindingMismatch { .. }));
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
        Err(PackageError::MissingSecret(name)) if name == "manus_reference_key"
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
        Err(PackageError::UnknownSecret(name)) if name == "clinic_api_token"
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
        Err(PackageError::InvalidStorageState { .. })
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
            (f.contents().to_vec(), !f.is_executable())
        } else {
            let mut bytes = f.contents().to_vec();
            let i = at.index(bytes.len());
            bytes[i] ^= xor;
            (bytes, f.is_executable())
        };
        changed[which] = PackageFile::new(f.path(), executable, contents);
        let other = Package::new(&manifest(&manifest_json(Provider::Clinic, 3)), changed).unwrap();
        prop_assert_ne!(other.digest(), bound.digest());
        let refused = matches!(binding.sandbox_env(&other), Err(PackageError::BindingMismatch { .. }));
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
        let refused = matches!(&e, PackageError::SecretTooShort { name, .. } if name == "clinic_api_token");
        prop_assert!(refused, "{:?}", e);
        let quoted = format!("{value:?}");
        prop_assert!(!e.to_string().contains(&quoted));
    }
}
