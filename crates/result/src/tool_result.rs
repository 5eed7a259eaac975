use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::mcp::{McpCallToolResult, McpContent, RESULT_TYPE_COMPLETE};
use crate::{Details, ResultError};

/// The one result transport of every package: `text` is exactly
/// `serde_json::to_string(&details)`.
///
/// Built only by [`ToolResult::new`]; deserializing one whose `text` is not exactly the
/// JSON of its `details` (or whose details break the contract) fails.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    text: String,
    details: Details,
}

/// The result of one managed evidence tool call: `text` is exactly the JSON of `details`.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename = "ToolResult")]
struct Wire {
    /// Exactly the JSON serialization of `details`; what the model reads.
    text: String,
    /// The structured result.
    details: Details,
}

impl ToolResult {
    /// Builds a result from its details after checking the contract's rules.
    pub fn new(details: Details) -> Result<Self, ResultError> {
        details.check().map_err(ResultError::Inconsistent)?;
        let text = serde_json::to_string(&details).map_err(ResultError::Serialize)?;
        Ok(ToolResult { text, details })
    }

    /// The model-visible text: the JSON of `details`.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The structured details.
    pub fn details(&self) -> &Details {
        &self.details
    }

    /// Consumes the result, returning its details.
    pub fn into_details(self) -> Details {
        self.details
    }

    /// True whenever `details.status` is `error`, whatever the runtime operation returned.
    pub fn is_failed(&self) -> bool {
        self.details.is_failed()
    }

    /// The JSON of the whole result (`{"text": ..., "details": ...}`).
    pub fn to_json(&self) -> Result<String, ResultError> {
        serde_json::to_string(self).map_err(ResultError::Serialize)
    }

    /// Reads a result from JSON, checking the `text == json(details)` invariant.
    pub fn from_json(json: &str) -> Result<Self, ResultError> {
        let wire: Wire = serde_json::from_str(json).map_err(ResultError::Serialize)?;
        Self::from_wire(wire)
    }

    fn from_wire(wire: Wire) -> Result<Self, ResultError> {
        let rebuilt = ToolResult::new(wire.details)?;
        if rebuilt.text != wire.text {
            return Err(ResultError::TextMismatch);
        }
        Ok(rebuilt)
    }

    /// The result as an MCP `CallToolResult`, valid for protocol versions 2025-06-18,
    /// 2025-11-25 and 2026-07-28: one text content block holding `text`,
    /// `structuredContent` = `details`, `isError` = failed (always written), and
    /// `resultType: "complete"`.
    pub fn to_mcp(&self) -> Result<McpCallToolResult, ResultError> {
        Ok(McpCallToolResult {
            content: vec![McpContent::text(self.text.clone())],
            structured_content: Some(
                serde_json::to_value(&self.details).map_err(ResultError::Serialize)?,
            ),
            is_error: Some(self.is_failed()),
            result_type: Some(RESULT_TYPE_COMPLETE.to_owned()),
            meta: None,
            extra: serde_json::Map::new(),
        })
    }

    /// Reads a managed tool's result back from an MCP `CallToolResult`: `structuredContent`
    /// holds the details, one text block holds exactly their JSON, and `isError` (absent
    /// meaning false) agrees with the details' status. Other content blocks, `_meta` and
    /// unknown fields are allowed and ignored.
    pub fn from_mcp(result: &McpCallToolResult) -> Result<Self, ResultError> {
        if result.result_type() != RESULT_TYPE_COMPLETE {
            return Err(ResultError::NotAToolResult("resultType is not complete"));
        }
        let structured = result
            .structured_content
            .clone()
            .ok_or(ResultError::NotAToolResult("no structuredContent"))?;
        let details: Details =
            serde_json::from_value(structured).map_err(ResultError::Serialize)?;
        let rebuilt = ToolResult::new(details)?;
        if !result.texts().any(|text| text == rebuilt.text) {
            return Err(ResultError::TextMismatch);
        }
        if result.failed() != rebuilt.is_failed() {
            return Err(ResultError::NotAToolResult(
                "isError disagrees with details.status",
            ));
        }
        Ok(rebuilt)
    }

    /// The JSON Schema of a serialized `ToolResult`.
    pub fn json_schema() -> schemars::Schema {
        schemars::schema_for!(Wire)
    }
}

impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Ref<'a> {
            text: &'a str,
            details: &'a Details,
        }
        Ref {
            text: &self.text,
            details: &self.details,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ToolResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(deserializer)?;
        ToolResult::from_wire(wire).map_err(serde::de::Error::custom)
    }
}
