//! The scripts the connector runs in the page. They are constants: every value (URL,
//! body, storage entries, limits, read handles) reaches them as a script argument
//! (WebDriver's, or `Runtime.callFunctionOn`'s through the page's DevTools session, see
//! `page_scripts.rs`), never spliced into script text.
//!
//! A `fetch` from the page is read in three kinds of call: [`FETCH_OPEN`] sends the
//! request and keeps the body's reader in the page (in a `Map` of open reads on
//! `window`, under a name no Grafana code uses), [`FETCH_READ`] hands over the next
//! bounded chunk, and [`FETCH_CANCEL`] drops a read the connector leaves before its end.

/// `execute_async`: starts one `fetch` from the page with the page's cookies and keeps
/// its body's reader in the page, unread.
///
/// Arguments: `url` (same-origin), `method`, `body` (string or null), `contentType`
/// (string or null), `maxBytes` (the total bound on the body), `timeoutMs` (the time
/// limit of the whole read: the request, and every chunk read by [`FETCH_READ`]),
/// `credentials`, and the WebDriver callback. When the limit passes, the request and
/// the body's stream are aborted wherever the read is.
///
/// Answers one of:
/// - `{kind: "response", handle, status, contentType}`: the body waits in the page
///   under `handle`, to be read with [`FETCH_READ`] (or dropped with [`FETCH_CANCEL`]);
/// - `{kind: "redirect"}` (the answer was a redirect, not followed);
/// - `{kind: "too_large"}` (the declared `Content-Length` is over `maxBytes`),
///   `{kind: "timeout"}`, `{kind: "network", message}`.
///
/// Nothing is kept in the page after any answer but `response`.
pub(crate) const FETCH_OPEN: &str = r#"
const [url, method, body, contentType, maxBytes, timeoutMs, credentials, done] = arguments;
const reads = window.__evidencePageReads || (window.__evidencePageReads = new Map());
const read = {controller: new AbortController(), reader: null, rest: null, out: null, total: 0,
              maxBytes, timedOut: false, timer: 0, queue: Promise.resolve()};
read.timer = setTimeout(() => { read.timedOut = true; read.controller.abort(); }, timeoutMs);
const end = (answer) => { clearTimeout(read.timer); done(answer); };
(async () => {
  try {
    const headers = {'accept': 'application/json'};
    if (contentType !== null) { headers['content-type'] = contentType; }
    const response = await fetch(url, {
      method, headers, body, credentials, cache: 'no-store', redirect: 'manual',
      signal: read.controller.signal,
    });
    if (response.type === 'opaqueredirect') { end({kind: 'redirect'}); return; }
    const declared = Number(response.headers.get('content-length') || '0');
    if (declared > maxBytes) { read.controller.abort(); end({kind: 'too_large'}); return; }
    read.reader = response.body === null ? null : response.body.getReader();
    reads.next = (reads.next || 0) + 1;
    const handle = reads.next;
    reads.set(handle, read);
    done({kind: 'response', handle, status: response.status,
          contentType: response.headers.get('content-type')});
  } catch (e) {
    end(read.timedOut ? {kind: 'timeout'} : {kind: 'network', message: String(e)});
  }
})();
"#;

/// `execute_async`: the next chunk of a body opened by [`FETCH_OPEN`].
///
/// Arguments: `handle`, `chunkBytes` (the most bytes one answer carries), and the
/// WebDriver callback. Reads from the body's stream until `chunkBytes` are gathered or
/// the body ends; bytes read past `chunkBytes` wait in the page for the next call.
/// Reads of one body run one after another in the order they were asked for, so the
/// connector may ask for the next chunk before the last one has reached it; a read
/// asked for after the body's end answers that no read has the handle.
///
/// Answers one of:
/// - `{kind: "chunk", base64, last}`: the bytes, base64-encoded (binary-exact, whatever
///   the body's encoding); `last` is true when the body ended with them;
/// - `{kind: "too_large"}` (the body passed the total bound), `{kind: "timeout"}` (the
///   time limit passed), `{kind: "network", message}` (the body broke off, or no read
///   has this handle).
///
/// After any answer but a `chunk` that is not `last`, the read is gone from the page:
/// its stream was cancelled (or ended), its request aborted, its timer cleared.
pub(crate) const FETCH_READ: &str = r#"
const [handle, chunkBytes, done] = arguments;
const reads = window.__evidencePageReads;
const gone = () => done({kind: 'network', message: 'no open read ' + handle});
const asked = reads === undefined ? undefined : reads.get(handle);
if (asked === undefined) { gone(); return; }
const encode = (bytes) => {
  if (typeof bytes.toBase64 === 'function') { return bytes.toBase64(); }
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
};
const step = async (read) => {
  const close = (answer) => {
    reads.delete(handle);
    clearTimeout(read.timer);
    if (answer.kind !== 'chunk') {
      if (read.reader !== null) { read.reader.cancel().catch(() => {}); }
      read.controller.abort();
    }
    done(answer);
  };
  try {
    // One buffer per read, reused by every chunk.
    if (read.out === null || read.out.length !== chunkBytes) { read.out = new Uint8Array(chunkBytes); }
    const out = read.out;
    let at = 0;
    let last = read.reader === null;
    if (read.rest !== null) {
      const take = Math.min(read.rest.length, chunkBytes);
      out.set(read.rest.subarray(0, take), 0);
      at = take;
      read.rest = take < read.rest.length ? read.rest.subarray(take) : null;
    }
    while (!last && at < chunkBytes) {
      const {done: finished, value} = await read.reader.read();
      if (finished) { last = true; break; }
      read.total += value.length;
      if (read.total > read.maxBytes) { close({kind: 'too_large'}); return; }
      const take = Math.min(value.length, chunkBytes - at);
      out.set(value.subarray(0, take), at);
      at += take;
      if (take < value.length) { read.rest = value.subarray(take); }
    }
    last = last && read.rest === null;
    const answer = {kind: 'chunk', base64: encode(out.subarray(0, at)), last};
    if (last) { close(answer); } else { done(answer); }
  } catch (e) {
    close(read.timedOut ? {kind: 'timeout'} : {kind: 'network', message: String(e)});
  }
};
asked.queue = asked.queue.then(() => {
  const read = reads.get(handle);
  return read === undefined ? gone() : step(read);
});
"#;

/// `execute`: drops a read opened by [`FETCH_OPEN`] before its end: cancels the body's
/// stream, aborts the request, clears the timer. Argument: `handle`. Answers whether a
/// read had that handle.
pub(crate) const FETCH_CANCEL: &str = r#"
const [handle] = arguments;
const reads = window.__evidencePageReads;
const read = reads === undefined ? undefined : reads.get(handle);
if (read === undefined) { return false; }
reads.delete(handle);
clearTimeout(read.timer);
if (read.reader !== null) { read.reader.cancel().catch(() => {}); }
read.controller.abort();
return true;
"#;

/// `execute`: writes localStorage entries of the current origin. Argument: an array of
/// `[name, value]` pairs. Answers the number written.
pub(crate) const SET_LOCAL_STORAGE: &str = r#"
const [entries] = arguments;
for (const [name, value] of entries) { window.localStorage.setItem(name, value); }
return entries.length;
"#;

/// `execute`: the browser's identity as the page sees it.
pub(crate) const IDENTITY: &str = r#"
const data = navigator.userAgentData;
return {
  userAgent: navigator.userAgent,
  brands: data ? data.brands.map(b => ({brand: b.brand, version: b.version})) : null,
};
"#;
