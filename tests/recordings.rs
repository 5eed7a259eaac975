//! The offline replay's recorded Wetech result (written by `cargo run --release --example
//! replay -- --record` from a real Chromium run) is read with the current result
//! contract: a contract change that leaves it stale breaks the main job, so it fails
//! here first, with the command that rewrites it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use managed_evidence::result::ToolResult;

#[test]
fn the_recorded_wetech_result_reads_with_the_current_contract() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/recordings/wetech_corrected_result.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let result = ToolResult::from_json(&text).unwrap_or_else(|e| {
        panic!(
            "{path} no longer reads with the result contract ({e}); rewrite it with \
             `cargo run --release --example replay -- --record`"
        )
    });
    let evidence = serde_json::to_value(result.details()).unwrap()["evidence"].clone();
    assert_eq!(evidence["format"], "compact_v3", "{evidence}");
    assert_eq!(evidence["series_count"], 56, "{evidence}");
}
