//! The manifest checker: [`Manifest::normalize`] runs every rule in order and gives the
//! normalized manifest the package digest covers. The rules of one part each live beside
//! it: paths in `paths`, hosts in `host`, variables in `env`, the argument schema in
//! `schema`; the rest (identity, template, auth, policy delivery, scope labels, limits,
//! description) is here.

use std::collections::BTreeSet;

use evidence_result::{Provider, SAME_TURN_CORRECTION_RULE};
use serde_json::Value;

use evidence_policy::{ScopeBinding, policy::MAX_BATCH};

use super::env::check_env;
use super::error::ManifestError;
use super::host::normalize_network;
use super::model::{
    AuthBinding, Limits, MAX_OUTPUT_BYTES_LIMIT, Manifest, NormalizedManifest, PolicyDelivery,
    SecretKind, Template, provider_of,
};
use super::paths::{check_path, normalize_files};
use super::schema::check_argument_schema;

impl Manifest {
    /// Checks every rule and returns the normalized manifest.
    ///
    /// Refused, each with a typed error naming the field: an unknown identity or a
    /// provider that does not belong to it; Wetech outside the browser template; an
    /// `unrestricted` network, an empty host list, a wildcard host, a host with a scheme,
    /// path or CIDR range; an absolute path, path traversal, duplicate or case-colliding
    /// paths; an entrypoint that is not listed; an empty auth binding, duplicate secret
    /// names or variables, reserved variables; a tool description (the schema's
    /// `description`) without the shared correction rule; limits out of range; an
    /// argument schema with a `provider` property anywhere or an object open to unnamed
    /// properties.
    pub fn normalize(&self) -> Result<NormalizedManifest, ManifestError> {
        let mut m = self.clone();
        let provider = provider_of(&m.identity)
            .ok_or_else(|| ManifestError::UnknownIdentity(m.identity.clone()))?;
        if provider != m.provider {
            return Err(ManifestError::ProviderMismatch {
                identity: m.identity.clone(),
                expected: provider.as_str(),
                found: m.provider.as_str(),
            });
        }
        if provider == Provider::Wetech && m.template != Template::Browser {
            return Err(ManifestError::TemplateMismatch(
                "the Wetech package runs Chromium and needs the browser template".to_owned(),
            ));
        }
        if m.auth
            .secrets
            .iter()
            .any(|s| s.kind == SecretKind::BrowserStorageState)
            && m.template != Template::Browser
        {
            return Err(ManifestError::TemplateMismatch(
                "a browser storage state secret needs the browser template".to_owned(),
            ));
        }
        m.files = normalize_files(&m.files)?;
        check_path("entrypoint", &m.entrypoint)?;
        if !m.files.contains(&m.entrypoint) {
            return Err(ManifestError::invalid(
                "entrypoint",
                format!("{:?} is not in the file list", m.entrypoint),
            ));
        }
        m.network = normalize_network(&m.network)?;
        m.auth = normalize_auth(&m.auth)?;
        check_policy_delivery(&m.policy_delivery, &m.files)?;
        m.scope_labels = normalize_scope_labels(&m.scope_labels)?;
        check_limits(&m.limits, provider)?;
        check_id("audit_stream", &m.audit_stream)?;
        check_argument_schema(&m.arguments)?;
        check_description(&m.arguments)?;
        Ok(NormalizedManifest(m))
    }
}

fn check_description(schema: &Value) -> Result<(), ManifestError> {
    let description = schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if description.trim().is_empty() || description.len() > 8192 {
        return Err(ManifestError::invalid(
            "arguments.description",
            "the tool description is 1 to 8192 bytes of text",
        ));
    }
    if !description.contains(SAME_TURN_CORRECTION_RULE) {
        return Err(ManifestError::invalid(
            "arguments.description",
            "the tool description carries the shared same-turn correction rule",
        ));
    }
    Ok(())
}

fn check_id(field: &str, value: &str) -> Result<(), ManifestError> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value.as_bytes()[0].is_ascii_lowercase()
        && value.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(ManifestError::invalid(
            field,
            format!(
                "{value:?}: use 1-64 lower-case letters, digits, '_', '.', '-', starting with a letter"
            ),
        ))
    }
}

fn normalize_auth(auth: &AuthBinding) -> Result<AuthBinding, ManifestError> {
    if auth.secrets.is_empty() {
        return Err(ManifestError::invalid(
            "auth.secrets",
            "each package has its own auth binding with at least one secret",
        ));
    }
    let mut names = BTreeSet::new();
    let mut envs = BTreeSet::new();
    for (i, s) in auth.secrets.iter().enumerate() {
        let name_field = format!("auth.secrets[{i}].name");
        let ok = !s.name.is_empty()
            && s.name.len() <= 64
            && s.name.as_bytes()[0].is_ascii_lowercase()
            && s.name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !ok {
            return Err(ManifestError::invalid(
                name_field,
                format!("{:?}: use 1-64 lower-case letters, digits and '_'", s.name),
            ));
        }
        if !names.insert(s.name.as_str()) {
            return Err(ManifestError::invalid(
                name_field,
                format!("secret `{}` is listed twice", s.name),
            ));
        }
        let env_field = format!("auth.secrets[{i}].env");
        check_env(&env_field, &s.env)?;
        if !envs.insert(s.env.as_str()) {
            return Err(ManifestError::invalid(
                env_field,
                format!("variable {:?} is used twice", s.env),
            ));
        }
    }
    let mut secrets = auth.secrets.clone();
    secrets.sort();
    Ok(AuthBinding { secrets })
}

fn check_policy_delivery(delivery: &PolicyDelivery, files: &[String]) -> Result<(), ManifestError> {
    match delivery {
        PolicyDelivery::PerRequestEnvelope => {}
        PolicyDelivery::StaticCanary { file } => {
            check_path("policy_delivery.file", file)?;
            if !files.contains(file) {
                return Err(ManifestError::invalid(
                    "policy_delivery.file",
                    format!("{file:?} is not in the file list"),
                ));
            }
        }
    }
    Ok(())
}

fn normalize_scope_labels(labels: &[ScopeBinding]) -> Result<Vec<ScopeBinding>, ManifestError> {
    let mut seen = BTreeSet::new();
    for (i, binding) in labels.iter().enumerate() {
        let label = binding.label.as_str();
        let field = format!("scope_labels[{i}].label");
        let ok = !label.is_empty()
            && label.len() <= 128
            && (label.as_bytes()[0].is_ascii_alphabetic() || label.as_bytes()[0] == b'_')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !label.starts_with("__");
        if !ok {
            return Err(ManifestError::invalid(
                field,
                format!("{label:?} is not a Prometheus label name"),
            ));
        }
        if !seen.insert(label.to_owned()) {
            return Err(ManifestError::invalid(
                field,
                format!("label {label:?} is bound twice"),
            ));
        }
        binding.check_tiers().map_err(|e| {
            ManifestError::invalid(format!("scope_labels[{i}].tiers"), e.to_string())
        })?;
    }
    let mut out: Vec<ScopeBinding> = labels
        .iter()
        .map(|b| b.clone().for_tiers(b.tiers.iter().copied()))
        .collect();
    out.sort_by(|a, b| a.label.cmp(&b.label));
    Ok(out)
}

fn check_limits(limits: &Limits, provider: Provider) -> Result<(), ManifestError> {
    if !(1..=600_000).contains(&limits.timeout_ms) {
        return Err(ManifestError::invalid(
            "limits.timeout_ms",
            "must be 1 to 600000",
        ));
    }
    if !(1..=64).contains(&limits.concurrency) {
        return Err(ManifestError::invalid(
            "limits.concurrency",
            "must be 1 to 64",
        ));
    }
    if !(1..=MAX_OUTPUT_BYTES_LIMIT).contains(&limits.max_output_bytes) {
        return Err(ManifestError::invalid(
            "limits.max_output_bytes",
            format!("must be 1 to {MAX_OUTPUT_BYTES_LIMIT}"),
        ));
    }
    let max_batch = match provider {
        Provider::Clinic => MAX_BATCH,
        Provider::Manus | Provider::Wetech => 1,
    };
    if !(1..=max_batch).contains(&limits.max_batch) {
        return Err(ManifestError::invalid(
            "limits.max_batch",
            format!("must be 1 to {max_batch} for the {provider} package"),
        ));
    }
    Ok(())
}
