//! What the MCP server says about its tool and itself: the tool listing built from the
//! package manifest, the output schema of `details`, and the protocol versions it
//! negotiates.

use std::sync::Arc;

use evidence_package::Package;
use evidence_result::Details;
use rmcp::model::{JsonObject, ProtocolVersion, Tool as McpTool, ToolAnnotations};
use serde_json::Value;

use crate::ToolError;

/// The protocol versions the server negotiates, oldest first: 2025-06-18 and 2025-11-25
/// over `initialize`, 2026-07-28 per request (`server/discover` and `_meta`). Results
/// carry `resultType: "complete"` on 2026-07-28 sessions, which require it; `rmcp`
/// leaves it out for the earlier versions, which do not define it.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// The formats JSON Schema 2020-12 defines. Others (`uint64`, `int64`, ... that
/// `schemars` writes for Rust integer types) are only annotations, which strict
/// validators such as AJV, in the TypeScript MCP SDK that OpenCode runs, warn about.
const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// The JSON Schema (draft 2020-12) of a result's `details`, which is the
/// `structuredContent` of every `tools/call` result: the tool's `outputSchema`.
/// Committed as `schemas/tool-details.schema.json`. Non-standard `format` annotations
/// are left out (the integer bounds they stand for are kept as `minimum`/`maximum`).
pub fn details_output_schema() -> schemars::Schema {
    use schemars::transform::{RecursiveTransform, Transform as _};
    let mut schema = schemars::schema_for!(Details);
    let mut standard_formats_only = RecursiveTransform(|schema: &mut schemars::Schema| {
        let non_standard = schema
            .get("format")
            .and_then(Value::as_str)
            .is_some_and(|format| !STANDARD_FORMATS.contains(&format));
        if non_standard {
            schema.remove("format");
        }
    });
    standard_formats_only.transform(&mut schema);
    schema
}

fn object_of(value: Value, what: &str) -> Result<JsonObject, ToolError> {
    match value {
        Value::Object(object) => Ok(object),
        _ => Err(ToolError::Packaging(format!("{what} is not a JSON object"))),
    }
}

/// The MCP tool of `package`: named by the package identity, described by its argument
/// schema's `description`, with the manifest's argument schema as `inputSchema` and
/// [`details_output_schema`] as `outputSchema`. Annotated read-only (a call reads
/// metrics and changes nothing) and open-world (it reaches the provider).
pub fn tool_listing(package: &Package) -> Result<McpTool, ToolError> {
    let manifest = package.manifest();
    let input = object_of(manifest.arguments.clone(), "the manifest's argument schema")?;
    let description = input
        .get("description")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ToolError::Packaging("the manifest's argument schema has no description".to_owned())
        })?
        .to_owned();
    let output = object_of(details_output_schema().to_value(), "the details schema")?;
    let mut annotations = ToolAnnotations::new();
    annotations.read_only_hint = Some(true);
    annotations.destructive_hint = Some(false);
    annotations.idempotent_hint = Some(true);
    annotations.open_world_hint = Some(true);
    Ok(McpTool::new(
        manifest.identity.as_str().to_owned(),
        description,
        Arc::new(input),
    )
    .with_raw_output_schema(Arc::new(output))
    .with_annotations(annotations))
}
