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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const RAN: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const OTHER: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn report(verified: bool) -> RolloutReport {
        serde_json::from_value(json!({
            "format": "rollout_evidence_v1",
            "started_at": "2026-12-01T20:00:00Z", "finished_at": "2026-12-01T20:00:05Z",
            "deployment": "canary.json", "verified": verified,
            "providers": [{"provider": "manus", "package": "managed_auto_oncall_manus",
                           "verified": verified, "targets_verified": [],
                           "targets_unverified": if verified { json!([]) } else { json!(["vida"]) }}],
            "packages": [{"identity": "managed_auto_oncall_manus", "revision": "v2",
                          "digest": RAN, "provider": "manus"}],
            "targets": []
        }))
        .unwrap()
    }

    #[test]
    fn only_the_same_revision_and_digest_of_a_verified_provider_is_justified() {
        let manus = PackageId::manus();
        let ran: Digest = RAN.parse().unwrap();
        assert_eq!(justifies(&report(true), &manus, "v2", &ran), Ok(()));
        let unverified = justifies(&report(false), &manus, "v2", &ran).unwrap_err();
        assert!(
            unverified.contains("not verified") && unverified.contains("vida"),
            "{unverified}"
        );
        let other_revision = justifies(&report(true), &manus, "v3", &ran).unwrap_err();
        assert!(
            other_revision.contains("ran managed_auto_oncall_manus v2, not v3"),
            "{other_revision}"
        );
        let other_digest =
            justifies(&report(true), &manus, "v2", &OTHER.parse().unwrap()).unwrap_err();
        assert!(other_digest.contains("not the pinned"), "{other_digest}");
        let not_run = justifies(&report(true), &PackageId::clinic(), "v3", &ran).unwrap_err();
        assert!(
            not_run.contains("ran no managed_auto_oncall_clinic"),
            "{not_run}"
        );
    }
}
