//! The fail-closed output guard.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::fmt;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use base64::Engine as _;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{
    GeneralPurpose, GeneralPurposeConfig, STANDARD_NO_PAD, URL_SAFE_NO_PAD,
};
use evidence_result::{Details, ErrorCode, Failure, FailureClass, Origin, QueryId, ToolResult};
use secrecy::{ExposeSecret, SecretString};
use zeroize::{Zeroize as _, Zeroizing};

use crate::PackageError;
use crate::manifest::MIN_SECRET_BYTES;
use crate::storage_state::{derive_values, jwt_segments};

/// Bounds of one scan. Exceeding a bound is a scan failure, and a scan failure blocks the
/// output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardLimits {
    /// Largest output scanned; a larger one is blocked.
    pub max_output_bytes: usize,
    /// How many times decoded text is decoded again (base64, hex, percent-encoding, JSON
    /// escapes).
    pub max_decode_depth: usize,
    /// Decoded bytes allowed in total, as a multiple of the output size (at least 1 MiB);
    /// more is treated as a decode bomb.
    pub decode_budget_factor: usize,
}

impl Default for GuardLimits {
    fn default() -> Self {
        GuardLimits {
            max_output_bytes: 16 * 1024 * 1024,
            max_decode_depth: 3,
            decode_budget_factor: 8,
        }
    }
}

/// Collects the protected values and builds an [`OutputGuard`].
pub struct GuardBuilder {
    values: Vec<(String, Zeroizing<Vec<u8>>)>,
    limits: GuardLimits,
}

impl fmt::Debug for GuardBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardBuilder")
            .field(
                "values",
                &self.values.iter().map(|(l, _)| l).collect::<Vec<_>>(),
            )
            .field("limits", &self.limits)
            .finish()
    }
}

impl Default for GuardBuilder {
    fn default() -> Self {
        GuardBuilder::new(GuardLimits::default())
    }
}

impl GuardBuilder {
    /// An empty builder with these limits.
    pub fn new(limits: GuardLimits) -> Self {
        GuardBuilder {
            values: Vec::new(),
            limits,
        }
    }

    /// Protects a secret value. A value under 8 bytes cannot be scanned without false
    /// positives and is refused.
    pub fn add_secret(&mut self, name: &str, value: &SecretString) -> Result<(), PackageError> {
        let bytes = value.expose_secret().as_bytes();
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(PackageError::SecretTooShort {
                name: name.to_owned(),
                what: "the value".to_owned(),
                min: MIN_SECRET_BYTES,
            });
        }
        self.push(name.to_owned(), bytes);
        Ok(())
    }

    /// Protects a browser storage state (Playwright `storageState` JSON): every cookie value as stored and percent-decoded, every localStorage value whole and
    /// each string leaf of those that are JSON, and each segment of JWT-looking values.
    /// Any of these under 8 bytes is refused (empty values carry nothing and are skipped).
    pub fn add_storage_state(
        &mut self,
        name: &str,
        state: &SecretString,
    ) -> Result<(), PackageError> {
        let derived = derive_values(name, state.expose_secret())?;
        for d in &derived {
            if d.value.len() < MIN_SECRET_BYTES {
                return Err(PackageError::SecretTooShort {
                    name: name.to_owned(),
                    what: d.what.clone(),
                    min: MIN_SECRET_BYTES,
                });
            }
        }
        for d in derived {
            self.push(format!("{name}: {}", d.what), &d.value);
        }
        Ok(())
    }

    fn push(&mut self, label: String, value: &[u8]) {
        self.values
            .push((label.clone(), Zeroizing::new(value.to_vec())));
        if let Some(segments) = jwt_segments(value) {
            for (i, segment) in segments.into_iter().enumerate() {
                if segment.len() >= MIN_SECRET_BYTES {
                    self.values.push((
                        format!("{label} (JWT segment {})", i + 1),
                        Zeroizing::new(segment.to_vec()),
                    ));
                }
            }
        }
    }

    /// Builds one multi-pattern automaton over every encoding of every value.
    pub fn build(self) -> Result<OutputGuard, PackageError> {
        let mut labels: Vec<String> = Vec::new();
        let mut label_index: HashMap<String, u32> = HashMap::new();
        let mut pattern_index: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut patterns: Vec<Zeroizing<Vec<u8>>> = Vec::new();
        let mut owners: Vec<Vec<u32>> = Vec::new();
        for (label, value) in &self.values {
            let li = match label_index.get(label) {
                Some(i) => *i,
                None => {
                    let i = u32::try_from(labels.len())
                        .map_err(|_| PackageError::Guard("too many values".to_owned()))?;
                    labels.push(label.clone());
                    label_index.insert(label.clone(), i);
                    i
                }
            };
            for mut encoded in encodings(value) {
                // Any occurrence of a long form contains its first MAX_NEEDLE bytes, which
                // are themselves protected material: searching the prefix is enough.
                encoded.truncate(MAX_NEEDLE);
                match pattern_index.get(encoded.as_slice()) {
                    Some(&pi) => {
                        if !owners[pi].contains(&li) {
                            owners[pi].push(li);
                        }
                    }
                    None => {
                        pattern_index.insert(encoded.to_vec(), patterns.len());
                        patterns.push(encoded);
                        owners.push(vec![li]);
                    }
                }
            }
        }
        for (mut key, _) in pattern_index.drain() {
            key.zeroize();
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(patterns.iter().map(|p| p.as_slice()))
            .map_err(|e| PackageError::Guard(e.to_string()))?;
        let prefilter = Prefilter::new(&patterns);
        let secret_names = self
            .values
            .iter()
            .map(|(l, _)| l.split(':').next().unwrap_or(l).to_owned())
            .collect();
        Ok(OutputGuard {
            automaton,
            prefilter,
            owners,
            labels,
            secret_names,
            limits: self.limits,
        })
    }
}

/// Every form in which the output guard searches a value, as text: the needles of its
/// automaton for this value (useful to compare against other search strategies).
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
pub(crate) fn encodings(value: &[u8]) -> Vec<Zeroizing<Vec<u8>>> {
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

fn percent_encode(value: &[u8], keep: &dyn Fn(u8) -> bool, upper: bool, plus: bool) -> Vec<u8> {
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

/// Why an output was blocked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockCause {
    /// A protected value was found, in some encoding.
    SecretFound,
    /// The scan itself failed; the output is blocked rather than passed unscanned.
    ScanFailed(ScanFailure),
}

/// A failure of the scan itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanFailure {
    /// The output is larger than the size cap.
    TooLarge {
        /// The output size.
        bytes: usize,
        /// The cap.
        limit: usize,
    },
    /// Decoding produced more than the decode budget (a decode bomb).
    DecodeBudget {
        /// The budget in bytes.
        limit: usize,
    },
    /// The result could not be serialized for scanning.
    Serialize,
}

impl fmt::Display for ScanFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScanFailure::TooLarge { bytes, limit } => {
                write!(
                    f,
                    "output of {bytes} bytes exceeds the {limit}-byte scan cap"
                )
            }
            ScanFailure::DecodeBudget { limit } => {
                write!(
                    f,
                    "decoding nested encodings exceeded the {limit}-byte budget"
                )
            }
            ScanFailure::Serialize => f.write_str("the result could not be serialized"),
        }
    }
}

/// A blocked output: which secrets (names only) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// Names of the secrets involved: the ones found, or every guarded one when the scan
    /// failed. Storage-state values are named `secret: what` (a cookie or localStorage
    /// name, never a value).
    pub secrets: Vec<String>,
    /// Why.
    pub cause: BlockCause,
}

impl Blocked {
    /// The `detail_error` of the replacement result: names, never values.
    pub fn detail(&self) -> String {
        let names = if self.secrets.is_empty() {
            "none".to_owned()
        } else {
            self.secrets.join(", ")
        };
        match &self.cause {
            BlockCause::SecretFound => format!(
                "the tool output was withheld because it contained a protected value of: {names}"
            ),
            BlockCause::ScanFailed(why) => format!(
                "the tool output was withheld because the secret scan failed ({why}); guarded secrets: {names}"
            ),
        }
    }
}

/// The outcome of a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing protected was found and the scan completed.
    Clean,
    /// The output must not be passed on.
    Blocked(Blocked),
}

impl Verdict {
    /// Whether the output is blocked.
    pub fn is_blocked(&self) -> bool {
        matches!(self, Verdict::Blocked(_))
    }
}

/// The fail-closed output guard: one Aho-Corasick automaton over every encoding of every
/// protected value, plus a bounded decode-and-rescan of base64, hex, percent-encoded and
/// JSON-escaped runs.
///
/// The automaton holds the encoded values in memory for its lifetime (it is not zeroized).
pub struct OutputGuard {
    automaton: AhoCorasick,
    prefilter: Option<Prefilter>,
    owners: Vec<Vec<u32>>,
    labels: Vec<String>,
    secret_names: BTreeSet<String>,
    limits: GuardLimits,
}

impl fmt::Debug for OutputGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputGuard")
            .field("values", &self.labels)
            .field("patterns", &self.automaton.patterns_len())
            .field("limits", &self.limits)
            .finish()
    }
}

const SEPARATOR: u8 = 0;
/// Longest searched form; longer forms are searched by this prefix.
const MAX_NEEDLE: usize = 64;
/// Bytes per sampled block of the prefilter.
const BLOCK: usize = 8;
/// Below this sampling step the prefilter does not pay off and the automaton runs alone.
const MIN_PREFILTER_STEP: usize = 4;
const MIN_BASE64_RUN: usize = 11;
const MIN_HEX_RUN: usize = 2 * MIN_SECRET_BYTES;
const MAX_BLOCKED_NAMES: usize = 16;

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

impl OutputGuard {
    /// A guard that protects nothing but still enforces the size cap.
    pub fn empty(limits: GuardLimits) -> Result<Self, PackageError> {
        GuardBuilder::new(limits).build()
    }

    /// The limits in force.
    pub fn limits(&self) -> GuardLimits {
        self.limits
    }

    /// The names of the protected values (never the values).
    pub fn protected(&self) -> &[String] {
        &self.labels
    }

    /// Scans raw output bytes.
    pub fn scan_bytes(&self, output: &[u8]) -> Verdict {
        if output.len() > self.limits.max_output_bytes {
            return self.failed(ScanFailure::TooLarge {
                bytes: output.len(),
                limit: self.limits.max_output_bytes,
            });
        }
        if self.labels.is_empty() {
            return Verdict::Clean;
        }
        let budget = output
            .len()
            .saturating_mul(self.limits.decode_budget_factor)
            .max(1024 * 1024);
        let mut spent = 0usize;
        let mut level: Cow<'_, [u8]> = Cow::Borrowed(output);
        let mut depth = 0;
        loop {
            if let Some(found) = self.find(&level) {
                return Verdict::Blocked(found);
            }
            if depth >= self.limits.max_decode_depth || level.is_empty() {
                return Verdict::Clean;
            }
            let remaining = budget.saturating_sub(spent);
            match decode_level(&level, remaining) {
                Some(next) => {
                    spent += next.len();
                    level = Cow::Owned(next);
                }
                None => return self.failed(ScanFailure::DecodeBudget { limit: budget }),
            }
            depth += 1;
        }
    }

    /// Scans output text.
    pub fn scan_text(&self, output: &str) -> Verdict {
        self.scan_bytes(output.as_bytes())
    }

    /// Scans a result in its serialized JSON form (which holds `text` and `details`).
    pub fn scan_result(&self, result: &ToolResult) -> Verdict {
        match result.to_json() {
            Ok(json) => self.scan_text(&json),
            Err(_) => self.failed(ScanFailure::Serialize),
        }
    }

    /// Passes a clean result through unchanged and replaces a blocked one, whole, with an
    /// `output_blocked` failure naming the secret. An error here means no result may be
    /// passed on at all.
    pub fn enforce(&self, result: ToolResult) -> Result<ToolResult, PackageError> {
        match self.scan_result(&result) {
            Verdict::Clean => Ok(result),
            Verdict::Blocked(blocked) => {
                let details = result.details();
                let query_id = details
                    .query_id
                    .clone()
                    .filter(|q| !self.scan_text(q.as_str()).is_blocked());
                self.blocked_result(details.origin(), query_id, &blocked)
            }
        }
    }

    /// The `output_blocked` failure that replaces a blocked output. Its own text is
    /// scanned too; if even a name would reveal a protected value, names are left out.
    pub fn blocked_result(
        &self,
        origin: Origin,
        query_id: Option<QueryId>,
        blocked: &Blocked,
    ) -> Result<ToolResult, PackageError> {
        let build = |detail: String| {
            let failure = Failure::new(
                ErrorCode::output_blocked(),
                FailureClass::OutputBlocked,
                detail,
            );
            ToolResult::new(Details::failure(
                origin.clone(),
                query_id.clone(),
                None,
                failure,
            ))
        };
        let named = build(blocked.detail())?;
        if !self.scan_result(&named).is_blocked() {
            return Ok(named);
        }
        let anonymous = Blocked {
            secrets: Vec::new(),
            cause: blocked.cause.clone(),
        };
        Ok(build(anonymous.detail())?)
    }

    fn failed(&self, why: ScanFailure) -> Verdict {
        Verdict::Blocked(Blocked {
            secrets: self.secret_names.iter().cloned().collect(),
            cause: BlockCause::ScanFailed(why),
        })
    }

    fn find(&self, haystack: &[u8]) -> Option<Blocked> {
        let Some(prefilter) = &self.prefilter else {
            return self.find_in(haystack);
        };
        let mut found = None;
        prefilter.candidates(haystack, |range| {
            found = self.find_in(&haystack[range]);
            found.is_none()
        });
        found
    }

    fn find_in(&self, haystack: &[u8]) -> Option<Blocked> {
        let first = self.automaton.find(haystack)?;
        let mut names = BTreeSet::new();
        for m in self.automaton.find_iter(&haystack[first.start()..]) {
            for &owner in &self.owners[m.pattern().as_usize()] {
                if let Some(label) = self.labels.get(owner as usize) {
                    names.insert(label.clone());
                }
            }
            if names.len() >= MAX_BLOCKED_NAMES {
                break;
            }
        }
        Some(Blocked {
            secrets: names.into_iter().collect(),
            cause: BlockCause::SecretFound,
        })
    }
}

/// An exact sampling prefilter in front of the automaton (block hashing in the manner of
/// Wu-Manber). Every searched form is at least `shortest` bytes long, so each occurrence
/// contains an 8-byte block starting within its first `shortest - 7` bytes; sampling the
/// output every `shortest - 7` bytes therefore hits one of those blocks. A set bit for
/// every such block of every form sends the window around each hit sample to the
/// automaton; windows without a hit cannot hold a match. No false negatives; false
/// positives only cost an automaton pass over a short window.
struct Prefilter {
    step: usize,
    span: usize,
    longest: usize,
    shift: u32,
    bits: Vec<u64>,
}

impl Prefilter {
    fn new(patterns: &[Zeroizing<Vec<u8>>]) -> Option<Self> {
        let shortest = patterns.iter().map(|p| p.len()).min()?;
        let longest = patterns.iter().map(|p| p.len()).max()?;
        if shortest < BLOCK + MIN_PREFILTER_STEP - 1 {
            return None;
        }
        let span = shortest - BLOCK;
        let grams = patterns.len() * (span + 1);
        let bit_count = (grams * 256).next_power_of_two().clamp(1 << 16, 1 << 24);
        let shift = 64 - bit_count.trailing_zeros();
        let mut bits = vec![0u64; bit_count / 64];
        let mut filter = Prefilter {
            step: span + 1,
            span,
            longest,
            shift,
            bits: Vec::new(),
        };
        for p in patterns {
            for start in 0..=span {
                let h = filter.hash(block(&p[start..start + BLOCK]));
                bits[h / 64] |= 1 << (h % 64);
            }
        }
        filter.bits = bits;
        Some(filter)
    }

    fn hash(&self, block: u64) -> usize {
        // A full 64-bit mix: text blocks differ in few bits, a single multiply clusters them.
        let mut x = block ^ (block >> 31);
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 29;
        (x.wrapping_mul(0x94D0_49BB_1331_11EB) >> self.shift) as usize
    }

    fn hit(&self, block: u64) -> bool {
        let h = self.hash(block);
        self.bits
            .get(h / 64)
            .is_some_and(|w| w & (1 << (h % 64)) != 0)
    }

    /// Calls `verify` on merged candidate windows, in order, until it returns false.
    fn candidates(&self, haystack: &[u8], mut verify: impl FnMut(std::ops::Range<usize>) -> bool) {
        let n = haystack.len();
        let mut pending: Option<std::ops::Range<usize>> = None;
        let mut q = 0;
        while q + BLOCK <= n {
            if self.hit(block(&haystack[q..q + BLOCK])) {
                let start = q.saturating_sub(self.span);
                let end = (q + self.longest).min(n);
                match &mut pending {
                    Some(r) if start <= r.end => r.end = end,
                    _ => {
                        if let Some(r) = pending.replace(start..end)
                            && !verify(r)
                        {
                            return;
                        }
                    }
                }
            }
            q += self.step;
        }
        if let Some(r) = pending {
            verify(r);
        }
    }
}

fn block(bytes: &[u8]) -> u64 {
    let mut b = [0u8; BLOCK];
    b.copy_from_slice(&bytes[..BLOCK]);
    u64::from_le_bytes(b)
}

/// Decodes every base64, hex and percent-encoded run and every JSON escape of `input` into
/// one buffer (pieces separated by a NUL byte so no run spans two pieces). `None` when the
/// result would exceed `budget` bytes.
fn decode_level(input: &[u8], budget: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::new();
    let append = |piece: &[u8], out: &mut Vec<u8>| -> Option<()> {
        if piece.len() < MIN_SECRET_BYTES {
            return Some(());
        }
        if out.len() + piece.len() + 1 > budget {
            return None;
        }
        out.extend_from_slice(piece);
        out.push(SEPARATOR);
        Some(())
    };
    // Base64 runs (at least MIN_BASE64_RUN characters), and hex runs inside them.
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
                if LENIENT_BASE64
                    .decode_vec(&chars[..usable], &mut decoded)
                    .is_ok()
                {
                    append(&decoded, &mut out)?;
                }
            }
            if run.len() >= MIN_HEX_RUN {
                hex_runs(run, &mut |piece| append(piece, &mut out))?;
            }
        }
        current = next;
        pos += 64;
    }
    // Percent-encoded runs.
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
        append(&piece, &mut out)?;
        if run.contains(&b'+') {
            let spaced: Vec<u8> = run
                .iter()
                .map(|&b| if b == b'+' { b' ' } else { b })
                .collect();
            let piece: Vec<u8> = percent_encoding::percent_decode(&spaced).collect();
            append(&piece, &mut out)?;
        }
        last_end = end;
    }
    // JSON escapes.
    if memchr::memchr(b'\\', input).is_some() {
        let piece = json_unescape(input);
        append(&piece, &mut out)?;
    }
    Some(out)
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

fn hex_runs(run: &[u8], append: &mut dyn FnMut(&[u8]) -> Option<()>) -> Option<()> {
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
                    append(&decoded)?;
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

    fn guard(values: &[(&str, &str)]) -> OutputGuard {
        let mut b = GuardBuilder::default();
        for (name, value) in values {
            b.add_secret(name, &SecretString::from(value.to_string()))
                .unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn base64_cores_are_found_at_every_alignment() {
        let secret = "s3cr3t-Value/+?";
        let g = guard(&[("token", secret)]);
        for prefix in ["", "a", "ab", "abc"] {
            let text = format!("{prefix}{secret}{prefix}");
            for engine in [
                &base64::engine::general_purpose::STANDARD,
                &base64::engine::general_purpose::URL_SAFE,
                &STANDARD_NO_PAD,
                &URL_SAFE_NO_PAD,
            ] {
                let enc = engine.encode(text.as_bytes());
                let out = format!("{{\"v\":\"{enc}\"}}");
                assert!(g.scan_text(&out).is_blocked(), "{prefix:?} {enc}");
            }
        }
    }

    #[test]
    fn json_unescape_handles_surrogates_and_junk() {
        assert_eq!(
            json_unescape(br#"a\"b\\c\u00e9\ud83d\ude00\q\u12"#),
            "a\"b\\cé😀\\q\\u12".as_bytes()
        );
    }

    #[test]
    fn nested_encodings_are_decoded() {
        let secret = "correct horse battery";
        let g = guard(&[("pw", secret)]);
        let hex_then_b64 = base64::engine::general_purpose::STANDARD.encode(hex::encode(secret));
        assert!(g.scan_text(&format!("x={hex_then_b64};")).is_blocked());
        let pct_then_b64 = base64::engine::general_purpose::STANDARD.encode(percent_encode(
            secret.as_bytes(),
            &|b: u8| b.is_ascii_lowercase(),
            true,
            false,
        ));
        assert!(g.scan_text(&format!("glued{pct_then_b64}")).is_blocked());
        let double_json =
            serde_json::to_string(&serde_json::to_string(&format!("\"{secret}\"")).unwrap())
                .unwrap();
        assert!(g.scan_text(&double_json).is_blocked());
        assert!(!g.scan_text("correct horse, battery staple").is_blocked());
    }

    #[test]
    fn limits_fail_closed() {
        let mut b = GuardBuilder::new(GuardLimits {
            max_output_bytes: 64,
            ..GuardLimits::default()
        });
        b.add_secret("k", &SecretString::from("abcdefgh12345678"))
            .unwrap();
        let g = b.build().unwrap();
        let v = g.scan_text(&"x".repeat(65));
        match v {
            Verdict::Blocked(Blocked {
                secrets,
                cause: BlockCause::ScanFailed(ScanFailure::TooLarge { .. }),
            }) => {
                assert_eq!(secrets, vec!["k".to_owned()]);
            }
            other => panic!("{other:?}"),
        }
        assert!(decode_level(&[b'A'; 4096], 100).is_none());
    }

    #[test]
    fn short_values_are_refused() {
        let mut b = GuardBuilder::default();
        let err = b
            .add_secret("pin", &SecretString::from("1234567"))
            .unwrap_err();
        assert!(err.to_string().contains("shorter than 8 bytes"), "{err}");
        assert!(!err.to_string().contains("1234567"));
    }
}
