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
/// Committed as `schemas/tool-details.schema.json`. Shaped for the clients that check
/// every result against it (the official SDKs do): every subschema inline (no `$ref`
/// to resolve per value), an `anyOf` of bare types written as one `type` list (a table
/// cell is checked once, not against five alternatives), and non-standard `format`
/// annotations left out (the integer bounds they stand for are kept as
/// `minimum`/`maximum`). It accepts exactly what the schema of `details` accepts.
pub fn details_output_schema() -> schemars::Schema {
    use schemars::generate::SchemaSettings;
    use schemars::transform::{RecursiveTransform, Transform as _};
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<Details>();
    let mut for_clients = RecursiveTransform(|schema: &mut schemars::Schema| {
        let non_standard = schema
            .get("format")
            .and_then(Value::as_str)
            .is_some_and(|format| !STANDARD_FORMATS.contains(&format));
        if non_standard {
            schema.remove("format");
        }
        let typed = schema.get("type").is_some();
        if let Some(types) = schema.get("anyOf").and_then(bare_types).filter(|_| !typed) {
            schema.remove("anyOf");
            schema.insert("type".to_owned(), types);
        }
    });
    for_clients.transform(&mut schema);
    schema
}

/// The one `type` list an `anyOf` stands for, when every alternative only names a type
/// (a description aside): `integer` alternatives, bounded or not, are left out when an
/// unbounded `number` alternative already admits them. `None` for any other `anyOf`.
fn bare_types(any_of: &Value) -> Option<Value> {
    let alternatives = any_of.as_array()?;
    let mut types: Vec<&str> = Vec::new();
    let mut integers = Vec::new();
    for alternative in alternatives {
        let object = alternative.as_object()?;
        let ty = object.get("type")?.as_str()?;
        let constrained = object.keys().any(|k| k != "type" && k != "description");
        match (ty, constrained) {
            ("integer", _) => integers.push(constrained),
            (_, true) => return None,
            (ty, false) => types.push(ty),
        }
    }
    if !integers.is_empty() && !types.contains(&"number") {
        // Integers are kept as their own alternatives only unbounded and alone.
        if integers.iter().any(|c| *c) {
            return None;
        }
        types.push("integer");
    }
    types.sort_unstable();
    types.dedup();
    Some(Value::from(types))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_any_of_of_bare_types_is_one_type_list_and_nothing_else_is() {
        // A table cell: null, string, bounded and unbounded integers, a number.
        let cell = json!([{"type": "null"}, {"type": "string", "description": "label"},
            {"type": "integer", "minimum": 0}, {"type": "integer"},
            {"type": "number", "description": "figure"}]);
        assert_eq!(bare_types(&cell), Some(json!(["null", "number", "string"])));
        assert_eq!(
            bare_types(&json!([{"type": "integer"}, {"type": "null"}])),
            Some(json!(["integer", "null"]))
        );
        // A bounded integer without a number to admit it, a constrained string, an
        // object or a reference keep their `anyOf`.
        for kept in [
            json!([{"type": "integer", "minimum": 0}, {"type": "null"}]),
            json!([{"type": "string", "maxLength": 3}, {"type": "null"}]),
            json!([{"type": "object", "properties": {}}, {"type": "null"}]),
            json!([{"$ref": "#/$defs/X"}, {"type": "null"}]),
        ] {
            assert_eq!(bare_types(&kept), None, "{kept}");
        }
    }

    #[test]
    fn the_output_schema_has_no_reference_to_resolve() {
        let text = serde_json::to_string(&details_output_schema()).unwrap();
        assert!(!text.contains("$ref"), "{text}");
        assert!(!text.contains("$defs"));
    }
}
