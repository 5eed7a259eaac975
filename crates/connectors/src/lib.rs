#![doc = include_str!("../README.md")]

mod address;
mod clinic;
mod connector;
mod error;
mod manus;
mod prometheus;
mod reference;
#[cfg(feature = "wetech")]
mod wetech;

pub use clinic::{ClinicConfig, ClinicConnector, ClinicSecrets};
pub use connector::{Connector, HostAllowlist};
pub use error::ConnectorError;
pub use manus::{DEFAULT_REFERENCE_TTL, ManusConfig, ManusConnector, ManusSecrets};
pub use prometheus::{
    Compaction, DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_BODY_BYTES, DEFAULT_TOP_K, FORM_CONTENT_TYPE,
    KeepLabels, LabelSanitizer, QueryRange, QueryRangeResponse, REDACTED, RawResponse, Redactor,
    ResponseLimits, ResponseMapper, ResponseStatus, Series, fetch, read_capped,
};
pub use reference::{ReferenceKeyRing, ReferenceScope};
#[cfg(feature = "wetech")]
pub use wetech::{
    Brand, BrowserConfig, BrowserIdentity, DEFAULT_CHROMIUM_ARGS, StorageState, WebDriverEndpoint,
    WetechConfig, WetechConnector, WetechSecrets, user_agent_for,
};
