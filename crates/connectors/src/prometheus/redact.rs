//! Credential redaction of provider text.

use std::fmt;
use std::sync::LazyLock;

use evidence_package::{guard::cut_at_char_boundary, guard::searched_forms};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use regex::{Captures, Regex};
use secrecy::{ExposeSecret, SecretString};
use zeroize::Zeroizing;

/// What a redacted credential is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Header-like `name: value` / `"name": "value"` / `name=value` for credential headers.
#[expect(
    clippy::expect_used,
    reason = "constant pattern, exercised by the unit tests"
)]
static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)\b((?:proxy-)?authorization|set-cookie|cookie|x-manus-session|x-api-key|x-auth-token|x-grafana-key)(\s*["']?\s*[:=]\s*)("[^"]*"|'[^']*'|[^\r\n]*)"#,
    )
    .expect("valid header pattern")
});

/// URL query or form parameters whose name says token, password, key, secret, session
/// or auth.
#[expect(
    clippy::expect_used,
    reason = "constant pattern, exercised by the unit tests"
)]
static PARAM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)([?&;][A-Za-z0-9_.\-\[\]]*(?:token|password|passwd|pwd|secret|key|session|auth)[A-Za-z0-9_.\-\[\]]*=)([^&#\s"'<>]+)"#,
    )
    .expect("valid parameter pattern")
});

/// A bearer credential written out in prose (`Bearer eyJ...`), long enough to be one.
#[expect(
    clippy::expect_used,
    reason = "constant pattern, exercised by the unit tests"
)]
static BEARER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/\-]{16,}=*").expect("valid bearer pattern")
});

/// A `Bearer` credential cut by the end of a text (too short for [`BEARER`]).
#[expect(
    clippy::expect_used,
    reason = "constant pattern, exercised by the unit tests"
)]
static BEARER_TAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]*=*\z").expect("valid bearer tail pattern")
});

/// Removes credentials from provider text before it becomes `detail_error`.
///
/// It replaces, with [`REDACTED`]:
/// - every bound secret value, raw and in its percent-encoded, form-encoded and
///   JSON-escaped forms (longest first);
/// - the values of `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie` and
///   other credential headers written as `name: value`, `name=value` or `"name":"value"`;
/// - URL query and form parameters whose name holds `token`, `password`, `key`,
///   `secret`, `session` or `auth`;
/// - long `Bearer` credentials in prose.
///
/// Everything else of the text is kept: the provider's words stay complete.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Vec<SecretString>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl Redactor {
    /// A redactor for these bound secret values.
    pub fn new(secrets: impl IntoIterator<Item = SecretString>) -> Self {
        Redactor {
            secrets: secrets.into_iter().collect(),
        }
    }

    /// Adds one bound secret value.
    pub fn with_secret(mut self, secret: SecretString) -> Self {
        self.secrets.push(secret);
        self
    }

    /// The number of bound secret values.
    pub fn secret_count(&self) -> usize {
        self.secrets.len()
    }

    /// The text with credentials replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        let variants = self.variants();
        // A replacement can join neighbours into a new occurrence; repeat until none is
        // left (bounded: a secret inside the marker itself cannot be removed).
        for _ in 0..4 {
            let mut changed = false;
            for v in variants.iter() {
                if out.contains(v.as_str()) {
                    out = out.replace(v.as_str(), REDACTED);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let out = HEADER.replace_all(&out, |c: &Captures<'_>| {
            let value = c.get(3).map_or("", |m| m.as_str());
            let marker = match value.chars().next() {
                Some('"') => format!("\"{REDACTED}\""),
                Some('\'') => format!("'{REDACTED}'"),
                _ => REDACTED.to_owned(),
            };
            format!("{}{}{marker}", &c[1], &c[2])
        });
        let out = PARAM.replace_all(&out, |c: &Captures<'_>| format!("{}{REDACTED}", &c[1]));
        let out = BEARER.replace_all(&out, |c: &Captures<'_>| format!("{} {REDACTED}", &c[1]));
        out.into_owned()
    }

    /// Redacts a text that was cut at its end from a longer one (an excerpt, the
    /// retained start of a long body): as [`Redactor::redact`], and a tail that could be
    /// the start of a bound secret (in any of its forms here and any form the output
    /// guard searches: base64, hex, percent-encoding, JSON escapes) or of a `Bearer`
    /// credential is replaced with [`REDACTED`] as well, so no part of a secret cut in
    /// two remains. U+FFFD at the very end (a character the cut split, read back as
    /// UTF-8) does not hide the tail before it.
    pub fn redact_cut(&self, text: &str) -> String {
        let mut out = self.redact(text);
        let kept = out.trim_end_matches(char::REPLACEMENT_CHARACTER).len();
        let mut tail = 0;
        for v in self.cut_forms().iter() {
            for (k, _) in v.char_indices().skip(1) {
                if k > tail && out[..kept].ends_with(&v[..k]) {
                    tail = k;
                }
            }
        }
        if let Some(m) = BEARER_TAIL.find(&out[..kept]) {
            tail = tail.max(kept - m.start());
        }
        if tail > 0 {
            out.truncate(kept - tail);
            out.push_str(REDACTED);
        }
        out
    }

    /// The start of `body`, at most `max` bytes cut at a character boundary, as text
    /// (invalid UTF-8 replaced), redacted, and how many bytes of `body` it leaves out.
    /// Whole, the text is trimmed and redacted by [`Redactor::redact`]; cut, it is
    /// trimmed at its start and redacted by [`Redactor::redact_cut`].
    pub fn excerpt(&self, body: &[u8], max: usize) -> (String, usize) {
        let head = cut_at_char_boundary(body, max);
        let text = String::from_utf8_lossy(head);
        let left_out = body.len() - head.len();
        if left_out > 0 {
            (self.redact_cut(text.trim_start()), left_out)
        } else {
            (self.redact(text.trim()), 0)
        }
    }

    /// The forms a cut tail is checked against: [`Redactor::variants`] and every form
    /// the output guard searches, without duplicates.
    fn cut_forms(&self) -> Vec<Zeroizing<String>> {
        let mut out = self.variants();
        for secret in &self.secrets {
            for form in searched_forms(secret.expose_secret()) {
                let form = Zeroizing::new(form);
                if !out.iter().any(|o| o.as_str() == form.as_str()) {
                    out.push(form);
                }
            }
        }
        out
    }

    /// Every form of every secret to look for, longest first, without duplicates.
    fn variants(&self) -> Vec<Zeroizing<String>> {
        let mut out: Vec<Zeroizing<String>> = Vec::new();
        for secret in &self.secrets {
            let raw = secret.expose_secret();
            if raw.is_empty() {
                continue;
            }
            let percent = utf8_percent_encode(raw, NON_ALPHANUMERIC).to_string();
            let candidates = [
                raw.to_owned(),
                url::form_urlencoded::byte_serialize(raw.as_bytes()).collect::<String>(),
                percent.to_ascii_lowercase_escapes(),
                percent,
                serde_json::to_string(raw)
                    .map(|j| j.trim_matches('"').to_owned())
                    .unwrap_or_default(),
            ];
            for c in candidates {
                let c = Zeroizing::new(c);
                if !c.is_empty() && !out.iter().any(|o| o.as_str() == c.as_str()) {
                    out.push(c);
                }
            }
        }
        out.sort_by_key(|v| std::cmp::Reverse(v.len()));
        out
    }
}

trait LowercaseEscapes {
    fn to_ascii_lowercase_escapes(&self) -> String;
}

impl LowercaseEscapes for String {
    /// `%2F` → `%2f`: the same percent-encoding with lower-case hex digits.
    fn to_ascii_lowercase_escapes(&self) -> String {
        let mut out = String::with_capacity(self.len());
        let mut escape = 0;
        for c in self.chars() {
            if escape > 0 {
                out.push(c.to_ascii_lowercase());
                escape -= 1;
            } else {
                if c == '%' {
                    escape = 2;
                }
                out.push(c);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn redactor(secret: &str) -> Redactor {
        Redactor::new([SecretString::from(secret.to_owned())])
    }

    proptest! {
        /// A text cut through a bound secret, in any of its forms, or through a
        /// `Bearer` credential keeps no part of it at its end.
        #[test]
        fn a_cut_text_ends_in_no_part_of_a_secret(
            before in "[a-z ]{0,20}",
            secret in "[A-Za-z0-9/+=&]{12,24}",
            form in 0usize..5,
            cut in any::<prop::sample::Index>(),
        ) {
            let r = redactor(&secret);
            let forms = r.variants();
            let full = forms[form % forms.len()].as_str().to_owned();
            let k = 1 + cut.index(full.len() - 1);
            let text = format!("{before}{}", &full[..k]);
            let out = r.redact_cut(&text);
            for f in forms.iter() {
                for j in 1..f.len() {
                    if f.is_char_boundary(j) {
                        prop_assert!(!out.ends_with(&f[..j]), "{out:?} ends in part of {f:?}");
                    }
                }
            }
            if !out.starts_with(before.as_str()) {
                // The removed tail reaches into `before` only when that longer tail
                // starts a searched form as well (base64 at another alignment, hex):
                // what was removed is still exactly the start of a form.
                let kept = out.strip_suffix(REDACTED).unwrap_or(&out);
                prop_assert!(before.starts_with(kept), "{out:?} changed {before:?}");
                let removed = &text[kept.len()..];
                prop_assert!(
                    r.cut_forms().iter().any(|f| f.starts_with(removed)),
                    "{out:?} removed {removed:?}, which starts no form"
                );
            }
            let bearer = r.redact_cut(&format!("{before} Authorisation was Bearer {}", &secret[..k.min(10)]));
            prop_assert!(bearer.ends_with(REDACTED), "{bearer}");
            // A text that was not cut through anything stays as redact() makes it.
            prop_assert_eq!(r.redact_cut(&format!("{before}{full}.")), r.redact(&format!("{before}{full}.")));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// A text cut at any byte, inside a multi-byte character or not, through a
        /// non-ASCII secret in any form the output guard searches (raw, base64, hex,
        /// percent-encoding, JSON escapes), keeps no prefix of that form once it is read
        /// as UTF-8 and redacted as a cut text.
        #[test]
        fn a_cut_inside_a_character_keeps_no_prefix_of_a_secret(
            before in "[a-z ]{0,12}",
            secret in "[a-z0-9äöüßéñ€日本語😀]{0,6}[äöüßéñ€日本語😀][a-zäöü€日😀]{6,12}",
            form in any::<prop::sample::Index>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let r = redactor(&secret);
            let forms = searched_forms(&secret);
            let full = forms[form.index(forms.len())].clone();
            let body = format!("{before}{full}");
            let k = before.len() + 1 + cut.index(full.len() - 1);
            let out = r.redact_cut(&String::from_utf8_lossy(&body.as_bytes()[..k]));
            let kept = out.trim_end_matches('\u{FFFD}');
            for f in &forms {
                for j in 1..f.len() {
                    if f.is_char_boundary(j) {
                        prop_assert!(!kept.ends_with(&f[..j]), "{out:?} ends in part of {f:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn redacts_secrets_headers_and_params() {
        let r = redactor("s3cr3t/value=");
        let text = "GET http://h/api?query=up&token=abc123&access_key=zz&user=me failed\n\
                    Authorization: Bearer abcdefghijklmnopqrstuvwxyz\n\
                    {\"Cookie\":\"grafana_session=xyz; theme=dark\"}\n\
                    secret in body s3cr3t/value= and encoded s3cr3t%2Fvalue%3D and s3cr3t%2fvalue%3d\n\
                    missing or invalid bearer token; parse error at 1:10";
        let out = r.redact(text);
        for leaked in [
            "abc123",
            "zz",
            "abcdefghijklmnopqrstuvwxyz",
            "xyz",
            "s3cr3t",
        ] {
            assert!(!out.contains(leaked), "{leaked} in {out}");
        }
        assert!(out.contains("query=up"), "{out}");
        assert!(out.contains("user=me"), "{out}");
        assert!(out.contains("token=[REDACTED]"), "{out}");
        assert!(out.contains("Authorization: [REDACTED]"), "{out}");
        assert!(out.contains("\"Cookie\":\"[REDACTED]\""), "{out}");
        assert!(
            out.contains("missing or invalid bearer token; parse error at 1:10"),
            "{out}"
        );
        assert_eq!(format!("{r:?}"), "Redactor { secrets: 1 }");
    }

    #[test]
    fn keeps_promql_label_matchers() {
        let r = Redactor::default();
        let text = r#"found duplicate series for the match group {cluster_id="SaaS02"} on the right hand-side of the operation: [{api_key="x", session="y"}]"#;
        assert_eq!(r.redact(text), text);
    }

    fn embed(secret: &str, how: u8) -> String {
        match how % 6 {
            0 => secret.to_owned(),
            1 => format!(
                "http://h/q?token={}",
                url::form_urlencoded::byte_serialize(secret.as_bytes()).collect::<String>()
            ),
            2 => utf8_percent_encode(secret, NON_ALPHANUMERIC).to_string(),
            3 => serde_json::to_string(secret).unwrap(),
            4 => format!("Cookie: grafana_session={secret}"),
            _ => format!("Authorization: Bearer {secret}"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// No bound secret survives redaction, raw or in its URL/form/JSON encodings,
        /// wherever it sits in the provider text.
        #[test]
        fn bound_secrets_never_survive(
            secret in "[A-Za-z0-9 %&=+/?#:;\"'._~-]{8,40}",
            before in "[a-z :=&?\"{},]{0,40}",
            after in "[a-z :=&?\"{},]{0,40}",
            how in 0u8..6,
        ) {
            let r = redactor(&secret);
            let text = format!("{before}{}{after}", embed(&secret, how));
            let out = r.redact(&text);
            prop_assert!(!out.contains(&secret), "{} in {}", secret, out);
            let form: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
            prop_assert!(!out.contains(&form));
            let percent = utf8_percent_encode(&secret, NON_ALPHANUMERIC).to_string();
            prop_assert!(!out.contains(&percent));
        }
    }
}
