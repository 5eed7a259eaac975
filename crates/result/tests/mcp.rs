//! MCP `CallToolResult`: every valid result of protocol versions 2025-06-18, 2025-11-25
//! and 2026-07-28 is read; `ToolResult::to_mcp` writes one shape all three accept, and
//! `ToolResult::from_mcp` reads a managed result back whatever else the result carries.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use evidence_result::mcp::*;
use evidence_result::*;
use proptest::prelude::*;
use serde_json::{Value, json};

fn golden(name: &str) -> ToolResult {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.json"));
    ToolResult::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

const GOLDENS: [&str; 4] = ["success", "rejection_422", "authentication", "batch_mixed"];

/// Valid results of the three versions, one feature each (the spec's own field names).
fn valid_results() -> Vec<(&'static str, Value)> {
    vec![
        ("2025-06-18 minimal, no isError", json!({"content": []})),
        (
            "2025-06-18 text with annotations",
            json!({"content": [{"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 0.5}}], "isError": false}),
        ),
        (
            "2025-06-18 image and audio",
            json!({"content": [
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav", "_meta": {"x": 1}}
            ]}),
        ),
        (
            "2025-06-18 resource_link and embedded resources",
            json!({"content": [
                {"type": "resource_link", "uri": "file:///x.json", "name": "x", "mimeType": "application/json", "description": "d"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "a"}},
                {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAE="}}
            ], "structuredContent": {"k": 1}}),
        ),
        (
            "2025-11-25 _meta and an error",
            json!({"content": [{"type": "text", "text": "boom"}], "isError": true, "_meta": {"io.example/trace": "t1"}}),
        ),
        (
            "2026-07-28 resultType and structured content of any JSON type",
            json!({"content": [{"type": "text", "text": "[1,2]"}], "structuredContent": [1, 2], "resultType": "complete"}),
        ),
        (
            "2026-07-28 with a field a later revision adds",
            json!({"content": [], "resultType": "complete", "ttlMs": 0, "_meta": {}}),
        ),
    ]
}

#[test]
fn every_valid_call_tool_result_is_read_and_written_back_unchanged() {
    for (what, value) in valid_results() {
        let read: McpCallToolResult =
            serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(serde_json::to_value(&read).unwrap(), value, "{what}");
    }
    let minimal: McpCallToolResult = serde_json::from_value(json!({"content": []})).unwrap();
    assert!(!minimal.failed());
    assert_eq!(minimal.result_type(), RESULT_TYPE_COMPLETE);
    let error: McpCallToolResult = serde_json::from_value(valid_results()[4].1.clone()).unwrap();
    assert!(error.failed());
    assert_eq!(error.meta.as_ref().unwrap()["io.example/trace"], "t1");
}

#[test]
fn invalid_content_blocks_are_refused() {
    for bad in [
        json!({}),
        json!({"content": [{"type": "text"}]}),
        json!({"content": [{"type": "image", "data": "x"}]}),
        json!({"content": [{"type": "resource_link", "uri": "file:///x"}]}),
        json!({"content": [{"type": "video", "data": "x"}]}),
        json!({"content": [], "isError": "no"}),
    ] {
        assert!(
            serde_json::from_value::<McpCallToolResult>(bad.clone()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn to_mcp_writes_the_shape_all_three_versions_accept() {
    for name in GOLDENS {
        let result = golden(name);
        let mcp = serde_json::to_value(result.to_mcp().unwrap()).unwrap();
        let object = mcp.as_object().unwrap();
        // 2026-07-28 requires `content` and `resultType`; the earlier versions require
        // `content` and leave the result open to further fields.
        assert_eq!(mcp["resultType"], "complete", "{name}");
        assert_eq!(
            mcp["content"],
            json!([{"type": "text", "text": result.text()}])
        );
        assert_eq!(mcp["isError"], json!(result.is_failed()));
        assert_eq!(
            mcp["structuredContent"],
            serde_json::to_value(result.details()).unwrap()
        );
        assert!(
            mcp["structuredContent"].is_object(),
            "2025 versions want an object"
        );
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["content", "isError", "resultType", "structuredContent"]
        );
        assert_eq!(
            ToolResult::from_mcp(&result.to_mcp().unwrap()).unwrap(),
            result
        );
    }
}

#[test]
fn from_mcp_refuses_what_is_not_the_same_result() {
    let result = golden("rejection_422");
    let mcp = result.to_mcp().unwrap();
    let mut no_structured = mcp.clone();
    no_structured.structured_content = None;
    assert!(ToolResult::from_mcp(&no_structured).is_err());
    let mut other_text = mcp.clone();
    other_text.content = vec![McpContent::text("{}")];
    assert!(matches!(
        ToolResult::from_mcp(&other_text),
        Err(ResultError::TextMismatch)
    ));
    let mut says_ok = mcp.clone();
    says_ok.is_error = None; // absent reads as false, but the details say error
    assert!(ToolResult::from_mcp(&says_ok).is_err());
    let mut task = mcp;
    task.result_type = Some("task".to_owned());
    assert!(ToolResult::from_mcp(&task).is_err());
}

fn extra_block() -> impl Strategy<Value = McpContent> {
    prop_oneof![
        "[a-z ]{0,20}".prop_map(McpContent::text),
        "[A-Za-z0-9+/]{0,12}".prop_map(|data| McpContent::Image {
            data,
            mime_type: "image/png".to_owned(),
            extra: serde_json::Map::new(),
        }),
        "[a-z]{1,8}".prop_map(|name| McpContent::ResourceLink {
            uri: format!("file:///{name}"),
            name,
            extra: serde_json::Map::new(),
        }),
    ]
}

proptest! {
    /// Whatever other blocks, `_meta` or `resultType` presence a valid result carries, the
    /// managed result reads back exactly; and the read never panics on any JSON.
    #[test]
    fn a_managed_result_survives_any_valid_wrapping(
        which in 0usize..4,
        before in proptest::collection::vec(extra_block(), 0..3),
        after in proptest::collection::vec(extra_block(), 0..3),
        with_meta in any::<bool>(),
        with_type in any::<bool>(),
    ) {
        let result = golden(GOLDENS[which]);
        let mut mcp = result.to_mcp().unwrap();
        let text = mcp.content.remove(0);
        mcp.content = before.into_iter().chain([text]).chain(after).collect();
        if with_meta {
            mcp.meta = Some(serde_json::Map::from_iter([("k".to_owned(), json!(1))]));
        }
        if !with_type {
            mcp.result_type = None;
        }
        let wire = serde_json::to_string(&mcp).unwrap();
        let read: McpCallToolResult = serde_json::from_str(&wire).unwrap();
        prop_assert_eq!(ToolResult::from_mcp(&read).unwrap(), result);
    }

    #[test]
    fn reading_arbitrary_json_never_panics(text in "\\PC{0,64}") {
        let _ = serde_json::from_str::<McpCallToolResult>(&text);
    }
}
