//! Nothing a tool sandbox is given signs a policy its tool accepts, through the real
//! binaries: the verification keys of `EVIDENCE_POLICY_KEYS`, the envelope and the
//! deployable package folder, each used as the private key of `sign-policy` for a policy
//! that widens the cluster, give an envelope that `clinic-tool` refuses
//! (`policy_verification_failed`) with nothing sent to Clinic. A version 1 (HMAC)
//! envelope is refused with a message that says to re-sign.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use evidence_result::{Digest, FailureClass, ToolResult};
use evidence_test_support as test_support;
use secrecy::SecretString;
use serde_json::{Value, json};
use support::*;

const ARGS: &str = r#"{"queries":[{"queryId":"tidb_cpu","expr":"sum(rate(process_cpu_seconds_total[1m]))","step":"15s","unit":"cores"}]}"#;

/// 32-byte keys from a piece of sandbox material: the bytes themselves when they are
/// 32, their SHA-256, and their first and last 32 bytes.
fn keys_from(material: &[u8]) -> Vec<Vec<u8>> {
    let Digest::Sha256(hash) = Digest::sha256(material);
    let mut out = vec![hash.to_vec()];
    if material.len() >= 32 {
        out.push(material[..32].to_vec());
        out.push(material[material.len() - 32..].to_vec());
    }
    out
}

/// Every string of the sandbox's `EVIDENCE_POLICY_KEYS`, envelope and package folder,
/// raw and decoded, as candidate private keys.
fn sandbox_keys(ring_text: &str, envelope_text: &str, package: &Path) -> Vec<Vec<u8>> {
    let mut material: Vec<Vec<u8>> = vec![ring_text.as_bytes().to_vec()];
    for entry in ring_text.split(',') {
        let (_, b64) = entry.split_once(':').unwrap();
        material.push(b64.as_bytes().to_vec());
        material.push(STANDARD.decode(b64).unwrap());
    }
    material.push(envelope_text.trim().as_bytes().to_vec());
    let envelope: Value = serde_json::from_str(envelope_text).unwrap();
    for value in envelope.as_object().unwrap().values() {
        if let Some(s) = value.as_str() {
            material.push(s.as_bytes().to_vec());
            if let Ok(bytes) = URL_SAFE_NO_PAD.decode(s) {
                material.push(bytes);
            }
        }
    }
    for file in ["manifest.json", "README.md", "bin/clinic-tool"] {
        material.push(std::fs::read(package.join(file)).unwrap());
    }
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for m in &material {
        if m.len() == 32 {
            keys.push(m.clone());
        }
        keys.extend(keys_from(m));
    }
    keys.sort();
    keys.dedup();
    keys
}

fn failure_code(out: &str) -> (String, FailureClass) {
    let result = ToolResult::from_json(out.trim()).unwrap();
    let Some(error) = result.details().error.as_ref() else {
        panic!("a policy signed with sandbox material ran: {out}");
    };
    (error.code.as_str().to_owned(), error.class)
}

#[tokio::test]
async fn no_sandbox_material_signs_a_policy_the_tool_accepts() {
    let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
        .await
        .unwrap();
    let token = "sandbox-sign-clinic-token-01";
    let front =
        test_support::ClinicFront::start(&prometheus.url(), SecretString::from(token.to_owned()))
            .await
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (package, _) = deploy(dir.path(), "managed_auto_oncall_clinic", "v3", CLINIC_TOOL);
    let genuine = policy("clinic", "managed_auto_oncall_clinic", json!({}));
    let signed = sign(dir.path(), "envelope.json", &package, &genuine);
    let audit = dir.path().join("audit.jsonl");
    let bin = entrypoint(&package);
    let env_with = |envelope: &Path| {
        clinic_env(
            &Signed {
                envelope: envelope.to_owned(),
                keys: signed.keys.clone(),
            },
            &audit,
            front.base_url(),
            token,
        )
    };

    // The genuine envelope runs.
    let (code, out, err) = {
        let (bin, env) = (bin.clone(), env_with(&signed.envelope));
        blocking(move || run(&bin, &[], &env, ARGS)).await
    };
    assert_eq!(code, 0, "{err}");
    assert!(
        !ToolResult::from_json(out.trim()).unwrap().is_failed(),
        "{out}"
    );
    let sent = front.requests().len();
    assert!(sent > 0);

    // What the attacker wants: the same call for another cluster.
    let wanted = policy(
        "clinic",
        "managed_auto_oncall_clinic",
        json!({"cluster": {"id": "SaaS02", "tier": "dedicated"}}),
    );
    let envelope_text = std::fs::read_to_string(&signed.envelope).unwrap();
    let keys = sandbox_keys(&signed.keys, &envelope_text, &package);
    assert!(keys.len() >= 20, "{} candidate keys", keys.len());
    let forged = dir.path().join("forged.json");
    for key in &keys {
        let (code, out, err) = run(
            Path::new(SIGN_POLICY),
            &[
                "--package-dir",
                package.to_str().unwrap(),
                "--kid",
                KID,
                "--key",
                &STANDARD.encode(key),
            ],
            &[],
            &wanted.to_string(),
        );
        assert_eq!(code, 0, "{err}");
        std::fs::write(&forged, out).unwrap();
        let (bin, env) = (bin.clone(), env_with(&forged));
        let (code, out, err) = blocking(move || run(&bin, &[], &env, ARGS)).await;
        assert_eq!(code, 0, "{err}");
        let (code, class) = failure_code(&out);
        assert_eq!(
            (code.as_str(), class),
            ("policy_verification_failed", FailureClass::Authorization),
            "a policy signed with sandbox material ran: {out}"
        );
    }

    // The genuine signature over the wanted policy's payload (the envelope's own field
    // order kept, so that it reads and reaches the signature check).
    let genuine_envelope: Value = serde_json::from_str(&envelope_text).unwrap();
    let wanted_envelope: Value = {
        let other_key = STANDARD.encode([1u8; 32]);
        let (_, out, _) = run(
            Path::new(SIGN_POLICY),
            &[
                "--package-dir",
                package.to_str().unwrap(),
                "--kid",
                KID,
                "--key",
                &other_key,
            ],
            &[],
            &wanted.to_string(),
        );
        serde_json::from_str(&out).unwrap()
    };
    let spliced = envelope_text.replace(
        genuine_envelope["payload"].as_str().unwrap(),
        wanted_envelope["payload"].as_str().unwrap(),
    );
    std::fs::write(&forged, &spliced).unwrap();
    let (bin2, env) = (bin.clone(), env_with(&forged));
    let (_, out, _) = blocking(move || run(&bin2, &[], &env, ARGS)).await;
    assert_eq!(failure_code(&out).0, "policy_verification_failed", "{out}");
    assert_eq!(
        front.requests().len(),
        sent,
        "no forged call reached Clinic"
    );

    // A version 1 envelope (HMAC-SHA256) is refused and the message says what to do.
    let v1 = spliced
        .replace(r#"{"version":2,"#, r#"{"version":1,"#)
        .replace(r#""signature":"#, r#""mac":"#);
    assert_ne!(v1, spliced);
    std::fs::write(&forged, v1).unwrap();
    let (bin2, env) = (bin.clone(), env_with(&forged));
    let (_, out, err) = blocking(move || run(&bin2, &[], &env, ARGS)).await;
    let (code, class) = failure_code(&out);
    assert_eq!(
        (code.as_str(), class),
        ("runtime_context_invalid", FailureClass::Authorization),
        "{out}"
    );
    // The operator reads what to do, in the call's audit record and on stderr.
    let record = audit_records(&audit).pop().unwrap();
    let detail = record["operator_detail"].as_str().unwrap_or_default();
    for told in [detail, err.as_str()] {
        assert!(
            told.contains("version 1 (HMAC-SHA256) is no longer accepted"),
            "{told}"
        );
    }
    assert_eq!(front.requests().len(), sent);
}

#[test]
fn the_signer_generates_a_key_pair_and_prints_only_the_public_key() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("k2026b.key");
    let (code, out, err) = run(
        Path::new(SIGN_POLICY),
        &[
            "--generate-key",
            "--kid",
            "k2026b",
            "--key-file",
            key_file.to_str().unwrap(),
        ],
        &[],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let private = std::fs::read_to_string(&key_file).unwrap();
    let private = private.trim();
    assert_eq!(STANDARD.decode(private).unwrap().len(), 32);
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let entry = out.trim();
    let (kid, public) = entry.split_once(':').unwrap();
    assert_eq!(kid, "k2026b");
    assert_eq!(STANDARD.decode(public).unwrap().len(), 32);
    assert!(!out.contains(private) && !err.contains(private));
    entry.parse::<evidence_policy::KeyRing>().unwrap();

    // The printed entry is the public key of the written private key, from a file or
    // from the environment.
    let (code, again, _) = run(
        Path::new(SIGN_POLICY),
        &[
            "--public-key",
            "--kid",
            "k2026b",
            "--key-file",
            key_file.to_str().unwrap(),
        ],
        &[],
        "",
    );
    assert_eq!((code, again.trim()), (0, entry));
    let (code, again, _) = run(
        Path::new(SIGN_POLICY),
        &["--public-key"],
        &[
            ("EVIDENCE_SIGNING_KID", "k2026b".into()),
            ("EVIDENCE_SIGNING_KEY", private.to_owned()),
        ],
        "",
    );
    assert_eq!((code, again.trim()), (0, entry));

    // A second generation never overwrites a key.
    let (code, _, err) = run(
        Path::new(SIGN_POLICY),
        &[
            "--generate-key",
            "--kid",
            "k2026c",
            "--key-file",
            key_file.to_str().unwrap(),
        ],
        &[],
        "",
    );
    assert_eq!(code, 2);
    assert!(err.contains("cannot create key file"), "{err}");
    assert_eq!(std::fs::read_to_string(&key_file).unwrap().trim(), private);
}
