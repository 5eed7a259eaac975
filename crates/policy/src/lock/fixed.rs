//! The platform-fixed word list: which argument keys each provider accepts, and which
//! other keys try to set something the platform fixes from trusted policy (provider,
//! cluster, ticket, account, target, address, time window, operation, credentials,
//! limits), so that they get a clear non-widening correction.

use std::collections::BTreeSet;

use evidence_result::Failure;
use serde_json::{Map, Value};

use super::code::Code;

/// What a provider's arguments may hold.
pub(super) struct Spec {
    /// The argument keys of one query.
    pub(super) keys: &'static [&'static str],
    /// Whether `unit` is required.
    pub(super) unit_required: bool,
    /// Whether `instanceRef` is accepted.
    pub(super) instance_ref: bool,
    /// Whether instance addresses are sealed in answers, so that the expression may
    /// neither test nor move one (see `crate::addresses`).
    pub(super) sealed_addresses: bool,
}

/// One query of a Clinic batch.
pub(super) const CLINIC_QUERY: Spec = Spec {
    keys: &["queryId", "expr", "step", "unit"],
    unit_required: false,
    instance_ref: false,
    sealed_addresses: false,
};
/// The Manus arguments.
pub(super) const MANUS: Spec = Spec {
    keys: &["queryId", "expr", "step", "instanceRef"],
    unit_required: false,
    instance_ref: true,
    sealed_addresses: true,
};
/// The Wetech arguments.
pub(super) const WETECH: Spec = Spec {
    keys: &["queryId", "expr", "unit", "step"],
    unit_required: true,
    instance_ref: false,
    sealed_addresses: false,
};

/// What the platform fixes that an argument named `key` tries to set, if anything.
fn platform_fixed(key: &str) -> Option<&'static str> {
    let n: String = key
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let has = |parts: &[&str]| parts.iter().any(|p| n.contains(p));
    let is = |names: &[&str]| names.contains(&n.as_str());
    if has(&["provider", "datasource"]) {
        Some("provider")
    } else if has(&["cluster", "keyspace", "tenant"]) || is(&["tier", "parentid", "region"]) {
        Some("cluster")
    } else if has(&["ticket", "jira"]) || is(&["issue", "issuekey", "incident"]) {
        Some("ticket")
    } else if has(&["account"]) || is(&["org", "orgid", "organization", "project", "projectid"]) {
        Some("account")
    } else if has(&["target", "vida", "monica"])
        || is(&[
            "instance",
            "instanceid",
            "instanceaddress",
            "address",
            "addr",
            "ip",
        ])
    {
        Some("target")
    } else if has(&["url", "uri", "host", "endpoint", "domain"]) || is(&["port", "server"]) {
        Some("provider address")
    } else if has(&["window", "timerange", "lookback", "timestamp", "timezone"])
        || is(&[
            "start",
            "end",
            "time",
            "from",
            "to",
            "since",
            "until",
            "starttime",
            "endtime",
            "range",
            "duration",
            "at",
            "offset",
            "tz",
            "now",
            "period",
            "startts",
            "endts",
        ])
    {
        Some("time window")
    } else if has(&["operation", "package", "policy"]) || is(&["op", "method", "api", "path"]) {
        Some("operation")
    } else if has(&[
        "token",
        "password",
        "cookie",
        "secret",
        "credential",
        "apikey",
        "auth",
        "header",
        "session",
    ]) {
        Some("credentials")
    } else if is(&["limit", "limits", "maxpoints", "maxseries", "maxbatch"]) {
        Some("limits")
    } else {
        None
    }
}

/// Keys outside a spec: `(forbidden, unknown)`, each sorted.
fn extra_keys(
    obj: &Map<String, Value>,
    allowed: &[&str],
) -> (Vec<(String, &'static str)>, Vec<String>) {
    let mut forbidden = Vec::new();
    let mut unknown = Vec::new();
    for key in obj.keys().filter(|k| !allowed.contains(&k.as_str())) {
        match platform_fixed(key) {
            Some(what) => forbidden.push((key.clone(), what)),
            None => unknown.push(key.clone()),
        }
    }
    (forbidden, unknown)
}

pub(super) fn quoted_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    items
        .into_iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A rejection for keys outside the spec, if any.
pub(super) fn extras_failure(obj: &Map<String, Value>, allowed: &[&str]) -> Option<Failure> {
    let (forbidden, unknown) = extra_keys(obj, allowed);
    let allowed_list = quoted_list(allowed.iter().copied());
    if !forbidden.is_empty() {
        let fixed: BTreeSet<&str> = forbidden.iter().map(|(_, w)| *w).collect();
        let fixed = fixed.into_iter().collect::<Vec<_>>().join(", ");
        let keys = quoted_list(
            forbidden
                .iter()
                .map(|(k, _)| k.as_str())
                .chain(unknown.iter().map(String::as_str)),
        );
        return Some(Code::ForbiddenArgument.failure(
            format!(
                "arguments {keys} are not accepted: the platform fixes the {fixed} from trusted policy"
            ),
            &format!(
                "The platform fixes the {fixed}; leave {keys} out of the arguments (allowed: {allowed_list})."
            ),
        ));
    }
    if !unknown.is_empty() {
        let keys = quoted_list(unknown.iter().map(String::as_str));
        return Some(Code::UnknownArgument.failure(
            format!("unknown arguments {keys}"),
            &format!("Remove {keys}; the allowed arguments are {allowed_list}."),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_fixed_names() {
        for (k, what) in [
            ("provider", "provider"),
            ("clusterId", "cluster"),
            ("cluster_id", "cluster"),
            ("ticket", "ticket"),
            ("accountId", "account"),
            ("target", "target"),
            ("url", "provider address"),
            ("grafanaHost", "provider address"),
            ("start", "time window"),
            ("timeRange", "time window"),
            ("end", "time window"),
            ("time", "time window"),
            ("keyspaceId", "cluster"),
        ] {
            assert_eq!(platform_fixed(k), Some(what), "{k}");
        }
        for k in ["query", "expression", "legend"] {
            assert_eq!(platform_fixed(k), None, "{k}");
        }
    }
}
