//! The Connector trait and the Clinic, Manus and Wetech connectors with Prometheus response handling
//!
//! This crate is being built; its public API arrives with its issue. It exports nothing yet.
