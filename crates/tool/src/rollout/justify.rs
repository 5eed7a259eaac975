//! Whether rollout evidence justifies offering a pinned revision to the model: the
//! canary ran that identity, revision and digest, and verified its provider.

use evidence_result::{Digest, PackageId};

use super::report::RolloutReport;

/// `Ok` when `report` ran `identity` at `revision` with exactly `digest` and verified its
/// provider; otherwise why it does not justify offering that revision.
pub fn justifies(
    report: &RolloutReport,
    identity: &PackageId,
    revision: &str,
    digest: &Digest,
) -> Result<(), String> {
    let ran = report
        .packages
        .iter()
        .find(|p| &p.identity == identity)
        .ok_or_else(|| format!("the rollout evidence ran no {identity}"))?;
    if ran.revision != revision {
        return Err(format!(
            "the rollout evidence ran {identity} {}, not {revision}",
            ran.revision
        ));
    }
    if &ran.digest != digest {
        return Err(format!(
            "the rollout evidence ran {identity} {revision} with digest {}, not the pinned {digest}",
            ran.digest
        ));
    }
    match report.providers.iter().find(|p| &p.package == identity) {
        Some(verdict) if verdict.verified => Ok(()),
        Some(verdict) => Err(format!(
            "{} is not verified in the rollout evidence (not verified: {})",
            verdict.provider,
            verdict.targets_unverified.join(", ")
        )),
        None => Err(format!(
            "the rollout evidence has no verdict for {identity}"
        )),
    }
}
