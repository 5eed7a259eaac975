#![doc = include_str!("../README.md")]

mod address;
mod clinic;
mod codes;
mod compact_address;
mod connector;
mod deadline;
mod error;
mod manus;
mod prometheus;
pub mod reference;
mod tls;
#[cfg(feature = "wetech")]
pub mod wetech;

pub use clinic::{ClinicConfig, ClinicConnector, ClinicSecrets};
pub use connector::{CloseError, Connector, HostAllowlist};
pub use deadline::{
    CutOff, Deadline, DeadlinePassed, NARROWER_MAY_HELP, NARROWER_WILL_NOT_HELP, deadline_failure,
};
pub use error::ConnectorError;
pub use manus::{ManusConfig, ManusConnector, ManusSecrets};
pub use prometheus::ResponseLimits;
pub use reference::ReferenceKeyRing;

/// The bounds every answer is held to: call time, body size, series tracked and kept,
/// label length, the size of one query's evidence, a discovery's census and the
/// provider metadata of its names.
pub mod limits {
    pub use crate::prometheus::{
        CUT_MARK, DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_BODY_BYTES, DEFAULT_TOP_K,
        EVALUATION_TIMEOUT_MARGIN, MAX_CENSUS_LABELS, MAX_CENSUS_PREFIXES, MAX_CENSUS_VALUES,
        MAX_EVIDENCE_BYTES, MAX_HELD_BYTES, MAX_HELP_CHARS, MAX_LABEL_CHARS, MAX_LISTED_PREFIXES,
        MAX_TRACKED_SERIES, MAX_WORD_CHARS, METADATA_BODY_BYTES, METADATA_CONCURRENCY,
        RETAINED_BODY_BYTES,
    };
}
#[cfg(feature = "wetech")]
pub use wetech::{
    BrowserConfig, BrowserReuse, WebDriverEndpoint, WetechConfig, WetechConnector, WetechSecrets,
};

/// Items that exist for tests and benches. Not part of the stable interface: they may
/// change or go away in any release.
#[doc(hidden)]
pub mod internal {
    use evidence_result::{ErrorCode, FailureClass};

    pub use crate::address::AddressSealer;
    pub use crate::prometheus::{
        Answer, Compaction, FORM_CONTENT_TYPE, KeepLabels, LabelSanitizer, QueryRange,
        QueryRangeResponse, REDACTED, RawResponse, Redactor, ResponseMapper, ResponseStatus,
        Series, fetch, read_capped,
    };
    #[cfg(feature = "wetech")]
    pub use crate::wetech::browser_identity;

    /// Every code the connectors can produce, with its class (each
    /// HTTP status family as one code per status from 100 to 599).
    pub fn connector_codes() -> Vec<(ErrorCode, FailureClass)> {
        crate::codes::all_codes()
    }
}
