//! The values a browser storage state (Playwright `storageState` JSON) protects, each
//! with its role: a credential (it must be long enough to guard, or the state is
//! refused), page state (guarded when long enough, otherwise left unguarded and listed)
//! or a segment of a JWT-looking value (the whole token is guarded anyway).

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::Value;
use zeroize::Zeroizing;

use crate::PackageError;
use crate::credential::names_credential;

#[derive(Deserialize)]
struct StorageState {
    #[serde(default)]
    cookies: Vec<Cookie>,
    #[serde(default)]
    origins: Vec<OriginState>,
}

#[derive(Deserialize)]
struct Cookie {
    name: String,
    value: SecretString,
    #[serde(rename = "httpOnly", default)]
    http_only: bool,
}

#[derive(Deserialize)]
struct OriginState {
    origin: String,
    #[serde(rename = "localStorage", default)]
    local_storage: Vec<LocalStorageEntry>,
}

#[derive(Deserialize)]
struct LocalStorageEntry {
    name: String,
    value: SecretString,
}

/// What a derived value is, which decides what happens when it is too short to guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A credential, for the reason given: too short to guard refuses the whole state.
    Credential(&'static str),
    /// Page state: too short to guard is left unguarded and listed.
    Data,
    /// A segment of a JWT-looking value that is guarded whole: too short to guard is
    /// left unguarded and listed.
    Segment,
}

/// One protected value, what it is (a description that never contains the value) and
/// its role.
pub(crate) struct DerivedValue {
    pub(crate) what: String,
    pub(crate) value: Zeroizing<Vec<u8>>,
    pub(crate) role: Role,
}

/// Why a cookie is a credential, if it is one.
fn cookie_role(cookie: &Cookie) -> Role {
    if cookie.http_only {
        Role::Credential("an httpOnly cookie")
    } else if names_credential(&cookie.name) {
        Role::Credential("a cookie named like a session or credential")
    } else if jwt_segments(cookie.value.expose_secret().as_bytes()).is_some() {
        Role::Credential("a JWT")
    } else {
        Role::Data
    }
}

/// The values a storage state protects: every cookie value as stored and
/// percent-decoded; every localStorage value whole and, where it parses as JSON, each
/// string leaf; for each of these that looks like a JWT, also each segment.
///
/// Roles: a cookie is a credential when it is `httpOnly`, named like a session or
/// credential (`grafana_session`, `JSESSIONID`, `XSRF-TOKEN`; see `credential`), or a
/// JWT; a whole localStorage value when its key is named like a credential or it is a
/// JWT; a JSON leaf when its nearest object key is named like a credential or it is a
/// JWT. Everything else is page state. Empty page state carries nothing and is left
/// out; an empty credential is kept (and refused as too short).
pub(crate) fn derive_values(name: &str, json: &str) -> Result<Vec<DerivedValue>, PackageError> {
    let state: StorageState =
        serde_json::from_str(json).map_err(|e| PackageError::InvalidStorageState {
            name: name.to_owned(),
            // serde's message may quote the input (a secret): its kind and position only.
            reason: format!(
                "{} at line {}, column {}",
                match e.classify() {
                    serde_json::error::Category::Io => "unreadable",
                    serde_json::error::Category::Syntax => "not JSON",
                    serde_json::error::Category::Data => "not the storageState shape",
                    serde_json::error::Category::Eof => "JSON ends early",
                },
                e.line(),
                e.column()
            ),
        })?;
    let mut out = Vec::new();
    for cookie in &state.cookies {
        let what = format!("cookie `{}`", cookie.name);
        let role = cookie_role(cookie);
        let value = cookie.value.expose_secret().as_bytes();
        push_with_segments(&mut out, &what, value, role);
        let decoded: Zeroizing<Vec<u8>> =
            Zeroizing::new(percent_encoding::percent_decode(value).collect());
        if decoded.as_slice() != value {
            push_with_segments(
                &mut out,
                &format!("{what} (percent-decoded)"),
                &decoded,
                role,
            );
        }
    }
    for origin in &state.origins {
        for entry in &origin.local_storage {
            let what = format!("localStorage `{}` of {}", entry.name, origin.origin);
            let value = entry.value.expose_secret();
            let role = if names_credential(&entry.name) {
                Role::Credential("a localStorage entry named like a credential")
            } else if jwt_segments(value.as_bytes()).is_some() {
                Role::Credential("a JWT")
            } else {
                Role::Data
            };
            push_with_segments(&mut out, &what, value.as_bytes(), role);
            if let Ok(parsed) = serde_json::from_str::<Value>(value) {
                let mut leaves = Vec::new();
                string_leaves(&parsed, String::new(), None, &mut leaves, 0);
                for leaf in leaves {
                    if leaf.value == value {
                        continue;
                    }
                    let role = if jwt_segments(leaf.value.as_bytes()).is_some() {
                        Role::Credential("a JWT")
                    } else if leaf.key.is_some_and(names_credential) {
                        Role::Credential("a JSON leaf named like a credential")
                    } else {
                        Role::Data
                    };
                    push_with_segments(
                        &mut out,
                        &format!("{what} (JSON leaf {})", leaf.pointer),
                        leaf.value.as_bytes(),
                        role,
                    );
                }
            }
        }
    }
    Ok(out)
}

/// A string leaf of a JSON value: its JSON pointer, the key of the object that holds it
/// (the nearest one, through arrays) and its value.
struct Leaf<'a> {
    pointer: String,
    key: Option<&'a str>,
    value: &'a str,
}

fn string_leaves<'a>(
    value: &'a Value,
    at: String,
    key: Option<&'a str>,
    out: &mut Vec<Leaf<'a>>,
    depth: usize,
) {
    if depth > 64 {
        return;
    }
    match value {
        Value::String(s) => out.push(Leaf {
            pointer: if at.is_empty() { "/".to_owned() } else { at },
            key,
            value: s,
        }),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                string_leaves(item, format!("{at}/{i}"), key, out, depth + 1);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                string_leaves(v, format!("{at}/{k}"), Some(k), out, depth + 1);
            }
        }
        _ => {}
    }
}

fn push_with_segments(out: &mut Vec<DerivedValue>, what: &str, value: &[u8], role: Role) {
    if value.is_empty() && !matches!(role, Role::Credential(_)) {
        return;
    }
    out.push(DerivedValue {
        what: what.to_owned(),
        value: Zeroizing::new(value.to_vec()),
        role,
    });
    if let Some(segments) = jwt_segments(value) {
        for (i, segment) in segments.into_iter().enumerate() {
            if !segment.is_empty() {
                out.push(DerivedValue {
                    what: format!("{what} (JWT segment {})", i + 1),
                    value: Zeroizing::new(segment.to_vec()),
                    role: Role::Segment,
                });
            }
        }
    }
    if let Some(token) = scheme_token(value) {
        // The token of an `Authorization`-style value leaks without its scheme word.
        push_with_segments(
            out,
            &format!("{what} (token after the scheme)"),
            token,
            Role::Credential("the token of an authorization value"),
        );
    }
}

/// The token of a value written like an HTTP `Authorization` header (`Bearer …`,
/// `Basic …`, `Token …`; the scheme in any case), when it has one.
fn scheme_token(value: &[u8]) -> Option<&[u8]> {
    const SCHEMES: [&[u8]; 3] = [b"bearer ", b"basic ", b"token "];
    SCHEMES.iter().find_map(|scheme| {
        let head = value.get(..scheme.len())?;
        head.eq_ignore_ascii_case(scheme)
            .then(|| value[scheme.len()..].trim_ascii_start())
            .filter(|token| !token.is_empty())
    })
}

/// The segments of a JWT-looking value: three (JWS) or five (JWE) dot-separated base64url
/// segments, the first one a JSON object (`eyJ`).
pub(crate) fn jwt_segments(value: &[u8]) -> Option<Vec<&[u8]>> {
    let segments: Vec<&[u8]> = value.split(|b| *b == b'.').collect();
    let looks = matches!(segments.len(), 3 | 5)
        && segments[0].starts_with(b"eyJ")
        && segments.iter().all(|s| {
            s.iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'='))
        });
    looks.then_some(segments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derives_cookie_local_storage_and_jwt_values() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvbmNhbGwifQ.c2lnbmF0dXJlLWJ5dGVz";
        let state = serde_json::json!({
            "cookies": [
                {"name": "grafana_session", "value": "abc%2Fdef%3D%3Dxyz", "domain": "g.example",
                 "path": "/", "expires": -1, "httpOnly": true, "secure": true, "sameSite": "Lax"},
                {"name": "empty", "value": ""}
            ],
            "origins": [{
                "origin": "https://grafana.internal.example",
                "localStorage": [
                    {"name": "auth", "value": format!("{{\"token\":\"{jwt}\",\"nested\":{{\"k\":[\"leafvalue1\"]}},\"n\":5}}")}
                ]
            }]
        });
        let values = derive_values("s", &state.to_string()).unwrap();
        let whats: Vec<&str> = values.iter().map(|v| v.what.as_str()).collect();
        assert!(whats.contains(&"cookie `grafana_session`"));
        assert!(whats.contains(&"cookie `grafana_session` (percent-decoded)"));
        let decoded = values
            .iter()
            .find(|v| v.what == "cookie `grafana_session` (percent-decoded)")
            .unwrap();
        assert_eq!(decoded.value.as_slice(), b"abc/def==xyz");
        assert!(!whats.iter().any(|w| w.contains("empty")));
        assert!(whats.iter().any(|w| w.ends_with("(JSON leaf /token)")));
        assert!(whats.iter().any(|w| w.ends_with("(JSON leaf /nested/k/0)")));
        assert!(
            whats
                .iter()
                .any(|w| w.ends_with("(JSON leaf /token) (JWT segment 3)"))
        );
        assert!(values.iter().any(|v| v.value.as_slice() == b"leafvalue1"));
        assert!(
            values
                .iter()
                .any(|v| v.value.as_slice() == b"c2lnbmF0dXJlLWJ5dGVz")
        );
    }

    #[test]
    fn roles_follow_http_only_names_and_jwt_shape() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvbmNhbGwifQ.c2lnbmF0dXJlLWJ5dGVz";
        let state = serde_json::json!({
            "cookies": [
                {"name": "grafana_session", "value": "a", "httpOnly": false},
                {"name": "opaque", "value": "b", "httpOnly": true},
                {"name": "grafana_session_expiry", "value": "1"},
                {"name": "lang", "value": "en"},
                {"name": "pref", "value": jwt},
                {"name": "XSRF-TOKEN", "value": ""}
            ],
            "origins": [{"origin": "https://g.example", "localStorage": [
                {"name": "grafana.navigation.docked", "value": "true"},
                {"name": "grafana.auth", "value": "x"},
                {"name": "ui", "value": "{\"access_token\":\"t\",\"token_type\":\"Bearer\",\"theme\":\"dark\"}"}
            ]}]
        });
        let values = derive_values("s", &state.to_string()).unwrap();
        let role = |what: &str| {
            values
                .iter()
                .find(|v| v.what == what)
                .map(|v| v.role)
                .unwrap_or_else(|| panic!("{what} not derived"))
        };
        let credential = |what: &str| matches!(role(what), Role::Credential(_));
        assert!(credential("cookie `grafana_session`"));
        assert!(credential("cookie `opaque`"));
        assert!(credential("cookie `pref`"));
        assert!(
            credential("cookie `XSRF-TOKEN`"),
            "an empty credential is kept"
        );
        assert_eq!(role("cookie `grafana_session_expiry`"), Role::Data);
        assert_eq!(role("cookie `lang`"), Role::Data);
        assert_eq!(role("cookie `pref` (JWT segment 1)"), Role::Segment);
        let ls = |key: &str| format!("localStorage `{key}` of https://g.example");
        assert_eq!(role(&ls("grafana.navigation.docked")), Role::Data);
        assert!(credential(&ls("grafana.auth")));
        assert_eq!(role(&ls("ui")), Role::Data);
        assert!(credential(&format!(
            "{} (JSON leaf /access_token)",
            ls("ui")
        )));
        assert_eq!(
            role(&format!("{} (JSON leaf /token_type)", ls("ui"))),
            Role::Data
        );
        assert_eq!(
            role(&format!("{} (JSON leaf /theme)", ls("ui"))),
            Role::Data
        );
    }

    #[test]
    fn refuses_non_storage_state() {
        assert!(derive_values("s", "not json").is_err());
        assert!(derive_values("s", r#"{"cookies": [{"name": "a"}]}"#).is_err());
    }

    #[test]
    fn the_token_of_an_authorization_value_is_guarded_on_its_own() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvbmNhbGwifQ.c2lnbmF0dXJlLWJ5dGVz";
        let state = serde_json::json!({
            "cookies": [{"name": "grafana_session", "value": "0123456789abcdef0123456789abcdef", "httpOnly": true}],
            "origins": [{"origin": "https://g.example", "localStorage": [
                {"name": "ui", "value": format!("Bearer {jwt}")},
                {"name": "basic", "value": "basic dXNlcjpwYXNzd29yZA=="}
            ]}]
        });
        let values = derive_values("s", &state.to_string()).unwrap();
        let has = |v: &str| values.iter().any(|d| d.value.as_slice() == v.as_bytes());
        assert!(has(jwt), "the bare JWT is a needle");
        assert!(has("eyJzdWIiOiJvbmNhbGwifQ"), "and so are its segments");
        assert!(has("dXNlcjpwYXNzd29yZA=="));
        let token = values
            .iter()
            .find(|d| d.value.as_slice() == jwt.as_bytes())
            .unwrap();
        assert!(matches!(token.role, Role::Credential(_)));
    }

    #[test]
    fn a_refusal_never_quotes_the_state() {
        let inner = r#"{"cookies":[{"name":"grafana_session","value":"SECRETSESSION123"}]}"#;
        let cases = [
            // Double-encoded: the whole state as one JSON string.
            serde_json::to_string(inner).unwrap(),
            // A value of the wrong type, and a flag given as text.
            r#"{"cookies":[{"name":"grafana_session","value":["SECRETSESSION123"]}]}"#.to_owned(),
            r#"{"cookies":[{"name":"x","value":"v","httpOnly":"SECRETSESSION123"}]}"#.to_owned(),
            r#"{"cookies":[],"origins":[{"origin":"SECRETSESSION123","localStorage":7}]}"#
                .to_owned(),
        ];
        for json in cases {
            let Err(e) = derive_values("s", &json) else {
                panic!("{json} was accepted")
            };
            let message = e.to_string();
            assert!(!message.contains("SECRETSESSION"), "{message}");
            assert!(message.contains("line 1"), "{message}");
        }
    }
}
