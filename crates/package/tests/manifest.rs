//! Manifest normalization: what must never ship is refused with a typed error naming the
//! field.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{manifest, manifest_json};
use evidence_package::{Manifest, manifest::ManifestError, manifest::NetworkPolicy};
use evidence_result::Provider;
use proptest::prelude::*;
use serde_json::{Value, json};

fn normalize(
    value: &Value,
) -> Result<evidence_package::manifest::NormalizedManifest, ManifestError> {
    manifest(value).normalize()
}

/// A predicate on a refusal.
type Check = fn(&ManifestError) -> bool;

fn with(provider: Provider, pointer: &str, new: Value) -> Value {
    let mut v = manifest_json(provider, 1);
    *v.pointer_mut(pointer).unwrap() = new;
    v
}

#[test]
fn hosts_are_lower_cased_sorted_and_deduplicated() {
    let m = normalize(&manifest_json(Provider::Clinic, 1)).unwrap();
    assert_eq!(
        m.network,
        NetworkPolicy::Restricted {
            hosts: vec![
                "127.0.0.1:9090".to_owned(),
                "clinic.internal.example".to_owned()
            ]
        }
    );
    let m = normalize(&with(
        Provider::Clinic,
        "/network/hosts",
        json!(["[::1]:8080", "LOCALHOST"]),
    ))
    .unwrap();
    assert_eq!(
        m.network,
        NetworkPolicy::Restricted {
            hosts: vec!["[::1]:8080".to_owned(), "localhost".to_owned()]
        }
    );
}

#[test]
fn unrestricted_and_empty_networks_are_refused() {
    let e = normalize(&with(
        Provider::Manus,
        "/network",
        json!({"mode": "unrestricted"}),
    ))
    .unwrap_err();
    assert!(matches!(e, ManifestError::UnrestrictedNetwork));
    assert!(e.to_string().contains("network.mode"));
    let e = normalize(&with(Provider::Manus, "/network/hosts", json!([]))).unwrap_err();
    assert!(matches!(e, ManifestError::EmptyHostList));
    assert!(e.to_string().contains("network.hosts"));
}

#[test]
fn bad_hosts_are_refused_naming_the_field() {
    let cases: [(&str, Check); 12] = [
        ("*", |e| matches!(e, ManifestError::WildcardHost { .. })),
        ("*.internal.example", |e| {
            matches!(e, ManifestError::WildcardHost { .. })
        }),
        (".internal.example", |e| {
            matches!(e, ManifestError::WildcardHost { .. })
        }),
        ("https://clinic.internal.example", |e| {
            matches!(e, ManifestError::HostWithScheme { .. })
        }),
        ("clinic.internal.example/api", |e| {
            matches!(e, ManifestError::HostWithPath { .. })
        }),
        ("clinic.internal.example?x=1", |e| {
            matches!(e, ManifestError::HostWithPath { .. })
        }),
        ("10.0.0.0/8", |e| {
            matches!(e, ManifestError::HostIsCidr { .. })
        }),
        ("[fd00::]/8", |e| {
            matches!(e, ManifestError::HostIsCidr { .. })
        }),
        ("user@clinic.internal.example", |e| {
            matches!(e, ManifestError::InvalidHost { .. })
        }),
        ("clinic.internal.example:0", |e| {
            matches!(e, ManifestError::InvalidHost { .. })
        }),
        ("::1", |e| matches!(e, ManifestError::InvalidHost { .. })),
        ("-bad-.example", |e| {
            matches!(e, ManifestError::InvalidHost { .. })
        }),
    ];
    for (host, check) in cases {
        let e = normalize(&with(
            Provider::Clinic,
            "/network/hosts",
            json!(["ok.example", host]),
        ))
        .unwrap_err();
        assert!(check(&e), "{host}: {e:?}");
        assert!(e.to_string().contains("network.hosts[1]"), "{host}: {e}");
    }
}

#[test]
fn bad_paths_are_refused_naming_the_field() {
    let cases: [(Value, Check); 9] = [
        (json!(["bin/tool", "/etc/passwd"]), |e| {
            matches!(e, ManifestError::AbsolutePath { .. })
        }),
        (json!(["bin/tool", "C:/x"]), |e| {
            matches!(e, ManifestError::AbsolutePath { .. })
        }),
        (json!(["bin/tool", "../x"]), |e| {
            matches!(e, ManifestError::PathTraversal { .. })
        }),
        (json!(["bin/tool", "lib/../../x"]), |e| {
            matches!(e, ManifestError::PathTraversal { .. })
        }),
        (json!(["bin/tool", "bin/tool"]), |e| {
            matches!(e, ManifestError::DuplicatePath { .. })
        }),
        (json!(["bin/tool", "BIN/Tool"]), |e| {
            matches!(e, ManifestError::CaseCollidingPath { .. })
        }),
        (json!(["bin/tool", "bin"]), |e| {
            matches!(e, ManifestError::PathConflict { .. })
        }),
        (json!(["bin/tool", "a//b"]), |e| {
            matches!(e, ManifestError::InvalidPath { .. })
        }),
        (json!(["bin/tool", "a\\b"]), |e| {
            matches!(e, ManifestError::InvalidPath { .. })
        }),
    ];
    for (files, check) in cases {
        let e = normalize(&with(Provider::Clinic, "/files", files.clone())).unwrap_err();
        assert!(check(&e), "{files}: {e:?}");
        assert!(e.to_string().contains("files["), "{files}: {e}");
    }
    let e = normalize(&with(Provider::Clinic, "/entrypoint", json!("bin/other"))).unwrap_err();
    assert!(e.to_string().contains("entrypoint"), "{e}");
    let e = normalize(&with(
        Provider::Clinic,
        "/files",
        json!(["bin/tool", "manifest.json"]),
    ))
    .unwrap_err();
    assert!(matches!(e, ManifestError::InvalidPath { .. }), "{e:?}");
}

#[test]
fn identity_provider_and_template_belong_together() {
    let e = normalize(&with(Provider::Clinic, "/provider", json!("manus"))).unwrap_err();
    assert!(matches!(e, ManifestError::ProviderMismatch { .. }), "{e:?}");
    let e = normalize(&with(
        Provider::Clinic,
        "/identity",
        json!("managed_auto_oncall_jira"),
    ))
    .unwrap_err();
    assert!(matches!(e, ManifestError::UnknownIdentity(_)), "{e:?}");
    let e = normalize(&with(Provider::Wetech, "/template", json!("default"))).unwrap_err();
    assert!(matches!(e, ManifestError::TemplateMismatch(_)), "{e:?}");
    assert!(e.to_string().contains("template"));
}

#[test]
fn auth_binding_rules() {
    let e = normalize(&with(Provider::Clinic, "/auth/secrets", json!([]))).unwrap_err();
    assert!(e.to_string().contains("auth.secrets"), "{e}");
    let e = normalize(&with(
        Provider::Manus,
        "/auth/secrets/1/env",
        json!("MANUS_REFERENCE_KEY"),
    ))
    .unwrap_err();
    assert!(e.to_string().contains("auth.secrets[1].env"), "{e}");
    for env in [
        "PATH",
        "LD_PRELOAD",
        "EVIDENCE_TRUSTED_CONTEXT",
        "EVIDENCE_POLICY_KEYS",
        "EVIDENCE_ANYTHING",
        "lower",
    ] {
        let e = normalize(&with(Provider::Clinic, "/auth/secrets/0/env", json!(env))).unwrap_err();
        assert!(e.to_string().contains("auth.secrets[0].env"), "{env}: {e}");
    }
    let m = normalize(&manifest_json(Provider::Manus, 1)).unwrap();
    let names: Vec<&str> = m.auth.secrets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["manus_api_token", "manus_reference_key"]);
}

#[test]
fn limits_and_one_operation_transport() {
    let e = normalize(&with(Provider::Wetech, "/limits/max_batch", json!(2))).unwrap_err();
    assert!(e.to_string().contains("limits.max_batch"), "{e}");
    normalize(&with(Provider::Clinic, "/limits/max_batch", json!(20))).unwrap();
    let e = normalize(&with(Provider::Clinic, "/limits/max_batch", json!(21))).unwrap_err();
    assert!(e.to_string().contains("limits.max_batch"), "{e}");
    let e = normalize(&with(Provider::Clinic, "/limits/timeout_ms", json!(0))).unwrap_err();
    assert!(e.to_string().contains("limits.timeout_ms"), "{e}");
}

#[test]
fn static_canary_names_a_listed_file() {
    let v = with(
        Provider::Clinic,
        "/policy_delivery",
        json!({"mode": "static_canary", "file": "README.md"}),
    );
    normalize(&v).unwrap();
    let v = with(
        Provider::Clinic,
        "/policy_delivery",
        json!({"mode": "static_canary", "file": "canary.json"}),
    );
    let e = normalize(&v).unwrap_err();
    assert!(e.to_string().contains("policy_delivery.file"), "{e}");
}

#[test]
fn unknown_manifest_fields_are_refused() {
    let mut v = manifest_json(Provider::Clinic, 1);
    v["provider_override"] = json!("manus");
    assert!(Manifest::from_json(&v.to_string()).is_err());
}

#[test]
fn the_tool_description_carries_the_correction_rule() {
    let mut v = manifest_json(Provider::Clinic, 1);
    v["arguments"]["description"] = json!("Query metrics.");
    let e = normalize(&v).unwrap_err();
    assert!(e.to_string().contains("arguments.description"), "{e}");
}

#[test]
fn open_argument_objects_are_refused() {
    let mut v = manifest_json(Provider::Manus, 1);
    v["arguments"]["additionalProperties"] = json!(true);
    assert!(matches!(
        normalize(&v).unwrap_err(),
        ManifestError::OpenArgumentObject { .. }
    ));
    let mut v = manifest_json(Provider::Manus, 1);
    v["arguments"]["patternProperties"] = json!({"^p": {"type": "string"}});
    assert!(matches!(
        normalize(&v).unwrap_err(),
        ManifestError::OpenArgumentObject { .. }
    ));
    let mut v = manifest_json(Provider::Manus, 1);
    v["arguments"]["$ref"] = json!("https://schemas.example/args.json");
    assert!(normalize(&v).is_err());
}

/// Where in a schema a `provider` property is planted.
#[derive(Debug, Clone)]
enum Plant {
    Property(Vec<Wrap>, String),
    Required(Vec<Wrap>, String),
}

#[derive(Debug, Clone, Copy)]
enum Wrap {
    Items,
    Nested,
    AnyOf,
    Def,
}

fn wrap(inner: Value, how: Wrap, level: usize) -> (Value, Option<(String, Value)>) {
    match how {
        Wrap::Items => (json!({"type": "array", "items": inner}), None),
        Wrap::Nested => (
            json!({"type": "object", "properties": {"inner": inner}, "additionalProperties": false}),
            None,
        ),
        Wrap::AnyOf => (json!({"anyOf": [{"type": "null"}, inner]}), None),
        Wrap::Def => {
            let name = format!("Planted{level}");
            (
                json!({"$ref": format!("#/$defs/{name}")}),
                Some((name, inner)),
            )
        }
    }
}

fn provider_spelling() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["provider", "Provider", "PROVIDER", "proVider"])
        .prop_map(str::to_owned)
}

fn plant() -> impl Strategy<Value = Plant> {
    let wraps = prop::collection::vec(
        prop::sample::select(vec![Wrap::Items, Wrap::Nested, Wrap::AnyOf, Wrap::Def]),
        0..4,
    );
    prop_oneof![
        (wraps.clone(), provider_spelling()).prop_map(|(w, p)| Plant::Property(w, p)),
        (wraps, provider_spelling()).prop_map(|(w, p)| Plant::Required(w, p)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Any schema with a provider property anywhere, however nested, is refused.
    #[test]
    fn provider_property_anywhere_is_refused(plant in plant(), provider in prop::sample::select(vec![Provider::Clinic, Provider::Manus, Provider::Wetech])) {
        let (wraps, leaf) = match &plant {
            Plant::Property(w, name) => (w.clone(), json!({
                "type": "object",
                "properties": {name.as_str(): {"type": "string"}},
                "additionalProperties": false
            })),
            Plant::Required(w, name) => (w.clone(), json!({
                "type": "object",
                "properties": {"x": {"type": "string"}},
                "required": [name.as_str()],
                "additionalProperties": false
            })),
        };
        let mut schema = leaf;
        let mut defs = serde_json::Map::new();
        for (level, how) in wraps.into_iter().enumerate() {
            let (wrapped, def) = wrap(schema, how, level);
            if let Some((k, v)) = def { defs.insert(k, v); }
            schema = wrapped;
        }
        let mut v = manifest_json(provider, 1);
        v["arguments"]["properties"]["planted"] = schema;
        if !defs.is_empty() {
            let target = v["arguments"].as_object_mut().unwrap().entry("$defs").or_insert(json!({}));
            for (k, d) in defs { target[k] = d; }
        }
        let err = normalize(&v).unwrap_err();
        prop_assert!(matches!(err, ManifestError::ProviderArgument { .. }), "{err:?}");
        prop_assert!(err.to_string().contains("arguments"), "{err}");
    }

    /// Paths that climb out of the package are refused wherever the `..` sits.
    #[test]
    fn traversal_anywhere_is_refused(parts in prop::collection::vec("[a-z]{1,6}", 0..4), at in 0usize..5) {
        let mut parts = parts;
        let at = at.min(parts.len());
        parts.insert(at, "..".to_owned());
        let path = parts.join("/");
        let v = with(Provider::Clinic, "/files", json!(["bin/tool", path]));
        let err = normalize(&v).unwrap_err();
        prop_assert!(matches!(err, ManifestError::PathTraversal { .. }), "{err:?}");
    }

    /// Host normalization is idempotent and order-insensitive.
    #[test]
    fn host_lists_normalize_to_one_form(hosts in prop::collection::vec("[a-zA-Z][a-zA-Z0-9]{0,8}(\\.[a-zA-Z][a-zA-Z0-9]{0,8}){0,2}", 1..6)) {
        let v = with(Provider::Clinic, "/network/hosts", json!(hosts));
        let a = normalize(&v).unwrap();
        let mut reversed = hosts.clone();
        reversed.reverse();
        let b = normalize(&with(Provider::Clinic, "/network/hosts", json!(reversed))).unwrap();
        prop_assert_eq!(&a.network, &b.network);
        let again = Manifest::normalize(a.manifest()).unwrap();
        prop_assert_eq!(&again.network, &a.network);
        let NetworkPolicy::Restricted { hosts: out } = &a.network else { panic!() };
        let mut sorted = out.clone();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(&sorted, out);
        prop_assert!(out.iter().all(|h| h.chars().all(|c| !c.is_ascii_uppercase())));
    }
}
