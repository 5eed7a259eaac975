//! The Prometheus `query_range` request: expression, window, step and timeout, encoded
//! as a form body.

use std::time::Duration;

use evidence_result::evidence::EvidenceWindow;
use reqwest::header::{CONTENT_TYPE, HeaderValue};

/// The content type of a form-encoded `query_range` body.
pub const FORM_CONTENT_TYPE: &str = "application/x-www-form-urlencoded";

/// One Prometheus `query_range` request: expression, window, step and an optional
/// server-side `timeout` parameter.
///
/// The expression is the locked one (scope matchers already injected); this type only
/// encodes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryRange {
    expr: String,
    window: EvidenceWindow,
    timeout: Option<Duration>,
}

impl QueryRange {
    /// A request for `expr` over `window` (start, end, step in seconds).
    pub fn new(expr: impl Into<String>, window: EvidenceWindow) -> Self {
        QueryRange {
            expr: expr.into(),
            window,
            timeout: None,
        }
    }

    /// Adds Prometheus' `timeout` parameter (evaluation timeout on the server).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The expression.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// The window and step.
    pub fn window(&self) -> EvidenceWindow {
        self.window
    }

    /// The server-side timeout, if set.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The parameters in order: `query`, `start`, `end`, `step`, then `timeout` when set.
    /// Times are Unix seconds, step and timeout are seconds (Prometheus reads plain
    /// numbers as seconds).
    pub fn params(&self) -> Vec<(&'static str, String)> {
        let mut params = vec![
            ("query", self.expr.clone()),
            ("start", self.window.start.to_string()),
            ("end", self.window.end.to_string()),
            ("step", self.window.step_seconds.to_string()),
        ];
        if let Some(timeout) = self.timeout {
            params.push(("timeout", timeout.as_secs_f64().to_string()));
        }
        params
    }

    /// The `application/x-www-form-urlencoded` body for a `POST`.
    pub fn form_body(&self) -> String {
        url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(self.params())
            .finish()
    }

    /// A `POST` of the form body to `url` (a full `.../api/v1/query_range` URL). The
    /// caller adds its credentials.
    pub fn post(&self, client: &reqwest::Client, url: url::Url) -> reqwest::RequestBuilder {
        client
            .post(url)
            .header(CONTENT_TYPE, HeaderValue::from_static(FORM_CONTENT_TYPE))
            .body(self.form_body())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_and_form_body() {
        let q = QueryRange::new(
            r#"sum by (instance) (rate(x{cluster_id="c 1"}[1m]))"#,
            EvidenceWindow {
                start: 100,
                end: 400,
                step_seconds: 15,
            },
        )
        .with_timeout(Duration::from_millis(1500));
        let params = q.params();
        assert_eq!(params[1], ("start", "100".to_owned()));
        assert_eq!(params[3], ("step", "15".to_owned()));
        assert_eq!(params[4], ("timeout", "1.5".to_owned()));
        let decoded: Vec<(String, String)> = url::form_urlencoded::parse(q.form_body().as_bytes())
            .into_owned()
            .collect();
        assert_eq!(decoded[0].1, q.expr());
        assert_eq!(decoded.len(), 5);
    }
}
