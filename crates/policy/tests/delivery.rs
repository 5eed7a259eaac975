//! Delivery through the trusted runtime context: the environment variable names the
//! envelope file. The test re-runs itself as a child process with the variable set, since
//! this crate forbids the `unsafe` needed to change the environment in-process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::process::Command;

use evidence_policy::{
    KeyId, KeyRing, PolicyError, PolicySigner, RUNTIME_CONTEXT_ENV, load_runtime_policy,
    read_runtime_envelope,
};
use evidence_result::{Digest, PackageId, Provider};
use secrecy::SecretSlice;
use support::*;

const CHILD: &str = "EVIDENCE_POLICY_DELIVERY_CHILD";
const TEST: &str = "runtime_context_env_names_the_envelope_file";

fn signer() -> PolicySigner {
    PolicySigner::new(
        KeyId::new("rt1").unwrap(),
        SecretSlice::from(vec![42u8; 32]),
    )
    .unwrap()
}

/// The sandbox's ring, parsed from its text form: the public key only.
fn ring() -> KeyRing {
    signer().key_ring_entry().parse().unwrap()
}

fn digest() -> Digest {
    Digest::sha256(b"wetech package v2")
}

fn child(mode: &str) {
    let now = "2026-07-21T14:20:00Z".parse().unwrap();
    match mode {
        "present" => {
            let p = load_runtime_policy(
                &ring(),
                &digest(),
                &PackageId::wetech(),
                Provider::Wetech,
                now,
            )
            .unwrap();
            assert_eq!(p, apid_29213("wetech"));
            let other = load_runtime_policy(
                &ring(),
                &Digest::sha256(b"other"),
                &PackageId::wetech(),
                Provider::Wetech,
                now,
            );
            assert!(matches!(other, Err(PolicyError::DigestMismatch { .. })));
        }
        "missing" => {
            assert!(matches!(
                read_runtime_envelope(),
                Err(PolicyError::RuntimeContext(_))
            ));
        }
        other => panic!("unknown child mode {other}"),
    }
}

fn run_child(mode: &str, context: Option<&std::path::Path>) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", TEST, "--test-threads=1"])
        .env(CHILD, mode);
    match context {
        Some(path) => cmd.env(RUNTIME_CONTEXT_ENV, path),
        None => cmd.env_remove(RUNTIME_CONTEXT_ENV),
    };
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child {mode} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn runtime_context_env_names_the_envelope_file() {
    if let Ok(mode) = std::env::var(CHILD) {
        child(&mode);
        return;
    }
    let envelope = signer().sign(&apid_29213("wetech"), digest()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trusted-context.json");
    std::fs::write(&path, format!("{}\n", envelope.to_json().unwrap())).unwrap();
    run_child("present", Some(&path));
    run_child("missing", None);
}
