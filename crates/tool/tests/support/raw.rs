//! A raw HTTP/1.1 client of the package servers, as anything in the agent's sandbox or on
//! the network can speak it: one request per connection, from a chosen loopback source
//! address, with the bytes and headers the test decides; and the few MCP messages the
//! hostile-load tests send with it (a protocol session's `initialize`, a `tools/call`).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

/// An answer: its status, headers (names lowercased) and body (chunks joined).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message of the answer: the JSON body, or the last `data:` event of
    /// an event stream.
    pub fn message(&self) -> Value {
        if let Ok(value) = serde_json::from_str(&self.body) {
            return value;
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .next_back()
            .unwrap_or(Value::Null)
    }
}

/// A connection to `server` from the loopback address `from`.
pub async fn connect(server: SocketAddr, from: IpAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    socket.connect(server).await.unwrap()
}

/// One request (`Connection: close`) and its whole answer.
pub async fn request(
    server: SocketAddr,
    from: IpAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut stream = connect(server, from).await;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {server}\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    // The server may answer (and close) before it read a refused body.
    let _sent = stream.write_all(body).await;
    read_reply(&mut stream).await
}

/// Reads one answer to its end (or 30 s).
pub async fn read_reply(stream: &mut TcpStream) -> Reply {
    let mut raw = Vec::new();
    let _read = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut raw)).await;
    parse(&raw)
}

/// An answer from its bytes.
pub fn parse(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            out.push_str(&rest[..size.min(rest.len())]);
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The headers of an MCP request, with the protocol session and the session token when
/// given.
pub fn mcp_headers<'a>(
    protocol_session: Option<&'a str>,
    token: Option<&'a str>,
) -> Vec<(&'static str, &'a str)> {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    if let Some(id) = protocol_session {
        headers.push(("Mcp-Session-Id", id));
    }
    if let Some(token) = token {
        headers.push((evidence_tool::mcp::SESSION_HEADER, token));
    }
    headers
}

/// An `initialize` body (protocol 2025-11-25, a protocol session), with `padding` bytes
/// of experimental capabilities.
pub fn initialize_body(padding: usize) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"experimental": {"pad": {"x": "p".repeat(padding)}}},
        "clientInfo": {"name": "raw-client", "version": "1"}}})
    .to_string()
    .into_bytes()
}

/// Opens a protocol session from `from` (`initialize`, then `notifications/initialized`);
/// returns its id.
pub async fn open_session(server: SocketAddr, from: IpAddr) -> String {
    let reply = request(
        server,
        from,
        "POST",
        "/mcp",
        &mcp_headers(None, None),
        &initialize_body(0),
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let id = reply.header("mcp-session-id").unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let reply = request(
        server,
        from,
        "POST",
        "/mcp",
        &mcp_headers(Some(&id), None),
        initialized.to_string().as_bytes(),
    )
    .await;
    assert_eq!(reply.status, 202, "{reply:?}");
    id
}

/// A `tools/call` of `tool` with `arguments` on protocol session `id` presenting `token`.
pub async fn call_tool(
    server: SocketAddr,
    from: IpAddr,
    id: &str,
    token: Option<&str>,
    tool: &str,
    arguments: Value,
) -> Reply {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": tool, "arguments": arguments}});
    request(
        server,
        from,
        "POST",
        "/mcp",
        &mcp_headers(Some(id), token),
        body.to_string().as_bytes(),
    )
    .await
}

/// The resident memory of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Raises this process's open-file limit to its hard limit (a flood opens thousands).
pub fn raise_open_files() -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    setrlimit(Resource::Nofile, raised).unwrap();
    limit.maximum.unwrap_or(u64::MAX)
}
