//! The turn ledger the package servers of one evidence turn share. The turn is what the
//! trusted policy names: its `policy_id` (the runtime issues the envelopes of one
//! evidence turn, one per package, under one `policy_id`). It holds no secret and no
//! evidence: admitted calls (package, `queryId`s, request digests) and their outcomes
//! (per attempt: `queryId`, digest, outcome, code and class), as [`entry::Entry`]
//! values, and how many calls were refused, by code ([`refusals`]). A refusal changes
//! nothing in a turn, so it is counted, not appended: what a turn stores is bounded by
//! its admitted calls (`max_calls_per_turn`), however often a model retries, and an
//! admission, which reads none of the counts, costs the same however many refusals came
//! before.
//!
//! Two stores keep it, chosen by what `EVIDENCE_TURN_LEDGER` names: a directory
//! ([`file`], one host, the default) or a Redis that servers on several hosts share
//! (`redis://` or `rediss://`, [`redis`]). Both admit a call the same way, in one step
//! no other admission of the turn can interleave with: the turn is rebuilt from its
//! entries with the same [`Turn`] the embedder API uses ([`rebuild`]), the call judged
//! by [`Turn::admit`], and the admission appended or the refusal counted. The file store
//! does that under an exclusive `flock` of the turn's file; the Redis store writes with
//! a script that writes only when the turn still holds exactly the entries the call was
//! judged on, and judges it again otherwise. The stores only store and order entries:
//! the rules are `Turn`'s alone.
//!
//! An admitted call holds a running mark until its answer is appended: the lock of its
//! running file (file store, released when its process ends) or a lease that ends with
//! the call's deadline and margin (Redis store, as Redis sees time). A call logged as
//! admitted whose mark is gone belongs to a process that ended between the admission
//! and its answer, and the next admission appends it as abandoned (a failure of class
//! `internal` for its queries), so the ledger stays consistent after a crash. Nothing is
//! held while a call runs, so the servers' calls run at once.

pub(crate) mod entry;
mod error;
pub(crate) mod file;
mod judge;
pub(crate) mod rebuild;
pub(crate) mod redis;
pub(crate) mod refusals;

#[cfg(test)]
use std::path::PathBuf;

use evidence_materialize::{Call, Refusal};
use evidence_result::ToolResult;

use entry::{Entry, answer_entry};
use judge::Ruled;

pub(crate) use error::LedgerError;
pub(crate) use file::FileLedger;
pub(crate) use judge::TurnSpec;
pub(crate) use redis::RedisLedger;

/// The turn ledger of a context: a directory, or a shared Redis (see the module
/// documentation).
#[derive(Debug, Clone)]
pub(crate) enum TurnLedger {
    /// One host: a directory of JSON-lines files.
    File(FileLedger),
    /// Several hosts: a Redis.
    Redis(RedisLedger),
}

/// The ledger's answer to a call.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// Run the call, then log its answer ([`RunningCall::answer`]).
    Run(RunningCall),
    /// Do not run it; the refusal is counted.
    Refused(Box<Refusal>),
}

/// An admitted call until its answer is logged: holds its running mark.
#[derive(Debug)]
pub(crate) struct RunningCall {
    call: u32,
    hold: Hold,
}

/// The running mark of an admitted call in its store.
#[derive(Debug)]
enum Hold {
    File(file::Running),
    Redis(redis::Running),
}

impl TurnLedger {
    /// The ledger in the directory `dir` (not opened yet).
    #[cfg(test)]
    pub(crate) fn new(dir: PathBuf) -> Self {
        TurnLedger::File(FileLedger::new(dir))
    }

    /// Whether the ledger can be used now: its directory there, or its Redis reachable,
    /// durable and answering.
    pub(crate) fn check(&self) -> Result<(), LedgerError> {
        match self {
            TurnLedger::File(ledger) => ledger.check(),
            TurnLedger::Redis(ledger) => ledger.check(),
        }
    }

    /// The store's kind, as metrics name it: `file` or `redis`.
    pub(crate) fn backend(&self) -> &'static str {
        match self {
            TurnLedger::File(_) => "file",
            TurnLedger::Redis(_) => "redis",
        }
    }

    /// Judges `call` in the turn `spec` names (see the module documentation) and logs
    /// the admission or the refusal.
    pub(crate) fn admit(&self, spec: &TurnSpec, call: &Call) -> Result<Admitted, LedgerError> {
        Ok(match self {
            TurnLedger::File(ledger) => admitted(ledger.admit(spec, call)?, Hold::File),
            TurnLedger::Redis(ledger) => admitted(ledger.admit(spec, call)?, Hold::Redis),
        })
    }
}

/// The ledger's answer to a call from a store's, its running mark held as `hold` says.
fn admitted<R>(ruled: Ruled<R>, hold: impl FnOnce(R) -> Hold) -> Admitted {
    match ruled {
        Ruled::Run { call, running } => Admitted::Run(RunningCall {
            call,
            hold: hold(running),
        }),
        Ruled::Refused(refusal) => Admitted::Refused(refusal),
    }
}

impl RunningCall {
    /// The answer of this call as the ledger logs it (its attempts only), to be logged
    /// with [`LoggedAnswer::log`].
    pub(crate) fn answer(self, result: &ToolResult) -> LoggedAnswer {
        let entry = answer_entry(self.call, result.details());
        LoggedAnswer {
            running: self,
            entry,
        }
    }
}

/// The answer of an admitted call, ready to be appended (see [`RunningCall::answer`]).
#[derive(Debug)]
pub(crate) struct LoggedAnswer {
    running: RunningCall,
    entry: Entry,
}

impl LoggedAnswer {
    /// Appends the answer, then lets the call's running mark go.
    pub(crate) fn log(self) -> Result<(), LedgerError> {
        match self.running.hold {
            Hold::File(running) => running.log(&self.entry),
            Hold::Redis(running) => running.log(self.running.call, &self.entry),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::rebuild::{origin_of, rebuild};
    use super::*;
    use crate::failure::RuntimeFailureKind;
    use crate::shared_state::SharedState;
    use evidence_materialize::{Admission, TurnLimits};
    use evidence_policy::PolicyId;
    use evidence_result::{
        Correction, Details, ErrorCode, Failure, FailureClass, PackageId, Provider, QueryId,
        RequestDigest,
    };
    use evidence_test_support::RedisServer;
    use serde_json::Value;
    use std::collections::BTreeMap;
    use std::time::Duration;

    /// Where a test's ledgers live: a directory, or a real Redis.
    enum Backend {
        File(tempfile::TempDir),
        Redis(RedisServer),
    }

    impl Backend {
        fn both() -> Vec<Backend> {
            vec![
                Backend::File(tempfile::tempdir().unwrap()),
                Backend::Redis(RedisServer::start().unwrap()),
            ]
        }

        /// A new handle on the ledger, as another process would open it.
        fn handle(&self) -> TurnLedger {
            match self {
                Backend::File(dir) => TurnLedger::new(dir.path().to_owned()),
                Backend::Redis(server) => TurnLedger::Redis(RedisLedger::new(
                    SharedState::open(&server.url().into(), None).unwrap(),
                )),
            }
        }
    }

    /// The entries the backend holds for `policy`, as JSON texts.
    fn entries_of(backend: &Backend, policy: &str) -> Vec<String> {
        match backend {
            Backend::File(dir) => {
                std::fs::read_to_string(dir.path().join(format!("{policy}.jsonl")))
                    .unwrap()
                    .lines()
                    .map(str::to_owned)
                    .collect()
            }
            Backend::Redis(server) => {
                let mut c = ::redis::Client::open(server.url())
                    .unwrap()
                    .get_connection()
                    .unwrap();
                ::redis::cmd("LRANGE")
                    .arg(format!("evidence:turn:{{{policy}}}:entries"))
                    .arg(0)
                    .arg(-1)
                    .query(&mut c)
                    .unwrap()
            }
        }
    }

    /// The entries of `policy`, none when the turn was never written.
    fn entries_of_or_none(backend: &Backend, policy: &str) -> Vec<String> {
        match backend {
            Backend::File(dir) if !dir.path().join(format!("{policy}.jsonl")).exists() => {
                Vec::new()
            }
            _ => entries_of(backend, policy),
        }
    }

    /// The refusals the backend counted for `policy`, by code.
    fn refusals_of(backend: &Backend, policy: &str) -> BTreeMap<String, u64> {
        match backend {
            Backend::File(dir) => {
                let turn_file = dir.path().join(format!("{policy}.jsonl"));
                match std::fs::read(FileLedger::refusals_file(&turn_file)) {
                    Ok(bytes) => serde_json::from_slice::<refusals::RefusalCounts>(&bytes)
                        .unwrap()
                        .by_code()
                        .clone(),
                    Err(_) => BTreeMap::new(),
                }
            }
            Backend::Redis(server) => {
                let mut c = ::redis::Client::open(server.url())
                    .unwrap()
                    .get_connection()
                    .unwrap();
                ::redis::cmd("HGETALL")
                    .arg(format!("evidence:turn:{{{policy}}}:refusals"))
                    .query(&mut c)
                    .unwrap()
            }
        }
    }

    fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect()
    }

    /// The bytes the backend stores for the turn `policy`: every file of the turn in the
    /// directory; the content (elements, fields and values, members) of every key of the
    /// turn in Redis.
    fn stored_bytes(backend: &Backend, policy: &str) -> usize {
        match backend {
            Backend::File(dir) => std::fs::read_dir(dir.path())
                .unwrap()
                .map(Result::unwrap)
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.starts_with(&format!("{policy}.")))
                })
                .map(|e| usize::try_from(e.metadata().unwrap().len()).unwrap())
                .sum(),
            Backend::Redis(server) => {
                let mut c = ::redis::Client::open(server.url())
                    .unwrap()
                    .get_connection()
                    .unwrap();
                let keys: Vec<String> = ::redis::cmd("KEYS")
                    .arg(format!("evidence:turn:{{{policy}}}:*"))
                    .query(&mut c)
                    .unwrap();
                keys.iter()
                    .map(|key| {
                        let kind: String = ::redis::cmd("TYPE").arg(key).query(&mut c).unwrap();
                        let mut read = match kind.as_str() {
                            "list" => ::redis::cmd("LRANGE"),
                            "hash" => ::redis::cmd("HGETALL"),
                            "zset" => ::redis::cmd("ZRANGE"),
                            other => panic!("{key} is a {other}"),
                        };
                        read.arg(key);
                        if kind != "hash" {
                            read.arg(0).arg(-1);
                        }
                        if kind == "zset" {
                            read.arg("WITHSCORES");
                        }
                        let parts: Vec<String> = read.query(&mut c).unwrap();
                        parts.iter().map(String::len).sum::<usize>()
                    })
                    .sum()
            }
        }
    }

    fn spec(policy: &str, limits: TurnLimits) -> TurnSpec {
        TurnSpec::untimed(pol(policy), limits)
    }

    fn digest(n: u8) -> RequestDigest {
        std::iter::repeat_n(format!("{n:02x}"), 16)
            .collect::<String>()
            .parse()
            .unwrap()
    }

    fn clinic_call(query: &str, d: u8) -> Call {
        Call::single(
            PackageId::new("managed_auto_oncall_clinic").unwrap(),
            Provider::Clinic,
            QueryId::new(query).unwrap(),
            Some(digest(d)),
        )
    }

    fn failed(call: &Call, class: FailureClass, code: &str) -> ToolResult {
        let q = &call.queries[0];
        ToolResult::new(Details::failure(
            origin_of(call),
            Some(q.query_id.clone()),
            q.request_digest,
            Failure::new(ErrorCode::new(code).unwrap(), class, "x")
                .with_correction(Correction::for_class(class, None, Vec::new())),
        ))
        .unwrap()
    }

    fn pol(id: &str) -> PolicyId {
        PolicyId::new(id).unwrap()
    }

    fn refused_code(admitted: Admitted) -> String {
        match admitted {
            Admitted::Refused(r) => r.code.as_str().to_owned(),
            Admitted::Run(_) => panic!("admitted"),
        }
    }

    #[test]
    fn an_unchanged_retry_is_refused_across_ledger_handles_and_a_new_policy_starts_anew() {
        for backend in Backend::both() {
            let limits = TurnLimits::new(8);
            let call = clinic_call("cpu", 1);
            let first = backend.handle();
            let Admitted::Run(running) = first.admit(&spec("pol-a", limits), &call).unwrap() else {
                panic!("refused")
            };
            // Another process (another handle) sees the call in flight.
            let second = backend.handle();
            let code = refused_code(second.admit(&spec("pol-a", limits), &call).unwrap());
            assert_eq!(code, "query_in_flight");
            running
                .answer(&failed(
                    &call,
                    FailureClass::QueryRejected,
                    "clinic_http_422",
                ))
                .log()
                .unwrap();
            let code = refused_code(second.admit(&spec("pol-a", limits), &call).unwrap());
            assert_eq!(code, "unchanged_retry");
            // A changed request is the one correction.
            assert!(matches!(
                second
                    .admit(&spec("pol-a", limits), &clinic_call("cpu", 2))
                    .unwrap(),
                Admitted::Run(_)
            ));
            // A new envelope is a new turn.
            assert!(matches!(
                second.admit(&spec("pol-b", limits), &call).unwrap(),
                Admitted::Run(_)
            ));
            // Two admissions and an answer; the two refusals counted, not appended.
            let entries = entries_of(&backend, "pol-a");
            assert_eq!(entries.len(), 3, "{entries:?}");
            assert!(
                !entries.iter().any(|e| e.contains("\"refused\"")),
                "{entries:?}"
            );
            assert_eq!(
                refusals_of(&backend, "pol-a"),
                counts(&[("query_in_flight", 1), ("unchanged_retry", 1)])
            );
        }
    }

    /// A model that retries one failed request again and again costs the turn nothing
    /// more to store: its refusals are counted, not appended, so the turn holds what its
    /// admitted calls logged and one count per refusal code, in either store.
    #[test]
    fn a_turns_stored_state_does_not_grow_with_its_refusals() {
        for backend in Backend::both() {
            let ledger = backend.handle();
            let limits = TurnLimits::new(8);
            let call = clinic_call("cpu", 1);
            let Admitted::Run(running) = ledger.admit(&spec("p", limits), &call).unwrap() else {
                panic!("refused")
            };
            running
                .answer(&failed(
                    &call,
                    FailureClass::QueryRejected,
                    "clinic_http_422",
                ))
                .log()
                .unwrap();
            let retry = |times: usize| {
                for _ in 0..times {
                    let code = refused_code(ledger.admit(&spec("p", limits), &call).unwrap());
                    assert_eq!(code, "unchanged_retry");
                }
            };
            retry(10);
            let after_10 = stored_bytes(&backend, "p");
            retry(990);
            let after_1000 = stored_bytes(&backend, "p");
            // The count of unchanged retries went from 10 to 1000: two more digits.
            assert!(
                after_1000 <= after_10 + 2,
                "{after_10} bytes after 10 refusals, {after_1000} after 1000"
            );
            assert_eq!(entries_of(&backend, "p").len(), 2);
            assert_eq!(
                refusals_of(&backend, "p"),
                counts(&[("unchanged_retry", 1000)])
            );
        }
    }

    #[test]
    fn a_shared_failure_stops_the_turn_for_every_package() {
        for backend in Backend::both() {
            let ledger = backend.handle();
            let limits = TurnLimits::new(8);
            let manus = Call::single(
                PackageId::new("managed_auto_oncall_manus").unwrap(),
                Provider::Manus,
                QueryId::new("mem").unwrap(),
                Some(digest(3)),
            );
            let Admitted::Run(running) = ledger.admit(&spec("p", limits), &manus).unwrap() else {
                panic!("refused")
            };
            running
                .answer(&failed(
                    &manus,
                    FailureClass::Authentication,
                    "manus_login_failed",
                ))
                .log()
                .unwrap();
            let code = refused_code(
                ledger
                    .admit(&spec("p", limits), &clinic_call("cpu", 1))
                    .unwrap(),
            );
            assert_eq!(code, "turn_stopped");
        }
    }

    #[test]
    fn the_call_limit_counts_every_process() {
        for backend in Backend::both() {
            let limits = TurnLimits::new(2);
            for (i, q) in ["a", "b"].iter().enumerate() {
                let ledger = backend.handle();
                let admitted = ledger
                    .admit(
                        &spec("p", limits),
                        &clinic_call(q, u8::try_from(i).unwrap()),
                    )
                    .unwrap();
                assert!(matches!(admitted, Admitted::Run(_)));
            }
            let ledger = backend.handle();
            let code = refused_code(
                ledger
                    .admit(&spec("p", limits), &clinic_call("c", 9))
                    .unwrap(),
            );
            assert_eq!(code, "turn_call_limit");
        }
    }

    #[test]
    fn a_call_whose_process_ended_before_its_answer_is_abandoned_once() {
        for backend in Backend::both() {
            let ledger = backend.handle();
            let limits = TurnLimits::new(8);
            let call = clinic_call("cpu", 1);
            // A short lease: the Redis store learns of the end only when it runs out.
            let short = TurnSpec {
                runs_for: Duration::from_millis(300),
                ..spec("p", limits)
            };
            let Admitted::Run(running) = ledger.admit(&short, &call).unwrap() else {
                panic!("refused")
            };
            // The process ends between the admission and its answer: its lock goes.
            drop(running);
            if matches!(backend, Backend::Redis(_)) {
                // Until the lease ends, the call is in flight.
                let code = refused_code(ledger.admit(&spec("p", limits), &call).unwrap());
                assert_eq!(code, "query_in_flight");
                std::thread::sleep(Duration::from_millis(400));
            }
            let code = refused_code(ledger.admit(&spec("p", limits), &call).unwrap());
            assert_eq!(code, "unchanged_retry");
            let changed = clinic_call("cpu", 5);
            let code = refused_code(ledger.admit(&spec("p", limits), &changed).unwrap());
            assert_eq!(code, "objective_failed");
            let other = ledger
                .admit(&spec("p", limits), &clinic_call("mem", 2))
                .unwrap();
            assert!(matches!(other, Admitted::Run(_)));
            let entries = entries_of(&backend, "p");
            let abandoned = entries
                .iter()
                .filter(|e| e.contains("\"abandoned\""))
                .count();
            assert_eq!(abandoned, 1, "{entries:?}");
            if let Backend::File(dir) = &backend {
                assert!(!dir.path().join("p.call-0.lock").exists());
            }
        }
    }

    #[test]
    fn a_missing_or_unwritable_directory_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let gone = TurnLedger::new(dir.path().join("gone"));
        let err = gone
            .admit(&spec("p", TurnLimits::new(8)), &clinic_call("cpu", 1))
            .unwrap_err();
        assert_eq!(err.to_failure().kind, RuntimeFailureKind::ContextMissing);
        // A directory where the turn's file should be: nothing can be appended.
        let blocked = TurnLedger::new(dir.path().to_owned());
        std::fs::create_dir(dir.path().join("p.jsonl")).unwrap();
        let err = blocked
            .admit(&spec("p", TurnLimits::new(8)), &clinic_call("cpu", 1))
            .unwrap_err();
        assert_eq!(err.to_failure().kind, RuntimeFailureKind::ContextInvalid);
        // A file where the directory should be.
        std::fs::write(dir.path().join("file"), "").unwrap();
        let err = TurnLedger::new(dir.path().join("file"))
            .check()
            .unwrap_err();
        assert_eq!(err.to_failure().kind, RuntimeFailureKind::ContextInvalid);
        use std::os::unix::fs::PermissionsExt as _;
        let locked_dir = dir.path().join("ro");
        std::fs::create_dir(&locked_dir).unwrap();
        std::fs::set_permissions(&locked_dir, std::fs::Permissions::from_mode(0o500)).unwrap();
        let ro = TurnLedger::new(locked_dir.clone());
        let result = ro.admit(&spec("p", TurnLimits::new(8)), &clinic_call("cpu", 1));
        // Root writes anyway; everyone else is refused.
        if std::fs::write(locked_dir.join("probe"), "").is_err() {
            let err = result.unwrap_err();
            assert_eq!(err.to_failure().kind, RuntimeFailureKind::ContextInvalid);
        }
    }

    /// What a step's call gets back when it runs.
    #[derive(Debug, Clone, Copy)]
    enum Answer {
        Ok,
        Rejected,
        Shared,
        Internal,
    }

    fn answer(call: &Call, answer: Answer) -> ToolResult {
        let q = &call.queries[0];
        match answer {
            Answer::Ok => ToolResult::new(Details::success(
                origin_of(call),
                q.query_id.clone(),
                q.request_digest.unwrap(),
                evidence_result::Evidence::no_data(None, 5),
            ))
            .unwrap(),
            Answer::Rejected => failed(call, FailureClass::QueryRejected, "clinic_http_422"),
            Answer::Shared => failed(call, FailureClass::Authentication, "session_bootstrap"),
            Answer::Internal => failed(call, FailureClass::Internal, "request_failed"),
        }
    }

    /// What a turn of one admitted call may store at most: its admission and its answer
    /// (a one-query call's entries are about 300 bytes; the file store adds no more).
    const PER_ADMITTED_CALL: usize = 640;

    /// What the refusal counts of a turn may take at most: a count for each of the ten
    /// refusal codes, with its name and digits.
    const REFUSAL_COUNTS: usize = 10 * 48;

    /// How many times in a row the model sends a step's call: mostly once, often a long
    /// run (a model retrying in a loop).
    fn run_length() -> impl proptest::strategy::Strategy<Value = usize> {
        proptest::prop_oneof![
            3 => proptest::strategy::Just(1usize),
            1 => 2..400usize,
        ]
    }

    fn any_answer() -> impl proptest::strategy::Strategy<Value = Answer> {
        proptest::prop_oneof![
            proptest::strategy::Just(Answer::Ok),
            proptest::strategy::Just(Answer::Rejected),
            proptest::strategy::Just(Answer::Shared),
            proptest::strategy::Just(Answer::Internal),
        ]
    }

    /// A verdict as the tests compare it: `None` when the call runs, else its refusal
    /// code.
    fn verdict_of(admission: &Admission) -> Option<&'static str> {
        match admission {
            Admission::Admit(_) => None,
            Admission::Refuse(r) => Some(r.code.as_str()),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]
        /// Over any sequence of calls from the three packages' servers, each sent once or
        /// in a long run (the run's first call may run; the rest come while it runs, and
        /// its answer is logged after them), through a ledger handle of its own per step
        /// (as separate processes do): the file store and the Redis store give every call
        /// the verdict and refusal code one in-memory `Turn` gives it. So no call runs
        /// after a shared failure in the same turn, and no call runs with the request of
        /// an earlier failed attempt of its query. Each turn stores its admitted calls'
        /// entries and its refusals counted by code, nothing per refusal: its size is
        /// bounded by its admitted calls, however long the runs.
        #[test]
        fn both_stores_judge_as_one_turn_and_store_no_more_than_its_admitted_calls(
            steps in proptest::collection::vec(
                (0..3usize, 0..3u8, 0..3u8, any_answer(), run_length(), proptest::bool::weighted(0.1)),
                1..16,
            ),
            max_calls in 2..10u32,
        ) {
            let redis = REDIS.with(|r| r.take().unwrap_or_else(|| RedisServer::start().unwrap()));
            let backends = [
                Backend::File(tempfile::tempdir().unwrap()),
                Backend::Redis(redis),
            ];
            // Each case its own turns: the Redis is shared by the cases of a thread.
            let case = CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let packages = [
                ("managed_auto_oncall_clinic", Provider::Clinic),
                ("managed_auto_oncall_manus", Provider::Manus),
                ("managed_auto_oncall_wetech", Provider::Wetech),
            ];
            let limits = TurnLimits::new(max_calls);
            let policy_of = |turn_no: usize| format!("pol-long-{case}-{turn_no}");
            let mut turn_no = 0;
            let mut turn = evidence_materialize::Turn::new(limits);
            // Per turn: the calls admitted, the refusals by code.
            let mut admitted = vec![0usize];
            let mut refused = vec![BTreeMap::<String, u64>::new()];
            let mut stopped = false;
            let mut failed_requests: Vec<(usize, u8, u8)> = Vec::new();
            for (package, query, request, outcome, run, new_envelope) in steps {
                if new_envelope {
                    turn_no += 1;
                    turn = evidence_materialize::Turn::new(limits);
                    admitted.push(0);
                    refused.push(BTreeMap::new());
                    stopped = false;
                    failed_requests.clear();
                }
                let (identity, provider) = packages[package];
                let call = Call::single(
                    PackageId::new(identity).unwrap(),
                    provider,
                    QueryId::new(format!("q{query}")).unwrap(),
                    Some(digest(request)),
                );
                let spec = TurnSpec::untimed(pol(&policy_of(turn_no)), limits);
                let handles: Vec<TurnLedger> = backends.iter().map(Backend::handle).collect();
                let mut running = None;
                for _ in 0..run {
                    let expected = turn.admit(&call).unwrap();
                    let mut got = Vec::new();
                    for handle in &handles {
                        got.push(handle.admit(&spec, &call).unwrap());
                    }
                    for admission in &got {
                        let verdict = match admission {
                            Admitted::Run(_) => None,
                            Admitted::Refused(r) => Some(r.code.as_str()),
                        };
                        proptest::prop_assert_eq!(verdict, verdict_of(&expected));
                    }
                    match expected {
                        Admission::Refuse(r) => {
                            *refused[turn_no].entry(r.code.as_str().to_owned()).or_default() += 1;
                        }
                        Admission::Admit(ticket) => {
                            proptest::prop_assert!(!stopped, "a call ran after a shared failure");
                            proptest::prop_assert!(
                                !failed_requests.contains(&(package, query, request)),
                                "an unchanged retry ran"
                            );
                            admitted[turn_no] += 1;
                            running = Some((ticket, got));
                        }
                    }
                }
                // The run's call, if it ran, answers after the run.
                if let Some((ticket, got)) = running {
                    let result = answer(&call, outcome);
                    turn.record(ticket, result.clone(), Duration::ZERO).unwrap();
                    for admission in got {
                        let Admitted::Run(running) = admission else { unreachable!() };
                        running.answer(&result).log().unwrap();
                    }
                    match outcome {
                        Answer::Ok => {}
                        Answer::Shared => {
                            stopped = true;
                            failed_requests.push((package, query, request));
                        }
                        Answer::Rejected | Answer::Internal => {
                            failed_requests.push((package, query, request));
                        }
                    }
                }
            }
            for backend in &backends {
                for (n, (calls, codes)) in admitted.iter().zip(&refused).enumerate() {
                    let policy = policy_of(n);
                    let entries = entries_of_or_none(backend, &policy);
                    proptest::prop_assert_eq!(entries.len(), 2 * calls, "{:?}", entries);
                    proptest::prop_assert_eq!(&refusals_of(backend, &policy), codes);
                    let stored = stored_bytes(backend, &policy);
                    proptest::prop_assert!(
                        stored <= calls * PER_ADMITTED_CALL + REFUSAL_COUNTS,
                        "{} bytes for {} admitted calls and {:?}", stored, calls, codes
                    );
                }
            }
            let [_, Backend::Redis(server)] = backends else { unreachable!() };
            REDIS.with(|r| r.set(Some(server)));
        }
    }

    thread_local! {
        /// The Redis the property cases of a thread share.
        static REDIS: std::cell::Cell<Option<RedisServer>> = const { std::cell::Cell::new(None) };
    }
    /// The number of the next property case (its turns' policy ids).
    static CASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    #[test]
    fn a_corrupt_line_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.jsonl"), "{not an entry\n").unwrap();
        let ledger = TurnLedger::new(dir.path().to_owned());
        let err = ledger
            .admit(&spec("p", TurnLimits::new(8)), &clinic_call("cpu", 1))
            .unwrap_err();
        assert!(matches!(err, LedgerError::Corrupt { line: 1, .. }), "{err}");
    }

    /// Replays `entries`, in their order, through one `Turn`: each logged admission must
    /// be one it admits, each answer one it records. A `refused` entry is never logged
    /// now, and no call of these tests is abandoned.
    fn replayed_exactly(entries: &[Entry], limits: TurnLimits) -> Result<(), String> {
        let mut turn = evidence_materialize::Turn::new(limits);
        let mut open = std::collections::BTreeMap::new();
        for entry in entries {
            match entry {
                Entry::Admitted {
                    call,
                    package,
                    provider,
                    queries,
                } => {
                    let planned = entry::logged_call(package, *provider, queries);
                    match turn.admit(&planned).map_err(|e| e.to_string())? {
                        Admission::Admit(ticket) => {
                            open.insert(*call, (ticket, planned));
                        }
                        Admission::Refuse(r) => {
                            return Err(format!(
                                "call {call} admitted, Turn refuses: {}",
                                r.code.as_str()
                            ));
                        }
                    }
                }
                Entry::Answered {
                    call,
                    batch,
                    attempts,
                } => {
                    let (ticket, planned) = open.remove(call).ok_or("an answer of no open call")?;
                    let result = super::rebuild::rebuilt_result(&planned, *batch, attempts)
                        .map_err(|e| e.to_string())?;
                    turn.record(ticket, result, Duration::ZERO)
                        .map_err(|e| e.to_string())?;
                }
                Entry::Refused {} => return Err("a refusal was appended".to_owned()),
                Entry::Abandoned { .. } => return Err("no call was abandoned".to_owned()),
            }
        }
        Ok(())
    }

    /// What one replica saw of one call: admitted as call number `n`, refused with a
    /// code; and when it logged call `n`'s answer.
    #[derive(Debug, Clone)]
    enum Seen {
        Ran(u32),
        Refused(&'static str),
        Answered(u32),
    }

    /// Whether every verdict a replica gave (`seen`, in its order) is the one a `Turn`
    /// gives on some state of the turn the replica could have judged on: a refusal on a
    /// prefix of the final `entries` no shorter than the one its previous call saw, an
    /// admission exactly where its entry stands. Refusals are not logged, so this is
    /// how a refusal's code is checked against `Turn` when replicas run at once.
    fn judged_on_states_of_the_log(
        entries: &[Entry],
        limits: TurnLimits,
        seen: &[(Call, Seen)],
    ) -> Result<(), String> {
        let verdict_at = |k: usize, call: &Call| -> Result<Option<&'static str>, String> {
            let (mut turn, _) =
                rebuild(limits, &entries[..k], |_| false).map_err(|e| e.to_string())?;
            Ok(verdict_of(&turn.admit(call).map_err(|e| e.to_string())?))
        };
        let mut from = 0;
        for (call, verdict) in seen {
            match verdict {
                Seen::Ran(n) => {
                    let at = entries
                        .iter()
                        .position(|e| matches!(e, Entry::Admitted { call, .. } if call == n))
                        .ok_or(format!("call {n} ran without its admission"))?;
                    if at < from {
                        return Err(format!("call {n} admitted before its replica's last call"));
                    }
                    from = at + 1;
                }
                Seen::Answered(n) => {
                    let answered = entries
                        .iter()
                        .position(|e| matches!(e, Entry::Answered { call, .. } if call == n))
                        .ok_or(format!("call {n} has no answer"))?;
                    from = from.max(answered + 1);
                }
                Seen::Refused(code) => {
                    let mut k = from;
                    loop {
                        if k > entries.len() {
                            return Err(format!(
                                "refused {code}: no state from entry {from} on refuses it so"
                            ));
                        }
                        if verdict_at(k, call)? == Some(*code) {
                            break;
                        }
                        k += 1;
                    }
                    from = k;
                }
            }
        }
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Replicas admitting at once (threads, each with its own handle: its own Redis
        /// connection, or its own open files of the directory), each sending calls once or
        /// in long runs: each store logs exactly what one `Turn`, fed the log in its order,
        /// admits (no two replicas ever both admit what that `Turn` would refuse, and no
        /// turn runs over its limit); every refusal is one that `Turn` gives on a state of
        /// the log the replica could have seen; the refusals are counted exactly, by code;
        /// and the turn stores its admitted calls' entries only, however long the runs.
        #[test]
        fn concurrent_replicas_admit_exactly_what_one_turn_admits(
            plans in proptest::collection::vec(
                proptest::collection::vec((0..3u8, 0..3u8, proptest::prop_oneof![
                    proptest::strategy::Just(Answer::Ok),
                    proptest::strategy::Just(Answer::Rejected),
                    proptest::strategy::Just(Answer::Shared),
                ], proptest::prop_oneof![
                    3 => proptest::strategy::Just(1usize),
                    1 => 2..120usize,
                ]), 1..8),
                3,
            ),
            max_calls in 3..10u32,
        ) {
            let server = REDIS.with(|r| r.take()).unwrap_or_else(|| RedisServer::start().unwrap());
            let backends = [
                Backend::File(tempfile::tempdir().unwrap()),
                Backend::Redis(server),
            ];
            let case = CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let policy = format!("pol-concurrent-{case}");
            let limits = TurnLimits::new(max_calls);
            for backend in &backends {
                let seen: Vec<Vec<(Call, Seen)>> = std::thread::scope(|scope| {
                    let threads: Vec<_> = plans
                        .iter()
                        .map(|plan| {
                            let ledger = backend.handle();
                            let policy = policy.clone();
                            scope.spawn(move || {
                                let mut seen = Vec::new();
                                for (query, request, outcome, run) in plan {
                                    let call = clinic_call(&format!("q{query}"), *request);
                                    let spec = TurnSpec::untimed(pol(&policy), limits);
                                    let mut running = None;
                                    for _ in 0..*run {
                                        match ledger.admit(&spec, &call).unwrap() {
                                            Admitted::Run(r) => {
                                                seen.push((call.clone(), Seen::Ran(r.call)));
                                                running = Some(r);
                                            }
                                            Admitted::Refused(r) => {
                                                seen.push((call.clone(), Seen::Refused(r.code.as_str())));
                                            }
                                        }
                                    }
                                    if let Some(running) = running {
                                        let n = running.call;
                                        running.answer(&answer(&call, *outcome)).log().unwrap();
                                        seen.push((call.clone(), Seen::Answered(n)));
                                    }
                                }
                                seen
                            })
                        })
                        .collect();
                    threads.into_iter().map(|t| t.join().unwrap()).collect()
                });
                let entries: Vec<Entry> = entries_of(backend, &policy)
                    .iter()
                    .map(|e| serde_json::from_str(e).unwrap())
                    .collect();
                let admitted = entries.iter().filter(|e| matches!(e, Entry::Admitted { .. })).count();
                proptest::prop_assert!(admitted <= max_calls as usize);
                proptest::prop_assert_eq!(entries.len(), 2 * admitted, "{:?}", entries);
                let mut codes = BTreeMap::<String, u64>::new();
                for (_, verdict) in seen.iter().flatten() {
                    if let Seen::Refused(code) = verdict {
                        *codes.entry((*code).to_owned()).or_default() += 1;
                    }
                }
                proptest::prop_assert_eq!(refusals_of(backend, &policy), codes);
                let replay = replayed_exactly(&entries, limits);
                proptest::prop_assert!(replay.is_ok(), "{:?}: {:?}", replay, entries);
                for replica in &seen {
                    let judged = judged_on_states_of_the_log(&entries, limits, replica);
                    proptest::prop_assert!(judged.is_ok(), "{:?}: {:?}", judged, entries);
                }
                let stored = stored_bytes(backend, &policy);
                proptest::prop_assert!(stored <= admitted * PER_ADMITTED_CALL + REFUSAL_COUNTS);
            }
            let [_, Backend::Redis(server)] = backends else { unreachable!() };
            REDIS.with(|r| r.set(Some(server)));
        }
    }

    /// The expiry (`PEXPIRETIME`, ms) of each key of the turn `policy` in `server`, by
    /// the key's last part (`entries`, `running`, `refusals`); a key not there is left
    /// out.
    fn expiries(server: &RedisServer, policy: &str) -> BTreeMap<&'static str, i64> {
        let mut c = ::redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        ["entries", "running", "refusals"]
            .into_iter()
            .filter_map(|part| {
                let at: i64 = ::redis::cmd("PEXPIRETIME")
                    .arg(format!("evidence:turn:{{{policy}}}:{part}"))
                    .query(&mut c)
                    .unwrap();
                (at != -2).then_some((part, at))
            })
            .collect()
    }

    #[test]
    fn a_turns_keys_expire_an_hour_after_its_policy() {
        let server = RedisServer::start().unwrap();
        let backend = Backend::Redis(server);
        let ledger = backend.handle();
        let expires_at = jiff::Timestamp::now() + jiff::SignedDuration::from_mins(20);
        let spec = TurnSpec {
            expires_at,
            ..spec("pol-ttl", TurnLimits::new(8))
        };
        let Admitted::Run(running) = ledger.admit(&spec, &clinic_call("cpu", 1)).unwrap() else {
            panic!("refused")
        };
        let Backend::Redis(server) = &backend else {
            unreachable!()
        };
        let want = (expires_at + redis::KEPT_AFTER_EXPIRY).as_millisecond();
        assert_eq!(
            expiries(server, "pol-ttl"),
            [("entries", want), ("running", want)].into()
        );
        running
            .answer(&failed(
                &clinic_call("cpu", 1),
                FailureClass::QueryRejected,
                "x_422",
            ))
            .log()
            .unwrap();
        let code = refused_code(ledger.admit(&spec, &clinic_call("cpu", 1)).unwrap());
        assert_eq!(code, "unchanged_retry");
        assert_eq!(expiries(server, "pol-ttl")["entries"], want);
        assert_eq!(expiries(server, "pol-ttl")["refusals"], want);
    }

    /// What a step of the expiry property does in the turn.
    #[derive(Debug, Clone, Copy)]
    enum TtlStep {
        /// A new question, admitted and answered (`query_rejected`).
        Ask,
        /// The first question again, unchanged: refused.
        Retry,
        /// A new question admitted; its answer logged at the next step of this kind.
        AskAndHold,
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Whatever the order in which envelopes of one `policy_id` with different
        /// expiries write to a turn (admissions, answers, refusals, leases), every key of
        /// the turn expires an hour after the latest expiry any of them carried: a write
        /// under an envelope that expires sooner never shortens the life of a turn a
        /// longer-lived one still uses, so a stopped turn cannot vanish early.
        #[test]
        fn a_write_never_moves_a_turns_expiry_earlier(
            steps in proptest::collection::vec(
                (
                    proptest::prop_oneof![
                        proptest::strategy::Just(TtlStep::Ask),
                        proptest::strategy::Just(TtlStep::Retry),
                        proptest::strategy::Just(TtlStep::AskAndHold),
                    ],
                    1..240i64,
                ),
                1..12,
            ),
        ) {
            let server = REDIS.with(|r| r.take()).unwrap_or_else(|| RedisServer::start().unwrap());
            let case = CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let policy = format!("pol-ttl-{case}");
            let ledger = TurnLedger::Redis(RedisLedger::new(
                SharedState::open(&server.url().into(), None).unwrap(),
            ));
            let now = jiff::Timestamp::now();
            let mut latest = i64::MIN;
            let mut held: Option<(RunningCall, Call)> = None;
            let spec_for = |minutes: i64| TurnSpec {
                expires_at: now + jiff::SignedDuration::from_mins(minutes),
                ..spec(&policy, TurnLimits::new(64))
            };
            for (n, (step, minutes)) in steps.into_iter().enumerate() {
                let spec = spec_for(minutes);
                let kept = (spec.expires_at + redis::KEPT_AFTER_EXPIRY).as_millisecond();
                let first = clinic_call("q-first", 1);
                match step {
                    TtlStep::Retry if n > 0 => {
                        let _refused = ledger.admit(&spec, &first).unwrap();
                    }
                    TtlStep::Retry | TtlStep::Ask => {
                        let call = if n == 0 { first } else { clinic_call(&format!("q{n}"), 2) };
                        let Admitted::Run(running) = ledger.admit(&spec, &call).unwrap() else {
                            panic!("refused")
                        };
                        running
                            .answer(&failed(&call, FailureClass::QueryRejected, "x_422"))
                            .log()
                            .unwrap();
                    }
                    TtlStep::AskAndHold => {
                        if let Some((running, call)) = held.take() {
                            running
                                .answer(&failed(&call, FailureClass::QueryRejected, "x_422"))
                                .log()
                                .unwrap();
                        }
                        let call = clinic_call(&format!("q{n}"), 2);
                        let Admitted::Run(running) = ledger.admit(&spec, &call).unwrap() else {
                            panic!("refused")
                        };
                        held = Some((running, call));
                    }
                }
                latest = latest.max(kept);
                for (key, at) in expiries(&server, &policy) {
                    proptest::prop_assert_eq!(at, latest, "{} after step {}", key, n);
                }
            }
            REDIS.with(|r| r.set(Some(server)));
        }
    }

    /// A turn logged by an earlier version, which appended every refusal as a `refused`
    /// entry, reads after an upgrade in either store: its entries parse, its refusals
    /// are skipped, and the turn goes on where it was (the same verdicts, the next call
    /// number, the refusals counted from now on).
    #[test]
    fn a_turn_with_refused_entries_of_an_earlier_version_still_reads() {
        for backend in Backend::both() {
            let call = clinic_call("cpu", 1);
            let queries =
                serde_json::json!([{"queryId": "cpu", "requestDigest": digest(1).to_string()}]);
            let admitted = serde_json::json!({
                "entry": "admitted", "call": 0, "package": "managed_auto_oncall_clinic",
                "provider": "clinic", "queries": queries,
            });
            let refused = |code: &str, class: &str| {
                serde_json::json!({
                    "entry": "refused", "package": "managed_auto_oncall_clinic",
                    "provider": "clinic", "queries": queries, "code": code, "class": class,
                })
            };
            let answered = serde_json::to_value(answer_entry(
                0,
                failed(&call, FailureClass::QueryRejected, "clinic_http_422").details(),
            ))
            .unwrap();
            let mut lines = vec![
                admitted,
                refused("query_in_flight", "policy_violation"),
                answered,
            ];
            lines.extend((0..500).map(|_| refused("unchanged_retry", "query_rejected")));
            let lines: Vec<String> = lines.iter().map(Value::to_string).collect();
            match &backend {
                Backend::File(dir) => {
                    std::fs::write(dir.path().join("p.jsonl"), lines.join("\n") + "\n").unwrap();
                }
                Backend::Redis(server) => {
                    let mut c = ::redis::Client::open(server.url())
                        .unwrap()
                        .get_connection()
                        .unwrap();
                    let () = ::redis::cmd("RPUSH")
                        .arg("evidence:turn:{p}:entries")
                        .arg(&lines)
                        .query(&mut c)
                        .unwrap();
                }
            }
            let ledger = backend.handle();
            let limits = TurnLimits::new(8);
            let code = refused_code(ledger.admit(&spec("p", limits), &call).unwrap());
            assert_eq!(code, "unchanged_retry");
            let Admitted::Run(running) = ledger
                .admit(&spec("p", limits), &clinic_call("cpu", 2))
                .unwrap()
            else {
                panic!("the one correction was refused")
            };
            assert_eq!(running.call, 1);
            let entries = entries_of(&backend, "p");
            assert_eq!(entries.len(), lines.len() + 1, "nothing logged was lost");
            assert_eq!(
                refusals_of(&backend, "p"),
                counts(&[("unchanged_retry", 1)])
            );
        }
    }
}
