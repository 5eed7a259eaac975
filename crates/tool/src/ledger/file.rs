//! The file store of the turn ledger, for the servers of one host: a directory the
//! runtime gives (`EVIDENCE_TURN_LEDGER`), each turn one file of JSON lines in it,
//! `<policy_id>.jsonl`, read and appended under an exclusive `flock`, and its refusals
//! counted by code in `<policy_id>.refusals.json`, rewritten in place under the same
//! lock (a few dozen bytes that only ever grow, so each write covers the one before; a
//! rename over it would make ext4 flush its data, milliseconds a refusal). An admitted
//! call holds a lock on its own running file (`<policy_id>.call-<n>.lock`) until its
//! outcome is appended; a running file nobody holds means its process ended. The file
//! lock is held only to read the turn's few lines (at most three per admitted call) and
//! write, never while a call runs.

use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use evidence_materialize::Call;
use rustix::fs::{FlockOperation, flock};

use super::entry::Entry;
use super::error::LedgerError;
use super::judge::{Ruled, TurnSpec, Verdict, judge};
use super::refusals::RefusalCounts;

/// The directory of a file ledger.
#[derive(Debug, Clone)]
pub(crate) struct FileLedger {
    dir: PathBuf,
}

/// The running file of an admitted call, locked while it runs.
#[derive(Debug)]
pub(crate) struct Running {
    turn_file: PathBuf,
    running_file: PathBuf,
    _running: File,
}

impl FileLedger {
    /// The ledger in `dir` (not opened yet).
    pub(crate) fn new(dir: PathBuf) -> Self {
        FileLedger { dir }
    }

    /// The ledger's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the directory is there and a directory.
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

    fn turn_file(&self, spec: &TurnSpec) -> PathBuf {
        self.dir.join(format!("{}.jsonl", spec.policy_id))
    }

    fn running_file(turn_file: &Path, call: u32) -> PathBuf {
        turn_file.with_extension(format!("call-{call}.lock"))
    }

    /// The file of the turn's refusal counts.
    pub(crate) fn refusals_file(turn_file: &Path) -> PathBuf {
        turn_file.with_extension("refusals.json")
    }

    /// Judges `call` under the turn file's lock and appends what it found.
    pub(crate) fn admit(
        &self,
        spec: &TurnSpec,
        call: &Call,
    ) -> Result<Ruled<Running>, LedgerError> {
        self.check()?;
        let turn_file = self.turn_file(spec);
        let mut file = locked(&turn_file)?;
        let entries = read_entries(&file, &turn_file)?;
        let judged = judge(spec.limits, &entries, call_abandoned(&turn_file), call)?;
        let refused = judged.verdict.refusal_code();
        // The running file is held before the admission is appended: an admission
        // without its lock would read as abandoned.
        let admitted = match judged.verdict {
            Verdict::Run(number) => {
                let running_file = Self::running_file(&turn_file, number);
                let held = hold(&running_file)?;
                Ruled::Run {
                    call: number,
                    running: Running {
                        turn_file: turn_file.clone(),
                        running_file,
                        _running: held,
                    },
                }
            }
            Verdict::Refused(refusal) => Ruled::Refused(refusal),
        };
        for entry in &judged.appended {
            append(&mut file, &turn_file, entry)?;
        }
        if let Some(code) = refused {
            count_refusal(&Self::refusals_file(&turn_file), code)?;
        }
        for abandoned in &judged.abandoned {
            // Logged as abandoned: its running file is no longer looked at.
            let _gone = std::fs::remove_file(Self::running_file(&turn_file, *abandoned));
        }
        Ok(admitted)
    }
}

/// Whether admitted call `n` of the turn in `turn_file` lost its running file's lock.
fn call_abandoned(turn_file: &Path) -> impl Fn(u32) -> bool + '_ {
    move |n| is_abandoned(&FileLedger::running_file(turn_file, n))
}

impl Running {
    /// Appends the answer, then lets the running file go.
    pub(crate) fn log(self, entry: &Entry) -> Result<(), LedgerError> {
        let mut file = locked(&self.turn_file)?;
        append(&mut file, &self.turn_file, entry)?;
        drop(file);
        // The answer is logged: the running file is no longer looked at.
        let _gone = std::fs::remove_file(&self.running_file);
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
            at: path.display().to_string(),
            line: i + 1,
            why: e.to_string(),
        })?;
        entries.push(entry);
    }
    Ok(entries)
}

/// Counts one refusal of `code` in the counts file at `path` (the caller holds the
/// turn's lock): read, counted, and written back over it from its start.
fn count_refusal(path: &Path, code: &str) -> Result<(), LedgerError> {
    let io = |action, source| LedgerError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    let corrupt = |why: String| LedgerError::Corrupt {
        at: path.display().to_string(),
        line: 1,
        why,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| io("opened", e))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| io("read", e))?;
    let mut counts: RefusalCounts = if bytes.is_empty() {
        RefusalCounts::default()
    } else {
        serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?
    };
    counts.count(code);
    let body = serde_json::to_vec(&counts).map_err(|e| corrupt(e.to_string()))?;
    let len = u64::try_from(body.len()).map_err(|e| corrupt(e.to_string()))?;
    file.write_all_at(&body, 0)
        .and_then(|()| file.set_len(len))
        .map_err(|e| io("written", e))
}

fn append(file: &mut File, path: &Path, entry: &Entry) -> Result<(), LedgerError> {
    let mut line = serde_json::to_string(entry).map_err(|e| LedgerError::Corrupt {
        at: path.display().to_string(),
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
