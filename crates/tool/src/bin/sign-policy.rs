//! The Auto-oncall side of trusted policy delivery: sign one per-request policy for one
//! exact package digest.
//!
//! ```text
//! sign-policy (--package-dir DIR | --package-digest sha256:HEX) [--kid ID] [--key BASE64]
//!     < policy.json > envelope.json
//! ```
//!
//! The policy JSON comes on stdin. The key id and key come from `--kid`/`--key` or from
//! `EVIDENCE_SIGNING_KID`/`EVIDENCE_SIGNING_KEY` (standard base64, at least 32 bytes).
//! With `--package-dir` the package digest is recomputed from the deployable package
//! folder (the tool binary included; a source folder without its binary is refused); a
//! digest written anywhere is never trusted. The envelope is written to stdout.

use std::error::Error;
use std::io::Read as _;
use std::path::PathBuf;

use evidence_package::Package;
use evidence_policy::{KeyId, KeyRing, PolicySigner, TrustedPolicy};
use evidence_result::Digest;
use evidence_tool::{SIGNING_KEY_ENV, SIGNING_KID_ENV};
use secrecy::SecretString;

const USAGE: &str = "usage: sign-policy (--package-dir DIR | --package-digest sha256:HEX) \
[--kid ID] [--key BASE64] < policy.json (key also from EVIDENCE_SIGNING_KID / EVIDENCE_SIGNING_KEY)";

fn main() {
    if let Err(e) = run() {
        eprintln!("sign-policy: {e}");
        eprintln!("{USAGE}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let mut package_dir: Option<PathBuf> = None;
    let mut package_digest: Option<Digest> = None;
    let mut kid = std::env::var(SIGNING_KID_ENV).ok();
    let mut key = std::env::var(SIGNING_KEY_ENV).ok().map(SecretString::from);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--package-dir" => package_dir = Some(PathBuf::from(value()?)),
            "--package-digest" => package_digest = Some(value()?.parse()?),
            "--kid" => kid = Some(value()?),
            "--key" => key = Some(SecretString::from(value()?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let digest = match (package_dir, package_digest) {
        (Some(dir), None) => Package::load(&dir)?.digest(),
        (None, Some(d)) => d,
        _ => return Err("give exactly one of --package-dir and --package-digest".into()),
    };
    let kid = KeyId::new(kid.ok_or("no key id: pass --kid or set EVIDENCE_SIGNING_KID")?)?;
    let key = key.ok_or("no key: pass --key or set EVIDENCE_SIGNING_KEY")?;
    let ring = {
        use secrecy::ExposeSecret as _;
        KeyRing::parse_secret(&SecretString::from(format!(
            "{kid}:{}",
            key.expose_secret()
        )))?
    };
    let signer = PolicySigner::from_key_ring(&ring, &kid)?;

    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    let policy: TrustedPolicy = serde_json::from_str(&input)?;
    let envelope = signer.sign(&policy, digest)?;
    println!("{}", envelope.to_json()?);
    Ok(())
}
