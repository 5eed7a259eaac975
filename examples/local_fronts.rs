//! Local providers for trying the three packages by hand: real Prometheus servers over
//! the `evidence-test-support` fixtures (built with `promtool` on first use) behind the
//! test fronts that stand in for the Clinic API, the two Manus targets and Grafana. It
//! prints the deployment variables and secrets a package needs to reach them, as
//! `NAME='value'` lines a shell can source, and runs until it is stopped (Ctrl-C or
//! SIGTERM), which stops every server it started.
//!
//! ```sh
//! cargo run --example local_fronts -- --env-file fronts.env
//! ```
//!
//! These are **test fronts**, not the providers: each adds only the contract Prometheus
//! lacks (the Clinic bearer token and cluster-scoped path, the Manus session bootstrap,
//! Grafana's login cookie, health endpoint and datasource proxy) and forwards the query
//! to a real Prometheus. The fixture data: cluster `SaaS01`, the APID-29213 window
//! 2026-07-21 21:50-22:05 UTC+8 (see `crates/test-support/README.md`).

use std::error::Error;
use std::path::PathBuf;

use base64::Engine as _;
use evidence_test_support as support;
use rand::RngCore as _;
use secrecy::SecretString;

const USAGE: &str =
    "usage: local_fronts [--env-file PATH]   (runs until stopped with Ctrl-C or SIGTERM)";

fn main() -> std::process::ExitCode {
    let env_file = match parse_args() {
        Ok(Some(path)) => path,
        Ok(None) => {
            println!("{USAGE}");
            return std::process::ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("local_fronts: {e}\n{USAGE}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("local_fronts: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(env_file)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("local_fronts: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `Ok(None)` for `--help`; `Ok(Some(None))` without `--env-file`.
fn parse_args() -> Result<Option<Option<PathBuf>>, String> {
    let mut env_file = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--env-file") => {
                env_file = Some(PathBuf::from(args.next().ok_or("--env-file needs a path")?))
            }
            Some("-h" | "--help") => return Ok(None),
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    Ok(Some(env_file))
}

/// `n` random bytes, hex: a credential of the fronts, new for every start.
fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// A value quoted for a POSIX shell: `'...'` with each `'` written as `'\''`.
fn shell_quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

async fn run(env_file: Option<PathBuf>) -> Result<(), Box<dyn Error>> {
    // Listening first: a stop during the start still stops every server started.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let main = support::Prometheus::start(support::Fixture::Main).await?;
    let clinic_token = format!("local-clinic-{}", random_hex(12));
    let clinic =
        support::ClinicFront::start(&main.url(), SecretString::from(clinic_token.clone())).await?;
    let (username, password) = (
        "local-manus-reader".to_owned(),
        format!("local-manus-{}", random_hex(12)),
    );
    let manus = support::ManusTargets::start(
        &SecretString::from(username.clone()),
        &SecretString::from(password.clone()),
    )
    .await?;
    let grafana = support::GrafanaFront::start(&main.url()).await?;
    let mut reference_key = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut reference_key);

    let variables = [
        ("PROMETHEUS_URL", main.url()),
        ("CLINIC_BASE_URL", clinic.base_url()),
        (
            "CLINIC_QUERY_PATH_TEMPLATE",
            support::ClinicFront::QUERY_RANGE_PATH_TEMPLATE.to_owned(),
        ),
        ("CLINIC_API_TOKEN", clinic_token),
        ("MANUS_VIDA_URL", manus.vida.front.base_url()),
        ("MANUS_MONICA_URL", manus.monica.front.base_url()),
        ("MANUS_USERNAME", username),
        ("MANUS_PASSWORD", password),
        (
            "MANUS_REF_KEYS",
            format!(
                "local:{}",
                base64::engine::general_purpose::STANDARD.encode(reference_key)
            ),
        ),
        ("WETECH_GRAFANA_URL", grafana.base_url()),
        ("WETECH_DATASOURCE", grafana.datasource_uid().to_owned()),
        ("WETECH_STORAGE_STATE", grafana.storage_state()),
    ];
    let mut text = String::from(
        "# Local TEST FRONTS (evidence-test-support) before real Prometheus servers; they run\n\
         # until local_fronts is stopped. Data: cluster SaaS01, 2026-07-21 21:50-22:05 UTC+8.\n\
         # WETECH_DATASOURCE is the datasource uid for the Wetech policy's wetech_datasource.\n",
    );
    for (name, value) in &variables {
        text.push_str(&format!("{name}={}\n", shell_quoted(value)));
    }
    print!("{text}");
    if let Some(path) = &env_file {
        // Written whole and renamed into place: a reader never sees half of it.
        let partial = path.with_extension("partial");
        std::fs::write(&partial, &text)?;
        std::fs::rename(&partial, path)?;
        println!("# written to {}", path.display());
    }
    println!("# ready; Ctrl-C stops the servers");

    tokio::select! {
        stopped = tokio::signal::ctrl_c() => stopped?,
        _ = terminate.recv() => {}
    }
    // Dropping the servers stops the Prometheus processes and the fronts.
    drop((clinic, manus, grafana, main));
    Ok(())
}
