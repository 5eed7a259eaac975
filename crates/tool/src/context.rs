//! The runtime-context contract of a tool sandbox: every environment variable an
//! entrypoint, the signer or the packaging command reads is named here once, with who
//! sets it, whether it is required and what it holds ([`crate::RuntimeContext`] reads
//! them). [`CONTEXT_VARS`] is the table the
//! README's entrypoint section shows (a test keeps the two equal).

use evidence_connectors::{ClinicSecrets, ManusSecrets, WetechSecrets};

/// The file holding the signed per-request policy envelope (set by the runtime, per call).
pub const TRUSTED_CONTEXT_ENV: &str = "EVIDENCE_TRUSTED_CONTEXT";
/// The policy verification keys, Ed25519 public keys only, `kid:base64publickey,...`
/// (set by the runtime).
pub const POLICY_KEYS_ENV: &str = "EVIDENCE_POLICY_KEYS";
/// The file the audit record is appended to; stderr when unset (set by the runtime).
pub const AUDIT_LOG_ENV: &str = "EVIDENCE_AUDIT_LOG";
/// The turn ledger the package servers of one evidence turn share: a directory (one
/// host), or the URL of a Redis (`redis://` or `rediss://`, servers on several hosts;
/// it may carry the password, and is held as a secret). Set by the runtime or the
/// deployment; an MCP server does not start without it.
pub const TURN_LEDGER_ENV: &str = "EVIDENCE_TURN_LEDGER";
/// The CA certificate (PEM file) that signs the certificate of a `rediss://` turn
/// ledger, when it is not in the system's roots (set with the ledger).
pub const TURN_LEDGER_CA_ENV: &str = "EVIDENCE_TURN_LEDGER_CA";
/// The Clinic API base URL (deployment configuration).
pub const CLINIC_BASE_URL_ENV: &str = "CLINIC_BASE_URL";
/// The Clinic `query_range` path template, `{cluster_id}` in it (deployment
/// configuration, required: there is no default path).
pub const CLINIC_QUERY_PATH_TEMPLATE_ENV: &str = "CLINIC_QUERY_PATH_TEMPLATE";
/// The base URL of the Manus `vida` target (deployment configuration).
pub const MANUS_VIDA_URL_ENV: &str = "MANUS_VIDA_URL";
/// The base URL of the Manus `monica` target (deployment configuration).
pub const MANUS_MONICA_URL_ENV: &str = "MANUS_MONICA_URL";
/// The Grafana base URL in front of Wetech (deployment configuration).
pub const WETECH_GRAFANA_URL_ENV: &str = "WETECH_GRAFANA_URL";
/// The Chromium binary (deployment configuration, default `/usr/bin/chromium`).
pub const WETECH_CHROMIUM_ENV: &str = "WETECH_CHROMIUM";
/// The ChromeDriver binary (deployment configuration, default `/usr/bin/chromedriver`).
pub const WETECH_CHROMEDRIVER_ENV: &str = "WETECH_CHROMEDRIVER";
/// The signing key id (signer only).
pub const SIGNING_KID_ENV: &str = "EVIDENCE_SIGNING_KID";
/// The Ed25519 private key, base64 (signer only; never in a tool sandbox).
pub const SIGNING_KEY_ENV: &str = "EVIDENCE_SIGNING_KEY";

/// The file forms of the secret variables (`NAME_FILE`, [`crate::secret_file`]): each
/// auth-binding secret of [`CONTEXT_VARS`] and the turn ledger's URL (which may hold the
/// Redis password) may instead be given as the path of a file holding it, read once at
/// start. Setting both forms of one secret is refused.
pub const SECRET_FILE_VARS: &[&str] = &[
    "EVIDENCE_TURN_LEDGER_FILE",
    "CLINIC_API_TOKEN_FILE",
    "MANUS_USERNAME_FILE",
    "MANUS_PASSWORD_FILE",
    "MANUS_REF_KEYS_FILE",
    "WETECH_STORAGE_STATE_FILE",
];

/// Whether the variable `var` is a secret that also takes the file form `NAME_FILE`.
pub fn takes_file_form(var: &ContextVar) -> bool {
    var.set_by == SetBy::AuthBinding || var.name == TURN_LEDGER_ENV
}

/// Default Chromium binary of the Wetech entrypoint.
pub const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";
/// Default ChromeDriver binary of the Wetech entrypoint.
pub const DEFAULT_CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Who sets a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetBy {
    /// The agent runtime, per call (never the model).
    Runtime,
    /// The package's auth binding, only in a fresh sandbox of the bound digest.
    AuthBinding,
    /// The deployment of the package (configuration, no secret).
    Deployment,
    /// The operator of the policy signer (Auto-oncall's side, never a tool sandbox).
    Signer,
}

/// Which binary reads a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadBy {
    /// Every tool entrypoint.
    AllTools,
    /// `clinic-tool`.
    Clinic,
    /// `manus-tool`.
    Manus,
    /// `wetech-tool`.
    Wetech,
    /// `sign-policy`.
    SignPolicy,
}

/// One variable of the runtime-context contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextVar {
    /// The variable's name.
    pub name: &'static str,
    /// Which binary reads it.
    pub read_by: ReadBy,
    /// Who sets it.
    pub set_by: SetBy,
    /// Whether the binary needs it (a missing required variable is a failure result).
    pub required: bool,
    /// What it holds.
    pub holds: &'static str,
}

const fn var(
    name: &'static str,
    read_by: ReadBy,
    set_by: SetBy,
    required: bool,
    holds: &'static str,
) -> ContextVar {
    ContextVar {
        name,
        read_by,
        set_by,
        required,
        holds,
    }
}

/// Every environment variable the binaries of this crate read.
pub const CONTEXT_VARS: &[ContextVar] = &[
    var(
        TRUSTED_CONTEXT_ENV,
        ReadBy::AllTools,
        SetBy::Runtime,
        true,
        "path of the signed per-request policy envelope (not read by a server over HTTP, whose envelopes are delivered per session)",
    ),
    var(
        POLICY_KEYS_ENV,
        ReadBy::AllTools,
        SetBy::Runtime,
        true,
        "policy verification keys (Ed25519 public keys), `kid:base64publickey,...`",
    ),
    var(
        AUDIT_LOG_ENV,
        ReadBy::AllTools,
        SetBy::Runtime,
        false,
        "file the audit record is appended to (stderr when unset)",
    ),
    var(
        TURN_LEDGER_ENV,
        ReadBy::AllTools,
        SetBy::Runtime,
        false,
        "turn ledger the package servers share, and their session store: a directory (one host) or a `redis://`/`rediss://` URL, password included, of a Redis run with `appendfsync always` and `maxmemory-policy noeviction` (servers on several hosts); required with `--mcp` and `--mcp-http`",
    ),
    var(
        TURN_LEDGER_CA_ENV,
        ReadBy::AllTools,
        SetBy::Runtime,
        false,
        "PEM file of the CA that signs a `rediss://` turn ledger's certificate (the system's roots when unset)",
    ),
    var(
        CLINIC_BASE_URL_ENV,
        ReadBy::Clinic,
        SetBy::Deployment,
        true,
        "Clinic API base URL (its host must be in the package allowlist)",
    ),
    var(
        CLINIC_QUERY_PATH_TEMPLATE_ENV,
        ReadBy::Clinic,
        SetBy::Deployment,
        true,
        "cluster-scoped `query_range` path below the base URL, with `{cluster_id}` (no default)",
    ),
    var(
        ClinicSecrets::TOKEN_ENV,
        ReadBy::Clinic,
        SetBy::AuthBinding,
        true,
        "Clinic API bearer token (`clinic_api_token`)",
    ),
    var(
        MANUS_VIDA_URL_ENV,
        ReadBy::Manus,
        SetBy::Deployment,
        false,
        "base URL of the `vida` target (the policy picks the target)",
    ),
    var(
        MANUS_MONICA_URL_ENV,
        ReadBy::Manus,
        SetBy::Deployment,
        false,
        "base URL of the `monica` target",
    ),
    var(
        ManusSecrets::USERNAME_ENV,
        ReadBy::Manus,
        SetBy::AuthBinding,
        true,
        "Manus session user (`manus_username`)",
    ),
    var(
        ManusSecrets::PASSWORD_ENV,
        ReadBy::Manus,
        SetBy::AuthBinding,
        true,
        "Manus session password (`manus_password`)",
    ),
    var(
        ManusSecrets::REFERENCE_KEYS_ENV,
        ReadBy::Manus,
        SetBy::AuthBinding,
        true,
        "opaque-reference key ring, `kid:base64key,...`, first key seals",
    ),
    var(
        WETECH_GRAFANA_URL_ENV,
        ReadBy::Wetech,
        SetBy::Deployment,
        true,
        "Grafana base URL in front of Wetech",
    ),
    var(
        WETECH_CHROMIUM_ENV,
        ReadBy::Wetech,
        SetBy::Deployment,
        false,
        "Chromium binary (default /usr/bin/chromium)",
    ),
    var(
        WETECH_CHROMEDRIVER_ENV,
        ReadBy::Wetech,
        SetBy::Deployment,
        false,
        "ChromeDriver binary (default /usr/bin/chromedriver)",
    ),
    var(
        WetechSecrets::STORAGE_STATE_ENV,
        ReadBy::Wetech,
        SetBy::AuthBinding,
        true,
        "Playwright storageState JSON (`wetech_storage_state`)",
    ),
    var(
        SIGNING_KID_ENV,
        ReadBy::SignPolicy,
        SetBy::Signer,
        false,
        "signing key id (or `--kid`)",
    ),
    var(
        SIGNING_KEY_ENV,
        ReadBy::SignPolicy,
        SetBy::Signer,
        false,
        "Ed25519 private key, base64 (or `--key`/`--key-file`)",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_secret_and_only_a_secret_has_its_file_form_listed() {
        let expected: BTreeSet<String> = CONTEXT_VARS
            .iter()
            .filter(|v| takes_file_form(v))
            .map(|v| crate::secret_file::file_variable(v.name))
            .collect();
        let listed: BTreeSet<String> = SECRET_FILE_VARS.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(listed, expected);
    }

    #[test]
    fn every_name_is_listed_once() {
        let names: BTreeSet<&str> = CONTEXT_VARS.iter().map(|v| v.name).collect();
        assert_eq!(names.len(), CONTEXT_VARS.len());
        for v in CONTEXT_VARS {
            let runtime = v
                .name
                .starts_with(evidence_package::manifest::RUNTIME_ENV_PREFIX);
            assert_eq!(
                runtime,
                matches!(v.set_by, SetBy::Runtime | SetBy::Signer),
                "{}",
                v.name
            );
        }
    }

    /// The entrypoints reference's variable table names exactly the variables of
    /// [`CONTEXT_VARS`]: each row's first column holds one or more names in backticks.
    #[test]
    fn the_reference_table_lists_exactly_these_variables() {
        let readme = include_str!("../../../docs/reference/entrypoints.md");
        let header = "| variable | read by | who sets it | meaning |";
        let table = readme
            .split_once(header)
            .map(|(_, rest)| rest)
            .expect("docs/reference/entrypoints.md has the variable table");
        let mut listed = BTreeSet::new();
        for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
            let first = row.split('|').nth(1).unwrap_or_default();
            for (i, part) in first.split('`').enumerate() {
                if i % 2 == 1 {
                    listed.insert(part.to_owned());
                }
            }
        }
        let names: BTreeSet<String> = CONTEXT_VARS.iter().map(|v| v.name.to_owned()).collect();
        assert_eq!(listed, names);
    }
}
