//! The MCP server of one package over stdio: `tools/list` answers the package's one
//! tool, `tools/call` runs the one sandbox call with the runtime context read afresh and
//! appends the audit record before answering. At most the manifest's `concurrency`
//! calls run at once; the others wait.

use std::borrow::Cow;
use std::process::ExitCode;
use std::sync::Arc;

use evidence_result::ToolResult;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use tokio::sync::Semaphore;

use crate::ToolError;
use crate::binary::block_on_to_exit;
use crate::entry::{answer, locate};
use crate::mcp::environment::keep_only_own_variables;
use crate::mcp::listing::{SUPPORTED_PROTOCOL_VERSIONS, tool_listing};
use crate::output::write_audit;
use crate::tools::Tool;

/// The server of one tool: its listing (from the manifest of the package it was started
/// in) and the permits bounding concurrent calls.
#[derive(Debug, Clone)]
struct PackageServer {
    tool: Tool,
    listing: McpTool,
    permits: Arc<Semaphore>,
}

/// Serves `tool` over stdio until the client closes the stream; returns the exit
/// status. First the process keeps only its own variables (it re-executes itself when
/// it was started with others). The package folder must load at start (its manifest
/// describes the tool); every call loads it again.
pub fn serve_mcp(tool: Tool) -> ExitCode {
    let name = tool.binary_name();
    if let Err(e) = keep_only_own_variables(tool) {
        eprintln!("{name} --mcp: {e}");
        return ExitCode::FAILURE;
    }
    block_on_to_exit(name, &format!("{name} --mcp"), serve(tool))
}

async fn serve(tool: Tool) -> Result<(), ToolError> {
    let package = locate(tool).map_err(|failure| ToolError::Mcp(failure.to_string()))?;
    let concurrency = usize::try_from(package.manifest().limits.concurrency)
        .unwrap_or(1)
        .max(1);
    let server = PackageServer {
        tool,
        listing: tool_listing(&package)?,
        permits: Arc::new(Semaphore::new(concurrency)),
    };
    drop(package);
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ToolError::Mcp(format!("the session did not start: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| ToolError::Mcp(format!("the session ended abnormally: {e}")))?;
    Ok(())
}

/// The MCP projection of a managed result, as `rmcp`'s type: one text block holding
/// exactly `text`, `structuredContent` = `details`, `isError` = failed.
fn to_call_tool_result(result: &ToolResult) -> Result<CallToolResult, ToolError> {
    let projected = serde_json::to_value(result.to_mcp()?)?;
    Ok(serde_json::from_value(projected)?)
}

fn internal(e: &ToolError) -> ErrorData {
    ErrorData::internal_error(format!("no result could be produced: {e}"), None)
}

impl ServerHandler for PackageServer {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        config.server_info = Implementation::new(
            self.tool.identity().as_str().to_owned(),
            env!("CARGO_PKG_VERSION"),
        );
        config
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(SUPPORTED_PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![self.listing.clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != self.listing.name {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}: this server serves {}",
                    request.name, self.listing.name
                ),
                None,
            ));
        }
        // The arguments as the JSON text the model wrote them; the sandbox call judges
        // them (a bad argument is a result, never a protocol error).
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let args = arguments.to_string();
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|e| ErrorData::internal_error(format!("no call slot: {e}"), None))?;
        let (result, audit) = answer(self.tool, move || Ok(args))
            .await
            .map_err(|e| internal(&e))?;
        // A result is never returned without its record.
        write_audit(&audit).map_err(|e| internal(&e))?;
        Ok(to_call_tool_result(&result)
            .map_err(|e| internal(&e))?
            .into())
    }
}
