//! The leak check of the Manus address tests: every model-visible string of a result,
//! with sealed references and digests set aside, searched for an address in any shape
//! (its digits under any separators, a fixture port, a host name of the fixture).

use std::collections::BTreeSet;
use std::sync::LazyLock;

use evidence_connectors::{ReferenceKeyRing, reference::ReferenceScope};
use evidence_result::ToolResult;
use regex::Regex;
use serde_json::Value;

use crate::manus::{PACKAGE, ref_keys_text};

/// The digits of any `vida` address (`10.21.x.y`) joined by any separators, either
/// fixture port standing alone, or any host name of the fixture.
static LEAKS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"(?:^|\D)10\D{1,16}21\D{1,16}\d{1,3}\D{1,16}\d{1,3}(?:\D|$)",
        r"(?:^|\D)(?:10080|9100|20180)(?:\D|$)",
        r"(?i)saas99|\.svc|(?:tidb|tikv|node)-\d",
    ]
    .into_iter()
    .map(|p| Regex::new(p).unwrap())
    .collect()
});

/// Digests: request digests (32 hex digits) and body digests (`sha256:` and 64).
static DIGEST: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:sha256:[0-9a-f]{64}|[0-9a-f]{32})$").unwrap());

/// Candidate references: base64url runs long enough to be one (the shortest, an IPv4
/// address without a port, has 28 characters).
static TOKEN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[A-Za-z0-9_-]{28,}").unwrap());

/// Every string of a JSON value, keys included.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(o) => {
            for (k, v) in o {
                out.push(k.clone());
                strings(v, out);
            }
        }
        _ => {}
    }
}

/// Every model-visible string of a result (values and keys), with each sealed
/// reference (one that opens for this target and package under some purpose the result
/// names, or `address`) replaced by `REF`, and each digest by `DIGEST`.
fn visible_text(result: &ToolResult) -> Vec<String> {
    let json: Value = serde_json::from_str(result.text()).unwrap();
    let mut all = Vec::new();
    strings(&json, &mut all);
    let ident = Regex::new(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$").unwrap();
    let purposes: BTreeSet<&str> = all
        .iter()
        .map(String::as_str)
        .filter(|s| ident.is_match(s))
        .chain(["address", "instance", "host_ip"])
        .collect();
    let keys = ReferenceKeyRing::parse(&ref_keys_text()).unwrap();
    let opens = |token: &str| {
        purposes.iter().any(|purpose| {
            let scope = ReferenceScope {
                target: "vida",
                package: PACKAGE,
                purpose,
            };
            keys.open(token, scope, 0).is_ok()
        })
    };
    all.iter()
        .map(|s| {
            if DIGEST.is_match(s) {
                return "DIGEST".to_owned();
            }
            TOKEN
                .replace_all(s, |c: &regex::Captures<'_>| {
                    if opens(&c[0]) {
                        "REF".to_owned()
                    } else {
                        c[0].to_owned()
                    }
                })
                .into_owned()
        })
        .collect()
}

/// The first model-visible string that carries an address in some shape.
pub(crate) fn leak(result: &ToolResult) -> Option<String> {
    visible_text(result)
        .into_iter()
        .find(|s| LEAKS.iter().any(|re| re.is_match(s)))
}

/// Fails the test when a model-visible string of `result` carries an address.
pub(crate) fn assert_no_leak(what: &str, result: &ToolResult) {
    if let Some(s) = leak(result) {
        panic!(
            "{what}: an address left in another shape: {s:?}\nin {}",
            result.text()
        );
    }
}

/// The checker itself: it finds each shape the finding showed, and passes references.
#[test]
fn the_leak_check_sees_every_shape() {
    for shape in [
        "10-21-1-17 port 10080",
        "10.21.1.17",
        "10_21_2_10",
        "host 10 21 3 4",
        "10080",
        "x:9100",
        "tidb-3.saas99.svc",
    ] {
        assert!(LEAKS.iter().any(|re| re.is_match(shape)), "{shape}");
    }
    for fine in ["SaaS01", "tidb", "node", "rate(x[1m]) > 0.5", "REF", "15s"] {
        assert!(!LEAKS.iter().any(|re| re.is_match(fine)), "{fine}");
    }
}
