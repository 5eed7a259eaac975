//! A query answer read from the Grafana page into evidence (or a discovery's answer): a 2xx body folded chunk by
//! chunk as it leaves the page (the same streaming compaction as Clinic's and Manus'),
//! any other status read whole, and an `/api/ds/query`-style error frame read as the
//! rejection it carries.

use evidence_result::{ErrorCode, Failure, FailureClass, Provider};
use serde_json::json;

use super::failures::command_failure;
use super::frame::{ErrorFrame, error_frame};
use super::page_fetch::{PageBody, ReadError};
use crate::prometheus::{
    Answer, BodyFold, Compaction, Feed, KeepLabels, MAX_HELD_BYTES, RETAINED_BODY_BYTES,
    RawResponse, ResponseMapper,
};

/// The answer (evidence, or a discovery's) whose body waits in the page, or the failure it means. The
/// body is read under the call's bounds (`max_body_bytes`, and the time limit the read
/// was opened with); the read is cancelled in the page on every early end.
pub(super) async fn query_evidence(
    mapper: &ResponseMapper,
    body: &mut PageBody<'_>,
    max_body_bytes: usize,
    compaction: &Compaction,
) -> Result<Answer, Box<Failure>> {
    let outcome = read_answer(mapper, body, max_body_bytes, compaction).await;
    body.close().await;
    outcome
}

async fn read_answer(
    mapper: &ResponseMapper,
    body: &mut PageBody<'_>,
    max_body_bytes: usize,
    compaction: &Compaction,
) -> Result<Answer, Box<Failure>> {
    let failed = |e: ReadError| match e {
        ReadError::Provider(e) => Box::new(mapper.failure(&e)),
        ReadError::Browser(f) => command_failure(&f, mapper.redactor()),
    };
    let status = body.status;
    if !(200..300).contains(&status) {
        // An error answer is read whole, as Clinic's is (at most MAX_HELD_BYTES).
        let bytes = body
            .read_whole(max_body_bytes.min(MAX_HELD_BYTES))
            .await
            .map_err(failed)?;
        let raw = RawResponse::new(status, body.content_type.clone(), bytes);
        if let Some(frame) = error_frame(&raw.body) {
            return Err(Box::new(frame_failure(mapper, &raw, frame)));
        }
        return mapper
            .answer(&raw, compaction, &KeepLabels)
            .map_err(Box::new);
    }
    let mut fold = BodyFold::new(compaction, max_body_bytes, RETAINED_BODY_BYTES);
    while let Some(chunk) = body.next().await.map_err(failed)? {
        match fold.feed(&chunk) {
            Ok(Feed::More) => {}
            Ok(Feed::Enough) => break,
            Err(e) => return Err(Box::new(mapper.failure(&e))),
        }
    }
    let folded = fold.finish();
    // A 2xx body that is no Prometheus answer may be an error frame: read as one when
    // it was short enough to be held whole (an error frame is a few kilobytes).
    if !folded.answered()
        && let Some(whole) = folded.whole()
        && let Some(frame) = error_frame(whole)
    {
        let raw = RawResponse::new(status, body.content_type.clone(), whole.to_vec());
        return Err(Box::new(frame_failure(mapper, &raw, frame)));
    }
    mapper
        .folded_answer(
            status,
            body.content_type.clone(),
            folded,
            compaction,
            &KeepLabels,
        )
        .map_err(Box::new)
}

/// The failure of an `/api/ds/query`-style error frame: the frame's status (the HTTP
/// status when it gives none), its `errorType`, the complete redacted text, and the
/// digest of the raw body as it arrived.
pub(super) fn frame_failure(
    mapper: &ResponseMapper,
    raw: &RawResponse,
    frame: ErrorFrame,
) -> Failure {
    let status = frame
        .status
        .filter(|s| !(200..300).contains(s))
        .unwrap_or(raw.status);
    let mut envelope = json!({"status": "error", "error": frame.error});
    if let Some(t) = &frame.error_type {
        envelope["errorType"] = json!(t);
    }
    let as_prometheus = RawResponse::new(status, raw.content_type.clone(), envelope.to_string());
    let mut failure = match mapper.evidence(&as_prometheus, &Compaction::default(), &KeepLabels) {
        Err(f) => f,
        Ok(_) => Failure::new(
            ErrorCode::http(Provider::Wetech, status),
            FailureClass::ProviderUnavailable,
            mapper.redactor().redact(&frame.error),
        ),
    };
    failure.error.http_status = Some(status);
    failure.error.body_digest = Some(raw.body_digest(mapper.redactor()));
    failure
}
