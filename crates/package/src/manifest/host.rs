//! The network allowlist: restricted, not empty, and each host a DNS name, an IPv4
//! address or a bracketed IPv6 address, with an optional port, lower-cased; never a URL,
//! a wildcard or a range.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::error::ManifestError;
use super::model::NetworkPolicy;

/// The refusal of a host for a reason that has no error of its own.
type Invalid<'a> = &'a dyn Fn(&'static str) -> ManifestError;

/// Checks the network policy: restricted to a non-empty list of hosts, which come out
/// normalized, sorted and de-duplicated.
pub(super) fn normalize_network(network: &NetworkPolicy) -> Result<NetworkPolicy, ManifestError> {
    let hosts = match network {
        NetworkPolicy::Unrestricted => return Err(ManifestError::UnrestrictedNetwork),
        NetworkPolicy::Restricted { hosts } => hosts,
    };
    if hosts.is_empty() {
        return Err(ManifestError::EmptyHostList);
    }
    let mut out = BTreeSet::new();
    for (i, host) in hosts.iter().enumerate() {
        out.insert(normalize_host(&format!("network.hosts[{i}]"), host)?);
    }
    Ok(NetworkPolicy::Restricted {
        hosts: out.into_iter().collect(),
    })
}

/// Lower-cases and checks one allowlist host: a DNS name, an IPv4 address or a bracketed
/// IPv6 address, with an optional port.
fn normalize_host(field: &str, raw: &str) -> Result<String, ManifestError> {
    let host = raw.to_ascii_lowercase();
    let invalid = |reason| ManifestError::InvalidHost {
        field: field.to_owned(),
        host: raw.to_owned(),
        reason,
    };
    if host.is_empty() {
        return Err(invalid("empty host"));
    }
    refuse_url_parts(field, raw, &host)?;
    check_characters(&host, &invalid)?;
    if let Some(rest) = host.strip_prefix('[') {
        check_bracketed_ipv6(rest, &invalid)?;
        return Ok(host);
    }
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host.as_str(), None),
    };
    if name.contains(':') {
        return Err(invalid("write IPv6 addresses in brackets"));
    }
    check_port(port, &invalid)?;
    if name.parse::<Ipv4Addr>().is_ok() {
        return Ok(host);
    }
    check_dns_name(name, &invalid)?;
    Ok(host)
}

/// Refuses what makes a host a URL or a pattern: a scheme, a wildcard, a CIDR range, a
/// path, a query or a fragment.
fn refuse_url_parts(field: &str, raw: &str, host: &str) -> Result<(), ManifestError> {
    if host.contains("://") {
        return Err(ManifestError::HostWithScheme {
            field: field.to_owned(),
            host: raw.to_owned(),
        });
    }
    if host.contains('*') || host.starts_with('.') {
        return Err(ManifestError::WildcardHost {
            field: field.to_owned(),
            host: raw.to_owned(),
        });
    }
    if let Some((addr, bits)) = host.split_once('/') {
        let addr = addr.trim_start_matches('[').trim_end_matches(']');
        if addr.parse::<IpAddr>().is_ok()
            && !bits.is_empty()
            && bits.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(ManifestError::HostIsCidr {
                field: field.to_owned(),
                host: raw.to_owned(),
            });
        }
        return Err(ManifestError::HostWithPath {
            field: field.to_owned(),
            host: raw.to_owned(),
        });
    }
    if host.contains(['?', '#']) {
        return Err(ManifestError::HostWithPath {
            field: field.to_owned(),
            host: raw.to_owned(),
        });
    }
    Ok(())
}

/// Refuses user information, non-ASCII text (a host is written in its punycode form),
/// whitespace and control characters.
fn check_characters(host: &str, invalid: Invalid<'_>) -> Result<(), ManifestError> {
    if host.contains('@') {
        return Err(invalid("user information is not part of a host"));
    }
    if !host.is_ascii() {
        return Err(invalid("use the ASCII (punycode) form"));
    }
    if host
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(invalid("whitespace or control character"));
    }
    Ok(())
}

/// Checks what follows the `[` of a bracketed host: an IPv6 address, `]`, and an
/// optional `:port`.
fn check_bracketed_ipv6(rest: &str, invalid: Invalid<'_>) -> Result<(), ManifestError> {
    let (inner, after) = rest
        .split_once(']')
        .ok_or_else(|| invalid("unclosed '['"))?;
    if inner.parse::<Ipv6Addr>().is_err() {
        return Err(invalid("not an IPv6 address"));
    }
    let port = match after {
        "" => None,
        p => Some(
            p.strip_prefix(':')
                .ok_or_else(|| invalid("junk after ']'"))?,
        ),
    };
    check_port(port, invalid)
}

/// Checks a port, when there is one: a number from 1 to 65535 of at most five digits.
fn check_port(port: Option<&str>, invalid: Invalid<'_>) -> Result<(), ManifestError> {
    if let Some(port) = port {
        let ok = !port.is_empty()
            && port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u16>().is_ok_and(|p| p > 0);
        if !ok {
            return Err(invalid("the port is a number from 1 to 65535"));
        }
    }
    Ok(())
}

/// Checks a DNS name: at most 253 bytes of dot-separated labels of 1 to 63 letters,
/// digits and inner `-`, not all digits (that would be a malformed IPv4 address).
fn check_dns_name(name: &str, invalid: Invalid<'_>) -> Result<(), ManifestError> {
    if name.len() > 253 {
        return Err(invalid("longer than 253 bytes"));
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        if label.is_empty() || label.len() > 63 {
            return Err(invalid("each dot-separated label has 1 to 63 characters"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(invalid("a label neither starts nor ends with '-'"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(invalid("labels use letters, digits and '-' only"));
        }
    }
    if labels.iter().all(|l| l.bytes().all(|b| b.is_ascii_digit())) {
        return Err(invalid("not a valid IPv4 address"));
    }
    Ok(())
}
