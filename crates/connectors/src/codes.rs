//! Every error code the connectors produce, named once with the
//! class it carries: the fixed codes ([`Code`]), the codes named by provider origin
//! ([`OriginCode`]) and the two HTTP status families (provider answers and the Manus
//! session bootstrap). Failures take their code and class from here; the tests check
//! every one against the contract's table, `evidence_result::codes::ERROR_CODES`.

use evidence_result::FailureClass::{
    self, Authentication, BrowserRuntime, Internal, InvalidArgument, ProviderUnavailable,
    QueryRejected, Readiness, SessionBootstrap, Timeout,
};
use evidence_result::{ErrorCode, Provider};

/// A fixed code a connector produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    InvalidReference,
    ResultContract,
    ClinicEmptyBatch,
    ClinicWrongPackage,
    ManusWrongPackage,
    WetechWrongPackage,
    ManusInvalidRequest,
    WetechInvalidRequest,
    ManusNoTarget,
    ManusSessionTimeout,
    ManusSessionUnavailable,
    ManusSessionInvalidResponse,
    WetechStorageStateInvalid,
    WetechUserAgentMismatch,
    WetechInvalidUrl,
    WetechBrowserStartFailed,
    WetechBrowserLost,
    WetechBrowserCommandFailed,
    WetechCleanupFailed,
    GrafanaNotReady,
    GrafanaLoginRedirect,
    GrafanaCookieRejected,
}

/// The class of every Manus session bootstrap failure, HTTP statuses included.
pub(crate) const MANUS_SESSION_CLASS: FailureClass = SessionBootstrap;

impl Code {
    /// Every fixed code, in declaration order.
    pub(crate) const ALL: [Code; 22] = [
        Code::InvalidReference,
        Code::ResultContract,
        Code::ClinicEmptyBatch,
        Code::ClinicWrongPackage,
        Code::ManusWrongPackage,
        Code::WetechWrongPackage,
        Code::ManusInvalidRequest,
        Code::WetechInvalidRequest,
        Code::ManusNoTarget,
        Code::ManusSessionTimeout,
        Code::ManusSessionUnavailable,
        Code::ManusSessionInvalidResponse,
        Code::WetechStorageStateInvalid,
        Code::WetechUserAgentMismatch,
        Code::WetechInvalidUrl,
        Code::WetechBrowserStartFailed,
        Code::WetechBrowserLost,
        Code::WetechBrowserCommandFailed,
        Code::WetechCleanupFailed,
        Code::GrafanaNotReady,
        Code::GrafanaLoginRedirect,
        Code::GrafanaCookieRejected,
    ];

    /// The snake_case code.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Code::InvalidReference => "invalid_reference",
            Code::ResultContract => "result_contract",
            Code::ClinicEmptyBatch => "clinic_empty_batch",
            Code::ClinicWrongPackage => "clinic_wrong_package",
            Code::ManusWrongPackage => "manus_wrong_package",
            Code::WetechWrongPackage => "wetech_wrong_package",
            Code::ManusInvalidRequest => "manus_invalid_request",
            Code::WetechInvalidRequest => "wetech_invalid_request",
            Code::ManusNoTarget => "manus_no_target",
            Code::ManusSessionTimeout => "manus_session_timeout",
            Code::ManusSessionUnavailable => "manus_session_unavailable",
            Code::ManusSessionInvalidResponse => "manus_session_invalid_response",
            Code::WetechStorageStateInvalid => "wetech_storage_state_invalid",
            Code::WetechUserAgentMismatch => "wetech_user_agent_mismatch",
            Code::WetechInvalidUrl => "wetech_invalid_url",
            Code::WetechBrowserStartFailed => "wetech_browser_start_failed",
            Code::WetechBrowserLost => "wetech_browser_lost",
            Code::WetechBrowserCommandFailed => "wetech_browser_command_failed",
            Code::WetechCleanupFailed => "wetech_cleanup_failed",
            Code::GrafanaNotReady => "grafana_not_ready",
            Code::GrafanaLoginRedirect => "grafana_login_redirect",
            Code::GrafanaCookieRejected => "grafana_cookie_rejected",
        }
    }

    /// The failure class the code carries.
    pub(crate) fn class(self) -> FailureClass {
        match self {
            Code::InvalidReference => InvalidArgument,
            Code::ManusSessionTimeout
            | Code::ManusSessionUnavailable
            | Code::ManusSessionInvalidResponse => MANUS_SESSION_CLASS,
            Code::WetechStorageStateInvalid
            | Code::GrafanaLoginRedirect
            | Code::GrafanaCookieRejected => Authentication,
            Code::WetechUserAgentMismatch
            | Code::WetechBrowserStartFailed
            | Code::WetechBrowserLost => BrowserRuntime,
            Code::GrafanaNotReady => Readiness,
            Code::ResultContract
            | Code::ClinicEmptyBatch
            | Code::ClinicWrongPackage
            | Code::ManusWrongPackage
            | Code::WetechWrongPackage
            | Code::ManusInvalidRequest
            | Code::WetechInvalidRequest
            | Code::ManusNoTarget
            | Code::WetechInvalidUrl
            | Code::WetechBrowserCommandFailed
            | Code::WetechCleanupFailed => Internal,
        }
    }

    /// The error code. Every code is a valid snake_case identifier (tested), so the
    /// fallback is never taken.
    pub(crate) fn code(self) -> ErrorCode {
        ErrorCode::new(self.as_str()).unwrap_or_else(|_| ErrorCode::output_blocked())
    }

    /// The `<package>_wrong_package` code of a provider's connector.
    pub(crate) fn wrong_package(provider: Provider) -> Code {
        match provider {
            Provider::Clinic => Code::ClinicWrongPackage,
            Provider::Manus => Code::ManusWrongPackage,
            Provider::Wetech => Code::WetechWrongPackage,
        }
    }
}

/// A code named by provider origin: `<origin>_<suffix>`, the origin being `clinic`,
/// `manus` or `grafana` as in [`ErrorCode::http`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OriginCode {
    Timeout,
    Unavailable,
    ResponseTooLarge,
    NonJsonBody,
    InvalidResponse,
    SanitizeFailed,
    RequestFailed,
    HostNotAllowed,
    InvalidConfiguration,
    ReferenceKeys,
    ResultContract,
    Package,
    OutOfScope,
}

impl OriginCode {
    /// Every origin code, in declaration order.
    pub(crate) const ALL: [OriginCode; 13] = [
        OriginCode::Timeout,
        OriginCode::Unavailable,
        OriginCode::ResponseTooLarge,
        OriginCode::NonJsonBody,
        OriginCode::InvalidResponse,
        OriginCode::SanitizeFailed,
        OriginCode::RequestFailed,
        OriginCode::HostNotAllowed,
        OriginCode::InvalidConfiguration,
        OriginCode::ReferenceKeys,
        OriginCode::ResultContract,
        OriginCode::Package,
        OriginCode::OutOfScope,
    ];

    /// The suffix after the origin.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            OriginCode::Timeout => "timeout",
            OriginCode::Unavailable => "unavailable",
            OriginCode::ResponseTooLarge => "response_too_large",
            OriginCode::NonJsonBody => "non_json_body",
            OriginCode::InvalidResponse => "invalid_response",
            OriginCode::SanitizeFailed => "sanitize_failed",
            OriginCode::RequestFailed => "request_failed",
            OriginCode::HostNotAllowed => "host_not_allowed",
            OriginCode::InvalidConfiguration => "invalid_configuration",
            OriginCode::ReferenceKeys => "reference_keys",
            OriginCode::ResultContract => "result_contract",
            OriginCode::Package => "package",
            OriginCode::OutOfScope => "out_of_scope",
        }
    }

    /// The failure class the code carries.
    pub(crate) fn class(self) -> FailureClass {
        match self {
            OriginCode::Timeout => Timeout,
            OriginCode::Unavailable | OriginCode::NonJsonBody | OriginCode::InvalidResponse => {
                ProviderUnavailable
            }
            OriginCode::ResponseTooLarge => QueryRejected,
            OriginCode::SanitizeFailed
            | OriginCode::RequestFailed
            | OriginCode::HostNotAllowed
            | OriginCode::InvalidConfiguration
            | OriginCode::ReferenceKeys
            | OriginCode::ResultContract
            | OriginCode::Package
            | OriginCode::OutOfScope => Internal,
        }
    }

    /// The error code of `provider`'s origin.
    pub(crate) fn code(self, provider: Provider) -> ErrorCode {
        ErrorCode::new(format!("{}_{}", origin(provider), self.suffix()))
            .unwrap_or_else(|_| ErrorCode::http(provider, 0))
    }
}

/// The origin that names a provider's codes: `clinic`, `manus` or `grafana`.
pub(crate) fn origin(provider: Provider) -> &'static str {
    match provider {
        Provider::Clinic => "clinic",
        Provider::Manus => "manus",
        Provider::Wetech => "grafana",
    }
}

/// The class of a provider's HTTP answer (`ErrorCode::http`): 400 and 422 (and a 2xx
/// `bad_data` or `execution`) are `query_rejected`, 401 `authentication`, 403
/// `authorization`, 408, 504 and a `timeout` error type `timeout`, 429 and 5xx
/// `provider_unavailable`, anything else `internal`.
pub(crate) fn http_class(status: u16, error_type: Option<&str>) -> FailureClass {
    match (status, error_type) {
        (400 | 422, _) => QueryRejected,
        (401, _) => Authentication,
        (403, _) => FailureClass::Authorization,
        (408 | 504, _) | (503, Some("timeout")) => Timeout,
        (429 | 500..=599, _) => ProviderUnavailable,
        (200..=299, Some("bad_data" | "execution")) => QueryRejected,
        (200..=299, Some("timeout")) => Timeout,
        (200..=299, _) => ProviderUnavailable,
        _ => Internal,
    }
}

/// The code of a Manus session bootstrap refused with an HTTP status:
/// `manus_session_http_<status>`, class [`MANUS_SESSION_CLASS`].
pub(crate) fn manus_session_http(status: u16) -> ErrorCode {
    ErrorCode::new(format!("manus_session_http_{status}"))
        .unwrap_or_else(|_| ErrorCode::http(Provider::Manus, status))
}

/// Every code the connectors can produce, with its class: the fixed
/// codes, every origin code of every provider, and a sample of each HTTP family.
pub(crate) fn all_codes() -> Vec<(ErrorCode, FailureClass)> {
    let providers = [Provider::Clinic, Provider::Manus, Provider::Wetech];
    let mut codes: Vec<(ErrorCode, FailureClass)> =
        Code::ALL.iter().map(|c| (c.code(), c.class())).collect();
    for provider in providers {
        codes.extend(
            OriginCode::ALL
                .iter()
                .map(|c| (c.code(provider), c.class())),
        );
    }
    for status in 100..=599 {
        for error_type in [None, Some("bad_data"), Some("execution"), Some("timeout")] {
            for provider in providers {
                codes.push((
                    ErrorCode::http(provider, status),
                    http_class(status, error_type),
                ));
            }
        }
        codes.push((manus_session_http(status), MANUS_SESSION_CLASS));
    }
    codes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_in_the_contract_table_with_its_class() {
        for c in Code::ALL {
            assert_eq!(ErrorCode::new(c.as_str()).unwrap().as_str(), c.as_str());
        }
        for (code, class) in all_codes() {
            assert!(
                evidence_result::codes::is_known(code.as_str(), class),
                "{code} ({class}) is not in ERROR_CODES"
            );
        }
    }
}
