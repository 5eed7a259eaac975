//! The values a storage state protects, derived once: each cookie value as stored and
//! percent-decoded, each localStorage value, the leaves of JSON among them, JWT
//! segments and the token of an authorization value, each with its role (credential,
//! page state or segment) and a description that never holds the value.

use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;
use zeroize::Zeroizing;

use super::model::{Cookie, LocalStorageEntry, OriginState, StorageState};
use crate::credential::{describes_credential, names_credential};
use crate::secrets::SecretError;

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

/// How the derived values of `cookie` are described (they start so): its name.
pub(super) fn cookie_what(cookie: &Cookie) -> String {
    format!("cookie `{}`", cookie.name)
}

/// How the derived values of a localStorage entry are described (they start so): its key
/// and origin.
pub(super) fn local_storage_what(origin: &OriginState, entry: &LocalStorageEntry) -> String {
    format!("localStorage `{}` of {}", entry.name, origin.origin)
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
/// percent-decoded; every localStorage value whole; every text, number and boolean leaf
/// of each of these that is JSON, at any depth, and of JSON held in a text leaf; for each
/// of these that looks like a JWT, also each segment.
///
/// Roles: a cookie is a credential when it is `httpOnly`, named like a session or
/// credential (`grafana_session`, `JSESSIONID`, `XSRF-TOKEN`; see `credential`), or a
/// JWT; a whole localStorage value when its key is named like a credential or it is a
/// JWT. A text or number leaf of JSON is a credential when it is a JWT, or when a name on
/// its path names a credential (the cookie name or localStorage key, then the object keys
/// down to the leaf, through arrays) and no key below that name describes a credential
/// (`expires_at`, `token_type`): `{"session":{"id":"…"}}` and `{"pin":1234}` are
/// credentials. A number counts as the text JSON gives it (`1234`). A boolean is page
/// state wherever it is: one bit authenticates nothing, and `true`/`false` are
/// too short to search for. `null` holds nothing. Everything else is page state. Empty
/// page state carries nothing and is left out; an empty credential is kept (and refused
/// as too short). A JSON value nested deeper than 64 levels refuses the state.
pub(crate) fn derive_values(name: &str, json: &str) -> Result<Vec<DerivedValue>, SecretError> {
    let state = StorageState::parse(name, &SecretString::from(json.to_owned()))?;
    derive_from(name, &state)
}

/// [`derive_values`] of a parsed state.
pub(super) fn derive_from(
    name: &str,
    state: &StorageState,
) -> Result<Vec<DerivedValue>, SecretError> {
    let mut derive = Derivation {
        name,
        out: Vec::new(),
    };
    for cookie in &state.cookies {
        derive.cookie(cookie)?;
    }
    for origin in &state.origins {
        for entry in &origin.local_storage {
            derive.local_storage(origin, entry)?;
        }
    }
    Ok(derive.out)
}

/// Every value of a browser storage state (Playwright `storageState` JSON) that the
/// output guard protects in it, for a redactor of provider text that must cover what the
/// guard covers: each value [`GuardBuilder::add_storage_state`](crate::GuardBuilder::add_storage_state)
/// derives (cookie values as stored and percent-decoded, localStorage values, the text
/// and number leaves of JSON among them at any depth, JWT segments, the token of an
/// authorization value) that is at least [`MIN_SECRET_BYTES`](crate::MIN_SECRET_BYTES)
/// long and is text. Shorter values are page state or refused by the binding.
///
/// Errors: the state is not `storageState` JSON, or nests JSON deeper than 64 levels
/// (the message names `name` and a position, never a value).
pub fn storage_state_values(
    name: &str,
    state: &SecretString,
) -> Result<Vec<SecretString>, SecretError> {
    StorageState::parse(name, state)?.protected_values(name)
}

/// JSON deeper than this (counting JSON held in strings) refuses the state: its leaves
/// could not all be classified.
pub(super) const MAX_JSON_DEPTH: usize = 64;

/// The values derived so far from the storage state called `name`.
pub(super) struct Derivation<'n> {
    pub(super) name: &'n str,
    pub(super) out: Vec<DerivedValue>,
}

impl Derivation<'_> {
    /// The values of one cookie: its value as stored and, when it differs,
    /// percent-decoded, each with its leaves.
    pub(super) fn cookie(&mut self, cookie: &Cookie) -> Result<(), SecretError> {
        let what = cookie_what(cookie);
        let role = cookie_role(cookie);
        let named = names_credential(&cookie.name);
        let value = cookie.value.expose_secret().as_bytes();
        self.entry(&what, value, role, named, 0)?;
        let decoded: Zeroizing<Vec<u8>> =
            Zeroizing::new(percent_encoding::percent_decode(value).collect());
        if decoded.as_slice() != value {
            self.entry(
                &format!("{what} (percent-decoded)"),
                &decoded,
                role,
                named,
                0,
            )?;
        }
        Ok(())
    }

    /// The values of one localStorage entry of `origin`: its value whole, with its leaves.
    pub(super) fn local_storage(
        &mut self,
        origin: &OriginState,
        entry: &LocalStorageEntry,
    ) -> Result<(), SecretError> {
        let what = local_storage_what(origin, entry);
        let value = entry.value.expose_secret().as_bytes();
        let named = names_credential(&entry.name);
        let role = if named {
            Role::Credential("a localStorage entry named like a credential")
        } else if jwt_segments(value).is_some() {
            Role::Credential("a JWT")
        } else {
            Role::Data
        };
        self.entry(&what, value, role, named, 0)
    }

    /// One value (a cookie or localStorage value, or a text leaf of JSON) with `role`,
    /// and, when it is JSON, its leaves; `named` tells whether a name above it names a
    /// credential.
    fn entry(
        &mut self,
        what: &str,
        value: &[u8],
        role: Role,
        named: bool,
        depth: usize,
    ) -> Result<(), SecretError> {
        push_with_segments(&mut self.out, what, value, role);
        let Ok(parsed) = serde_json::from_slice::<Value>(value) else {
            return Ok(());
        };
        self.leaves(what, value, &parsed, String::new(), named, depth)
    }

    /// The text, number and boolean leaves of `json` (the parsed form of `whole`), each
    /// with its role; a leaf that is `whole` itself (a text equal to it, a number or
    /// boolean at the root) is not repeated.
    fn leaves(
        &mut self,
        what: &str,
        whole: &[u8],
        json: &Value,
        at: String,
        named: bool,
        depth: usize,
    ) -> Result<(), SecretError> {
        if depth > MAX_JSON_DEPTH {
            return Err(SecretError::InvalidStorageState {
                name: self.name.to_owned(),
                reason: format!("{what} nests JSON deeper than {MAX_JSON_DEPTH} levels"),
            });
        }
        let leaf_what = |at: &str| {
            format!(
                "{what} (JSON leaf {})",
                if at.is_empty() { "/" } else { at }
            )
        };
        match json {
            Value::String(text) if text.as_bytes() != whole => {
                let role = if jwt_segments(text.as_bytes()).is_some() {
                    Role::Credential("a JWT")
                } else if named {
                    Role::Credential("a JSON leaf under a name of a credential")
                } else {
                    Role::Data
                };
                self.entry(&leaf_what(&at), text.as_bytes(), role, named, depth + 1)?;
            }
            // A whole value that is one number or boolean is that value already, in
            // another spelling at most (`0e0`).
            Value::Number(number) if !at.is_empty() => {
                let text = Zeroizing::new(number.to_string());
                let role = if named {
                    Role::Credential("a JSON number under a name of a credential")
                } else {
                    Role::Data
                };
                push_with_segments(&mut self.out, &leaf_what(&at), text.as_bytes(), role);
            }
            Value::Bool(flag) if !at.is_empty() => {
                let text = if *flag { "true" } else { "false" };
                push_with_segments(&mut self.out, &leaf_what(&at), text.as_bytes(), Role::Data);
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.leaves(what, whole, item, format!("{at}/{i}"), named, depth + 1)?;
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    let named = !describes_credential(key) && (named || names_credential(key));
                    self.leaves(what, whole, item, format!("{at}/{key}"), named, depth + 1)?;
                }
            }
            Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => {}
        }
        Ok(())
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

    /// The role of the derived value described by `what`.
    fn role_of(values: &[DerivedValue], what: &str) -> Role {
        values
            .iter()
            .find(|v| v.what == what)
            .map(|v| v.role)
            .unwrap_or_else(|| panic!("{what} not derived"))
    }

    /// The one rule for JSON in a storage state, case by case: a text or number leaf is a
    /// credential when a name on its path names one (`{"session":{"id":"ab12cd3"}}`, through
    /// arrays, `{"pin":1234}`), unless a key below that name describes it (`expires_at`);
    /// a number under a neutral key is page state; a boolean is page state wherever it sits;
    /// JSON held in a JSON string and a cookie holding JSON, as stored and percent-encoded,
    /// are walked the same way.
    #[test]
    fn credentials_in_every_json_shape() {
        let ui = |value: serde_json::Value| {
            serde_json::json!({"origins": [{"origin": "https://g.example", "localStorage": [
                {"name": "ui", "value": value.to_string()}
            ]}]})
            .to_string()
        };
        let ls = "localStorage `ui` of https://g.example";
        // Nested under a neutral leaf key, through an array.
        let values =
            derive_values("s", &ui(serde_json::json!({"session": {"id": "ab12cd3"}}))).unwrap();
        assert!(matches!(
            role_of(&values, &format!("{ls} (JSON leaf /session/id)")),
            Role::Credential(_)
        ));
        let values = derive_values("s", &ui(serde_json::json!({"auth": [{"v": ["x9"]}]}))).unwrap();
        assert!(matches!(
            role_of(&values, &format!("{ls} (JSON leaf /auth/0/v/0)")),
            Role::Credential(_)
        ));
        // A number leaf: a credential under a credential name, page state otherwise.
        let values = derive_values(
            "s",
            &ui(serde_json::json!({"pin": 1234, "count": 12_345_678_901_u64})),
        )
        .unwrap();
        assert!(matches!(
            role_of(&values, &format!("{ls} (JSON leaf /pin)")),
            Role::Credential(_)
        ));
        assert_eq!(
            role_of(&values, &format!("{ls} (JSON leaf /count)")),
            Role::Data
        );
        assert!(values.iter().any(|v| v.value.as_slice() == b"12345678901"));
        // A descriptor under a credential name describes it: page state.
        let values = derive_values(
            "s",
            &ui(serde_json::json!({"session": {"expires_at": 1_700_000_000, "id": 7}})),
        )
        .unwrap();
        assert_eq!(
            role_of(&values, &format!("{ls} (JSON leaf /session/expires_at)")),
            Role::Data
        );
        assert!(matches!(
            role_of(&values, &format!("{ls} (JSON leaf /session/id)")),
            Role::Credential(_)
        ));
        // A boolean is page state wherever it is.
        let values =
            derive_values("s", &ui(serde_json::json!({"session": {"remember": true}}))).unwrap();
        assert_eq!(
            role_of(&values, &format!("{ls} (JSON leaf /session/remember)")),
            Role::Data
        );
        // JSON inside a JSON string.
        let inner = serde_json::json!({"token": "t0k"}).to_string();
        let values = derive_values("s", &ui(serde_json::json!({"blob": inner}))).unwrap();
        assert!(matches!(
            role_of(
                &values,
                &format!("{ls} (JSON leaf /blob) (JSON leaf /token)")
            ),
            Role::Credential(_)
        ));
        // A cookie holding JSON, as stored and percent-encoded.
        let json = serde_json::json!({"user": {"sid": "ab12"}}).to_string();
        let encoded =
            percent_encoding::utf8_percent_encode(&json, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
        let state = serde_json::json!({"cookies": [
            {"name": "prefs", "value": json},
            {"name": "prefs2", "value": encoded}
        ]});
        let values = derive_values("s", &state.to_string()).unwrap();
        assert!(matches!(
            role_of(&values, "cookie `prefs` (JSON leaf /user/sid)"),
            Role::Credential(_)
        ));
        assert!(matches!(
            role_of(
                &values,
                "cookie `prefs2` (percent-decoded) (JSON leaf /user/sid)"
            ),
            Role::Credential(_)
        ));
    }

    /// Neutral object keys: none names a credential or describes one.
    const NEUTRAL: [&str; 9] = [
        "id", "user", "data", "items", "value", "profile", "ui", "list", "v",
    ];
    /// Keys that name a credential.
    const CREDENTIAL: [&str; 7] = [
        "session",
        "token",
        "auth",
        "sid",
        "apiKey",
        "accessToken",
        "connect.sid",
    ];

    /// A JSON tree with neutral keys and page-state leaves only: short lower-case text,
    /// numbers under 1000, booleans and null.
    fn neutral_tree() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0u32..1000).prop_map(Value::from),
            "[a-z]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::btree_map(prop::sample::select(NEUTRAL.to_vec()), inner, 0..3)
                    .prop_map(|m| Value::Object(
                        m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
                    )),
            ]
        })
    }

    /// A planted leaf: upper-case text or a number of 6 to 12 digits (so no neutral leaf
    /// equals it), or a boolean.
    #[derive(Debug, Clone)]
    enum Planted {
        Text(String),
        Number(u64),
        Bool(bool),
    }

    fn planted() -> impl Strategy<Value = Planted> {
        prop_oneof![
            "[A-Z][A-Z0-9]{2,11}".prop_map(Planted::Text),
            (100_000u64..1_000_000_000_000).prop_map(Planted::Number),
            any::<bool>().prop_map(Planted::Bool),
        ]
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// A text or number leaf under a key named like a credential, at any depth and
        /// whatever the keys and arrays between, is a credential, in a localStorage value,
        /// a cookie value (as stored or percent-encoded) and JSON held in a JSON string;
        /// when it is shorter than 8 bytes the state is refused, otherwise it is guarded.
        /// A boolean and every neutral leaf are page state.
        #[test]
        fn planted_credentials_are_credentials_in_every_shape(
            path in prop::collection::vec(prop::option::of(prop::sample::select(NEUTRAL.to_vec())), 0..4),
            credential_at in any::<prop::sample::Index>(),
            credential in prop::sample::select(CREDENTIAL.to_vec()),
            leaf in planted(),
            siblings in prop::collection::vec(neutral_tree(), 5),
            shape in 0usize..4,
        ) {
            let leaf_value = match &leaf {
                Planted::Text(t) => Value::from(t.clone()),
                Planted::Number(n) => Value::from(*n),
                Planted::Bool(b) => Value::from(*b),
            };
            // Steps from the outside in: None is an array, Some a key; the credential
            // key sits at any position, the leaf's own key is neutral.
            let mut steps: Vec<Option<&str>> = path.clone();
            let credential_at = credential_at.index(steps.len() + 1);
            steps.insert(credential_at, Some(credential));
            steps.push(Some("id"));
            let mut tree = leaf_value;
            for (i, step) in steps.iter().enumerate().rev() {
                // Neutral page state beside the path above the credential key; below it
                // (where every text and number is a credential) only booleans.
                let sibling = if i <= credential_at {
                    siblings[i % siblings.len()].clone()
                } else {
                    Value::Bool(i % 2 == 0)
                };
                tree = match step {
                    Some(key) => {
                        let mut map = serde_json::Map::new();
                        map.insert("other".to_owned(), sibling);
                        map.insert((*key).to_owned(), tree);
                        Value::Object(map)
                    }
                    None => Value::Array(vec![sibling, tree]),
                };
            }
            let session = "0123456789abcdef0123456789abcdef";
            let text = tree.to_string();
            let mut cookies = vec![serde_json::json!({"name": "grafana_session", "value": session, "httpOnly": true})];
            let mut storage = Vec::new();
            match shape {
                0 => storage.push(serde_json::json!({"name": "ui", "value": text})),
                1 => cookies.push(serde_json::json!({"name": "prefs", "value": text})),
                2 => cookies.push(serde_json::json!({"name": "prefs", "value":
                    percent_encoding::utf8_percent_encode(&text, percent_encoding::NON_ALPHANUMERIC).to_string()})),
                _ => storage.push(serde_json::json!({"name": "ui", "value": serde_json::json!({"blob": text}).to_string()})),
            }
            let state = serde_json::json!({"cookies": cookies, "origins": [{"origin": "https://g.example", "localStorage": storage}]}).to_string();
            let values = derive_values("s", &state).unwrap();
            let planted_text = match &leaf {
                Planted::Text(t) => Some(t.clone()),
                Planted::Number(n) => Some(n.to_string()),
                Planted::Bool(_) => None,
            };
            for v in &values {
                if matches!(v.role, Role::Credential(_)) {
                    let is_planted = planted_text.as_deref().is_some_and(|p| v.value.as_slice() == p.as_bytes());
                    prop_assert!(v.value.as_slice() == session.as_bytes() || is_planted,
                        "{} is a credential: {}", v.what, String::from_utf8_lossy(&v.value));
                }
            }
            let mut builder = crate::GuardBuilder::default();
            let bound = builder.add_storage_state("s", &SecretString::from(state.clone()));
            match planted_text {
                Some(p) => {
                    prop_assert!(
                        values.iter().any(|v| v.value.as_slice() == p.as_bytes() && matches!(v.role, Role::Credential(_))),
                        "{} in {} is not a credential", p, state
                    );
                    if p.len() < crate::MIN_SECRET_BYTES {
                        prop_assert!(matches!(bound, Err(SecretError::SecretTooShort { .. })), "{state}");
                    } else {
                        prop_assert!(bound.is_ok());
                        let guard = builder.build().unwrap();
                        let output = format!("x {p} y");
                        prop_assert!(guard.scan_text(&output).is_blocked());
                    }
                }
                None => prop_assert!(bound.is_ok(), "{state}"),
            }
        }
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
