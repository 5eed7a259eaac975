//! The values a browser storage state (Playwright `storageState` JSON) protects.

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::Value;
use zeroize::Zeroizing;

use crate::PackageError;

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

/// One protected value and what it is (a description that never contains the value).
pub(crate) struct DerivedValue {
    pub(crate) what: String,
    pub(crate) value: Zeroizing<Vec<u8>>,
}

/// The values a storage state protects: every cookie value as stored and percent-decoded;
/// every localStorage value whole and, where it parses as JSON, each string leaf; for
/// each of these that looks like a JWT, also each segment. Empty strings carry nothing and
/// are left out.
pub(crate) fn derive_values(name: &str, json: &str) -> Result<Vec<DerivedValue>, PackageError> {
    let state: StorageState =
        serde_json::from_str(json).map_err(|e| PackageError::InvalidStorageState {
            name: name.to_owned(),
            reason: e.to_string(),
        })?;
    let mut out = Vec::new();
    for cookie in &state.cookies {
        let what = format!("cookie `{}`", cookie.name);
        let value = cookie.value.expose_secret().as_bytes();
        push_with_segments(&mut out, &what, value);
        let decoded: Zeroizing<Vec<u8>> =
            Zeroizing::new(percent_encoding::percent_decode(value).collect());
        if decoded.as_slice() != value {
            push_with_segments(&mut out, &format!("{what} (percent-decoded)"), &decoded);
        }
    }
    for origin in &state.origins {
        for entry in &origin.local_storage {
            let what = format!("localStorage `{}` of {}", entry.name, origin.origin);
            let value = entry.value.expose_secret();
            push_with_segments(&mut out, &what, value.as_bytes());
            if let Ok(parsed) = serde_json::from_str::<Value>(value) {
                let mut leaves = Vec::new();
                string_leaves(&parsed, String::new(), &mut leaves, 0);
                for (pointer, leaf) in leaves {
                    if leaf != value {
                        push_with_segments(
                            &mut out,
                            &format!("{what} (JSON leaf {pointer})"),
                            leaf.as_bytes(),
                        );
                    }
                }
            }
        }
    }
    Ok(out)
}

fn string_leaves<'a>(value: &'a Value, at: String, out: &mut Vec<(String, &'a str)>, depth: usize) {
    if depth > 64 {
        return;
    }
    match value {
        Value::String(s) => out.push((if at.is_empty() { "/".to_owned() } else { at }, s)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                string_leaves(item, format!("{at}/{i}"), out, depth + 1);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                string_leaves(v, format!("{at}/{k}"), out, depth + 1);
            }
        }
        _ => {}
    }
}

fn push_with_segments(out: &mut Vec<DerivedValue>, what: &str, value: &[u8]) {
    if value.is_empty() {
        return;
    }
    out.push(DerivedValue {
        what: what.to_owned(),
        value: Zeroizing::new(value.to_vec()),
    });
    if let Some(segments) = jwt_segments(value) {
        for (i, segment) in segments.into_iter().enumerate() {
            if !segment.is_empty() {
                out.push(DerivedValue {
                    what: format!("{what} (JWT segment {})", i + 1),
                    value: Zeroizing::new(segment.to_vec()),
                });
            }
        }
    }
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
    fn refuses_non_storage_state() {
        assert!(derive_values("s", "not json").is_err());
        assert!(derive_values("s", r#"{"cookies": [{"name": "a"}]}"#).is_err());
    }
}
