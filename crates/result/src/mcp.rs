//! The JSON shape of an MCP `CallToolResult` as protocol versions 2025-06-18, 2025-11-25
//! and 2026-07-28 define it, read leniently and written so that every one of those
//! versions accepts it.
//!
//! Reading accepts any valid result: `isError` may be absent (false), `structuredContent`
//! may be absent or any JSON value, content blocks may be text, image, audio,
//! `resource_link` or an embedded `resource`, and `_meta`, `resultType` and fields a later
//! revision adds are kept. Writing always includes `resultType: "complete"`: 2026-07-28
//! requires it, the earlier versions allow extra result fields (their `Result` is open),
//! and a 2026-07-28 client treats an absent `resultType` as `"complete"` anyway, so one
//! shape serves all three versions without knowing which one was negotiated.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The `resultType` of a finished tool call.
pub const RESULT_TYPE_COMPLETE: &str = "complete";

/// One content block of an MCP tool result. Fields a block kind does not name here
/// (`annotations`, `_meta`, `title`, `size`, ...) are kept in `extra`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum McpContent {
    /// A text block.
    Text {
        /// The text.
        text: String,
        /// Other fields of the block.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// A base64-encoded image.
    Image {
        /// The base64 data.
        data: String,
        /// Its MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// Other fields of the block.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// Base64-encoded audio.
    Audio {
        /// The base64 data.
        data: String,
        /// Its MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// Other fields of the block.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// A link to a resource the client may read.
    ResourceLink {
        /// The resource URI.
        uri: String,
        /// The resource name.
        name: String,
        /// Other fields of the block (`mimeType`, `description`, ...).
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// An embedded resource (`{uri, mimeType?, text | blob}`).
    Resource {
        /// The resource contents, as sent.
        resource: Value,
        /// Other fields of the block.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
}

impl McpContent {
    /// A plain text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            extra: Map::new(),
        }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// An MCP `CallToolResult`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpCallToolResult {
    /// The unstructured result.
    pub content: Vec<McpContent>,
    /// The structured result, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Whether the call failed; absent means `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// `complete` for a finished call (required from 2026-07-28; absent means `complete`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<String>,
    /// `_meta`, when present.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Any other field, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl McpCallToolResult {
    /// `true` when the result says the call failed (`isError` absent reads as `false`).
    pub fn failed(&self) -> bool {
        self.is_error.unwrap_or(false)
    }

    /// The result type, `complete` when absent (what 2026-07-28 prescribes for results of
    /// earlier versions).
    pub fn result_type(&self) -> &str {
        self.result_type.as_deref().unwrap_or(RESULT_TYPE_COMPLETE)
    }

    /// The text blocks' texts, in order.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(McpContent::as_text)
    }
}
