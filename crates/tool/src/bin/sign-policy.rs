//! The Auto-oncall side of trusted policy delivery: sign one per-request policy for one
//! exact package digest with an Ed25519 private key, and manage that key.
//!
//! ```text
//! sign-policy (--package-dir DIR | --package-digest sha256:HEX) [--kid ID]
//!     [--key BASE64 | --key-file PATH] [--session-token-file PATH] < policy.json > envelope.json
//! sign-policy --generate-key --kid ID --key-file PATH   (prints kid:base64publickey)
//! sign-policy --public-key [--kid ID] [--key BASE64 | --key-file PATH]
//! sign-policy --mint-session --token-file PATH          (prints the session's sha256:HEX)
//! ```
//!
//! The policy JSON comes on stdin. The key id and the private key (the 32-byte Ed25519
//! seed in standard base64) come from `--kid` and `--key`/`--key-file`, or from
//! `EVIDENCE_SIGNING_KID`/`EVIDENCE_SIGNING_KEY`. With `--package-dir` the package digest
//! is recomputed from the deployable package folder (the tool binary included; a source
//! folder without its binary is refused); a digest written anywhere is never trusted. The
//! envelope is written to stdout.
//!
//! `--generate-key` writes a new private key to a new file (mode 0600, never over an
//! existing one) and prints its key ring entry, `kid:base64publickey`: that entry, and
//! never the private key, goes into the tool sandboxes' `EVIDENCE_POLICY_KEYS`.
//! `--public-key` prints the entry of an existing private key.
//!
//! `--mint-session` writes a new session token (256 random bits, base64url) to a new file
//! (mode 0600, never over an existing one) and prints the session's digest: the token goes
//! to the agent side (`EVIDENCE_SESSION_TOKEN`), and nowhere else. Signing with
//! `--session-token-file` binds the policy to that session (its `session` member, the
//! token's digest), as the tool servers over HTTP require.

use std::error::Error;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use evidence_package::Package;
use evidence_policy::{KeyId, PolicySigner, SessionToken, TrustedPolicy};
use evidence_result::Digest;
use evidence_tool::context::{SIGNING_KEY_ENV, SIGNING_KID_ENV};
use evidence_tool::secret_file::read_secret_file;
use secrecy::{ExposeSecret as _, SecretString};

const USAGE: &str = "\
usage: sign-policy (--package-dir DIR | --package-digest sha256:HEX) [--kid ID]
                   [--key BASE64 | --key-file PATH] [--session-token-file PATH]
                   < policy.json > envelope.json
       sign-policy --generate-key --kid ID --key-file PATH
       sign-policy --public-key [--kid ID] [--key BASE64 | --key-file PATH]
       sign-policy --mint-session --token-file PATH
  the key id and the key also come from EVIDENCE_SIGNING_KID and EVIDENCE_SIGNING_KEY";

fn main() {
    if let Err(e) = run() {
        eprintln!("sign-policy: {e}");
        eprintln!("{USAGE}");
        std::process::exit(2);
    }
}

#[derive(Default)]
struct Args {
    package_dir: Option<PathBuf>,
    package_digest: Option<Digest>,
    kid: Option<String>,
    key: Option<SecretString>,
    key_file: Option<PathBuf>,
    generate: bool,
    public: bool,
    mint_session: bool,
    token_file: Option<PathBuf>,
    session_token_file: Option<PathBuf>,
}

fn parse_args() -> Result<Option<Args>, Box<dyn Error>> {
    let mut a = Args {
        kid: std::env::var(SIGNING_KID_ENV).ok(),
        ..Args::default()
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--package-dir" => a.package_dir = Some(PathBuf::from(value()?)),
            "--package-digest" => a.package_digest = Some(value()?.parse()?),
            "--kid" => a.kid = Some(value()?),
            "--key" => a.key = Some(SecretString::from(value()?)),
            "--key-file" => a.key_file = Some(PathBuf::from(value()?)),
            "--generate-key" => a.generate = true,
            "--public-key" => a.public = true,
            "--mint-session" => a.mint_session = true,
            "--token-file" => a.token_file = Some(PathBuf::from(value()?)),
            "--session-token-file" => a.session_token_file = Some(PathBuf::from(value()?)),
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    Ok(Some(a))
}

fn run() -> Result<(), Box<dyn Error>> {
    let Some(args) = parse_args()? else {
        println!("{USAGE}");
        return Ok(());
    };
    if args.mint_session {
        return mint_session(&args);
    }
    let kid = KeyId::new(
        args.kid
            .clone()
            .ok_or("no key id: pass --kid or set EVIDENCE_SIGNING_KID")?,
    )?;
    if args.generate {
        return generate(kid, &args);
    }
    let signer = PolicySigner::from_base64(kid, &private_key(&args)?)?;
    if args.public {
        println!("{}", signer.key_ring_entry());
        return Ok(());
    }
    let digest = match (args.package_dir, args.package_digest) {
        (Some(dir), None) => Package::load(&dir)?.digest(),
        (None, Some(d)) => d,
        _ => return Err("give exactly one of --package-dir and --package-digest".into()),
    };
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    let mut policy: TrustedPolicy = serde_json::from_str(&input)?;
    if let Some(path) = &args.session_token_file {
        let session = read_token(path)?.digest();
        if policy.session.is_some_and(|named| named != session) {
            return Err(format!(
                "the policy names another session than the token in {}: nothing signed",
                path.display()
            )
            .into());
        }
        policy.session = Some(session);
    }
    // An envelope that no sandbox would accept is refused here, with the reason, rather
    // than signed without a word.
    let now = jiff::Timestamp::now();
    if policy.expires_at <= now {
        return Err(format!(
            "the policy expired at {} (now {now}): nothing signed; give it a later expires_at",
            policy.expires_at
        )
        .into());
    }
    let envelope = signer.sign(&policy, digest)?;
    println!("{}", envelope.to_json()?);
    Ok(())
}

/// Reads a session token from `path`.
fn read_token(path: &Path) -> Result<SessionToken, Box<dyn Error>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read session token file {}: {e}", path.display()))?;
    Ok(SessionToken::parse(&text)?)
}

/// Writes a new session token to `--token-file` (created, mode 0600) and prints its
/// digest.
fn mint_session(args: &Args) -> Result<(), Box<dyn Error>> {
    if args.generate || args.public || args.package_dir.is_some() || args.key.is_some() {
        return Err("--mint-session takes only --token-file".into());
    }
    let path = args
        .token_file
        .as_deref()
        .ok_or("--mint-session needs --token-file PATH for the new token")?;
    let token = SessionToken::mint();
    write_new_private(path, &SecretString::from(token.expose().to_owned()))
        .map_err(|e| e.to_string().replace("key file", "token file"))?;
    println!("{}", token.digest());
    Ok(())
}

/// The private key: `--key`, else `--key-file`, else `EVIDENCE_SIGNING_KEY`.
fn private_key(args: &Args) -> Result<SecretString, Box<dyn Error>> {
    if let Some(key) = &args.key {
        if args.key_file.is_some() {
            return Err("give at most one of --key and --key-file".into());
        }
        return Ok(key.clone());
    }
    if let Some(path) = &args.key_file {
        // A secret file: closed to other users, like every secret file of the tools.
        let path = std::path::absolute(path)
            .map_err(|e| format!("cannot read key file {}: {e}", path.display()))?;
        let key = read_secret_file(&path).map_err(|e| format!("key file: {e}"))?;
        return Ok(SecretString::from(key.expose_secret().trim().to_owned()));
    }
    std::env::var(SIGNING_KEY_ENV)
        .map(SecretString::from)
        .map_err(|_| "no key: pass --key or --key-file, or set EVIDENCE_SIGNING_KEY".into())
}

/// Writes a new private key to `--key-file` (created, mode 0600) and prints its key ring
/// entry.
fn generate(kid: KeyId, args: &Args) -> Result<(), Box<dyn Error>> {
    if args.key.is_some() || args.package_dir.is_some() || args.package_digest.is_some() {
        return Err("--generate-key takes only --kid and --key-file".into());
    }
    let path = args
        .key_file
        .as_deref()
        .ok_or("--generate-key needs --key-file PATH for the private key")?;
    let signer = PolicySigner::generate(kid)?;
    write_new_private(path, &signer.private_key_base64())?;
    println!("{}", signer.key_ring_entry());
    Ok(())
}

fn write_new_private(path: &Path, key: &SecretString) -> Result<(), Box<dyn Error>> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create key file {}: {e}", path.display()))?;
    file.write_all(key.expose_secret().as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    Ok(())
}
