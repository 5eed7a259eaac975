//! The storage-state model: a Playwright `storageState` JSON parsed once (cookies and
//! the localStorage of each origin), its values kept secret (`Debug` shows names only).

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::secrets::SecretError;

/// A browser storage state (Playwright `storageState` JSON), parsed once for every use:
/// the secret binding derives from it the values the output guard protects
/// ([`StorageState::protected_values`]), and the Wetech connector applies its cookies and
/// localStorage to the Grafana origin. Values stay secret: `Debug` shows names only.
#[derive(Deserialize)]
pub struct StorageState {
    #[serde(default)]
    pub(super) cookies: Vec<Cookie>,
    #[serde(default)]
    pub(super) origins: Vec<OriginState>,
}

impl std::fmt::Debug for StorageState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageState")
            .field(
                "cookies",
                &self.cookies.iter().map(|c| &c.name).collect::<Vec<_>>(),
            )
            .field(
                "origins",
                &self.origins.iter().map(|o| &o.origin).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// One stored cookie, its attributes as Playwright writes them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cookie {
    pub(super) name: String,
    pub(super) value: SecretString,
    #[serde(default)]
    pub(super) domain: Option<String>,
    #[serde(default)]
    pub(super) path: Option<String>,
    #[serde(default)]
    pub(super) expires: Option<f64>,
    #[serde(default)]
    pub(super) http_only: bool,
    #[serde(default)]
    pub(super) secure: bool,
    #[serde(default)]
    pub(super) same_site: Option<String>,
}

impl std::fmt::Debug for Cookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The value is never printed.
        f.debug_struct("Cookie")
            .field("name", &self.name)
            .field("domain", &self.domain)
            .field("http_only", &self.http_only)
            .finish_non_exhaustive()
    }
}

impl Cookie {
    /// The cookie's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Its value (secret).
    pub fn value(&self) -> &SecretString {
        &self.value
    }
    /// Its domain as stored (`.example.com` for a domain cookie), if any.
    pub fn domain(&self) -> Option<&str> {
        self.domain.as_deref()
    }
    /// Its path as stored, if any.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }
    /// Its expiry in Unix seconds as stored (`-1` for a session cookie), if any.
    pub fn expires(&self) -> Option<f64> {
        self.expires
    }
    /// Whether it is `httpOnly`.
    pub fn http_only(&self) -> bool {
        self.http_only
    }
    /// Whether it is `Secure`.
    pub fn secure(&self) -> bool {
        self.secure
    }
    /// Its `sameSite` as stored, if any.
    pub fn same_site(&self) -> Option<&str> {
        self.same_site.as_deref()
    }
}

/// The localStorage of one origin.
#[derive(Deserialize)]
pub struct OriginState {
    pub(super) origin: String,
    #[serde(rename = "localStorage", default)]
    pub(super) local_storage: Vec<LocalStorageEntry>,
}

impl std::fmt::Debug for OriginState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Entry values are never printed.
        f.debug_struct("OriginState")
            .field("origin", &self.origin)
            .field(
                "keys",
                &self
                    .local_storage
                    .iter()
                    .map(|e| &e.name)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl OriginState {
    /// The origin as stored.
    pub fn origin(&self) -> &str {
        &self.origin
    }
    /// Its entries: key and (secret) value.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &SecretString)> {
        self.local_storage
            .iter()
            .map(|e| (e.name.as_str(), &e.value))
    }
}

#[derive(Deserialize)]
pub(super) struct LocalStorageEntry {
    pub(super) name: String,
    pub(super) value: SecretString,
}

impl StorageState {
    /// Parses the storage state called `name` (the secret's name in the auth binding).
    /// The error names `name` and a position, never a value.
    pub fn parse(name: &str, json: &SecretString) -> Result<Self, SecretError> {
        serde_json::from_str(json.expose_secret()).map_err(|e| SecretError::InvalidStorageState {
            name: name.to_owned(),
            // serde's message may quote the input (a secret): its kind and position only.
            reason: format!(
                "{} at line {}, column {}",
                match e.classify() {
                    serde_json::error::Category::Io => "unreadable",
                    serde_json::error::Category::Syntax => "not JSON",
                    serde_json::error::Category::Data => "not the storageState shape",
                    serde_json::error::Category::Eof => "JSON ends early",
                },
                e.line(),
                e.column()
            ),
        })
    }

    /// The stored cookies.
    pub fn cookies(&self) -> &[Cookie] {
        &self.cookies
    }

    /// The origins with localStorage.
    pub fn origins(&self) -> &[OriginState] {
        &self.origins
    }
}
