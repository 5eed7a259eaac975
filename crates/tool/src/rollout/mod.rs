//! The rollout canary: runs a representative read-only set of calls per provider and
//! target ([`plan`](self) of the seed's incidents) through the deployed packages' own
//! binaries, a process per call as a sandbox runs it, under real envelopes and the turn
//! ledger's admission, and writes the rollout evidence ([`RolloutReport`], JSON and a
//! Markdown summary) that decides whether a passive revision may be installed
//! ([`justifies`]).
//!
//! The `canary` binary is the command; pointed at the real endpoints it is the cutover
//! check, pointed at the local fronts it is tested.

mod deployment;
mod error;
mod invoke;
mod justify;
mod markdown;
mod plan;
mod report;
mod run;
mod target_override;

pub use deployment::{Deployment, DeploymentFile, EnvelopeSource, PackageEntry};
pub use error::RolloutError;
pub use justify::justifies;
pub use markdown::summary;
pub use plan::{APID_29213_END, APID_29213_START, ST_2865_END, ST_2865_START};
pub use report::{
    CallReport, Expectation, FailureReport, PackageUsed, ProviderVerdict, ReportFormat,
    RolloutReport, TargetReport,
};
pub use run::{REPORT_JSON, REPORT_MARKDOWN, run_canary, write_policies};
pub use target_override::TargetOverride;
