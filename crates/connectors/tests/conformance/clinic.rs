//! The Clinic adapter, the conformance cases for it, and Clinic's own tests: the seed
//! figures through one batch, batch order and status, the cluster-scoped path.

use std::time::Duration;

use async_trait::async_trait;
use evidence_connectors::{
    ClinicConfig, ClinicConnector, ClinicSecrets, Connector, HostAllowlist, ResponseLimits,
};
use evidence_policy::{TrustedPolicy, lock, lock::LockedItem};
use evidence_result::{
    ErrorCode, FailureClass, PackageId, PolicySource, Provider, Status, ToolResult,
    evidence::EvidenceOutcome,
};
use evidence_test_support::{
    APID_29213_END, APID_29213_START, CPU_CLUSTER, ClinicFront, FaultControl, Fixture,
    MEMORY_CLUSTER, MEMORY_USED_PERCENT, Prometheus, ST_2865_END, ST_2865_START, TIDB_CPU,
    TIDB_MANY_TO_MANY, TIKV_NO_DATA,
};
use secrecy::SecretString;
use serde_json::{Value, json};
use url::Url;

use crate::cases::{
    self, Harness, OutputChecks, apid_policy, checked, close, scope, trusted_policy, view,
};

const TOKEN: &str = "clinic-token-5b0c2f9e41d7a8c3";

pub(crate) struct ClinicHarness {
    prometheus: Prometheus,
    front: ClinicFront,
    connector: ClinicConnector,
}

impl ClinicHarness {
    fn config(&self, limits: ResponseLimits) -> ClinicConfig {
        ClinicConfig::new(
            Url::parse(&self.front.base_url()).unwrap(),
            HostAllowlist::new(["127.0.0.1"]).unwrap(),
        )
        .with_limits(limits)
    }

    async fn call(
        &self,
        request: &evidence_policy::LockedRequest,
        config: &ClinicConfig,
    ) -> ToolResult {
        let secrets = ClinicSecrets::new(SecretString::from(TOKEN));
        self.connector
            .call(request, config, &secrets)
            .await
            .unwrap()
    }
}

#[async_trait]
impl Harness for ClinicHarness {
    async fn start() -> Self {
        let prometheus = Prometheus::start(Fixture::Main).await.unwrap();
        let front = ClinicFront::start(&prometheus.url(), SecretString::from(TOKEN))
            .await
            .unwrap();
        ClinicHarness {
            prometheus,
            front,
            connector: ClinicConnector::new().unwrap(),
        }
    }

    fn provider(&self) -> Provider {
        Provider::Clinic
    }

    fn package(&self) -> PackageId {
        PackageId::clinic()
    }

    fn fixture(&self) -> Fixture {
        Fixture::Main
    }

    fn args(&self, query_id: &str, expr: &str) -> Value {
        json!({"queries": [{"queryId": query_id, "expr": expr, "unit": "cores"}]})
    }

    async fn run(
        &self,
        request: &evidence_policy::LockedRequest,
        limits: ResponseLimits,
    ) -> ToolResult {
        self.call(request, &self.config(limits)).await
    }

    async fn run_with_bad_credentials(
        &self,
        request: &evidence_policy::LockedRequest,
    ) -> ToolResult {
        let secrets = ClinicSecrets::new(SecretString::from("not-the-clinic-token"));
        let config = self.config(ResponseLimits::default());
        self.connector
            .call(request, &config, &secrets)
            .await
            .unwrap()
    }

    async fn run_outside_allowlist(&self, request: &evidence_policy::LockedRequest) -> ToolResult {
        let mut config = self.config(ResponseLimits::default());
        config.allowlist = HostAllowlist::new(["clinic.internal.example"]).unwrap();
        self.call(request, &config).await
    }

    fn bad_credentials_class(&self) -> FailureClass {
        FailureClass::Authentication
    }

    fn faults(&self) -> &FaultControl {
        self.front.faults()
    }

    fn kill_provider(&self) {
        self.prometheus.kill();
    }

    fn requests(&self) -> usize {
        self.front.requests().len()
    }

    async fn run_with_evaluation_timeout(
        &self,
        request: &evidence_policy::LockedRequest,
        limits: ResponseLimits,
        evaluation_timeout: Duration,
    ) -> ToolResult {
        let mut config = self.config(limits);
        config.evaluation_timeout = Some(evaluation_timeout);
        self.call(request, &config).await
    }

    fn sent_timeouts(&self) -> Vec<String> {
        cases::sent_timeouts(&self.front.requests())
    }

    fn prometheus_url(&self) -> String {
        self.prometheus.url()
    }

    fn check_detail(&self, provider_text: &str, detail_error: &str) {
        assert_eq!(detail_error, provider_text);
    }
}

impl OutputChecks for ClinicHarness {
    fn secrets(&self) -> Vec<(String, SecretString)> {
        vec![(ClinicSecrets::TOKEN.to_owned(), SecretString::from(TOKEN))]
    }
}

conformance_suite!(ClinicHarness);

fn st_2865_policy(h: &ClinicHarness) -> TrustedPolicy {
    trusted_policy(
        &h.package(),
        h.provider(),
        MEMORY_CLUSTER,
        (ST_2865_START, ST_2865_END),
        json!({}),
    )
}

/// APID-29213: 56 series, top-instance peak 22.84 cores. ST-2865 in one batch: 261
/// series with a 78.64 % peak, then a TiKV query with no series, which is `no_data`
/// (unverified), never zero. The path is scoped to the policy's cluster.
#[tokio::test]
async fn seed_figures() {
    let h = ClinicHarness::start().await;
    let apid = cases::locked(&h, &apid_policy(&h), TIDB_CPU.name, TIDB_CPU.expr);
    let result = checked(&h, h.run(&apid, ResponseLimits::default()).await);
    let e = view(&result).evidence.unwrap();
    assert_eq!(e.series_count, 56);
    assert!(close(e.top_peak().unwrap(), 22.84));
    assert_eq!(e.unit.as_deref(), Some("cores"));
    assert_eq!(
        e.series[0].labels["instance"],
        Fixture::Main.tidb_instance(Fixture::Main.tidb_top_index())
    );

    let policy = st_2865_policy(&h);
    let args = json!({"queries": [
        {"queryId": MEMORY_USED_PERCENT.name, "expr": MEMORY_USED_PERCENT.expr, "unit": "%"},
        {"queryId": TIKV_NO_DATA.name, "expr": TIKV_NO_DATA.expr, "unit": "bytes"},
    ]});
    let request = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope()).unwrap();
    let result = checked(&h, h.run(&request, ResponseLimits::default()).await);
    let d = result.details();
    assert_eq!(d.status, Status::Ok, "{}", result.text());
    assert_eq!(d.items.len(), 2);
    let memory = d.items[0].evidence.as_ref().unwrap();
    assert_eq!(d.items[0].query_id.as_str(), MEMORY_USED_PERCENT.name);
    assert_eq!(memory.series_count, 261);
    assert_eq!(memory.point_count, 261 * 241);
    assert!(close(memory.top_peak().unwrap(), 78.64));
    assert!(memory.truncated);
    let tikv = d.items[1].evidence.as_ref().unwrap();
    assert_eq!(tikv.outcome, EvidenceOutcome::NoData);
    assert_eq!(tikv.series_count, 0);
    assert_eq!(tikv.top_peak(), None);
    assert!(result.text().contains(r#""outcome":"no_data""#));

    let recorded = h.front.requests();
    assert_eq!(recorded.len(), 3);
    assert!(recorded[0].path.contains("/clusters/SaaS01/"));
    for r in &recorded[1..] {
        assert_eq!(
            r.path,
            ClinicFront::QUERY_RANGE_PATH_TEMPLATE.replace("{cluster_id}", MEMORY_CLUSTER)
        );
        assert!(r.param("query").unwrap().contains(r#"cluster_id="SaaS02""#));
        assert_eq!(r.param("step"), Some("15"));
    }
}

/// A batch keeps request order whatever finishes first, runs lock-rejected items
/// nowhere, and has status `partial` when some items fail.
#[tokio::test]
async fn batch_order_and_partial_status() {
    let h = ClinicHarness::start().await;
    let policy = apid_policy(&h);
    let args = json!({"queries": [
        {"queryId": "slow_and_big", "expr": "sum by (instance) (rate(process_cpu_seconds_total[1m]))"},
        {"queryId": "rejected_by_server", "expr": TIDB_MANY_TO_MANY.expr},
        {"queryId": "rejected_locally", "expr": "rate(process_cpu_seconds_total[1m] offset 3h)"},
        {"queryId": "none", "expr": r#"tikv_engine_size_bytes{job="tikv"}"#},
        {"queryId": "tiny", "expr": "count(tidb_server_maxprocs)"},
    ]});
    let request = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope()).unwrap();
    assert!(matches!(request.items[2], LockedItem::Rejected { .. }));
    for concurrency in [1, 2, 8] {
        let before = h.front.requests().len();
        let config = h
            .config(ResponseLimits::default())
            .with_concurrency(concurrency);
        let result = checked(&h, h.call(&request, &config).await);
        let d = result.details();
        assert_eq!(d.status, Status::Partial);
        let ids: Vec<&str> = d.items.iter().map(|i| i.query_id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "slow_and_big",
                "rejected_by_server",
                "rejected_locally",
                "none",
                "tiny"
            ]
        );
        let statuses: Vec<Status> = d.items.iter().map(|i| i.status).collect();
        assert_eq!(
            statuses,
            [
                Status::Ok,
                Status::Error,
                Status::Error,
                Status::Ok,
                Status::Ok
            ]
        );
        assert_eq!(
            d.items[1].error.as_ref().unwrap().code,
            ErrorCode::http(Provider::Clinic, 422)
        );
        assert_eq!(
            d.items[2].error.as_ref().unwrap().code.as_str(),
            "window_violation"
        );
        assert!(d.items[3].evidence.as_ref().unwrap().is_no_data());
        assert_eq!(d.items[0].evidence.as_ref().unwrap().series_count, 56);
        let digests: std::collections::BTreeSet<_> =
            d.items.iter().map(|i| i.request_digest.unwrap()).collect();
        assert_eq!(digests.len(), 5);
        // Four queries ran; the locally rejected one sent nothing.
        assert_eq!(h.front.requests().len() - before, 4);
    }
}

/// A request locked for another package is refused before any request.
#[tokio::test]
async fn another_packages_request_is_refused() {
    let h = ClinicHarness::start().await;
    let manus = trusted_policy(
        &PackageId::manus(),
        Provider::Manus,
        CPU_CLUSTER,
        (APID_29213_START, APID_29213_END),
        json!({"manus_target": "vida"}),
    );
    let request = lock(
        &manus,
        PolicySource::TrustedEnvelope,
        &json!({"queryId": TIDB_CPU.name, "expr": TIDB_CPU.expr}),
        &scope(),
    )
    .unwrap();
    let result = checked(&h, h.run(&request, ResponseLimits::default()).await);
    let error = result.details().error.as_ref().unwrap();
    assert_eq!(
        (error.code.as_str(), error.class),
        ("clinic_wrong_package", FailureClass::Internal)
    );
    assert!(h.front.requests().is_empty());
}

/// A path template the provider does not serve (a plain Prometheus behind the default
/// Clinic path, a wrong prefix) answers 404: the item's text names the path that was
/// tried, not only the provider's "404 page not found".
#[tokio::test]
async fn a_404_names_the_path_it_tried() {
    let h = ClinicHarness::start().await;
    let request = cases::locked(&h, &apid_policy(&h), TIDB_CPU.name, TIDB_CPU.expr);
    let config = h
        .config(ResponseLimits::default())
        .with_query_path_template("/clusters/{cluster_id}/api/v1/query_range");
    let result = checked(&h, h.call(&request, &config).await);
    let item = &result.details().items[0];
    let error = item.error.as_ref().unwrap();
    assert_eq!(error.code, ErrorCode::http(Provider::Clinic, 404));
    let text = item.detail_error.as_deref().unwrap();
    assert!(
        text.starts_with("the provider has no path /clusters/SaaS01/api/v1/query_range (HTTP 404"),
        "{text}"
    );
}
