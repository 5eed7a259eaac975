//! The skill catalog: which skills exist, in which groups, and which groups each subagent
//! loads. [`SkillCatalog::investibook`] is the plan's catalog; [`SkillCatalog::load`]
//! reads one from a `SKILL_CATALOG.md` source file; [`SkillCatalog::validate`] checks one
//! against a skills tree and the loading rules.

mod checker;
mod model;
mod render;
mod source;

pub use checker::{CatalogError, CatalogProblem};
pub use model::{CORE_GROUP, DATA_ACCESS_GROUP, DIAGNOSIS_GROUP, SkillCatalog, SkillGroup};
pub use source::{CatalogSourceError, MAX_CATALOG_BYTES};
