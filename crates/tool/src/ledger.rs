//! The turn ledger the package servers of one evidence turn share. The turn is what the
//! trusted policy names: its `policy_id` (the runtime issues the envelopes of one
//! evidence turn, one per package, under one `policy_id`). The ledger is a directory the
//! runtime gives (`EVIDENCE_TURN_LEDGER`); each turn is one file of JSON lines in it,
//! `<policy_id>.jsonl`, appended under an exclusive `flock`. It holds no secret and no
//! evidence: calls (package, `queryId`s, request digests), refusals (code and class) and
//! outcomes (per attempt: `queryId`, digest, outcome, code and class).
//!
//! A call is admitted in one critical section: the turn is rebuilt from the entries of
//! its policy with the same [`Turn`] the embedder API uses ([`Turn::enter`] and
//! [`Turn::record`] per logged call), the call judged by [`Turn::admit`], and the
//! admission or refusal appended. An admitted call holds a lock on its own running file
//! (`<policy_id>.call-<n>.lock`) until its outcome is appended: a call logged as admitted
//! whose running file nobody holds belongs to a process that ended between the
//! admission and its answer, and the next admission appends it as abandoned (a failure
//! of class `internal` for its queries), so the ledger stays consistent after a crash.
//! The file lock is held only to read the turn's few lines and append one, never while a
//! call runs, so the servers' calls run at once.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use evidence_materialize::{
    Admission, Call, CallTicket, MaterializeError, Refusal, Turn, TurnLimits,
};
use evidence_policy::PolicyId;
use evidence_result::{
    Correction, Details, ErrorCode, Failure, FailureClass, Item, Operation, Origin, PackageId,
    Provider, QueryId, RequestDigest, ResultError, Status, ToolResult, evidence::EvidenceOutcome,
};
use rustix::fs::{FlockOperation, flock};
use serde::{Deserialize, Serialize};

use crate::context::TURN_LEDGER_ENV;
use crate::failure::{RuntimeFailure, RuntimeFailureKind};

/// The error code of an attempt whose process ended before its answer was logged. It
/// never reaches the model: it only rebuilds the turn.
const ABANDONED: &str = "turn_call_abandoned";

/// Why the ledger could not admit or log a call. Every one fails closed: the call is
/// answered with a runtime-context failure and nothing is sent.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LedgerError {
    /// The directory is not there.
    #[error("the turn ledger directory {0} does not exist")]
    Missing(PathBuf),
    /// A file of the ledger could not be opened, locked, read or written.
    #[error("the turn ledger {path} cannot be {action}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A line of the ledger is not an entry.
    #[error("the turn ledger {path} line {line} is not a ledger entry: {why}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        why: String,
    },
    /// The logged calls do not rebuild a turn.
    #[error("the turn ledger does not rebuild the turn: {0}")]
    Turn(#[from] MaterializeError),
    /// A rebuilt result does not hold the contract.
    #[error("the turn ledger does not rebuild a result: {0}")]
    Result(#[from] ResultError),
}

impl LedgerError {
    /// The runtime-context failure that answers the call: a missing directory is
    /// `runtime_context_missing`, anything else `runtime_context_invalid`.
    pub(crate) fn to_failure(&self) -> RuntimeFailure {
        let kind = match self {
            LedgerError::Missing(_) => RuntimeFailureKind::ContextMissing,
            _ => RuntimeFailureKind::ContextInvalid,
        };
        RuntimeFailure::new(kind, format!("{self} ({TURN_LEDGER_ENV})"))
    }
}

/// One query of a logged call.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoggedQuery {
    query_id: QueryId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request_digest: Option<RequestDigest>,
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum LoggedOutcome {
    Ok,
    NoData,
    Failed,
}

/// One attempt of a logged answer: a batch item, or the whole call.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoggedAttempt {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    query_id: Option<QueryId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request_digest: Option<RequestDigest>,
    outcome: LoggedOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    code: Option<ErrorCode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    class: Option<FailureClass>,
}

/// One line of a turn's file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
enum Entry {
    /// A call admitted as the turn's call number `call` (counted from 0).
    Admitted {
        call: u32,
        package: PackageId,
        provider: Provider,
        queries: Vec<LoggedQuery>,
    },
    /// A call refused without running.
    Refused {
        package: PackageId,
        provider: Provider,
        queries: Vec<LoggedQuery>,
        code: String,
        class: FailureClass,
    },
    /// The answer of admitted call `call`; `batch` when it answered per item.
    Answered {
        call: u32,
        batch: bool,
        attempts: Vec<LoggedAttempt>,
    },
    /// Admitted call `call` whose process ended before its answer was logged.
    Abandoned { call: u32 },
}

/// The ledger directory (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct TurnLedger {
    dir: PathBuf,
}

/// The ledger's answer to a call.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// Run the call, then log its answer ([`RunningCall::answer`]).
    Run(RunningCall),
    /// Do not run it; the refusal is logged.
    Refused(Box<Refusal>),
}

/// An admitted call until its answer is logged: holds the lock of its running file.
#[derive(Debug)]
pub(crate) struct RunningCall {
    call: u32,
    turn_file: PathBuf,
    running_file: PathBuf,
    _running: File,
}

impl TurnLedger {
    /// The ledger in `dir` (not opened yet).
    pub(crate) fn new(dir: PathBuf) -> Self {
        TurnLedger { dir }
    }

    /// Whether the directory is there and a directory.
    /// The ledger's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn check(&self) -> Result<(), LedgerError> {
        match std::fs::metadata(&self.dir) {
            Ok(meta) if meta.is_dir() => Ok(()),
            Ok(_) => Err(LedgerError::Io {
                action: "used as a directory",
                path: self.dir.clone(),
                source: std::io::Error::from(std::io::ErrorKind::NotADirectory),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(LedgerError::Missing(self.dir.clone()))
            }
            Err(e) => Err(LedgerError::Io {
                action: "read",
                path: self.dir.clone(),
                source: e,
            }),
        }
    }

    fn turn_file(&self, policy_id: &PolicyId) -> PathBuf {
        self.dir.join(format!("{policy_id}.jsonl"))
    }

    fn running_file(turn_file: &Path, call: u32) -> PathBuf {
        turn_file.with_extension(format!("call-{call}.lock"))
    }

    /// Judges `call` in the turn of `policy_id` with `limits` (see the module
    /// documentation) and logs the admission or the refusal.
    pub(crate) fn admit(
        &self,
        policy_id: &PolicyId,
        limits: TurnLimits,
        call: &Call,
    ) -> Result<Admitted, LedgerError> {
        self.check()?;
        let turn_file = self.turn_file(policy_id);
        let mut file = locked(&turn_file)?;
        let entries = read_entries(&file, &turn_file)?;
        let (mut turn, calls) = rebuild(limits, &entries, |n| {
            is_abandoned(&Self::running_file(&turn_file, n))
        })?;
        for abandoned in &calls.abandoned {
            append(
                &mut file,
                &turn_file,
                &Entry::Abandoned { call: *abandoned },
            )?;
            // Logged as abandoned: its running file is no longer looked at.
            let _gone = std::fs::remove_file(Self::running_file(&turn_file, *abandoned));
        }
        match turn.admit(call)? {
            Admission::Refuse(refusal) => {
                let error = refusal.result.details().error.as_ref();
                let entry = Entry::Refused {
                    package: call.package.clone(),
                    provider: call.provider,
                    queries: logged_queries(call),
                    code: refusal.code.as_str().to_owned(),
                    class: error.map_or(refusal.code.class(), |e| e.class),
                };
                append(&mut file, &turn_file, &entry)?;
                Ok(Admitted::Refused(refusal))
            }
            Admission::Admit(_) => {
                let number = calls.next;
                let running_file = Self::running_file(&turn_file, number);
                let running = hold(&running_file)?;
                let entry = Entry::Admitted {
                    call: number,
                    package: call.package.clone(),
                    provider: call.provider,
                    queries: logged_queries(call),
                };
                append(&mut file, &turn_file, &entry)?;
                Ok(Admitted::Run(RunningCall {
                    call: number,
                    turn_file,
                    running_file,
                    _running: running,
                }))
            }
        }
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
    /// Appends the answer, then lets the call's running file go.
    pub(crate) fn log(self) -> Result<(), LedgerError> {
        let mut file = locked(&self.running.turn_file)?;
        append(&mut file, &self.running.turn_file, &self.entry)?;
        drop(file);
        // The answer is logged: the running file is no longer looked at.
        let _gone = std::fs::remove_file(&self.running.running_file);
        Ok(())
    }
}

/// Opens (creating) the turn file for reading and appending, locked exclusively until
/// it is dropped.
fn locked(path: &Path) -> Result<File, LedgerError> {
    let io = |action, source| LedgerError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| match path.parent() {
            Some(dir) if !dir.is_dir() => LedgerError::Missing(dir.to_owned()),
            _ => io("opened", e),
        })?;
    flock(&file, FlockOperation::LockExclusive).map_err(|e| io("locked", e.into()))?;
    Ok(file)
}

/// Creates the running file of a call and holds its lock.
fn hold(path: &Path) -> Result<File, LedgerError> {
    let io = |action, source| LedgerError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| io("created", e))?;
    flock(&file, FlockOperation::NonBlockingLockExclusive).map_err(|e| io("locked", e.into()))?;
    Ok(file)
}

/// True when nobody holds the running file at `path` (its process ended).
fn is_abandoned(path: &Path) -> bool {
    match File::open(path) {
        Err(_) => true,
        Ok(file) => flock(&file, FlockOperation::NonBlockingLockShared).is_ok(),
    }
}

fn read_entries(file: &File, path: &Path) -> Result<Vec<Entry>, LedgerError> {
    let mut entries = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| LedgerError::Io {
            action: "read",
            path: path.to_owned(),
            source: e,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let entry = serde_json::from_str(&line).map_err(|e| LedgerError::Corrupt {
            path: path.to_owned(),
            line: i + 1,
            why: e.to_string(),
        })?;
        entries.push(entry);
    }
    Ok(entries)
}

fn append(file: &mut File, path: &Path, entry: &Entry) -> Result<(), LedgerError> {
    let mut line = serde_json::to_string(entry).map_err(|e| LedgerError::Corrupt {
        path: path.to_owned(),
        line: 0,
        why: e.to_string(),
    })?;
    line.push('\n');
    file.write_all(line.as_bytes())
        .and_then(|()| file.flush())
        .map_err(|e| LedgerError::Io {
            action: "appended to",
            path: path.to_owned(),
            source: e,
        })
}

fn logged_queries(call: &Call) -> Vec<LoggedQuery> {
    call.queries
        .iter()
        .map(|q| LoggedQuery {
            query_id: q.query_id.clone(),
            request_digest: q.request_digest,
        })
        .collect()
}

/// What the rebuild found besides the turn: the next call number and the calls that
/// were found abandoned now (not yet logged as such).
#[derive(Debug, Default)]
struct Calls {
    next: u32,
    abandoned: Vec<u32>,
}

/// Rebuilds the turn from the logged entries: each admitted call entered, each answer
/// recorded, each refusal skipped (a refusal changes nothing in a turn). An admitted call
/// without its answer stays in flight unless `abandoned` says its process ended; then
/// it is recorded as a failure of class `internal`.
fn rebuild(
    limits: TurnLimits,
    entries: &[Entry],
    abandoned: impl Fn(u32) -> bool,
) -> Result<(Turn, Calls), LedgerError> {
    let mut turn = Turn::new(limits);
    let mut calls = Calls::default();
    let mut open: BTreeMap<u32, (CallTicket, Call)> = BTreeMap::new();
    for entry in entries {
        match entry {
            Entry::Admitted {
                call,
                package,
                provider,
                queries,
            } => {
                let planned = queries
                    .iter()
                    .fold(Call::new(package.clone(), *provider), |c, q| {
                        c.with_query(q.query_id.clone(), q.request_digest)
                    });
                let ticket = turn.enter(&planned);
                open.insert(*call, (ticket, planned));
                calls.next = calls.next.max(call.saturating_add(1));
            }
            Entry::Refused { .. } => {}
            Entry::Answered {
                call,
                batch,
                attempts,
            } => {
                if let Some((ticket, planned)) = open.remove(call) {
                    let result = rebuilt_result(&planned, *batch, attempts)?;
                    if turn.record(ticket, result, Duration::ZERO).is_err() {
                        // An answer that does not fit its call still ended it.
                        turn.record(ticket, abandoned_result(&planned)?, Duration::ZERO)?;
                    }
                }
            }
            Entry::Abandoned { call } => {
                if let Some((ticket, planned)) = open.remove(call) {
                    turn.record(ticket, abandoned_result(&planned)?, Duration::ZERO)?;
                }
            }
        }
    }
    for (call, (ticket, planned)) in open {
        if abandoned(call) {
            turn.record(ticket, abandoned_result(&planned)?, Duration::ZERO)?;
            calls.abandoned.push(call);
        }
    }
    Ok((turn, calls))
}

/// The answer entry of call `call`: the attempts of its result, without evidence or
/// provider text.
fn answer_entry(call: u32, details: &Details) -> Entry {
    let outcome = |status: Status, evidence: Option<EvidenceOutcome>| match (status, evidence) {
        (Status::Ok, Some(EvidenceOutcome::Data)) => LoggedOutcome::Ok,
        (Status::Ok, Some(EvidenceOutcome::NoData)) => LoggedOutcome::NoData,
        _ => LoggedOutcome::Failed,
    };
    let attempts = if details.items.is_empty() {
        vec![LoggedAttempt {
            query_id: details.query_id.clone(),
            request_digest: details.request_digest,
            outcome: outcome(details.status, details.evidence.as_ref().map(|e| e.outcome)),
            code: details.error.as_ref().map(|e| e.code.clone()),
            class: details.error.as_ref().map(|e| e.class),
        }]
    } else {
        details
            .items
            .iter()
            .map(|item| LoggedAttempt {
                query_id: Some(item.query_id.clone()),
                request_digest: item.request_digest,
                outcome: outcome(item.status, item.evidence.as_ref().map(|e| e.outcome)),
                code: item.error.as_ref().map(|e| e.code.clone()),
                class: item.error.as_ref().map(|e| e.class),
            })
            .collect()
    };
    Entry::Answered {
        call,
        batch: !details.items.is_empty(),
        attempts,
    }
}

fn origin_of(call: &Call) -> Origin {
    Origin {
        package: call.package.clone(),
        provider: call.provider,
        operation: Operation::QueryRange,
        policy_source: None,
    }
}

fn logged_failure(
    code: Option<&ErrorCode>,
    class: Option<FailureClass>,
) -> Result<Failure, ResultError> {
    let class = class.unwrap_or(FailureClass::Internal);
    let code = match code {
        Some(code) => code.clone(),
        None => ErrorCode::new(ABANDONED)?,
    };
    Ok(
        Failure::new(code, class, String::new()).with_correction(Correction::for_class(
            class,
            None,
            Vec::new(),
        )),
    )
}

/// A result with the logged attempts' outcomes: what [`Turn::record`] reads of it (query
/// ids, digests, outcomes, error codes and classes), with stand-in evidence.
fn rebuilt_result(
    call: &Call,
    batch: bool,
    attempts: &[LoggedAttempt],
) -> Result<ToolResult, LedgerError> {
    let origin = origin_of(call);
    // An answer is an answer to the turn, with data or without.
    let stand_in = |_: LoggedOutcome| evidence_result::Evidence::no_data(None, 0);
    if batch {
        let mut items = Vec::new();
        for a in attempts {
            let Some(query_id) = a.query_id.clone() else {
                continue;
            };
            items.push(match a.outcome {
                LoggedOutcome::Failed => Item::failure(
                    query_id,
                    a.request_digest,
                    logged_failure(a.code.as_ref(), a.class)?,
                ),
                ok => Item::success(query_id, a.request_digest, stand_in(ok)),
            });
        }
        if let Some(details) = Details::batch(origin.clone(), items) {
            return Ok(ToolResult::new(details)?);
        }
        return abandoned_result(call);
    }
    let Some(a) = attempts.first() else {
        return abandoned_result(call);
    };
    let details = match (a.outcome, &a.query_id, a.request_digest) {
        (LoggedOutcome::Ok | LoggedOutcome::NoData, Some(query_id), Some(digest)) => {
            Details::success(origin, query_id.clone(), digest, stand_in(a.outcome))
        }
        _ => Details::failure(
            origin,
            a.query_id.clone(),
            a.request_digest,
            logged_failure(a.code.as_ref(), a.class)?,
        ),
    };
    Ok(ToolResult::new(details)?)
}

/// The failure of a call whose process ended before its answer was logged: class
/// `internal` for every query it declared (no change of the request fixes a crash).
fn abandoned_result(call: &Call) -> Result<ToolResult, LedgerError> {
    Ok(ToolResult::new(Details::failure(
        origin_of(call),
        None,
        None,
        logged_failure(None, None)?,
    ))?)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let dir = tempfile::tempdir().unwrap();
        let limits = TurnLimits::new(8);
        let call = clinic_call("cpu", 1);
        let first = TurnLedger::new(dir.path().to_owned());
        let Admitted::Run(running) = first.admit(&pol("pol-a"), limits, &call).unwrap() else {
            panic!("refused")
        };
        // Another process (another handle) sees the call in flight.
        let second = TurnLedger::new(dir.path().to_owned());
        let code = refused_code(second.admit(&pol("pol-a"), limits, &call).unwrap());
        assert_eq!(code, "query_in_flight");
        running
            .answer(&failed(
                &call,
                FailureClass::QueryRejected,
                "clinic_http_422",
            ))
            .log()
            .unwrap();
        let code = refused_code(second.admit(&pol("pol-a"), limits, &call).unwrap());
        assert_eq!(code, "unchanged_retry");
        // A changed request is the one correction.
        assert!(matches!(
            second
                .admit(&pol("pol-a"), limits, &clinic_call("cpu", 2))
                .unwrap(),
            Admitted::Run(_)
        ));
        // A new envelope is a new turn.
        assert!(matches!(
            second.admit(&pol("pol-b"), limits, &call).unwrap(),
            Admitted::Run(_)
        ));
        let text = std::fs::read_to_string(dir.path().join("pol-a.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 5, "{text}");
        assert!(text.contains("\"unchanged_retry\""), "{text}");
    }

    #[test]
    fn a_shared_failure_stops_the_turn_for_every_package() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = TurnLedger::new(dir.path().to_owned());
        let limits = TurnLimits::new(8);
        let manus = Call::single(
            PackageId::new("managed_auto_oncall_manus").unwrap(),
            Provider::Manus,
            QueryId::new("mem").unwrap(),
            Some(digest(3)),
        );
        let Admitted::Run(running) = ledger.admit(&pol("p"), limits, &manus).unwrap() else {
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
                .admit(&pol("p"), limits, &clinic_call("cpu", 1))
                .unwrap(),
        );
        assert_eq!(code, "turn_stopped");
    }

    #[test]
    fn the_call_limit_counts_every_process() {
        let dir = tempfile::tempdir().unwrap();
        let limits = TurnLimits::new(2);
        for (i, q) in ["a", "b"].iter().enumerate() {
            let ledger = TurnLedger::new(dir.path().to_owned());
            let admitted = ledger
                .admit(&pol("p"), limits, &clinic_call(q, u8::try_from(i).unwrap()))
                .unwrap();
            assert!(matches!(admitted, Admitted::Run(_)));
        }
        let ledger = TurnLedger::new(dir.path().to_owned());
        let code = refused_code(
            ledger
                .admit(&pol("p"), limits, &clinic_call("c", 9))
                .unwrap(),
        );
        assert_eq!(code, "turn_call_limit");
    }

    #[test]
    fn a_call_whose_process_ended_before_its_answer_is_abandoned_once() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = TurnLedger::new(dir.path().to_owned());
        let limits = TurnLimits::new(8);
        let call = clinic_call("cpu", 1);
        let Admitted::Run(running) = ledger.admit(&pol("p"), limits, &call).unwrap() else {
            panic!("refused")
        };
        // The process ends between the admission and its answer: its lock goes.
        drop(running);
        let code = refused_code(ledger.admit(&pol("p"), limits, &call).unwrap());
        assert_eq!(code, "unchanged_retry");
        let changed = clinic_call("cpu", 5);
        let code = refused_code(ledger.admit(&pol("p"), limits, &changed).unwrap());
        assert_eq!(code, "objective_failed");
        let other = ledger
            .admit(&pol("p"), limits, &clinic_call("mem", 2))
            .unwrap();
        assert!(matches!(other, Admitted::Run(_)));
        let text = std::fs::read_to_string(dir.path().join("p.jsonl")).unwrap();
        assert_eq!(text.matches("\"abandoned\"").count(), 1, "{text}");
        assert!(!dir.path().join("p.call-0.lock").exists());
    }

    #[test]
    fn a_missing_or_unwritable_directory_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let gone = TurnLedger::new(dir.path().join("gone"));
        let err = gone
            .admit(&pol("p"), TurnLimits::new(8), &clinic_call("cpu", 1))
            .unwrap_err();
        assert_eq!(err.to_failure().kind, RuntimeFailureKind::ContextMissing);
        // A directory where the turn's file should be: nothing can be appended.
        let blocked = TurnLedger::new(dir.path().to_owned());
        std::fs::create_dir(dir.path().join("p.jsonl")).unwrap();
        let err = blocked
            .admit(&pol("p"), TurnLimits::new(8), &clinic_call("cpu", 1))
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
        let result = ro.admit(&pol("p"), TurnLimits::new(8), &clinic_call("cpu", 1));
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

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Over any sequence of calls from the three packages' servers (each call through
        /// a ledger handle of its own, as separate processes do): no call runs after a
        /// shared failure in the same turn, and no call runs with the request of an
        /// earlier failed attempt of its query.
        #[test]
        fn nothing_runs_after_a_shared_failure_and_no_unchanged_retry_runs(
            steps in proptest::collection::vec(
                (0..3usize, 0..3u8, 0..3u8, proptest::prop_oneof![
                    proptest::strategy::Just(Answer::Ok),
                    proptest::strategy::Just(Answer::Rejected),
                    proptest::strategy::Just(Answer::Shared),
                    proptest::strategy::Just(Answer::Internal),
                ], proptest::bool::weighted(0.1)),
                1..24,
            )
        ) {
            let dir = tempfile::tempdir().unwrap();
            let packages = [
                ("managed_auto_oncall_clinic", Provider::Clinic),
                ("managed_auto_oncall_manus", Provider::Manus),
                ("managed_auto_oncall_wetech", Provider::Wetech),
            ];
            let mut policy = pol("pol-prop-0");
            let mut turn_no = 0;
            let mut stopped = false;
            let mut failed_requests: Vec<(usize, u8, u8)> = Vec::new();
            for (package, query, request, outcome, new_envelope) in steps {
                if new_envelope {
                    turn_no += 1;
                    policy = pol(&format!("pol-prop-{turn_no}"));
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
                let ledger = TurnLedger::new(dir.path().to_owned());
                match ledger.admit(&policy, TurnLimits::new(64), &call).unwrap() {
                    Admitted::Refused(_) => {}
                    Admitted::Run(running) => {
                        proptest::prop_assert!(!stopped, "a call ran after a shared failure");
                        proptest::prop_assert!(
                            !failed_requests.contains(&(package, query, request)),
                            "an unchanged retry ran"
                        );
                        running.answer(&answer(&call, outcome)).log().unwrap();
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
            }
        }
    }

    #[test]
    fn a_corrupt_line_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.jsonl"), "{not an entry\n").unwrap();
        let ledger = TurnLedger::new(dir.path().to_owned());
        let err = ledger
            .admit(&pol("p"), TurnLimits::new(8), &clinic_call("cpu", 1))
            .unwrap_err();
        assert!(matches!(err, LedgerError::Corrupt { line: 1, .. }), "{err}");
    }
}
