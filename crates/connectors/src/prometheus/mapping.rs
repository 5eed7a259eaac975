//! From a provider answer (or a transport error) to evidence, a discovery's answer, or a
//! structured failure that keeps the provider's words.

use evidence_result::discovery::Cell;
use evidence_result::{
    Correction, Digest, Discovery, ErrorCode, Evidence, Failure, FailureClass, Provider,
};

use std::borrow::Cow;

use bytes::Bytes;
use futures::StreamExt as _;
use reqwest::header::CONTENT_TYPE;

use super::answer::Answer;
use super::body::{BodyFold, Feed, FoldedBody};
use super::bound::{CUT_MARK, cut_prefix};
use super::compact::Compaction;
use super::discover;
use super::fetch::{RawResponse, ResponseLimits, read_capped};
use super::fit::fit;
use super::parse::{ResponseStatus, SeriesDigest, parse_with};
use super::redact::Redactor;
use super::sanitize::LabelSanitizer;
use super::stream::{MAX_HELD_BYTES, StreamCompactor, Streamed};
use crate::ConnectorError;
use crate::codes::{Code, OriginCode, http_class};

/// How much of a body that is not a Prometheus envelope goes into `detail_error`.
const EXCERPT_BYTES: usize = 4096;

/// How much of a streamed body is kept for a failure's digest and excerpt: 1 MiB. A
/// failing body up to this size is read to its end and mapped exactly as a buffered one
/// (same digest, same text); a longer one's digest covers its first this many bytes and
/// the detail says so.
pub const RETAINED_BODY_BYTES: usize = 1 << 20;

/// Maps provider answers and connector errors of one package to evidence or to a
/// [`Failure`] with the provider's status, `errorType`, complete credential-redacted
/// text, body digest and a correction.
///
/// | answer | class | code |
/// | --- | --- | --- |
/// | 2xx `success` matrix | evidence (`no_data` for zero series) | |
/// | 400 (`bad_data`), 422 (`execution`) | `query_rejected`, same-turn correction | `<origin>_http_400`, `<origin>_http_422` |
/// | 401 | `authentication` (stop the turn) | `<origin>_http_401` |
/// | 403 | `authorization` (stop the turn) | `<origin>_http_403` |
/// | 503 `timeout`, 408, 504 | `timeout` | `<origin>_http_<status>` |
/// | 429, other 5xx | `provider_unavailable` | `<origin>_http_<status>` |
/// | other statuses | `internal` | `<origin>_http_<status>` |
/// | 2xx body that is not JSON | `provider_unavailable`, with the body digest | `<origin>_non_json_body` |
/// | 2xx JSON that is not a `query_range` answer | `provider_unavailable`, with the body digest | `<origin>_invalid_response` |
/// | time limit passed | `timeout` | `<origin>_timeout` |
/// | connection refused, reset, killed mid-answer | `provider_unavailable` | `<origin>_unavailable` |
/// | body over `max_body_bytes`, or one series over [`MAX_HELD_BYTES`] | `query_rejected`: narrow the query | `<origin>_response_too_large` |
///
/// `<origin>` is `clinic`, `manus` or `grafana` (as in [`ErrorCode::http`]).
#[derive(Debug, Clone)]
pub struct ResponseMapper {
    provider: Provider,
    redactor: Redactor,
    keep: Vec<String>,
}

impl ResponseMapper {
    /// A mapper for `provider`'s answers, redacting with `redactor`. Corrections say to
    /// keep [`Correction::default_keep`] (query id, time window, cluster scope).
    pub fn new(provider: Provider, redactor: Redactor) -> Self {
        ResponseMapper {
            provider,
            redactor,
            keep: Correction::default_keep(),
        }
    }

    /// Sets what a correction must leave unchanged (e.g. add `target` for Manus).
    pub fn with_keep(mut self, keep: Vec<String>) -> Self {
        self.keep = keep;
        self
    }

    /// The provider.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The redactor.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Evidence from a fetched answer, or the failure of the fetch or of the answer.
    #[expect(
        clippy::result_large_err,
        reason = "the failure is a result value moved once into Details, not a hot error path"
    )]
    pub fn outcome(
        &self,
        fetched: Result<RawResponse, ConnectorError>,
        compaction: &Compaction,
        sanitizer: &dyn LabelSanitizer,
    ) -> Result<Evidence, Failure> {
        match fetched {
            Ok(raw) => self.evidence(&raw, compaction, sanitizer),
            Err(e) => Err(self.failure(&e)),
        }
    }

    /// Sends `request` and streams its answer into evidence: a 2xx body is parsed as
    /// it arrives and folded (never held whole, see `stream.rs`); any other status is
    /// read whole (at most [`MAX_HELD_BYTES`]) and mapped by [`Self::evidence`]. All
    /// within `limits.timeout`; a body longer than `limits.max_body_bytes` is refused.
    ///
    /// Failures are those of [`Self::evidence`] and [`Self::failure`]: `timeout`,
    /// `unavailable` (refused, reset, killed mid-answer), `response_too_large`,
    /// `non_json_body` and `invalid_response` (a body that is truncated, ends early, is
    /// a provider error envelope or holds a value that is not a sample).
    pub async fn fetch_evidence<S: LabelSanitizer + Sync + ?Sized>(
        &self,
        request: reqwest::RequestBuilder,
        limits: &ResponseLimits,
        compaction: &Compaction,
        sanitizer: &S,
    ) -> Result<Evidence, Failure> {
        self.evidence_only(
            self.fetch_answer(request, limits, compaction, sanitizer)
                .await,
        )
    }

    /// [`Self::fetch_evidence`] for any locked query: the answer is a discovery's when
    /// `compaction` is for one ([`Compaction::for_query`]).
    pub async fn fetch_answer<S: LabelSanitizer + Sync + ?Sized>(
        &self,
        request: reqwest::RequestBuilder,
        limits: &ResponseLimits,
        compaction: &Compaction,
        sanitizer: &S,
    ) -> Result<Answer, Failure> {
        let call = async {
            let response = request
                .send()
                .await
                .map_err(|e| self.failure(&ConnectorError::from_reqwest(e)))?;
            self.response_answer(response, limits.max_body_bytes, compaction, sanitizer)
                .await
        };
        match tokio::time::timeout(limits.timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(self.failure(&ConnectorError::Timeout(format!(
                "no complete answer within {} ms",
                limits.timeout.as_millis()
            )))),
        }
    }

    /// Evidence only: a discovery's answer where evidence was asked for (a compaction
    /// for a discovery given to an evidence function) is refused as a contract fault.
    #[expect(
        clippy::result_large_err,
        reason = "the failure is a result value moved once into Details, not a hot error path"
    )]
    fn evidence_only(&self, answer: Result<Answer, Failure>) -> Result<Evidence, Failure> {
        match answer? {
            Answer::Evidence(e) => Ok(e),
            Answer::Discovery(_) => Err(self.failure(&ConnectorError::Request(
                "a discovery's compaction was given where evidence is asked for; use the \
                 answer functions"
                    .to_owned(),
            ))),
        }
    }

    /// Evidence from a response whose body is still to be read (see
    /// [`Self::fetch_evidence`], which adds the time limit).
    pub async fn response_evidence<S: LabelSanitizer + Sync + ?Sized>(
        &self,
        response: reqwest::Response,
        max_body_bytes: usize,
        compaction: &Compaction,
        sanitizer: &S,
    ) -> Result<Evidence, Failure> {
        self.evidence_only(
            self.response_answer(response, max_body_bytes, compaction, sanitizer)
                .await,
        )
    }

    /// The answer of a response whose body is still to be read.
    async fn response_answer<S: LabelSanitizer + Sync + ?Sized>(
        &self,
        response: reqwest::Response,
        max_body_bytes: usize,
        compaction: &Compaction,
        sanitizer: &S,
    ) -> Result<Answer, Failure> {
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let path = response.url().path().to_owned();
            let raw = read_capped(response, max_body_bytes.min(MAX_HELD_BYTES))
                .await
                .map_err(|e| self.failure(&e))?;
            return self
                .typed_answer(&raw, compaction, sanitizer)
                .map_err(|f| self.naming_path(f, &path));
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let too_large = ConnectorError::BodyTooLarge {
            limit: max_body_bytes,
        };
        if response
            .content_length()
            .is_some_and(|len| len > max_body_bytes as u64)
        {
            return Err(self.failure(&too_large));
        }
        let mut fold = BodyFold::new(compaction, max_body_bytes, RETAINED_BODY_BYTES);
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk: Bytes = chunk.map_err(|e| self.failure(&ConnectorError::from_reqwest(e)))?;
            match fold.feed(&chunk) {
                Ok(Feed::More) => {}
                Ok(Feed::Enough) => break,
                Err(e) => return Err(self.failure(&e)),
            }
        }
        self.folded_answer(status, content_type, fold.finish(), compaction, sanitizer)
    }

    /// Evidence from a 2xx body folded as it arrived ([`BodyFold`]), or the failure it
    /// means: a short failing body maps exactly as a buffered one (same text, same
    /// digest); a longer one's digest covers its first [`RETAINED_BODY_BYTES`].
    #[expect(
        clippy::result_large_err,
        reason = "the failure is a result value moved once into Details, not a hot error path"
    )]
    pub(crate) fn folded_answer<S: LabelSanitizer + ?Sized>(
        &self,
        status: u16,
        content_type: Option<String>,
        folded: FoldedBody,
        compaction: &Compaction,
        sanitizer: &S,
    ) -> Result<Answer, Failure> {
        let short = folded.whole().is_some();
        let FoldedBody {
            outcome,
            retained,
            total,
        } = folded;
        let raw = RawResponse::new(status, content_type, retained);
        match outcome {
            Ok(streamed) if streamed.status == ResponseStatus::Success => {
                self.streamed_answer(streamed, compaction, sanitizer)
            }
            // A short failing body: exactly the buffered mapping (digest, text).
            _ if short => self.typed_answer(&raw, compaction, sanitizer),
            Ok(streamed) => {
                let text = streamed
                    .error
                    .as_deref()
                    .map_or_else(|| self.excerpt(&raw), |e| self.redactor.redact(e));
                Err(self.http_failure(
                    raw.status,
                    streamed.error_type.as_deref(),
                    text,
                    raw.cut_body_digest(&self.redactor),
                ))
            }
            Err(e) => Err(self.body_failure(&raw, &e, Some(total))),
        }
    }

    /// Evidence from a complete answer, or the failure it means. A 2xx body is read by
    /// the streaming parser in one piece (the same fold as [`Self::fetch_evidence`]);
    /// any failure is mapped by the typed parser, whose words it keeps.
    #[expect(
        clippy::result_large_err,
        reason = "the failure is a result value moved once into Details, not a hot error path"
    )]
    pub fn evidence<S: LabelSanitizer + ?Sized>(
        &self,
        raw: &RawResponse,
        compaction: &Compaction,
        sanitizer: &S,
    ) -> Result<Evidence, Failure> {
        self.evidence_only(self.answer(raw, compaction, sanitizer))
    }

    /// [`Self::evidence`] for any locked query: the answer is a discovery's when
    /// `compaction` is for one.
    #[expect(
        clippy::result_large_err,
        reason = "the failure is a result value moved once into Details, not a hot error path"
    )]
    pub fn answer<S: LabelSanitizer + ?Sized>(
        &self,
        raw: &RawResponse,
        compaction: &Compaction,
        sanitizer: &S,
    ) -> Result<Answer, Failure> {
        if raw.is_success()
            && let Ok(streamed) =
                StreamCompactor::with_census(compaction.top_k, compaction.census())
                    .complete(&raw.body)
            && streamed.status == ResponseStatus::Success
        {
            return self.streamed_answer(streamed, compaction, sanitizer);
        }
        self.typed_answer(raw, compaction, sanitizer)
    }

    #[expect(
        clippy::result_large_err,
        reason = "the failure is a result value moved once into Details, not a hot error path"
    )]
    fn streamed_answer<S: LabelSanitizer + ?Sized>(
        &self,
        streamed: Streamed,
        compaction: &Compaction,
        sanitizer: &S,
    ) -> Result<Answer, Failure> {
        let warnings: Vec<Cow<'_, str>> = streamed.warnings;
        match compaction.answer(streamed.summary, &warnings, &Dyn(sanitizer)) {
            Ok(answer) => Ok(self.finished_answer(answer)),
            Err(e) => Err(self.failure(&e)),
        }
    }

    fn finished_answer(&self, answer: Answer) -> Answer {
        match answer {
            Answer::Evidence(e) => Answer::Evidence(self.finished(e)),
            Answer::Discovery(d) => Answer::Discovery(self.finished_discovery(d)),
        }
    }

    /// [`Self::finished`] for a discovery: warnings redacted, every cut text ending in
    /// no part of a secret, then fitted to its bound.
    fn finished_discovery(&self, mut discovery: Discovery) -> Discovery {
        for w in &mut discovery.warnings {
            *w = self.redactor.redact(w);
        }
        let cut_tail = |text: &mut String| self.cut_tail(text);
        for w in &mut discovery.warnings {
            cut_tail(w);
        }
        for v in discovery.scope.values_mut() {
            cut_tail(v);
        }
        for row in &mut discovery.rows {
            for cell in row {
                if let Cell::Text(Some(text)) = cell {
                    cut_tail(text);
                }
            }
        }
        discover::fit(&mut discovery);
        discovery
    }

    /// A text cut at its bound ends in no part of a secret cut in two (only the tail: a
    /// whole secret in a cut text stays, for the guard to block).
    pub(crate) fn cut_tail(&self, text: &mut String) {
        if let Some(prefix) = cut_prefix(text)
            && self.redactor.redact(prefix) == prefix
        {
            let redacted = self.redactor.redact_cut(prefix);
            if redacted != prefix {
                *text = format!("{redacted}{CUT_MARK}");
            }
        }
    }

    /// The last step of every successful answer: warnings redacted, every cut text
    /// (a label or warning cut at its bound) ending in no part of a secret cut in two,
    /// then the evidence fitted to its size bound.
    fn finished(&self, mut evidence: Evidence) -> Evidence {
        for w in &mut evidence.warnings {
            *w = self.redactor.redact(w);
        }
        let cut_tail = |text: &mut String| self.cut_tail(text);
        for w in &mut evidence.warnings {
            cut_tail(w);
        }
        for v in evidence.common_labels.values_mut() {
            cut_tail(v);
        }
        for row in &mut evidence.series {
            for v in row.labels.values_mut() {
                cut_tail(v);
            }
        }
        fit(&mut evidence);
        evidence
    }

    /// Evidence from a complete answer by the typed parser of the whole body: the path
    /// before streaming, kept as the reference the streaming parser is tested and
    /// benchmarked against.
    #[doc(hidden)]
    #[expect(
        clippy::result_large_err,
        reason = "the failure is a result value moved once into Details, not a hot error path"
    )]
    pub fn typed_evidence<S: LabelSanitizer + ?Sized>(
        &self,
        raw: &RawResponse,
        compaction: &Compaction,
        sanitizer: &S,
    ) -> Result<Evidence, Failure> {
        self.evidence_only(self.typed_answer(raw, compaction, sanitizer))
    }

    #[expect(
        clippy::result_large_err,
        reason = "the failure is a result value moved once into Details, not a hot error path"
    )]
    fn typed_answer<S: LabelSanitizer + ?Sized>(
        &self,
        raw: &RawResponse,
        compaction: &Compaction,
        sanitizer: &S,
    ) -> Result<Answer, Failure> {
        // The digest is only needed for failures; a large success does not pay for it.
        match parse_with::<SeriesDigest<'_>>(&raw.body) {
            Ok(parsed) if raw.is_success() && parsed.status == ResponseStatus::Success => {
                match compaction.compact_parsed(parsed, &Dyn(sanitizer)) {
                    Ok(answer) => Ok(self.finished_answer(answer)),
                    Err(e) => Err(self.failure(&e)),
                }
            }
            Ok(parsed) => {
                let text = parsed
                    .error
                    .as_deref()
                    .map_or_else(|| self.excerpt(raw), |e| self.redactor.redact(e));
                Err(self.http_failure(
                    raw.status,
                    parsed.error_type.as_deref(),
                    text,
                    raw.body_digest(&self.redactor),
                ))
            }
            Err(e) if raw.is_success() => Err(self.body_failure(raw, &e, None)),
            Err(_) => Err(self.http_failure(
                raw.status,
                None,
                self.excerpt(raw),
                raw.body_digest(&self.redactor),
            )),
        }
    }

    /// The failure of a 2xx body that is not a `query_range` answer. `streamed` is the
    /// length read of a streamed body of which `raw` holds only the first
    /// [`RETAINED_BODY_BYTES`]; `None` when `raw` is the whole body.
    fn body_failure(
        &self,
        raw: &RawResponse,
        e: &ConnectorError,
        streamed: Option<usize>,
    ) -> Failure {
        let digest = match streamed {
            Some(read) if read > raw.body.len() => raw.cut_body_digest(&self.redactor),
            _ => raw.body_digest(&self.redactor),
        };
        let (code, what) = match e {
            ConnectorError::NotJson(_) => (OriginCode::NonJsonBody, "a body that is not JSON"),
            _ => (
                OriginCode::InvalidResponse,
                "a body that is not a Prometheus query_range answer",
            ),
        };
        let size = match streamed {
            Some(read) if read > raw.body.len() => {
                format!("{read} bytes read, digest of the first {}", raw.body.len())
            }
            _ => format!("{} bytes", raw.body.len()),
        };
        let detail = format!(
            "the provider answered HTTP {} with {what} ({}, {size}, {digest}): {}; body: {}",
            raw.status,
            raw.content_type.as_deref().unwrap_or("no content type"),
            self.redactor.redact(&e.to_string()),
            self.excerpt(raw),
        );
        Failure::new(code.code(self.provider), code.class(), detail)
            .with_http_status(raw.status)
            .with_body_digest(digest)
            .with_correction(self.correction(code.class(), None))
    }

    /// `failure` with the path the provider answered 404 to named in its text, so a
    /// wrong base URL or path template shows which path was tried (Prometheus' own
    /// answer is only "404 page not found"). Other failures are returned unchanged.
    pub(crate) fn naming_path(&self, mut failure: Failure, path: &str) -> Failure {
        if failure.error.http_status == Some(404) {
            failure.detail_error = format!(
                "the provider has no path {} (HTTP 404; check the base URL and path this \
                 package is deployed with): {}",
                self.redactor.redact(path),
                failure.detail_error
            );
        }
        failure
    }

    /// The failure for a connector error (transport, cap, sanitizing, request).
    pub fn failure(&self, error: &ConnectorError) -> Failure {
        let detail = self.redactor.redact(&error.to_string());
        let (code, hint) = match error {
            ConnectorError::Timeout(_) => (OriginCode::Timeout, None),
            ConnectorError::Unreachable(_) => (OriginCode::Unavailable, None),
            ConnectorError::BodyTooLarge { .. } | ConnectorError::PartTooLarge { .. } => (
                OriginCode::ResponseTooLarge,
                Some(
                    "The answer was too large and was not used: narrow the query (aggregate \
                     with sum by (...) or topk, select fewer series, or use a larger step).",
                ),
            ),
            ConnectorError::NotJson(_) => (OriginCode::NonJsonBody, None),
            ConnectorError::InvalidResponse(_) => (OriginCode::InvalidResponse, None),
            ConnectorError::Sanitize(_) => (OriginCode::SanitizeFailed, None),
            ConnectorError::Request(_) => (OriginCode::RequestFailed, None),
            ConnectorError::HostNotAllowed { .. } => (OriginCode::HostNotAllowed, None),
            ConnectorError::Config(_) => (OriginCode::InvalidConfiguration, None),
            ConnectorError::InvalidReference => {
                // A reference is the model's argument, not the provider's: its code has
                // no origin.
                let code = Code::InvalidReference;
                let hint = "Use an instanceRef returned by this tool for this target, \
                            unchanged, or leave it out.";
                return Failure::new(code.code(), code.class(), detail)
                    .with_correction(self.correction(code.class(), Some(hint)));
            }
            ConnectorError::ReferenceKeys(_) => (OriginCode::ReferenceKeys, None),
            ConnectorError::Result(_) => (OriginCode::ResultContract, None),
            ConnectorError::Package(_) => (OriginCode::Package, None),
            ConnectorError::OutOfScope(_) => (OriginCode::OutOfScope, None),
        };
        Failure::new(code.code(self.provider), code.class(), detail)
            .with_correction(self.correction(code.class(), hint))
    }

    fn http_failure(
        &self,
        status: u16,
        error_type: Option<&str>,
        text: String,
        digest: Digest,
    ) -> Failure {
        let class = http_class(status, error_type);
        let detail = if text.is_empty() {
            format!("HTTP {status} with an empty body")
        } else {
            text
        };
        let hint = (class == FailureClass::QueryRejected).then(|| rejection_hint(&detail));
        let mut failure = Failure::new(ErrorCode::http(self.provider, status), class, detail)
            .with_http_status(status)
            .with_body_digest(digest)
            .with_correction(self.correction(class, hint));
        if let Some(t) = error_type {
            failure = failure.with_prometheus_error_type(t);
        }
        failure
    }

    fn correction(&self, class: FailureClass, hint: Option<&str>) -> Correction {
        let hint = if class.allows_correction() {
            let keep = format!(
                "Change only the expression or step; keep {} unchanged.",
                self.keep.join(", ")
            );
            Some(match hint {
                Some(h) if !h.is_empty() => format!("{h} {keep}"),
                _ => keep,
            })
        } else {
            hint.map(str::to_owned)
        };
        Correction::for_class(class, hint.as_deref(), self.keep.clone())
    }

    /// The start of a body that is not a Prometheus envelope, as text, redacted.
    fn excerpt(&self, raw: &RawResponse) -> String {
        // Cut through the body at a character boundary: a secret cut in two is redacted
        // too.
        let (mut text, left_out) = self.redactor.excerpt(&raw.body, EXCERPT_BYTES);
        if left_out > 0 {
            text.push_str(&format!(" [... {left_out} more bytes]"));
        }
        text
    }
}

/// A sanitizer of any size seen through the `dyn` interface compaction takes.
struct Dyn<'s, S: ?Sized>(&'s S);

impl<S: LabelSanitizer + ?Sized> LabelSanitizer for Dyn<'_, S> {
    fn sanitize(
        &self,
        labels: &mut std::collections::BTreeMap<String, String>,
    ) -> Result<(), ConnectorError> {
        self.0.sanitize(labels)
    }
}

/// A short, specific hint for a known Prometheus rejection.
fn rejection_hint(text: &str) -> &'static str {
    if text.contains("many-to-many matching not allowed") {
        "Match on labels that are unique on one side (for example on(instance)) or aggregate one side first."
    } else if text.contains("vector cannot contain metrics with the same labelset") {
        "Keep a label that tells the series apart, or aggregate them."
    } else if text.contains("exceeded maximum resolution") {
        "Use a larger step."
    } else if text.contains("parse error") {
        "Fix the PromQL syntax at the reported position."
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prometheus::KeepLabels;
    use proptest::prelude::*;
    use secrecy::SecretString;

    fn mapper() -> ResponseMapper {
        ResponseMapper::new(
            Provider::Clinic,
            Redactor::new([SecretString::from("tok-123456789")]),
        )
    }

    #[expect(clippy::result_large_err, reason = "test helper")]
    fn map(status: u16, body: &str) -> Result<Evidence, Failure> {
        mapper().evidence(
            &RawResponse::new(status, Some("application/json".into()), body.to_owned()),
            &Compaction::default(),
            &KeepLabels,
        )
    }

    #[test]
    fn a_404_names_the_path_and_other_failures_are_unchanged() {
        let missing = map(404, "404 page not found\n").unwrap_err();
        let named = mapper().naming_path(missing.clone(), "/clusters/SaaS01/api/v1/query_range");
        assert!(
            named.detail_error.starts_with(
                "the provider has no path /clusters/SaaS01/api/v1/query_range (HTTP 404"
            ),
            "{}",
            named.detail_error
        );
        assert!(named.detail_error.ends_with(&missing.detail_error));
        assert_eq!(named.error, missing.error);
        // A secret in the path is redacted like the rest of the text.
        let secret = mapper().naming_path(missing, "/t/tok-123456789/x");
        assert!(!secret.detail_error.contains("tok-123456789"));
        let unavailable = map(
            503,
            r#"{"status":"error","errorType":"unavailable","error":"down"}"#,
        )
        .unwrap_err();
        assert_eq!(mapper().naming_path(unavailable.clone(), "/x"), unavailable);
    }

    proptest! {
        /// The body digest a model sees is of the redacted body: an echoed secret, raw or
        /// in any status, never makes the digest confirm a guess of it offline.
        #[test]
        fn the_body_digest_never_covers_a_secret(
            status in prop_oneof![Just(400u16), Just(401), Just(422), Just(500), Just(200)],
            before in "[a-z ]{0,20}",
            after in "[a-z ]{0,20}",
            json in any::<bool>(),
        ) {
            let secret = "tok-123456789";
            let text = format!("{before}{secret}{after}");
            let body = if json {
                serde_json::json!({"status": "error", "errorType": "execution", "error": text})
                    .to_string()
            } else {
                text.clone()
            };
            let f = map(status, &body).unwrap_err();
            let digest = f.error.body_digest.unwrap();
            prop_assert_ne!(digest, Digest::sha256(body.as_bytes()));
            prop_assert_eq!(
                digest,
                Digest::sha256(body.replace(secret, crate::prometheus::REDACTED).as_bytes())
            );
        }
    }

    proptest! {
        /// Where the excerpt of a long body (the first 4096 bytes in `detail_error`)
        /// cuts through a bound secret, the part of the secret before the cut is
        /// redacted too: no half of a secret reaches the model.
        #[test]
        fn an_excerpt_never_ends_in_part_of_a_secret(
            secret in "[A-Za-z0-9]{12,32}",
            inside in 1usize..32,
            status in prop_oneof![Just(200u16), Just(502)],
        ) {
            let inside = inside.min(secret.len() - 1);
            let m = ResponseMapper::new(Provider::Clinic, Redactor::new([SecretString::from(secret.clone())]));
            let before = EXCERPT_BYTES - inside;
            let body = format!("<html>{}{secret} and more</html>{}", ".".repeat(before - 6), "-".repeat(100));
            let f = m
                .evidence(&RawResponse::new(status, None, body), &Compaction::default(), &KeepLabels)
                .unwrap_err();
            let half = &secret[..secret.len().div_ceil(2).min(inside)];
            prop_assert!(
                !f.detail_error.contains(&format!(".{half}")),
                "part of the secret in {}",
                &f.detail_error[f.detail_error.len().saturating_sub(200)..]
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// Where the excerpt of a long body cuts through a non-ASCII secret, inside a
        /// multi-byte character or between two, no prefix of the secret reaches
        /// `detail_error`.
        #[test]
        fn an_excerpt_cut_inside_a_character_keeps_no_prefix_of_a_secret(
            secret in "[a-zäöüé€日😀]{2,6}[äöüé€日😀][a-zäöü€日😀]{6,12}",
            inside in any::<prop::sample::Index>(),
        ) {
            let inside = 1 + inside.index(secret.len() - 1);
            let m = ResponseMapper::new(Provider::Clinic, Redactor::new([SecretString::from(secret.clone())]));
            let before = EXCERPT_BYTES - inside;
            let body = format!("<html>{}{secret} and more</html>{}", ".".repeat(before - 6), "-".repeat(100));
            let f = m
                .evidence(&RawResponse::new(502, None, body), &Compaction::default(), &KeepLabels)
                .unwrap_err();
            for (j, _) in secret.char_indices().skip(1) {
                prop_assert!(
                    !f.detail_error.contains(&format!(".{}", &secret[..j])),
                    "part of the secret in {}",
                    &f.detail_error[f.detail_error.len().saturating_sub(200)..]
                );
            }
        }
    }

    #[test]
    fn prometheus_rejections_keep_the_providers_words() {
        let body = r#"{"status":"error","errorType":"execution","error":"found duplicate series for the match group {cluster_id=\"SaaS02\"} on the right hand-side of the operation: [{a=\"1\"}, {a=\"2\"}];many-to-many matching not allowed: matching labels must be unique on one side"}"#;
        let f = map(422, body).unwrap_err();
        assert_eq!(f.error.code.as_str(), "clinic_http_422");
        assert_eq!(f.error.class, FailureClass::QueryRejected);
        assert_eq!(f.error.http_status, Some(422));
        assert_eq!(f.error.prometheus_error_type.as_deref(), Some("execution"));
        assert_eq!(f.error.body_digest, Some(Digest::sha256(body.as_bytes())));
        assert!(
            f.detail_error
                .starts_with("found duplicate series for the match group {cluster_id=\"SaaS02\"}")
        );
        assert!(
            f.detail_error
                .ends_with("matching labels must be unique on one side")
        );
        assert!(f.correction.allowed);
        assert!(f.correction.instruction.contains("on(instance)"));
        assert!(
            f.correction
                .instruction
                .contains("keep queryId, time window, cluster scope unchanged")
        );
        assert_eq!(f.correction.keep, Correction::default_keep());

        let f = map(400, r#"{"status":"error","errorType":"bad_data","error":"1:10: parse error: missing unit character in duration"}"#).unwrap_err();
        assert_eq!(f.error.code.as_str(), "clinic_http_400");
        assert_eq!(f.error.class, FailureClass::QueryRejected);
        assert_eq!(
            f.detail_error,
            "1:10: parse error: missing unit character in duration"
        );
    }

    #[test]
    fn statuses_map_to_classes() {
        let cases = [
            (
                401,
                "{\"code\":401,\"message\":\"missing or invalid bearer token\"}",
                FailureClass::Authentication,
            ),
            (
                403,
                "{\"message\":\"Permission denied\"}",
                FailureClass::Authorization,
            ),
            (429, "slow down", FailureClass::ProviderUnavailable),
            (
                502,
                "<html>bad gateway</html>",
                FailureClass::ProviderUnavailable,
            ),
            (
                503,
                r#"{"status":"error","errorType":"timeout","error":"query timed out in query execution"}"#,
                FailureClass::Timeout,
            ),
            (504, "", FailureClass::Timeout),
            (404, "not found", FailureClass::Internal),
        ];
        for (status, body, class) in cases {
            let f = map(status, body).unwrap_err();
            assert_eq!(f.error.class, class, "{status}");
            assert_eq!(f.error.http_status, Some(status));
            assert_eq!(f.error.code.as_str(), format!("clinic_http_{status}"));
            assert!(!f.detail_error.is_empty());
            assert_eq!(f.correction.allowed, class.allows_correction());
        }
        assert!(
            map(401, "x")
                .unwrap_err()
                .correction
                .instruction
                .contains("stop this turn")
        );
    }

    #[test]
    fn non_json_success_is_a_provider_error_with_its_digest() {
        let body = "<!DOCTYPE html><html><body>maintenance</body></html>";
        let f = mapper()
            .evidence(
                &RawResponse::new(200, Some("text/html".into()), body),
                &Compaction::default(),
                &KeepLabels,
            )
            .unwrap_err();
        assert_eq!(f.error.code.as_str(), "clinic_non_json_body");
        assert_eq!(f.error.class, FailureClass::ProviderUnavailable);
        let digest = Digest::sha256(body.as_bytes());
        assert_eq!(f.error.body_digest, Some(digest));
        assert!(f.detail_error.contains(&digest.to_string()));
        assert!(f.detail_error.contains("maintenance"));
        let f = map(
            200,
            r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
        )
        .unwrap_err();
        assert_eq!(f.error.code.as_str(), "clinic_invalid_response");
    }

    #[test]
    fn success_and_no_data() {
        let e = map(200, r#"{"status":"success","data":{"resultType":"matrix","result":[]},"warnings":["token=tok-123456789"]}"#).unwrap();
        assert!(e.is_no_data());
        assert_eq!(e.warnings, vec!["token=[REDACTED]".to_owned()]);
        let e = map(200, r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"instance":"a:1"},"values":[[1,"2.5"],[2,"NaN"]]}]}}"#).unwrap();
        assert_eq!(e.series_count, 1);
        assert_eq!(e.top_peak(), Some(2.5));
        assert_eq!(e.series[0].non_finite_points, 1);
    }

    #[test]
    fn connector_errors_map_to_classes() {
        let m = ResponseMapper::new(Provider::Wetech, Redactor::default());
        let f = m.failure(&ConnectorError::BodyTooLarge { limit: 10 });
        assert_eq!(f.error.code.as_str(), "grafana_response_too_large");
        assert_eq!(f.error.class, FailureClass::QueryRejected);
        assert!(f.detail_error.contains("narrow the query"));
        assert!(f.correction.allowed && f.correction.instruction.contains("narrow the query"));
        let f = m.failure(&ConnectorError::Timeout("no answer within 5 ms".into()));
        assert_eq!(
            (f.error.code.as_str(), f.error.class),
            ("grafana_timeout", FailureClass::Timeout)
        );
        let f = m.failure(&ConnectorError::Unreachable("connection refused".into()));
        assert_eq!(f.error.class, FailureClass::ProviderUnavailable);
        assert!(!f.correction.allowed);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Whatever the status and wherever the provider echoes a bound secret, no
        /// failure field carries it.
        #[test]
        fn failures_never_carry_bound_secrets(
            status in prop_oneof![Just(200u16), Just(400), Just(401), Just(403), Just(422), Just(429), Just(500), Just(503)],
            secret in "[A-Za-z0-9_.~-]{12,32}",
            envelope in any::<bool>(),
            prefix in "[a-z :]{0,20}",
        ) {
            let m = ResponseMapper::new(Provider::Manus, Redactor::new([SecretString::from(secret.clone())]));
            let text = format!("{prefix} session {secret} rejected; url http://h/x?token={secret}");
            let body = if envelope {
                serde_json::json!({"status": "error", "errorType": "execution", "error": text}).to_string()
            } else {
                text
            };
            let failure = m
                .evidence(&RawResponse::new(status, None, body), &Compaction::default(), &KeepLabels)
                .unwrap_err();
            let json = serde_json::to_string(&failure.error).unwrap();
            prop_assert!(!failure.detail_error.contains(&secret));
            prop_assert!(!failure.correction.instruction.contains(&secret));
            prop_assert!(!json.contains(&secret));
        }
    }
}
