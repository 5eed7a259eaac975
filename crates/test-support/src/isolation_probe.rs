//! The isolation probe of the Grafana test front: when it is on, the front's home page
//! (the landing page a Wetech call opens) first reports everything a page of the
//! Grafana origin can find that an earlier page left (cookies, `localStorage`,
//! `sessionStorage`, IndexedDB databases, Cache Storage caches, service worker
//! registrations, a named window, an answer on a `BroadcastChannel`), then plants one
//! of each itself, tagged with the number of its visit. The page's `load` waits for
//! that: an image of the page is answered only once the report arrived (or after 10 s),
//! so the call goes on only after the page is done. A test-front addition, not Grafana
//! behaviour.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::Notify;

/// How long the page's load waits for its own report at most.
const REPORT_WAIT: Duration = Duration::from_secs(10);

/// What the probe pages reported, and the load gate.
#[derive(Debug, Default)]
pub(crate) struct IsolationProbe {
    on: std::sync::atomic::AtomicBool,
    reports: Mutex<Vec<Value>>,
    reported: Notify,
}

impl IsolationProbe {
    pub(crate) fn set_on(&self, on: bool) {
        self.on.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn is_on(&self) -> bool {
        self.on.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn reports(&self) -> Vec<Value> {
        self.reports
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Keeps a page's report and lets its load end.
    pub(crate) fn report(&self, body: &[u8]) -> Response {
        match serde_json::from_slice::<Value>(body) {
            Ok(report) => {
                self.reports
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(report);
                self.reported.notify_one();
                StatusCode::NO_CONTENT.into_response()
            }
            Err(_) => StatusCode::BAD_REQUEST.into_response(),
        }
    }

    /// The page's load gate: answers once a report arrived (or after [`REPORT_WAIT`]).
    pub(crate) async fn gate(&self) -> Response {
        let _ = tokio::time::timeout(REPORT_WAIT, self.reported.notified()).await;
        (
            StatusCode::OK,
            [(CONTENT_TYPE, "image/svg+xml")],
            GATE_IMAGE,
        )
            .into_response()
    }

    /// The home page with the probe.
    pub(crate) fn page(&self) -> Response {
        let visit = self
            .reports
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        let html = PAGE.replace("__VISIT__", &visit.to_string());
        (
            StatusCode::OK,
            [(CONTENT_TYPE, "text/html; charset=utf-8")],
            html,
        )
            .into_response()
    }
}

/// The service worker the probe registers: it does nothing but exist.
pub(crate) fn service_worker() -> Response {
    (
        StatusCode::OK,
        [(CONTENT_TYPE, "text/javascript")],
        "self.addEventListener('fetch', () => {});\n",
    )
        .into_response()
}

const GATE_IMAGE: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\"/>";

/// The probe page. Its report: `{visit, cookies, local, session, indexeddb, caches,
/// workers, window, broadcast, planted}` (names only, never values).
const PAGE: &str = r#"<!DOCTYPE html><html><head><title>Home - Grafana</title></head><body>
<div id="reactRoot">Grafana test front (isolation probe)</div>
<script>
(async () => {
  const visit = __VISIT__;
  const seen = {visit};
  const keys = (s) => { const k = []; for (let i = 0; i < s.length; i++) { k.push(s.key(i)); } return k.sort(); };
  seen.cookies = document.cookie.split(';').map(c => c.trim().split('=')[0]).filter(n => n).sort();
  seen.local = keys(localStorage);
  seen.session = keys(sessionStorage);
  try { seen.indexeddb = (await indexedDB.databases()).map(d => d.name).sort(); } catch (e) { seen.indexeddb = ['error: ' + e]; }
  try { seen.caches = (await caches.keys()).sort(); } catch (e) { seen.caches = ['error: ' + e]; }
  try { seen.workers = (await navigator.serviceWorker.getRegistrations()).map(r => r.scope).sort(); } catch (e) { seen.workers = ['error: ' + e]; }
  // A named window an earlier page opened: found, it carries its marker; not found,
  // window.open makes a new blank one, closed again.
  try {
    const w = window.open('', 'evidence-probe-window');
    seen.window = w === null ? null : (w.probeMarker === undefined ? null : String(w.probeMarker));
    if (w !== null && w.probeMarker === undefined) { w.close(); }
  } catch (e) { seen.window = 'error: ' + e; }
  // Anyone else on the channel answers a ping.
  const channel = new BroadcastChannel('evidence-probe');
  seen.broadcast = await new Promise((resolve) => {
    const answers = [];
    channel.onmessage = (m) => { if (m.data && m.data.pong !== undefined) { answers.push(String(m.data.pong)); } };
    channel.postMessage({ping: visit});
    setTimeout(() => resolve(answers.sort()), 200);
  });
  channel.onmessage = (m) => { if (m.data && m.data.ping !== undefined) { channel.postMessage({pong: visit}); } };
  // Plant one of each.
  const tag = 'planted_' + visit;
  document.cookie = tag + '=1; path=/; SameSite=Lax; max-age=3600';
  localStorage.setItem(tag, '1');
  sessionStorage.setItem(tag, '1');
  const planted = [];
  try {
    await new Promise((resolve, reject) => {
      const open = indexedDB.open(tag, 1);
      open.onupgradeneeded = () => open.result.createObjectStore('s');
      open.onsuccess = () => {
        const tx = open.result.transaction('s', 'readwrite');
        tx.objectStore('s').put('1', 'k');
        tx.oncomplete = () => { open.result.close(); resolve(); };
        tx.onerror = () => reject(tx.error);
      };
      open.onerror = () => reject(open.error);
    });
    planted.push('indexeddb');
  } catch (e) { planted.push('indexeddb error: ' + e); }
  try { await (await caches.open(tag)).put('/' + tag, new Response('1')); planted.push('cache'); } catch (e) { planted.push('cache error: ' + e); }
  try { await navigator.serviceWorker.register('/isolation-sw.js', {scope: '/'}); planted.push('worker'); } catch (e) { planted.push('worker error: ' + e); }
  try {
    const w = window.open('about:blank', 'evidence-probe-window');
    if (w !== null) { w.probeMarker = visit; planted.push('window'); } else { planted.push('window blocked'); }
  } catch (e) { planted.push('window error: ' + e); }
  seen.planted = planted;
  await fetch('/isolation-report', {method: 'POST', body: JSON.stringify(seen),
                                     headers: {'content-type': 'application/json'}});
})();
</script>
<img src="/isolation-gate" alt="">
</body></html>
"#;
