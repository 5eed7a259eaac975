#![doc = include_str!("../README.md")]

mod address;
mod clinic;
mod codes;
mod compact_address;
mod connector;
mod error;
mod manus;
mod prometheus;
mod reference;
mod tls;
#[cfg(feature = "wetech")]
mod wetech;

pub use clinic::{ClinicConfig, ClinicConnector, ClinicSecrets};
pub use connector::{Connector, HostAllowlist};
pub use error::ConnectorError;
pub use manus::{ManusConfig, ManusConnector, ManusSecrets};
pub use prometheus::{
    CUT_MARK, DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_BODY_BYTES, DEFAULT_TOP_K,
    EVALUATION_TIMEOUT_MARGIN, MAX_EVIDENCE_BYTES, MAX_HELD_BYTES, MAX_LABEL_CHARS,
    MAX_TRACKED_SERIES, RETAINED_BODY_BYTES, ResponseLimits,
};
pub use reference::{ReferenceKeyRing, ReferenceScope};
#[cfg(feature = "wetech")]
pub use wetech::{
    Brand, BrowserConfig, BrowserIdentity, DEFAULT_CHROMIUM_ARGS, StorageState, WebDriverEndpoint,
    WetechConfig, WetechConnector, WetechSecrets, user_agent_for,
};

/// Items that exist for tests and benches. Not part of the stable interface: they may
/// change or go away in any release.
#[doc(hidden)]
pub mod internal {
    use evidence_result::{ErrorCode, FailureClass};

    pub use crate::address::AddressSealer;
    pub use crate::prometheus::{
        Compaction, FORM_CONTENT_TYPE, KeepLabels, LabelSanitizer, QueryRange, QueryRangeResponse,
        REDACTED, RawResponse, Redactor, ResponseMapper, ResponseStatus, Series, fetch,
        read_capped,
    };
    #[cfg(feature = "wetech")]
    pub use crate::wetech::browser_identity;

    /// Every code the connectors can produce, with its class (each
    /// HTTP status family as one code per status from 100 to 599).
    pub fn connector_codes() -> Vec<(ErrorCode, FailureClass)> {
        crate::codes::all_codes()
    }
}
