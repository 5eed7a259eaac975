//! The rotation check of a storage state: for every value derived from it, which the
//! output guard will cover, which short page state it leaves unguarded and which would
//! refuse the state, described by cookie or localStorage entry and part, never by value.
//! It decides through the one rule (`rule`) that the guard builder applies, over the
//! values of the one derivation, so the check and the binding cannot disagree.

use std::fmt;
use std::ops::Range;

use secrecy::SecretString;
use serde::Serialize;
use zeroize::Zeroizing;

use super::derive::{
    Derivation, DerivedValue, MAX_JSON_DEPTH, Role, cookie_what, local_storage_what,
};
use super::model::{Cookie, LocalStorageEntry, OriginState, StorageState};
use super::rule::{self, Refusal, Treatment};
use crate::MIN_SECRET_BYTES;
use crate::secrets::SecretError;

/// What the check of a storage state found: each derived value, described by its cookie
/// or localStorage entry and its part, with what the output guard does with it, and
/// whether the secret binding accepts the state. It holds no value, no part of one and no
/// digest of one: a description that would contain a value of
/// [`MIN_SECRET_BYTES`] or more (a JSON key equal to a stored value) is withheld.
///
/// `Display` writes a text table; `Serialize` the same as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StorageStateReport {
    /// The name the state was checked under (a secret name or a file).
    pub name: String,
    /// Whether the secret binding accepts the state.
    pub verdict: StateVerdict,
    /// Why the state is refused, one sentence per reason (empty when accepted).
    pub refusals: Vec<String>,
    /// Every derived value, in the order of the state.
    pub values: Vec<CheckedValue>,
}

/// Whether the secret binding accepts a storage state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StateVerdict {
    /// Accepted: every credential is guarded.
    Accepted,
    /// Refused: see [`StorageStateReport::refusals`].
    Refused,
}

/// One derived value of a storage state: where it comes from, which part it is, what it
/// is and what the guard does with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CheckedValue {
    /// The cookie or localStorage entry it comes from.
    pub source: ValueSource,
    /// Which part of the entry's value: `value` for the value as stored, otherwise the
    /// derivation steps, as `(percent-decoded)`, `(JSON leaf /a/0)`, `(JWT segment 2)`,
    /// `(token after the scheme)`.
    pub part: String,
    /// What it is: `credential: ` and why, `page state` or `segment of a JWT guarded
    /// whole` (`unclassified` for a value that could not be walked).
    pub role: String,
    /// What the guard does with it.
    #[serde(flatten)]
    pub verdict: ValueVerdict,
}

/// Where a derived value comes from (names only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ValueSource {
    /// A cookie.
    Cookie {
        /// Its name.
        name: String,
        /// Its domain, if stored.
        domain: Option<String>,
        /// Its path, if stored.
        path: Option<String>,
    },
    /// A localStorage entry.
    LocalStorage {
        /// The origin.
        origin: String,
        /// The key.
        key: String,
    },
}

impl fmt::Display for ValueSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueSource::Cookie { name, domain, path } => {
                write!(f, "cookie `{name}`")?;
                let attributes: Vec<String> = [("domain", domain), ("path", path)]
                    .into_iter()
                    .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v}")))
                    .collect();
                if attributes.is_empty() {
                    Ok(())
                } else {
                    write!(f, " ({})", attributes.join(", "))
                }
            }
            ValueSource::LocalStorage { origin, key } => {
                write!(f, "localStorage `{key}` of {origin}")
            }
        }
    }
}

/// What the output guard does with one derived value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ValueVerdict {
    /// The guard covers it: a result holding it, in any encoding, is never sent.
    Guarded,
    /// Page state (or a segment of a JWT guarded whole) too short to search for without
    /// false positives: left unguarded.
    UnguardedShortPageState {
        /// Why it is left unguarded.
        why: String,
    },
    /// It refuses the whole state.
    Refused {
        /// Why.
        reason: String,
    },
}

/// Checks the storage state called `name` (Playwright `storageState` JSON) the way the
/// secret binding will: every derived value with its verdict, and whether the state is
/// accepted. No value appears in the report.
///
/// Errors: the text is not `storageState` JSON (the message names `name` and a position,
/// never a value).
pub fn check(name: &str, state: &SecretString) -> Result<StorageStateReport, SecretError> {
    let parsed = StorageState::parse(name, state)?;
    let mut derive = Derivation {
        name,
        out: Vec::new(),
    };
    // Every derived value long enough to be guarded: no description may hold one.
    let mut needles: Vec<Zeroizing<Vec<u8>>> = Vec::new();
    let mut entries: Vec<(Entry<'_>, Option<Range<usize>>)> = Vec::new();
    for cookie in &parsed.cookies {
        let start = derive.out.len();
        let derived = derive.cookie(cookie);
        let range = settle(&mut derive.out, start, derived, &mut needles);
        entries.push((Entry::Cookie(cookie), range));
    }
    for origin in &parsed.origins {
        for entry in &origin.local_storage {
            let start = derive.out.len();
            let derived = derive.local_storage(origin, entry);
            let range = settle(&mut derive.out, start, derived, &mut needles);
            entries.push((Entry::LocalStorage(origin, entry), range));
        }
    }

    let mut values = Vec::new();
    let mut refusals = Vec::new();
    let mut unwalked = false;
    for (entry, range) in &entries {
        let source = entry.source(&needles);
        let Some(range) = range else {
            unwalked = true;
            let reason = format!(
                "its value nests JSON deeper than {MAX_JSON_DEPTH} levels: its leaves cannot all be classified"
            );
            refusals.push(format!("{source}: {reason}"));
            values.push(CheckedValue {
                source,
                part: "value".to_owned(),
                role: "unclassified".to_owned(),
                verdict: ValueVerdict::Refused { reason },
            });
            continue;
        };
        let prefix = entry.what();
        for d in &derive.out[range.clone()] {
            let part = withheld(part_of(&d.what, &prefix), &needles);
            let verdict = match rule::treatment(d) {
                Treatment::Guarded => ValueVerdict::Guarded,
                Treatment::Unguarded(why) => ValueVerdict::UnguardedShortPageState {
                    why: format!("{why}, shorter than {MIN_SECRET_BYTES} bytes"),
                },
                Treatment::Refused(why) => {
                    let reason = format!(
                        "a credential ({why}) shorter than {MIN_SECRET_BYTES} bytes cannot be guarded without false positives"
                    );
                    refusals.push(format!("{source} {part}: {reason}"));
                    ValueVerdict::Refused { reason }
                }
            };
            values.push(CheckedValue {
                source: source.clone(),
                part,
                role: role_text(d.role),
                verdict,
            });
        }
    }
    let refusal = rule::refusal(&derive.out);
    if !unwalked && refusal == Some(Refusal::NoCredential) {
        refusals.push(
            "the state holds no credential (no httpOnly cookie, no cookie, localStorage entry or JSON leaf named like a session or credential, no JWT): nothing to sign in with"
                .to_owned(),
        );
    }
    let verdict = if unwalked || refusal.is_some() {
        StateVerdict::Refused
    } else {
        StateVerdict::Accepted
    };
    Ok(StorageStateReport {
        name: name.to_owned(),
        verdict,
        refusals,
        values,
    })
}

/// A cookie or localStorage entry of the parsed state.
#[derive(Clone, Copy)]
enum Entry<'s> {
    Cookie(&'s Cookie),
    LocalStorage(&'s OriginState, &'s LocalStorageEntry),
}

impl Entry<'_> {
    /// How its derived values' descriptions start.
    fn what(&self) -> String {
        match self {
            Entry::Cookie(cookie) => cookie_what(cookie),
            Entry::LocalStorage(origin, entry) => local_storage_what(origin, entry),
        }
    }

    /// Its names, each withheld when it holds a value.
    fn source(&self, needles: &[Zeroizing<Vec<u8>>]) -> ValueSource {
        let name = |text: &str| withheld(text.to_owned(), needles);
        match self {
            Entry::Cookie(cookie) => ValueSource::Cookie {
                name: name(&cookie.name),
                domain: cookie.domain.as_deref().map(name),
                path: cookie.path.as_deref().map(name),
            },
            Entry::LocalStorage(origin, entry) => ValueSource::LocalStorage {
                origin: name(&origin.origin),
                key: name(&entry.name),
            },
        }
    }
}

/// Keeps the values one entry derived (`out[start..]`) as needles, and their range, or,
/// when the derivation failed, drops them and gives no range.
fn settle(
    out: &mut Vec<DerivedValue>,
    start: usize,
    derived: Result<(), SecretError>,
    needles: &mut Vec<Zeroizing<Vec<u8>>>,
) -> Option<Range<usize>> {
    needles.extend(
        out[start..]
            .iter()
            .filter(|d| d.value.len() >= MIN_SECRET_BYTES)
            .map(|d| d.value.clone()),
    );
    match derived {
        Ok(()) => Some(start..out.len()),
        Err(_) => {
            out.truncate(start);
            None
        }
    }
}

/// The part of `what` after the entry's description `prefix`: `value` for the value
/// itself.
fn part_of(what: &str, prefix: &str) -> String {
    match what.strip_prefix(prefix).map(str::trim) {
        Some("") => "value".to_owned(),
        Some(part) => part.to_owned(),
        None => what.to_owned(),
    }
}

/// `text`, or a placeholder when it contains a value that is long enough to be guarded
/// (a JSON key, a name or a path equal to a stored value).
fn withheld(text: String, needles: &[Zeroizing<Vec<u8>>]) -> String {
    let holds = needles
        .iter()
        .any(|n| memchr::memmem::find(text.as_bytes(), n).is_some());
    if holds {
        "(withheld: it contains a stored value)".to_owned()
    } else {
        text
    }
}

/// What a value is, in words.
fn role_text(role: Role) -> String {
    match role {
        Role::Credential(why) => format!("credential: {why}"),
        Role::Data => "page state".to_owned(),
        Role::Segment => "segment of a JWT guarded whole".to_owned(),
    }
}

impl StorageStateReport {
    /// Whether the secret binding accepts the state.
    pub fn accepted(&self) -> bool {
        self.verdict == StateVerdict::Accepted
    }
}

impl fmt::Display for StorageStateReport {
    /// A summary, the reasons of a refusal, then one row per value: verdict, entry,
    /// part, and the role (guarded) or why (otherwise).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |kind: fn(&ValueVerdict) -> bool| {
            self.values.iter().filter(|v| kind(&v.verdict)).count()
        };
        let verdict = match self.verdict {
            StateVerdict::Accepted => "accepted",
            StateVerdict::Refused => "refused",
        };
        writeln!(f, "storage state `{}`: {verdict}", self.name)?;
        writeln!(
            f,
            "{} values: {} guarded, {} unguarded (short page state), {} refused",
            self.values.len(),
            count(|v| matches!(v, ValueVerdict::Guarded)),
            count(|v| matches!(v, ValueVerdict::UnguardedShortPageState { .. })),
            count(|v| matches!(v, ValueVerdict::Refused { .. })),
        )?;
        for reason in &self.refusals {
            writeln!(f, "refused: {reason}")?;
        }
        let rows: Vec<[String; 4]> = self
            .values
            .iter()
            .map(|v| {
                let (verdict, note) = match &v.verdict {
                    ValueVerdict::Guarded => ("guarded", v.role.clone()),
                    ValueVerdict::UnguardedShortPageState { why } => ("unguarded", why.clone()),
                    ValueVerdict::Refused { reason } => ("refused", reason.clone()),
                };
                [
                    verdict.to_owned(),
                    v.source.to_string(),
                    v.part.clone(),
                    note,
                ]
            })
            .collect();
        let header = [
            "VERDICT".to_owned(),
            "ENTRY".to_owned(),
            "PART".to_owned(),
            "ROLE OR WHY".to_owned(),
        ];
        let mut widths = [0usize; 3];
        for row in std::iter::once(&header).chain(&rows) {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        writeln!(f)?;
        for row in std::iter::once(&header).chain(&rows) {
            writeln!(
                f,
                "{:<w0$}  {:<w1$}  {:<w2$}  {}",
                row[0],
                row[1],
                row[2],
                row[3],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;
    use secrecy::ExposeSecret as _;
    use serde_json::json;

    const SESSION: &str = "7f3c9a1e5b2d48c6a0e4f1b39d8c2a57";

    fn checked(state: &serde_json::Value) -> StorageStateReport {
        check("s", &SecretString::from(state.to_string())).unwrap()
    }

    /// The verdicts of the values whose entry is written `source` and part `part`.
    fn verdict_of<'r>(
        report: &'r StorageStateReport,
        source: &str,
        part: &str,
    ) -> &'r ValueVerdict {
        &report
            .values
            .iter()
            .find(|v| v.source.to_string() == source && v.part == part)
            .unwrap_or_else(|| panic!("{source} {part} not in {report}"))
            .verdict
    }

    #[test]
    fn a_grafana_state_is_accepted_with_guarded_and_unguarded_values() {
        let report = checked(&json!({
            "cookies": [{"name": "grafana_session", "value": SESSION, "domain": "127.0.0.1",
                         "path": "/", "expires": -1, "httpOnly": true}],
            "origins": [{"origin": "https://g.example", "localStorage": [
                {"name": "grafana.navigation.docked", "value": "true"},
                {"name": "ui", "value": "{\"theme\":\"dark\",\"dashboard\":\"tidb-overview-01\"}"}
            ]}]
        }));
        assert!(report.accepted(), "{report}");
        assert!(report.refusals.is_empty());
        assert_eq!(
            verdict_of(
                &report,
                "cookie `grafana_session` (domain 127.0.0.1, path /)",
                "value"
            ),
            &ValueVerdict::Guarded
        );
        let ls = |key: &str| format!("localStorage `{key}` of https://g.example");
        assert!(matches!(
            verdict_of(&report, &ls("grafana.navigation.docked"), "value"),
            ValueVerdict::UnguardedShortPageState { why } if why.starts_with("page state")
        ));
        assert_eq!(
            verdict_of(&report, &ls("ui"), "(JSON leaf /dashboard)"),
            &ValueVerdict::Guarded
        );
        assert!(matches!(
            verdict_of(&report, &ls("ui"), "(JSON leaf /theme)"),
            ValueVerdict::UnguardedShortPageState { .. }
        ));
        let text = report.to_string();
        assert!(text.starts_with("storage state `s`: accepted\n"), "{text}");
        assert!(
            !text.contains(SESSION) && !text.contains("tidb-overview-01"),
            "{text}"
        );
    }

    #[test]
    fn a_short_jwt_segment_is_left_unguarded() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJ9.c2lnbmF0dXJlLWJ5dGVz";
        let report = checked(&json!({"cookies": [{"name": "pref", "value": jwt}]}));
        assert!(report.accepted(), "{report}");
        assert!(matches!(
            verdict_of(&report, "cookie `pref`", "(JWT segment 2)"),
            ValueVerdict::UnguardedShortPageState { why } if why.contains("segment of a guarded JWT")
        ));
    }

    #[test]
    fn a_short_credential_refuses_the_state_and_says_which() {
        let report = checked(&json!({"cookies": [
            {"name": "grafana_session", "value": SESSION, "httpOnly": true},
            {"name": "opaque", "value": "abc123", "httpOnly": true}
        ]}));
        assert_eq!(report.verdict, StateVerdict::Refused);
        assert!(matches!(
            verdict_of(&report, "cookie `opaque`", "value"),
            ValueVerdict::Refused { reason } if reason.contains("an httpOnly cookie")
        ));
        assert_eq!(report.refusals.len(), 1, "{report}");
        assert!(report.refusals[0].starts_with("cookie `opaque` value: a credential"));
        assert!(!report.to_string().contains("abc123"));
    }

    #[test]
    fn a_state_without_credential_is_refused() {
        let report = checked(&json!({"cookies": [{"name": "lang", "value": "en-GB-oxendict"}]}));
        assert_eq!(report.verdict, StateVerdict::Refused);
        assert_eq!(
            verdict_of(&report, "cookie `lang`", "value"),
            &ValueVerdict::Guarded
        );
        assert!(
            report.refusals[0].contains("holds no credential"),
            "{report}"
        );
    }

    #[test]
    fn json_too_deep_refuses_its_entry_and_the_rest_is_listed() {
        let deep = format!("{}1{}", "[".repeat(70), "]".repeat(70));
        let report = checked(&json!({
            "cookies": [{"name": "grafana_session", "value": SESSION, "httpOnly": true}],
            "origins": [{"origin": "https://g.example", "localStorage": [{"name": "ui", "value": deep}]}]
        }));
        assert_eq!(report.verdict, StateVerdict::Refused);
        assert!(matches!(
            verdict_of(&report, "localStorage `ui` of https://g.example", "value"),
            ValueVerdict::Refused { reason } if reason.contains("deeper than 64 levels")
        ));
        assert_eq!(
            verdict_of(&report, "cookie `grafana_session`", "value"),
            &ValueVerdict::Guarded
        );
        let mut builder = crate::GuardBuilder::default();
        assert!(builder.add_storage_state("s", &SecretString::from(json!({
            "cookies": [{"name": "grafana_session", "value": SESSION, "httpOnly": true}],
            "origins": [{"origin": "https://g.example", "localStorage": [{"name": "ui", "value": format!("{}1{}", "[".repeat(70), "]".repeat(70))}]}]
        }).to_string())).is_err());
    }

    #[test]
    fn a_json_key_equal_to_a_value_is_withheld() {
        let report = checked(&json!({"cookies": [
            {"name": "grafana_session", "value": SESSION, "httpOnly": true},
            {"name": "seen", "value": json!({SESSION: true}).to_string()}
        ]}));
        let text = report.to_string();
        let json = serde_json::to_string(&report).unwrap();
        assert!(!text.contains(SESSION) && !json.contains(SESSION), "{text}");
        assert!(
            text.contains("(withheld: it contains a stored value)"),
            "{text}"
        );
    }

    #[test]
    fn not_a_storage_state_is_an_error_that_quotes_nothing() {
        let e = check(
            "s",
            &SecretString::from("{\"cookies\": \"SECRETSESSION123\"}".to_owned()),
        )
        .unwrap_err();
        assert!(!e.to_string().contains("SECRETSESSION123"), "{e}");
    }

    #[test]
    fn the_json_names_each_field() {
        let report = checked(&json!({"cookies": [
            {"name": "grafana_session", "value": SESSION, "domain": "d", "path": "/", "httpOnly": true},
            {"name": "lang", "value": "en"}
        ]}));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["verdict"], "accepted");
        assert_eq!(
            json["values"][0],
            json!({"source": {"kind": "cookie", "name": "grafana_session", "domain": "d", "path": "/"},
                   "part": "value", "role": "credential: an httpOnly cookie", "verdict": "guarded"})
        );
        assert_eq!(json["values"][1]["verdict"], "unguarded_short_page_state");
        assert_eq!(json["values"][1]["why"], "page state, shorter than 8 bytes");
    }

    /// A cookie or localStorage value: random text, JSON holding it, a JWT, or an
    /// authorization value.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            "\\PC{0,24}",
            "[a-zA-Z0-9%]{0,12}",
            "\\PC{0,16}".prop_map(|v| json!({"token": v, "n": 7, "ok": true}).to_string()),
            "[A-Za-z0-9_-]{0,12}".prop_map(|v| format!("eyJhbGciOiJIUzI1NiJ9.{v}.c2lnbmF0dXJl")),
            "[A-Za-z0-9]{0,16}".prop_map(|v| format!("Bearer {v}")),
        ]
    }

    /// A storage state: cookies (name, value, httpOnly) and one origin's localStorage.
    fn state() -> impl Strategy<Value = String> {
        let names = prop::sample::select(vec![
            "grafana_session",
            "grafana_session_expiry",
            "lang",
            "prefs",
            "XSRF-TOKEN",
            "ui",
        ]);
        (
            prop::collection::vec((names.clone(), value(), any::<bool>()), 0..4),
            prop::collection::vec((names, value()), 0..4),
        )
            .prop_map(|(cookies, storage)| {
                json!({
                    "cookies": cookies.into_iter().map(|(n, v, h)| json!({"name": n, "value": v, "httpOnly": h, "domain": "g.example", "path": "/"})).collect::<Vec<_>>(),
                    "origins": [{"origin": "https://g.example", "localStorage":
                        storage.into_iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>()}]
                })
                .to_string()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// No cookie or localStorage value of 8 bytes or more appears in the text or the
        /// JSON of the report, whatever the state holds.
        #[test]
        fn no_value_appears_in_the_report(
            cookies in prop::collection::vec(("[a-z_]{1,12}", "\\PC{8,32}", any::<bool>()), 0..4),
            storage in prop::collection::vec(("[a-z.]{1,12}", "\\PC{8,32}"), 0..4),
            session in "[0-9a-f]{8,40}",
        ) {
            let mut all: Vec<String> = vec![session.clone()];
            all.extend(cookies.iter().map(|c| c.1.clone()));
            all.extend(storage.iter().map(|s| s.1.clone()));
            let state = json!({
                "cookies": std::iter::once(json!({"name": "grafana_session", "value": session, "httpOnly": true, "domain": "g.example", "path": "/"}))
                    .chain(cookies.iter().map(|(n, v, h)| json!({"name": n, "value": v, "httpOnly": h})))
                    .collect::<Vec<_>>(),
                "origins": [{"origin": "https://g.example", "localStorage":
                    storage.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>()}]
            });
            let report = check("s", &SecretString::from(state.to_string())).unwrap();
            let text = report.to_string();
            let json = serde_json::to_string(&report).unwrap();
            for v in &all {
                let escaped = serde_json::to_string(v).unwrap();
                let escaped = &escaped[1..escaped.len() - 1];
                prop_assert!(!text.contains(v.as_str()), "{} in {}", v, text);
                prop_assert!(!json.contains(v.as_str()) && !json.contains(escaped), "{} in {}", v, json);
            }
        }

        /// The report decides as the binding does, through the same rule: it accepts
        /// exactly the states the guard builder accepts, lists exactly the builder's
        /// unguarded values, and its guarded values are exactly those
        /// `protected_values` protects.
        #[test]
        fn the_report_agrees_with_the_guard_and_protected_values(state in state()) {
            let secret = SecretString::from(state.clone());
            let report = check("s", &secret).unwrap();
            let mut builder = crate::GuardBuilder::default();
            let bound = builder.add_storage_state("s", &secret);
            prop_assert_eq!(report.accepted(), bound.is_ok(), "{}", report);
            let derived = super::super::derive_values("s", secret.expose_secret()).unwrap();
            prop_assert_eq!(report.values.len(), derived.len());
            let mut guarded: Vec<&[u8]> = Vec::new();
            let mut unguarded = Vec::new();
            for (checked, d) in report.values.iter().zip(&derived) {
                let source = checked.source.to_string();
                let (name, _) = source.split_once(" (domain").unwrap_or((&source, ""));
                prop_assert!(d.what.starts_with(name), "{} / {}", d.what, source);
                match &checked.verdict {
                    ValueVerdict::Guarded => {
                        if std::str::from_utf8(&d.value).is_ok() {
                            guarded.push(&d.value);
                        }
                    }
                    ValueVerdict::UnguardedShortPageState { why } => {
                        unguarded.push(format!("s: {} ({why})", d.what));
                    }
                    ValueVerdict::Refused { .. } => {}
                }
            }
            let protected = StorageState::parse("s", &secret).unwrap().protected_values("s").unwrap();
            let mut protected: Vec<&[u8]> = protected.iter().map(|p| p.expose_secret().as_bytes()).collect();
            guarded.sort();
            protected.sort();
            prop_assert_eq!(guarded, protected);
            if bound.is_ok() {
                prop_assert_eq!(unguarded.as_slice(), builder.unguarded());
            }
        }
    }
}
