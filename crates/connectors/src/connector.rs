//! The connector seam: the async [`Connector`] trait, the network allowlist every base
//! URL is checked against, and what the connectors share in building results.

use std::fmt;
use std::net::Ipv6Addr;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use evidence_package::manifest::NetworkPolicy;
use evidence_policy::{LockedRequest, lock::LockedItem, lock::LockedQuery};
use evidence_result::{
    Correction, Details, Failure, Origin, PackageId, Provider, QueryId, RequestDigest, ResultError,
    ToolResult,
};
use url::Url;

use crate::codes::Code;
use crate::{ConnectorError, Deadline};

/// The connector of one Managed Tool package: it runs a [`LockedRequest`] against its
/// provider and answers with the one result transport of `evidence-result`.
///
/// Everything the model must not choose is already fixed when `call` starts: the
/// request was locked against the trusted policy (`evidence_policy::lock`), the
/// configuration comes from the deployment (base URLs, path templates, the network
/// allowlist, limits) and the secrets from the package's auth binding. A connector
/// checks its configuration (base URL host in the allowlist, target configured) and
/// answers rejected items before any network work.
///
/// A connector is a transport: it neither locks, nor guards, nor reads the trusted
/// policy. Every outcome — success, provider rejection, transport failure, refused
/// configuration, an item rejected while locking — is an `Ok` [`ToolResult`]; `Err` only
/// means the result contract refused to build one, which does not happen for details
/// built by the connectors here. The one caller is the sandbox call of `evidence-tool`
/// (`run_sandbox_call`), which locks before and guards after.
#[async_trait]
pub trait Connector: Send + Sync {
    /// Deployment configuration: base URLs, path templates, allowlist, limits.
    type Config: Send + Sync;
    /// The secrets the package's auth binding injects.
    type Secrets: Send + Sync;

    /// The package identity this connector serves.
    fn package(&self) -> PackageId;

    /// The provider this connector talks to.
    fn provider(&self) -> Provider;

    /// Runs a locked request by `deadline`: every step (session bootstrap, browser
    /// start, connect, headers, body) is raced against it, the provider's own `timeout`
    /// parameter is derived from what is left of it, and a step it cuts off answers the
    /// typed timeout of [`deadline_failure`](crate::deadline_failure). A connector that
    /// must clean up (Wetech's browser) keeps time for that before the deadline, so the
    /// result is handed back by it.
    async fn call_within(
        &self,
        request: &LockedRequest,
        config: &Self::Config,
        secrets: &Self::Secrets,
        deadline: &Deadline,
    ) -> Result<ToolResult, ResultError>;

    /// Runs a locked request without a call deadline ([`Deadline::none`]): only the
    /// configuration's own time limits apply. The same path as
    /// [`Connector::call_within`].
    async fn call(
        &self,
        request: &LockedRequest,
        config: &Self::Config,
        secrets: &Self::Secrets,
    ) -> Result<ToolResult, ResultError> {
        self.call_within(request, config, secrets, &Deadline::none())
            .await
    }

    /// Ends what the connector keeps between calls: a server calls it once, when it is
    /// told to stop, after which calls fail. Nothing for a connector that keeps nothing
    /// (the default); Wetech's warm browser is closed, its processes stopped and its
    /// profile removed.
    async fn close(&self) -> Result<(), CloseError> {
        Ok(())
    }
}

/// What a connector kept between calls could not be cleaned up ([`Connector::close`]).
#[derive(Debug, thiserror::Error)]
#[error("what the connector kept between calls could not be cleaned up: {0}")]
pub struct CloseError(pub String);

/// One allowlist entry: an exact host and, optionally, an exact port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct AllowedHost {
    host: String,
    port: Option<u16>,
}

/// The exact hosts a package may reach (its network allowlist). A base URL whose host
/// is not listed is refused before any request is sent.
///
/// Entries are `host` (any port) or `host:port` (that port only); IPv6 addresses are
/// written in brackets (`[::1]:9090`). Matching is exact and case-insensitive: no
/// wildcards, no suffix matching, no user information.
#[derive(Clone, PartialEq, Eq)]
pub struct HostAllowlist {
    hosts: Vec<AllowedHost>,
}

impl fmt::Debug for HostAllowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.hosts.iter().map(|h| match h.port {
                Some(p) => format!("{}:{p}", h.host),
                None => h.host.clone(),
            }))
            .finish()
    }
}

impl HostAllowlist {
    /// An allowlist of these entries (`host` or `host:port`).
    pub fn new<I, S>(hosts: I) -> Result<Self, ConnectorError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut out = Vec::new();
        for entry in hosts {
            out.push(parse_entry(entry.as_ref())?);
        }
        if out.is_empty() {
            return Err(ConnectorError::Config(
                "the network allowlist is empty".to_owned(),
            ));
        }
        out.sort();
        out.dedup();
        Ok(HostAllowlist { hosts: out })
    }

    /// The allowlist of a package manifest's network policy. An unrestricted network is
    /// never accepted.
    pub fn from_network(policy: &NetworkPolicy) -> Result<Self, ConnectorError> {
        match policy {
            NetworkPolicy::Restricted { hosts } => HostAllowlist::new(hosts),
            NetworkPolicy::Unrestricted => Err(ConnectorError::Config(
                "an unrestricted network is never allowed for a managed tool".to_owned(),
            )),
        }
    }

    /// True when `url`'s host (and port) is listed. URLs without a host, with user
    /// information, or with a scheme other than `http`/`https` are never allowed.
    pub fn allows(&self, url: &Url) -> bool {
        if !matches!(url.scheme(), "http" | "https")
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return false;
        }
        let Some(host) = url.host_str() else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        let port = url.port_or_known_default();
        self.hosts
            .iter()
            .any(|h| h.host == host && h.port.is_none_or(|p| Some(p) == port))
    }

    /// [`HostAllowlist::allows`], as [`ConnectorError::HostNotAllowed`] naming the host.
    pub fn check(&self, url: &Url) -> Result<(), ConnectorError> {
        if self.allows(url) {
            Ok(())
        } else {
            let host = match (url.host_str(), url.port()) {
                (Some(h), Some(p)) => format!("{h}:{p}"),
                (Some(h), None) => h.to_owned(),
                (None, _) => url.scheme().to_owned(),
            };
            Err(ConnectorError::HostNotAllowed { host })
        }
    }
}

fn parse_entry(raw: &str) -> Result<AllowedHost, ConnectorError> {
    let bad = |why: &str| ConnectorError::Config(format!("allowlist entry {raw:?}: {why}"));
    let entry = raw.trim().to_ascii_lowercase();
    if entry.is_empty() {
        return Err(bad("empty"));
    }
    if entry.contains(['/', '@', '*', '?', '#', ' ']) {
        return Err(bad("expected an exact host or host:port"));
    }
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (addr, tail) = rest.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
        addr.parse::<Ipv6Addr>()
            .map_err(|_| bad("not an IPv6 address"))?;
        let port = match tail {
            "" => None,
            t => Some(t.strip_prefix(':').ok_or_else(|| bad("bad port"))?),
        };
        (format!("[{addr}]"), port)
    } else {
        match entry.split_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (entry.clone(), None),
        }
    };
    if host.is_empty() || host.starts_with('.') || host.ends_with('.') {
        return Err(bad("expected an exact host or host:port"));
    }
    let port = port
        .map(|p| p.parse::<u16>().map_err(|_| bad("bad port")))
        .transpose()?;
    // Normalize the host the way `url` does, so `127.000.000.001` or an IDN compare
    // equal to what a URL reports.
    let normalized = Url::parse(&format!("http://{host}/"))
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .ok_or_else(|| bad("not a valid host"))?;
    Ok(AllowedHost {
        host: normalized,
        port,
    })
}

/// Seconds since the Unix epoch, now.
pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A failed result of the whole call. Should the contract refuse it (it does not for a
/// failure), an `internal` result says so.
pub(crate) fn failed(
    origin: Origin,
    query_id: Option<QueryId>,
    request_digest: Option<RequestDigest>,
    failure: Failure,
) -> Result<ToolResult, ResultError> {
    ToolResult::new(Details::failure(origin, query_id, request_digest, failure))
}

/// Builds a result, turning a refusal by the contract into an `internal` failure.
pub(crate) fn finish(details: Details) -> Result<ToolResult, ResultError> {
    let origin = details.origin();
    let query_id = details.query_id.clone();
    let digest = details.request_digest;
    match ToolResult::new(details) {
        Ok(result) => Ok(result),
        Err(e) => failed(
            origin,
            query_id,
            digest,
            internal(
                Code::ResultContract,
                format!("cannot build the result: {e}"),
            ),
        ),
    }
}

/// A failure with the fixed code `code` (of class `internal`, as every caller's is) and no
/// correction.
pub(crate) fn internal(code: Code, detail: impl Into<String>) -> Failure {
    Failure::new(code.code(), code.class(), detail).with_correction(Correction::for_class(
        code.class(),
        None,
        Vec::new(),
    ))
}

/// The one ready query of a one-operation package (Manus, Wetech), or the finished
/// result that answers the request instead: the request is for another package or
/// provider, its one item was rejected while locking, or it does not hold exactly one
/// item (`invalid_request`, e.g. [`Code::ManusInvalidRequest`]).
pub(crate) fn single_query<'r>(
    request: &'r LockedRequest,
    package: &PackageId,
    provider: Provider,
    invalid_request: Code,
) -> Result<&'r LockedQuery, Box<Result<ToolResult, ResultError>>> {
    let origin = request.origin();
    if let Some(f) = identity_failure(request, package, provider) {
        return Err(Box::new(failed(origin, None, None, f)));
    }
    match request.items.as_slice() {
        [LockedItem::Ready(q)] => Ok(q),
        [
            LockedItem::Rejected {
                query_id,
                request_digest,
                failure,
            },
        ] => Err(Box::new(failed(
            origin,
            Some(query_id.clone()),
            *request_digest,
            failure.clone(),
        ))),
        _ => Err(Box::new(failed(
            origin,
            None,
            None,
            internal(
                invalid_request,
                format!(
                    "the {} connector runs exactly one locked query per call",
                    provider.as_str()
                ),
            ),
        ))),
    }
}

/// The failure for a request that is not for this connector's package and provider;
/// `None` when it is.
pub(crate) fn identity_failure(
    request: &LockedRequest,
    package: &PackageId,
    provider: Provider,
) -> Option<Failure> {
    if &request.package == package && request.provider == provider {
        None
    } else {
        Some(internal(
            Code::wrong_package(provider),
            format!(
                "this connector runs {package} ({provider}) requests, not {} ({})",
                request.package, request.provider
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn exact_hosts_only() {
        let list =
            HostAllowlist::new(["Clinic.Internal.Example", "127.0.0.1:9090", "[::1]"]).unwrap();
        assert!(list.allows(&url("https://clinic.internal.example/api")));
        assert!(list.allows(&url("http://CLINIC.internal.example:8443/api")));
        assert!(list.allows(&url("http://127.0.0.1:9090/")));
        assert!(list.allows(&url("http://[::1]:1234/")));
        for refused in [
            "http://127.0.0.1:9091/",
            "http://127.0.0.1/",
            "https://evil-clinic.internal.example/",
            "https://clinic.internal.example.evil.com/",
            "https://internal.example/",
            "https://user:pw@clinic.internal.example/",
            "ftp://clinic.internal.example/",
            "file:///etc/passwd",
        ] {
            assert!(!list.allows(&url(refused)), "{refused}");
        }
        let err = list
            .check(&url("http://10.0.0.1:80/x?token=abc"))
            .unwrap_err();
        assert!(matches!(&err, ConnectorError::HostNotAllowed { host } if host == "10.0.0.1"));
        assert!(!err.to_string().contains("token"), "{err}");
        assert_eq!(
            format!("{list:?}"),
            r#"["127.0.0.1:9090", "[::1]", "clinic.internal.example"]"#
        );
        for bad in ["", "*.example", "http://x", "a/b", "u@h", "h:port", "[::1"] {
            assert!(HostAllowlist::new([bad]).is_err(), "{bad:?}");
        }
        assert!(HostAllowlist::new(Vec::<String>::new()).is_err());
        assert!(HostAllowlist::from_network(&NetworkPolicy::Unrestricted).is_err());
        let from_manifest = HostAllowlist::from_network(&NetworkPolicy::Restricted {
            hosts: vec!["clinic.internal.example".to_owned()],
        })
        .unwrap();
        assert!(from_manifest.allows(&url("https://clinic.internal.example/")));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A host is allowed exactly when it equals a listed host (case aside) and, for
        /// `host:port` entries, the port equals too: prefixes, suffixes, sub- and
        /// parent-domains and user information never pass.
        #[test]
        fn only_listed_hosts_pass(
            listed in "[a-z]{1,8}(\\.[a-z]{1,8}){1,2}",
            other in "[a-z]{1,8}(\\.[a-z]{1,8}){0,3}",
            port in 1u16..,
            other_port in 1u16..,
            pin_port in any::<bool>(),
            trick in 0u8..5,
        ) {
            let entry = if pin_port { format!("{listed}:{port}") } else { listed.clone() };
            let list = HostAllowlist::new([entry]).unwrap();
            let candidate = match trick {
                0 => other.clone(),
                1 => format!("{other}.{listed}"),
                2 => format!("{listed}.{other}"),
                3 => format!("{other}{listed}"),
                _ => listed.to_uppercase(),
            };
            let u = url(&format!("http://{candidate}:{other_port}/api/v1/query_range"));
            let expected = candidate.eq_ignore_ascii_case(&listed) && (!pin_port || port == other_port);
            prop_assert_eq!(list.allows(&u), expected);
            let with_user = url(&format!("http://{listed}@{candidate}:{other_port}/"));
            prop_assert_eq!(list.allows(&with_user), false);
        }
    }
}
