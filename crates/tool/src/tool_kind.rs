//! Which of the three tools a binary is: the package identity it serves, the provider
//! it talks to, its binary's name and which variables of the runtime-context contract
//! it reads.

use evidence_result::{PackageId, Provider};

use crate::context::ReadBy;

/// One of the three tool entrypoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// `clinic-tool`, package `managed_auto_oncall_clinic`.
    Clinic,
    /// `manus-tool`, package `managed_auto_oncall_manus`.
    Manus,
    /// `wetech-tool`, package `managed_auto_oncall_wetech`.
    Wetech,
}

impl Tool {
    /// The three tools.
    pub const ALL: [Tool; 3] = [Tool::Clinic, Tool::Manus, Tool::Wetech];

    /// The package identity the tool serves.
    pub fn identity(self) -> PackageId {
        match self {
            Tool::Clinic => PackageId::clinic(),
            Tool::Manus => PackageId::manus(),
            Tool::Wetech => PackageId::wetech(),
        }
    }

    /// The provider it talks to.
    pub fn provider(self) -> Provider {
        match self {
            Tool::Clinic => Provider::Clinic,
            Tool::Manus => Provider::Manus,
            Tool::Wetech => Provider::Wetech,
        }
    }

    /// The binary's name, which is also its entrypoint file name in a package.
    pub fn binary_name(self) -> &'static str {
        match self {
            Tool::Clinic => "clinic-tool",
            Tool::Manus => "manus-tool",
            Tool::Wetech => "wetech-tool",
        }
    }
}

impl Tool {
    /// The [`ReadBy`] of the variables only this tool reads.
    pub(crate) fn reader(self) -> ReadBy {
        match self {
            Tool::Clinic => ReadBy::Clinic,
            Tool::Manus => ReadBy::Manus,
            Tool::Wetech => ReadBy::Wetech,
        }
    }
}
