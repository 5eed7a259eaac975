use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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

    /// The result as an MCP `CallToolResult`: one text content block holding `text`,
    /// `structuredContent` = `details`, `isError` = failed.
    pub fn to_mcp(&self) -> McpCallToolResult {
        McpCallToolResult {
            content: vec![McpContent::Text {
                text: self.text.clone(),
            }],
            structured_content: self.details.clone(),
            is_error: self.is_failed(),
        }
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

/// One content block of an MCP tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum McpContent {
    /// A text block.
    Text {
        /// The text.
        text: String,
    },
}

/// The JSON shape of an MCP `CallToolResult`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpCallToolResult {
    /// One text block holding the result's `text`.
    pub content: Vec<McpContent>,
    /// The result's `details`.
    pub structured_content: Details,
    /// True when the result failed.
    pub is_error: bool,
}
