//! Reading a provider answer under a time limit and a size bound: whole (small
//! answers, error bodies) with `fetch` and `read_capped`.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use evidence_result::Digest;
use futures::StreamExt as _;
use reqwest::header::CONTENT_TYPE;

use crate::prometheus::Redactor;
use crate::{ConnectorError, Deadline};

/// The default bound on the bytes read of one provider answer: 1 GiB. A query answer is
/// streamed and folded as it arrives (`ResponseMapper::fetch_evidence`), so this bounds
/// the time and bandwidth one answer may take, not memory; what is held at once is
/// bounded by [`MAX_HELD_BYTES`](super::MAX_HELD_BYTES).
pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 30;
/// The default time limit for one provider call: 30 s.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Limits of one provider call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseLimits {
    /// The largest body accepted, in bytes. A larger body is an error, never truncated.
    /// A streamed 2xx query answer is never held whole; a body that is read whole
    /// ([`fetch`], [`read_capped`], a non-2xx answer of `fetch_evidence`) is held up to
    /// this size (`fetch_evidence` holds at most [`MAX_HELD_BYTES`](super::MAX_HELD_BYTES)).
    pub max_body_bytes: usize,
    /// The time limit for sending the request and reading the whole body.
    pub timeout: Duration,
}

/// The longest margin between Prometheus' evaluation `timeout` and the call's time limit:
/// time left for the server to answer and for the body to arrive after evaluation stops.
pub const EVALUATION_TIMEOUT_MARGIN: Duration = Duration::from_secs(1);

impl ResponseLimits {
    /// The `timeout` parameter every query sends, so that Prometheus stops evaluating
    /// when the client stops waiting: `configured` when set, but never above
    /// [`timeout`](Self::timeout); otherwise `timeout` minus a margin of a tenth of it,
    /// at most [`EVALUATION_TIMEOUT_MARGIN`]. Never zero (at least 1 ms), since
    /// Prometheus reads a zero timeout as an immediate one.
    ///
    /// ```
    /// use std::time::Duration;
    /// use evidence_connectors::ResponseLimits;
    ///
    /// let limits = ResponseLimits::default(); // 30 s
    /// assert_eq!(limits.evaluation_timeout(None), Duration::from_secs(29));
    /// assert_eq!(limits.evaluation_timeout(Some(Duration::from_secs(5))), Duration::from_secs(5));
    /// assert_eq!(limits.evaluation_timeout(Some(Duration::from_secs(60))), Duration::from_secs(30));
    /// ```
    pub fn evaluation_timeout(&self, configured: Option<Duration>) -> Duration {
        let t = match configured {
            Some(t) => t.min(self.timeout),
            None => self
                .timeout
                .saturating_sub((self.timeout / 10).min(EVALUATION_TIMEOUT_MARGIN)),
        };
        t.max(Duration::from_millis(1))
    }

    /// [`evaluation_timeout`](Self::evaluation_timeout) of these limits with their
    /// `timeout` cut to what is left of `deadline`: Prometheus stops evaluating when the
    /// call's deadline passes.
    pub(crate) fn evaluation_timeout_within(
        &self,
        deadline: &Deadline,
        configured: Option<Duration>,
    ) -> Duration {
        let left = ResponseLimits {
            timeout: deadline.limit(self.timeout),
            ..*self
        };
        left.evaluation_timeout(configured)
    }
}

impl Default for ResponseLimits {
    fn default() -> Self {
        ResponseLimits {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            timeout: DEFAULT_CALL_TIMEOUT,
        }
    }
}

/// A provider answer as it arrived: status, content type and the complete raw body.
///
/// Built by [`fetch`] and [`read_capped`], or directly by a connector that obtained the
/// answer another way (for example from a browser page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    /// HTTP status code.
    pub status: u16,
    /// The `Content-Type` header, when there was one.
    pub content_type: Option<String>,
    /// The complete body.
    pub body: Bytes,
}

impl RawResponse {
    /// A raw response from its parts.
    pub fn new(status: u16, content_type: Option<String>, body: impl Into<Bytes>) -> Self {
        RawResponse {
            status,
            content_type,
            body: body.into(),
        }
    }

    /// SHA-256 of the body as the model may see it: with `redactor`'s credentials
    /// replaced (text read as UTF-8, invalid sequences replaced). A digest of the raw
    /// body would let anyone holding a guess of a short secret (a user name echoed in an
    /// error) confirm it offline; a digest of the redacted text confirms nothing.
    pub fn body_digest(&self, redactor: &Redactor) -> Digest {
        Digest::sha256(
            redactor
                .redact(&String::from_utf8_lossy(&self.body))
                .as_bytes(),
        )
    }

    /// The digest of a body that holds only the start of a longer one (a streamed
    /// answer's retained first bytes): as [`RawResponse::body_digest`], of the body
    /// without a character its end cuts through, with a tail that could be the start of a
    /// secret cut in two redacted too ([`Redactor::redact_cut`]).
    pub fn cut_body_digest(&self, redactor: &Redactor) -> Digest {
        let head = evidence_package::guard::cut_at_char_boundary(&self.body, self.body.len());
        Digest::sha256(
            redactor
                .redact_cut(&String::from_utf8_lossy(head))
                .as_bytes(),
        )
    }

    /// True for a 2xx status.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Sends `request` and reads the whole answer with [`read_capped`], all within
/// `limits.timeout` (for small answers such as a session bootstrap; a query answer is
/// streamed by `ResponseMapper::fetch_evidence` instead).
///
/// Errors: [`ConnectorError::Timeout`] when the limit passes (or reqwest's own timeout
/// fires), [`ConnectorError::Unreachable`] for connection failures (refused, reset, the
/// server killed mid-answer), [`ConnectorError::BodyTooLarge`] over the cap.
pub async fn fetch(
    request: reqwest::RequestBuilder,
    limits: &ResponseLimits,
) -> Result<RawResponse, ConnectorError> {
    let call = async {
        let response = request.send().await.map_err(ConnectorError::from_reqwest)?;
        read_capped(response, limits.max_body_bytes).await
    };
    match tokio::time::timeout(limits.timeout, call).await {
        Ok(result) => result,
        Err(_) => Err(ConnectorError::Timeout(format!(
            "no complete answer within {} ms",
            limits.timeout.as_millis()
        ))),
    }
}

/// Reads a response body as a stream, refusing it as soon as it exceeds
/// `max_body_bytes` (also up front when `Content-Length` already says so). The answer
/// is complete or an error; it is never truncated.
pub async fn read_capped(
    response: reqwest::Response,
    max_body_bytes: usize,
) -> Result<RawResponse, ConnectorError> {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let declared = response.content_length();
    if declared.is_some_and(|len| len > max_body_bytes as u64) {
        return Err(ConnectorError::BodyTooLarge {
            limit: max_body_bytes,
        });
    }
    let initial = declared.map_or(64 * 1024, |len| len as usize);
    let mut body = BytesMut::with_capacity(initial.min(max_body_bytes));
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(ConnectorError::from_reqwest)?;
        if body.len() + chunk.len() > max_body_bytes {
            return Err(ConnectorError::BodyTooLarge {
                limit: max_body_bytes,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(RawResponse {
        status,
        content_type,
        body: body.freeze(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn limits(timeout_ms: u64) -> ResponseLimits {
        ResponseLimits {
            timeout: Duration::from_millis(timeout_ms),
            ..ResponseLimits::default()
        }
    }

    #[test]
    fn evaluation_timeouts() {
        let ms = Duration::from_millis;
        assert_eq!(limits(30_000).evaluation_timeout(None), ms(29_000));
        assert_eq!(limits(60_000).evaluation_timeout(None), ms(59_000));
        assert_eq!(limits(5_000).evaluation_timeout(None), ms(4_500));
        assert_eq!(limits(400).evaluation_timeout(None), ms(360));
        assert_eq!(limits(0).evaluation_timeout(None), ms(1), "never zero");
        assert_eq!(limits(400).evaluation_timeout(Some(ms(100))), ms(100));
        assert_eq!(limits(400).evaluation_timeout(Some(ms(900))), ms(400));
        assert_eq!(limits(400).evaluation_timeout(Some(ms(0))), ms(1));
    }

    proptest! {
        /// The evaluation timeout is positive and never above the call's time limit
        /// (when that is at least 1 ms), whatever is configured.
        #[test]
        fn evaluation_timeout_stays_within_the_call(
            limit_ms in 1u64..200_000,
            configured in proptest::option::of(0u64..400_000),
        ) {
            let t = limits(limit_ms).evaluation_timeout(configured.map(Duration::from_millis));
            prop_assert!(t > Duration::ZERO);
            prop_assert!(t <= Duration::from_millis(limit_ms));
            if configured.is_none() && limit_ms >= 10 {
                prop_assert!(t < Duration::from_millis(limit_ms), "leaves a margin");
            }
        }
    }

    fn streamed(chunks: Vec<Vec<u8>>) -> reqwest::Response {
        let stream = futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(Bytes::from(c))),
        );
        let body = reqwest::Body::wrap_stream(stream);
        http::Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(body)
            .map(reqwest::Response::from)
            .unwrap()
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// A body over the cap is always an error and never a shortened answer; a body
        /// within the cap always arrives complete.
        #[test]
        fn cap_refuses_never_truncates(
            chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..12),
            cap in 0usize..2000,
        ) {
            let total: Vec<u8> = chunks.concat();
            let result = run(read_capped(streamed(chunks), cap));
            if total.len() > cap {
                let is_too_large = matches!(result, Err(ConnectorError::BodyTooLarge { limit }) if limit == cap);
                prop_assert!(is_too_large);
            } else {
                let raw = result.unwrap();
                prop_assert_eq!(&raw.body[..], &total[..]);
                prop_assert_eq!(raw.content_type.as_deref(), Some("application/json"));
            }
        }
    }

    #[test]
    fn declared_length_over_cap_is_refused_before_reading() {
        let response = http::Response::builder()
            .status(200)
            .body(reqwest::Body::from(vec![b'x'; 100]))
            .map(reqwest::Response::from)
            .unwrap();
        let err = run(read_capped(response, 99)).unwrap_err();
        assert!(err.to_string().contains("narrow the query"), "{err}");
    }
}
