//! A 2xx answer body read chunk by chunk, whatever carries the chunks (an HTTP body for
//! Clinic and Manus, script answers from a browser page for Wetech): the total
//! bound, the streaming fold, and the first bytes kept for a failure's digest.

use super::compact::Compaction;
use super::parse::ResponseStatus;
use super::stream::{StreamCompactor, Streamed};
use crate::ConnectorError;

/// What the reader of a body should do after a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feed {
    /// Read the next chunk.
    More,
    /// Stop reading: the body already failed and what is retained of it is complete;
    /// the rest is not needed (cancel the read).
    Enough,
}

/// A 2xx body being folded as it arrives (see `stream.rs`). What is held at once: the
/// fold's own bound ([`MAX_HELD_BYTES`](super::MAX_HELD_BYTES)) and the first
/// [`RETAINED_BODY_BYTES`](super::RETAINED_BODY_BYTES) of the body.
#[derive(Debug)]
pub(crate) struct BodyFold {
    parser: StreamCompactor,
    retained: Vec<u8>,
    total: usize,
    max_body_bytes: usize,
    retain: usize,
    failed: Option<ConnectorError>,
}

/// A body read to its end, or up to the point its failure was known.
#[derive(Debug)]
pub(crate) struct FoldedBody {
    /// The fold, or the error that ended it.
    pub(crate) outcome: Result<Streamed, ConnectorError>,
    /// The first bytes of the body (all of it when it was short).
    pub(crate) retained: Vec<u8>,
    /// How many bytes were read.
    pub(crate) total: usize,
}

impl BodyFold {
    /// A fold for `compaction` (its top k highest peaks, its census), refusing a body
    /// over `max_body_bytes` and keeping the first `retain` bytes for a failure's digest
    /// and excerpt.
    pub(crate) fn new(compaction: &Compaction, max_body_bytes: usize, retain: usize) -> Self {
        BodyFold {
            parser: StreamCompactor::with_census(compaction.top_k, compaction.census()),
            retained: Vec::new(),
            total: 0,
            max_body_bytes,
            retain,
            failed: None,
        }
    }

    /// Reads the next chunk.
    ///
    /// Errors (stop reading, cancel the read, map the error):
    /// [`ConnectorError::BodyTooLarge`] once the body passes `max_body_bytes`,
    /// [`ConnectorError::PartTooLarge`] when one series or the envelope grows past the
    /// fold's bound.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<Feed, ConnectorError> {
        self.total = self.total.saturating_add(chunk.len());
        if self.total > self.max_body_bytes {
            return Err(ConnectorError::BodyTooLarge {
                limit: self.max_body_bytes,
            });
        }
        let room = self.retain.saturating_sub(self.retained.len());
        self.retained
            .extend_from_slice(&chunk[..chunk.len().min(room)]);
        if self.failed.is_none()
            && let Err(e) = self.parser.feed(chunk)
        {
            if matches!(e, ConnectorError::PartTooLarge { .. }) {
                return Err(e);
            }
            self.failed = Some(e);
        }
        // After a failure the body is only read on while it may still fit in what is
        // retained, so that a short failing body maps as a buffered one.
        if self.failed.is_some() && self.total > self.retain {
            return Ok(Feed::Enough);
        }
        Ok(Feed::More)
    }

    /// Ends the body (its last chunk was read, or [`Feed::Enough`] said to stop).
    pub(crate) fn finish(self) -> FoldedBody {
        let outcome = match self.failed {
            Some(e) => Err(e),
            None => self.parser.finish(),
        };
        FoldedBody {
            outcome,
            retained: self.retained,
            total: self.total,
        }
    }
}

impl FoldedBody {
    /// True when the body was read whole as a Prometheus `success` envelope.
    pub(crate) fn answered(&self) -> bool {
        self.outcome
            .as_ref()
            .is_ok_and(|s| s.status == ResponseStatus::Success)
    }

    /// The whole body, when it was read to its end and every byte of it retained (a
    /// short body): a failure is then mapped exactly as a buffered body's.
    pub(crate) fn whole(&self) -> Option<&[u8]> {
        (self.total == self.retained.len()).then_some(self.retained.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &[u8] = br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1,"2.5"]]}]}}"#;

    #[test]
    fn a_body_over_the_bound_is_refused_at_the_chunk_that_passes_it() {
        let mut fold = BodyFold::new(&Compaction::new(1), ANSWER.len() - 1, 1 << 20);
        let (head, tail) = ANSWER.split_at(ANSWER.len() - 2);
        assert_eq!(fold.feed(head).unwrap(), Feed::More);
        let err = fold.feed(tail).unwrap_err();
        assert!(matches!(err, ConnectorError::BodyTooLarge { limit } if limit == ANSWER.len() - 1));
        let mut fold = BodyFold::new(&Compaction::new(1), ANSWER.len(), 1 << 20);
        for piece in ANSWER.chunks(5) {
            assert_eq!(fold.feed(piece).unwrap(), Feed::More);
        }
        let folded = fold.finish();
        assert_eq!(folded.whole(), Some(ANSWER));
        assert_eq!(folded.outcome.unwrap().summary.point_count, 1);
    }

    #[test]
    fn a_failed_body_is_read_on_only_while_it_fits_in_what_is_retained() {
        let head: &[u8] = br#"{"status":"success","data":{"resultType":"matrix","result":["#;
        let mut fold = BodyFold::new(&Compaction::new(1), usize::MAX, head.len() + 8);
        assert_eq!(fold.feed(head).unwrap(), Feed::More);
        // A comma where a series must start: the body failed, but still fits.
        assert_eq!(fold.feed(b",").unwrap(), Feed::More);
        assert_eq!(fold.feed(b"0123456789").unwrap(), Feed::Enough);
        let folded = fold.finish();
        assert!(matches!(folded.outcome, Err(ConnectorError::NotJson(_))));
        assert_eq!(folded.total, head.len() + 11);
        assert_eq!(folded.retained, [head, b",0123456"].concat());
        assert_eq!(folded.whole(), None);
        assert!(!folded.answered());
    }
}
