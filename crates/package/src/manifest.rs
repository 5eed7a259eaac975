//! Package manifests and their normalization.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use evidence_result::{PackageId, PolicySource, Provider, SAME_TURN_CORRECTION_RULE};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use evidence_policy::{MAX_BATCH, ScopeBinding};

use crate::{PackageError, Revision};

/// The file name of a package's manifest inside its folder.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The prefix of the tool sandbox's runtime-context variables (policy envelope,
/// verification keys, audit log; the table is in `evidence-tool`). Reserved: no secret
/// of an auth binding may be injected under a name that starts with it.
pub const RUNTIME_ENV_PREFIX: &str = "EVIDENCE_";

/// Smallest secret value (in bytes) the output guard can scan without false positives.
pub const MIN_SECRET_BYTES: usize = 8;

/// The sandbox template a package runs in.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Template {
    /// The plain tool sandbox.
    Default,
    /// The browser-capable tool sandbox (Chromium available).
    Browser,
}

/// Network egress of a package's tool sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum NetworkPolicy {
    /// Egress only to the exact hosts listed (`host` or `host:port`).
    Restricted {
        /// Exact hosts, lower-cased, sorted and de-duplicated by normalization.
        hosts: Vec<String>,
    },
    /// Unrestricted internet: never accepted for a Managed Tool package.
    Unrestricted,
}

/// What a secret holds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SecretKind {
    /// An opaque value (token, password, key).
    Value,
    /// A browser storage state in Playwright format; its cookie and localStorage values are
    /// guarded one by one.
    BrowserStorageState,
}

/// One secret of a package's auth binding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretSpec {
    /// The secret's name, unique in the whole catalog (`clinic_api_token`).
    pub name: String,
    /// The environment variable it is injected as (`CLINIC_API_TOKEN`).
    pub env: String,
    /// What it holds.
    pub kind: SecretKind,
}

/// The secrets a package receives, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthBinding {
    /// The package's secrets, sorted by name by normalization.
    pub secrets: Vec<SecretSpec>,
}

/// How trusted policy reaches the tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum PolicyDelivery {
    /// A signed envelope per request, bound to the package digest, in a file the runtime
    /// names through `EVIDENCE_TRUSTED_CONTEXT` (read by `evidence_tool::RuntimeContext`).
    PerRequestEnvelope,
    /// An explicit canary: a fixed policy shipped as one of the package's files.
    StaticCanary {
        /// The package file holding the canary policy.
        file: String,
    },
}

impl PolicyDelivery {
    /// The result contract's name for this delivery.
    pub fn policy_source(&self) -> PolicySource {
        match self {
            PolicyDelivery::PerRequestEnvelope => PolicySource::TrustedEnvelope,
            PolicyDelivery::StaticCanary { .. } => PolicySource::StaticCanary,
        }
    }
}

/// Execution limits the runtime enforces for the package.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock limit per call, in milliseconds (1..=600000).
    pub timeout_ms: u64,
    /// Calls running at once (1..=64).
    pub concurrency: u32,
    /// Largest tool output in bytes (1..=64 MiB); the output guard refuses more.
    pub max_output_bytes: u64,
    /// Largest batch per call (1 for the one-operation Manus and Wetech packages, at most
    /// `evidence_policy::MAX_BATCH` for Clinic).
    pub max_batch: u32,
}

/// Largest accepted `max_output_bytes`.
pub const MAX_OUTPUT_BYTES_LIMIT: u64 = 64 * 1024 * 1024;

/// A package revision's manifest, as written.
///
/// [`Manifest::normalize`] checks it and gives the [`NormalizedManifest`] that the
/// package digest covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// One of the three identities.
    pub identity: PackageId,
    /// The revision (`v3`).
    pub revision: Revision,
    /// The provider this identity runs (fixed per identity; never a tool argument).
    pub provider: Provider,
    /// The sandbox template.
    pub template: Template,
    /// The executable file the sandbox runs.
    pub entrypoint: String,
    /// Every file of the package, as relative `/`-separated paths.
    pub files: Vec<String>,
    /// Network egress.
    pub network: NetworkPolicy,
    /// Secrets and the environment variables they are injected as.
    pub auth: AuthBinding,
    /// How trusted policy is delivered.
    pub policy_delivery: PolicyDelivery,
    /// Selector labels bound to policy values (`evidence_policy::ScopeBinding`), each for
    /// every cluster tier or for the tiers it lists; every listed tier must carry the
    /// value (`keyspace_id` for Starter and Essential, `parent_id` for Premium).
    #[serde(default)]
    pub scope_labels: Vec<ScopeBinding>,
    /// Execution limits.
    pub limits: Limits,
    /// The package's own audit stream.
    pub audit_stream: String,
    /// The Agent-visible argument schema (JSON Schema) with the tool description, as
    /// [`crate::argument_schema`] generates it from `evidence-policy`'s argument types.
    pub arguments: Value,
}

/// A manifest that passed [`Manifest::normalize`]: hosts lower-cased, sorted and
/// de-duplicated, files, secrets and scope labels sorted, every rule checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct NormalizedManifest(Manifest);

impl NormalizedManifest {
    /// The normalized manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.0
    }

    /// RFC 8785 canonical JSON of the normalized manifest: what the package digest covers.
    pub fn canonical_json(&self) -> Result<String, PackageError> {
        evidence_result::canonical_json(&self.0).map_err(|e| PackageError::Canonical(e.to_string()))
    }
}

impl std::ops::Deref for NormalizedManifest {
    type Target = Manifest;
    fn deref(&self) -> &Manifest {
        &self.0
    }
}

/// The three Managed Tool identities and the provider each one runs.
pub fn known_identities() -> [(PackageId, Provider); 3] {
    [
        (PackageId::clinic(), Provider::Clinic),
        (PackageId::manus(), Provider::Manus),
        (PackageId::wetech(), Provider::Wetech),
    ]
}

fn provider_of(identity: &PackageId) -> Option<Provider> {
    known_identities()
        .into_iter()
        .find(|(id, _)| id == identity)
        .map(|(_, p)| p)
}

impl Manifest {
    /// Parses a manifest from JSON.
    pub fn from_json(json: &str) -> Result<Self, PackageError> {
        serde_json::from_str(json).map_err(|source| PackageError::Json {
            what: "manifest".to_owned(),
            source,
        })
    }

    /// Checks every rule and returns the normalized manifest.
    ///
    /// Refused, each with a typed error naming the field: an unknown identity or a
    /// provider that does not belong to it; Wetech outside the browser template; an
    /// `unrestricted` network, an empty host list, a wildcard host, a host with a scheme,
    /// path or CIDR range; an absolute path, path traversal, duplicate or case-colliding
    /// paths; an entrypoint that is not listed; an empty auth binding, duplicate secret
    /// names or variables, reserved variables; a tool description (the schema's
    /// `description`) without the shared correction rule; limits out of range; an argument schema with a `provider`
    /// property anywhere or an object open to unnamed properties.
    pub fn normalize(&self) -> Result<NormalizedManifest, PackageError> {
        let mut m = self.clone();
        let provider = provider_of(&m.identity)
            .ok_or_else(|| PackageError::UnknownIdentity(m.identity.clone()))?;
        if provider != m.provider {
            return Err(PackageError::ProviderMismatch {
                identity: m.identity.clone(),
                expected: provider.as_str(),
                found: m.provider.as_str(),
            });
        }
        if provider == Provider::Wetech && m.template != Template::Browser {
            return Err(PackageError::TemplateMismatch(
                "the Wetech package runs Chromium and needs the browser template".to_owned(),
            ));
        }
        if m.auth
            .secrets
            .iter()
            .any(|s| s.kind == SecretKind::BrowserStorageState)
            && m.template != Template::Browser
        {
            return Err(PackageError::TemplateMismatch(
                "a browser storage state secret needs the browser template".to_owned(),
            ));
        }
        m.files = normalize_files(&m.files)?;
        check_path("entrypoint", &m.entrypoint)?;
        if !m.files.contains(&m.entrypoint) {
            return Err(PackageError::invalid(
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

fn check_description(schema: &Value) -> Result<(), PackageError> {
    let description = schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if description.trim().is_empty() || description.len() > 8192 {
        return Err(PackageError::invalid(
            "arguments.description",
            "the tool description is 1 to 8192 bytes of text",
        ));
    }
    if !description.contains(SAME_TURN_CORRECTION_RULE) {
        return Err(PackageError::invalid(
            "arguments.description",
            "the tool description carries the shared same-turn correction rule",
        ));
    }
    Ok(())
}

/// Checks one package-relative path: relative, `/`-separated, no `.` or `..` components,
/// ASCII letters, digits and `._-+` only.
fn check_path(field: &str, path: &str) -> Result<(), PackageError> {
    let invalid = |reason| PackageError::InvalidPath {
        field: field.to_owned(),
        path: path.to_owned(),
        reason,
    };
    if path.is_empty() {
        return Err(invalid("empty path"));
    }
    let bytes = path.as_bytes();
    if bytes[0] == b'/'
        || bytes[0] == b'\\'
        || (bytes.len() >= 2 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic())
    {
        return Err(PackageError::AbsolutePath {
            field: field.to_owned(),
            path: path.to_owned(),
        });
    }
    if path.split(['/', '\\']).any(|c| c == "..") {
        return Err(PackageError::PathTraversal {
            field: field.to_owned(),
            path: path.to_owned(),
        });
    }
    if path.len() > 255 {
        return Err(invalid("longer than 255 bytes"));
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+' | b'/'))
    {
        return Err(invalid(
            "use ASCII letters, digits, '.', '_', '-', '+' and '/' only",
        ));
    }
    for component in path.split('/') {
        if component.is_empty() {
            return Err(invalid("empty path component"));
        }
        if component == "." {
            return Err(invalid("'.' component"));
        }
    }
    if path.eq_ignore_ascii_case(MANIFEST_FILE) {
        return Err(invalid("reserved for the manifest"));
    }
    Ok(())
}

fn normalize_files(files: &[String]) -> Result<Vec<String>, PackageError> {
    if files.is_empty() {
        return Err(PackageError::invalid(
            "files",
            "a package has at least one file",
        ));
    }
    if files.len() > 1024 {
        return Err(PackageError::invalid("files", "more than 1024 files"));
    }
    let mut folded: BTreeMap<String, (usize, &str)> = BTreeMap::new();
    for (i, path) in files.iter().enumerate() {
        let field = format!("files[{i}]");
        check_path(&field, path)?;
        let lower = path.to_ascii_lowercase();
        if let Some((_, other)) = folded.get(&lower) {
            if *other == path.as_str() {
                return Err(PackageError::DuplicatePath {
                    field,
                    path: path.clone(),
                });
            }
            return Err(PackageError::CaseCollidingPath {
                field,
                path: path.clone(),
                other: (*other).to_owned(),
            });
        }
        folded.insert(lower, (i, path));
    }
    // A path may not also be a folder of another path (case ignored).
    let mut folders: BTreeMap<String, &str> = BTreeMap::new();
    for (lower, (_, path)) in &folded {
        let mut end = 0;
        while let Some(pos) = lower[end..].find('/') {
            end += pos;
            folders.entry(lower[..end].to_owned()).or_insert(path);
            end += 1;
        }
    }
    for (lower, (i, path)) in &folded {
        if let Some(below) = folders.get(lower) {
            return Err(PackageError::PathConflict {
                field: format!("files[{i}]"),
                path: (*path).to_owned(),
                other: (*below).to_owned(),
            });
        }
    }
    let mut out: Vec<String> = files.to_vec();
    out.sort();
    Ok(out)
}

fn normalize_network(network: &NetworkPolicy) -> Result<NetworkPolicy, PackageError> {
    let hosts = match network {
        NetworkPolicy::Unrestricted => return Err(PackageError::UnrestrictedNetwork),
        NetworkPolicy::Restricted { hosts } => hosts,
    };
    if hosts.is_empty() {
        return Err(PackageError::EmptyHostList);
    }
    let mut out = BTreeSet::new();
    for (i, host) in hosts.iter().enumerate() {
        out.insert(normalize_host(&format!("network.hosts[{i}]"), host)?);
    }
    Ok(NetworkPolicy::Restricted {
        hosts: out.into_iter().collect(),
    })
}

/// Lower-cases and checks one allowlist host: a DNS name, an IPv4 address or a bracketed
/// IPv6 address, with an optional port.
pub(crate) fn normalize_host(field: &str, raw: &str) -> Result<String, PackageError> {
    let host = raw.to_ascii_lowercase();
    let invalid = |reason| PackageError::InvalidHost {
        field: field.to_owned(),
        host: raw.to_owned(),
        reason,
    };
    if host.is_empty() {
        return Err(invalid("empty host"));
    }
    if host.contains("://") {
        return Err(PackageError::HostWithScheme {
            field: field.to_owned(),
            host: raw.to_owned(),
        });
    }
    if host.contains('*') || host.starts_with('.') {
        return Err(PackageError::WildcardHost {
            field: field.to_owned(),
            host: raw.to_owned(),
        });
    }
    if let Some((addr, bits)) = host.split_once('/') {
        let addr = addr.trim_start_matches('[').trim_end_matches(']');
        if addr.parse::<IpAddr>().is_ok()
            && !bits.is_empty()
            && bits.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(PackageError::HostIsCidr {
                field: field.to_owned(),
                host: raw.to_owned(),
            });
        }
        return Err(PackageError::HostWithPath {
            field: field.to_owned(),
            host: raw.to_owned(),
        });
    }
    if host.contains(['?', '#']) {
        return Err(PackageError::HostWithPath {
            field: field.to_owned(),
            host: raw.to_owned(),
        });
    }
    if host.contains('@') {
        return Err(invalid("user information is not part of a host"));
    }
    if !host.is_ascii() {
        return Err(invalid("use the ASCII (punycode) form"));
    }
    if host
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(invalid("whitespace or control character"));
    }
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (inner, after) = rest
            .split_once(']')
            .ok_or_else(|| invalid("unclosed '['"))?;
        if inner.parse::<Ipv6Addr>().is_err() {
            return Err(invalid("not an IPv6 address"));
        }
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| invalid("junk after ']'"))?,
            ),
        };
        return check_port(port, &invalid).map(|()| host);
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host.as_str(), None),
        }
    };
    if name.contains(':') {
        return Err(invalid("write IPv6 addresses in brackets"));
    }
    check_port(port, &invalid)?;
    if name.parse::<Ipv4Addr>().is_ok() {
        return Ok(host);
    }
    if name.len() > 253 {
        return Err(invalid("longer than 253 bytes"));
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        if label.is_empty() || label.len() > 63 {
            return Err(invalid("each dot-separated label has 1 to 63 characters"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(invalid("a label neither starts nor ends with '-'"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(invalid("labels use letters, digits and '-' only"));
        }
    }
    if labels.iter().all(|l| l.bytes().all(|b| b.is_ascii_digit())) {
        return Err(invalid("not a valid IPv4 address"));
    }
    Ok(host)
}

fn check_port(
    port: Option<&str>,
    invalid: &dyn Fn(&'static str) -> PackageError,
) -> Result<(), PackageError> {
    if let Some(port) = port {
        let ok = !port.is_empty()
            && port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u16>().is_ok_and(|p| p > 0);
        if !ok {
            return Err(invalid("the port is a number from 1 to 65535"));
        }
    }
    Ok(())
}

fn check_id(field: &str, value: &str) -> Result<(), PackageError> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value.as_bytes()[0].is_ascii_lowercase()
        && value.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(PackageError::invalid(
            field,
            format!(
                "{value:?}: use 1-64 lower-case letters, digits, '_', '.', '-', starting with a letter"
            ),
        ))
    }
}

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

fn check_env(field: &str, env: &str) -> Result<(), PackageError> {
    let ok = !env.is_empty()
        && env.len() <= 128
        && env.as_bytes()[0].is_ascii_uppercase()
        && env
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        return Err(PackageError::invalid(
            field,
            format!("{env:?}: use upper-case letters, digits and '_', starting with a letter"),
        ));
    }
    if is_reserved_env(env) {
        return Err(PackageError::invalid(field, format!("{env:?} is reserved")));
    }
    Ok(())
}

fn normalize_auth(auth: &AuthBinding) -> Result<AuthBinding, PackageError> {
    if auth.secrets.is_empty() {
        return Err(PackageError::invalid(
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
            return Err(PackageError::invalid(
                name_field,
                format!("{:?}: use 1-64 lower-case letters, digits and '_'", s.name),
            ));
        }
        if !names.insert(s.name.as_str()) {
            return Err(PackageError::invalid(
                name_field,
                format!("secret `{}` is listed twice", s.name),
            ));
        }
        let env_field = format!("auth.secrets[{i}].env");
        check_env(&env_field, &s.env)?;
        if !envs.insert(s.env.as_str()) {
            return Err(PackageError::invalid(
                env_field,
                format!("variable {:?} is used twice", s.env),
            ));
        }
    }
    let mut secrets = auth.secrets.clone();
    secrets.sort();
    Ok(AuthBinding { secrets })
}

fn check_policy_delivery(delivery: &PolicyDelivery, files: &[String]) -> Result<(), PackageError> {
    match delivery {
        PolicyDelivery::PerRequestEnvelope => {}
        PolicyDelivery::StaticCanary { file } => {
            check_path("policy_delivery.file", file)?;
            if !files.contains(file) {
                return Err(PackageError::invalid(
                    "policy_delivery.file",
                    format!("{file:?} is not in the file list"),
                ));
            }
        }
    }
    Ok(())
}

fn normalize_scope_labels(labels: &[ScopeBinding]) -> Result<Vec<ScopeBinding>, PackageError> {
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
            return Err(PackageError::invalid(
                field,
                format!("{label:?} is not a Prometheus label name"),
            ));
        }
        if !seen.insert(label.to_owned()) {
            return Err(PackageError::invalid(
                field,
                format!("label {label:?} is bound twice"),
            ));
        }
        binding.check_tiers().map_err(|e| {
            PackageError::invalid(format!("scope_labels[{i}].tiers"), e.to_string())
        })?;
    }
    let mut out: Vec<ScopeBinding> = labels
        .iter()
        .map(|b| b.clone().for_tiers(b.tiers.iter().copied()))
        .collect();
    out.sort_by(|a, b| a.label.cmp(&b.label));
    Ok(out)
}

fn check_limits(limits: &Limits, provider: Provider) -> Result<(), PackageError> {
    if !(1..=600_000).contains(&limits.timeout_ms) {
        return Err(PackageError::invalid(
            "limits.timeout_ms",
            "must be 1 to 600000",
        ));
    }
    if !(1..=64).contains(&limits.concurrency) {
        return Err(PackageError::invalid(
            "limits.concurrency",
            "must be 1 to 64",
        ));
    }
    if !(1..=MAX_OUTPUT_BYTES_LIMIT).contains(&limits.max_output_bytes) {
        return Err(PackageError::invalid(
            "limits.max_output_bytes",
            format!("must be 1 to {MAX_OUTPUT_BYTES_LIMIT}"),
        ));
    }
    let max_batch = match provider {
        Provider::Clinic => MAX_BATCH,
        Provider::Manus | Provider::Wetech => 1,
    };
    if !(1..=max_batch).contains(&limits.max_batch) {
        return Err(PackageError::invalid(
            "limits.max_batch",
            format!("must be 1 to {max_batch} for the {provider} package"),
        ));
    }
    Ok(())
}

/// Keywords whose value is a map of names to subschemas.
const SCHEMA_MAPS: [&str; 5] = [
    "properties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "patternProperties",
];
/// Keywords whose value is one subschema.
const SCHEMA_ONE: [&str; 10] = [
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
];
/// Keywords whose value is a list of subschemas.
const SCHEMA_LISTS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];

fn is_provider_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("provider")
}

/// Refuses an argument schema that names a `provider` property anywhere (nested too, in
/// definitions, in `required`), that leaves an object open to unnamed properties, or that
/// refers to an external schema.
pub(crate) fn check_argument_schema(schema: &Value) -> Result<(), PackageError> {
    if !schema.is_object() {
        return Err(PackageError::invalid(
            "arguments",
            "must be a JSON Schema object",
        ));
    }
    check_subschema(schema, "arguments", 0)
}

fn check_subschema(schema: &Value, at: &str, depth: usize) -> Result<(), PackageError> {
    if depth > 64 {
        return Err(PackageError::invalid(
            at,
            "schema nests deeper than 64 levels",
        ));
    }
    let map = match schema {
        Value::Object(map) => map,
        Value::Bool(_) => return Ok(()),
        _ => return Err(PackageError::invalid(at, "not a JSON Schema")),
    };
    if let Some(props) = map.get("properties") {
        let props = props
            .as_object()
            .ok_or_else(|| PackageError::invalid(format!("{at}.properties"), "not an object"))?;
        if let Some(name) = props.keys().find(|k| is_provider_name(k)) {
            return Err(PackageError::ProviderArgument {
                field: format!("{at}.properties.{name}"),
            });
        }
    }
    if let Some(Value::Array(required)) = map.get("required")
        && required
            .iter()
            .any(|r| r.as_str().is_some_and(is_provider_name))
    {
        return Err(PackageError::ProviderArgument {
            field: format!("{at}.required"),
        });
    }
    let typed_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    };
    if map.contains_key("patternProperties")
        || ((typed_object || map.contains_key("properties"))
            && map.get("additionalProperties") != Some(&Value::Bool(false)))
    {
        return Err(PackageError::OpenArgumentObject {
            field: at.to_owned(),
        });
    }
    if let Some(reference) = map.get("$ref")
        && !reference.as_str().is_some_and(|r| r.starts_with("#/"))
    {
        return Err(PackageError::invalid(
            format!("{at}.$ref"),
            "only references inside the schema are allowed",
        ));
    }
    for key in SCHEMA_MAPS {
        if let Some(Value::Object(children)) = map.get(key) {
            for (name, child) in children {
                check_subschema(child, &format!("{at}.{key}.{name}"), depth + 1)?;
            }
        }
    }
    for key in SCHEMA_ONE {
        match map.get(key) {
            Some(Value::Array(children)) => {
                for (i, child) in children.iter().enumerate() {
                    check_subschema(child, &format!("{at}.{key}[{i}]"), depth + 1)?;
                }
            }
            Some(child) => check_subschema(child, &format!("{at}.{key}"), depth + 1)?,
            None => {}
        }
    }
    for key in SCHEMA_LISTS {
        if let Some(Value::Array(children)) = map.get(key) {
            for (i, child) in children.iter().enumerate() {
                check_subschema(child, &format!("{at}.{key}[{i}]"), depth + 1)?;
            }
        }
    }
    Ok(())
}
