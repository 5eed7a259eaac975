//! What the three tool-sandbox entrypoints share: reading the runtime context (model
//! arguments on stdin, the policy envelope file, the verification keys, the package
//! folder), binding the injected secrets, and writing the one result and one audit
//! record. The call itself is `evidence_connectors::run_sandbox_call`.

use std::error::Error;
use std::io::{Read as _, Write as _};
use std::path::PathBuf;

use managed_evidence::connectors::{
    Connector, PolicyInput, SandboxCall, SandboxOutcome, bind_from_env, run_sandbox_call,
};
use managed_evidence::package::Package;
use managed_evidence::policy::{KeyRing, read_runtime_envelope};
use secrecy::SecretString;

/// Environment variable naming the package folder (its digest is recomputed from it).
pub(crate) const PACKAGE_DIR_ENV: &str = "EVIDENCE_PACKAGE_DIR";
/// Environment variable holding the policy verification keys, `kid:base64key,...`.
pub(crate) const POLICY_KEYS_ENV: &str = "EVIDENCE_POLICY_KEYS";
/// Environment variable naming the audit log file (stderr when unset).
pub(crate) const AUDIT_LOG_ENV: &str = "EVIDENCE_AUDIT_LOG";

/// A required environment variable.
pub(crate) fn env(name: &str) -> Result<String, Box<dyn Error>> {
    std::env::var(name).map_err(|_| format!("{name} is not set").into())
}

/// Loads the package named by `EVIDENCE_PACKAGE_DIR`, recomputing its digest.
pub(crate) fn load_package() -> Result<Package, Box<dyn Error>> {
    let dir = PathBuf::from(env(PACKAGE_DIR_ENV)?);
    Ok(Package::load(&dir)?)
}

/// Runs one call with the runtime context of this process and writes its outputs.
/// Returns the process exit code: 0 whenever a result was written.
pub(crate) async fn run_tool<C: Connector>(
    package: &Package,
    connector: &C,
    config: &C::Config,
    secrets: &C::Secrets,
) -> Result<(), Box<dyn Error>> {
    let binding = bind_from_env(package)?;
    let envelope = read_runtime_envelope()?;
    let keys = KeyRing::parse_secret(&SecretString::from(env(POLICY_KEYS_ENV)?))?;
    let mut args = String::new();
    std::io::stdin().read_to_string(&mut args)?;
    let call = SandboxCall {
        package,
        binding: &binding,
        policy: PolicyInput::Envelope {
            envelope: &envelope,
            keys: &keys,
        },
        args: &args,
        now: jiff::Timestamp::now(),
    };
    let outcome = run_sandbox_call(connector, config, secrets, call).await?;
    write_outcome(&outcome)
}

fn write_outcome(outcome: &SandboxOutcome) -> Result<(), Box<dyn Error>> {
    let audit = outcome.audit.to_json_line()? + "\n";
    match std::env::var_os(AUDIT_LOG_ENV) {
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?
            .write_all(audit.as_bytes())?,
        None => std::io::stderr().write_all(audit.as_bytes())?,
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(outcome.result.to_json()?.as_bytes())?;
    stdout.write_all(b"\n")?;
    stdout.flush()?;
    Ok(())
}

/// Runs `body` and exits: 0 when it wrote a result, 1 with a message otherwise.
pub(crate) fn main_with(
    name: &str,
    body: impl std::future::Future<Output = Result<(), Box<dyn Error>>>,
) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name}: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(body) {
        eprintln!("{name}: no result produced: {e}");
        std::process::exit(1);
    }
}
