//! Secret values bound to one exact package digest.

use std::collections::BTreeMap;
use std::fmt;

use evidence_result::{Digest, PackageId};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;

use crate::problem::JsonError;
use crate::{
    GuardBuilder, OutputGuard, Package, Revision, guard::GuardLimits, manifest::SecretKind,
};

mod error;

pub use error::SecretError;

/// Secret values by secret name, as the runtime's secret store hands them over.
#[derive(Default)]
pub struct SecretValues {
    values: BTreeMap<String, SecretString>,
}

impl fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretValues")
            .field("names", &self.values.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SecretValues {
    /// No values.
    pub fn new() -> Self {
        SecretValues::default()
    }

    /// Adds (or replaces) the value of a secret.
    pub fn insert(&mut self, name: impl Into<String>, value: SecretString) -> &mut Self {
        self.values.insert(name.into(), value);
        self
    }
}

struct BoundSecret {
    name: String,
    env: String,
    value: SecretString,
}

/// A package's secrets bound to its exact digest.
///
/// [`SecretBinding::sandbox_env`] produces the tool sandbox environment only for a package
/// whose recomputed digest is the bound one; any other package, an older revision or a
/// one-byte change, gets nothing and a typed error. The output guard built from the same
/// values comes with it.
pub struct SecretBinding {
    identity: PackageId,
    revision: Revision,
    digest: Digest,
    secrets: Vec<BoundSecret>,
    unguarded: Vec<String>,
    guard: OutputGuard,
}

impl fmt::Debug for SecretBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretBinding")
            .field("identity", &self.identity)
            .field("revision", &self.revision)
            .field("digest", &self.digest)
            .field(
                "secrets",
                &self
                    .secrets
                    .iter()
                    .map(|s| (&s.name, &s.env))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl SecretBinding {
    /// Binds values to a package: every secret its auth binding names must have a value,
    /// no other value is accepted, values under 8 bytes are refused, and a storage state
    /// must be Playwright `storageState` JSON holding at least one credential, none of
    /// them under 8 bytes ([`GuardBuilder::add_storage_state`]; its page state under 8
    /// bytes is left unguarded and listed in [`SecretBinding::report`]). The output guard
    /// is built here, with the package's output size cap.
    pub fn bind(package: &Package, values: SecretValues) -> Result<Self, SecretError> {
        let manifest = package.manifest();
        let mut values = values.values;
        let max_output_bytes = usize::try_from(manifest.limits.max_output_bytes)
            .map_err(|_| SecretError::invalid("limits.max_output_bytes", "too large"))?;
        let mut guard = GuardBuilder::new(GuardLimits {
            max_output_bytes,
            ..GuardLimits::default()
        });
        let mut secrets = Vec::new();
        for spec in &manifest.auth.secrets {
            let value = values
                .remove(&spec.name)
                .ok_or_else(|| SecretError::MissingSecret(spec.name.clone()))?;
            match spec.kind {
                SecretKind::Value => guard.add_secret(&spec.name, &value)?,
                SecretKind::BrowserStorageState => guard.add_storage_state(&spec.name, &value)?,
            }
            secrets.push(BoundSecret {
                name: spec.name.clone(),
                env: spec.env.clone(),
                value,
            });
        }
        if let Some(extra) = values.keys().next() {
            return Err(SecretError::UnknownSecret(extra.clone()));
        }
        Ok(SecretBinding {
            identity: package.identity().clone(),
            revision: package.revision(),
            digest: package.digest(),
            secrets,
            unguarded: guard.unguarded().to_vec(),
            guard: guard.build()?,
        })
    }

    /// The digest the secrets are bound to.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// The identity the secrets are bound to.
    pub fn identity(&self) -> &PackageId {
        &self.identity
    }

    /// The environment for a fresh tool sandbox of `package`, produced only when its
    /// recomputed digest is the bound digest.
    pub fn sandbox_env(&self, package: &Package) -> Result<SandboxEnv, SecretError> {
        if package.digest() != self.digest || package.identity() != &self.identity {
            return Err(SecretError::BindingMismatch {
                bound: self.identity.clone(),
                bound_revision: self.revision,
                bound_digest: self.digest,
                requested: package.identity().clone(),
                requested_revision: package.revision(),
                requested_digest: package.digest(),
            });
        }
        Ok(SandboxEnv {
            vars: self
                .secrets
                .iter()
                .map(|s| (s.env.clone(), s.value.clone()))
                .collect(),
        })
    }

    /// The output guard over these values.
    pub fn guard(&self) -> &OutputGuard {
        &self.guard
    }

    /// What this binding guards and what it leaves unguarded, for the audit stream:
    /// names and descriptions, never values.
    pub fn report(&self) -> BindingReport {
        BindingReport {
            package: self.identity.clone(),
            revision: self.revision,
            digest: self.digest,
            secrets: self.secrets.iter().map(|s| s.name.clone()).collect(),
            guarded: self.guard.protected().to_vec(),
            unguarded: self.unguarded.clone(),
        }
    }
}

/// What a [`SecretBinding`] guards and leaves unguarded: the package it is bound to,
/// the secret names, a description of every guarded value
/// (``wetech_storage_state: cookie `grafana_session` ``) and of every storage-state value
/// left unguarded because it is page state too short to search for
/// (``... localStorage `grafana.navigation.docked` of <origin> (page state, shorter than
/// 8 bytes)``). Never a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BindingReport {
    /// The package identity.
    pub package: PackageId,
    /// The revision.
    pub revision: Revision,
    /// The digest the secrets are bound to.
    pub digest: Digest,
    /// The bound secrets' names.
    pub secrets: Vec<String>,
    /// Every guarded value, described.
    pub guarded: Vec<String>,
    /// Every value left unguarded, described with why.
    pub unguarded: Vec<String>,
}

impl BindingReport {
    /// The report as one JSON line (for an audit stream).
    pub fn to_json_line(&self) -> Result<String, SecretError> {
        serde_json::to_string(self).map_err(|source| {
            SecretError::Json(JsonError::new("binding report".to_owned(), source))
        })
    }
}

/// Environment variables for one tool sandbox. Values stay secret (`Debug` shows names
/// only).
pub struct SandboxEnv {
    vars: Vec<(String, SecretString)>,
}

impl fmt::Debug for SandboxEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxEnv")
            .field(
                "vars",
                &self.vars.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl SandboxEnv {
    /// The variables and their secret values.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &SecretString)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The variable names.
    pub fn names(&self) -> Vec<&str> {
        self.vars.iter().map(|(k, _)| k.as_str()).collect()
    }

    /// Sets the variables on a command that starts the sandbox process.
    pub fn apply(&self, command: &mut std::process::Command) {
        for (k, v) in &self.vars {
            command.env(k, v.expose_secret());
        }
    }
}
