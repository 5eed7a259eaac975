//! The scope labels of the committed Clinic package, shared by the tests that lock
//! against them.

use std::path::Path;

use evidence_package::Package;
use evidence_policy::ScopeBinding;

/// The scope labels of the committed, installed Clinic package.
pub(crate) fn committed_scope() -> Vec<ScopeBinding> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packages/managed_auto_oncall_clinic/v3");
    Package::load_source(&dir)
        .unwrap()
        .manifest()
        .manifest()
        .scope_labels
        .clone()
}
