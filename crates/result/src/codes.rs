//! Every error code a model can receive, with its failure class, in one table:
//! [`ERROR_CODES`]. Each crate that produces codes tests that every code it can produce is
//! listed here with the class it uses, so a caller can match on codes knowing the list is
//! complete.

use crate::FailureClass::{
    self, Authentication, Authorization, BrowserRuntime, Internal, InvalidArgument, OutputBlocked,
    PolicyViolation, ProviderUnavailable, QueryRejected, Readiness, SessionBootstrap, Timeout,
};

/// The codes a [`KnownCode`] entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeName {
    /// Exactly this code.
    Exact(&'static str),
    /// One code per provider origin: `clinic_<suffix>`, `manus_<suffix>` and
    /// `grafana_<suffix>` (the origins of [`crate::ErrorCode::http`]).
    PerOrigin(&'static str),
    /// One code per HTTP status: the prefix followed by the status in decimal, e.g.
    /// `clinic_http_` names `clinic_http_422`.
    HttpStatus(&'static str),
}

/// The provider origins a [`CodeName::PerOrigin`] entry expands to.
pub const CODE_ORIGINS: [&str; 3] = ["clinic", "manus", "grafana"];

impl CodeName {
    /// True when `code` is one of the codes this name stands for.
    pub fn matches(self, code: &str) -> bool {
        match self {
            CodeName::Exact(name) => code == name,
            CodeName::PerOrigin(suffix) => CODE_ORIGINS.iter().any(|origin| {
                code.strip_prefix(origin)
                    .and_then(|rest| rest.strip_prefix('_'))
                    == Some(suffix)
            }),
            CodeName::HttpStatus(prefix) => code.strip_prefix(prefix).is_some_and(|status| {
                (1..=3).contains(&status.len()) && status.bytes().all(|b| b.is_ascii_digit())
            }),
        }
    }
}

/// Which part of the workspace produces a code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeSource {
    /// Locking the model's arguments against the trusted policy (`evidence-policy`).
    Lock,
    /// A connector talking to its provider (`evidence-connectors`).
    Connector,
    /// The sandbox call around the connector (`evidence-tool`): policy verification,
    /// argument JSON, a connector result the contract refused.
    Sandbox,
    /// The output guard (`evidence-package`).
    Guard,
    /// Turn control refusing a call without running it (`evidence-materialize`).
    Turn,
    /// Reading the runtime context of a tool sandbox (environment, envelope, secrets,
    /// package) before any call can run.
    RuntimeContext,
}

/// One entry of [`ERROR_CODES`]: the codes it names, the classes they carry and who
/// produces them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KnownCode {
    /// The code, or the family of codes.
    pub name: CodeName,
    /// The class the codes carry: exactly one for an exact or per-origin code; for an
    /// HTTP status family, every class some status maps to (the class follows the
    /// status).
    pub classes: &'static [FailureClass],
    /// Who produces the codes.
    pub source: CodeSource,
}

impl KnownCode {
    /// True when codes of this entry may carry `class`.
    pub fn allows(&self, class: FailureClass) -> bool {
        self.classes.contains(&class)
    }
}

const fn exact(
    name: &'static str,
    class: &'static [FailureClass],
    source: CodeSource,
) -> KnownCode {
    KnownCode {
        name: CodeName::Exact(name),
        classes: class,
        source,
    }
}

const fn per_origin(suffix: &'static str, class: &'static [FailureClass]) -> KnownCode {
    KnownCode {
        name: CodeName::PerOrigin(suffix),
        classes: class,
        source: CodeSource::Connector,
    }
}

/// The classes an HTTP status of a Prometheus-style provider maps to: 400 and 422 (and a
/// 2xx `bad_data` or `execution`) are `query_rejected`, 401 `authentication`, 403
/// `authorization`, 408, 504 and a `timeout` error type `timeout`, 429 and 5xx
/// `provider_unavailable`, anything else `internal`.
const HTTP_CLASSES: &[FailureClass] = &[
    QueryRejected,
    Authentication,
    Authorization,
    Timeout,
    ProviderUnavailable,
    Internal,
];

/// Every error code a model can receive, with its class and its producer.
///
/// The runtime-context entries (source [`CodeSource::RuntimeContext`]) are the failures
/// of a tool sandbox whose runtime context cannot be read; they stop the turn, so each
/// has a shared class:
/// - `runtime_context_missing` and `runtime_context_invalid` are `authorization`: the
///   runtime did not deliver a usable trusted policy or verification keys (unset,
///   unreadable or malformed), so no call is authorized; nothing the model sends can
///   change that. `policy_verification_failed` (the sandbox call) is `authorization` for
///   the same reason: the policy does not authorize this exact package digest.
///   `session_missing`, `session_unknown` and `session_expired` (a tool server over
///   HTTP) are `authorization` as well: the call presented no session token, or its
///   session has no current envelope, so no policy authorizes it.
/// - `secret_not_bound` is `authentication`: the package's credential is not injected
///   or cannot be bound to this package, so the call has no credentials the provider
///   would accept.
/// - `package_load_failed`, `tool_config_invalid` and `tool_input_unreadable` are
///   `readiness`: the package folder does not load or is not the running binary's own,
///   the deployment configuration is unusable, or the arguments cannot be read, so the
///   tool is not in a state to run. `turn_ledger_unavailable` is `readiness` too: the
///   shared turn ledger (a Redis) cannot be used, so the sandbox cannot know whether
///   the turn admits the call, and runs nothing.
///
/// `output_blocked` (the output guard) is of the shared class `output_blocked`: whether
/// an output is blocked tells a guessed secret from a wrong one, so a blocked output stops
/// the turn and a model gets one guess per turn.
///
/// New codes are added here first; the test of each producing crate fails until they
/// are.
pub const ERROR_CODES: &[KnownCode] = &[
    // Locking (`evidence-policy`).
    exact("invalid_arguments", &[InvalidArgument], CodeSource::Lock),
    exact("missing_query_id", &[InvalidArgument], CodeSource::Lock),
    exact("invalid_query_id", &[InvalidArgument], CodeSource::Lock),
    exact("duplicate_query_id", &[InvalidArgument], CodeSource::Lock),
    exact("query_id_not_allowed", &[PolicyViolation], CodeSource::Lock),
    exact("forbidden_argument", &[PolicyViolation], CodeSource::Lock),
    exact("unknown_argument", &[InvalidArgument], CodeSource::Lock),
    exact("missing_argument", &[InvalidArgument], CodeSource::Lock),
    exact("invalid_expr", &[InvalidArgument], CodeSource::Lock),
    exact("invalid_step", &[InvalidArgument], CodeSource::Lock),
    exact("step_below_minimum", &[InvalidArgument], CodeSource::Lock),
    exact("too_many_points", &[InvalidArgument], CodeSource::Lock),
    exact("invalid_unit", &[InvalidArgument], CodeSource::Lock),
    exact("invalid_instance_ref", &[InvalidArgument], CodeSource::Lock),
    exact("empty_batch", &[InvalidArgument], CodeSource::Lock),
    exact("batch_too_large", &[InvalidArgument], CodeSource::Lock),
    exact("promql_parse_error", &[InvalidArgument], CodeSource::Lock),
    exact("promql_too_deep", &[InvalidArgument], CodeSource::Lock),
    exact("unsupported_promql", &[InvalidArgument], CodeSource::Lock),
    exact("scope_violation", &[PolicyViolation], CodeSource::Lock),
    exact("window_violation", &[PolicyViolation], CodeSource::Lock),
    exact(
        "address_label_matcher",
        &[PolicyViolation],
        CodeSource::Lock,
    ),
    exact(
        "address_label_rewrite",
        &[PolicyViolation],
        CodeSource::Lock,
    ),
    exact("trusted_policy_rejected", &[Internal], CodeSource::Lock),
    exact(
        "discovery_not_granted",
        &[PolicyViolation],
        CodeSource::Lock,
    ),
    exact("invalid_discovery", &[InvalidArgument], CodeSource::Lock),
    exact("invalid_pattern", &[InvalidArgument], CodeSource::Lock),
    // The sandbox call.
    exact(
        "policy_verification_failed",
        &[Authorization],
        CodeSource::Sandbox,
    ),
    exact("invalid_json", &[InvalidArgument], CodeSource::Sandbox),
    // The output guard.
    exact("output_blocked", &[OutputBlocked], CodeSource::Guard),
    // Connectors: provider HTTP statuses.
    KnownCode {
        name: CodeName::HttpStatus("clinic_http_"),
        classes: HTTP_CLASSES,
        source: CodeSource::Connector,
    },
    KnownCode {
        name: CodeName::HttpStatus("manus_http_"),
        classes: HTTP_CLASSES,
        source: CodeSource::Connector,
    },
    KnownCode {
        name: CodeName::HttpStatus("grafana_http_"),
        classes: HTTP_CLASSES,
        source: CodeSource::Connector,
    },
    // Connectors: transport and response failures, named by provider origin.
    per_origin("timeout", &[Timeout]),
    per_origin("unavailable", &[ProviderUnavailable]),
    per_origin("response_too_large", &[QueryRejected]),
    per_origin("non_json_body", &[ProviderUnavailable]),
    per_origin("invalid_response", &[ProviderUnavailable]),
    per_origin("sanitize_failed", &[Internal]),
    per_origin("request_failed", &[Internal]),
    per_origin("host_not_allowed", &[Internal]),
    per_origin("invalid_configuration", &[Internal]),
    per_origin("reference_keys", &[Internal]),
    per_origin("result_contract", &[Internal]),
    per_origin("package", &[Internal]),
    per_origin("out_of_scope", &[Internal]),
    // Connectors: fixed codes.
    exact(
        "invalid_reference",
        &[InvalidArgument],
        CodeSource::Connector,
    ),
    exact("result_contract", &[Internal], CodeSource::Connector),
    exact("clinic_empty_batch", &[Internal], CodeSource::Connector),
    exact("clinic_wrong_package", &[Internal], CodeSource::Connector),
    exact("manus_wrong_package", &[Internal], CodeSource::Connector),
    exact("wetech_wrong_package", &[Internal], CodeSource::Connector),
    exact("manus_invalid_request", &[Internal], CodeSource::Connector),
    exact("wetech_invalid_request", &[Internal], CodeSource::Connector),
    exact("manus_no_target", &[Internal], CodeSource::Connector),
    exact(
        "manus_session_timeout",
        &[SessionBootstrap],
        CodeSource::Connector,
    ),
    exact(
        "manus_session_unavailable",
        &[SessionBootstrap],
        CodeSource::Connector,
    ),
    exact(
        "manus_session_invalid_response",
        &[SessionBootstrap],
        CodeSource::Connector,
    ),
    KnownCode {
        name: CodeName::HttpStatus("manus_session_http_"),
        classes: &[SessionBootstrap],
        source: CodeSource::Connector,
    },
    exact(
        "wetech_storage_state_invalid",
        &[Authentication],
        CodeSource::Connector,
    ),
    exact(
        "wetech_user_agent_mismatch",
        &[BrowserRuntime],
        CodeSource::Connector,
    ),
    exact("wetech_invalid_url", &[Internal], CodeSource::Connector),
    exact(
        "wetech_browser_start_failed",
        &[BrowserRuntime],
        CodeSource::Connector,
    ),
    exact(
        "wetech_browser_lost",
        &[BrowserRuntime],
        CodeSource::Connector,
    ),
    exact(
        "wetech_browser_command_failed",
        &[Internal],
        CodeSource::Connector,
    ),
    exact("wetech_cleanup_failed", &[Internal], CodeSource::Connector),
    exact("grafana_not_ready", &[Readiness], CodeSource::Connector),
    exact(
        "grafana_login_redirect",
        &[Authentication],
        CodeSource::Connector,
    ),
    exact(
        "grafana_cookie_rejected",
        &[Authentication],
        CodeSource::Connector,
    ),
    // Turn control (`evidence-materialize`).
    exact("turn_stopped", &[PolicyViolation], CodeSource::Turn),
    exact("turn_call_limit", &[PolicyViolation], CodeSource::Turn),
    exact("package_call_limit", &[PolicyViolation], CodeSource::Turn),
    exact("query_not_granted", &[PolicyViolation], CodeSource::Turn),
    exact("query_in_flight", &[PolicyViolation], CodeSource::Turn),
    exact("unchanged_retry", &[InvalidArgument], CodeSource::Turn),
    exact("correction_exhausted", &[PolicyViolation], CodeSource::Turn),
    exact("objective_failed", &[PolicyViolation], CodeSource::Turn),
    exact("objective_answered", &[PolicyViolation], CodeSource::Turn),
    // The runtime context of a tool sandbox (classes explained above).
    exact(
        "runtime_context_missing",
        &[Authorization],
        CodeSource::RuntimeContext,
    ),
    exact(
        "runtime_context_invalid",
        &[Authorization],
        CodeSource::RuntimeContext,
    ),
    exact(
        "secret_not_bound",
        &[Authentication],
        CodeSource::RuntimeContext,
    ),
    exact(
        "package_load_failed",
        &[Readiness],
        CodeSource::RuntimeContext,
    ),
    exact(
        "tool_config_invalid",
        &[Readiness],
        CodeSource::RuntimeContext,
    ),
    exact(
        "tool_input_unreadable",
        &[Readiness],
        CodeSource::RuntimeContext,
    ),
    exact(
        "session_missing",
        &[Authorization],
        CodeSource::RuntimeContext,
    ),
    exact(
        "session_unknown",
        &[Authorization],
        CodeSource::RuntimeContext,
    ),
    exact(
        "session_expired",
        &[Authorization],
        CodeSource::RuntimeContext,
    ),
    exact(
        "turn_ledger_unavailable",
        &[Readiness],
        CodeSource::RuntimeContext,
    ),
];

/// The entry of [`ERROR_CODES`] that names `code`, if any.
pub fn known_code(code: &str) -> Option<&'static KnownCode> {
    ERROR_CODES.iter().find(|k| k.name.matches(code))
}

/// True when `code` is in [`ERROR_CODES`] and may carry `class`.
pub fn is_known(code: &str, class: FailureClass) -> bool {
    known_code(code).is_some_and(|k| k.allows(class))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorCode, Provider};

    /// Sample codes of an entry: the code itself, every origin's code, or a status.
    fn samples(name: CodeName) -> Vec<String> {
        match name {
            CodeName::Exact(code) => vec![code.to_owned()],
            CodeName::PerOrigin(suffix) => CODE_ORIGINS
                .iter()
                .map(|origin| format!("{origin}_{suffix}"))
                .collect(),
            CodeName::HttpStatus(prefix) => ["200", "400", "422", "503"]
                .iter()
                .map(|status| format!("{prefix}{status}"))
                .collect(),
        }
    }

    #[test]
    fn every_code_is_valid_and_named_by_one_entry() {
        for entry in ERROR_CODES {
            assert!(!entry.classes.is_empty(), "{entry:?}");
            if !matches!(entry.name, CodeName::HttpStatus(_)) {
                assert_eq!(entry.classes.len(), 1, "{entry:?}");
            }
            for code in samples(entry.name) {
                assert_eq!(ErrorCode::new(code.as_str()).unwrap().as_str(), code);
                let named_by = ERROR_CODES.iter().filter(|e| e.name.matches(&code)).count();
                assert_eq!(named_by, 1, "{code} is named by {named_by} entries");
                assert_eq!(known_code(&code), Some(entry));
            }
        }
    }

    #[test]
    fn the_contract_codes_are_known() {
        for provider in [Provider::Clinic, Provider::Manus, Provider::Wetech] {
            for status in [400, 401, 403, 422, 429, 500, 504] {
                let code = ErrorCode::http(provider, status);
                assert!(known_code(code.as_str()).is_some(), "{code}");
            }
        }
        assert!(is_known(
            ErrorCode::output_blocked().as_str(),
            FailureClass::OutputBlocked
        ));
        assert!(is_known(
            ErrorCode::promql_parse_error().as_str(),
            FailureClass::InvalidArgument
        ));
        assert!(is_known(
            ErrorCode::scope_violation().as_str(),
            FailureClass::PolicyViolation
        ));
        assert!(is_known(
            ErrorCode::window_violation().as_str(),
            FailureClass::PolicyViolation
        ));
        assert!(!is_known("output_blocked", FailureClass::Internal));
        assert!(known_code("clinic_http_").is_none());
        assert!(known_code("clinic_http_4220").is_none());
        assert!(known_code("no_such_code").is_none());
    }

    #[test]
    fn runtime_context_codes_stop_the_turn() {
        let runtime: Vec<_> = ERROR_CODES
            .iter()
            .filter(|e| e.source == CodeSource::RuntimeContext)
            .collect();
        assert_eq!(runtime.len(), 10);
        for entry in runtime {
            assert!(entry.classes.iter().all(|c| c.is_shared()), "{entry:?}");
        }
    }
}
