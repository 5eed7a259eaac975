//! A canary run: for each target of a deployed provider, its policy and envelope, its
//! calls in one turn, each answer checked against its expectation; then the verdicts and
//! the report files. Also writes the unsigned policies an operator signs ahead.

use std::path::{Path, PathBuf};
use std::time::Duration;

use evidence_policy::SignedPolicy;
use serde_json::Value;

use super::deployment::{Deployment, Envelopes, LoadedPackage};
use super::invoke::{self, CallContext, Produced};
use super::plan::{Args, TARGETS, Target};
use super::report::{
    CallReport, PackageUsed, ProviderVerdict, ReportFormat, RolloutReport, TargetReport,
    top_instance,
};
use super::{RolloutError, markdown};

/// The report's JSON file in the output folder.
pub const REPORT_JSON: &str = "rollout-evidence.json";
/// Its Markdown summary.
pub const REPORT_MARKDOWN: &str = "rollout-evidence.md";

/// Time a call's process gets beyond the package's own limit (start and exit).
const PROCESS_MARGIN: Duration = Duration::from_secs(10);

/// Runs the canary over `deployment`, writing into `out` (created when missing): the
/// report ([`REPORT_JSON`], [`REPORT_MARKDOWN`]), the audit log every call appends to
/// (`audit.jsonl`), the turn ledger (`turns/<run>/`) and, with a signer, the envelopes
/// it signed (`envelopes/<run>/`). Returns the report; whether it is verified is
/// [`RolloutReport::verified`].
pub async fn run_canary(
    deployment: &Deployment,
    out: &Path,
) -> Result<RolloutReport, RolloutError> {
    let started = jiff::Timestamp::now();
    let run = run_id(started);
    let ledger = out.join("turns").join(&run);
    let envelopes = out.join("envelopes").join(&run);
    for dir in [&ledger, &envelopes] {
        create_dir(dir)?;
    }
    let audit_log = out.join("audit.jsonl");
    let mut targets = Vec::new();
    for target in TARGETS {
        let Some(package) = deployment.packages.iter().find(|p| p.tool == target.tool) else {
            continue;
        };
        let (envelope, policy_id) = envelope_for(deployment, target, package, &run, &envelopes)?;
        let context = CallContext {
            envelope: &envelope,
            keys: &deployment.keys,
            audit_log: &audit_log,
            turn_ledger: &ledger,
        };
        targets.push(run_target(target, package, &context, policy_id).await);
    }
    let report = RolloutReport {
        format: ReportFormat::RolloutEvidenceV1,
        started_at: started.to_string(),
        finished_at: jiff::Timestamp::now().to_string(),
        deployment: deployment.path.display().to_string(),
        verified: targets.iter().all(|t| t.verified),
        providers: verdicts(deployment, &targets),
        packages: deployment
            .packages
            .iter()
            .map(|p| PackageUsed {
                identity: p.package.identity().clone(),
                revision: p.package.revision().to_string(),
                digest: p.package.digest(),
                provider: p.tool.provider(),
            })
            .collect(),
        targets,
    };
    write(&out.join(REPORT_JSON), &(report.to_json()? + "\n"))?;
    write(&out.join(REPORT_MARKDOWN), &markdown::summary(&report))?;
    Ok(report)
}

/// Writes the unsigned policy of every target of `deployment` into `out`, as
/// `<target>.policy.json`, for the Auto-oncall signer to sign ahead into
/// `<target>.envelope` (`sign-policy --package-dir <the package's folder>`). They are
/// issued now and expire in an hour. Returns each file with the package folder it is for.
pub fn write_policies(
    deployment: &Deployment,
    out: &Path,
) -> Result<Vec<(PathBuf, PathBuf)>, RolloutError> {
    let now = jiff::Timestamp::now();
    let run = run_id(now);
    create_dir(out)?;
    let mut written = Vec::new();
    for target in TARGETS {
        let Some(package) = deployment.packages.iter().find(|p| p.tool == target.tool) else {
            continue;
        };
        let policy = policy_of(deployment, target, package, &run, now)?;
        let path = out.join(format!("{}.policy.json", target.key));
        write(&path, &(serde_json::to_string_pretty(&policy)? + "\n"))?;
        written.push((path, package.dir.clone()));
    }
    Ok(written)
}

/// The envelope file of target `key` in `dir`: where the canary writes the envelopes it
/// signs, and reads those signed ahead.
pub(crate) fn envelope_path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.envelope"))
}

/// The policy of `target`'s turn in run `run`, for its deployed package, with the
/// deployment's account, Wetech datasource and overrides.
fn policy_of(
    deployment: &Deployment,
    target: &Target,
    package: &LoadedPackage,
    run: &str,
    now: jiff::Timestamp,
) -> Result<evidence_policy::TrustedPolicy, RolloutError> {
    target.policy(
        run,
        &deployment.account,
        &package.package,
        package.wetech_datasource.as_deref(),
        deployment.targets.get(target.key),
        now,
    )
}

/// A run's id: its start to the millisecond, `20261201T203000123Z`.
fn run_id(at: jiff::Timestamp) -> String {
    format!(
        "{}{:03}Z",
        at.strftime("%Y%m%dT%H%M%S"),
        at.subsec_millisecond()
    )
}

fn create_dir(dir: &Path) -> Result<(), RolloutError> {
    std::fs::create_dir_all(dir).map_err(|source| RolloutError::Write {
        path: dir.to_owned(),
        source,
    })
}

fn write(path: &Path, text: &str) -> Result<(), RolloutError> {
    std::fs::write(path, text).map_err(|source| RolloutError::Write {
        path: path.to_owned(),
        source,
    })
}

/// The envelope file of a target's turn and its policy id: signed now with the signer,
/// or the one signed ahead (its policy id read by verifying it; `None` when it is
/// missing or does not verify, which its calls then show).
fn envelope_for(
    deployment: &Deployment,
    target: &Target,
    package: &LoadedPackage,
    run: &str,
    envelopes: &Path,
) -> Result<(PathBuf, Option<String>), RolloutError> {
    let now = jiff::Timestamp::now();
    match &deployment.envelopes {
        Envelopes::Signer(signer) => {
            let policy = policy_of(deployment, target, package, run, now)?;
            let envelope = signer
                .sign(&policy, package.package.digest())
                .and_then(|e| e.to_json())
                .map_err(|e| RolloutError::Policy(e.to_string()))?;
            let path = envelope_path(envelopes, target.key);
            write(&path, &(envelope + "\n"))?;
            Ok((path, Some(policy.policy_id.to_string())))
        }
        Envelopes::SignedAhead(dir) => {
            let path = envelope_path(dir, target.key);
            let policy_id = std::fs::read_to_string(&path)
                .ok()
                .and_then(|text| SignedPolicy::from_json(&text).ok())
                .and_then(|envelope| {
                    evidence_policy::verify(
                        &envelope,
                        &deployment.key_ring,
                        &package.package.digest(),
                        package.package.identity(),
                        package.tool.provider(),
                        now,
                    )
                    .ok()
                })
                .map(|policy| policy.policy_id.to_string());
            Ok((path, policy_id))
        }
    }
}

/// One target's turn: each step in order, a follow-up given the reference its earlier
/// step's answer named.
async fn run_target(
    target: &Target,
    package: &LoadedPackage,
    context: &CallContext<'_>,
    policy_id: Option<String>,
) -> TargetReport {
    let timeout =
        Duration::from_millis(package.package.manifest().limits.timeout_ms) + PROCESS_MARGIN;
    let mut calls: Vec<CallReport> = Vec::new();
    let mut references: Vec<Option<String>> = Vec::new();
    for step in target.steps() {
        let (args, reference) = match step.args {
            Args::Fixed(args) => (args, None),
            Args::InstanceRefFrom(earlier, mut args) => {
                match references.get(earlier).cloned().flatten() {
                    Some(reference) => {
                        args["instanceRef"] = Value::String(reference.clone());
                        (args, Some(reference))
                    }
                    None => {
                        calls.push(CallReport::without_result(
                            step.name,
                            query_id(&args),
                            step.expect,
                            "canary_not_run",
                            format!("step {} named no instance to follow up", earlier + 1),
                            0.0,
                        ));
                        references.push(None);
                        continue;
                    }
                }
            }
        };
        let (produced, ms) = invoke::call(package, context, &args.to_string(), timeout).await;
        let report = match &produced {
            Produced::Result(result) => {
                references.push(top_instance(result.details().evidence.as_deref()).cloned());
                CallReport::from_result(
                    step.name,
                    query_id(&args),
                    step.expect,
                    result,
                    reference.as_deref(),
                    ms,
                )
            }
            Produced::Nothing { code, detail } => {
                references.push(None);
                CallReport::without_result(
                    step.name,
                    query_id(&args),
                    step.expect,
                    code,
                    detail.clone(),
                    ms,
                )
            }
        };
        calls.push(report);
    }
    TargetReport {
        provider: target.tool.provider(),
        target: target.target.to_owned(),
        capability: target.capability.to_owned(),
        package: package.package.identity().clone(),
        digest: package.package.digest(),
        policy_id,
        verified: calls.iter().all(|c| c.met),
        calls,
    }
}

/// The `queryId` of a call's arguments (a Clinic batch's first query).
fn query_id(args: &Value) -> &str {
    args.get("queryId")
        .or_else(|| args.pointer("/queries/0/queryId"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// One verdict per deployed provider.
fn verdicts(deployment: &Deployment, targets: &[TargetReport]) -> Vec<ProviderVerdict> {
    deployment
        .packages
        .iter()
        .map(|p| {
            let provider = p.tool.provider();
            let mine = targets.iter().filter(|t| t.provider == provider);
            let (verified, unverified): (Vec<_>, Vec<_>) = mine.partition(|t| t.verified);
            ProviderVerdict {
                provider,
                package: p.package.identity().clone(),
                verified: unverified.is_empty() && !verified.is_empty(),
                targets_verified: verified.iter().map(|t| t.target.clone()).collect(),
                targets_unverified: unverified.iter().map(|t| t.target.clone()).collect(),
            }
        })
        .collect()
}
