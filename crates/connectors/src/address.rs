//! Instance addresses in provider answers: detection, and replacement by opaque
//! references before anything reaches the model.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{LazyLock, Mutex, PoisonError};

use regex::{Captures, Regex};

use evidence_policy::addresses::ADDRESS_LABELS;

use crate::ConnectorError;
use crate::compact_address::is_host_name;
use crate::prometheus::LabelSanitizer;
use crate::reference::{ReferenceKeyRing, ReferenceScope};

/// The label whose value is always an instance address, and the purpose of the
/// references a caller may pass back as `instanceRef`.
pub(crate) const INSTANCE_LABEL: &str = "instance";

/// The purpose of references made for addresses found in free text.
const TEXT_PURPOSE: &str = "address";

/// What replaces an address when even sealing it failed (fail closed).
const ADDRESS_MARKER: &str = "[ADDRESS]";

/// `name="value"` pairs as Prometheus prints labels and matchers in its texts.
#[expect(
    clippy::expect_used,
    reason = "constant pattern, exercised by the unit tests"
)]
static LABEL_PAIR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"([A-Za-z_][A-Za-z0-9_]*)(\s*(?:=~|!~|!=|=)\s*)"((?:[^"\\]|\\.)*)""#)
        .expect("valid label pair pattern")
});

/// Address-shaped tokens in free text: a bracketed IPv6 address with an optional port,
/// an IPv4 address with an optional port, a dotted host name with or without a port
/// (and a trailing dot), a dotted host name (or `localhost`) with a port, or a run of
/// hex digits, dots and at least two colons (a bare IPv6 address). Every candidate is
/// validated before it is replaced.
#[expect(
    clippy::expect_used,
    reason = "constant pattern, exercised by the unit tests"
)]
static ADDRESS_TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\[[0-9A-Fa-f:.%a-zA-Z]+\](?::[0-9]{1,5})?",
        r"|(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?::[0-9]{1,5})?",
        r"|\b(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z][A-Za-z0-9-]{0,61}[A-Za-z0-9]\.?(?::[0-9]{1,5})?",
        r"|(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?:[0-9]{1,5}",
        r"|\blocalhost:[0-9]{1,5}",
        r"|[0-9A-Fa-f.]*:[0-9A-Fa-f.]*:[0-9A-Fa-f.:]*",
    ))
    .expect("valid address pattern")
});

/// True when a label value is an address. The shape, whatever the label:
/// - an IP address: IPv4 or IPv6, with or without a port, IPv6 bracketed when it has
///   one (`[2001:db8::1]` alone counts too);
/// - `host:port` with a DNS-style host name of one or more labels (`node:9100`,
///   `localhost:9090`, `tidb-07.saas01.svc:10080`);
/// - a dotted host name without a port ([`is_dotted_host_name`]:
///   `tidb-07.saas01.svc`, `TIDB-07.SaaS01.svc.`, `tidb-07.saas01`).
///
/// A bare single-label name without a port (`tidb-07`, `localhost`, `SaaS01`) is not
/// an address: it names a pod or a role, the same words labels without addresses use.
/// `host:port/path` and `user@host` are not addresses as a whole; the addresses inside
/// them are found and sealed by the text scan, which keeps the path and the user.
pub(crate) fn is_address(value: &str) -> bool {
    if value.parse::<IpAddr>().is_ok() || value.parse::<SocketAddr>().is_ok() {
        return true;
    }
    if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        return inner.parse::<Ipv6Addr>().is_ok();
    }
    match value.rsplit_once(':') {
        Some((host, port)) => is_port(port) && is_host_name(host),
        None => is_dotted_host_name(value),
    }
}

/// A host name of at least two labels whose last label starts with a letter and has at
/// least two characters (`tidb-07.saas01.svc`, `a.bc`, with an optional trailing dot,
/// any case), so numbers (`0.5`, `1.5e3`), versions (`v7.5.1`) and abbreviations (`e.g`)
/// are not host names.
fn is_dotted_host_name(value: &str) -> bool {
    let name = value.strip_suffix('.').unwrap_or(value);
    match name.rsplit_once('.') {
        Some((_, last)) => {
            last.len() >= 2
                && last.starts_with(|c: char| c.is_ascii_alphabetic())
                && is_host_name(name)
        }
        None => false,
    }
}

fn is_port(port: &str) -> bool {
    !port.is_empty()
        && port.len() <= 5
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u16>().is_ok()
}

/// True when an address-shaped token found in free text really is an address.
fn is_text_address(token: &str) -> bool {
    if token.contains(':') && !token.starts_with('[') && !token.contains('.') {
        // A bare IPv6 candidate: only a complete address counts (`1:10:` does not).
        return token.parse::<Ipv6Addr>().is_ok();
    }
    if let Some((host, _)) = token.rsplit_once(':')
        && host.parse::<Ipv4Addr>().is_err()
        && !host.starts_with('[')
        && host.contains(':')
    {
        return token.parse::<Ipv6Addr>().is_ok();
    }
    is_address(token)
}

/// Replaces instance addresses with opaque references sealed for one target and
/// package: the whole value of each label that always carries one (`instance`,
/// `host_ip`), any label value that is an address, addresses inside other label values, and addresses anywhere in provider
/// text (error text, warnings, the expression that ran).
///
/// The reference's purpose is the label it came from, so only a reference made from an
/// `instance` label can be passed back as `instanceRef`. Sealing is deterministic: the
/// same address and purpose give the same reference in every answer sealed with the
/// same key (the memo here only saves work). If sealing fails, labels fail
/// the compaction and text gets a fixed marker: an address is never passed through.
pub struct AddressSealer<'a> {
    keys: &'a ReferenceKeyRing,
    target: &'a str,
    package: &'a str,
    now: i64,
    sealed: Mutex<HashMap<(String, String), String>>,
}

impl std::fmt::Debug for AddressSealer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddressSealer")
            .field("target", &self.target)
            .field("package", &self.package)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

impl<'a> AddressSealer<'a> {
    /// A sealer for one target and package with `keys`' current key, valid at `now`
    /// (Unix seconds).
    pub fn new(keys: &'a ReferenceKeyRing, target: &'a str, package: &'a str, now: i64) -> Self {
        AddressSealer {
            keys,
            target,
            package,
            now,
            sealed: Mutex::new(HashMap::new()),
        }
    }

    fn seal(&self, purpose: &str, address: &str) -> Result<String, ConnectorError> {
        let key = (purpose.to_owned(), address.to_owned());
        let mut cache = self.sealed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = cache.get(&key) {
            return Ok(found.clone());
        }
        let scope = ReferenceScope {
            target: self.target,
            package: self.package,
            purpose,
        };
        let reference = self.keys.seal(address, scope, self.now)?;
        cache.insert(key, reference.clone());
        Ok(reference)
    }

    /// One label value, sanitized: sealed whole when its label always carries an
    /// address (`evidence_policy::addresses::ADDRESS_LABELS`: `instance`, `host_ip`) or when it is
    /// an address, otherwise with embedded addresses sealed.
    fn value(&self, name: &str, value: &str) -> Result<String, ConnectorError> {
        if ADDRESS_LABELS.contains(&name) || is_address(value) {
            self.seal(name, value)
        } else {
            Ok(self.tokens(value))
        }
    }

    /// Free text with every address replaced. An empty matcher value (`instance!=""`,
    /// which a discovery of `instance`'s values runs with) names no address and stays
    /// empty: sealed, it would read as a reference to some instance.
    pub fn text(&self, text: &str) -> String {
        let labelled = LABEL_PAIR.replace_all(text, |c: &Captures<'_>| {
            let value = if c[3].is_empty() {
                String::new()
            } else {
                self.value(&c[1], &c[3])
                    .unwrap_or_else(|_| ADDRESS_MARKER.to_owned())
            };
            format!("{}{}\"{value}\"", &c[1], &c[2])
        });
        self.tokens(&labelled)
    }

    /// Text with every address-shaped token replaced. A candidate that is not an
    /// address as a whole may start with one (`::ffff:0.0.0.0a`): the longest prefix
    /// that is an address is sealed and the scan goes on after it.
    fn tokens(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(m) = ADDRESS_TOKEN.find(rest) {
            out.push_str(&rest[..m.start()]);
            let token = m.as_str();
            let address = (1..=token.len())
                .rev()
                .filter(|&n| token.is_char_boundary(n))
                .find(|&n| is_text_address(&token[..n]));
            let taken = match address {
                Some(n) => {
                    let sealed = self
                        .seal(TEXT_PURPOSE, &token[..n])
                        .unwrap_or_else(|_| ADDRESS_MARKER.to_owned());
                    out.push_str(&sealed);
                    n
                }
                None => {
                    let first = token.chars().next().map_or(1, char::len_utf8);
                    out.push_str(&token[..first]);
                    first
                }
            };
            rest = &rest[m.start() + taken..];
        }
        out.push_str(rest);
        out
    }
}

impl LabelSanitizer for AddressSealer<'_> {
    fn sanitize(&self, labels: &mut BTreeMap<String, String>) -> Result<(), ConnectorError> {
        for (name, value) in labels.iter_mut() {
            let sanitized = self
                .value(name, value)
                .map_err(|e| ConnectorError::Sanitize(e.to_string()))?;
            *value = sanitized;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PACKAGE: &str = "managed_auto_oncall_manus";

    fn keys() -> ReferenceKeyRing {
        ReferenceKeyRing::new("k1", [9u8; 32]).unwrap()
    }

    fn open(keys: &ReferenceKeyRing, purpose: &str, reference: &str) -> String {
        let scope = ReferenceScope {
            target: "vida",
            package: PACKAGE,
            purpose,
        };
        keys.open(reference, scope, 0).unwrap()
    }

    #[test]
    fn address_shapes() {
        for yes in [
            "10.21.1.17:10080",
            "10.21.3.4",
            "::1",
            "fe80::1",
            "[2001:db8::1]:9100",
            "[2001:db8::1]",
            "tidb-07.saas01.svc:10080",
            "localhost:9090",
            "node:9100",
            // Host names without a port, and their neighbours.
            "node-130.saas02.svc",
            "tidb-07.saas01.svc.",
            "TIDB-07.SAAS01.SVC",
            "tidb-07.saas01",
            "tidb-07.saas01.svc.cluster.local",
            "tidb-07.saas01.svc.:10080",
        ] {
            assert!(is_address(yes), "{yes}");
        }
        for no in [
            "tidb",
            "SaaS02",
            "12:30",
            "0.5",
            "1.5e3",
            "v7.5.1",
            "e.g",
            "tidb-07",
            "localhost",
            "tidb-07.saas01.svc:10080/metrics",
            "root@tidb-07.saas01.svc",
            "[2001:db8::1]/64",
            "a b:1",
            "x:99999",
            "",
            "1:10",
            "-bad.host:80",
        ] {
            assert!(!is_address(no), "{no}");
        }
    }

    #[test]
    fn labels_become_references_bound_to_their_label() {
        let keys = keys();
        let sealer = AddressSealer::new(&keys, "vida", PACKAGE, 100);
        let mut labels: BTreeMap<String, String> = [
            ("instance", "tidb-a"),
            ("host_ip", "10.21.2.10"),
            ("job", "node"),
            ("url", "http://10.21.2.10:9100/metrics"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        sealer.sanitize(&mut labels).unwrap();
        assert_eq!(labels["job"], "node");
        assert_eq!(open(&keys, "instance", &labels["instance"]), "tidb-a");
        assert_eq!(open(&keys, "host_ip", &labels["host_ip"]), "10.21.2.10");
        let url = &labels["url"];
        assert!(
            url.starts_with("http://") && url.ends_with("/metrics"),
            "{url}"
        );
        assert!(!url.contains("10.21"), "{url}");
        // An address label is sealed whole whatever its shape.
        let mut odd = BTreeMap::from([("host_ip".to_owned(), "vida-node-7".to_owned())]);
        sealer.sanitize(&mut odd).unwrap();
        assert_eq!(open(&keys, "host_ip", &odd["host_ip"]), "vida-node-7");
        // A host_ip reference cannot be passed back as an instance reference.
        let scope = ReferenceScope {
            target: "vida",
            package: PACKAGE,
            purpose: INSTANCE_LABEL,
        };
        assert!(keys.open(&labels["host_ip"], scope, 0).is_err());
        // The same address and purpose give the same reference within one sealer.
        let mut again = BTreeMap::from([("host_ip".to_owned(), "10.21.2.10".to_owned())]);
        sealer.sanitize(&mut again).unwrap();
        assert_eq!(again["host_ip"], labels["host_ip"]);
    }

    #[test]
    fn provider_text_keeps_its_words() {
        let keys = keys();
        let sealer = AddressSealer::new(&keys, "vida", PACKAGE, 100);
        let text = r#"found duplicate series for the match group {cluster_id="SaaS02"} on the right hand-side of the operation: [{__name__="node_memory_MemTotal_bytes", cluster_id="SaaS02", instance="10.21.2.11:9100", job="node"}, {instance="10.21.2.10:9100"}];many-to-many matching not allowed: matching labels must be unique on one side"#;
        let out = sealer.text(text);
        assert!(!out.contains("10.21."), "{out}");
        assert!(out.starts_with(r#"found duplicate series for the match group {cluster_id="SaaS02"} on the right hand-side of the operation: [{__name__="node_memory_MemTotal_bytes", cluster_id="SaaS02", instance=""#));
        assert!(out.ends_with(
            r#""}];many-to-many matching not allowed: matching labels must be unique on one side"#
        ));
        let refs: Vec<&str> = LABEL_PAIR
            .captures_iter(&out)
            .filter(|c| &c[1] == "instance")
            .map(|c| c.get(3).unwrap().as_str())
            .collect();
        assert_eq!(open(&keys, "instance", refs[0]), "10.21.2.11:9100");
        assert_eq!(open(&keys, "instance", refs[1]), "10.21.2.10:9100");
        for keep in [
            "1:10: parse error: missing unit character in duration",
            "query timed out in expression evaluation",
            r#"rate(x{cluster_id="SaaS01"}[1m]) at 12:30"#,
        ] {
            assert_eq!(sealer.text(keep), keep);
        }
        let url = sealer.text(
            "Post \"http://127.0.0.1:4711/prometheus/api/v1/query_range\": connection refused",
        );
        assert!(!url.contains("127.0.0.1"), "{url}");
        assert!(url.ends_with("/prometheus/api/v1/query_range\": connection refused"));
    }

    /// An empty matcher value names no address: it stays empty in a text (a sealed
    /// empty value would read as some instance's reference), and a real one is sealed.
    #[test]
    fn an_empty_matcher_value_stays_empty() {
        let keys = keys();
        let sealer = AddressSealer::new(&keys, "vida", PACKAGE, 100);
        let text = sealer.text(r#"up{cluster_id="SaaS01",instance!="",host_ip=""}"#);
        assert_eq!(text, r#"up{cluster_id="SaaS01",instance!="",host_ip=""}"#);
        let text = sealer.text(r#"up{instance="10.21.1.17:10080"}"#);
        assert!(
            !text.contains("10.21.1.17") && !text.contains(r#"instance="""#),
            "{text}"
        );
    }

    /// The neighbours of the address shape, in a label without addresses of its own:
    /// the address inside is sealed, the rest of the value kept.
    #[test]
    fn addresses_inside_values_are_sealed_and_the_rest_kept() {
        let keys = keys();
        let sealer = AddressSealer::new(&keys, "vida", PACKAGE, 100);
        for (value, address, rest) in [
            ("tidb-07.saas01.svc", "tidb-07.saas01.svc", ("", "")),
            ("tidb-07.saas01.svc.", "tidb-07.saas01.svc.", ("", "")),
            ("TIDB-07.SaaS01.SVC", "TIDB-07.SaaS01.SVC", ("", "")),
            ("[2001:db8::1]", "[2001:db8::1]", ("", "")),
            (
                "tidb-07.saas01.svc:10080/metrics",
                "tidb-07.saas01.svc:10080",
                ("", "/metrics"),
            ),
            (
                "root@tidb-07.saas01.svc",
                "tidb-07.saas01.svc",
                ("root@", ""),
            ),
            ("root@10.21.1.17", "10.21.1.17", ("root@", "")),
            (
                "http://tidb-07.saas01.svc/status",
                "tidb-07.saas01.svc",
                ("http://", "/status"),
            ),
        ] {
            let mut labels = BTreeMap::from([("hostname".to_owned(), value.to_owned())]);
            sealer.sanitize(&mut labels).unwrap();
            let sealed = &labels["hostname"];
            let (before, after) = rest;
            let inner = sealed
                .strip_prefix(before)
                .and_then(|v| v.strip_suffix(after))
                .unwrap_or_else(|| panic!("{value}: {sealed}"));
            let purpose = if inner.len() == sealed.len() {
                "hostname"
            } else {
                TEXT_PURPOSE
            };
            assert_eq!(open(&keys, purpose, inner), address, "{value}");
            // In free text too.
            let text = sealer.text(&format!("connect to {value} failed"));
            assert!(!text.contains(address), "{value}: {text}");
        }
        // A bare single-label name is no address: kept, like any other word.
        for word in ["tidb-07", "localhost", "SaaS01", "v7.5.1", "e.g", "0.5"] {
            let mut labels = BTreeMap::from([("hostname".to_owned(), word.to_owned())]);
            sealer.sanitize(&mut labels).unwrap();
            assert_eq!(labels["hostname"], word);
        }
    }

    fn address() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<Ipv4Addr>().prop_map(|a| a.to_string()),
            (any::<Ipv4Addr>(), 1u16..).prop_map(|(a, p)| format!("{a}:{p}")),
            any::<Ipv6Addr>().prop_map(|a| a.to_string()),
            (any::<Ipv6Addr>(), 1u16..).prop_map(|(a, p)| format!("[{a}]:{p}")),
            (
                "[a-z][a-z0-9-]{0,10}[a-z0-9](\\.[a-z][a-z0-9]{0,8}){1,3}",
                1u16..
            )
                .prop_map(|(h, p)| format!("{h}:{p}")),
            // Host names without a port, any case, with or without a trailing dot.
            "[a-zA-Z][a-zA-Z0-9-]{0,10}[a-zA-Z0-9](\\.[a-zA-Z][a-zA-Z0-9]{1,8}){1,3}\\.?",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// No address survives: not in label values (whatever the label), not in free
        /// text wherever it sits; `instance` references open to the original.
        #[test]
        fn addresses_never_reach_the_model(
            addr in address(),
            name in "[a-z_]{1,12}",
            before in "[a-z {}=,(\\[]{0,20}",
            after in "[a-z }=,)\\]/;]{0,20}",
            quoted in any::<bool>(),
        ) {
            let keys = keys();
            let sealer = AddressSealer::new(&keys, "vida", PACKAGE, 100);
            let mut labels = BTreeMap::from([
                (name.clone(), addr.clone()),
                (INSTANCE_LABEL.to_owned(), addr.clone()),
                ("embedded".to_owned(), format!("{before} {addr} {after}")),
            ]);
            sealer.sanitize(&mut labels).unwrap();
            for value in labels.values() {
                prop_assert!(!value.contains(&addr), "{} in {:?}", addr, labels);
            }
            prop_assert_eq!(open(&keys, INSTANCE_LABEL, &labels[INSTANCE_LABEL]), addr.clone());
            let text = if quoted {
                format!("{before}{name}=\"{addr}\"{after}")
            } else {
                format!("{before} {addr}{after}")
            };
            let out = sealer.text(&text);
            prop_assert!(!out.contains(&addr), "{} in {}", addr, out);
        }
    }
}
