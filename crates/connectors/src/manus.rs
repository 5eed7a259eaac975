//! The Manus connector: a session bootstrap, then one `query_range` against the one
//! target the policy names, with instance addresses turned into opaque references.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use evidence_policy::{LockedRequest, ManusTarget, lock::LockedQuery, promql::bind_label};
use evidence_result::{
    Correction, Details, ErrorCode, Failure, PackageId, Provider, ResultError, ToolResult,
};
use reqwest::header::{HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::address::{AddressSealer, INSTANCE_LABEL};
use crate::clinic::http_client;
use crate::codes::{Code, MANUS_SESSION_CLASS, manus_session_http};
use crate::connector::{failed, finish, internal, single_query, unix_now};
use crate::prometheus::{
    Compaction, QueryRange, RawResponse, Redactor, ResponseLimits, ResponseMapper,
    complete_metadata, fetch, fetch_metadata, metadata_url,
};
use crate::reference::{ReferenceKeyRing, ReferenceScope};
use crate::{Connector, ConnectorError, CutOff, Deadline, HostAllowlist, deadline_failure};

/// The largest session bootstrap answer read.
const SESSION_MAX_BYTES: usize = 64 * 1024;

/// The Manus connector's deployment configuration. Nothing here comes from the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ManusConfig {
    /// The base URL of each target (`vida`, `monica`). A target without one is refused.
    pub targets: Vec<(ManusTarget, Url)>,
    /// The package's network allowlist; every target's host must be in it.
    pub allowlist: HostAllowlist,
    /// The session bootstrap path (`POST`, JSON `{"username","password"}`, answered by
    /// JSON `{"session": TOKEN, ...}`).
    pub session_path: String,
    /// The `query_range` path (`POST`, form-encoded).
    pub query_path: String,
    /// The header that carries the session token on queries.
    pub session_header: String,
    /// Body cap and time limit of the session bootstrap and of the query (each).
    pub limits: ResponseLimits,
    /// Prometheus' server-side evaluation `timeout`. Every query sends one: this value
    /// when set (capped at `limits.timeout` and at what is left of the call's deadline),
    /// otherwise the shorter of those two minus a small
    /// margin (see [`ResponseLimits::evaluation_timeout`](crate::ResponseLimits::evaluation_timeout)).
    pub evaluation_timeout: Option<Duration>,
}

impl ManusConfig {
    /// The default session bootstrap path.
    pub const DEFAULT_SESSION_PATH: &'static str = "/api/v1/session";
    /// The default `query_range` path.
    pub const DEFAULT_QUERY_PATH: &'static str = "/prometheus/api/v1/query_range";
    /// The default session header.
    pub const DEFAULT_SESSION_HEADER: &'static str = "x-manus-session";

    /// A configuration with no targets yet, the default paths, header and limits.
    pub fn new(allowlist: HostAllowlist) -> Self {
        ManusConfig {
            targets: Vec::new(),
            allowlist,
            session_path: Self::DEFAULT_SESSION_PATH.to_owned(),
            query_path: Self::DEFAULT_QUERY_PATH.to_owned(),
            session_header: Self::DEFAULT_SESSION_HEADER.to_owned(),
            limits: ResponseLimits::default(),
            evaluation_timeout: None,
        }
    }

    /// Sets (or replaces) the base URL of a target.
    pub fn with_target(mut self, target: ManusTarget, base_url: Url) -> Self {
        self.targets.retain(|(t, _)| *t != target);
        self.targets.push((target, base_url));
        self
    }

    /// Replaces the limits.
    pub fn with_limits(mut self, limits: ResponseLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The base URL of `target`, checked against the allowlist. No request is sent.
    pub fn base_url(&self, target: ManusTarget) -> Result<&Url, ConnectorError> {
        let url = self
            .targets
            .iter()
            .find(|(t, _)| *t == target)
            .map(|(_, u)| u)
            .ok_or_else(|| {
                ConnectorError::Config(format!("no base URL is configured for target {target}"))
            })?;
        if url.query().is_some() || url.fragment().is_some() {
            return Err(ConnectorError::Config(format!(
                "the base URL of target {target} must not have a query or fragment"
            )));
        }
        self.allowlist.check(url)?;
        Ok(url)
    }

    fn endpoint(&self, base: &Url, path: &str) -> Result<Url, ConnectorError> {
        if !path.starts_with('/') || path.contains(['?', '#', '\\']) {
            return Err(ConnectorError::Config(format!(
                "Manus path {path:?} must be an absolute path without query or fragment"
            )));
        }
        let mut url = base.clone();
        url.set_path(&format!("{}{path}", base.path().trim_end_matches('/')));
        self.allowlist.check(&url)?;
        Ok(url)
    }

    fn header(&self) -> Result<HeaderName, ConnectorError> {
        HeaderName::from_bytes(self.session_header.as_bytes()).map_err(|_| {
            ConnectorError::Config(format!(
                "session header {:?} is not a valid header name",
                self.session_header
            ))
        })
    }
}

/// The secrets the Manus package's auth binding injects: the provider credentials and
/// the opaque-reference key ring.
pub struct ManusSecrets {
    username: SecretString,
    password: SecretString,
    reference_keys: ReferenceKeyRing,
}

impl fmt::Debug for ManusSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManusSecrets")
            .field("username", &"[REDACTED]")
            .field("password", &"[REDACTED]")
            .field("reference_keys", &self.reference_keys)
            .finish()
    }
}

impl ManusSecrets {
    /// The environment variable of the user name.
    pub const USERNAME_ENV: &'static str = "MANUS_USERNAME";
    /// The environment variable of the password.
    pub const PASSWORD_ENV: &'static str = "MANUS_PASSWORD";
    /// The environment variable of the reference key ring (`kid:base64key,...`).
    pub const REFERENCE_KEYS_ENV: &'static str = ReferenceKeyRing::ENV;

    /// Credentials and reference keys.
    pub fn new(
        username: SecretString,
        password: SecretString,
        reference_keys: ReferenceKeyRing,
    ) -> Self {
        ManusSecrets {
            username,
            password,
            reference_keys,
        }
    }

    /// The reference key ring.
    pub fn reference_keys(&self) -> &ReferenceKeyRing {
        &self.reference_keys
    }
}

/// The Manus connector (package `managed_auto_oncall_manus`).
///
/// Per call, before any request: the request must be one locked query; the policy's
/// target (`vida` or `monica`) must have a configured base URL inside the allowlist; an
/// `instanceRef` must open for this target and package (any failure is the one
/// `invalid_reference`, correctable) and is bound as an exact `instance` matcher with
/// `evidence_policy::promql::bind_label`. Then the session bootstrap (credentials from the
/// secrets; any failure, a 401 included, is `session_bootstrap`: the session step is
/// shared, so the turn stops), then one `query_range` with the session header. In the
/// result, every instance address (the `instance` label, any label value or text that is
/// an address) is replaced by a reference sealed for this target, package and label:
/// the same address always gets the same reference while the current key seals, and a
/// reference opens while its key is listed and unexpired.
#[derive(Debug, Clone)]
pub struct ManusConnector {
    client: reqwest::Client,
}

impl ManusConnector {
    /// A connector with its own HTTP client (no redirects).
    pub fn new() -> Result<Self, ConnectorError> {
        Ok(ManusConnector {
            client: http_client()?,
        })
    }
}

#[derive(Serialize)]
struct Login<'a> {
    username: &'a str,
    password: &'a str,
}

#[derive(Deserialize)]
struct Session {
    session: SecretString,
}

#[async_trait]
impl Connector for ManusConnector {
    type Config = ManusConfig;
    type Secrets = ManusSecrets;

    fn package(&self) -> PackageId {
        PackageId::manus()
    }

    fn provider(&self) -> Provider {
        Provider::Manus
    }

    async fn call_within(
        &self,
        request: &LockedRequest,
        config: &ManusConfig,
        secrets: &ManusSecrets,
        deadline: &Deadline,
    ) -> Result<ToolResult, ResultError> {
        let origin = request.origin();
        let query = match single_query(
            request,
            &self.package(),
            self.provider(),
            Code::ManusInvalidRequest,
        ) {
            Ok(q) => q,
            Err(done) => return *done,
        };
        let fail = |failure: Failure| {
            failed(
                origin.clone(),
                Some(query.query_id.clone()),
                Some(query.request_digest),
                failure,
            )
        };
        let redactor = Redactor::new([secrets.username.clone(), secrets.password.clone()]);
        let plan = match plan(request, query, config, secrets, &redactor, deadline) {
            Ok(plan) => plan,
            Err(failure) => return fail(*failure),
        };

        // The network starts here: the session bootstrap, then the query, both within
        // the call's deadline.
        let bootstrap = self.bootstrap(&plan.session_url, config, secrets, &redactor);
        let session = match deadline.run(bootstrap).await {
            Ok(Ok(session)) => session,
            Ok(Err(failure)) => return fail(*failure),
            Err(_) => {
                let cut = CutOff::BeforeQuery("while the session bootstrap was waiting for Manus");
                let mut failure = deadline_failure(Provider::Manus, deadline, cut);
                failure.correction.keep.clone_from(&plan.keep);
                return fail(failure);
            }
        };
        let session_value = match session_value(&session) {
            Ok(value) => value,
            Err(failure) => return fail(*failure),
        };
        let mapper = ResponseMapper::new(Provider::Manus, redactor.with_secret(session))
            .with_keep(plan.keep.clone());
        finish(
            self.query(request, config, secrets, plan, session_value, &mapper)
                .await,
        )
    }
}

/// What a Manus call holds before anything is sent: the target and its endpoints, the
/// header that carries the session, the expression with its `instanceRef` bound, the
/// fields a correction keeps, the time references are opened and sealed at, and the
/// call's deadline.
struct Plan<'a> {
    query: &'a LockedQuery,
    target: ManusTarget,
    session_url: Url,
    query_url: Url,
    header: HeaderName,
    expr: String,
    keep: Vec<String>,
    now: i64,
    deadline: &'a Deadline,
}

/// The local steps of a call: the policy's target, its endpoints and the bound
/// reference. A failure here sends nothing.
fn plan<'a>(
    request: &LockedRequest,
    query: &'a LockedQuery,
    config: &ManusConfig,
    secrets: &ManusSecrets,
    redactor: &Redactor,
    deadline: &'a Deadline,
) -> Result<Plan<'a>, Box<Failure>> {
    let keep = vec![
        "queryId".to_owned(),
        "time window".to_owned(),
        "cluster scope".to_owned(),
        "target".to_owned(),
    ];
    let mapper = ResponseMapper::new(Provider::Manus, redactor.clone()).with_keep(keep.clone());
    let Some(target) = request.scope.manus_target else {
        return Err(Box::new(internal(
            Code::ManusNoTarget,
            "the trusted policy names no Manus target",
        )));
    };
    let endpoints = config.base_url(target).and_then(|base| {
        Ok((
            config.endpoint(base, &config.session_path)?,
            config.endpoint(base, &config.query_path)?,
            config.header()?,
        ))
    });
    let (session_url, query_url, header) = endpoints.map_err(|e| Box::new(mapper.failure(&e)))?;
    let now = unix_now();
    let expr = bind_reference(
        query,
        &secrets.reference_keys,
        target,
        request.package.as_str(),
        now,
        &keep,
    )?;
    Ok(Plan {
        query,
        target,
        session_url,
        query_url,
        header,
        expr,
        keep,
        now,
        deadline,
    })
}

/// The session token as the query's header value, marked sensitive.
fn session_value(session: &SecretString) -> Result<HeaderValue, Box<Failure>> {
    let mut value = HeaderValue::from_str(session.expose_secret()).map_err(|_| {
        bootstrap_failure(
            Code::ManusSessionInvalidResponse.code(),
            "the session bootstrap answered a session token that is not a valid header value"
                .to_owned(),
            None,
        )
    })?;
    value.set_sensitive(true);
    Ok(value)
}

impl ManusConnector {
    /// The query, sent with the session: its answer compacted with every address sealed
    /// (labels, warnings, the expression and any error text), as the result's details.
    async fn query(
        &self,
        request: &LockedRequest,
        config: &ManusConfig,
        secrets: &ManusSecrets,
        plan: Plan<'_>,
        session: HeaderValue,
        mapper: &ResponseMapper,
    ) -> Details {
        let origin = request.origin();
        let query = plan.query;
        let deadline = plan.deadline;
        let window = query.evidence_window();
        let timeout = config
            .limits
            .evaluation_timeout_within(deadline, config.evaluation_timeout);
        let range = QueryRange::new(plan.expr.clone(), window).with_timeout(timeout);
        let metadata_at = metadata_url(&plan.query_url);
        let builder = range
            .post(&self.client, plan.query_url)
            .header(plan.header.clone(), session.clone());
        let sealer = AddressSealer::new(
            &secrets.reference_keys,
            plan.target.as_str(),
            request.package.as_str(),
            plan.now,
        );
        let mut compaction = Compaction::for_query(query, request.scope.series_kept);
        compaction.expr = Some(sealer.text(&plan.expr));
        let fetch = mapper.fetch_answer(builder, &config.limits, &compaction, &sealer);
        let fetched = match deadline.run(fetch).await {
            Ok(fetched) => fetched,
            Err(_) => {
                let mut failure = deadline_failure(Provider::Manus, deadline, CutOff::DuringQuery);
                failure.correction.keep.clone_from(&plan.keep);
                Err(failure)
            }
        };
        // A metric_metadata answer asks the metadata of its listed names beside the query
        // path, with the same session; its text is sealed with the rest below.
        let fetched = match fetched {
            Ok(answer) => {
                let limit = config.limits.timeout;
                let ask = |url| {
                    let request = self
                        .client
                        .get(url)
                        .header(plan.header.clone(), session.clone());
                    fetch_metadata(request, limit)
                };
                Ok(complete_metadata(answer, mapper, deadline, metadata_at.as_ref(), ask).await)
            }
            Err(failure) => Err(failure),
        };
        match fetched {
            Ok(answer) => answer.map_texts(|t| sealer.text(t)).details(
                origin,
                query.query_id.clone(),
                query.request_digest,
            ),
            Err(mut failure) => {
                failure.detail_error = sealer.text(&failure.detail_error);
                Details::failure(
                    origin,
                    Some(query.query_id.clone()),
                    Some(query.request_digest),
                    failure,
                )
            }
        }
    }
}

impl ManusConnector {
    /// The session bootstrap. Every failure is `session_bootstrap`.
    async fn bootstrap(
        &self,
        url: &Url,
        config: &ManusConfig,
        secrets: &ManusSecrets,
        redactor: &Redactor,
    ) -> Result<SecretString, Box<Failure>> {
        let login = Login {
            username: secrets.username.expose_secret(),
            password: secrets.password.expose_secret(),
        };
        let builder = self.client.post(url.clone()).json(&login);
        let limits = ResponseLimits {
            max_body_bytes: SESSION_MAX_BYTES,
            timeout: config.limits.timeout,
        };
        let raw = match fetch(builder, &limits).await {
            Ok(raw) => raw,
            Err(e) => {
                let code = match e {
                    ConnectorError::Timeout(_) => Code::ManusSessionTimeout,
                    ConnectorError::BodyTooLarge { .. } => Code::ManusSessionInvalidResponse,
                    _ => Code::ManusSessionUnavailable,
                };
                return Err(bootstrap_failure(
                    code.code(),
                    format!(
                        "the session bootstrap failed: {}",
                        redactor.redact(&e.to_string())
                    ),
                    None,
                ));
            }
        };
        if !raw.is_success() {
            return Err(bootstrap_failure(
                manus_session_http(raw.status),
                format!(
                    "the session bootstrap POST {} was refused with HTTP {}: {}",
                    redactor.redact(url.path()),
                    raw.status,
                    body_text(&raw, redactor)
                ),
                Some((&raw, redactor)),
            ));
        }
        match serde_json::from_slice::<Session>(&raw.body) {
            Ok(s) if !s.session.expose_secret().is_empty() => Ok(s.session),
            _ => Err(bootstrap_failure(
                Code::ManusSessionInvalidResponse.code(),
                format!(
                    "the session bootstrap answered HTTP {} without a session token ({} bytes, {})",
                    raw.status,
                    raw.body.len(),
                    raw.body_digest(redactor)
                ),
                Some((&raw, redactor)),
            )),
        }
    }
}

/// Opens and binds the `instanceRef`, if any; the expression to run.
fn bind_reference(
    query: &LockedQuery,
    keys: &ReferenceKeyRing,
    target: ManusTarget,
    package: &str,
    now: i64,
    keep: &[String],
) -> Result<String, Box<Failure>> {
    let Some(reference) = &query.instance_ref else {
        return Ok(query.expr.clone());
    };
    let scope = ReferenceScope {
        target: target.as_str(),
        package,
        purpose: INSTANCE_LABEL,
    };
    let address = keys
        .open(reference, scope, now)
        .map_err(|e| Box::new(invalid_reference(&e, keep)))?;
    bind_label(&query.expr, INSTANCE_LABEL, &address).map_err(|e| {
        // The expression names another instance: say so without the address.
        let mut failure = e.to_failure();
        failure.detail_error = failure.detail_error.replace(&address, "<instanceRef>");
        Box::new(failure)
    })
}

/// The one `invalid_reference` failure: the same words whatever was wrong.
fn invalid_reference(error: &ConnectorError, keep: &[String]) -> Failure {
    let code = Code::InvalidReference;
    Failure::new(code.code(), code.class(), error.to_string()).with_correction(
        Correction::for_class(
            code.class(),
            Some(
                "Use an instanceRef returned by this tool for this target, unchanged, or \
                 leave instanceRef out; change nothing else.",
            ),
            keep.to_vec(),
        ),
    )
}

/// A session bootstrap failure: `code` is a `manus_session_*` code, all of class
/// [`MANUS_SESSION_CLASS`].
fn bootstrap_failure(
    code: ErrorCode,
    detail: String,
    raw: Option<(&RawResponse, &Redactor)>,
) -> Box<Failure> {
    let mut failure = Failure::new(code, MANUS_SESSION_CLASS, detail)
        .with_correction(Correction::for_class(MANUS_SESSION_CLASS, None, Vec::new()));
    if let Some((raw, redactor)) = raw {
        failure = failure
            .with_http_status(raw.status)
            .with_body_digest(raw.body_digest(redactor));
    }
    Box::new(failure)
}

/// The start of a body as redacted text.
fn body_text(raw: &RawResponse, redactor: &Redactor) -> String {
    let end = raw.body.len().min(4096);
    let text = String::from_utf8_lossy(&raw.body[..end]);
    let text = redactor.redact(text.trim());
    if text.is_empty() {
        "an empty body".to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_paths_come_from_configuration() {
        let allow = HostAllowlist::new(["vida.manus.example", "monica.manus.example"]).unwrap();
        let config = ManusConfig::new(allow)
            .with_target(
                ManusTarget::Vida,
                Url::parse("https://vida.manus.example/m/").unwrap(),
            )
            .with_target(
                ManusTarget::Vida,
                Url::parse("https://vida.manus.example/").unwrap(),
            );
        assert_eq!(config.targets.len(), 1);
        let base = config.base_url(ManusTarget::Vida).unwrap();
        assert_eq!(
            config.endpoint(base, &config.query_path).unwrap().as_str(),
            "https://vida.manus.example/prometheus/api/v1/query_range"
        );
        assert!(matches!(
            config.base_url(ManusTarget::Monica),
            Err(ConnectorError::Config(_))
        ));
        let outside = config.clone().with_target(
            ManusTarget::Monica,
            Url::parse("https://evil.example/").unwrap(),
        );
        assert!(matches!(
            outside.base_url(ManusTarget::Monica),
            Err(ConnectorError::HostNotAllowed { .. })
        ));
        assert!(config.endpoint(base, "no-slash").is_err());
        let mut bad_header = config.clone();
        bad_header.session_header = "bad header".to_owned();
        assert!(bad_header.header().is_err());
    }

    #[test]
    fn secrets_never_print() {
        let keys = ReferenceKeyRing::new("k1", [5u8; 32]).unwrap();
        let s = ManusSecrets::new(
            SecretString::from("manus-user-1"),
            SecretString::from("manus-password-1"),
            keys,
        );
        let debug = format!("{s:?}");
        assert!(!debug.contains("manus-user-1") && !debug.contains("manus-password-1"));
        assert!(debug.contains("k1"));
    }
}
