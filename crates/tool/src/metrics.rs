//! What a process of this crate counts, for operators, in Prometheus' own client
//! (`prometheus-client`): calls by package, status, class and code; each call's phases
//! (verify and lock, turn admission, slot wait, provider, guard, audit); calls running
//! and waiting for a slot; protocol sessions; HTTP requests and deliveries; the turn
//! ledger's and session store's latency and failures; audit write failures and blocked
//! outputs; and the build.
//!
//! Every shape records the same counters (the one-shot entrypoint, stdio, HTTP), in one
//! registry per process, [`global`]: an embedder reads it with [`Metrics::encode`], a
//! server over HTTP serves it at `/metrics` of its operator listener.
//!
//! No label value comes from the model or the provider: a package is one of the three
//! identities, a status, class or phase one of a fixed list, a code one of the contract's
//! codes ([`evidence_result::codes::known_code`]; any other is `other`), an HTTP status
//! a number and a refusal one of the server's fixed codes. Never an expression, a query
//! id, a policy id or a ticket.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use evidence_package::AuditRecord;
use evidence_result::{FailureClass, Status};

/// A phase of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Verifying the policy and locking the model's arguments (nothing sent).
    VerifyLock,
    /// Waiting for one of the server's call slots.
    SlotWait,
    /// The turn ledger's admission.
    Admission,
    /// The provider's answer, read and compacted as it streams.
    Provider,
    /// The output guard and the result's final form.
    Guard,
    /// Appending the audit record.
    Audit,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::VerifyLock => "verify_lock",
            Phase::SlotWait => "slot_wait",
            Phase::Admission => "admission",
            Phase::Provider => "provider",
            Phase::Guard => "guard",
            Phase::Audit => "audit",
        }
    }
}

/// A store the calls wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Store {
    /// The turn ledger.
    TurnLedger,
    /// The session store of a server over HTTP.
    SessionStore,
}

impl Store {
    fn name(self) -> &'static str {
        match self {
            Store::TurnLedger => "turn_ledger",
            Store::SessionStore => "session_store",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    package: String,
    status: &'static str,
    class: &'static str,
    code: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    package: String,
    phase: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PackageLabels {
    package: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    package: String,
    status: String,
    refused: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeliveryLabels {
    package: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    store: &'static str,
    backend: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    package: String,
    version: &'static str,
    digest: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReadyLabels {
    package: String,
    check: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn seconds() -> Histogram {
    // 0.5 ms to about 65 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 18))
}

/// The counters of one process (see the module documentation).
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    phases: Histograms<PhaseLabels>,
    running: Family<PackageLabels, Gauge>,
    waiting: Family<PackageLabels, Gauge>,
    slots: Family<PackageLabels, Gauge>,
    slot_waits: Family<PackageLabels, Counter>,
    sessions: Family<PackageLabels, Gauge>,
    http: Family<HttpLabels, Counter>,
    deliveries: Family<DeliveryLabels, Counter>,
    store_latency: Histograms<StoreLabels>,
    store_failures: Family<StoreLabels, Counter>,
    audit_failures: Family<PackageLabels, Counter>,
    blocked: Family<PackageLabels, Counter>,
    no_data: Family<PackageLabels, Counter>,
    traceparent_malformed: Family<PackageLabels, Counter>,
    build: Family<BuildLabels, Gauge>,
    ready: Family<ReadyLabels, Gauge>,
}

/// The registry of this process.
pub fn global() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// The label of an error code: the code when the contract lists it, else `other`.
fn code_label(code: &str) -> String {
    if evidence_result::codes::known_code(code).is_some() {
        code.to_owned()
    } else {
        "other".to_owned()
    }
}

fn class_label(class: Option<FailureClass>) -> &'static str {
    class.map_or("none", FailureClass::as_str)
}

fn status_label(status: Status) -> &'static str {
    match status {
        Status::Ok => "ok",
        Status::Partial => "partial",
        Status::Error => "error",
    }
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("evidence");
        let calls = Family::default();
        registry.register(
            "calls",
            "Calls answered, by package, status, failure class and error code (the first of a batch)",
            calls.clone(),
        );
        let phases: Histograms<PhaseLabels> = Family::new_with_constructor(seconds);
        registry.register(
            "call_phase_seconds",
            "Time of each phase of a call",
            phases.clone(),
        );
        let running = Family::default();
        registry.register(
            "calls_running",
            "Calls holding a call slot now",
            running.clone(),
        );
        let waiting = Family::default();
        registry.register(
            "calls_waiting",
            "Calls waiting for a call slot now",
            waiting.clone(),
        );
        let slots = Family::default();
        registry.register(
            "call_slots",
            "Call slots of the server (limits.concurrency)",
            slots.clone(),
        );
        let slot_waits = Family::default();
        registry.register(
            "slot_waits",
            "Calls that found every call slot taken and waited",
            slot_waits.clone(),
        );
        let sessions = Family::default();
        registry.register(
            "protocol_sessions",
            "MCP protocol sessions kept now",
            sessions.clone(),
        );
        let http = Family::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by status and refusal code",
            http.clone(),
        );
        let deliveries = Family::default();
        registry.register(
            "deliveries",
            "Envelope deliveries, by outcome",
            deliveries.clone(),
        );
        let store_latency: Histograms<StoreLabels> = Family::new_with_constructor(seconds);
        registry.register(
            "store_operation_seconds",
            "Time of each use of the turn ledger and the session store",
            store_latency.clone(),
        );
        let store_failures = Family::default();
        registry.register(
            "store_failures",
            "Uses of the turn ledger or the session store that failed",
            store_failures.clone(),
        );
        let audit_failures = Family::default();
        registry.register(
            "audit_write_failures",
            "Audit records that could not be written",
            audit_failures.clone(),
        );
        let blocked = Family::default();
        registry.register(
            "outputs_blocked",
            "Outputs the output guard blocked",
            blocked.clone(),
        );
        let no_data = Family::default();
        registry.register(
            "no_data_answers",
            "Answers (a call's, or a batch item's) that found no series: no_data, never zero",
            no_data.clone(),
        );
        let traceparent_malformed = Family::default();
        registry.register(
            "traceparent_malformed",
            "Calls whose W3C traceparent was malformed and ignored",
            traceparent_malformed.clone(),
        );
        let build = Family::default();
        registry.register(
            "build_info",
            "The package this process serves: identity, version and digest",
            build.clone(),
        );
        let ready = Family::default();
        registry.register(
            "ready",
            "1 when the readiness check passes, by check (the whole: all)",
            ready.clone(),
        );
        Metrics {
            registry,
            calls,
            phases,
            running,
            waiting,
            slots,
            slot_waits,
            sessions,
            http,
            deliveries,
            store_latency,
            store_failures,
            audit_failures,
            blocked,
            no_data,
            traceparent_malformed,
            build,
            ready,
        }
    }

    /// The text exposition (OpenMetrics) of every counter.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _written = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    /// One call answered, as its audit record says; `written` is whether the record was
    /// appended.
    pub(crate) fn call(&self, audit: &AuditRecord, written: bool) {
        let package = audit.package.as_str().to_owned();
        let labels = CallLabels {
            package: package.clone(),
            status: status_label(audit.status),
            class: class_label(audit.failure_class),
            code: audit
                .error_codes
                .first()
                .map_or_else(|| "none".to_owned(), |c| code_label(c.as_str())),
        };
        self.calls.get_or_create(&labels).inc();
        let package = PackageLabels { package };
        if audit.blocked {
            self.blocked.get_or_create(&package).inc();
        }
        if audit.no_data > 0 {
            self.no_data
                .get_or_create(&package)
                .inc_by(u64::from(audit.no_data));
        }
        if !written {
            self.audit_failures.get_or_create(&package).inc();
        }
    }

    /// A phase of a call of `package` took `took`.
    pub(crate) fn phase(&self, package: &str, phase: Phase, took: Duration) {
        let labels = PhaseLabels {
            package: package.to_owned(),
            phase: phase.name(),
        };
        self.phases
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// The call slots of `package`: `capacity`, `running` now, `waiting` now.
    pub(crate) fn slots(&self, package: &str, capacity: usize, running: usize, waiting: usize) {
        let labels = PackageLabels {
            package: package.to_owned(),
        };
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        self.slots.get_or_create(&labels).set(n(capacity));
        self.running.get_or_create(&labels).set(n(running));
        self.waiting.get_or_create(&labels).set(n(waiting));
    }

    /// A call of `package` found every slot taken.
    pub(crate) fn slot_wait(&self, package: &str) {
        self.slot_waits
            .get_or_create(&PackageLabels {
                package: package.to_owned(),
            })
            .inc();
    }

    /// The protocol sessions `package` keeps now.
    pub(crate) fn sessions(&self, package: &str, open: usize) {
        self.sessions
            .get_or_create(&PackageLabels {
                package: package.to_owned(),
            })
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    /// An HTTP request of `package` answered `status`, refused with `refused` (or not).
    pub(crate) fn http_request(&self, package: &str, status: u16, refused: Option<&'static str>) {
        let labels = HttpLabels {
            package: package.to_owned(),
            status: status.to_string(),
            refused: refused.unwrap_or("none"),
        };
        self.http.get_or_create(&labels).inc();
    }

    /// A delivery to `package` ended with `outcome` (`stored`, `unchanged` or the
    /// refusal's code).
    pub(crate) fn delivery(&self, package: &str, outcome: &'static str) {
        let labels = DeliveryLabels {
            package: package.to_owned(),
            outcome,
        };
        self.deliveries.get_or_create(&labels).inc();
    }

    /// A use of `store` (`backend`: `file` or `redis`) took `took`, and failed or not.
    pub(crate) fn store(&self, store: Store, backend: &'static str, took: Duration, failed: bool) {
        let labels = StoreLabels {
            store: store.name(),
            backend,
        };
        self.store_latency
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if failed {
            self.store_failures.get_or_create(&labels).inc();
        }
    }

    /// A call of `package` came with a malformed `traceparent`.
    pub(crate) fn traceparent_malformed(&self, package: &str) {
        self.traceparent_malformed
            .get_or_create(&PackageLabels {
                package: package.to_owned(),
            })
            .inc();
    }

    /// The package this process serves.
    pub(crate) fn build(&self, package: &str, digest: &str) {
        let labels = BuildLabels {
            package: package.to_owned(),
            version: env!("CARGO_PKG_VERSION"),
            digest: digest.to_owned(),
        };
        self.build.get_or_create(&labels).set(1);
    }

    /// The readiness of `package`: each check's outcome and the whole.
    pub(crate) fn ready(&self, package: &str, checks: &[(&'static str, bool)]) {
        let mut all = true;
        for (check, passed) in checks {
            all &= passed;
            let labels = ReadyLabels {
                package: package.to_owned(),
                check,
            };
            self.ready.get_or_create(&labels).set(i64::from(*passed));
        }
        let labels = ReadyLabels {
            package: package.to_owned(),
            check: "all",
        };
        self.ready.get_or_create(&labels).set(i64::from(all));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Every label value of an exposition.
    fn label_values(exposition: &str) -> Vec<String> {
        let mut values = Vec::new();
        for line in exposition.lines().filter(|l| !l.starts_with('#')) {
            let Some((_, labels)) = line.split_once('{') else {
                continue;
            };
            let labels = labels.split('}').next().unwrap_or_default();
            let mut rest = labels;
            while let Some((_, after)) = rest.split_once("=\"") {
                let (value, more) = after.split_once('"').unwrap_or((after, ""));
                values.push(value.to_owned());
                rest = more;
            }
        }
        values
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever a call's record holds that came from the model or the provider
        /// (query ids, request digests, the policy id and ticket, error codes the contract
        /// does not list, the secrets a guard matched, an operator's detail), no label
        /// value of the exposition is ever one of those texts.
        #[test]
        fn no_label_value_comes_from_the_model_or_the_provider(
            words in proptest::collection::vec("[a-z][a-z0-9_]{2,24}", 6),
            status in prop_oneof![Just("ok"), Just("partial"), Just("error")],
            no_data in 0..3_u32,
        ) {
            let record = json!({
                "time": "2026-12-06T00:00:00Z",
                "stream": "auto_oncall.managed_auto_oncall_clinic",
                "package": "managed_auto_oncall_clinic",
                "policy_id": format!("pol-{}", words[0]),
                "ticket": format!("T-{}", words[1]),
                "query_ids": [words[2].clone()],
                "request_digests": [],
                "status": status,
                "failure_class": "query_rejected",
                "error_codes": [format!("zz_{}", words[3])],
                "duration_ms": 3,
                "output_bytes": 10,
                "blocked": true,
                "blocked_secrets": [words[4].clone()],
                "unguarded": [],
                "folder_changed": false,
                "cancelled": false,
                "operator_detail": words[5].clone(),
                "no_data": no_data,
            });
            let audit: AuditRecord = serde_json::from_value(record).unwrap();
            let metrics = Metrics::new();
            metrics.call(&audit, false);
            metrics.phase(audit.package.as_str(), Phase::Provider, Duration::from_millis(3));
            let exposition = metrics.encode();
            let values = label_values(&exposition);
            prop_assert!(values.iter().any(|v| v == "other"), "{}", exposition);
            let from_outside = [
                audit.policy_id.clone().unwrap_or_default(),
                audit.ticket.clone().unwrap_or_default(),
                words[2].clone(),
                format!("zz_{}", words[3]),
                words[4].clone(),
                words[5].clone(),
            ];
            for text in &from_outside {
                prop_assert!(!values.contains(text), "{} in {}", text, exposition);
            }
        }
    }

    #[test]
    fn a_listed_code_is_its_own_label_and_the_exposition_is_openmetrics() {
        let metrics = Metrics::new();
        let record = json!({
            "time": "2026-12-06T00:00:00Z", "stream": "s", "package": "managed_auto_oncall_manus",
            "query_ids": [], "request_digests": [], "status": "error",
            "failure_class": "policy_violation", "error_codes": ["scope_violation"],
            "duration_ms": 1, "output_bytes": 1, "blocked": false, "blocked_secrets": [],
            "unguarded": [], "folder_changed": false, "cancelled": false,
        });
        metrics.call(&serde_json::from_value(record).unwrap(), true);
        let text = metrics.encode();
        assert!(
            text.contains(
                "evidence_calls_total{package=\"managed_auto_oncall_manus\",status=\"error\",\
                 class=\"policy_violation\",code=\"scope_violation\"} 1"
            ),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
