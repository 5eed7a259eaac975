//! The connector error: what goes wrong before a provider answer becomes a result.

use thiserror::Error;

/// Everything that can go wrong in a connector before a provider answer becomes a
/// result. Every variant maps to a structured failure (see `ResponseMapper::failure`).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConnectorError {
    /// The provider did not answer within the time limit.
    #[error("the provider did not answer in time: {0}")]
    Timeout(String),
    /// The provider could not be reached or dropped the connection (refused, reset,
    /// killed mid-answer).
    #[error("the provider is unreachable: {0}")]
    Unreachable(String),
    /// The response body is larger than the bound on the bytes read of one answer
    /// ([`ResponseLimits::max_body_bytes`](crate::ResponseLimits::max_body_bytes)). The
    /// answer is refused, never truncated.
    #[error(
        "the response is larger than the {limit}-byte limit: narrow the query (fewer series, \
         for example with sum by (...) or topk, or a larger step) and run it again"
    )]
    BodyTooLarge {
        /// The cap in bytes.
        limit: usize,
    },
    /// One part of a streamed response (a single series, or the envelope without its
    /// series) is larger than what is held at once. The answer is refused, never
    /// truncated.
    #[error(
        "one series of the response, or its envelope, is larger than the {limit}-byte limit: \
         narrow the query (fewer points per series with a larger step, or fewer labels) and \
         run it again"
    )]
    PartTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The body is not JSON.
    #[error("the response body is not JSON: {0}")]
    NotJson(String),
    /// The body is JSON but not a Prometheus `query_range` answer.
    #[error("the response is not a prometheus query_range answer: {0}")]
    InvalidResponse(String),
    /// A label sanitizer refused or failed.
    #[error("cannot sanitize labels: {0}")]
    Sanitize(String),
    /// The request could not be built.
    #[error("cannot build the request: {0}")]
    Request(String),
    /// A base URL's host is not in the package's network allowlist; nothing was sent.
    #[error("host {host} is not in the package's network allowlist; no request was sent")]
    HostNotAllowed {
        /// The refused host (and port, when the URL names one).
        host: String,
    },
    /// The deployment configuration is invalid (base URL, path template, target,
    /// allowlist entry); nothing was sent.
    #[error("invalid connector configuration: {0}")]
    Config(String),
    /// An opaque reference does not open for this target and package: edited, expired,
    /// for the other target, or sealed with a key that is not listed. Deliberately one
    /// error with one message.
    #[error("invalid reference: use an instanceRef returned by this tool for this target")]
    InvalidReference,
    /// The reference key ring is malformed, or sealing failed. Never holds key material.
    #[error("reference keys: {0}")]
    ReferenceKeys(String),

    /// The provider answered a discovery with series outside the request's scope (a
    /// front that ignores the scope matcher); nothing of the answer is passed on.
    #[error("the provider answered outside this ticket's scope: {0}")]
    OutOfScope(String),

    /// The result contract refused to build a result.
    #[error("cannot build the result: {0}")]
    Result(#[from] evidence_result::ResultError),
    /// The package layer refused (secret binding, output guard, audit record).
    #[error("package: {0}")]
    Package(#[from] evidence_package::error::PackageError),
}

impl ConnectorError {
    /// Classifies a reqwest error. The URL's query string and user info are left out of
    /// the message, so credentials passed as query parameters never reach it.
    pub(crate) fn from_reqwest(err: reqwest::Error) -> Self {
        let url = err.url().map(|u| {
            let mut u = u.clone();
            u.set_query(None);
            u.set_fragment(None);
            let _ = u.set_password(None);
            let _ = u.set_username("");
            u.to_string()
        });
        let timeout = err.is_timeout();
        let err = err.without_url();
        let mut message = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        if let Some(url) = url {
            message = format!("{message} ({url})");
        }
        if timeout {
            ConnectorError::Timeout(message)
        } else if err.is_builder() {
            ConnectorError::Request(message)
        } else {
            ConnectorError::Unreachable(message)
        }
    }
}
