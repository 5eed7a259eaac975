//! The canary's deployment file and its loading: for each package its deployable folder
//! and deployment configuration, the verification keys the sandboxes hold, and how the
//! canary obtains envelopes (a signer key file, or envelopes signed ahead). Secrets are
//! never in the file: each package's secrets are read from the canary's own environment,
//! under the names the package's manifest binds them to.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use evidence_package::Package;
use evidence_policy::{KeyId, KeyRing, PolicySigner};
use schemars::JsonSchema;
use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};

use super::RolloutError;
use super::plan::TARGETS;
use super::target_override::TargetOverride;
use crate::Tool;
use crate::context::{CONTEXT_VARS, SetBy};
use crate::secret_file::{file_variable, read_secret_file, secret_of_forms};

/// The deployment file, as written (`schemas/canary-deployment.schema.json`). Relative
/// paths are read from the file's own folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeploymentFile {
    /// The account the canary's policies name (the account the endpoints serve).
    pub account: String,
    /// The verification keys the sandboxes hold, `kid:base64publickey,...` (public keys
    /// only). Optional with a signer, whose own entry is then used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_keys: Option<String>,
    /// How the canary obtains one envelope per target.
    pub envelopes: EnvelopeSource,
    /// The packages to check, at most one per provider.
    pub packages: Vec<PackageEntry>,
    /// Per target (`clinic-SaaS01`, `clinic-SaaS02`, `manus-vida`, `manus-monica`,
    /// `wetech-grafana`), another cluster or window than the seed incident's: for
    /// endpoints whose retention no longer holds the seed windows. A target not named
    /// keeps the seed's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub targets: BTreeMap<String, TargetOverride>,
}

/// How the canary obtains its envelopes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum EnvelopeSource {
    /// The canary signs each target's policy itself, with this signing key.
    Signer {
        /// The key id the sandboxes' key ring names the key by.
        kid: String,
        /// The file holding the Ed25519 private key (`sign-policy --generate-key`).
        key_file: PathBuf,
    },
    /// Envelopes signed ahead by the Auto-oncall signer: `<dir>/<target>.envelope` for
    /// each target, signed from the policies `canary policies` writes.
    SignedAhead {
        /// The folder holding the envelopes.
        dir: PathBuf,
    },
}

/// One package of the deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackageEntry {
    /// The deployable package folder (`package-tool --out`), the tool binary included.
    pub dir: PathBuf,
    /// The tool's deployment configuration (`CLINIC_BASE_URL`, ...): configuration only,
    /// never a secret.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// The uid of Wetech's Prometheus datasource in Grafana (Wetech only): the policy
    /// field `wetech_datasource` of the canary's Wetech policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wetech_datasource: Option<String>,
}

/// How the loaded deployment obtains envelopes.
pub(crate) enum Envelopes {
    /// Signs with this key.
    Signer(PolicySigner),
    /// Reads `<dir>/<target>.envelope`.
    SignedAhead(PathBuf),
}

/// One package, loaded: its deployable folder (digest recomputed), its tool, its
/// configuration and its secrets read from the environment.
pub(crate) struct LoadedPackage {
    pub(crate) tool: Tool,
    pub(crate) dir: PathBuf,
    pub(crate) package: Package,
    pub(crate) entrypoint: PathBuf,
    pub(crate) config: BTreeMap<String, String>,
    pub(crate) secrets: Vec<(String, SecretString)>,
    pub(crate) wetech_datasource: Option<String>,
}

/// A deployment file, checked and loaded (its secrets never printed).
pub struct Deployment {
    pub(crate) path: PathBuf,
    pub(crate) account: String,
    pub(crate) targets: BTreeMap<String, TargetOverride>,
    /// The verification keys as the sandboxes get them (`EVIDENCE_POLICY_KEYS`).
    pub(crate) keys: String,
    /// The same keys, parsed: what an envelope signed ahead is read with.
    pub(crate) key_ring: KeyRing,
    pub(crate) envelopes: Envelopes,
    pub(crate) packages: Vec<LoadedPackage>,
}

impl Deployment {
    /// Reads and checks the deployment file at `path`; each package's secrets are looked
    /// up with `env` (the process environment in the `canary` binary).
    ///
    /// Errors: the file is unreadable or not the deployment shape; a folder is not a
    /// deployable package; two packages serve one provider; a configuration name is not a
    /// deployment variable of its tool (a secret is refused by name); a required
    /// configuration variable or a secret is missing; the signing key or the key ring is
    /// unusable.
    pub fn load(
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Deployment, RolloutError> {
        let text = std::fs::read_to_string(path).map_err(|source| RolloutError::Read {
            path: path.to_owned(),
            source,
        })?;
        let file: DeploymentFile =
            serde_json::from_str(&text).map_err(|source| RolloutError::DeploymentShape {
                path: path.to_owned(),
                source,
            })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let envelopes = match &file.envelopes {
            EnvelopeSource::Signer { kid, key_file } => {
                Envelopes::Signer(load_signer(kid, &base.join(key_file))?)
            }
            EnvelopeSource::SignedAhead { dir } => Envelopes::SignedAhead(base.join(dir)),
        };
        let keys = match (&file.policy_keys, &envelopes) {
            (Some(keys), _) => keys.clone(),
            (None, Envelopes::Signer(signer)) => signer.key_ring_entry(),
            (None, Envelopes::SignedAhead(_)) => {
                return Err(RolloutError::Deployment(
                    "policy_keys is required with signed_ahead envelopes".to_owned(),
                ));
            }
        };
        let key_ring: KeyRing = keys
            .parse()
            .map_err(|e| RolloutError::Deployment(format!("policy_keys: {e}")))?;
        if file.account.trim().is_empty() {
            return Err(RolloutError::Deployment("account is empty".to_owned()));
        }
        let mut packages: Vec<LoadedPackage> = Vec::new();
        for entry in &file.packages {
            let loaded = load_package(entry, base, env)?;
            if packages.iter().any(|p| p.tool == loaded.tool) {
                return Err(RolloutError::Deployment(format!(
                    "two packages of provider {}: give one per provider",
                    loaded.tool.provider()
                )));
            }
            packages.push(loaded);
        }
        if packages.is_empty() {
            return Err(RolloutError::Deployment("no package to check".to_owned()));
        }
        check_targets(&file.targets)?;
        Ok(Deployment {
            path: path.to_owned(),
            account: file.account,
            targets: file.targets,
            keys,
            key_ring,
            envelopes,
            packages,
        })
    }
}

/// Each override names a target of the plan and is well-formed itself
/// ([`TargetOverride::check`]).
fn check_targets(targets: &BTreeMap<String, TargetOverride>) -> Result<(), RolloutError> {
    for (key, o) in targets {
        if !TARGETS.iter().any(|t| t.key == key) {
            let known: Vec<&str> = TARGETS.iter().map(|t| t.key).collect();
            return Err(RolloutError::Deployment(format!(
                "targets: no target {key:?} (the targets: {})",
                known.join(", ")
            )));
        }
        o.check(key)?;
    }
    Ok(())
}

fn load_signer(kid: &str, key_file: &Path) -> Result<PolicySigner, RolloutError> {
    // A secret file: closed to other users, like every secret file of the tools.
    let absolute = std::path::absolute(key_file).map_err(|source| RolloutError::Read {
        path: key_file.to_owned(),
        source,
    })?;
    let key = read_secret_file(&absolute)
        .map_err(|e| RolloutError::Deployment(format!("signer key file: {e}")))?;
    let kid = KeyId::new(kid).map_err(|e| RolloutError::Deployment(format!("signer kid: {e}")))?;
    PolicySigner::from_base64(
        kid,
        &SecretString::from(key.expose_secret().trim().to_owned()),
    )
    .map_err(|e| RolloutError::Deployment(format!("signing key {}: {e}", key_file.display())))
}

fn tool_of(package: &Package) -> Result<Tool, RolloutError> {
    Tool::ALL
        .into_iter()
        .find(|t| t.identity() == *package.identity())
        .ok_or_else(|| {
            RolloutError::Deployment(format!("{} is not a managed tool", package.identity()))
        })
}

fn load_package(
    entry: &PackageEntry,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<LoadedPackage, RolloutError> {
    let dir = base.join(&entry.dir);
    let package = Package::load(&dir).map_err(|e| {
        RolloutError::Deployment(format!("{}: not a deployable package: {e}", dir.display()))
    })?;
    let tool = tool_of(&package)?;
    check_config(tool, &entry.config)?;
    let mut secrets = Vec::new();
    for spec in &package.manifest().auth.secrets {
        let given = |name: &str| env(name).filter(|v| !v.is_empty());
        let file_name = file_variable(&spec.env);
        let value = secret_of_forms(&spec.env, given(&spec.env), given(&file_name))
            .map_err(RolloutError::Deployment)?
            .ok_or_else(|| {
                RolloutError::Deployment(format!(
                    "the secret {} of {} is not set: export {} (or {file_name}, a file) in the \
                     canary's environment (secrets are never read from the deployment file)",
                    spec.name,
                    package.identity(),
                    spec.env
                ))
            })?;
        secrets.push((spec.env.clone(), value));
    }
    if tool == Tool::Wetech && entry.wetech_datasource.is_none() {
        return Err(RolloutError::Deployment(
            "the Wetech package needs wetech_datasource (the Grafana datasource uid)".to_owned(),
        ));
    }
    if tool != Tool::Wetech && entry.wetech_datasource.is_some() {
        return Err(RolloutError::Deployment(format!(
            "wetech_datasource is given for {}, which is not Wetech",
            package.identity()
        )));
    }
    Ok(LoadedPackage {
        tool,
        entrypoint: dir.join(&package.manifest().entrypoint),
        dir,
        package,
        config: entry.config.clone(),
        secrets,
        wetech_datasource: entry.wetech_datasource.clone(),
    })
}

/// Every configuration name must be a deployment variable its tool reads; every required
/// one must be given. A secret's name is refused as such.
fn check_config(tool: Tool, config: &BTreeMap<String, String>) -> Result<(), RolloutError> {
    for name in config.keys() {
        match CONTEXT_VARS.iter().find(|v| v.name == name) {
            Some(v) if v.set_by == SetBy::Deployment && v.read_by == tool.reader() => {}
            Some(v) if v.set_by == SetBy::AuthBinding => {
                return Err(RolloutError::Deployment(format!(
                    "{name} is a secret: export it in the canary's environment, never in \
                     the deployment file"
                )));
            }
            _ => {
                return Err(RolloutError::Deployment(format!(
                    "{name} is not a deployment variable of {}",
                    tool.binary_name()
                )));
            }
        }
    }
    for v in CONTEXT_VARS {
        if v.set_by == SetBy::Deployment
            && v.read_by == tool.reader()
            && v.required
            && !config.contains_key(v.name)
        {
            return Err(RolloutError::Deployment(format!(
                "{} needs {} in its config",
                tool.binary_name(),
                v.name
            )));
        }
    }
    Ok(())
}

impl std::fmt::Debug for Deployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployment")
            .field("path", &self.path)
            .field("account", &self.account)
            .field(
                "packages",
                &self
                    .packages
                    .iter()
                    .map(|p| {
                        (
                            p.package.identity().to_string(),
                            p.package.digest().to_string(),
                        )
                    })
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}
