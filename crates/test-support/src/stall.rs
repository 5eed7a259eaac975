//! Answers that never end, for the deadline tests: headers and the start of a body at
//! once, then one byte every so often, forever (a provider dripping a huge answer, a
//! page whose document never finishes loading). The connection stays busy and alive,
//! so only the client's own deadline ends the exchange.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

/// The start of a Prometheus `query_range` success body: what a dripping answer sends
/// before its first pause.
pub(crate) const MATRIX_START: &[u8] =
    br#"{"status":"success","data":{"resultType":"matrix","result":["#;

/// A 200 answer of `content_type` that sends `start` at once, then one space every
/// `every`, and never ends.
pub(crate) fn dripping(
    content_type: &'static str,
    start: &'static [u8],
    every: Duration,
) -> Response {
    let first =
        futures::stream::once(async move { Ok::<_, std::io::Error>(Bytes::from_static(start)) });
    let drip = futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(every).await;
        Some((Ok(Bytes::from_static(b" ")), ()))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(CONTENT_TYPE, content_type)
        .body(Body::from_stream(futures::StreamExt::chain(first, drip)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
