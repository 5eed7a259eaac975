//! Tool-sandbox entrypoint of `managed_auto_oncall_clinic`: the file `bin/clinic-tool` of its
//! deployable package folder. Reads the model's arguments (JSON) on stdin and the runtime
//! context (`evidence_tool::context::CONTEXT_VARS`), writes one `ToolResult` JSON to stdout and one
//! audit record. Exits 0 whenever it wrote a result, failures of the runtime context
//! included. With `--mcp`, the package's own MCP server over stdio (one tool, the same
//! sandbox call per `tools/call`).

fn main() -> std::process::ExitCode {
    evidence_tool::run_tool_binary::<evidence_tool::ClinicTool>()
}
