//! The result transport: a [`ToolResult`] whose `text` is exactly the JSON of its
//! `details`, and its serialized form.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::mcp::{McpCallToolResult, McpContent, RESULT_TYPE_COMPLETE};
use crate::{
    Correction, Details, ErrorCode, Failure, FailureClass, Operation, Origin, PolicySource,
    ResultError,
};

/// The `detail_error` of [`ToolResult::withheld`].
pub const WITHHELD_DETAIL: &str = "the tool output was withheld by the output guard";

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

    /// The fixed `output_blocked` failure of `origin`: no query id, no request digest, the
    /// fixed detail [`WITHHELD_DETAIL`] and no correction. Made of fixed, valid parts
    /// only, so unlike [`ToolResult::new`] it cannot fail: it is what an output guard
    /// returns when not even a more specific replacement can be built. Its `text` is
    /// exactly the JSON of its `details`, as for every result (tested for every origin).
    pub fn withheld(origin: Origin) -> Self {
        let class = FailureClass::OutputBlocked;
        let failure = Failure::new(ErrorCode::output_blocked(), class, WITHHELD_DETAIL)
            .with_correction(Correction::for_class(class, None, Vec::new()));
        let details = Details::failure(origin, None, None, failure);
        let text =
            serde_json::to_string(&details).unwrap_or_else(|_| withheld_text(&details.origin()));
        ToolResult { text, details }
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

/// The JSON of the details of [`ToolResult::withheld`], written out from its fixed parts
/// (a package id is a snake_case identifier and needs no escaping) so that it needs no
/// fallible serializer. Equal to the `serde_json` text (tested).
fn withheld_text(origin: &Origin) -> String {
    let operation = match origin.operation {
        Operation::QueryRange => "query_range",
    };
    let source = match origin.policy_source {
        None => "",
        Some(PolicySource::TrustedEnvelope) => r#","policy_source":"trusted_envelope""#,
        Some(PolicySource::StaticCanary) => r#","policy_source":"static_canary""#,
    };
    let instruction = Correction::for_class(FailureClass::OutputBlocked, None, Vec::new())
        .instruction
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    format!(
        r#"{{"status":"error","package":"{package}","provider":"{provider}","operation":"{operation}"{source},"error":{{"code":"output_blocked","class":"output_blocked"}},"detail_error":"{WITHHELD_DETAIL}","correction":{{"allowed":false,"scope":"same_turn","instruction":"{instruction}","keep":[]}}}}"#,
        package = origin.package,
        provider = origin.provider.as_str(),
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PackageId, Provider};

    #[test]
    fn the_withheld_result_is_valid_for_every_origin() {
        for provider in [Provider::Clinic, Provider::Manus, Provider::Wetech] {
            for policy_source in [
                None,
                Some(PolicySource::TrustedEnvelope),
                Some(PolicySource::StaticCanary),
            ] {
                let origin = Origin {
                    package: PackageId::new("managed_auto_oncall_clinic").unwrap(),
                    provider,
                    operation: Operation::QueryRange,
                    policy_source,
                };
                let withheld = ToolResult::withheld(origin.clone());
                // The written-out text is exactly what serde_json writes, and the result
                // is what the checked constructor builds.
                assert_eq!(withheld_text(&origin), withheld.text());
                let rebuilt = ToolResult::new(withheld.details().clone()).unwrap();
                assert_eq!(rebuilt, withheld);
                assert_eq!(
                    ToolResult::from_json(&withheld.to_json().unwrap()).unwrap(),
                    withheld
                );
                let error = withheld.details().error.as_ref().unwrap();
                assert_eq!(error.code, ErrorCode::output_blocked());
                assert_eq!(error.class, FailureClass::OutputBlocked);
                assert!(!withheld.details().correction.as_ref().unwrap().allowed);
            }
        }
    }
}
