#![doc = include_str!("../README.md")]

mod error;
mod prometheus;

pub use error::ConnectorError;
pub use prometheus::{
    Compaction, DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_BODY_BYTES, DEFAULT_TOP_K, FORM_CONTENT_TYPE,
    KeepLabels, LabelSanitizer, QueryRange, QueryRangeResponse, REDACTED, RawResponse, Redactor,
    ResponseLimits, ResponseMapper, ResponseStatus, Series, fetch, read_capped,
};
