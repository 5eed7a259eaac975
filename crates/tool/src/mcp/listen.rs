//! The command line of a package's MCP server: the transport ([`McpTransport`]: stdio,
//! or Streamable HTTP at one address) and, over HTTP, the configuration [`HttpListen`]:
//! the agent's listen address, the operator listener the runtime delivers envelopes to
//! (`--operator ADDR`), TLS files, the `Host` and `Origin` values allowed, and the
//! bounds of [`super::limits`]. Plain HTTP is accepted on loopback addresses only, on
//! both listeners; anything else needs TLS. The server re-executes itself with the
//! arguments [`McpTransport::to_args`] gives back.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use tokio_util::sync::CancellationToken;

use crate::log::{LOG_FORMAT_FLAG, LogFormat};
use crate::mcp::limits::ServerLimits;
use crate::mcp::tls::{TLS_CERT_FLAG, TLS_KEY_FLAG, TlsFiles};

/// The flag that starts a tool binary as its package's MCP server over stdio (the
/// server re-executes itself with it).
pub const MCP_FLAG: &str = "--mcp";
/// The flag that starts a tool binary as its package's MCP server over Streamable HTTP,
/// followed by the listen address (`127.0.0.1:PORT`; port `0` takes a free port, and
/// the server names the one it bound on stderr).
pub const MCP_HTTP_FLAG: &str = "--mcp-http";
/// The flag (repeatable, after [`MCP_HTTP_FLAG`]) naming an allowed `Host` value,
/// `host` or `host:port`; given once or more, it replaces the default hosts.
pub const ALLOW_HOST_FLAG: &str = "--allow-host";
/// The flag (repeatable, after [`MCP_HTTP_FLAG`]) naming an allowed `Origin`,
/// `scheme://host:port`; given once or more, it replaces the default origins.
pub const ALLOW_ORIGIN_FLAG: &str = "--allow-origin";
/// The flag (after [`MCP_HTTP_FLAG`]) naming the operator listener's address: where the
/// runtime delivers envelopes (`POST /envelopes`), apart from the agent's port. Plain
/// HTTP on a loopback address only, as for the agent's listener; with TLS files given,
/// both listeners serve HTTPS with them.
pub const OPERATOR_FLAG: &str = "--operator";
/// The flag (after [`MCP_HTTP_FLAG`], no value) that keeps envelope delivery on the
/// agent's port, as before the operator listener (deprecated: whoever reaches the agent's
/// port can then delay a delivery by flooding it).
pub const ENVELOPES_ON_MCP_PORT_FLAG: &str = "--envelopes-on-mcp-port";
/// The path of the MCP endpoint; every other path answers `404 Not Found`.
pub const MCP_HTTP_PATH: &str = "/mcp";
/// The path the runtime delivers a session's envelopes to (`POST`, the envelope as the
/// body, at most [`MAX_ENVELOPE_BYTES`](evidence_policy::envelope::MAX_ENVELOPE_BYTES)),
/// on the operator listener.
pub const ENVELOPES_PATH: &str = "/envelopes";
/// The largest request body accepted: 256 KiB (a tool call's arguments are a few
/// PromQL expressions; `initialize` is smaller still).
pub const MAX_REQUEST_BODY_BYTES: usize = 256 * 1024;
/// The largest request head (request line and headers) accepted: 16 KiB.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// How long a client has to finish its TLS handshake, and to send a request's head once
/// it started: 10 s.
pub const HEAD_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the HTTP listen configuration is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpListenError {
    /// The address is not `IP:PORT`.
    #[error("{0:?} is not a listen address: give IP:PORT, e.g. 127.0.0.1:8931")]
    NotAnAddress(String),
    /// Plain HTTP was asked for on an address other machines can reach.
    #[error(
        "refusing to serve plain HTTP on {0}: it is not a loopback address, so it needs \
         TLS (no TLS given: add --tls-cert FILE --tls-key FILE), or listen on 127.0.0.1 or \
         [::1]"
    )]
    NotLoopback(SocketAddr),
    /// Plain HTTP was asked for on an operator address other machines can reach.
    #[error(
        "refusing to serve the operator listener in plain HTTP on {0}: it is not a loopback \
         address, so it needs TLS (add --tls-cert FILE --tls-key FILE), or listen on \
         127.0.0.1 or [::1]"
    )]
    OperatorNotLoopback(SocketAddr),
    /// No listener takes the runtime's envelope deliveries.
    #[error(
        "--mcp-http needs --operator IP:PORT, the listener the runtime delivers envelopes to \
         (or --envelopes-on-mcp-port, deprecated, to take them on the agent's port)"
    )]
    NoDelivery,
    /// A flag of the HTTP server lacks its value, or is unknown.
    #[error("{0}")]
    Usage(String),
}

/// The HTTP server's configuration from the command line: the listen address, the
/// operator listener's, its TLS files if any, the `Host` and `Origin` values allowed
/// (empty: the defaults of the bound address) and the bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpListen {
    addr: SocketAddr,
    operator: Option<SocketAddr>,
    envelopes_on_mcp_port: bool,
    tls: Option<TlsFiles>,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    limits: ServerLimits,
    log_format: LogFormat,
}

impl HttpListen {
    /// Reads the arguments that follow [`MCP_HTTP_FLAG`]: the address, then
    /// [`OPERATOR_FLAG`] (or [`ENVELOPES_ON_MCP_PORT_FLAG`]), any [`TLS_CERT_FLAG`],
    /// [`TLS_KEY_FLAG`] (both or neither), [`ALLOW_HOST_FLAG`] and [`ALLOW_ORIGIN_FLAG`]
    /// pairs and the bound flags of [`ServerLimits`](super::ServerLimits). Refuses an
    /// address that is not loopback without TLS ([`HttpListenError::NotLoopback`],
    /// [`HttpListenError::OperatorNotLoopback`]).
    pub fn from_args(args: &[OsString]) -> Result<Self, HttpListenError> {
        let text = |arg: &OsString| {
            arg.to_str()
                .map(str::to_owned)
                .ok_or_else(|| HttpListenError::Usage(format!("{arg:?} is not Unicode")))
        };
        let (addr, rest) = args.split_first().ok_or_else(|| {
            HttpListenError::Usage(format!("{MCP_HTTP_FLAG} needs a listen address"))
        })?;
        let addr = text(addr)?;
        let addr: SocketAddr = addr
            .parse()
            .map_err(|_| HttpListenError::NotAnAddress(addr.clone()))?;
        let mut listen = HttpListen {
            addr,
            operator: None,
            envelopes_on_mcp_port: false,
            tls: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            limits: ServerLimits::default(),
            log_format: LogFormat::default(),
        };
        let (mut cert, mut key) = (None, None);
        let mut rest = rest.iter();
        while let Some(flag) = rest.next() {
            let flag = text(flag)?;
            if flag == ENVELOPES_ON_MCP_PORT_FLAG {
                listen.envelopes_on_mcp_port = true;
                continue;
            }
            let value = rest
                .next()
                .map(text)
                .transpose()?
                .ok_or_else(|| HttpListenError::Usage(format!("{flag} needs a value")))?;
            if listen
                .limits
                .set(&flag, &value)
                .map_err(HttpListenError::Usage)?
            {
                continue;
            }
            match flag.as_str() {
                LOG_FORMAT_FLAG => {
                    listen.log_format = LogFormat::parse(&value).map_err(HttpListenError::Usage)?;
                }
                OPERATOR_FLAG if listen.operator.is_none() => {
                    listen.operator = Some(
                        value
                            .parse()
                            .map_err(|_| HttpListenError::NotAnAddress(value.clone()))?,
                    );
                }
                OPERATOR_FLAG => {
                    return Err(HttpListenError::Usage(format!("{flag} given twice")));
                }
                ALLOW_HOST_FLAG => listen.allowed_hosts.push(value),
                ALLOW_ORIGIN_FLAG => listen.allowed_origins.push(value),
                TLS_CERT_FLAG if cert.is_none() => cert = Some(PathBuf::from(value)),
                TLS_KEY_FLAG if key.is_none() => key = Some(PathBuf::from(value)),
                TLS_CERT_FLAG | TLS_KEY_FLAG => {
                    return Err(HttpListenError::Usage(format!("{flag} given twice")));
                }
                other => {
                    return Err(HttpListenError::Usage(format!(
                        "unknown argument {other:?} after {MCP_HTTP_FLAG}"
                    )));
                }
            }
        }
        listen.tls = match (cert, key) {
            (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
            (None, None) => None,
            _ => {
                return Err(HttpListenError::Usage(format!(
                    "{TLS_CERT_FLAG} and {TLS_KEY_FLAG} go together"
                )));
            }
        };
        if listen.tls.is_none() && !addr.ip().is_loopback() {
            return Err(HttpListenError::NotLoopback(addr));
        }
        match listen.operator {
            Some(operator) if listen.tls.is_none() && !operator.ip().is_loopback() => {
                return Err(HttpListenError::OperatorNotLoopback(operator));
            }
            None if !listen.envelopes_on_mcp_port => return Err(HttpListenError::NoDelivery),
            _ => {}
        }
        Ok(listen)
    }

    /// The TLS files, when the server serves HTTPS.
    pub fn tls(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    /// `https` with TLS, `http` without.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The address to listen on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The operator listener's address, when one is given.
    pub fn operator(&self) -> Option<SocketAddr> {
        self.operator
    }

    /// Whether envelopes are also delivered on the agent's port (deprecated).
    pub fn envelopes_on_mcp_port(&self) -> bool {
        self.envelopes_on_mcp_port
    }

    /// The server's bounds.
    pub fn limits(&self) -> ServerLimits {
        self.limits
    }

    /// How the server writes its stderr lines.
    pub fn log_format(&self) -> LogFormat {
        self.log_format
    }

    /// The arguments that give this configuration again (the server re-executes itself
    /// with them).
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mut args = vec![MCP_HTTP_FLAG.to_owned(), self.addr.to_string()];
        if let Some(operator) = self.operator {
            args.extend([OPERATOR_FLAG.to_owned(), operator.to_string()]);
        }
        if self.envelopes_on_mcp_port {
            args.push(ENVELOPES_ON_MCP_PORT_FLAG.to_owned());
        }
        if let Some(tls) = &self.tls {
            args.extend([TLS_CERT_FLAG.to_owned(), tls.cert.display().to_string()]);
            args.extend([TLS_KEY_FLAG.to_owned(), tls.key.display().to_string()]);
        }
        for host in &self.allowed_hosts {
            args.extend([ALLOW_HOST_FLAG.to_owned(), host.clone()]);
        }
        for origin in &self.allowed_origins {
            args.extend([ALLOW_ORIGIN_FLAG.to_owned(), origin.clone()]);
        }
        args.extend(self.limits.to_args());
        if self.log_format != LogFormat::default() {
            args.extend([
                LOG_FORMAT_FLAG.to_owned(),
                self.log_format.as_str().to_owned(),
            ]);
        }
        args
    }

    /// The allowed `Host` values once bound at `bound`: the configured ones, or the
    /// bound address and `localhost`, each with the bound port.
    pub fn allowed_hosts(&self, bound: SocketAddr) -> Vec<String> {
        if !self.allowed_hosts.is_empty() {
            return self.allowed_hosts.clone();
        }
        default_hosts(bound)
    }

    /// The allowed `Host` values of the operator listener bound at `bound`: the bound
    /// address and `localhost` with the bound port, and the configured hosts.
    pub fn operator_hosts(&self, bound: SocketAddr) -> Vec<String> {
        let mut hosts = default_hosts(bound);
        hosts.extend(self.allowed_hosts.iter().cloned());
        hosts
    }

    /// The allowed `Origin` values once bound at `bound`: the configured ones, or
    /// [`Self::scheme`]`://` of each default host.
    pub fn allowed_origins(&self, bound: SocketAddr) -> Vec<String> {
        if !self.allowed_origins.is_empty() {
            return self.allowed_origins.clone();
        }
        let defaults = HttpListen {
            allowed_hosts: Vec::new(),
            ..self.clone()
        };
        defaults
            .allowed_hosts(bound)
            .into_iter()
            .map(|host| format!("{}://{host}", self.scheme()))
            .collect()
    }

    /// The `rmcp` configuration of the server bound at `bound`, ended by `stop`.
    pub(crate) fn config(
        &self,
        bound: SocketAddr,
        stop: CancellationToken,
    ) -> StreamableHttpServerConfig {
        StreamableHttpServerConfig::default()
            .with_allowed_hosts(self.allowed_hosts(bound))
            .with_allowed_origins(self.allowed_origins(bound))
            .enforce_origin_validation()
            .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES)
            .with_cancellation_token(stop)
    }
}

/// The bound address and `localhost`, each with the bound port.
fn default_hosts(bound: SocketAddr) -> Vec<String> {
    vec![bound.to_string(), format!("localhost:{}", bound.port())]
}

/// The transport a package's MCP server serves over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// One session over the process's stdin and stdout (`--mcp`).
    Stdio,
    /// Streamable HTTP at the loopback address and with the `Host` and `Origin` rules
    /// given (`--mcp-http ADDR`; see [`HttpListen`]).
    Http(Box<HttpListen>),
}

impl McpTransport {
    /// The command-line arguments that select this transport.
    pub(crate) fn to_args(&self) -> Vec<String> {
        match self {
            McpTransport::Stdio => vec![MCP_FLAG.to_owned()],
            McpTransport::Http(listen) => listen.to_args(),
        }
    }

    /// The flag that selects this transport.
    pub(crate) fn flag(&self) -> &'static str {
        match self {
            McpTransport::Stdio => MCP_FLAG,
            McpTransport::Http(_) => MCP_HTTP_FLAG,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::limits::{MAX_SESSIONS_FLAG, SESSION_IDLE_FLAG};

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    /// `addr` with an operator listener on loopback, then `more`.
    fn with_operator(addr: &str, more: &[&str]) -> Vec<OsString> {
        args(&[&[addr, OPERATOR_FLAG, "127.0.0.1:0"][..], more].concat())
    }

    #[test]
    fn plain_http_is_refused_off_loopback_on_either_listener() {
        for addr in [
            "0.0.0.0:8931",
            "192.168.1.4:80",
            "[::]:8931",
            "[::ffff:127.0.0.1]:1",
        ] {
            let refused = HttpListen::from_args(&with_operator(addr, &[]));
            assert!(
                matches!(refused, Err(HttpListenError::NotLoopback(_))),
                "{addr}: {refused:?}"
            );
            let refused = HttpListen::from_args(&args(&["127.0.0.1:8931", OPERATOR_FLAG, addr]));
            assert!(
                matches!(refused, Err(HttpListenError::OperatorNotLoopback(_))),
                "{addr}: {refused:?}"
            );
        }
        for addr in ["127.0.0.1:8931", "127.0.0.2:0", "[::1]:8931"] {
            assert!(
                HttpListen::from_args(&with_operator(addr, &[])).is_ok(),
                "{addr}"
            );
        }
        // With TLS any address may be served, on both listeners.
        let tls = [TLS_CERT_FLAG, "/c.pem", TLS_KEY_FLAG, "/k.pem"];
        let listen = HttpListen::from_args(&args(
            &[&["0.0.0.0:8443", OPERATOR_FLAG, "0.0.0.0:9443"][..], &tls].concat(),
        ))
        .unwrap();
        assert_eq!(listen.scheme(), "https");
        assert_eq!(
            listen.to_args(),
            [
                MCP_HTTP_FLAG,
                "0.0.0.0:8443",
                OPERATOR_FLAG,
                "0.0.0.0:9443",
                TLS_CERT_FLAG,
                "/c.pem",
                TLS_KEY_FLAG,
                "/k.pem"
            ]
        );
        assert!(matches!(
            HttpListen::from_args(&with_operator("127.0.0.1:1", &[TLS_CERT_FLAG, "/c.pem"])),
            Err(HttpListenError::Usage(_))
        ));
        assert!(matches!(
            HttpListen::from_args(&with_operator("localhost:8931", &[])),
            Err(HttpListenError::NotAnAddress(_))
        ));
        assert!(matches!(
            HttpListen::from_args(&args(&["127.0.0.1:1", OPERATOR_FLAG, "localhost:1"])),
            Err(HttpListenError::NotAnAddress(_))
        ));
        assert!(matches!(
            HttpListen::from_args(&args(&[])),
            Err(HttpListenError::Usage(_))
        ));
    }

    #[test]
    fn deliveries_need_the_operator_listener_or_the_deprecated_flag() {
        assert_eq!(
            HttpListen::from_args(&args(&["127.0.0.1:1"])),
            Err(HttpListenError::NoDelivery)
        );
        let legacy =
            HttpListen::from_args(&args(&["127.0.0.1:1", ENVELOPES_ON_MCP_PORT_FLAG])).unwrap();
        assert!(legacy.envelopes_on_mcp_port());
        assert_eq!(legacy.operator(), None);
        assert_eq!(
            legacy.to_args(),
            [MCP_HTTP_FLAG, "127.0.0.1:1", ENVELOPES_ON_MCP_PORT_FLAG]
        );
        let operator = HttpListen::from_args(&with_operator("127.0.0.1:1", &[])).unwrap();
        assert!(!operator.envelopes_on_mcp_port());
        assert!(matches!(
            HttpListen::from_args(&with_operator(
                "127.0.0.1:1",
                &[OPERATOR_FLAG, "127.0.0.1:2"]
            )),
            Err(HttpListenError::Usage(_))
        ));
    }

    #[test]
    fn the_bounds_are_read_and_given_back() {
        let listen = HttpListen::from_args(&with_operator(
            "127.0.0.1:1",
            &[MAX_SESSIONS_FLAG, "9", SESSION_IDLE_FLAG, "30"],
        ))
        .unwrap();
        assert_eq!(listen.limits().max_sessions, 9);
        assert_eq!(listen.limits().session_idle, Duration::from_secs(30));
        assert_eq!(listen.log_format(), LogFormat::Json);
        let plain =
            HttpListen::from_args(&with_operator("127.0.0.1:1", &[LOG_FORMAT_FLAG, "plain"]))
                .unwrap();
        assert_eq!(plain.log_format(), LogFormat::Plain);
        assert!(plain.to_args().contains(&"plain".to_owned()));
        assert!(matches!(
            HttpListen::from_args(&with_operator("127.0.0.1:1", &[LOG_FORMAT_FLAG, "xml"])),
            Err(HttpListenError::Usage(_))
        ));
        assert_eq!(
            HttpListen::from_args(
                &listen
                    .to_args()
                    .iter()
                    .skip(1)
                    .map(OsString::from)
                    .collect::<Vec<_>>()
            )
            .unwrap(),
            listen
        );
        assert!(matches!(
            HttpListen::from_args(&with_operator("127.0.0.1:1", &[MAX_SESSIONS_FLAG, "0"])),
            Err(HttpListenError::Usage(_))
        ));
    }

    #[test]
    fn the_defaults_are_the_bound_loopback_forms_and_flags_replace_them() {
        let listen = HttpListen::from_args(&with_operator("127.0.0.1:0", &[])).unwrap();
        let bound: SocketAddr = "127.0.0.1:4100".parse().unwrap();
        assert_eq!(
            listen.allowed_hosts(bound),
            ["127.0.0.1:4100", "localhost:4100"]
        );
        assert_eq!(
            listen.allowed_origins(bound),
            ["http://127.0.0.1:4100", "http://localhost:4100"]
        );
        let v6: SocketAddr = "[::1]:4100".parse().unwrap();
        assert_eq!(listen.allowed_hosts(v6), ["[::1]:4100", "localhost:4100"]);

        let configured = args(&[
            "127.0.0.1:4100",
            ENVELOPES_ON_MCP_PORT_FLAG,
            ALLOW_HOST_FLAG,
            "tools.internal:4100",
            ALLOW_ORIGIN_FLAG,
            "https://app.internal:443",
        ]);
        let listen = HttpListen::from_args(&configured).unwrap();
        assert_eq!(listen.allowed_hosts(bound), ["tools.internal:4100"]);
        assert_eq!(listen.allowed_origins(bound), ["https://app.internal:443"]);
        assert_eq!(
            listen.to_args(),
            [
                MCP_HTTP_FLAG,
                "127.0.0.1:4100",
                ENVELOPES_ON_MCP_PORT_FLAG,
                ALLOW_HOST_FLAG,
                "tools.internal:4100",
                ALLOW_ORIGIN_FLAG,
                "https://app.internal:443"
            ]
        );
        assert!(matches!(
            HttpListen::from_args(&with_operator("127.0.0.1:1", &[ALLOW_HOST_FLAG])),
            Err(HttpListenError::Usage(_))
        ));
        assert!(matches!(
            HttpListen::from_args(&with_operator("127.0.0.1:1", &["--tls", "x"])),
            Err(HttpListenError::Usage(_))
        ));
    }
}
