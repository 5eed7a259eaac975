//! Package manifests and their normalization.
//!
//! One concern per file: `model` is what a manifest says; `normalize` checks it and
//! gives the normalized manifest; `paths`, `host`, `env` and `schema` hold the rules of
//! the file list, the network allowlist, the auth binding's variables and the argument
//! schema.

mod env;
mod error;
mod host;
mod model;
mod normalize;
mod paths;
mod schema;

pub use env::RUNTIME_ENV_PREFIX;
pub use error::ManifestError;
pub use model::{
    AuthBinding, Limits, MANIFEST_FILE, MAX_OUTPUT_BYTES_LIMIT, MIN_SECRET_BYTES, Manifest,
    NetworkPolicy, NormalizedManifest, PolicyDelivery, SecretKind, SecretSpec, Template,
    known_identities,
};
pub(crate) use schema::check_argument_schema;
