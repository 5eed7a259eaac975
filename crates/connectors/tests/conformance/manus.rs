//! The Manus adapter, the conformance cases for it, and Manus's own tests: opaque
//! references (returned for addresses, passed back, refused for the other target,
//! after an edit, key expiry or key removal), key rotation, and the session bootstrap.

use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use evidence_connectors::{
    Connector, HostAllowlist, ManusConfig, ManusConnector, ManusSecrets, ReferenceKeyRing,
    ResponseLimits, reference::ReferenceScope,
};
use evidence_policy::{LockedRequest, ManusTarget, TrustedPolicy, lock};
use evidence_result::{FailureClass, PackageId, PolicySource, Provider, Status, ToolResult};
use evidence_test_support::{
    APID_29213_END, APID_29213_START, CPU_CLUSTER, Fault, FaultControl, Fixture, MEMORY_CLUSTER,
    MEMORY_MANY_TO_MANY, MEMORY_USED_PERCENT, ManusFront, ManusTargets, Prometheus, ST_2865_END,
    ST_2865_START, TIDB_CPU,
};
use regex::Regex;
use secrecy::SecretString;
use serde_json::{Value, json};
use url::Url;

use crate::cases::{
    Harness, OutputChecks, View, checked, close, provider_error_text_at, scope, trusted_policy,
    view,
};

pub(crate) const USERNAME: &str = "manus-oncall-reader";
pub(crate) const PASSWORD: &str = "manus-password-3f9a7c21";
pub(crate) const PACKAGE: &str = "managed_auto_oncall_manus";

fn key(byte: u8) -> String {
    STANDARD.encode([byte; 32])
}

/// The reference key ring as injected (`MANUS_REF_KEYS`): current key first.
pub(crate) fn ref_keys_text() -> String {
    format!("k2026b:{},k2026a:{}", key(0x5a), key(0xa5))
}

pub(crate) fn secrets_with(keys: &str) -> ManusSecrets {
    ManusSecrets::new(
        SecretString::from(USERNAME),
        SecretString::from(PASSWORD),
        ReferenceKeyRing::parse(keys).unwrap(),
    )
}

/// Addresses of the Manus fixtures (`10.21.…` for vida, `10.42.…` for monica).
static FIXTURE_ADDRESS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"10\.(21|42)\.\d{1,3}\.\d{1,3}").unwrap());

/// A Manus target over its real Prometheus, for the conformance cases.
pub(crate) struct ManusHarness {
    prometheus: Prometheus,
    pub(crate) front: ManusFront,
    pub(crate) connector: ManusConnector,
}

pub(crate) fn config_for(
    targets: &[(ManusTarget, &ManusFront)],
    limits: ResponseLimits,
) -> ManusConfig {
    let mut config =
        ManusConfig::new(HostAllowlist::new(["127.0.0.1"]).unwrap()).with_limits(limits);
    for (target, front) in targets {
        config = config.with_target(*target, Url::parse(&front.base_url()).unwrap());
    }
    config
}

impl ManusHarness {
    fn config(&self, limits: ResponseLimits) -> ManusConfig {
        config_for(&[(ManusTarget::Vida, &self.front)], limits)
    }

    /// The harness over `prometheus`.
    pub(crate) async fn over(prometheus: Prometheus) -> Self {
        let front = ManusFront::start(
            "vida",
            &prometheus.url(),
            SecretString::from(USERNAME),
            SecretString::from(PASSWORD),
        )
        .await
        .unwrap();
        ManusHarness {
            prometheus,
            front,
            connector: ManusConnector::new().unwrap(),
        }
    }
}

#[async_trait]
impl Harness for ManusHarness {
    async fn start() -> Self {
        ManusHarness::over(Prometheus::start(Fixture::Vida).await.unwrap()).await
    }

    fn provider(&self) -> Provider {
        Provider::Manus
    }

    fn package(&self) -> PackageId {
        PackageId::manus()
    }

    fn fixture(&self) -> Fixture {
        Fixture::Vida
    }

    fn args(&self, query_id: &str, expr: &str) -> Value {
        json!({"queryId": query_id, "expr": expr})
    }

    fn policy_extras(&self) -> Value {
        json!({"manus_target": "vida"})
    }

    async fn run(&self, request: &LockedRequest, limits: ResponseLimits) -> ToolResult {
        let secrets = secrets_with(&ref_keys_text());
        self.connector
            .call(request, &self.config(limits), &secrets)
            .await
            .unwrap()
    }

    async fn run_with_bad_credentials(&self, request: &LockedRequest) -> ToolResult {
        let secrets = ManusSecrets::new(
            SecretString::from(USERNAME),
            SecretString::from("not-the-manus-password"),
            ReferenceKeyRing::parse(&ref_keys_text()).unwrap(),
        );
        let config = self.config(ResponseLimits::default());
        self.connector
            .call(request, &config, &secrets)
            .await
            .unwrap()
    }

    async fn run_outside_allowlist(&self, request: &LockedRequest) -> ToolResult {
        let mut config = self.config(ResponseLimits::default());
        config.allowlist = HostAllowlist::new(["vida.manus.example"]).unwrap();
        let secrets = secrets_with(&ref_keys_text());
        self.connector
            .call(request, &config, &secrets)
            .await
            .unwrap()
    }

    fn bad_credentials_class(&self) -> FailureClass {
        FailureClass::SessionBootstrap
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
        request: &LockedRequest,
        limits: ResponseLimits,
        evaluation_timeout: Duration,
    ) -> ToolResult {
        let mut config = self.config(limits);
        config.evaluation_timeout = Some(evaluation_timeout);
        let secrets = secrets_with(&ref_keys_text());
        self.connector
            .call(request, &config, &secrets)
            .await
            .unwrap()
    }

    fn sent_timeouts(&self) -> Vec<String> {
        crate::cases::sent_timeouts(&self.front.requests())
    }

    fn prometheus_url(&self) -> String {
        self.prometheus.url()
    }

    /// The detail is the provider's complete text with each address sealed: opening
    /// every sealed value gives back exactly the provider's text.
    fn check_detail(&self, provider_text: &str, detail_error: &str) {
        assert_eq!(unseal(detail_error, ManusTarget::Vida), provider_text);
    }
}

impl OutputChecks for ManusHarness {
    fn secrets(&self) -> Vec<(String, SecretString)> {
        ManusOutput.secrets()
    }

    fn check_output(&self, result: &ToolResult) {
        ManusOutput.check_output(result);
    }
}

conformance_suite!(ManusHarness);

/// The output checks of every Manus result: no injected secret (credentials and
/// reference keys) and no instance address of either target.
pub(crate) struct ManusOutput;

impl OutputChecks for ManusOutput {
    fn secrets(&self) -> Vec<(String, SecretString)> {
        vec![
            ("manus_username".to_owned(), SecretString::from(USERNAME)),
            ("manus_password".to_owned(), SecretString::from(PASSWORD)),
            (
                "manus_ref_keys".to_owned(),
                SecretString::from(ref_keys_text()),
            ),
            (
                "manus_ref_key_current".to_owned(),
                SecretString::from(key(0x5a)),
            ),
            (
                "manus_ref_key_previous".to_owned(),
                SecretString::from(key(0xa5)),
            ),
        ]
    }

    fn check_output(&self, result: &ToolResult) {
        let json = result.to_json().unwrap();
        assert!(
            !FIXTURE_ADDRESS.is_match(&json),
            "an instance address reached the output: {json}"
        );
    }
}

/// Replaces every sealed label value in `text` by the address it opens to.
fn unseal(text: &str, target: ManusTarget) -> String {
    let keys = ReferenceKeyRing::parse(&ref_keys_text()).unwrap();
    let pair = Regex::new(r#"([A-Za-z_][A-Za-z0-9_]*)="([A-Za-z0-9_-]+)""#).unwrap();
    pair.replace_all(text, |c: &regex::Captures<'_>| {
        let scope = ReferenceScope {
            target: target.as_str(),
            package: PACKAGE,
            purpose: &c[1],
        };
        match keys.open(&c[2], scope, 0) {
            Ok(address) => format!("{}=\"{address}\"", &c[1]),
            Err(_) => c[0].to_owned(),
        }
    })
    .into_owned()
}

fn open(reference: &str, target: ManusTarget, purpose: &str) -> Option<String> {
    let keys = ReferenceKeyRing::parse(&ref_keys_text()).unwrap();
    let scope = ReferenceScope {
        target: target.as_str(),
        package: PACKAGE,
        purpose,
    };
    keys.open(reference, scope, 0).ok()
}

/// Both targets, each with its own real Prometheus and front.
struct Both {
    targets: ManusTargets,
    connector: ManusConnector,
}

impl Both {
    async fn start() -> Self {
        Both {
            targets: ManusTargets::start(
                &SecretString::from(USERNAME),
                &SecretString::from(PASSWORD),
            )
            .await
            .unwrap(),
            connector: ManusConnector::new().unwrap(),
        }
    }

    fn config(&self) -> ManusConfig {
        config_for(
            &[
                (ManusTarget::Vida, &self.targets.vida.front),
                (ManusTarget::Monica, &self.targets.monica.front),
            ],
            ResponseLimits::default(),
        )
    }

    async fn call(&self, request: &LockedRequest, config: &ManusConfig, keys: &str) -> ToolResult {
        let result = self
            .connector
            .call(request, config, &secrets_with(keys))
            .await
            .unwrap();
        checked(&ManusOutput, result)
    }
}

pub(crate) fn policy(target: ManusTarget, cluster: &str, window: (i64, i64)) -> TrustedPolicy {
    trusted_policy(
        &PackageId::manus(),
        Provider::Manus,
        cluster,
        window,
        json!({"manus_target": target.as_str()}),
    )
}

fn apid(target: ManusTarget) -> TrustedPolicy {
    policy(target, CPU_CLUSTER, (APID_29213_START, APID_29213_END))
}

fn lock_args(policy: &TrustedPolicy, args: Value) -> LockedRequest {
    lock(policy, PolicySource::TrustedEnvelope, &args, &scope()).unwrap()
}

/// The follow-up of an instance reference: TiDB CPU of that one instance.
const FOLLOW_UP: &str = r#"sum by (instance) (rate(process_cpu_seconds_total{job="tidb"}[1m]))"#;

fn assert_invalid_reference(v: &View) {
    assert_eq!(v.status, Status::Error);
    assert_eq!(v.code(), "invalid_reference");
    assert_eq!(v.class(), FailureClass::InvalidArgument);
    assert_eq!(
        v.detail(),
        "invalid reference: use an instanceRef returned by this tool for this target"
    );
    let c = v.correction();
    assert!(c.allowed);
    assert!(
        c.instruction
            .contains("instanceRef returned by this tool for this target")
    );
    assert!(c.keep.iter().any(|k| k == "target"));
}

/// The vida query returns addresses only as references; one passed back binds a
/// bounded follow-up to that instance; the same reference is refused on monica before
/// any request to monica.
#[tokio::test]
async fn references_round_trip_on_vida_and_fail_on_monica() {
    let both = Both::start().await;
    let config = both.config();
    let keys = ref_keys_text();

    let first = lock_args(
        &apid(ManusTarget::Vida),
        json!({"queryId": TIDB_CPU.name, "expr": TIDB_CPU.expr}),
    );
    let result = both.call(&first, &config, &keys).await;
    let v = view(&result);
    let e = v.evidence();
    assert_eq!(e.series_count, 56);
    assert!(close(e.top_peak().unwrap(), 22.84));
    let top = &e.series[0].labels["instance"];
    assert_eq!(
        open(top, ManusTarget::Vida, "instance").as_deref(),
        Some(
            Fixture::Vida
                .tidb_instance(Fixture::Vida.tidb_top_index())
                .as_str()
        )
    );
    assert!(
        e.series
            .iter()
            .all(|s| open(&s.labels["instance"], ManusTarget::Vida, "instance").is_some())
    );
    assert_eq!(both.targets.vida.front.sessions_issued(), 1);

    // Passed back: the query runs bound to exactly that instance.
    let follow = lock_args(
        &apid(ManusTarget::Vida),
        json!({"queryId": "tidb_cpu_top", "expr": FOLLOW_UP, "instanceRef": top}),
    );
    let result = both.call(&follow, &config, &keys).await;
    let w = view(&result);
    let e = w.evidence();
    assert_eq!(e.series_count, 1, "{}", result.text());
    assert!(close(e.top_peak().unwrap(), 22.84));
    assert_eq!(
        open(
            &e.series[0].labels["instance"],
            ManusTarget::Vida,
            "instance"
        ),
        open(top, ManusTarget::Vida, "instance")
    );
    assert!(e.expr.as_deref().unwrap().contains("instance=\""));
    let recorded = both.targets.vida.front.requests();
    let sent = recorded.last().unwrap().param("query").unwrap().to_owned();
    assert_eq!(
        sent,
        format!(
            r#"sum by (instance) (rate(process_cpu_seconds_total{{cluster_id="SaaS01",instance="{}",job="tidb"}}[1m]))"#,
            Fixture::Vida.tidb_instance(7)
        )
    );
    assert_ne!(w.request_digest, v.request_digest);

    // The same reference against monica: invalid_reference, and monica sees nothing.
    let on_monica = lock_args(
        &apid(ManusTarget::Monica),
        json!({"queryId": "tidb_cpu_top", "expr": FOLLOW_UP, "instanceRef": top}),
    );
    let result = both.call(&on_monica, &config, &keys).await;
    assert_invalid_reference(&view(&result));
    assert!(both.targets.monica.front.requests().is_empty());
    assert_eq!(both.targets.monica.front.sessions_issued(), 0);
}

/// An edited reference, an expired one, one whose key was removed, and one made from
/// another label all give the same `invalid_reference`, before any request.
#[tokio::test]
async fn every_bad_reference_is_the_same_error() {
    let both = Both::start().await;
    let vida = &both.targets.vida.front;
    let keys = ref_keys_text();
    let memory_policy = policy(
        ManusTarget::Vida,
        MEMORY_CLUSTER,
        (ST_2865_START, ST_2865_END),
    );
    let memory = lock_args(
        &memory_policy,
        json!({"queryId": MEMORY_USED_PERCENT.name, "expr": MEMORY_USED_PERCENT.expr}),
    );
    // A current key valid for 3 s more: long enough for the next call, then it expires
    // and its references stop opening.
    let last_second = jiff::Timestamp::now().as_second() + 3;
    let short_lived = format!("k2026b:{}:{last_second},k2026a:{}", key(0x5a), key(0xa5));
    let result = both.call(&memory, &both.config(), &short_lived).await;
    let e = view(&result).evidence.unwrap();
    assert_eq!(e.series_count, 261);
    assert!(close(e.top_peak().unwrap(), 78.64));
    let labels = &e.series[0].labels;
    let instance = labels["instance"].clone();
    let host_ip = labels["host_ip"].clone();
    let top = Fixture::Vida.memory_top_index();
    assert_eq!(
        open(&host_ip, ManusTarget::Vida, "host_ip"),
        Some(Fixture::Vida.memory_host(top))
    );
    assert_eq!(labels["job"], "node");

    let follow = r#"100 * (1 - node_memory_MemAvailable_bytes{job="node"} / node_memory_MemTotal_bytes{job="node"})"#;
    let attempt = |reference: &str| {
        lock_args(
            &memory_policy,
            json!({"queryId": "memory_top", "expr": follow, "instanceRef": reference}),
        )
    };
    // Valid now, bound to the one instance.
    let result = both
        .call(&attempt(&instance), &both.config(), &short_lived)
        .await;
    assert_eq!(view(&result).evidence().series_count, 1);

    let mut edited = instance.clone().into_bytes();
    let last = edited.len() - 1;
    edited[last] = if edited[last] == b'A' { b'B' } else { b'A' };
    let edited = String::from_utf8(edited).unwrap();
    let removed = format!("k2026c:{}", key(0x33));
    let before = vida.requests().len();
    for (what, reference, keys) in [
        ("edited", edited.as_str(), keys.as_str()),
        ("another label", host_ip.as_str(), keys.as_str()),
        ("key removed", instance.as_str(), removed.as_str()),
    ] {
        let result = both.call(&attempt(reference), &both.config(), keys).await;
        assert_invalid_reference(&view(&result));
        assert_eq!(vida.requests().len(), before, "{what}: nothing may be sent");
    }
    while jiff::Timestamp::now().as_second() <= last_second {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let result = both
        .call(&attempt(&instance), &both.config(), &short_lived)
        .await;
    assert_invalid_reference(&view(&result));
    assert_eq!(
        vida.requests().len(),
        before,
        "expired: nothing may be sent"
    );
}

/// Keys rotate: a reference sealed under the old current key still works once a new
/// key is current (the old one listed), and stops working when the old key is removed.
#[tokio::test]
async fn key_rotation() {
    let both = Both::start().await;
    let old_only = format!("k2026a:{}", key(0xa5));
    let rotated = format!("k2026b:{},k2026a:{}", key(0x5a), key(0xa5));
    let new_only = format!("k2026b:{}", key(0x5a));
    let first = lock_args(
        &apid(ManusTarget::Vida),
        json!({"queryId": TIDB_CPU.name, "expr": TIDB_CPU.expr}),
    );
    let result = both.call(&first, &both.config(), &old_only).await;
    let old_ref = view(&result).evidence().series[0].labels["instance"].clone();
    let follow = lock_args(
        &apid(ManusTarget::Vida),
        json!({"queryId": "tidb_cpu_top", "expr": FOLLOW_UP, "instanceRef": old_ref}),
    );
    let result = both.call(&follow, &both.config(), &rotated).await;
    let e = view(&result).evidence.unwrap();
    assert_eq!(e.series_count, 1);
    // New references are sealed with the new current key.
    let new_ref = &e.series[0].labels["instance"];
    let scope = ReferenceScope {
        target: "vida",
        package: PACKAGE,
        purpose: "instance",
    };
    let new_keys = ReferenceKeyRing::parse(&new_only).unwrap();
    assert!(new_keys.open(new_ref, scope, 0).is_ok());
    let result = both.call(&follow, &both.config(), &new_only).await;
    assert_invalid_reference(&view(&result));
}

/// A target without a configured base URL is refused before any request.
async fn assert_unconfigured_target_is_refused(both: &Both, keys: &str) {
    let monica_only_vida_configured = lock_args(
        &apid(ManusTarget::Monica),
        json!({"queryId": TIDB_CPU.name, "expr": TIDB_CPU.expr}),
    );
    let vida_only = config_for(
        &[(ManusTarget::Vida, &both.targets.vida.front)],
        ResponseLimits::default(),
    );
    let v = view(
        &both
            .call(&monica_only_vida_configured, &vida_only, keys)
            .await,
    );
    assert_eq!(
        (v.class(), v.code()),
        (FailureClass::Internal, "manus_invalid_configuration")
    );
    assert!(both.targets.monica.front.requests().is_empty());
}

/// Refused credentials: `session_bootstrap` with the provider's 401 and its words, the
/// path that was tried, never the password, and no correction.
fn assert_refused_credentials(v: &View) {
    assert_eq!(v.class(), FailureClass::SessionBootstrap);
    assert_eq!(v.code(), "manus_session_http_401");
    assert_eq!(v.error().http_status, Some(401));
    assert!(v.detail().contains("invalid_credentials"), "{}", v.detail());
    assert!(
        v.detail()
            .starts_with("the session bootstrap POST /api/v1/session was refused"),
        "{}",
        v.detail()
    );
    assert!(!v.detail().contains("manus-wrong-password"));
    assert!(!v.correction().allowed);
}

/// The session bootstrap: refused credentials, an unavailable or broken bootstrap
/// endpoint are `session_bootstrap` (shared, stop the turn) and no query is sent; a
/// query refused after a good bootstrap is `authentication`.
#[tokio::test]
async fn session_bootstrap_failures() {
    let both = Both::start().await;
    let vida = &both.targets.vida.front;
    let keys = ref_keys_text();
    let request = lock_args(
        &apid(ManusTarget::Vida),
        json!({"queryId": TIDB_CPU.name, "expr": TIDB_CPU.expr}),
    );
    let query_requests = || {
        vida.requests()
            .iter()
            .filter(|r| r.path == ManusFront::QUERY_RANGE_PATH)
            .count()
    };

    let wrong = ManusSecrets::new(
        SecretString::from(USERNAME),
        SecretString::from("manus-wrong-password"),
        ReferenceKeyRing::parse(&keys).unwrap(),
    );
    let result = checked(
        &ManusOutput,
        both.connector
            .call(&request, &both.config(), &wrong)
            .await
            .unwrap(),
    );
    assert_refused_credentials(&view(&result));

    for (fault, code) in [
        (Fault::Status(503), "manus_session_http_503"),
        (Fault::NonJson, "manus_session_invalid_response"),
    ] {
        vida.login_faults().set_fault(fault);
        let v = view(&both.call(&request, &both.config(), &keys).await);
        assert_eq!(
            (v.class(), v.code()),
            (FailureClass::SessionBootstrap, code)
        );
        assert!(v.error().body_digest.is_some());
    }
    vida.login_faults().clear();
    vida.login_faults().set_delay(Duration::from_millis(1500));
    let slow = both.config().with_limits(ResponseLimits {
        timeout: Duration::from_millis(300),
        ..ResponseLimits::default()
    });
    let v = view(&both.call(&request, &slow, &keys).await);
    assert_eq!(
        (v.class(), v.code()),
        (FailureClass::SessionBootstrap, "manus_session_timeout")
    );
    vida.login_faults().clear();
    // A session path the provider does not serve (a plain Prometheus has none): the
    // 404 names the path that was tried.
    let mut elsewhere = both.config();
    elsewhere.session_path = "/api/v2/login".to_owned();
    let v = view(&both.call(&request, &elsewhere, &keys).await);
    assert_eq!(
        (v.class(), v.code()),
        (FailureClass::SessionBootstrap, "manus_session_http_404")
    );
    assert!(
        v.detail()
            .starts_with("the session bootstrap POST /api/v2/login was refused with HTTP 404"),
        "{}",
        v.detail()
    );
    assert_eq!(query_requests(), 0, "no query without a session");

    // A session that the query route does not accept: authentication, no retry.
    let mut config = both.config();
    config.session_header = "x-other-session".to_owned();
    let issued = vida.sessions_issued();
    let v = view(&both.call(&request, &config, &keys).await);
    assert_eq!(v.class(), FailureClass::Authentication);
    assert_eq!(v.code(), "manus_http_401");
    assert!(v.detail().contains("session_invalid"));
    assert_eq!(
        vida.sessions_issued(),
        issued + 1,
        "one bootstrap, no retry"
    );
    assert_eq!(query_requests(), 1);

    assert_unconfigured_target_is_refused(&both, &keys).await;
}

/// The 422 text of a memory many-to-many lists series with their instance and host
/// addresses: the model gets the complete text with every address sealed.
#[tokio::test]
async fn provider_text_addresses_are_sealed() {
    let both = Both::start().await;
    let memory_policy = policy(
        ManusTarget::Vida,
        MEMORY_CLUSTER,
        (ST_2865_START, ST_2865_END),
    );
    let request = lock_args(
        &memory_policy,
        json!({"queryId": "memory_ratio", "expr": MEMORY_MANY_TO_MANY.expr}),
    );
    let result = both.call(&request, &both.config(), &ref_keys_text()).await;
    let v = view(&result);
    assert_eq!(v.code(), "manus_http_422");
    let raw = provider_error_text_at(&both.targets.vida.prometheus.url(), &request).await;
    assert!(
        FIXTURE_ADDRESS.is_match(&raw),
        "the provider text names addresses: {raw}"
    );
    assert!(raw.contains("host_ip="), "{raw}");
    assert_eq!(unseal(v.detail(), ManusTarget::Vida), raw);
    assert!(v.detail().contains("many-to-many matching not allowed"));
}
