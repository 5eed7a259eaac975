//! Shared helpers of the output guard tests: every encoding a protected value may take,
//! applied independently of the guard's own encoder, and the generators of secrets and
//! surrounding text.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use evidence_package::{GuardBuilder, OutputGuard, guard::Verdict};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use proptest::prelude::*;
use secrecy::SecretString;
use serde_json::json;

/// Every encoding the issue names, each applied independently of the guard's own encoder.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Encoding {
    Raw,
    /// Base64 of `prefix bytes + value + suffix bytes`: the value sits at any of the three
    /// byte alignments inside longer base64 text.
    Base64 {
        url_safe: bool,
        padded: bool,
    },
    HexLower,
    HexUpper,
    PercentAll,
    PercentNonAlnum,
    PercentComponent,
    PercentLowerHex,
    Json,
    JsonSlash,
    JsonAsciiOnly,
    JsonAllUnicode,
    JsonTwice,
}

pub(crate) const ENCODINGS: [Encoding; 16] = [
    Encoding::Raw,
    Encoding::Base64 {
        url_safe: false,
        padded: true,
    },
    Encoding::Base64 {
        url_safe: false,
        padded: false,
    },
    Encoding::Base64 {
        url_safe: true,
        padded: true,
    },
    Encoding::Base64 {
        url_safe: true,
        padded: false,
    },
    Encoding::HexLower,
    Encoding::HexUpper,
    Encoding::PercentAll,
    Encoding::PercentNonAlnum,
    Encoding::PercentComponent,
    Encoding::PercentLowerHex,
    Encoding::Json,
    Encoding::JsonSlash,
    Encoding::JsonAsciiOnly,
    Encoding::JsonAllUnicode,
    Encoding::JsonTwice,
];

pub(crate) const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

pub(crate) fn json_escape_ascii(s: &str, all: bool) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if !all && c.is_ascii() && c != '"' && c != '\\' && !c.is_ascii_control() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// Embeds `value` in `before`/`after` text using `encoding`.
pub(crate) fn embed(
    value: &[u8],
    encoding: Encoding,
    before: &str,
    after: &str,
    pad_bytes: &[u8],
) -> String {
    let text = || String::from_utf8(value.to_vec()).unwrap();
    let encoded = match encoding {
        Encoding::Raw => text(),
        Encoding::Base64 { url_safe, padded } => {
            let mut bytes = pad_bytes.to_vec();
            bytes.extend_from_slice(value);
            bytes.extend_from_slice(pad_bytes);
            match (url_safe, padded) {
                (false, true) => STANDARD.encode(&bytes),
                (false, false) => STANDARD_NO_PAD.encode(&bytes),
                (true, true) => URL_SAFE.encode(&bytes),
                (true, false) => URL_SAFE_NO_PAD.encode(&bytes),
            }
        }
        Encoding::HexLower => hex::encode(value),
        Encoding::HexUpper => hex::encode_upper(value),
        Encoding::PercentAll => value.iter().map(|b| format!("%{b:02X}")).collect(),
        Encoding::PercentNonAlnum => utf8_percent_encode(&text(), NON_ALPHANUMERIC).to_string(),
        Encoding::PercentComponent => utf8_percent_encode(&text(), COMPONENT).to_string(),
        Encoding::PercentLowerHex => {
            let upper = utf8_percent_encode(&text(), NON_ALPHANUMERIC).to_string();
            let mut out = String::new();
            let mut hex_left = 0;
            for c in upper.chars() {
                if c == '%' {
                    hex_left = 2;
                    out.push(c);
                } else if hex_left > 0 {
                    out.push(c.to_ascii_lowercase());
                    hex_left -= 1;
                } else {
                    out.push(c);
                }
            }
            out
        }
        Encoding::Json => {
            let q = serde_json::to_string(&text()).unwrap();
            q[1..q.len() - 1].to_owned()
        }
        Encoding::JsonSlash => {
            let q = serde_json::to_string(&text()).unwrap();
            q[1..q.len() - 1].replace('/', "\\/")
        }
        Encoding::JsonAsciiOnly => json_escape_ascii(&text(), false),
        Encoding::JsonAllUnicode => json_escape_ascii(&text(), true),
        Encoding::JsonTwice => {
            let once = serde_json::to_string(&json!({"v": text()})).unwrap();
            serde_json::to_string(&once).unwrap()
        }
    };
    format!("{before}{encoded}{after}")
}

pub(crate) fn guard_for(values: &[(String, String)]) -> OutputGuard {
    let mut b = GuardBuilder::default();
    for (name, value) in values {
        b.add_secret(name, &SecretString::from(value.clone()))
            .unwrap();
    }
    b.build().unwrap()
}

pub(crate) fn blocked_names(v: &Verdict) -> Vec<String> {
    match v {
        Verdict::Blocked(b) => b.secrets.clone(),
        Verdict::Clean => Vec::new(),
    }
}

/// Secret values: printable text with unicode, punctuation and spaces, 8 to 40 bytes.
pub(crate) fn secret_value() -> impl Strategy<Value = String> {
    "[A-Za-z0-9 !#$%&()*+,./:;<=>?@\\[\\]^_`{|}~'\"\\\\éü€日本😀-]{8,24}"
        .prop_filter("at least 8 bytes", |s| s.len() >= 8)
}

/// Surrounding text: anything printable, including quotes, backslashes and percent signs.
pub(crate) fn filler() -> impl Strategy<Value = String> {
    "[ -~]{0,40}"
}
