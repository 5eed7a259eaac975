//! The replay's local deployment: committed package revisions with a loopback allowlist
//! and this binary as entrypoint, their secret bindings, and the trusted policies Auto-oncall
//! would issue.

use std::error::Error;
use std::path::Path;

use managed_evidence::package::{Manifest, Package, PackageFile, SecretBinding, SecretValues};
use managed_evidence::policy::TrustedPolicy;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::ROOT;

/// A committed package revision as deployed locally: the same manifest and source files,
/// with the network allowlist naming the loopback address the local stand-ins listen on
/// (the package digest covers the allowlist, so this is a package of its own), and this
/// replay's own binary as the entrypoint file (the code that runs the calls here).
pub(crate) fn local_package(identity: &str, revision: &str) -> Result<Package, Box<dyn Error>> {
    let dir = Path::new(ROOT)
        .join("packages")
        .join(identity)
        .join(revision);
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json"))?)?;
    manifest["network"] = json!({"mode": "restricted", "hosts": ["127.0.0.1"]});
    let manifest = Manifest::from_json(&manifest.to_string())?;
    let source = Package::load_source(&dir)?;
    let mut files: Vec<PackageFile> = source.files().to_vec();
    files.push(PackageFile::new(
        manifest.entrypoint.clone(),
        true,
        std::fs::read(std::env::current_exe()?)?,
    ));
    Ok(Package::new(&manifest, files)?)
}

/// The package's secret binding over these name and value pairs.
pub(crate) fn bind(
    package: &Package,
    values: &[(&str, &str)],
) -> Result<SecretBinding, Box<dyn Error>> {
    let mut secrets = SecretValues::new();
    for (name, value) in values {
        secrets.insert(*name, SecretString::from((*value).to_owned()));
    }
    Ok(SecretBinding::bind(package, secrets)?)
}

/// The trusted policy of one replay scenario: `ticket` on `cluster` over `start..end`,
/// for the package's provider, issued now for an hour, with `extra` fields added.
pub(crate) fn policy(
    id: &str,
    ticket: &str,
    package: &Package,
    cluster: &str,
    start: i64,
    end: i64,
    extra: Value,
) -> Result<TrustedPolicy, Box<dyn Error>> {
    let ts = |s: i64| jiff::Timestamp::from_second(s).map(|t| t.to_string());
    let mut value = evidence_test_support::policy::issued_now(json!({
        "policy_id": id,
        "ticket": ticket,
        "provider": package.manifest().provider,
        "package": package.identity(),
        "account": "acct-replay",
        "cluster": {"id": cluster, "tier": "dedicated"},
        "operation": "query_range",
        "window": {"start": ts(start)?, "end": ts(end)?},
        "lookback": 3600,
        "limits": {"max_points_per_series": 11000, "min_step": 15, "max_batch": 4,
                   "max_series_kept": 10, "max_calls_per_turn": 8},
    }));
    if let (Some(obj), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            obj.insert(k.clone(), v.clone());
        }
    }
    Ok(serde_json::from_value(value)?)
}

/// A fresh 32-byte reference key.
pub(crate) fn rand_key() -> [u8; 32] {
    use rand::RngCore as _;
    let mut key = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut key);
    key
}
