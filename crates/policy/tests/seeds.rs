//! The seed examples: a Clinic batch for SaaS01 over a 60-minute window, APID-29213 on
//! Wetech (without queryId, with a bad unit, corrected), provider arguments rejected.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use evidence_policy::{lock, lock::LockedItem, promql::bind_label};
use evidence_result::{Details, FailureClass, PolicySource, Status, ToolResult};
use serde_json::json;
use support::*;

#[test]
fn clinic_batch_for_saas01_over_the_60_minute_window() {
    let policy = st_2865_clinic();
    let args = json!({"queries": [
        {"queryId": "mem_available_ratio",
         "expr": "max by (instance) (1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes) * 100",
         "unit": "%"},
        {"queryId": "tikv_mem", "expr": "sum by (instance) (tikv_memory_usage_bytes{job=\"tikv\"})",
         "step": "1m", "unit": "bytes"},
        {"queryId": "other_cluster", "expr": "up{cluster_id=\"SaaS02\"}"}
    ]});
    let locked = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope()).unwrap();
    assert_eq!(locked.items.len(), 3);

    let ready: Vec<_> = locked.ready().collect();
    assert_eq!(ready.len(), 2, "the other items still run");
    let mem = ready[0];
    assert_eq!(
        mem.expr,
        r#"max by (instance) (1 - node_memory_MemAvailable_bytes{cluster_id="SaaS01"} / node_memory_MemTotal_bytes{cluster_id="SaaS01"}) * 100"#
    );
    assert_eq!(mem.start.to_string(), "2026-08-05T01:00:00Z");
    assert_eq!(mem.end.to_string(), "2026-08-05T02:00:00Z");
    assert_eq!(mem.step_seconds, 15, "3600 s / 250 = 14.4, rounded up");
    assert_eq!(mem.points(), 241);
    assert_eq!(mem.unit.as_deref(), Some("%"));
    assert_eq!(ready[1].step_seconds, 60);
    assert_eq!(
        ready[1].expr,
        r#"sum by (instance) (tikv_memory_usage_bytes{cluster_id="SaaS01",job="tikv"})"#
    );
    for q in &ready {
        check_locked(q, &policy).unwrap();
    }

    let LockedItem::Rejected {
        query_id,
        request_digest,
        failure,
    } = &locked.items[2]
    else {
        panic!("the other cluster must be rejected");
    };
    assert_eq!(query_id.as_str(), "other_cluster");
    assert!(request_digest.is_some());
    assert_eq!(failure.error.code.as_str(), "scope_violation");
    assert_eq!(failure.error.class, FailureClass::PolicyViolation);
    assert!(
        failure
            .correction
            .instruction
            .contains("Remove every matcher on `cluster_id`")
    );

    // The rejected item is a failed item of a partial batch result.
    let item = locked.items[2].rejected_item().unwrap();
    assert!(locked.items[0].rejected_item().is_none());
    let details = Details::batch(locked.origin(), vec![item]).unwrap();
    let result = ToolResult::new(details).unwrap();
    assert_eq!(result.details().status, Status::Error);
    assert_eq!(
        result.details().policy_source,
        Some(PolicySource::TrustedEnvelope)
    );
}

#[test]
fn wetech_call_without_query_id_is_rejected_with_a_correction() {
    let policy = apid_29213("wetech");
    assert_eq!(policy.window.start.to_string(), "2026-07-21T13:50:00Z");
    let args = json!({"expr": "sum by (instance) (rate(tidb_server_cpu_seconds_total[1m]))", "unit": "cores"});
    let r = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope()).unwrap_err();
    assert_eq!(r.class(), FailureClass::InvalidArgument);
    assert_eq!(r.code().as_str(), "missing_query_id");
    assert!(r.query_id.is_none() && r.request_digest.is_none());
    assert!(r.failure.correction.allowed);
    assert!(
        r.failure.correction.instruction.contains("`tidb_cpu`"),
        "{}",
        r.failure.correction.instruction
    );
    let result = r
        .to_tool_result(evidence_result::Origin {
            package: policy.package.clone(),
            provider: policy.provider,
            operation: policy.operation,
            policy_source: Some(PolicySource::TrustedEnvelope),
        })
        .unwrap();
    assert_eq!(
        result.details().failure_class(),
        Some(FailureClass::InvalidArgument)
    );
    assert_eq!(
        serde_json::to_string(result.details()).unwrap(),
        result.text()
    );

    // The same call with the authorized queryId locks.
    let mut fixed = args.clone();
    fixed["queryId"] = json!("tidb_cpu");
    let locked = lock(&policy, PolicySource::TrustedEnvelope, &fixed, &scope()).unwrap();
    let q = locked.single().unwrap();
    assert_eq!(
        q.expr,
        r#"sum by (instance) (rate(tidb_server_cpu_seconds_total{cluster_id="SaaS01"}[1m]))"#
    );
    assert_eq!(
        q.step_seconds, 15,
        "900 s / 250 = 3.6 -> 4 s, raised to the 15 s minimum"
    );
    assert_eq!(q.points(), 61);
    check_locked(q, &policy).unwrap();
}

#[test]
fn wetech_unit_rejection_then_changed_same_turn_success() {
    let policy = apid_29213("wetech");
    let bad = json!({"queryId": "tidb_cpu", "expr": "max(rate(tidb_server_cpu_seconds_total[1m]))", "unit": "CPU cores (per instance)"});
    let r1 = lock(&policy, PolicySource::TrustedEnvelope, &bad, &scope()).unwrap_err();
    assert_eq!(r1.code().as_str(), "invalid_unit");
    let r1_again = lock(&policy, PolicySource::TrustedEnvelope, &bad, &scope()).unwrap_err();
    assert_eq!(
        r1.request_digest, r1_again.request_digest,
        "unchanged retry, same digest"
    );
    let mut good = bad.clone();
    good["unit"] = json!("cores");
    let ok = lock(&policy, PolicySource::TrustedEnvelope, &good, &scope()).unwrap();
    let q = ok.single().unwrap();
    assert_eq!(q.query_id.as_str(), "tidb_cpu");
    assert_ne!(
        Some(q.request_digest),
        r1.request_digest,
        "a changed attempt has a new digest"
    );
}

/// `provider` in the arguments of each package is `forbidden_argument`
/// (`policy_violation`, correctable only by leaving it out); inside a Clinic batch entry
/// only that entry is rejected and the others lock.
#[test]
fn provider_in_arguments_is_rejected() {
    for provider in ["clinic", "manus", "wetech"] {
        let policy = apid_29213(provider);
        let mut args = one_query(provider, "tidb_cpu", "up");
        args["provider"] = json!("clinic");
        let r = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope()).unwrap_err();
        assert_eq!(r.class(), FailureClass::PolicyViolation, "{provider}");
        assert_eq!(r.code().as_str(), "forbidden_argument");
        let c = &r.failure.correction;
        assert!(c.allowed, "correctable by removal");
        assert!(
            c.instruction
                .contains("The platform fixes the provider; leave `provider` out"),
            "{}",
            c.instruction
        );
    }
    // Inside a Clinic batch entry: that entry is rejected, the others run.
    let policy = apid_29213("clinic");
    let args = json!({"queries": [
        {"queryId": "a", "expr": "up", "provider": "wetech", "clusterId": "SaaS02"},
        {"queryId": "b", "expr": "up"}
    ]});
    let locked = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope()).unwrap();
    let LockedItem::Rejected { failure, .. } = &locked.items[0] else {
        panic!("expected a rejected entry");
    };
    assert_eq!(failure.error.code.as_str(), "forbidden_argument");
    assert!(failure.correction.instruction.contains("cluster, provider"));
    assert!(matches!(locked.items[1], LockedItem::Ready(_)));
}

/// Each platform-fixed field in the arguments (`start`, `end`, `window`, `cluster_id`,
/// `ticket`, `account`, `url`, `host`, `target`) is a `policy_violation` whose correction
/// says to leave it out; a range, `offset`, `@` or subquery reaching outside the window is
/// `window_violation`, a regex widening the cluster `scope_violation`, each with a request
/// digest; reads within the window plus look-back lock.
#[test]
fn platform_fixed_fields_and_windows_are_never_widened() {
    let policy = apid_29213("wetech");
    for (key, value) in [
        ("start", json!("2026-07-21T00:00:00Z")),
        ("end", json!(1784700000)),
        ("window", json!("24h")),
        ("cluster_id", json!("SaaS02")),
        ("ticket", json!("APID-1")),
        ("account", json!("other")),
        ("url", json!("https://grafana.example")),
        ("host", json!("grafana.example")),
        ("target", json!("monica")),
    ] {
        let mut args = one_query("wetech", "tidb_cpu", "up");
        args[key] = value;
        let r = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope()).unwrap_err();
        assert_eq!(r.class(), FailureClass::PolicyViolation, "{key}");
        assert!(
            r.failure
                .correction
                .instruction
                .contains(&format!("leave `{key}` out")),
            "{key}"
        );
    }
    for (expr, code) in [
        ("rate(tidb_cpu[2h])", "window_violation"),
        ("tidb_cpu offset -5m", "window_violation"),
        ("tidb_cpu @ 1784600000", "window_violation"),
        ("max_over_time(tidb_cpu[2h:1m])", "window_violation"),
        ("tidb_cpu{cluster_id=~\"SaaS.*\"}", "scope_violation"),
        ("info(tidb_cpu)", "unsupported_promql"),
        ("rate(tidb_cpu[5m", "promql_parse_error"),
    ] {
        let r = lock(
            &policy,
            PolicySource::TrustedEnvelope,
            &one_query("wetech", "tidb_cpu", expr),
            &scope(),
        )
        .unwrap_err();
        assert_eq!(r.code().as_str(), code, "{expr}");
        assert!(r.request_digest.is_some(), "{expr}");
    }
    let ok = lock(
        &policy,
        PolicySource::TrustedEnvelope,
        &one_query(
            "wetech",
            "tidb_cpu",
            "max_over_time(rate(tidb_cpu[5m])[30m:1m] @ end()) or rate(tidb_cpu[5m] offset 30m)",
        ),
        &scope(),
    )
    .unwrap();
    check_locked(ok.single().unwrap(), &policy).unwrap();
}

/// The Manus target comes from the policy (a `target` argument is a `policy_violation`);
/// the locked query keeps its `instanceRef`, whose address binds as an `instance` matcher
/// beside the cluster scope; a value that is no reference is `invalid_instance_ref`, and
/// Clinic and Wetech accept no `instanceRef`.
#[test]
fn manus_target_comes_from_policy_and_instance_refs_bind() {
    let policy = apid_29213("manus");
    let args = json!({"queryId": "tidb_cpu", "expr": "rate(process_cpu_seconds_total[1m])", "instanceRef": "mref1.AbC_-9="});
    let locked = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope()).unwrap();
    let q = locked.single().unwrap();
    assert_eq!(q.instance_ref.as_deref(), Some("mref1.AbC_-9="));
    let bound = bind_label(&q.expr, "instance", "10.0.0.7:10080").unwrap();
    assert_eq!(
        bound,
        r#"rate(process_cpu_seconds_total{cluster_id="SaaS01",instance="10.0.0.7:10080"}[1m])"#
    );
    let mut other = args.clone();
    other["target"] = json!("monica");
    assert_eq!(
        lock(&policy, PolicySource::TrustedEnvelope, &other, &scope())
            .unwrap_err()
            .class(),
        FailureClass::PolicyViolation
    );
    let mut bad_ref = args.clone();
    bad_ref["instanceRef"] = json!("10.0.0.7:10080 ; drop");
    assert_eq!(
        lock(&policy, PolicySource::TrustedEnvelope, &bad_ref, &scope())
            .unwrap_err()
            .code()
            .as_str(),
        "invalid_instance_ref"
    );
    // Clinic and Wetech do not accept instance references.
    let wetech = apid_29213("wetech");
    let mut w = one_query("wetech", "tidb_cpu", "up");
    w["instanceRef"] = json!("mref1.x");
    assert_eq!(
        lock(&wetech, PolicySource::TrustedEnvelope, &w, &scope())
            .unwrap_err()
            .code()
            .as_str(),
        "unknown_argument"
    );
}
