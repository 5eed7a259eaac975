#![doc = include_str!("../README.md")]

mod io_error;
mod ordered_json;

pub mod catalog;
pub mod cli;
pub mod config;
pub mod detect;
pub mod error;
pub mod generate;
pub mod layout;
pub mod mcp;
pub mod names;
pub mod orchestration;
pub mod outputs;
pub mod placement;
pub mod protocol;
pub mod skills;

pub use catalog::SkillCatalog;
pub use cli::OpenCodeCli;
pub use config::{OpenCodeConfig, TaskSupport};
pub use error::WorkspaceError;
pub use generate::{
    CheckError, FileChange, GenerateError, GenerateOptions, GenerationReport, Generator, Mode,
    WorkspaceSkill, check_placement,
};
pub use mcp::{McpServer, SESSION_HEADER, SESSION_TOKEN_ENV};
pub use names::AgentRole;
pub use orchestration::Orchestration;
pub use outputs::{ChildOutputError, ChildOutputReader};
pub use placement::Placement;
pub use skills::SkillsTree;

/// Helpers for this crate's tests and for other crates' tests that run the pinned OpenCode.
/// Not part of the stable interface.
#[doc(hidden)]
pub mod internal {
    use std::path::PathBuf;

    use crate::cli::PINNED_OPENCODE_VERSION;

    /// The environment variable naming the `opencode` program the tests run.
    pub const OPENCODE_BIN_ENV: &str = "OPENCODE_BIN";

    /// Where `scripts/test.sh` installs the pinned `opencode-ai` (from the repository root).
    pub const OPENCODE_INSTALL_DIR: &str = ".tools/opencode";

    /// The command that installs the pinned OpenCode where the tests look for it.
    pub fn install_command() -> String {
        format!(
            "scripts/test.sh (or: npm install --prefix {OPENCODE_INSTALL_DIR} --save-exact --no-audit --no-fund opencode-ai@{PINNED_OPENCODE_VERSION}; apt-get install -y nodejs npm when npm is missing)"
        )
    }

    /// The pinned `opencode` program: `$OPENCODE_BIN`, or
    /// `<repository>/.tools/opencode/node_modules/.bin/opencode`. An error (never a skip)
    /// that names the install command when it is not there.
    pub fn pinned_opencode() -> Result<PathBuf, String> {
        let path = match std::env::var_os(OPENCODE_BIN_ENV) {
            Some(path) => PathBuf::from(path),
            None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(OPENCODE_INSTALL_DIR)
                .join("node_modules/.bin/opencode"),
        };
        if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "OpenCode {PINNED_OPENCODE_VERSION} is not installed at {} (set {OPENCODE_BIN_ENV} to use another path); install it with: {}",
                path.display(),
                install_command()
            ))
        }
    }
}
