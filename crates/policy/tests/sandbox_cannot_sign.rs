//! Nothing a tool sandbox holds can sign a policy.
//!
//! A tool sandbox is given three things: the verification key ring
//! (`EVIDENCE_POLICY_KEYS`, the text exactly as the runtime sets it), the signed envelope
//! of its call, and its package folder (whose digest the envelope is bound to). Code
//! running in the sandbox (or in a renderer it starts) can read all of them. These tests
//! take every byte string it can derive from them (each value as held, decoded from
//! base64, its SHA-256, 32-byte windows of it) and use each as signing material: as the
//! secret key of a [`PolicySigner`], as an HMAC-SHA256 key of the old envelope format (and
//! of the current one), and by splicing the genuine signature onto a changed policy. A
//! forged envelope must never pass [`verify`] against the sandbox's own ring, digest,
//! package and provider.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use evidence_policy::{KeyId, KeyRing, PolicySigner, SignedPolicy, TrustedPolicy, verify};
use evidence_result::{Digest, digest::canonical_json};
use hmac::{Hmac, Mac};
use proptest::prelude::*;
use proptest::test_runner::Config;
use secrecy::SecretSlice;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use support::*;

/// The key ids of the deployment's ring (rotation: an old and a new key).
const KIDS: [&str; 2] = ["k2026a", "k2026b"];

/// What the Auto-oncall side holds (the signers) and what the sandbox is given (the
/// text of `EVIDENCE_POLICY_KEYS`), for a ring of two keys made from fixed seeds.
fn deployment() -> (Vec<PolicySigner>, String) {
    let signers: Vec<PolicySigner> = KIDS
        .iter()
        .zip([[0x5au8; 32], [0xa5u8; 32]])
        .map(|(kid, seed)| {
            PolicySigner::new(KeyId::new(*kid).unwrap(), SecretSlice::from(seed.to_vec())).unwrap()
        })
        .collect();
    let ring_text = signers
        .iter()
        .map(|s| s.key_ring_entry())
        .collect::<Vec<_>>()
        .join(",");
    (signers, ring_text)
}

/// A package folder as the sandbox sees it: its files and the digest over them.
struct PackageFolder {
    files: Vec<(&'static str, Vec<u8>)>,
    digest: Digest,
}

fn package_folder() -> PackageFolder {
    let manifest = json!({
        "identity": "managed_auto_oncall_clinic", "revision": "v3",
        "entrypoint": "bin/clinic-tool",
        "network": {"mode": "restricted", "hosts": ["127.0.0.1"]},
    })
    .to_string()
    .into_bytes();
    let readme = b"# managed_auto_oncall_clinic v3\n".to_vec();
    let binary: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut all = Vec::new();
    for part in [&manifest, &readme, &binary] {
        all.extend_from_slice(part);
    }
    PackageFolder {
        files: vec![
            ("manifest.json", manifest),
            ("README.md", readme),
            ("bin/clinic-tool", binary),
        ],
        digest: Digest::sha256(&all),
    }
}

fn now() -> jiff::Timestamp {
    "2026-07-21T14:20:00Z".parse().unwrap()
}

/// Every byte string the sandbox holds: the ring text and each of its entries (key id,
/// base64 text, decoded bytes), the envelope text and each of its string fields (as text
/// and base64url-decoded), the package files and the package digest.
fn sandbox_material(ring_text: &str, envelope_text: &str, folder: &PackageFolder) -> Vec<Vec<u8>> {
    let mut out = vec![ring_text.as_bytes().to_vec()];
    for entry in ring_text.split(',') {
        out.push(entry.as_bytes().to_vec());
        if let Some((kid, b64)) = entry.split_once(':') {
            out.push(kid.as_bytes().to_vec());
            out.push(b64.as_bytes().to_vec());
            for engine in [&STANDARD, &URL_SAFE_NO_PAD] {
                if let Ok(bytes) = engine.decode(b64) {
                    out.push(bytes);
                }
            }
        }
    }
    out.push(envelope_text.as_bytes().to_vec());
    let envelope: Value = serde_json::from_str(envelope_text).unwrap();
    for value in envelope.as_object().unwrap().values() {
        if let Some(s) = value.as_str() {
            out.push(s.as_bytes().to_vec());
            if let Ok(bytes) = URL_SAFE_NO_PAD.decode(s) {
                out.push(bytes);
            }
        }
    }
    for (name, bytes) in &folder.files {
        out.push(name.as_bytes().to_vec());
        out.push(bytes.clone());
    }
    out.push(folder.digest.to_string().into_bytes());
    let Digest::Sha256(bytes) = folder.digest;
    out.push(bytes.to_vec());
    out
}

/// The keys one piece of material yields: itself, its SHA-256, its first and last 32
/// bytes and the 32 bytes at `offset`.
fn candidate_keys(material: &[u8], offset: usize) -> Vec<Vec<u8>> {
    let mut out = vec![material.to_vec(), Sha256::digest(material).to_vec()];
    if material.len() >= 32 {
        out.push(material[..32].to_vec());
        out.push(material[material.len() - 32..].to_vec());
        let at = offset % (material.len() - 31);
        out.push(material[at..at + 32].to_vec());
    }
    out
}

/// The changes an attacker wants in a policy: another ticket, another cluster, a wider
/// window, a later expiry, a longer look-back.
fn tamper(policy: &TrustedPolicy, how: usize, amount: i64) -> TrustedPolicy {
    let mut p = policy.clone();
    let shift =
        |t: jiff::Timestamp, s: i64| jiff::Timestamp::from_second(t.as_second() + s).unwrap();
    match how % 5 {
        0 => {
            p.ticket = format!("APID-{}", 30_000 + amount.rem_euclid(60_000))
                .parse()
                .unwrap()
        }
        1 => p.cluster.id = format!("SaaS{:02}", 2 + amount.rem_euclid(90)),
        2 => p.window.start = shift(p.window.start, -60 * (1 + amount.rem_euclid(1440))),
        3 => p.expires_at = shift(p.expires_at, 3600 * (1 + amount.rem_euclid(240))),
        _ => {
            p.lookback =
                std::time::Duration::from_secs(3600 + 60 * (1 + amount.rem_euclid(60)) as u64)
        }
    }
    assert_ne!(&p, policy);
    p
}

type HmacSha256 = Hmac<Sha256>;

/// An envelope in the old HMAC-SHA256 format (version 1, field `mac`) or with an HMAC
/// tag in the current field, made with `key`.
fn hmac_envelope(
    version: u32,
    field: &str,
    kid: &str,
    digest: Digest,
    policy: &TrustedPolicy,
    key: &[u8],
) -> String {
    let payload = canonical_json(policy).unwrap();
    let digest_text = digest.to_string();
    let mut mac = HmacSha256::new_from_slice(key).unwrap();
    for (i, part) in [
        format!("evidence-policy/signed-policy/v{version}").as_bytes(),
        kid.as_bytes(),
        digest_text.as_bytes(),
        payload.as_bytes(),
    ]
    .iter()
    .enumerate()
    {
        if i > 0 {
            mac.update(&[0]);
        }
        mac.update(part);
    }
    let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    let mut envelope = serde_json::Map::new();
    envelope.insert("version".into(), json!(version));
    envelope.insert("kid".into(), json!(kid));
    envelope.insert("package_digest".into(), json!(digest_text));
    envelope.insert(
        "payload".into(),
        json!(URL_SAFE_NO_PAD.encode(payload.as_bytes())),
    );
    envelope.insert(field.into(), json!(tag));
    Value::Object(envelope).to_string()
}

/// True when `text` reads as an envelope that verifies in the sandbox.
fn accepted(text: &str, ring: &KeyRing, folder: &PackageFolder, policy: &TrustedPolicy) -> bool {
    SignedPolicy::from_json(text)
        .and_then(|env| {
            verify(
                &env,
                ring,
                &folder.digest,
                &policy.package,
                policy.provider,
                now(),
            )
        })
        .is_ok()
}

/// Every attack with one candidate key; returns a description of the first forgery
/// that verifies.
fn forge(
    key: &[u8],
    forged_policy: &TrustedPolicy,
    ring: &KeyRing,
    folder: &PackageFolder,
) -> Option<String> {
    for kid in KIDS {
        if key.len() == 32 {
            let signer =
                PolicySigner::new(KeyId::new(kid).unwrap(), SecretSlice::from(key.to_vec()));
            if let Ok(signer) = signer {
                let text = signer
                    .sign(forged_policy, folder.digest)
                    .unwrap()
                    .to_json()
                    .unwrap();
                if accepted(&text, ring, folder, forged_policy) {
                    return Some(format!(
                        "signer with key {} under {kid}",
                        STANDARD.encode(key)
                    ));
                }
            }
        }
        for (version, field) in [(1, "mac"), (1, "signature"), (2, "mac"), (2, "signature")] {
            let text = hmac_envelope(version, field, kid, folder.digest, forged_policy, key);
            if accepted(&text, ring, folder, forged_policy) {
                return Some(format!(
                    "HMAC v{version} {field} with key {} under {kid}",
                    STANDARD.encode(key)
                ));
            }
        }
    }
    None
}

/// The genuine envelope with its payload replaced by `forged_policy`'s (signature kept).
fn spliced(envelope_text: &str, forged_policy: &TrustedPolicy) -> String {
    let mut envelope: Value = serde_json::from_str(envelope_text).unwrap();
    envelope["payload"] =
        json!(URL_SAFE_NO_PAD.encode(canonical_json(forged_policy).unwrap().as_bytes()));
    envelope.to_string()
}

struct Sandbox {
    ring_text: String,
    ring: KeyRing,
    envelope_text: String,
    folder: PackageFolder,
    policy: TrustedPolicy,
}

fn sandbox(signer_index: usize) -> Sandbox {
    let (signers, ring_text) = deployment();
    let folder = package_folder();
    let policy = apid_29213("clinic");
    let envelope_text = signers[signer_index % signers.len()]
        .sign(&policy, folder.digest)
        .unwrap()
        .to_json()
        .unwrap();
    // The sandbox verifies with the ring text it is given, exactly as the entrypoint does.
    let ring: KeyRing = ring_text.parse().unwrap();
    assert!(
        accepted(&envelope_text, &ring, &folder, &policy),
        "the genuine envelope verifies"
    );
    Sandbox {
        ring_text,
        ring,
        envelope_text,
        folder,
        policy,
    }
}

/// Every piece of material, every key derived from it, every kind of forgery, for each
/// kind of policy change.
#[test]
fn no_sandbox_material_signs_an_envelope_that_verifies() {
    for signer_index in 0..KIDS.len() {
        let s = sandbox(signer_index);
        let material = sandbox_material(&s.ring_text, &s.envelope_text, &s.folder);
        for how in 0..5 {
            let forged_policy = tamper(&s.policy, how, 7);
            assert!(
                !accepted(
                    &spliced(&s.envelope_text, &forged_policy),
                    &s.ring,
                    &s.folder,
                    &forged_policy
                ),
                "the genuine signature verified over a changed policy"
            );
            for m in &material {
                for key in candidate_keys(m, 0) {
                    if let Some(forgery) = forge(&key, &forged_policy, &s.ring, &s.folder) {
                        panic!(
                            "sandbox material signed a changed policy (change {how}): {forgery}"
                        );
                    }
                }
            }
        }
        // Re-signing the unchanged policy (to refresh or re-target it) fails too.
        for m in &material {
            for key in candidate_keys(m, 0) {
                assert_eq!(forge(&key, &s.policy, &s.ring, &s.folder), None);
            }
        }
    }
}

proptest! {
    #![proptest_config(Config { cases: 1000, ..Config::default() })]

    /// Over generated policy changes, material and key windows: no forgery verifies.
    #[test]
    fn no_sandbox_material_signs_any_changed_policy(
        signer_index in 0usize..2,
        how in 0usize..5,
        amount in any::<i64>(),
        pick in any::<prop::sample::Index>(),
        offset in any::<usize>(),
    ) {
        let s = sandbox(signer_index);
        let forged_policy = tamper(&s.policy, how, amount);
        prop_assert!(!accepted(&spliced(&s.envelope_text, &forged_policy), &s.ring, &s.folder, &forged_policy));
        let material = sandbox_material(&s.ring_text, &s.envelope_text, &s.folder);
        let m = &material[pick.index(material.len())];
        for key in candidate_keys(m, offset) {
            let forgery = forge(&key, &forged_policy, &s.ring, &s.folder);
            prop_assert!(forgery.is_none(), "{:?}", forgery);
        }
    }
}
