//! The runtime context of a tool sandbox, read in one place: the trusted policy
//! envelope (or where it is), the verification keys, the secrets the auth binding
//! injected, the deployment configuration, the audit log and the turn ledger. A process reads its
//! environment into a [`RuntimeContext`] once ([`RuntimeContext::from_env`]); an embedder
//! builds the same value in memory, without environment variables, and gets the same
//! calls. One rule decides what is missing and what is invalid, for every part: unset or
//! empty is missing; present but unreadable (not UTF-8, not an absolute path, a key ring
//! that does not parse) is invalid.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use evidence_policy::{KeyRing, SignedPolicy, envelope::MAX_ENVELOPE_BYTES};
use evidence_result::PackageId;
use secrecy::{ExposeSecret as _, SecretString};

use crate::context::{
    AUDIT_LOG_ENV, CONTEXT_VARS, POLICY_KEYS_ENV, ReadBy, SIGNING_KEY_ENV, SetBy,
    TRUSTED_CONTEXT_ENV, TURN_LEDGER_CA_ENV, TURN_LEDGER_ENV,
};
use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::ledger::{FileLedger, RedisLedger, TurnLedger};
use crate::mcp::ENVELOPES_PATH;
use crate::secret_file::{SecretFileError, file_variable, secret_of_forms};
use crate::session_store::SessionStore;
use crate::shared_state::{SharedState, is_redis_url};
use crate::tool_kind::Tool;

/// One part of the runtime context as it was supplied.
#[derive(Debug, Clone)]
pub(crate) enum Supplied<T> {
    /// Unset or empty.
    Missing,
    /// Present but unreadable; the reason never holds a secret value.
    Invalid(String),
    /// Present and readable.
    Given(T),
}

/// Applies the one rule to a raw variable: unset or empty is missing, not UTF-8 is
/// invalid.
fn from_raw(raw: Option<OsString>) -> Supplied<String> {
    match raw.map(OsString::into_string) {
        None => Supplied::Missing,
        Some(Ok(text)) => {
            let empty = text.is_empty();
            Supplied::given(text, empty)
        }
        Some(Err(_)) => Supplied::Invalid("it is not UTF-8 text".to_owned()),
    }
}

/// A secret variable `name` of the process environment, or the file its `NAME_FILE`
/// names (read now), under the same rule; both at once is invalid.
fn secret_from_env(name: &str) -> Supplied<SecretString> {
    let value = from_raw(std::env::var_os(name));
    let file = from_raw(std::env::var_os(file_variable(name)));
    // A form that is there but unreadable counts as given: with the other form too, both
    // are refused; alone, it is invalid.
    let given = |form: Supplied<String>| match form {
        Supplied::Missing => Ok(None),
        Supplied::Given(text) => Ok(Some(text)),
        Supplied::Invalid(why) => Err(why),
    };
    let forms = match (given(value), given(file)) {
        (Ok(value), Ok(file)) => secret_of_forms(name, value, file),
        (Err(_), Err(_) | Ok(Some(_))) | (Ok(Some(_)), Err(_)) => Err(SecretFileError::BothForms {
            name: name.to_owned(),
        }
        .to_string()),
        (Err(why), Ok(None)) | (Ok(None), Err(why)) => Err(why),
    };
    match forms {
        Ok(None) => Supplied::Missing,
        Ok(Some(secret)) => Supplied::Given(secret),
        Err(why) => Supplied::Invalid(why),
    }
}

/// A path given in memory, under the same rule (an empty path is missing).
fn given_path(path: PathBuf) -> Supplied<PathBuf> {
    let empty = path.as_os_str().is_empty();
    Supplied::given(path, empty)
}

/// A path the runtime names (the envelope file, the ledger directory): it must be
/// absolute, since the sandbox's working folder is nobody's promise.
fn absolute(path: PathBuf) -> Result<PathBuf, String> {
    if path.is_absolute() {
        Ok(path)
    } else {
        Err("it must name an absolute path".to_owned())
    }
}

/// The envelope file a sandbox reads at each call.
fn envelope_file(path: PathBuf) -> Result<EnvelopeSource, String> {
    absolute(path).map(EnvelopeSource::File)
}

impl<T> Supplied<T> {
    /// The one rule for a value that is there: empty is missing.
    fn given(value: T, empty: bool) -> Self {
        if empty {
            Supplied::Missing
        } else {
            Supplied::Given(value)
        }
    }

    fn and_then<U>(self, read: impl FnOnce(T) -> Result<U, String>) -> Supplied<U> {
        match self {
            Supplied::Missing => Supplied::Missing,
            Supplied::Invalid(why) => Supplied::Invalid(why),
            Supplied::Given(value) => match read(value) {
                Ok(value) => Supplied::Given(value),
                Err(why) => Supplied::Invalid(why),
            },
        }
    }

    /// The value, or the failure of `kind_missing` / `kind_invalid` naming `what`.
    pub(crate) fn require(
        &self,
        what: &str,
        kind_missing: RuntimeFailureKind,
        kind_invalid: RuntimeFailureKind,
    ) -> Result<&T, RuntimeFailure> {
        match self {
            Supplied::Given(value) => Ok(value),
            Supplied::Missing => Err(RuntimeFailure::new(
                kind_missing,
                format!("{what} is not set"),
            )),
            Supplied::Invalid(why) => Err(RuntimeFailure::new(
                kind_invalid,
                format!("{what} cannot be read: {why}"),
            )),
        }
    }

    /// `None` when missing, the value when given, the failure of `kind` when invalid.
    pub(crate) fn optional(
        &self,
        what: &str,
        kind: RuntimeFailureKind,
    ) -> Result<Option<&T>, RuntimeFailure> {
        match self {
            Supplied::Missing => Ok(None),
            other => other.require(what, kind, kind).map(Some),
        }
    }
}

/// Where the trusted policy envelope of a call comes from.
#[derive(Debug, Clone)]
enum EnvelopeSource {
    /// A file the runtime rewrites for each request: read at each call.
    File(PathBuf),
    /// An envelope held in memory.
    Held(SignedPolicy),
    /// Each call's own session (a server over HTTP): the envelope is the current one the
    /// runtime delivered for the session the call presents.
    Sessions,
}

/// Everything a tool sandbox reads besides the model's arguments (see the module
/// documentation). Built from the process environment with [`RuntimeContext::from_env`]
/// or in memory with [`RuntimeContext::new`] and the `with_*` methods; either way a
/// part that is missing or invalid answers each call with its failure result.
///
/// Secrets and configuration are held under the names of the variables that carry them
/// in a sandbox ([`crate::context::CONTEXT_VARS`]); `Debug` never shows a secret.
#[derive(Clone)]
pub struct RuntimeContext {
    envelope: Supplied<EnvelopeSource>,
    keys: Supplied<KeyRing>,
    signing_key_present: bool,
    secrets: BTreeMap<String, Supplied<SecretString>>,
    config: BTreeMap<String, Supplied<String>>,
    audit_log: Option<PathBuf>,
    turn_ledger: Supplied<TurnLedger>,
    /// Set by a long-running server: a Wetech browser is kept between its calls.
    warm_browser: Option<evidence_connectors::BrowserReuse>,
}

impl std::fmt::Debug for RuntimeContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeContext")
            .field("envelope", &self.envelope)
            .field("keys", &matches!(self.keys, Supplied::Given(_)))
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .field("config", &self.config)
            .field("audit_log", &self.audit_log)
            .field("turn_ledger", &self.turn_ledger)
            .finish_non_exhaustive()
    }
}

impl Default for RuntimeContext {
    fn default() -> Self {
        Self::new()
    }
}

impl RuntimeContext {
    /// An empty context: every part missing, the audit record on stderr.
    pub fn new() -> Self {
        RuntimeContext {
            envelope: Supplied::Missing,
            keys: Supplied::Missing,
            signing_key_present: false,
            secrets: BTreeMap::new(),
            config: BTreeMap::new(),
            audit_log: None,
            turn_ledger: Supplied::Missing,
            warm_browser: None,
        }
    }

    /// Reads the process environment once: the variables of [`crate::context::CONTEXT_VARS`] that
    /// `tool` reads. `EVIDENCE_TRUSTED_CONTEXT` must name an absolute path; the file it
    /// names is read at each call, since the runtime rewrites it per request.
    pub fn from_env(tool: Tool) -> Self {
        let read = |name: &str| from_raw(std::env::var_os(name));
        let mut context = RuntimeContext::new();
        context.envelope = read(TRUSTED_CONTEXT_ENV).and_then(|path| envelope_file(path.into()));
        context.keys = read(POLICY_KEYS_ENV).and_then(|text| parse_keys(&text));
        context.signing_key_present = std::env::var_os(SIGNING_KEY_ENV).is_some();
        if let Supplied::Given(path) = read(AUDIT_LOG_ENV) {
            context.audit_log = Some(PathBuf::from(path));
        }
        let ca = read(TURN_LEDGER_CA_ENV);
        context.turn_ledger = secret_from_env(TURN_LEDGER_ENV)
            .and_then(|url| ledger_of(url.expose_secret().to_owned(), &ca));
        let own = CONTEXT_VARS
            .iter()
            .filter(|v| v.read_by == ReadBy::AllTools || v.read_by == tool.reader());
        for var in own.clone().filter(|v| v.set_by == SetBy::Deployment) {
            context.config.insert(var.name.to_owned(), read(var.name));
        }
        context.read_secrets_from_env(
            own.filter(|v| v.set_by == SetBy::AuthBinding)
                .map(|v| v.name),
        );
        context
    }

    /// Reads the secret variables `names` from the process environment (those a
    /// package's auth binding injects), under the same rule.
    /// Each may instead be given as a file, `NAME_FILE` ([`crate::secret_file`]), read
    /// here, once.
    pub(crate) fn read_secrets_from_env<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) {
        for name in names {
            self.secrets.insert(name.to_owned(), secret_from_env(name));
        }
    }

    /// With this envelope for every call (an embedder that serves one request, or that
    /// replaces it with [`RuntimeContext::set_envelope`] per request).
    pub fn with_envelope(mut self, envelope: SignedPolicy) -> Self {
        self.set_envelope(envelope);
        self
    }

    /// Replaces the envelope the next calls use.
    pub fn set_envelope(&mut self, envelope: SignedPolicy) {
        self.envelope = Supplied::Given(EnvelopeSource::Held(envelope));
    }

    /// With the envelope read from `path` at each call (what `EVIDENCE_TRUSTED_CONTEXT`
    /// names in a sandbox); a relative path is invalid.
    pub fn with_envelope_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.envelope = given_path(path.into()).and_then(envelope_file);
        self
    }

    /// With these verification keys (Ed25519 public keys).
    pub fn with_keys(mut self, keys: KeyRing) -> Self {
        self.keys = Supplied::Given(keys);
        self
    }

    /// With the secret a sandbox would find in the variable `name` (for example
    /// `CLINIC_API_TOKEN`). An empty value is missing.
    pub fn with_secret(mut self, name: &str, value: SecretString) -> Self {
        let empty = secrecy::ExposeSecret::expose_secret(&value).is_empty();
        self.secrets
            .insert(name.to_owned(), Supplied::given(value, empty));
        self
    }

    /// With the deployment configuration a sandbox would find in the variable `name`
    /// (for example `CLINIC_BASE_URL`). An empty value is missing.
    pub fn with_config(mut self, name: &str, value: impl Into<String>) -> Self {
        let value: String = value.into();
        let empty = value.is_empty();
        self.config
            .insert(name.to_owned(), Supplied::given(value, empty));
        self
    }

    /// With the audit log file the records are appended to (stderr otherwise).
    pub fn with_audit_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.audit_log = Some(path.into());
        self
    }

    /// With the turn ledger in the directory `dir` (what `EVIDENCE_TURN_LEDGER` names in
    /// a sandbox): every call is then admitted by the turn rules against the calls the
    /// ledger holds for its policy's `policy_id`, whichever process made them. A
    /// relative path is invalid.
    pub fn with_turn_ledger(mut self, dir: impl Into<PathBuf>) -> Self {
        self.turn_ledger = given_path(dir.into()).and_then(ledger_dir);
        self
    }

    /// With the turn ledger in the Redis at `url` (`redis://` or `rediss://`, what
    /// `EVIDENCE_TURN_LEDGER` names in a sandbox of servers on several hosts; the URL may
    /// carry the password and is never shown with it), its certificate checked against
    /// `ca_pem` when given. The Redis must keep what it acknowledges (`appendonly yes`,
    /// `appendfsync always`) and never evict it (`maxmemory-policy noeviction`); a call
    /// finds out when it does not, and runs nothing.
    pub fn with_shared_turn_ledger(mut self, url: SecretString, ca_pem: Option<Vec<u8>>) -> Self {
        self.turn_ledger = match redis_ledger(&url, ca_pem) {
            Ok(ledger) => Supplied::Given(ledger),
            Err(why) => Supplied::Invalid(why),
        };
        self
    }

    /// The turn ledger: `None` when none was given (the runtime then owns the turn),
    /// the failure when the variable is invalid.
    pub(crate) fn turn_ledger(&self) -> Result<Option<&TurnLedger>, RuntimeFailure> {
        self.turn_ledger
            .optional(&self.turn_ledger_what(), RuntimeFailureKind::ContextInvalid)
    }

    /// The turn ledger an MCP server needs: given, and its directory there now.
    pub(crate) fn require_turn_ledger(&self) -> Result<&TurnLedger, RuntimeFailure> {
        let ledger = self.turn_ledger.require(
            &self.turn_ledger_what(),
            RuntimeFailureKind::ContextMissing,
            RuntimeFailureKind::ContextInvalid,
        )?;
        ledger.check().map_err(|e| e.to_failure())?;
        Ok(ledger)
    }

    fn turn_ledger_what(&self) -> String {
        format!("the turn ledger ({TURN_LEDGER_ENV})")
    }

    /// The audit log file, `None` for stderr.
    pub fn audit_log(&self) -> Option<&Path> {
        self.audit_log.as_deref()
    }

    /// The secret carried by the variable `name`, missing when never supplied.
    pub(crate) fn secret(&self, name: &str) -> &Supplied<SecretString> {
        self.secrets.get(name).unwrap_or(&Supplied::Missing)
    }

    /// The configuration carried by the variable `name`, missing when never supplied.
    pub(crate) fn config(&self, name: &str) -> &Supplied<String> {
        self.config.get(name).unwrap_or(&Supplied::Missing)
    }

    /// The verification key ring. A sandbox that was also given the signing key (a
    /// misdeployment: anything running in it could sign policy) runs nothing.
    pub(crate) fn keys(&self) -> Result<&KeyRing, RuntimeFailure> {
        if self.signing_key_present {
            return Err(RuntimeFailure::new(
                RuntimeFailureKind::ContextInvalid,
                format!(
                    "{SIGNING_KEY_ENV} is set in a tool sandbox: the policy signing key must \
                     stay with the signer; give the sandbox only {POLICY_KEYS_ENV}"
                ),
            ));
        }
        self.keys.require(
            &format!("{POLICY_KEYS_ENV} (the verification keys)"),
            RuntimeFailureKind::ContextMissing,
            RuntimeFailureKind::ContextInvalid,
        )
    }

    /// Whether an envelope source is there (not whether its file exists yet: the
    /// runtime writes it per request).
    pub(crate) fn envelope_source(&self) -> Result<(), RuntimeFailure> {
        self.envelope_supplied().map(drop)
    }

    fn envelope_supplied(&self) -> Result<&EnvelopeSource, RuntimeFailure> {
        self.envelope.require(
            &format!("the trusted policy envelope ({TRUSTED_CONTEXT_ENV})"),
            RuntimeFailureKind::ContextMissing,
            RuntimeFailureKind::ContextInvalid,
        )
    }

    /// The envelope of the current call: the one held, or the file read now (at most
    /// 64 KiB). A file that is absent is missing; one that does not parse is invalid.
    pub(crate) fn envelope(&self) -> Result<SignedPolicy, RuntimeFailure> {
        let what = format!("the trusted policy envelope ({TRUSTED_CONTEXT_ENV})");
        match self.envelope_supplied()? {
            EnvelopeSource::Held(envelope) => Ok(envelope.clone()),
            EnvelopeSource::File(path) => read_envelope_file(path)
                .map_err(|(kind, why)| RuntimeFailure::new(kind, format!("{what}: {why}"))),
            EnvelopeSource::Sessions => Err(RuntimeFailure::new(
                RuntimeFailureKind::SessionMissing,
                "over HTTP a call runs under its session's envelope, and this call presented \
                 no session",
            )),
        }
    }

    /// Serves each call under its own session's envelope (a server over HTTP) instead of
    /// an envelope of the context. Refused when the context names an envelope file
    /// (`EVIDENCE_TRUSTED_CONTEXT`): one envelope for every client that reaches the port
    /// is what sessions replace.
    /// A long-running server serves under this context: a Wetech browser is kept
    /// between calls, replaced as `reuse` says.
    pub(crate) fn serve_warm(&mut self, reuse: evidence_connectors::BrowserReuse) {
        self.warm_browser = Some(reuse);
    }

    /// The bounds of the warm browser, when a server serves under this context.
    pub(crate) fn warm_browser(&self) -> Option<evidence_connectors::BrowserReuse> {
        self.warm_browser
    }

    pub(crate) fn serve_sessions(&mut self) -> Result<(), RuntimeFailure> {
        if !matches!(self.envelope, Supplied::Missing) {
            return Err(RuntimeFailure::new(
                RuntimeFailureKind::ContextInvalid,
                format!(
                    "{TRUSTED_CONTEXT_ENV} is set, but a server over HTTP takes no envelope \
                     file: the runtime delivers each session's envelopes to it (POST \
                     {ENVELOPES_PATH}) and every call runs under its session's newest one; \
                     unset {TRUSTED_CONTEXT_ENV}"
                ),
            ));
        }
        self.envelope = Supplied::Given(EnvelopeSource::Sessions);
        Ok(())
    }

    /// The session store of `package` beside the turn ledger (which a server needs).
    pub(crate) fn session_store(
        &self,
        package: &PackageId,
    ) -> Result<SessionStore, RuntimeFailure> {
        Ok(match self.require_turn_ledger()? {
            TurnLedger::File(ledger) => SessionStore::in_dir(ledger.dir(), package),
            TurnLedger::Redis(ledger) => SessionStore::in_redis(ledger.state().clone(), package),
        })
    }
}

fn ledger_dir(path: PathBuf) -> Result<TurnLedger, String> {
    absolute(path).map(|dir| TurnLedger::File(FileLedger::new(dir)))
}

/// The ledger `EVIDENCE_TURN_LEDGER` names: a Redis URL (its CA from
/// `EVIDENCE_TURN_LEDGER_CA`, a PEM file, when set), or a directory. A message never
/// shows the URL's password.
fn ledger_of(text: String, ca: &Supplied<String>) -> Result<TurnLedger, String> {
    if !is_redis_url(&text) {
        return match ca {
            Supplied::Missing => ledger_dir(text.into()),
            _ => Err(format!(
                "{TURN_LEDGER_CA_ENV} is set, but the ledger is a directory, not a rediss:// URL"
            )),
        };
    }
    let ca_pem = match ca {
        Supplied::Missing => None,
        Supplied::Invalid(why) => return Err(format!("{TURN_LEDGER_CA_ENV}: {why}")),
        Supplied::Given(path) => Some(
            std::fs::read(path)
                .map_err(|e| format!("{TURN_LEDGER_CA_ENV} cannot be read ({path}): {e}"))?,
        ),
    };
    redis_ledger(&SecretString::from(text), ca_pem)
}

/// The ledger in the Redis at `url` (its certificate checked against `ca_pem` when
/// given), or why it cannot be used (the password never shown).
fn redis_ledger(url: &SecretString, ca_pem: Option<Vec<u8>>) -> Result<TurnLedger, String> {
    SharedState::open(url, ca_pem)
        .map(|state| TurnLedger::Redis(RedisLedger::new(state)))
        .map_err(|e| e.to_string())
}

fn parse_keys(text: &str) -> Result<KeyRing, String> {
    text.parse::<KeyRing>().map_err(|e| e.to_string())
}

fn read_envelope_file(path: &Path) -> Result<SignedPolicy, (RuntimeFailureKind, String)> {
    let missing = |e: std::io::Error| {
        let kind = if e.kind() == std::io::ErrorKind::NotFound {
            RuntimeFailureKind::ContextMissing
        } else {
            RuntimeFailureKind::ContextInvalid
        };
        (kind, format!("cannot read {}: {e}", path.display()))
    };
    let file = std::fs::File::open(path).map_err(missing)?;
    let mut text = String::new();
    file.take(MAX_ENVELOPE_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| {
            (
                RuntimeFailureKind::ContextInvalid,
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
    if text.trim().is_empty() {
        return Err((
            RuntimeFailureKind::ContextMissing,
            format!("{} is empty", path.display()),
        ));
    }
    SignedPolicy::from_json(&text).map_err(|e| (RuntimeFailureKind::ContextInvalid, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(r: Result<impl Sized, RuntimeFailure>) -> RuntimeFailureKind {
        match r {
            Ok(_) => panic!("expected a failure"),
            Err(f) => f.kind,
        }
    }

    #[test]
    fn one_rule_for_missing_and_invalid() {
        assert!(matches!(from_raw(None), Supplied::Missing));
        assert!(matches!(from_raw(Some(OsString::new())), Supplied::Missing));
        let context = RuntimeContext::new();
        assert_eq!(kind(context.keys()), RuntimeFailureKind::ContextMissing);
        assert_eq!(kind(context.envelope()), RuntimeFailureKind::ContextMissing);
        let context = RuntimeContext::new().with_envelope_file("");
        assert_eq!(kind(context.envelope()), RuntimeFailureKind::ContextMissing);
        let context = RuntimeContext::new().with_envelope_file("ctx.json");
        assert_eq!(kind(context.envelope()), RuntimeFailureKind::ContextInvalid);
        let mut context = RuntimeContext::new();
        context.keys =
            Supplied::<String>::Given("not a ring".to_owned()).and_then(|t| parse_keys(&t));
        assert_eq!(kind(context.keys()), RuntimeFailureKind::ContextInvalid);
        context.keys = from_raw(Some(OsString::new())).and_then(|t| parse_keys(&t));
        assert_eq!(kind(context.keys()), RuntimeFailureKind::ContextMissing);
        let context = RuntimeContext::new().with_config("CLINIC_BASE_URL", "");
        assert!(matches!(
            context.config("CLINIC_BASE_URL"),
            Supplied::Missing
        ));
    }

    #[test]
    fn envelope_files_missing_empty_malformed_oversized() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctx.json");
        let context = RuntimeContext::new().with_envelope_file(&path);
        assert_eq!(kind(context.envelope()), RuntimeFailureKind::ContextMissing);
        std::fs::write(&path, "").unwrap();
        assert_eq!(kind(context.envelope()), RuntimeFailureKind::ContextMissing);
        std::fs::write(&path, "{").unwrap();
        assert_eq!(kind(context.envelope()), RuntimeFailureKind::ContextInvalid);
        std::fs::write(&path, vec![b' '; MAX_ENVELOPE_BYTES + 10]).unwrap();
        assert!(context.envelope().is_err());
    }

    #[test]
    fn debug_shows_no_secret() {
        let context = RuntimeContext::new()
            .with_secret("CLINIC_API_TOKEN", SecretString::from("s3cret-value"));
        assert!(!format!("{context:?}").contains("s3cret-value"));
    }
}
