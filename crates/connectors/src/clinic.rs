//! The Clinic connector: a bounded batch of `query_range` calls to the Clinic API over
//! HTTP, on a cluster-scoped path, with a bearer token.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use evidence_policy::{
    LockedRequest, ResolvedScope, lock::LockedItem, lock::LockedQuery, policy::MAX_BATCH,
    resolved::PolicyField,
};
use evidence_result::{Details, Item, PackageId, Provider, ResultError, ToolResult};
use futures::StreamExt as _;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use secrecy::{ExposeSecret, SecretString};
use url::Url;

use crate::codes::Code;
use crate::connector::{failed, finish, identity_failure, internal};
use crate::prometheus::{
    Answer, Compaction, KeepLabels, QueryRange, Redactor, ResponseLimits, ResponseMapper,
    complete_metadata, fetch_metadata, metadata_url,
};
use crate::{Connector, ConnectorError, CutOff, Deadline, HostAllowlist, deadline_failure};

// The HTTP connectors share one client setup (Manus imports it from here).
pub(crate) use crate::tls::http_client;

/// Characters escaped in a path segment filled from policy: everything but unreserved.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The Clinic connector's deployment configuration. Nothing here comes from the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ClinicConfig {
    /// The Clinic API base URL (scheme, host, port and an optional path prefix).
    pub base_url: Url,
    /// The cluster-scoped `query_range` path below the base URL. Placeholders
    /// `{cluster_id}` (required), `{account}`, `{parent_id}` and `{keyspace_id}` are
    /// filled from the trusted policy, each percent-encoded as one path segment.
    pub query_path_template: String,
    /// The package's network allowlist; the base URL's host must be in it.
    pub allowlist: HostAllowlist,
    /// Body cap and time limit of each query.
    pub limits: ResponseLimits,
    /// Queries of one batch that run at once (1 to `evidence_policy::policy::MAX_BATCH`).
    pub concurrency: usize,
    /// Prometheus' server-side evaluation `timeout`. Every query sends one: this value
    /// when set (capped at `limits.timeout` and at what is left of the call's deadline),
    /// otherwise the shorter of those two minus a small
    /// margin (see [`ResponseLimits::evaluation_timeout`](crate::ResponseLimits::evaluation_timeout)).
    pub evaluation_timeout: Option<Duration>,
}

impl ClinicConfig {
    /// The Clinic API's cluster-scoped `query_range` path.
    pub const DEFAULT_QUERY_PATH_TEMPLATE: &'static str =
        "/api/v1/clusters/{cluster_id}/prometheus/api/v1/query_range";
    /// Queries of one batch that run at once by default.
    pub const DEFAULT_CONCURRENCY: usize = 4;

    /// A configuration for the Clinic API at `base_url`, with the default path
    /// template, limits and concurrency.
    pub fn new(base_url: Url, allowlist: HostAllowlist) -> Self {
        ClinicConfig {
            base_url,
            query_path_template: Self::DEFAULT_QUERY_PATH_TEMPLATE.to_owned(),
            allowlist,
            limits: ResponseLimits::default(),
            concurrency: Self::DEFAULT_CONCURRENCY,
            evaluation_timeout: None,
        }
    }

    /// Replaces the path template.
    pub fn with_query_path_template(mut self, template: impl Into<String>) -> Self {
        self.query_path_template = template.into();
        self
    }

    /// Replaces the limits.
    pub fn with_limits(mut self, limits: ResponseLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Replaces the concurrency.
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// The `query_range` URL for a locked request's `scope`: the base URL and the
    /// template filled from the scope, checked against the allowlist. No request is sent.
    pub fn query_url(&self, scope: &ResolvedScope) -> Result<Url, ConnectorError> {
        let base = &self.base_url;
        if base.query().is_some() || base.fragment().is_some() {
            return Err(ConnectorError::Config(
                "the Clinic base URL must not have a query or fragment".to_owned(),
            ));
        }
        self.allowlist.check(base)?;
        let path = render_template(&self.query_path_template, scope)?;
        let mut url = base.clone();
        url.set_path(&format!("{}{path}", base.path().trim_end_matches('/')));
        self.allowlist.check(&url)?;
        Ok(url)
    }
}

/// Fills a path template from the resolved scope: each placeholder is a
/// [`PolicyField`] name.
fn render_template(template: &str, scope: &ResolvedScope) -> Result<String, ConnectorError> {
    let bad = |why: String| ConnectorError::Config(format!("Clinic path template: {why}"));
    if !template.starts_with('/') || template.contains(['?', '#', '\\']) {
        return Err(bad(
            "must be an absolute path without query or fragment".to_owned()
        ));
    }
    if !template.contains("{cluster_id}") {
        return Err(bad("must contain {cluster_id}".to_owned()));
    }
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| bad("unclosed '{'".to_owned()))?;
        let name = &after[..close];
        let field = PolicyField::from_name(name).ok_or_else(|| {
            let known: Vec<&str> = PolicyField::ALL.iter().map(|f| f.name()).collect();
            bad(format!(
                "unknown placeholder {{{name}}}; known: {}",
                known.join(", ")
            ))
        })?;
        let value = scope
            .field(field)
            .ok_or_else(|| bad(format!("the policy has no {name} for {{{name}}}")))?;
        out.extend(utf8_percent_encode(value, SEGMENT));
        rest = &after[close + 1..];
    }
    if rest.contains('}') {
        return Err(bad("unmatched '}'".to_owned()));
    }
    out.push_str(rest);
    if out.split('/').any(|s| s == ".." || s == ".") {
        return Err(bad("must not contain '.' or '..' segments".to_owned()));
    }
    Ok(out)
}

/// The secret the Clinic package's auth binding injects: the API bearer token.
pub struct ClinicSecrets {
    token: SecretString,
}

impl fmt::Debug for ClinicSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClinicSecrets")
            .field("token", &"[REDACTED]")
            .finish()
    }
}

impl ClinicSecrets {
    /// The secret's name in the package's auth binding.
    pub const TOKEN: &'static str = "clinic_api_token";
    /// The environment variable the auth binding injects it as.
    pub const TOKEN_ENV: &'static str = "CLINIC_API_TOKEN";

    /// The bearer token.
    pub fn new(token: SecretString) -> Self {
        ClinicSecrets { token }
    }

    /// The bearer token.
    pub fn token(&self) -> &SecretString {
        &self.token
    }
}

/// The Clinic connector (package `managed_auto_oncall_clinic`).
///
/// One call carries a bounded batch. Items rejected while locking are answered as
/// failed items without any request; the others run with bounded concurrency, each as
/// one `POST` of a form-encoded `query_range` to the cluster-scoped path, with the
/// bearer token. Items come back in request order, each with its own status and
/// request digest; the batch status is `ok`, `partial` or `error`. A `metric_metadata`
/// discovery then asks the provider's metadata of each name it lists, one `GET` of
/// `.../metadata?metric=<name>` beside the query path, with the same token. The batch
/// shares the call's one deadline: an item still running when it passes, and every item
/// not sent yet, answers a typed `clinic_timeout`; the items already answered keep their
/// results. An execution-time rejection is `clinic_http_422` with the provider's
/// complete text and a same-turn correction. Redirects are never followed (they could
/// leave the allowlist).
#[derive(Debug, Clone)]
pub struct ClinicConnector {
    client: reqwest::Client,
}

impl ClinicConnector {
    /// A connector with its own HTTP client (no redirects).
    pub fn new() -> Result<Self, ConnectorError> {
        Ok(ClinicConnector {
            client: http_client()?,
        })
    }
}

#[async_trait]
impl Connector for ClinicConnector {
    type Config = ClinicConfig;
    type Secrets = ClinicSecrets;

    fn package(&self) -> PackageId {
        PackageId::clinic()
    }

    fn provider(&self) -> Provider {
        Provider::Clinic
    }

    async fn call_within(
        &self,
        request: &LockedRequest,
        config: &ClinicConfig,
        secrets: &ClinicSecrets,
        deadline: &Deadline,
    ) -> Result<ToolResult, ResultError> {
        let origin = request.origin();
        if let Some(f) = identity_failure(request, &self.package(), self.provider()) {
            return failed(origin, None, None, f);
        }
        let mapper = ResponseMapper::new(Provider::Clinic, Redactor::new([secrets.token.clone()]));
        // Configuration first: a URL outside the allowlist sends nothing.
        let url = match config.query_url(&request.scope) {
            Ok(url) => url,
            Err(e) => return failed(origin, None, None, mapper.failure(&e)),
        };
        let run = Run {
            client: &self.client,
            url: &url,
            metadata_url: metadata_url(&url),
            config,
            token: &secrets.token,
            mapper: &mapper,
            top_k: request.scope.series_kept,
            deadline,
        };
        let concurrency = config.concurrency.clamp(1, MAX_BATCH as usize);
        // Futures collected first, so the stream's item type names no closure lifetime.
        let pending: Vec<_> = request.items.iter().map(|i| run.item(i)).collect();
        let items: Vec<Item> = futures::stream::iter(pending)
            .buffered(concurrency)
            .collect()
            .await;
        match Details::batch(origin.clone(), items) {
            Some(details) => finish(details),
            None => failed(
                origin,
                None,
                None,
                internal(Code::ClinicEmptyBatch, "the locked request has no queries"),
            ),
        }
    }
}

/// What every item of one call shares.
struct Run<'a> {
    client: &'a reqwest::Client,
    url: &'a Url,
    /// The metadata URL beside the query URL (`metric_metadata`), when there is one.
    metadata_url: Option<Url>,
    config: &'a ClinicConfig,
    token: &'a SecretString,
    mapper: &'a ResponseMapper,
    top_k: u32,
    deadline: &'a Deadline,
}

impl Run<'_> {
    async fn item(&self, item: &LockedItem) -> Item {
        match item {
            LockedItem::Ready(query) => self.query(query).await,
            LockedItem::Rejected {
                query_id,
                request_digest,
                failure,
            } => Item::failure(query_id.clone(), *request_digest, failure.clone()),
        }
    }

    async fn query(&self, query: &LockedQuery) -> Item {
        let failed =
            |failure| Item::failure(query.query_id.clone(), Some(query.request_digest), failure);
        if self.deadline.is_over() {
            let cut = CutOff::BeforeQuery("before this query of the batch was sent");
            return failed(deadline_failure(Provider::Clinic, self.deadline, cut));
        }
        let window = query.evidence_window();
        let timeout = self
            .config
            .limits
            .evaluation_timeout_within(self.deadline, self.config.evaluation_timeout);
        let range = QueryRange::new(query.expr.clone(), window).with_timeout(timeout);
        let builder = range
            .post(self.client, self.url.clone())
            .bearer_auth(self.token.expose_secret());
        let compaction = Compaction::for_query(query, self.top_k);
        let fetch =
            self.mapper
                .fetch_answer(builder, &self.config.limits, &compaction, &KeepLabels);
        let fetched = match self.deadline.run(fetch).await {
            Ok(fetched) => fetched,
            Err(_) => Err(deadline_failure(
                Provider::Clinic,
                self.deadline,
                CutOff::DuringQuery,
            )),
        };
        match fetched {
            Ok(answer) => self
                .metadata(answer)
                .await
                .item(query.query_id.clone(), Some(query.request_digest)),
            Err(failure) => failed(failure),
        }
    }

    /// A `metric_metadata` answer with the provider's metadata of its listed names, one
    /// `GET` each beside the query path with the same token (other answers unchanged).
    async fn metadata(&self, answer: Answer) -> Answer {
        let timeout = self.config.limits.timeout;
        let at = self.metadata_url.as_ref();
        complete_metadata(answer, self.mapper, self.deadline, at, |url| {
            let request = self.client.get(url).bearer_auth(self.token.expose_secret());
            fetch_metadata(request, timeout)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use evidence_policy::TrustedPolicy;
    use serde_json::json;

    /// The APID-29213 fixture on a Premium cluster, with an account that needs escaping
    /// in a path.
    fn policy() -> TrustedPolicy {
        let mut v: serde_json::Value =
            serde_json::from_str(evidence_test_support::policy::APID_29213_POLICY).unwrap();
        v["policy_id"] = json!("pol-1");
        v["account"] = json!("acct saas");
        v["cluster"] = json!({"id": "SaaS01", "tier": "premium", "parent_id": "p-1"});
        serde_json::from_value(v).unwrap()
    }

    fn config(base: &str) -> ClinicConfig {
        ClinicConfig::new(
            Url::parse(base).unwrap(),
            HostAllowlist::new(["clinic.internal.example"]).unwrap(),
        )
    }

    #[test]
    fn cluster_scoped_path_from_policy() {
        let mut policy = policy();
        let p = ResolvedScope::of(&policy);
        let url = config("https://clinic.internal.example/clinic/")
            .query_url(&p)
            .unwrap();
        assert_eq!(
            url.as_str(),
            "https://clinic.internal.example/clinic/api/v1/clusters/SaaS01/prometheus/api/v1/query_range"
        );
        let c = config("https://clinic.internal.example")
            .with_query_path_template("/v2/{account}/{parent_id}/{cluster_id}/query_range");
        assert_eq!(
            c.query_url(&p).unwrap().path(),
            "/v2/acct%20saas/p-1/SaaS01/query_range"
        );
        policy.cluster.id = "../x/y".to_owned();
        let p = ResolvedScope::of(&policy);
        let url = config("https://clinic.internal.example")
            .query_url(&p)
            .unwrap();
        assert_eq!(
            url.path(),
            "/api/v1/clusters/..%2Fx%2Fy/prometheus/api/v1/query_range"
        );
    }

    #[test]
    fn bad_configuration_is_refused() {
        let p = ResolvedScope::of(&policy());
        for template in [
            "api/{cluster_id}",
            "/api/v1/query_range",
            "/api/{cluster}/x",
            "/api/{cluster_id",
            "/api/{cluster_id}}/x",
            "/api/{cluster_id}/../admin",
            "/api/{cluster_id}?x=1",
            "/api/{keyspace_id}/{cluster_id}",
        ] {
            let c = config("https://clinic.internal.example").with_query_path_template(template);
            assert!(
                matches!(c.query_url(&p), Err(ConnectorError::Config(_))),
                "{template}"
            );
        }
        assert!(matches!(
            config("https://other.example").query_url(&p),
            Err(ConnectorError::HostNotAllowed { .. })
        ));
        assert!(matches!(
            config("https://clinic.internal.example/?a=b").query_url(&p),
            Err(ConnectorError::Config(_))
        ));
    }

    #[test]
    fn secrets_never_print() {
        let s = ClinicSecrets::new(SecretString::from("tok-very-secret"));
        assert!(!format!("{s:?}").contains("very-secret"));
    }
}
