//! Managed Tool package manifests, package digests, the catalog, secret binding, the fail-closed output guard and audit records
//!
//! This crate is being built; its public API arrives with its issue. It exports nothing yet.
