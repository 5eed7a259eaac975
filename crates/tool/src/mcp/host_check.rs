//! DNS-rebinding protection of both listeners of a server over HTTP: a request's `Host`
//! must be one of the allowed hosts, and a request that carries an `Origin` must come
//! from an allowed origin, or it is refused before anything of it is read.

use hyper::Request;

/// The `Host` and `Origin` rules: `Err` names the refusal. One `Host` header that is
/// allowed, and no `Origin` or one allowed `Origin`.
pub(crate) fn check_host_and_origin<B>(
    request: &Request<B>,
    hosts: &[String],
    origins: &[String],
) -> Result<(), &'static str> {
    let header = |name| {
        let mut values = request.headers().get_all(name).iter();
        match (values.next(), values.next()) {
            (None, _) => Ok(None),
            (Some(value), None) => value.to_str().map(Some).map_err(|_| ()),
            (Some(_), Some(_)) => Err(()),
        }
    };
    match header(hyper::header::HOST) {
        Ok(Some(host)) if hosts.iter().any(|a| host_matches(a, host)) => {}
        _ => return Err("host_not_allowed"),
    }
    match header(hyper::header::ORIGIN) {
        Ok(None) => Ok(()),
        Ok(Some(origin)) if origins.iter().any(|a| a.eq_ignore_ascii_case(origin)) => Ok(()),
        _ => Err("origin_not_allowed"),
    }
}

/// Whether the `Host` value `host` is the allowed `allowed`: the same `host:port`, or,
/// for an allowed value without a port, the same host on any port (as `rmcp` matches).
pub(crate) fn host_matches(allowed: &str, host: &str) -> bool {
    if allowed.eq_ignore_ascii_case(host) {
        return true;
    }
    let name = match host.rsplit_once(':') {
        // `[::1]:80` and `name:80`; a bare IPv6 literal has no port to strip.
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            if name.starts_with('[') || !name.contains(':') {
                name
            } else {
                host
            }
        }
        _ => host,
    };
    let has_port = allowed.rsplit_once(':').is_some_and(|(name, port)| {
        port.bytes().all(|b| b.is_ascii_digit()) && (name.starts_with('[') || !name.contains(':'))
    });
    !has_port && allowed.eq_ignore_ascii_case(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_with_their_port_or_any_port_when_allowed_without_one() {
        assert!(host_matches("127.0.0.1:4100", "127.0.0.1:4100"));
        assert!(host_matches("LOCALHOST:4100", "localhost:4100"));
        assert!(!host_matches("127.0.0.1:4100", "127.0.0.1:4101"));
        assert!(!host_matches("127.0.0.1:4100", "127.0.0.1"));
        assert!(host_matches("127.0.0.1", "127.0.0.1:4100"));
        assert!(host_matches("tools.internal", "tools.internal"));
        assert!(!host_matches("tools.internal", "tools.internal.evil:80"));
        assert!(!host_matches("tools.internal", "evil.example:80"));
        assert!(host_matches("[::1]", "[::1]:4100"));
        assert!(host_matches("[::1]:4100", "[::1]:4100"));
        assert!(!host_matches("[::1]:4100", "[::1]:4"));
    }
}
