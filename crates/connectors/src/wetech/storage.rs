//! The browser storage state (Playwright `storageState` JSON): parsing, and which cookies
//! and localStorage entries apply to the Grafana origin.

use std::fmt;

use cookie::SameSite;
use cookie::time::OffsetDateTime;
use evidence_package::storage_state::StorageState as StoredState;
use secrecy::{ExposeSecret, SecretString};
use url::Url;

/// A browser storage state ready for a browser: the package's one model
/// ([`evidence_package::storage_state::StorageState`]) with each cookie's attributes
/// checked and normalized. Values stay secret: `Debug` shows counts only.
pub struct StorageState {
    cookies: Vec<StoredCookie>,
    origins: Vec<StoredOrigin>,
}

impl fmt::Debug for StorageState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Counts only: the names are in the package model's `Debug`, values nowhere.
        f.debug_struct("StorageState")
            .field("cookies", &self.cookies.len())
            .field("origins", &self.origins.len())
            .finish()
    }
}

/// One stored cookie with its attributes as stored.
pub(crate) struct StoredCookie {
    pub(crate) name: String,
    value: SecretString,
    /// The domain as stored (`.example.com` for a domain cookie).
    pub(crate) domain: String,
    pub(crate) path: String,
    /// Unix seconds; `None` for a session cookie (Playwright writes `-1`).
    pub(crate) expires: Option<i64>,
    pub(crate) http_only: bool,
    pub(crate) secure: bool,
    /// As stored; a missing SameSite is `Lax`, Chromium's default, never `None`.
    pub(crate) same_site: SameSite,
}

/// The localStorage entries of one origin.
pub(crate) struct StoredOrigin {
    pub(crate) origin: String,
    entries: Vec<(String, SecretString)>,
}

impl StorageState {
    /// Parses a Playwright `storageState` JSON document into the package's model and
    /// checks what a browser needs: every cookie has a domain, a `sameSite` of `Strict`,
    /// `Lax` or `None` (missing is `Lax`, Chromium's own default; it never becomes
    /// `None`) and a finite expiry (Unix seconds, `-1` for a session cookie).
    ///
    /// The error names the offending cookie or a position, never a value.
    pub fn parse(json: &SecretString) -> Result<Self, String> {
        let stored = StoredState::parse("storage state", json)
            .map_err(|_| "the storage state is not Playwright storageState JSON".to_owned())?;
        Self::from_stored(&stored)
    }

    /// The browser's view of a parsed state (see [`StorageState::parse`]).
    pub fn from_stored(stored: &StoredState) -> Result<Self, String> {
        let mut cookies = Vec::with_capacity(stored.cookies().len());
        for c in stored.cookies() {
            let same_site = match c.same_site() {
                None => SameSite::Lax,
                Some(s) if s.eq_ignore_ascii_case("lax") => SameSite::Lax,
                Some(s) if s.eq_ignore_ascii_case("strict") => SameSite::Strict,
                Some(s) if s.eq_ignore_ascii_case("none") => SameSite::None,
                Some(other) => {
                    return Err(format!(
                        "cookie `{}` has sameSite {other:?}; expected Strict, Lax or None",
                        c.name()
                    ));
                }
            };
            let domain = c.domain().unwrap_or_default().trim().to_ascii_lowercase();
            if domain.trim_start_matches('.').is_empty() {
                return Err(format!("cookie `{}` has no domain", c.name()));
            }
            let expires = match c.expires() {
                None => None,
                Some(e) if e.is_finite() && e >= 0.0 => Some(e.floor() as i64),
                // Playwright writes -1 for a session cookie.
                Some(e) if e.is_finite() && e < 0.0 => None,
                Some(_) => return Err(format!("cookie `{}` has an invalid expiry", c.name())),
            };
            cookies.push(StoredCookie {
                name: c.name().to_owned(),
                value: c.value().clone(),
                domain,
                path: c
                    .path()
                    .filter(|p| p.starts_with('/'))
                    .unwrap_or("/")
                    .to_owned(),
                expires,
                http_only: c.http_only(),
                secure: c.secure(),
                same_site,
            });
        }
        let origins = stored
            .origins()
            .iter()
            .map(|o| StoredOrigin {
                origin: o.origin().trim_end_matches('/').to_owned(),
                entries: o
                    .entries()
                    .map(|(k, v)| (k.to_owned(), v.clone()))
                    .collect(),
            })
            .collect();
        Ok(StorageState { cookies, origins })
    }

    /// The number of cookies.
    pub fn cookie_count(&self) -> usize {
        self.cookies.len()
    }

    /// The number of origins with localStorage entries.
    pub fn origin_count(&self) -> usize {
        self.origins.len()
    }

    /// The cookies a page of `origin` may set: host-only cookies of exactly its host,
    /// domain cookies (`.example.com`) of its host or a parent domain; `Secure` ones only
    /// on an `https` origin or on loopback (which Chromium treats as secure).
    pub(crate) fn cookies_for<'a>(
        &'a self,
        origin: &Url,
    ) -> impl Iterator<Item = &'a StoredCookie> {
        let host = origin.host_str().unwrap_or_default().to_ascii_lowercase();
        let secure_ok = origin.scheme() == "https" || is_loopback(&host);
        self.cookies
            .iter()
            .filter(move |c| domain_matches(&host, &c.domain) && (!c.secure || secure_ok))
    }

    /// The localStorage entries stored for exactly `origin` (scheme, host and port).
    pub(crate) fn local_storage_for<'a>(
        &'a self,
        origin: &Url,
    ) -> impl Iterator<Item = (&'a str, &'a SecretString)> {
        let wanted = origin.origin().ascii_serialization();
        self.origins
            .iter()
            .filter(move |o| {
                Url::parse(&o.origin).is_ok_and(|u| u.origin().ascii_serialization() == wanted)
            })
            .flat_map(|o| o.entries.iter().map(|(k, v)| (k.as_str(), v)))
    }
}

impl StoredCookie {
    /// The WebDriver cookie: name, value, domain, path, Secure, HttpOnly, SameSite and
    /// expiry exactly as stored.
    pub(crate) fn to_webdriver(&self) -> cookie::Cookie<'static> {
        let mut c = cookie::Cookie::new(self.name.clone(), self.value.expose_secret().to_owned());
        c.set_domain(self.domain.clone());
        c.set_path(self.path.clone());
        c.set_secure(self.secure);
        c.set_http_only(self.http_only);
        c.set_same_site(self.same_site);
        if let Some(t) = self
            .expires
            .and_then(|e| OffsetDateTime::from_unix_timestamp(e).ok())
        {
            c.set_expires(t);
        }
        c
    }
}

/// Domain matching of a request host against a stored cookie domain, as Playwright
/// writes it: `.example.com` is a domain cookie (the domain and its subdomains, RFC 6265
/// 5.1.3), `example.com` a host-only cookie (that host exactly).
fn domain_matches(host: &str, cookie_domain: &str) -> bool {
    match cookie_domain.strip_prefix('.') {
        None => host == cookie_domain,
        Some(domain) => {
            host == domain
                || (!is_ip(host)
                    && host.len() > domain.len()
                    && host.ends_with(domain)
                    && host.as_bytes()[host.len() - domain.len() - 1] == b'.')
        }
    }
}

fn is_ip(host: &str) -> bool {
    host.trim_matches(['[', ']'])
        .parse::<std::net::IpAddr>()
        .is_ok()
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn state(json: serde_json::Value) -> StorageState {
        StorageState::parse(&SecretString::from(json.to_string())).unwrap()
    }

    #[test]
    fn attributes_are_kept_and_missing_same_site_is_lax() {
        let s = state(serde_json::json!({
            "cookies": [
                {"name": "grafana_session", "value": "v1-abcdefgh", "domain": "127.0.0.1",
                 "path": "/", "expires": -1, "httpOnly": true, "secure": false},
                {"name": "strict", "value": "v2-abcdefgh", "domain": ".grafana.example",
                 "path": "/d", "expires": 1893456000.5, "httpOnly": false, "secure": true,
                 "sameSite": "Strict"},
                {"name": "none", "value": "v3-abcdefgh", "domain": "grafana.example",
                 "secure": true, "sameSite": "None"}
            ],
            "origins": [{"origin": "http://127.0.0.1:3000/", "localStorage": [
                {"name": "grafana.user", "value": "{\"id\":1}"}]}]
        }));
        assert_eq!(s.cookie_count(), 3);
        let c = s.cookies[0].to_webdriver();
        assert_eq!(c.same_site(), Some(SameSite::Lax));
        assert_eq!(c.http_only(), Some(true));
        assert_eq!(c.secure(), Some(false));
        assert_eq!(c.domain(), Some("127.0.0.1"));
        assert!(c.expires().is_none(), "session cookie");
        let c = s.cookies[1].to_webdriver();
        assert_eq!(c.same_site(), Some(SameSite::Strict));
        assert_eq!(c.path(), Some("/d"));
        assert_eq!(
            c.expires_datetime().map(|t| t.unix_timestamp()),
            Some(1_893_456_000)
        );
        assert_eq!(
            s.cookies[2].to_webdriver().same_site(),
            Some(SameSite::None)
        );
        assert_eq!(s.cookies[2].path, "/");

        let local = Url::parse("http://127.0.0.1:3000").unwrap();
        let names: Vec<_> = s.cookies_for(&local).map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["grafana_session"]);
        assert_eq!(s.local_storage_for(&local).count(), 1);
        let other_port = Url::parse("http://127.0.0.1:3001").unwrap();
        assert_eq!(s.local_storage_for(&other_port).count(), 0);
        let https = Url::parse("https://grafana.example").unwrap();
        let names: Vec<_> = s.cookies_for(&https).map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["strict", "none"]);
        // Secure cookies are not set from a plain http page of a non-loopback host.
        let http = Url::parse("http://grafana.example").unwrap();
        assert_eq!(s.cookies_for(&http).count(), 0);
        let sub = Url::parse("https://a.grafana.example").unwrap();
        let names: Vec<_> = s.cookies_for(&sub).map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["strict"]);
    }

    #[test]
    fn errors_name_the_cookie_never_the_value() {
        let bad = SecretString::from(
            r#"{"cookies":[{"name":"c","value":"SECRETVALUE1","domain":"h","sameSite":"Weird"}]}"#,
        );
        let e = StorageState::parse(&bad).unwrap_err();
        assert!(
            e.contains("cookie `c`") && !e.contains("SECRETVALUE1"),
            "{e}"
        );
        let bad = SecretString::from(r#"{"cookies":[{"name":"c","value":"SECRETVALUE1"}]}"#);
        let e = StorageState::parse(&bad).unwrap_err();
        assert!(!e.contains("SECRETVALUE1"), "{e}");
        let bad = SecretString::from("SECRETVALUE1 not json");
        let e = StorageState::parse(&bad).unwrap_err();
        assert!(!e.contains("SECRETVALUE1"), "{e}");
        let s = StorageState::parse(&SecretString::from(
            r#"{"cookies":[{"name":"c","value":"SECRETVALUE1","domain":"h"}]}"#,
        ))
        .unwrap();
        assert!(!format!("{s:?}").contains("SECRETVALUE1"));
    }

    /// A real Grafana state: the short page state is written to the browser as stored,
    /// but is no redaction needle (Grafana's words stay whole); the session cookie and
    /// the longer values are.
    #[test]
    fn short_page_state_is_injected_and_never_redacted() {
        let json = serde_json::json!({
            "cookies": [
                {"name": "grafana_session", "value": "7f3c9a1e5b2d48c6a0e4f1b39d8c2a57",
                 "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": true},
                {"name": "grafana_session_expiry", "value": "1893456000", "domain": "127.0.0.1",
                 "path": "/", "expires": 1893456000.0, "httpOnly": false},
                {"name": "lang", "value": "en", "domain": "127.0.0.1"}
            ],
            "origins": [{"origin": "http://127.0.0.1:3000", "localStorage": [
                {"name": "grafana.navigation.docked", "value": "true"},
                {"name": "grafana.dashboard.recent", "value": "{\"uid\":\"tidb-overview-01\"}"}]}]
        });
        let s = state(json.clone());
        let local = Url::parse("http://127.0.0.1:3000").unwrap();
        let cookies: Vec<_> = s
            .cookies_for(&local)
            .map(|c| {
                let w = c.to_webdriver();
                (w.name().to_owned(), w.value().to_owned())
            })
            .collect();
        assert_eq!(
            cookies[1],
            ("grafana_session_expiry".to_owned(), "1893456000".to_owned())
        );
        assert_eq!(cookies[2], ("lang".to_owned(), "en".to_owned()));
        let entries: Vec<_> = s
            .local_storage_for(&local)
            .map(|(k, v)| (k.to_owned(), v.expose_secret().to_owned()))
            .collect();
        assert_eq!(
            entries[0],
            ("grafana.navigation.docked".to_owned(), "true".to_owned())
        );
        let redactor = crate::prometheus::Redactor::new(
            evidence_package::storage_state::storage_state_values(
                "s",
                &SecretString::from(json.to_string()),
            )
            .unwrap(),
        );
        let text = "1:10: parse error: unexpected end of input when true was expected";
        assert_eq!(redactor.redact(text), text);
        // The redactor covers what the guard covers: a JSON leaf alone is redacted too.
        let leaked =
            "session 7f3c9a1e5b2d48c6a0e4f1b39d8c2a57 until 1893456000, uid tidb-overview-01";
        let redacted = redactor.redact(leaked);
        assert!(
            !redacted.contains("7f3c9a1e5b2d48c6a0e4f1b39d8c2a57")
                && !redacted.contains("1893456000")
                && !redacted.contains("tidb-overview-01"),
            "{redacted}"
        );
    }

    #[test]
    fn domain_matching() {
        assert!(domain_matches("grafana.example", ".grafana.example"));
        assert!(domain_matches("a.grafana.example", ".grafana.example"));
        assert!(!domain_matches("a.grafana.example", "grafana.example"));
        assert!(domain_matches("grafana.example", "grafana.example"));
        assert!(!domain_matches("agrafana.example", "grafana.example"));
        assert!(!domain_matches("grafana.example", "a.grafana.example"));
        assert!(!domain_matches("10.0.0.1", ".0.0.1"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// A cookie's SameSite is never `None` unless the storage state says `None`.
        #[test]
        fn same_site_none_only_when_stored(
            same_site in prop::option::of(prop_oneof![
                Just("Lax".to_owned()), Just("lax".to_owned()), Just("Strict".to_owned()),
                Just("None".to_owned()), Just("NONE".to_owned()),
            ]),
            secure in any::<bool>(),
            http_only in any::<bool>(),
            expires in prop::option::of(-1.0f64..4.0e9),
        ) {
            let mut cookie = serde_json::json!({"name": "n", "value": "value-123456",
                "domain": "127.0.0.1", "secure": secure, "httpOnly": http_only});
            if let Some(s) = &same_site {
                cookie["sameSite"] = serde_json::json!(s);
            }
            if let Some(e) = expires {
                cookie["expires"] = serde_json::json!(e);
            }
            let s = state(serde_json::json!({"cookies": [cookie]}));
            let c = s.cookies[0].to_webdriver();
            let stored_none = same_site.as_deref().is_some_and(|s| s.eq_ignore_ascii_case("none"));
            prop_assert_eq!(c.same_site() == Some(SameSite::None), stored_none);
            prop_assert!(c.same_site().is_some());
            prop_assert_eq!(c.secure(), Some(secure));
            prop_assert_eq!(c.http_only(), Some(http_only));
            let want = expires.filter(|e| *e >= 0.0).map(|e| e.floor() as i64);
            prop_assert_eq!(c.expires_datetime().map(|t| t.unix_timestamp()), want);
        }
    }
}
