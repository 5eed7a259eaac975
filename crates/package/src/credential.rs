//! Which names of a browser storage state say that an entry holds a credential.
//!
//! A storage state mixes credentials (the session cookie, tokens) with page state
//! (`"true"`, `"en"`, an expiry epoch). Every value long enough to search for is guarded
//! whatever it is; the class decides only what happens to a value too short to search
//! for without false positives: a credential that short refuses the whole state, page
//! state that short is left unguarded and listed in the binding report. A name names a
//! credential when it contains a credential marker (`session`, `token`, `auth`, ...) or
//! one of its words is a short credential word (`sid`, `key`, `pwd`, ...), unless its
//! last word describes a credential instead of holding one (`expiry`, `type`, `at`, ...:
//! `grafana_session_expiry`, `token_type`, `sessionCreatedAt`).
//!
//! Inside JSON (a localStorage value, a cookie value, JSON held in a JSON string) a name
//! reaches down: a text or number leaf is a credential when a name on its path from the
//! entry down names a credential and no name below that one describes a credential
//! (`{"session":{"id":"…"}}` is one, `{"session":{"expires_at":…}}` is not).

/// Substrings of a lower-cased name that mark a credential.
const MARKERS: [&str; 14] = [
    "sess",
    "token",
    "auth",
    "jwt",
    "bearer",
    "secret",
    "passw",
    "cred",
    "csrf",
    "xsrf",
    "apikey",
    "saml",
    "oidc",
    "signature",
];

/// Whole words of a name that mark a credential (too short to match as substrings
/// without hitting ordinary words: `sid` is in `sidebar`).
const WORDS: [&str; 7] = ["sid", "key", "pwd", "pass", "pin", "otp", "sig"];

/// Last words that describe a credential rather than hold it.
const DESCRIPTORS: [&str; 12] = [
    "expiry",
    "expires",
    "expire",
    "expiration",
    "exp",
    "ttl",
    "type",
    "at",
    "in",
    "scope",
    "kind",
    "version",
];

/// The lower-case words of a name: split at every character that is no ASCII letter or
/// digit and where a lower-case letter or digit is followed by an upper-case one
/// (`grafana_session_expiry`, `grafana.navigation.docked`, `sessionCreatedAt`).
fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && previous_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        current.push(c.to_ascii_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// True when the last word of `name` describes a credential instead of holding one
/// (`grafana_session_expiry`, `token_type`, `expires_at`).
pub(crate) fn describes_credential(name: &str) -> bool {
    words(name)
        .last()
        .is_some_and(|last| DESCRIPTORS.contains(&last.as_str()))
}

/// True when `name` (a cookie name, a localStorage key or a JSON object key) names a
/// credential.
pub(crate) fn names_credential(name: &str) -> bool {
    if describes_credential(name) {
        return false;
    }
    let words = words(name);
    let lower = name.to_ascii_lowercase();
    MARKERS.iter().any(|m| lower.contains(m)) || words.iter().any(|w| WORDS.contains(&w.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_at_separators_and_case() {
        assert_eq!(
            words("grafana_session_expiry"),
            ["grafana", "session", "expiry"]
        );
        assert_eq!(words("sessionCreatedAt"), ["session", "created", "at"]);
        assert_eq!(words("connect.sid"), ["connect", "sid"]);
        assert_eq!(words("JSESSIONID"), ["jsessionid"]);
        assert_eq!(words("--"), Vec::<String>::new());
    }

    #[test]
    fn credential_names() {
        for name in [
            "grafana_session",
            "JSESSIONID",
            "PHPSESSID",
            "connect.sid",
            "access_token",
            "grafana.auth",
            "CF_Authorization",
            "_oauth2_proxy",
            "XSRF-TOKEN",
            "apiKey",
            "id_token",
            "remember_user_token",
        ] {
            assert!(names_credential(name), "{name}");
        }
        for name in [
            "grafana_session_expiry",
            "token_type",
            "sessionCreatedAt",
            "expires_in",
            "grafana.navigation.docked",
            "grafana.sidemenu.docked",
            "grafana.preferences.language",
            "lang",
            "theme",
            "",
        ] {
            assert!(!names_credential(name), "{name}");
        }
    }
}
