//! The searched forms of a protected value: every encoding in which the guard's automaton
//! looks for it (raw, base64 at each alignment, hex, percent-encoding, JSON escaping).

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use zeroize::Zeroizing;

/// Every form in which the output guard searches a value, as text: the needles of its
/// automaton for this value (a redactor of cut text removes a tail that starts any of
/// them; also useful to compare against other search strategies).
pub fn searched_forms(value: &str) -> Vec<String> {
    encodings(value.as_bytes())
        .iter()
        .filter_map(|e| String::from_utf8(e.to_vec()).ok())
        .collect()
}

/// Every form in which a value is searched: raw; base64 (standard and URL-safe) at each of
/// the three byte alignments, as the part of the encoding that does not depend on the
/// neighbouring bytes, so padded, unpadded and embedded encodings all contain it; lower
/// and upper hex; percent-encoding of every byte, of non-alphanumeric bytes and of
/// non-unreserved bytes, with upper- and lower-case hex; JSON string escaping as
/// `serde_json` writes it, with `\/`, with non-ASCII as `\uXXXX`, and with every character
/// as `\uXXXX`.
pub(super) fn encodings(value: &[u8]) -> Vec<Zeroizing<Vec<u8>>> {
    let mut out: Vec<Zeroizing<Vec<u8>>> = Vec::new();
    let mut push = |v: Vec<u8>| {
        let v = Zeroizing::new(v);
        if !v.is_empty() && !out.contains(&v) {
            out.push(v);
        }
    };
    push(value.to_vec());
    let n = value.len();
    for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        for k in 0..3usize {
            let mut shifted = Zeroizing::new(vec![0u8; k]);
            shifted.extend_from_slice(value);
            let encoded = Zeroizing::new(engine.encode(shifted.as_slice()));
            let start = (8 * k).div_ceil(6);
            let end = (8 * (k + n)) / 6;
            if let Some(core) = encoded.as_bytes().get(start..end) {
                push(core.to_vec());
            }
        }
    }
    push(hex::encode(value).into_bytes());
    push(hex::encode_upper(value).into_bytes());
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    let uri_component = |b: u8| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.' | b'_' | b'~' | b'!' | b'*' | b'\'' | b'(' | b')'
            )
    };
    let nothing = |_: u8| false;
    for keep in [
        &alnum as &dyn Fn(u8) -> bool,
        &unreserved,
        &uri_component,
        &nothing,
    ] {
        for upper in [true, false] {
            push(percent_encode(value, keep, upper, false));
        }
        if value.contains(&b' ') {
            push(percent_encode(value, keep, true, true));
        }
    }
    if let Ok(text) = std::str::from_utf8(value) {
        if let Ok(quoted) = serde_json::to_string(text) {
            let inner = quoted
                .get(1..quoted.len().saturating_sub(1))
                .unwrap_or_default()
                .to_owned();
            push(inner.replace('/', "\\/").into_bytes());
            for upper in [false, true] {
                push(unicode_escape(&inner, upper, false));
            }
            push(inner.into_bytes());
        }
        for upper in [false, true] {
            push(unicode_escape(text, upper, true));
        }
    }
    out
}

pub(super) fn percent_encode(
    value: &[u8],
    keep: &dyn Fn(u8) -> bool,
    upper: bool,
    plus: bool,
) -> Vec<u8> {
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut out = Vec::with_capacity(value.len() * 3);
    for &b in value {
        if plus && b == b' ' {
            out.push(b'+');
        } else if keep(b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[
                b'%',
                digits[usize::from(b >> 4)],
                digits[usize::from(b & 15)],
            ]);
        }
    }
    out
}

/// Writes `\uXXXX` for every non-ASCII character (`all == false`, applied to an already
/// escaped string) or for every character (`all == true`, applied to the raw text).
fn unicode_escape(text: &str, upper: bool, all: bool) -> Vec<u8> {
    let mut out = String::with_capacity(text.len() * 6);
    for c in text.chars() {
        if !all && c.is_ascii() {
            out.push(c);
            continue;
        }
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            if upper {
                out.push_str(&format!("\\u{unit:04X}"));
            } else {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out.into_bytes()
}
