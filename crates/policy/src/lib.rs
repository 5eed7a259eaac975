//! Trusted policy, the signed per-request envelope, model argument types and locking before any network
//!
//! This crate is being built; its public API arrives with its issue. It exports nothing yet.
