//! The decoders of the decode-and-rescan pass: one level of decoding of every base64,
//! hex and percent-encoded run and every JSON escape of a text, within a byte budget.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};

use crate::manifest::MIN_SECRET_BYTES;

/// Separates decoded pieces, so that no run spans two of them.
const SEPARATOR: u8 = 0;
const MIN_BASE64_RUN: usize = 11;
const MIN_HEX_RUN: usize = 2 * MIN_SECRET_BYTES;

static BASE64_CLASS: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'-' || b == b'_';
        i += 1;
    }
    t
};

static URL_CLASS: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'@'
                    | b'/'
                    | b'?'
                    | b'#'
                    | b'['
                    | b']'
                    | b'%'
            );
        i += 1;
    }
    t
};

const LENIENT_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Decodes every base64, hex and percent-encoded run and every JSON escape of `input` into
/// one buffer (pieces separated by a NUL byte so no run spans two pieces). `None` when the
/// result would exceed `budget` bytes.
pub(super) fn decode_level(input: &[u8], budget: usize) -> Option<Vec<u8>> {
    let mut sink = Sink {
        out: Vec::new(),
        budget,
    };
    decode_base64_runs(input, &mut sink)?;
    decode_percent_runs(input, &mut sink)?;
    decode_json_escapes(input, &mut sink)?;
    Some(sink.out)
}

/// The buffer decoded pieces go to, within the decode budget.
struct Sink {
    out: Vec<u8>,
    budget: usize,
}

impl Sink {
    /// Appends one decoded piece and a separator; pieces too short to hold a protected
    /// value are dropped. `None` when the budget would be exceeded.
    fn append(&mut self, piece: &[u8]) -> Option<()> {
        if piece.len() < MIN_SECRET_BYTES {
            return Some(());
        }
        if self.out.len() + piece.len() + 1 > self.budget {
            return None;
        }
        self.out.extend_from_slice(piece);
        self.out.push(SEPARATOR);
        Some(())
    }
}

/// Base64 runs (at least `MIN_BASE64_RUN` characters, either alphabet), and hex runs
/// inside them. Run starts are found 64 bytes at a time from class bit masks.
fn decode_base64_runs(input: &[u8], sink: &mut Sink) -> Option<()> {
    let n = input.len();
    let mut scratch: Vec<u8> = Vec::new();
    let mut decoded: Vec<u8> = Vec::new();
    let mut skip_until = 0usize;
    let mut pos = 0usize;
    let mut current = class_mask(input, 0);
    while pos < n {
        let next = class_mask(input, pos + 64);
        // Bit i: a run of at least MIN_BASE64_RUN class bytes starts at pos + i.
        let mut starts =
            current & shifted(current, next, 5) & shifted(current, next, MIN_BASE64_RUN - 1);
        if starts != 0 {
            for k in 1..MIN_BASE64_RUN - 1 {
                starts &= shifted(current, next, k);
            }
        }
        while starts != 0 {
            let start = pos + starts.trailing_zeros() as usize;
            starts &= starts - 1;
            if start < skip_until {
                continue;
            }
            let mut end = start + MIN_BASE64_RUN;
            while end < n && BASE64_CLASS[usize::from(input[end])] {
                end += 1;
            }
            skip_until = end;
            let run = &input[start..end];
            decode_base64_run(run, &mut scratch, &mut decoded, sink)?;
            if run.len() >= MIN_HEX_RUN {
                hex_runs(run, sink)?;
            }
        }
        current = next;
        pos += 64;
    }
    Some(())
}

/// Decodes one base64 run at each of its four character offsets, URL-safe characters
/// read as standard ones.
fn decode_base64_run(
    run: &[u8],
    scratch: &mut Vec<u8>,
    decoded: &mut Vec<u8>,
    sink: &mut Sink,
) -> Option<()> {
    scratch.clear();
    scratch.extend(run.iter().map(|&b| match b {
        b'-' => b'+',
        b'_' => b'/',
        b => b,
    }));
    for offset in 0..4 {
        let Some(chars) = scratch.get(offset..) else {
            break;
        };
        let usable = if chars.len() % 4 == 1 {
            chars.len() - 1
        } else {
            chars.len()
        };
        if usable < MIN_BASE64_RUN {
            break;
        }
        decoded.clear();
        if LENIENT_BASE64.decode_vec(&chars[..usable], decoded).is_ok() {
            sink.append(decoded)?;
        }
    }
    Some(())
}

/// Percent-encoded runs: URL characters around each `%XX` escape, decoded as they are
/// and, when they hold a `+`, with `+` read as a space.
fn decode_percent_runs(input: &[u8], sink: &mut Sink) -> Option<()> {
    let n = input.len();
    let mut last_end = 0;
    for pos in memchr::memchr_iter(b'%', input) {
        if pos < last_end || !is_pct_escape(input, pos) {
            continue;
        }
        let mut start = pos;
        while start > last_end && URL_CLASS[usize::from(input[start - 1])] {
            start -= 1;
        }
        let mut end = pos;
        while end < n && URL_CLASS[usize::from(input[end])] {
            end += 1;
        }
        let run = &input[start..end];
        let piece: Vec<u8> = percent_encoding::percent_decode(run).collect();
        sink.append(&piece)?;
        if run.contains(&b'+') {
            let spaced: Vec<u8> = run
                .iter()
                .map(|&b| if b == b'+' { b' ' } else { b })
                .collect();
            let piece: Vec<u8> = percent_encoding::percent_decode(&spaced).collect();
            sink.append(&piece)?;
        }
        last_end = end;
    }
    Some(())
}

/// JSON escapes, undone over the whole input when it holds a backslash.
fn decode_json_escapes(input: &[u8], sink: &mut Sink) -> Option<()> {
    if memchr::memchr(b'\\', input).is_some() {
        let piece = json_unescape(input);
        sink.append(&piece)?;
    }
    Some(())
}

/// Bit i set when byte `from + i` is a base64 character (either alphabet); bytes past the
/// end count as not. Written so the compiler vectorizes the byte test.
fn class_mask(input: &[u8], from: usize) -> u64 {
    match input.get(from..from.saturating_add(64)) {
        Some(full) => {
            let mut chunk = [0u8; 64];
            chunk.copy_from_slice(full);
            chunk_mask(&chunk)
        }
        None => {
            let mut chunk = [0u8; 64];
            if let Some(rest) = input.get(from..) {
                chunk[..rest.len()].copy_from_slice(rest);
            }
            chunk_mask(&chunk)
        }
    }
}

#[inline(always)]
fn chunk_mask(chunk: &[u8; 64]) -> u64 {
    let mut flags = [0u8; 64];
    for (flag, &b) in flags.iter_mut().zip(chunk.iter()) {
        let member = (b.wrapping_sub(b'0') < 10)
            | ((b | 0x20).wrapping_sub(b'a') < 26)
            | (b == b'+')
            | (b == b'/')
            | (b == b'-')
            | (b == b'_');
        *flag = u8::from(member);
    }
    let mut mask = 0u64;
    for (w, word) in flags.chunks_exact(8).enumerate() {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        // Each byte is 0 or 1: the multiply gathers bit 0 of every byte into the top byte.
        let packed = u64::from_le_bytes(bytes).wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask |= packed << (w * 8);
    }
    mask
}

/// Bits `k..` of `current` followed by the low bits of `next`.
fn shifted(current: u64, next: u64, k: usize) -> u64 {
    (current >> k) | (next << (64 - k))
}

fn is_pct_escape(input: &[u8], pos: usize) -> bool {
    matches!(
        (input.get(pos + 1), input.get(pos + 2)),
        (Some(a), Some(b)) if a.is_ascii_hexdigit() && b.is_ascii_hexdigit()
    )
}

/// Hex runs (at least `MIN_HEX_RUN` digits) inside a base64 run, decoded at both digit
/// offsets.
fn hex_runs(run: &[u8], sink: &mut Sink) -> Option<()> {
    let mut i = 0;
    let mut decoded = Vec::new();
    while i < run.len() {
        while i < run.len() && !run[i].is_ascii_hexdigit() {
            i += 1;
        }
        let start = i;
        while i < run.len() && run[i].is_ascii_hexdigit() {
            i += 1;
        }
        let hex_run = &run[start..i];
        if hex_run.len() >= MIN_HEX_RUN {
            for offset in 0..2 {
                let chars = &hex_run[offset..];
                let even = chars.len() & !1;
                decoded.clear();
                decoded.resize(even / 2, 0);
                if hex::decode_to_slice(&chars[..even], &mut decoded).is_ok() {
                    sink.append(&decoded)?;
                }
            }
        }
    }
    Some(())
}

/// Undoes JSON string escapes wherever they appear (lenient: anything that is not a valid
/// escape is kept as it is).
fn json_unescape(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let Some(p) = memchr::memchr(b'\\', &input[i..]) else {
            out.extend_from_slice(&input[i..]);
            break;
        };
        out.extend_from_slice(&input[i..i + p]);
        i += p;
        let simple = match input.get(i + 1) {
            Some(b'"') => Some(b'"'),
            Some(b'\\') => Some(b'\\'),
            Some(b'/') => Some(b'/'),
            Some(b'b') => Some(0x08),
            Some(b'f') => Some(0x0c),
            Some(b'n') => Some(b'\n'),
            Some(b'r') => Some(b'\r'),
            Some(b't') => Some(b'\t'),
            _ => None,
        };
        if let Some(b) = simple {
            out.push(b);
            i += 2;
            continue;
        }
        if let Some(unit) = hex4(input, i) {
            let mut consumed = 6;
            let c = if (0xD800..0xDC00).contains(&unit) {
                match hex4(input, i + 6) {
                    Some(low) if (0xDC00..0xE000).contains(&low) => {
                        consumed = 12;
                        char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
                    }
                    _ => None,
                }
            } else {
                char::from_u32(unit)
            };
            match c {
                Some(c) => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    i += consumed;
                }
                None => {
                    out.push(b'\\');
                    i += 1;
                }
            }
            continue;
        }
        out.push(b'\\');
        i += 1;
    }
    out
}

/// The code unit of a `\uXXXX` escape at `at`.
fn hex4(input: &[u8], at: usize) -> Option<u32> {
    if input.get(at) != Some(&b'\\') || input.get(at + 1) != Some(&b'u') {
        return None;
    }
    let digits = input.get(at + 2..at + 6)?;
    let text = std::str::from_utf8(digits).ok()?;
    if !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_unescape_handles_surrogates_and_junk() {
        assert_eq!(
            json_unescape(br#"a\"b\\c\u00e9\ud83d\ude00\q\u12"#),
            "a\"b\\cé😀\\q\\u12".as_bytes()
        );
    }

    #[test]
    fn a_decode_past_the_budget_fails() {
        assert!(decode_level(&[b'A'; 4096], 100).is_none());
    }
}
