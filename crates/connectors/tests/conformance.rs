//! The connector conformance suite: the same cases against every connector, over real
//! Prometheus servers and the test fronts of `evidence-test-support`.
//!
//! Each connector has an adapter (a [`cases::Harness`]) in its own module, and
//! `conformance_suite!` turns every case of [`cases`] into one test for it. Adding a
//! connector is one adapter module and one macro line. Connector-specific tests (seed
//! figures, references, session bootstrap) sit beside their adapter.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[macro_use]
#[path = "conformance/cases.rs"]
mod cases;
#[path = "conformance/address_leaks.rs"]
mod address_leaks;
#[path = "conformance/clinic.rs"]
mod clinic;
#[path = "conformance/manus.rs"]
mod manus;
#[path = "conformance/manus_addresses.rs"]
mod manus_addresses;
