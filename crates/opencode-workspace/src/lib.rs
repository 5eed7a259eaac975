//! Investibook OpenCode workspace generation: three-agent configuration, skill catalog, schemas, protocol and validators
//!
//! This crate is being built; its public API arrives with its issue. It exports nothing yet.
