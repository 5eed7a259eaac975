//! The plaintext of an opaque reference: an address encoded compactly before it is
//! sealed, so references stay short, and padded so a reference's length tells at most
//! the shape of its address.
//!
//! | kind | address text (exactly as the provider wrote it) | plaintext |
//! | --- | --- | --- |
//! | [`Kind::Ipv4`] | `10.21.1.17` | 4 bytes |
//! | [`Kind::Ipv4Port`] | `10.21.1.17:10080` | 6 bytes (address, port big-endian) |
//! | [`Kind::Ipv6`] | `2001:db8::17` | 16 bytes |
//! | [`Kind::Ipv6Port`] | `[2001:db8::17]:10080` | 18 bytes |
//! | [`Kind::HostPort`] | `tidb-07.saas01.svc:10080` | port (2 bytes), host, padding |
//! | [`Kind::Text`] | anything else (`tidb-07.saas01.svc`, `[::1]`, `Tidb-07.`) | text, padding |
//!
//! An address takes a binary kind only when decoding gives back the very same text
//! (`010.0.0.1`, `::FFFF:1` or port `0080` fall back to [`Kind::Text`]): a reference
//! always opens to the exact bytes the provider stored, so an `instance` matcher bound
//! from it matches. Padded kinds end in `0x80` then zeros, up to the next length class
//! of [`PADDED_CLASSES`] (and beyond the last, the next multiple of it): every IPv4
//! address with its port gives one reference length, and host names give a few.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

use zeroize::Zeroizing;

/// The plaintext lengths of padded kinds: a padded plaintext is the first class that
/// holds the text and its end marker, or beyond the last class the next multiple of it.
pub(crate) const PADDED_CLASSES: [usize; 5] = [16, 24, 32, 48, 64];

/// The byte that ends the text of a padded kind (then zeros up to the class length).
const END: u8 = 0x80;

/// The shape of an encoded address; carried (authenticated) in the reference header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An IPv4 address.
    Ipv4 = 0,
    /// An IPv4 address and a port.
    Ipv4Port = 1,
    /// An IPv6 address.
    Ipv6 = 2,
    /// A bracketed IPv6 address and a port.
    Ipv6Port = 3,
    /// A host name and a port, padded.
    HostPort = 4,
    /// Any other text, padded.
    Text = 5,
}

impl Kind {
    /// The kind of a header nibble.
    pub(crate) fn from_nibble(n: u8) -> Option<Kind> {
        Some(match n {
            0 => Kind::Ipv4,
            1 => Kind::Ipv4Port,
            2 => Kind::Ipv6,
            3 => Kind::Ipv6Port,
            4 => Kind::HostPort,
            5 => Kind::Text,
            _ => return None,
        })
    }
}

/// The kind and plaintext of `address`.
pub(crate) fn encode(address: &str) -> (Kind, Zeroizing<Vec<u8>>) {
    let exact = |shown: String| shown == address;
    if let Ok(ip) = address.parse::<Ipv4Addr>()
        && exact(ip.to_string())
    {
        return (Kind::Ipv4, Zeroizing::new(ip.octets().to_vec()));
    }
    if let Ok(sa) = address.parse::<SocketAddrV4>()
        && exact(sa.to_string())
    {
        let mut out = Zeroizing::new(sa.ip().octets().to_vec());
        out.extend_from_slice(&sa.port().to_be_bytes());
        return (Kind::Ipv4Port, out);
    }
    if let Ok(ip) = address.parse::<Ipv6Addr>()
        && exact(ip.to_string())
    {
        return (Kind::Ipv6, Zeroizing::new(ip.octets().to_vec()));
    }
    if let Ok(sa) = address.parse::<SocketAddrV6>()
        && sa.scope_id() == 0
        && exact(sa.to_string())
    {
        let mut out = Zeroizing::new(sa.ip().octets().to_vec());
        out.extend_from_slice(&sa.port().to_be_bytes());
        return (Kind::Ipv6Port, out);
    }
    if let Some((host, port)) = address.rsplit_once(':')
        && let Ok(number) = port.parse::<u16>()
        && number.to_string() == port
        && is_host_name(host)
    {
        let mut text = Zeroizing::new(number.to_be_bytes().to_vec());
        text.extend_from_slice(host.as_bytes());
        return (Kind::HostPort, pad(&text));
    }
    (Kind::Text, pad(address.as_bytes()))
}

/// The address text of a plaintext of `kind`, when its framing holds.
pub(crate) fn decode(kind: Kind, plain: &[u8]) -> Option<String> {
    match kind {
        Kind::Ipv4 => {
            let octets: [u8; 4] = plain.try_into().ok()?;
            Some(Ipv4Addr::from(octets).to_string())
        }
        Kind::Ipv4Port => {
            let (ip, port) = with_port::<4>(plain)?;
            Some(SocketAddrV4::new(Ipv4Addr::from(ip), port).to_string())
        }
        Kind::Ipv6 => {
            let octets: [u8; 16] = plain.try_into().ok()?;
            Some(Ipv6Addr::from(octets).to_string())
        }
        Kind::Ipv6Port => {
            let (ip, port) = with_port::<16>(plain)?;
            Some(SocketAddrV6::new(Ipv6Addr::from(ip), port, 0, 0).to_string())
        }
        Kind::HostPort => {
            let text = unpad(plain)?;
            let (port, host) = text.split_first_chunk::<2>()?;
            let host = std::str::from_utf8(host).ok()?;
            Some(format!("{host}:{}", u16::from_be_bytes(*port)))
        }
        Kind::Text => String::from_utf8(unpad(plain)?.to_vec()).ok(),
    }
}

/// An `N`-byte address and a big-endian port: exactly `N + 2` bytes.
fn with_port<const N: usize>(plain: &[u8]) -> Option<([u8; N], u16)> {
    let (ip, port) = plain.split_first_chunk::<N>()?;
    let port: [u8; 2] = port.try_into().ok()?;
    Some((*ip, u16::from_be_bytes(port)))
}

/// The length a padded plaintext takes for `len` bytes of text.
pub(crate) fn padded_len(len: usize) -> usize {
    let need = len + 1;
    let last = PADDED_CLASSES[PADDED_CLASSES.len() - 1];
    PADDED_CLASSES
        .iter()
        .copied()
        .find(|&class| class >= need)
        .unwrap_or_else(|| need.div_ceil(last) * last)
}

/// `text`, the end marker, zeros up to its class.
fn pad(text: &[u8]) -> Zeroizing<Vec<u8>> {
    let mut out = Zeroizing::new(Vec::with_capacity(padded_len(text.len())));
    out.extend_from_slice(text);
    out.push(END);
    out.resize(padded_len(text.len()), 0);
    out
}

/// The text inside a padded plaintext: the length is a class, the text ends in the end
/// marker followed only by zeros.
fn unpad(plain: &[u8]) -> Option<&[u8]> {
    let end = plain.iter().rposition(|&b| b != 0)?;
    let text = plain.get(..end)?;
    (plain.get(end) == Some(&END) && padded_len(text.len()) == plain.len()).then_some(text)
}

/// A DNS-style host name with at least one letter (so `12:30` is not an address), with
/// an optional trailing dot.
pub(crate) fn is_host_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    !host.is_empty()
        && host.len() <= 253
        && host.bytes().any(|b| b.is_ascii_alphabetic())
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn shapes_and_lengths() {
        for (address, kind, len) in [
            ("10.21.1.17", Kind::Ipv4, 4),
            ("10.21.1.17:10080", Kind::Ipv4Port, 6),
            ("255.255.255.255:65535", Kind::Ipv4Port, 6),
            ("2001:db8::17", Kind::Ipv6, 16),
            ("[2001:db8::17]:10080", Kind::Ipv6Port, 18),
            ("tidb-07.saas01.svc:10080", Kind::HostPort, 24),
            ("localhost:9090", Kind::HostPort, 16),
            ("tidb-07.saas01.svc", Kind::Text, 24),
            ("TIDB-07.SAAS01.SVC.", Kind::Text, 24),
            ("[2001:db8::17]", Kind::Text, 16),
            // Not the text their binary form prints: kept as written.
            ("010.21.1.17", Kind::Text, 16),
            ("10.21.1.17:0080", Kind::Text, 16),
            ("2001:DB8::17", Kind::Text, 16),
            ("tidb:080", Kind::Text, 16),
            ("", Kind::Text, 16),
        ] {
            let (k, plain) = encode(address);
            assert_eq!((k, plain.len()), (kind, len), "{address}");
            assert_eq!(decode(k, &plain).as_deref(), Some(address), "{address}");
        }
        assert_eq!(padded_len(15), 16);
        assert_eq!(padded_len(16), 24);
        assert_eq!(padded_len(63), 64);
        assert_eq!(padded_len(64), 128);
        assert_eq!(padded_len(200), 256);
    }

    #[test]
    fn broken_framing_decodes_to_nothing() {
        assert_eq!(decode(Kind::Ipv4, &[1, 2, 3]), None);
        assert_eq!(decode(Kind::Ipv4Port, &[1, 2, 3, 4, 5, 6, 7]), None);
        assert_eq!(decode(Kind::Ipv6Port, &[0; 16]), None);
        assert_eq!(decode(Kind::Text, &[0; 16]), None);
        let mut text = pad(b"tidb");
        assert_eq!(decode(Kind::Text, &text).as_deref(), Some("tidb"));
        text.push(0);
        assert_eq!(decode(Kind::Text, &text), None, "not a class length");
        let mut marker = pad(b"tidb");
        marker[4] = 0x81;
        assert_eq!(decode(Kind::Text, &marker), None, "no end marker");
        assert_eq!(decode(Kind::HostPort, &pad(b"x")), None, "no port");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// Every text decodes to itself, whatever kind it takes.
        #[test]
        fn every_text_round_trips(address in "\\PC{0,80}") {
            let (kind, plain) = encode(&address);
            prop_assert_eq!(decode(kind, &plain), Some(address));
        }

        /// Every IPv4 address with its port takes the same 6 bytes, every bracketed
        /// IPv6 address with its port 18.
        #[test]
        fn ip_with_port_has_one_length(v4 in any::<Ipv4Addr>(), v6 in any::<Ipv6Addr>(), port in any::<u16>()) {
            for (address, shape) in [
                (format!("{v4}:{port}"), (Kind::Ipv4Port, 6)),
                (format!("[{v6}]:{port}"), (Kind::Ipv6Port, 18)),
            ] {
                let (kind, plain) = encode(&address);
                prop_assert_eq!((kind, plain.len()), shape);
                prop_assert_eq!(decode(kind, &plain), Some(address));
            }
        }
    }
}
