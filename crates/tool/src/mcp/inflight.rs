//! The calls an MCP server has accepted and not yet recorded. A call leaves the set when
//! it writes its own audit record; when the server is told to stop (SIGTERM or SIGINT,
//! as an MCP client sends after closing the session) it takes every call still in the
//! set and writes one record for each, marked cancelled. A call taken that way writes
//! nothing itself, so every accepted call has exactly one record.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use evidence_package::{AuditRecord, Package};
use evidence_result::QueryId;
use jiff::Timestamp;
use serde_json::Value;

/// A call in flight: when it started and the query ids its arguments name.
#[derive(Debug)]
struct Pending {
    time: Timestamp,
    started: Instant,
    query_ids: Vec<QueryId>,
}

/// The set (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    next: AtomicU64,
    calls: Mutex<BTreeMap<u64, Pending>>,
}

impl InFlight {
    /// Enters a call with its raw arguments; returns its key.
    pub(crate) fn enter(&self, args: &str) -> u64 {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let pending = Pending {
            time: Timestamp::now(),
            started: Instant::now(),
            query_ids: query_ids(args),
        };
        if let Ok(mut calls) = self.calls.lock() {
            calls.insert(key, pending);
        }
        key
    }

    /// Takes the call out; `true` when it was still there, so the call writes its own
    /// record, `false` when the stop already recorded it as cancelled.
    pub(crate) fn leave(&self, key: u64) -> bool {
        self.calls
            .lock()
            .map(|mut calls| calls.remove(&key).is_some())
            .unwrap_or(true)
    }

    /// Takes every call still in flight and gives the record of each, cancelled.
    pub(crate) fn cancel_all(&self, package: &Package) -> Vec<AuditRecord> {
        let pending = match self.calls.lock() {
            Ok(mut calls) => std::mem::take(&mut *calls),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        pending
            .into_values()
            .map(|p| {
                let ran: Duration = p.started.elapsed();
                AuditRecord::for_cancelled(package, p.time, ran, p.query_ids)
            })
            .collect()
    }
}

/// The query ids the raw arguments name (`queryId`, or each `queries[].queryId`), where
/// they are valid ids; nothing else of the model's arguments is kept.
pub(crate) fn query_ids(args: &str) -> Vec<QueryId> {
    let Ok(value) = serde_json::from_str::<Value>(args) else {
        return Vec::new();
    };
    let named = std::iter::once(&value).chain(
        value
            .get("queries")
            .and_then(Value::as_array)
            .into_iter()
            .flatten(),
    );
    named
        .filter_map(|v| v.get("queryId").and_then(Value::as_str))
        .filter_map(|id| QueryId::new(id).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_ids_are_read_from_either_shape_and_only_when_valid() {
        let ids = |args: &str| -> Vec<String> {
            query_ids(args)
                .iter()
                .map(|q| q.as_str().to_owned())
                .collect()
        };
        assert_eq!(ids(r#"{"queryId": "cpu", "expr": "up"}"#), ["cpu"]);
        assert_eq!(
            ids(r#"{"queries": [{"queryId": "a"}, {"queryId": "b"}, {"expr": "up"}]}"#),
            ["a", "b"]
        );
        assert!(ids("not json").is_empty());
        assert!(ids(r#"{"queryId": ""}"#).is_empty());
    }

    #[test]
    fn a_call_leaves_once() {
        let inflight = InFlight::default();
        let first = inflight.enter(r#"{"queryId": "one"}"#);
        let second = inflight.enter(r#"{"queryId": "two"}"#);
        assert_ne!(first, second);
        assert!(inflight.leave(first));
        assert!(!inflight.leave(first));
        assert!(inflight.leave(second));
    }
}
