//! Generating a workspace: the [`Generator`] renders every file from a catalog, a skills
//! tree and the [`GenerateOptions`], and writes them idempotently and without deleting
//! anything; the [`GenerationReport`] says what it did; a [`GenerateError`] says why
//! nothing was written. [`check_placement`] tells whether a generated workspace still sits
//! where its edit patterns point.

mod check;
mod error;
mod files;
mod generator;
mod manifest;
mod options;
mod report;
mod skill;
mod write;

pub use check::{CheckError, PlacementCheck, check_placement};
pub use error::GenerateError;
pub use generator::{GeneratedFile, Generator};
pub use options::GenerateOptions;
pub use report::{FileChange, GenerationReport, Mode};
pub use skill::WorkspaceSkill;
