//! Grouping tool attempts by queryId, turn control, the refinement gate and the child handoff
//!
//! This crate is being built; its public API arrives with its issue. It exports nothing yet.
