//! MCP serving of one package: the package's own tool binary, started with `--mcp`,
//! serves its one tool over stdio, or with `--mcp-http ADDR` over Streamable HTTP
//! (`http`; plain on a loopback address, any other address only with TLS, `tls`), with the official Rust MCP SDK (`rmcp`). Both transports
//! drive the one server handler. The process holds only its own package's auth binding
//! and secrets; one server per package.
//!
//! The tool is described from the package's manifest (name = package identity,
//! description and `inputSchema` = the manifest's argument schema, `outputSchema` = the
//! JSON Schema of `details`). The server hashes its package once, at start, over the
//! file the process was started from, and reads the keys, secrets and configuration
//! then; every `tools/call` reads the envelope afresh and goes through the same path as
//! the entrypoint: the one sandbox call (verify against the digest computed at start,
//! lock, connector, guard), and one audit record appended before the result is
//! returned. A call that fails is a result with `isError: true`, never
//! the end of the server. The process serves with only its own package's variables,
//! whatever environment the client started it with. Nothing else keeps the turn over
//! MCP, so a server needs the turn ledger the three package servers share
//! (`EVIDENCE_TURN_LEDGER`): every call is admitted there by the turn rules first.

mod bounded_sessions;
mod browser_flags;
mod connection;
mod environment;
mod fair_slots;
mod host_check;
mod http;
mod inflight;
mod limits;
mod listen;
mod listing;
mod operator;
mod request_audit;
mod server;
mod session;
mod tls;

pub use browser_flags::{
    BROWSER_MAX_CALLS_FLAG, BROWSER_MAX_PSS_FLAG, BrowserFlags, BrowserFlagsError,
};
pub use environment::{PROCESS_BASICS, server_variables};
pub use limits::{
    MAX_CONNECTIONS_FLAG, MAX_CONNECTIONS_PER_PEER_FLAG, MAX_INITIALIZE_BYTES, MAX_SESSIONS_FLAG,
    MAX_SESSIONS_PER_PEER_FLAG, MAX_STREAMS_FLAG, MAX_STREAMS_PER_SESSION_FLAG,
    RESERVED_DESCRIPTORS, RETRY_AFTER_SECS, SESSION_IDLE_FLAG, ServerLimits,
};
pub use listen::{
    ALLOW_HOST_FLAG, ALLOW_ORIGIN_FLAG, ENVELOPES_ON_MCP_PORT_FLAG, ENVELOPES_PATH,
    HEAD_READ_TIMEOUT, HttpListen, HttpListenError, MAX_HEAD_BYTES, MAX_REQUEST_BODY_BYTES,
    MCP_FLAG, MCP_HTTP_FLAG, MCP_HTTP_PATH, McpTransport, OPERATOR_FLAG,
};
pub use listing::{SUPPORTED_PROTOCOL_VERSIONS, details_output_schema, tool_listing};
pub use operator::{HEALTHZ_PATH, METRICS_PATH, READYZ_PATH};
pub use request_audit::{HTTP_REQUEST_RECORD, RequestRecord};
pub use server::serve_mcp;
pub use session::SESSION_HEADER;
pub use tls::{TLS_CERT_FLAG, TLS_KEY_FLAG, TlsError, TlsFiles};
