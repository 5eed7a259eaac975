//! Facade over the managed evidence tool crates, so that `cargo run --example NAME` and
//! `cargo bench` work from the workspace root. Each module re-exports one crate's public API.

pub use evidence_connectors as connectors;
pub use evidence_materialize as materialize;
pub use evidence_package as package;
pub use evidence_policy as policy;
pub use evidence_result as result;
pub use evidence_tool as tool;
pub use opencode_workspace as workspace;

/// The README's Rust blocks ("Use it from your crate"), compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}
