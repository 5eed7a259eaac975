//! Environment-variable names of an auth binding: their form, and the names reserved for
//! the sandbox and the runtime context.

use super::error::ManifestError;

/// The prefix of the tool sandbox's runtime-context variables (policy envelope,
/// verification keys, audit log; the table is in `evidence-tool`). Reserved: no secret
/// of an auth binding may be injected under a name that starts with it.
pub const RUNTIME_ENV_PREFIX: &str = "EVIDENCE_";

/// True for a variable the sandbox or the runtime context owns: the process basics
/// (`PATH`, `HOME`, ...), the loader's and the locale's (`LD_*`, `LC_*`), and every
/// runtime-context variable.
fn is_reserved_env(env: &str) -> bool {
    // The runtime's own variables (`EVIDENCE_TRUSTED_CONTEXT`, the keys, the audit log)
    // all carry the reserved prefix.
    const RESERVED: [&str; 8] = [
        "PATH", "HOME", "USER", "SHELL", "TMPDIR", "PWD", "LANG", "TERM",
    ];
    RESERVED.contains(&env)
        || env.starts_with(RUNTIME_ENV_PREFIX)
        || env.starts_with("LD_")
        || env.starts_with("LC_")
}

/// Checks the variable a secret is injected as: 1-128 upper-case letters, digits and `_`,
/// starting with a letter, and not reserved.
pub(super) fn check_env(field: &str, env: &str) -> Result<(), ManifestError> {
    let ok = !env.is_empty()
        && env.len() <= 128
        && env.as_bytes()[0].is_ascii_uppercase()
        && env
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        return Err(ManifestError::invalid(
            field,
            format!("{env:?}: use upper-case letters, digits and '_', starting with a letter"),
        ));
    }
    if is_reserved_env(env) {
        return Err(ManifestError::invalid(
            field,
            format!("{env:?} is reserved"),
        ));
    }
    Ok(())
}
