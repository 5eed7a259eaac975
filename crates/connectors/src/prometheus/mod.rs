//! Shared Prometheus handling for the three connectors: `query_range` requests, capped
//! streamed reads, streaming and typed parsing, compaction, discovery answers and the
//! provider metadata of their names, credential redaction and error mapping.

mod answer;
mod body;
mod bound;
mod census;
mod compact;
mod discover;
mod fetch;
mod fit;
mod mapping;
mod metadata;
mod parse;
mod redact;
mod request;
mod sanitize;
mod stream;
mod summary;

pub use answer::Answer;
pub(crate) use body::{BodyFold, Feed};
pub use bound::{CUT_MARK, MAX_LABEL_CHARS};
pub use census::{MAX_CENSUS_LABELS, MAX_CENSUS_PREFIXES, MAX_CENSUS_VALUES};
pub use compact::{Compaction, DEFAULT_TOP_K};
pub use discover::MAX_LISTED_PREFIXES;
pub use fetch::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_BODY_BYTES, EVALUATION_TIMEOUT_MARGIN, RawResponse,
    ResponseLimits, fetch, read_capped,
};
pub use fit::MAX_EVIDENCE_BYTES;
pub use mapping::{RETAINED_BODY_BYTES, ResponseMapper};
pub use metadata::{MAX_HELP_CHARS, MAX_WORD_CHARS, METADATA_BODY_BYTES, METADATA_CONCURRENCY};
pub(crate) use metadata::{complete_metadata, fetch_http as fetch_metadata, metadata_url};
pub use parse::{QueryRangeResponse, ResponseStatus, Series};
pub use redact::{REDACTED, Redactor};
pub use request::{FORM_CONTENT_TYPE, QueryRange};
pub use sanitize::{KeepLabels, LabelSanitizer};
pub use stream::MAX_HELD_BYTES;
pub use summary::MAX_TRACKED_SERIES;
