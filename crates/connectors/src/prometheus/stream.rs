//! Streaming compaction: a Prometheus `query_range` body is read chunk by chunk as it
//! arrives and folded into the result-level fold (`summary.rs`) without holding the body
//! or its points.
//!
//! A small structural scanner walks the envelope byte by byte. Everything outside the
//! elements of `data.result` (status, `resultType`, `errorType`, `error`, `warnings`)
//! is copied into a *skeleton*, the body with its series left out (`"result":[]`),
//! which is parsed with the typed envelope parser of `parse.rs` at the end. Each element
//! of `data.result` is parsed on its own with serde straight from the received bytes
//! (a series split across chunks is kept until it is complete) and folded at once: its
//! points go into a [`SeriesFold`](evidence_result::series::SeriesFold) as they are read. The
//! original body is valid JSON exactly when the skeleton and every element are, with
//! the commas between elements where the scanner checks them, so the path accepts the
//! bodies the typed path accepts and folds the same points in the same order.
//!
//! What is held at once is bounded by [`MAX_HELD_BYTES`] (one series, or the skeleton)
//! plus one received chunk; the fold holds one peak per series up to
//! [`MAX_TRACKED_SERIES`](super::summary::MAX_TRACKED_SERIES) and about 2k digests.

use std::borrow::Cow;

use super::census::CensusKind;
use super::parse::{
    ResponseStatus, SeriesDigest, StreamedSeries, classify, error_before_end, parse_with,
};
use super::summary::{FoldSummary, ResultFold};
use crate::ConnectorError;

/// The most bytes held at once for one part of a streamed answer: one series of
/// `data.result` while it arrives, or the envelope without its series (status, error
/// text, warnings). 16 MiB, the former cap on a whole body; a series of 11,000 points
/// takes about 330 KB.
pub const MAX_HELD_BYTES: usize = 16 << 20;

/// A streamed answer once its last byte was read.
#[derive(Debug)]
pub(crate) struct Streamed {
    /// The envelope's `status`.
    pub(crate) status: ResponseStatus,
    /// Prometheus' `errorType`.
    pub(crate) error_type: Option<String>,
    /// Prometheus' `error` text.
    pub(crate) error: Option<String>,
    /// Prometheus' `warnings`.
    pub(crate) warnings: Vec<Cow<'static, str>>,
    /// The fold over every series of `data.result`.
    pub(crate) summary: FoldSummary<'static>,
}

/// Which key a container was opened under, or its current key (only the two keys on the
/// way to `data.result` matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Data,
    Result,
    Other,
}

/// One open object or array of the skeleton.
#[derive(Debug, Clone, Copy)]
struct Frame {
    object: bool,
    /// In an object: the next string is a key.
    expect_key: bool,
    /// In an object: the key whose value comes next (or is being read).
    key: Key,
    /// The key of the parent object this container is the value of.
    under: Key,
}

/// Where the scanner is between the elements of `data.result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Between {
    /// Right after `[`: an element or `]`.
    Open,
    /// After an element: `,` or `]`.
    Element,
    /// After `,`: an element.
    Comma,
}

/// A string being scanned in the skeleton.
#[derive(Debug, Clone, Copy)]
struct InString {
    key: bool,
    escape: bool,
}

/// The incremental parser and fold of one answer.
#[derive(Debug)]
pub(crate) struct StreamCompactor {
    fold: ResultFold<'static>,
    stack: Vec<Frame>,
    string: Option<InString>,
    key: Vec<u8>,
    result: Option<Between>,
    skeleton: Vec<u8>,
    /// Received bytes not consumed yet: the start of a series still arriving.
    pending: Vec<u8>,
    /// Parse `pending` again once it holds at least this many bytes (doubling keeps
    /// the work on a series split over many small chunks linear).
    retry_at: usize,
    /// Bytes consumed before `pending` (for error positions).
    offset: usize,
    /// The length of the last series read: a series that starts with fewer bytes left
    /// in the chunk is not tried before more arrive (it would most likely stop at the
    /// chunk's end and be parsed twice).
    expected: usize,
}

impl StreamCompactor {
    /// A parser whose fold keeps the `top_k` highest peaks.
    #[cfg(test)]
    pub(crate) fn new(top_k: u32) -> Self {
        Self::with_census(top_k, None)
    }

    /// A parser whose fold keeps the `top_k` highest peaks and takes a census of `census`.
    pub(crate) fn with_census(top_k: u32, census: Option<CensusKind>) -> Self {
        StreamCompactor {
            fold: ResultFold::new(top_k).with_census(census),
            stack: Vec::new(),
            string: None,
            key: Vec::new(),
            result: None,
            skeleton: Vec::new(),
            pending: Vec::new(),
            retry_at: 0,
            offset: 0,
            expected: 0,
        }
    }

    /// Reads the next chunk of the body.
    ///
    /// Errors: [`ConnectorError::NotJson`] or [`ConnectorError::InvalidResponse`] as soon
    /// as the bytes read so far cannot be a `query_range` answer (as the typed parser
    /// classifies them), [`ConnectorError::PartTooLarge`] when one series or the envelope
    /// grows past [`MAX_HELD_BYTES`].
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<(), ConnectorError> {
        if self.pending.is_empty() {
            let used = self.process(chunk, false)?;
            self.offset += used;
            self.pending.extend_from_slice(&chunk[used..]);
            self.retry_at = self.pending.len().saturating_mul(2);
        } else {
            self.pending.extend_from_slice(chunk);
            // Past the bound, parse once more before refusing: what is pending may be
            // complete series (the doubling step can lie beyond the bound after a long
            // series), and only a part that is still incomplete is too large.
            if self.pending.len() >= self.retry_at || self.pending.len() > MAX_HELD_BYTES {
                self.retry(false)?;
            }
        }
        if self.pending.len() > MAX_HELD_BYTES {
            return Err(ConnectorError::PartTooLarge {
                limit: MAX_HELD_BYTES,
            });
        }
        Ok(())
    }

    /// Reads a complete body at once (no copy of it is made).
    pub(crate) fn complete(mut self, body: &[u8]) -> Result<Streamed, ConnectorError> {
        let used = self.process(body, true)?;
        self.offset += used;
        self.finish()
    }

    /// Ends the body: what is still pending must now be complete, and the skeleton must
    /// be a `query_range` envelope.
    pub(crate) fn finish(mut self) -> Result<Streamed, ConnectorError> {
        if !self.pending.is_empty() {
            self.retry(true)?;
        }
        let parsed = parse_with::<SeriesDigest<'_>>(&self.skeleton)?;
        Ok(Streamed {
            status: parsed.status,
            error_type: parsed.error_type.map(Cow::into_owned),
            error: parsed.error.map(Cow::into_owned),
            warnings: parsed
                .warnings
                .into_iter()
                .map(|w| Cow::Owned(w.into_owned()))
                .collect(),
            summary: self.fold.finish(),
        })
    }

    fn retry(&mut self, last: bool) -> Result<(), ConnectorError> {
        let pending = std::mem::take(&mut self.pending);
        let used = self.process(&pending, last)?;
        self.offset += used;
        self.pending = pending;
        self.pending.drain(..used);
        self.retry_at = self.pending.len().saturating_mul(2);
        Ok(())
    }

    /// Scans `bytes` and returns how many were consumed; the rest is the start of a
    /// series that is not complete yet (never when `last`).
    fn process(&mut self, bytes: &[u8], last: bool) -> Result<usize, ConnectorError> {
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            let Some(between) = self.result else {
                self.skeleton.push(b);
                self.scan(b);
                i += 1;
                continue;
            };
            match (b, between) {
                (b' ' | b'\t' | b'\n' | b'\r', _) => i += 1,
                (b']', Between::Open | Between::Element) => {
                    self.result = None;
                    self.skeleton.push(b']');
                    self.scan(b']');
                    i += 1;
                }
                (b',', Between::Element) => {
                    self.result = Some(Between::Comma);
                    i += 1;
                }
                (_, Between::Element) | (b']' | b',', _) => {
                    return Err(self.earlier(ConnectorError::NotJson(format!(
                        "unexpected {:?} between the series of data.result at byte {}",
                        char::from(b),
                        self.offset + i
                    ))));
                }
                _ if !last && bytes.len() - i < self.expected => return Ok(i),
                _ => match self.element(&bytes[i..], last)? {
                    Some(len) => {
                        i += len;
                        self.result = Some(Between::Element);
                    }
                    None => return Ok(i),
                },
            }
        }
        if self.skeleton.len() > MAX_HELD_BYTES {
            return Err(ConnectorError::PartTooLarge {
                limit: MAX_HELD_BYTES,
            });
        }
        Ok(i)
    }

    /// Parses one element of `data.result` from the start of `bytes` and folds it.
    /// `None` when the bytes end before the element does (and more will come).
    fn element(&mut self, bytes: &[u8], last: bool) -> Result<Option<usize>, ConnectorError> {
        let mut values =
            serde_json::Deserializer::from_slice(bytes).into_iter::<StreamedSeries<'_>>();
        match values.next() {
            Some(Ok(StreamedSeries(series))) => {
                let len = values.byte_offset();
                self.expected = len;
                self.fold.push(series.into_owned());
                Ok(Some(len))
            }
            Some(Err(e)) if !last && (e.is_eof() || reaches_end(bytes, &e)) => Ok(None),
            Some(Err(e)) => Err(self.earlier(classify(e))),
            None if !last => Ok(None),
            None => Err(self.earlier(ConnectorError::NotJson(
                "EOF while parsing the series of data.result".to_owned(),
            ))),
        }
    }

    /// The error to report for `e`, found inside `data.result`: an error in the
    /// envelope before it, when there is one, since the typed parser reports the first
    /// error of the body.
    fn earlier(&self, e: ConnectorError) -> ConnectorError {
        error_before_end(&self.skeleton).unwrap_or(e)
    }

    /// Advances the structural state by one skeleton byte.
    fn scan(&mut self, b: u8) {
        if let Some(s) = &mut self.string {
            if s.escape {
                s.escape = false;
            } else if b == b'\\' {
                s.escape = true;
            } else if b == b'"' {
                let key = s.key;
                self.string = None;
                if key {
                    let name = key_name(&self.key);
                    if let Some(top) = self.stack.last_mut() {
                        top.key = name;
                    }
                }
                return;
            }
            if s.key && self.stack.len() <= 2 && self.key.len() < 64 {
                self.key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                let key = self.stack.last().is_some_and(|f| f.object && f.expect_key);
                self.key.clear();
                self.string = Some(InString { key, escape: false });
            }
            b'{' | b'[' => {
                let under = match self.stack.last() {
                    Some(f) if f.object && !f.expect_key => f.key,
                    _ => Key::Other,
                };
                if b == b'['
                    && let [root, data] = self.stack.as_slice()
                    && root.object
                    && data.object
                    && data.under == Key::Data
                    && under == Key::Result
                {
                    self.result = Some(Between::Open);
                }
                self.stack.push(Frame {
                    object: b == b'{',
                    expect_key: b == b'{',
                    key: Key::Other,
                    under,
                });
            }
            b'}' | b']' => {
                self.stack.pop();
            }
            b':' => {
                if let Some(f) = self.stack.last_mut()
                    && f.object
                {
                    f.expect_key = false;
                }
            }
            b',' => {
                if let Some(f) = self.stack.last_mut()
                    && f.object
                {
                    f.expect_key = true;
                    f.key = Key::Other;
                }
            }
            _ => {}
        }
    }
}

/// True when the error `e` of parsing `bytes` was found at their last byte: a token the
/// bytes cut off (serde_json calls `1700000000.` an invalid number, not an early end,
/// where it skips a value), so more bytes may make it whole. An error before the last
/// byte stays an error, so waiting never holds more than the element being read.
fn reaches_end(bytes: &[u8], e: &serde_json::Error) -> bool {
    // serde_json counts lines and columns from 1; the column is the erring byte's.
    let line_start = match e.line() {
        0 | 1 => 0,
        line => bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(line - 2)
            .map_or(0, |(i, _)| i + 1),
    };
    line_start + e.column() >= bytes.len()
}

/// Which of the two keys that matter a raw key (the bytes between its quotes) is.
fn key_name(raw: &[u8]) -> Key {
    let decoded: Cow<'_, [u8]> = if raw.contains(&b'\\') {
        let mut quoted = Vec::with_capacity(raw.len() + 2);
        quoted.push(b'"');
        quoted.extend_from_slice(raw);
        quoted.push(b'"');
        match serde_json::from_slice::<String>(&quoted) {
            Ok(s) => Cow::Owned(s.into_bytes()),
            Err(_) => return Key::Other,
        }
    } else {
        Cow::Borrowed(raw)
    };
    match &*decoded {
        b"data" => Key::Data,
        b"result" => Key::Result,
        _ => Key::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prometheus::mapping::{RETAINED_BODY_BYTES, ResponseMapper};
    use crate::prometheus::parse::QueryRangeResponse;
    use crate::prometheus::{Compaction, KeepLabels};
    use crate::prometheus::{REDACTED, RawResponse, Redactor};
    use evidence_result::{Evidence, Failure, Provider};
    use proptest::prelude::*;

    /// Today's typed compaction of a whole body (the reference).
    fn typed(body: &[u8], top_k: u32) -> Result<Evidence, ConnectorError> {
        let response = QueryRangeResponse::parse(body)?;
        if response.status != ResponseStatus::Success {
            return Err(ConnectorError::InvalidResponse("error envelope".into()));
        }
        Compaction::new(top_k).compact(response, &KeepLabels)
    }

    /// The streaming parser fed `body` in pieces cut at `cuts`.
    fn streamed(body: &[u8], cuts: &[usize], top_k: u32) -> Result<Evidence, ConnectorError> {
        let mut parser = StreamCompactor::new(top_k);
        let mut at = 0;
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
        cuts.sort_unstable();
        for cut in cuts.into_iter().chain([body.len()]) {
            parser.feed(&body[at..cut])?;
            at = cut;
        }
        let s = parser.finish()?;
        if s.status != ResponseStatus::Success {
            return Err(ConnectorError::InvalidResponse("error envelope".into()));
        }
        Compaction::new(top_k).evidence(s.summary, &s.warnings, &KeepLabels)
    }

    fn kind(r: &Result<Evidence, ConnectorError>) -> &'static str {
        match r {
            Ok(_) => "ok",
            Err(ConnectorError::NotJson(_)) => "not_json",
            Err(ConnectorError::InvalidResponse(_)) => "invalid",
            Err(_) => "other",
        }
    }

    /// JSON whitespace, sometimes none.
    fn ws() -> impl Strategy<Value = String> {
        prop_oneof![4 => Just(String::new()), 1 => "[ \t\r\n]{1,3}"]
    }

    fn label_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9_.:-]{0,12}",
            Just("q\\\"uote".to_owned()),
            Just("caf\\u00e9 ]},[{".to_owned()),
            Just("back\\\\slash".to_owned()),
        ]
    }

    fn sample() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => (-1e6f64..1e6).prop_map(|v| v.to_string()),
            1 => Just("NaN".to_owned()),
            1 => Just("+Inf".to_owned()),
            1 => Just("-Inf".to_owned()),
            1 => Just("1e3".to_owned()),
        ]
    }

    /// One series object: labels, points, sometimes an extra key, keys in either order.
    fn series() -> impl Strategy<Value = String> {
        (
            prop::collection::vec((label_text(), label_text()), 0..4),
            prop::collection::vec((0u32..4000, sample()), 0..12),
            any::<bool>(),
            any::<bool>(),
            ws(),
        )
            .prop_map(|(labels, points, extra, values_first, w)| {
                let metric = labels
                    .iter()
                    .enumerate()
                    .map(|(i, (k, v))| format!("\"{k}{i}\":{w}\"{v}\""))
                    .collect::<Vec<_>>()
                    .join(",");
                let values = points
                    .iter()
                    .map(|(t, v)| format!("[{}.5,{w}\"{v}\"]", 1_700_000_000 + u64::from(*t) * 15))
                    .collect::<Vec<_>>()
                    .join(&format!(",{w}"));
                let metric = format!("\"metric\":{w}{{{metric}}}");
                let values = format!("\"values\":{w}[{values}]");
                let mut parts = if values_first {
                    vec![values, metric]
                } else {
                    vec![metric, values]
                };
                if extra {
                    parts.insert(1, "\"histograms\":[[1,{\"count\":\"2\",\"buckets\":[[0,\"1\",\"2\",\"3\"]]}]]".to_owned());
                }
                format!("{{{w}{}{w}}}", parts.join(&format!("{w},{w}")))
            })
    }

    /// A whole answer: status before or after data, warnings or not, any whitespace.
    fn body() -> impl Strategy<Value = String> {
        (
            prop::collection::vec(series(), 0..14),
            any::<bool>(),
            prop::option::of(prop::collection::vec("[a-z ]{0,10}", 0..3)),
            ws(),
            prop_oneof![8 => Just("matrix"), 1 => Just("vector")],
            prop_oneof![8 => Just("success"), 1 => Just("error"), 1 => Just("maybe")],
        )
            .prop_map(|(series, status_last, warnings, w, kind, status)| {
                let data = format!(
                    "\"data\":{w}{{\"resultType\":{w}\"{kind}\",{w}\"result\":{w}[{w}{}{w}]}}",
                    series.join(&format!("{w},{w}"))
                );
                let status = format!("\"status\":{w}\"{status}\"");
                let mut parts = if status_last {
                    vec![data, status]
                } else {
                    vec![status, data]
                };
                if let Some(w) = warnings {
                    parts.push(format!(
                        "\"warnings\":[{}]",
                        w.iter()
                            .map(|s| format!("\"{s}\""))
                            .collect::<Vec<_>>()
                            .join(",")
                    ));
                }
                format!("{w}{{{}}}{w}", parts.join(","))
            })
    }

    /// A body broken the ways a provider or a network breaks one.
    fn broken() -> impl Strategy<Value = Vec<u8>> {
        (body(), any::<prop::sample::Index>(), 0u8..8, any::<u8>()).prop_map(
            |(b, at, how, byte)| {
                let mut b = b.into_bytes();
                let i = at.index(b.len().max(1)).min(b.len());
                match how {
                    // Truncated anywhere: the body ends early.
                    0 | 1 => b.truncate(i),
                    // One byte replaced by a structural or arbitrary byte.
                    2 => {
                        if i < b.len() {
                            b[i] = *[b'{', b'}', b'[', b']', b',', b'"', b':', b'\\']
                                .get(usize::from(byte % 8))
                                .unwrap_or(&b'x');
                        }
                    }
                    3 => {
                        if i < b.len() {
                            b[i] = byte;
                        }
                    }
                    // A byte removed or duplicated.
                    4 => {
                        if i < b.len() {
                            b.remove(i);
                        }
                    }
                    5 => {
                        if i < b.len() {
                            let c = b[i];
                            b.insert(i, c);
                        }
                    }
                    // Sample strings Prometheus never writes.
                    6 => {
                        let s = String::from_utf8_lossy(&b)
                            .replacen("\"NaN\"", "\"nan\"", 1)
                            .replacen("\"+Inf\"", "\"Infinity\"", 1);
                        b = s.into_bytes();
                    }
                    // Garbage after the envelope.
                    _ => b.extend_from_slice(b" {}"),
                }
                b
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Every body the typed compaction accepts gives the very same evidence through
        /// the streaming parser, wherever the chunks are cut.
        #[test]
        fn streaming_equals_typed_compaction(
            body in body(),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
            top_k in 0u32..6,
        ) {
            let body = body.into_bytes();
            let old = typed(&body, top_k);
            let new = streamed(&body, &cuts, top_k);
            prop_assert_eq!(kind(&old), kind(&new), "{}", String::from_utf8_lossy(&body));
            if let (Ok(old), Ok(new)) = (&old, &new) {
                prop_assert_eq!(old, new);
            }
        }

        /// A broken body is never accepted by the streaming parser when the typed one
        /// refuses it (and the reverse), and it is refused as the same kind of failure.
        #[test]
        fn broken_bodies_fail_alike(
            body in broken(),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let old = typed(&body, 3);
            let new = streamed(&body, &cuts, 3);
            prop_assert_eq!(kind(&old), kind(&new), "{}", String::from_utf8_lossy(&body));
            if let (Ok(old), Ok(new)) = (&old, &new) {
                prop_assert_eq!(old, new);
            }
        }

        /// Through the mapper, a streamed HTTP answer maps exactly as the buffered one:
        /// the same evidence, or the very same failure (code, text, digest).
        #[test]
        fn streamed_answers_map_as_buffered_ones(
            body in prop_oneof![body().prop_map(String::into_bytes), broken()],
            chunks in 1usize..6,
            status in prop_oneof![8 => Just(200u16), 1 => Just(422), 1 => Just(503)],
        ) {
            let mapper = ResponseMapper::new(Provider::Clinic, Redactor::default());
            let compaction = Compaction::new(3);
            let raw = RawResponse::new(status, Some("application/json".into()), body.clone());
            let old = mapper.typed_evidence(&raw, &compaction, &KeepLabels);
            let size = body.len().div_ceil(chunks).max(1);
            let pieces: Vec<Vec<u8>> = body.chunks(size).map(<[u8]>::to_vec).collect();
            let new: Result<Evidence, Failure> = run(mapper.response_evidence(
                response(status, pieces), 1 << 20, &compaction, &KeepLabels));
            prop_assert_eq!(&old, &new);
            prop_assert_eq!(&mapper.evidence(&raw, &compaction, &KeepLabels), &old);
        }
    }

    fn response(status: u16, chunks: Vec<Vec<u8>>) -> reqwest::Response {
        let stream = futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(bytes::Bytes::from(c))),
        );
        http::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(reqwest::Body::wrap_stream(stream))
            .map(reqwest::Response::from)
            .unwrap()
    }

    /// `body` in 64 KiB chunks.
    fn pieces(body: &str) -> Vec<Vec<u8>> {
        body.as_bytes()
            .chunks(64 << 10)
            .map(<[u8]>::to_vec)
            .collect()
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// A body of `series` series of 240 points (about 7 KB each), then `tail`.
    fn large_body(series: usize, bad_value_at: Option<usize>, tail: &str) -> String {
        let mut out =
            String::from(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
        for i in 0..series {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!(
                r#"{{"metric":{{"instance":"tikv-{i}:20180"}},"values":["#
            ));
            for k in 0..240 {
                if k > 0 {
                    out.push(',');
                }
                let v = if bad_value_at == Some(i) && k == 100 {
                    "nan".to_owned()
                } else {
                    format!("{}.25", (i * 7 + k) % 1000)
                };
                out.push_str(&format!(r#"[{},"{v}"]"#, 1_786_348_800 + 15 * k));
            }
            out.push_str("]}");
        }
        out.push_str(tail);
        out
    }

    /// A streamed body over what is retained for a failure (1 MiB) fails with the typed
    /// codes: ending early, a sample string Prometheus never writes, an error envelope
    /// with a long text; its digest covers the first 1 MiB and the detail says so. The
    /// same body complete is answered.
    #[test]
    fn failures_of_long_streamed_bodies_keep_their_codes() {
        let mapper = ResponseMapper::new(Provider::Manus, Redactor::default());
        let compaction = Compaction::new(3);
        #[expect(clippy::result_large_err, reason = "test helper")]
        let call = |body: String| -> Result<Evidence, Failure> {
            let pieces = pieces(&body);
            run(mapper.response_evidence(
                response(200, pieces),
                usize::MAX,
                &compaction,
                &KeepLabels,
            ))
        };
        let complete = call(large_body(400, None, "]}}")).unwrap();
        assert_eq!(complete.series_count, 400);
        assert_eq!(complete.point_count, 400 * 240);

        let cases = [
            (large_body(400, None, "]}"), "manus_non_json_body"),
            (large_body(400, None, ""), "manus_non_json_body"),
            (large_body(400, Some(300), "]}}"), "manus_invalid_response"),
            (
                large_body(400, None, r#"]},"status":"maybe"}"#),
                "manus_invalid_response",
            ),
        ];
        for (body, code) in cases {
            assert!(body.len() > 2 * RETAINED_BODY_BYTES);
            let f = call(body).unwrap_err();
            assert_eq!(f.error.code.as_str(), code, "{}", f.detail_error);
            assert!(f.error.body_digest.is_some());
            assert!(
                f.detail_error
                    .contains(&format!("digest of the first {RETAINED_BODY_BYTES}")),
                "{}",
                f.detail_error
            );
        }
        // A 2xx error envelope whose text is longer than what is retained.
        let text = "x".repeat(2 * RETAINED_BODY_BYTES);
        let body = format!(r#"{{"status":"error","errorType":"execution","error":"{text}"}}"#);
        let f = call(body).unwrap_err();
        assert_eq!(f.error.prometheus_error_type.as_deref(), Some("execution"));
        assert_eq!(f.detail_error.len(), text.len());
    }

    /// The digest of a long failing body covers its first 1 MiB redacted as a cut
    /// text: a bound secret cut in two by the 1 MiB mark leaves no part in it.
    #[test]
    fn the_digest_of_a_long_body_covers_no_part_of_a_cut_secret() {
        let secret = "tok-5b0c2f9e41d7a8c3";
        let mapper = ResponseMapper::new(
            Provider::Clinic,
            Redactor::new([secrecy::SecretString::from(secret)]),
        );
        let head =
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":""#;
        let filler = "f".repeat(RETAINED_BODY_BYTES - head.len() - 7);
        let body = format!(
            r#"{head}{filler}{secret}"}},"values":[[1,"nan"]]}},{}]}}}}"#,
            "{}".repeat(RETAINED_BODY_BYTES)
        );
        let pieces = pieces(&body);
        let f = run(mapper.response_evidence(
            response(200, pieces),
            usize::MAX,
            &Compaction::new(3),
            &KeepLabels,
        ))
        .unwrap_err();
        assert_eq!(f.error.code.as_str(), "clinic_invalid_response");
        let prefix = RawResponse::new(200, None, body.as_bytes()[..RETAINED_BODY_BYTES].to_vec());
        let redactor = Redactor::new([secrecy::SecretString::from(secret)]);
        assert_eq!(f.error.body_digest, Some(prefix.cut_body_digest(&redactor)));
        assert_ne!(f.error.body_digest, Some(prefix.body_digest(&redactor)));
        assert!(!f.detail_error.contains("tok-5b0"));
    }

    /// A chunk that ends inside a number (`1700000000.`) is the start of a series, not a
    /// broken one, also inside a member the parser skips (native `histograms`), where
    /// serde_json calls such a prefix an invalid number rather than an early end: the
    /// series is read once the rest arrives (found by `broken_bodies_fail_alike`, whose
    /// regression file keeps the case).
    #[test]
    fn a_chunk_that_ends_inside_a_number_waits_for_the_rest() {
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"histograms":[[1700000007.5,{"count":"2"}]],"values":[[1700000000.5,"1"],[1700000015,"-2"]]}]}}"#;
        let whole = typed(body, 3).unwrap();
        let text = std::str::from_utf8(body).unwrap();
        for token in [
            "1700000007.",
            "1700000007",
            "1700000000.",
            "170",
            "\"-",
            "1700000015",
        ] {
            let cut = text.find(token).unwrap() + token.len();
            assert_eq!(
                streamed(body, &[cut], 3).unwrap(),
                whole,
                "cut after {token:?}"
            );
        }
    }

    #[test]
    fn a_series_split_over_many_small_chunks_is_read_once_complete() {
        let points: Vec<String> = (0..11_000).map(|i| format!("[{i},\"{i}.5\"]")).collect();
        let body = format!(
            "{{\"status\":\"success\",\"data\":{{\"resultType\":\"matrix\",\"result\":[{{\"metric\":{{\"a\":\"b\"}},\"values\":[{}]}}]}}}}",
            points.join(",")
        );
        let mut parser = StreamCompactor::new(1);
        for piece in body.as_bytes().chunks(7) {
            parser.feed(piece).unwrap();
        }
        let s = parser.finish().unwrap();
        assert_eq!(s.summary.point_count, 11_000);
        assert_eq!(s.summary.top[0].fold.peak(), Some(10_999.5));
    }

    #[test]
    fn a_series_above_half_the_bound_is_followed_by_more_series() {
        // One series of about 10 MiB (a long label), then about 8 MiB of small series,
        // fed in chunks that do not line up with the bound: every part stays below
        // MAX_HELD_BYTES, so the answer is read whole.
        let big = "y".repeat(10 << 20);
        let small: Vec<String> = (0..40_000)
            .map(|i| format!("{{\"metric\":{{\"i\":\"{i:0>160}\"}},\"values\":[[1,\"{i}\"]]}}"))
            .collect();
        let body = format!(
            "{{\"status\":\"success\",\"data\":{{\"resultType\":\"matrix\",\"result\":[{{\"metric\":{{\"big\":\"{big}\"}},\"values\":[[1,\"0.5\"]]}},{}]}}}}",
            small.join(",")
        );
        assert!(body.len() > MAX_HELD_BYTES);
        for chunk in [9_000, 10_000] {
            let mut parser = StreamCompactor::new(1);
            for piece in body.as_bytes().chunks(chunk) {
                parser.feed(piece).unwrap();
            }
            let s = parser.finish().unwrap();
            assert_eq!(s.summary.point_count, 40_001, "chunks of {chunk}");
        }
    }

    #[test]
    fn what_is_held_at_once_is_bounded() {
        let mut parser = StreamCompactor::new(1);
        parser
            .feed(
                br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":""#,
            )
            .unwrap();
        let filler = vec![b'x'; 1 << 20];
        let err = (0..20).find_map(|_| parser.feed(&filler).err()).unwrap();
        assert!(matches!(err, ConnectorError::PartTooLarge { limit } if limit == MAX_HELD_BYTES));
        // The envelope without its series is bounded the same way.
        let mut parser = StreamCompactor::new(1);
        parser.feed(br#"{"warnings":[""#).unwrap();
        let err = (0..20).find_map(|_| parser.feed(&filler).err()).unwrap();
        assert!(matches!(err, ConnectorError::PartTooLarge { .. }));
    }

    #[test]
    fn escaped_keys_and_decoys_are_read_as_serde_reads_them() {
        let cases: [&[u8]; 4] = [
            br#"{"status":"success","d\u0061ta":{"resultType":"matrix","r\u0065sult":[{"metric":{},"values":[[1,"5"]]}]}}"#,
            br#"{"status":"success","other":{"result":[{"metric":{},"values":[[1,"9"]]}]},"data":{"resultType":"matrix","result":[]}}"#,
            br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"x":"\"result\":["},"values":[[1,"2"]]}]}}"#,
            br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"2"]]},]}}"#,
        ];
        for body in cases {
            let old = typed(body, 2);
            let new = streamed(body, &[13, 40, 77], 2);
            assert_eq!(kind(&old), kind(&new), "{}", String::from_utf8_lossy(body));
            if let (Ok(old), Ok(new)) = (&old, &new) {
                assert_eq!(old, new);
            }
        }
        // An unknown key is skipped by both: its "result" is no series.
        assert!(streamed(cases[1], &[], 2).unwrap().is_no_data());
        assert_eq!(streamed(cases[0], &[], 2).unwrap().top_peak(), Some(5.0));
    }

    /// A body of `series` series, each with one label value of `bytes` bytes (a long
    /// trace list or SQL text in a label), the rest ordinary.
    fn long_label_body(series: usize, bytes: usize) -> String {
        let rows: Vec<String> = (0..series)
            .map(|i| {
                format!(
                    r#"{{"metric":{{"__name__":"tidb_query","instance":"tidb-{i}:10080","sql":"{}{i}"}},"values":[[1786348800,"{i}.5"],[1786348815,"1"]]}}"#,
                    "select 1 ".repeat(bytes / 9)
                )
            })
            .collect();
        format!(
            r#"{{"status":"success","data":{{"resultType":"matrix","result":[{}]}}}}"#,
            rows.join(",")
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A label value cut at its bound keeps no part of a bound secret cut in two by
        /// the bound; a whole secret before the bound stays, for the guard to block.
        #[test]
        fn a_cut_label_keeps_no_part_of_a_secret(
            secret in "[A-Za-z0-9!#]{12,24}",
            at in 200usize..300,
        ) {
            use crate::prometheus::bound::{CUT_MARK, MAX_LABEL_CHARS};
            let value = format!("{}{secret}{}", " ".repeat(at), " ".repeat(400));
            let body = format!(
                r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{{"sql":"{value}"}},"values":[[1,"1"]]}}]}}}}"#
            );
            let mapper = ResponseMapper::new(
                Provider::Clinic,
                Redactor::new([secrecy::SecretString::from(secret.clone())]),
            );
            let raw = RawResponse::new(200, Some("application/json".into()), body.into_bytes());
            let e = mapper.evidence(&raw, &Compaction::new(3), &KeepLabels).unwrap();
            let kept = e.common_labels["sql"].strip_suffix(CUT_MARK).unwrap();
            if at + secret.len() <= MAX_LABEL_CHARS {
                prop_assert!(kept.contains(&secret));
            } else if at < MAX_LABEL_CHARS {
                let before = kept.strip_suffix(REDACTED).unwrap_or(kept);
                for k in 1..=secret.len() {
                    prop_assert!(!before.ends_with(&secret[..k]), "{}", kept);
                }
            } else {
                prop_assert_eq!(kept, " ".repeat(MAX_LABEL_CHARS));
            }
        }
    }

    /// Long label values are cut, marked, before they are held: 3 series of 10 KiB or
    /// 100 KiB labels give one-query results within 4 KiB (before the bound, 11 KB and
    /// an output the guard could not scan), streamed or typed alike.
    #[test]
    fn long_label_values_are_cut_and_the_result_fits_4_kib() {
        use crate::prometheus::bound::{CUT_MARK, MAX_LABEL_CHARS};
        use crate::prometheus::fit::MAX_EVIDENCE_BYTES;
        use evidence_result::{
            Details, Item, Operation, Origin, PackageId, QueryId, RequestDigest, ToolResult,
        };
        let mapper = ResponseMapper::new(Provider::Clinic, Redactor::default());
        let compaction = Compaction::new(10)
            .with_unit("queries")
            .with_expr("tidb_query");
        for bytes in [10 << 10, 100 << 10] {
            let body = long_label_body(3, bytes);
            let pieces = pieces(&body);
            let streamed = run(mapper.response_evidence(
                response(200, pieces),
                usize::MAX,
                &compaction,
                &KeepLabels,
            ))
            .unwrap();
            let raw = RawResponse::new(200, Some("application/json".into()), body.into_bytes());
            assert_eq!(
                mapper
                    .typed_evidence(&raw, &compaction, &KeepLabels)
                    .unwrap(),
                streamed
            );
            // A complete body (the Wetech path) gives the same.
            assert_eq!(
                mapper.evidence(&raw, &compaction, &KeepLabels).unwrap(),
                streamed
            );
            assert_eq!(streamed.series_count, 3);
            assert_eq!(streamed.top_peak(), Some(2.5));
            let sql = &streamed.series[0].labels["sql"];
            assert!(sql.ends_with(CUT_MARK), "{bytes}: not cut");
            assert!(sql.chars().count() <= MAX_LABEL_CHARS + CUT_MARK.chars().count());
            assert!(sql.starts_with("select 1 select 1"), "{sql}");
            let json = serde_json::to_string(&streamed).unwrap();
            assert!(
                json.len() <= MAX_EVIDENCE_BYTES,
                "{bytes}: evidence of {} bytes",
                json.len()
            );
            let origin = Origin {
                package: PackageId::clinic(),
                provider: Provider::Clinic,
                operation: Operation::QueryRange,
                policy_source: None,
            };
            let digest = RequestDigest::of(&serde_json::json!({"expr": "tidb_query"})).unwrap();
            let item = Item::success(
                QueryId::new("a_query_id_of_some_length").unwrap(),
                Some(digest),
                streamed,
            );
            let result = ToolResult::new(Details::batch(origin, vec![item]).unwrap()).unwrap();
            assert!(
                result.text().len() <= 4096,
                "{bytes}: {} bytes",
                result.text().len()
            );
        }
    }

    /// 20 series of 15 MiB label values: what the fold keeps of each is bounded (the
    /// top-k candidates no longer keep their labels whole).
    #[test]
    fn the_fold_holds_no_long_label() {
        use crate::prometheus::bound::{CUT_MARK, MAX_LABEL_CHARS};
        let label = "v".repeat(15 << 20);
        let mut parser = StreamCompactor::new(10);
        parser
            .feed(br#"{"status":"success","data":{"resultType":"matrix","result":["#)
            .unwrap();
        for i in 0..20 {
            let series = format!(
                r#"{}{{"metric":{{"big":"{label}","i":"{i}"}},"values":[[1,"{i}"]]}}"#,
                if i > 0 { "," } else { "" }
            );
            for piece in series.as_bytes().chunks(64 << 10) {
                parser.feed(piece).unwrap();
            }
            let held: usize = parser.fold.held_label_bytes();
            assert!(
                held <= 2 * 10 * 2 * (MAX_LABEL_CHARS * 4 + CUT_MARK.len() + 8),
                "{held}"
            );
        }
        parser.feed(b"]}}").unwrap();
        let s = parser.finish().unwrap();
        assert_eq!(s.summary.series_count, 20);
        assert!(s.summary.top.iter().all(|t| {
            t.labels
                .iter()
                .all(|(_, v)| v.len() <= MAX_LABEL_CHARS + CUT_MARK.len())
        }));
    }
}
