//! The scripts the connector runs in the page. They are constants: every value (URL,
//! body, storage entries, limits) reaches them as a WebDriver script argument, never
//! spliced into script text.

/// `execute_async`: one `fetch` from the page with the page's cookies.
///
/// Arguments: `url` (same-origin), `method`, `body` (string or null), `contentType`
/// (string or null), `maxBytes`, `timeoutMs`, `credentials`, and the WebDriver callback.
/// The body is read as a stream and abandoned as soon as it passes `maxBytes`.
///
/// Answers one of:
/// - `{kind: "response", status, contentType, text}` (the body as UTF-8), or with
///   `base64` instead of `text` when the body is not valid UTF-8;
/// - `{kind: "redirect"}` (the answer was a redirect, not followed);
/// - `{kind: "too_large"}`, `{kind: "timeout"}`, `{kind: "network", message}`.
pub(crate) const FETCH: &str = r#"
const [url, method, body, contentType, maxBytes, timeoutMs, credentials, done] = arguments;
const controller = new AbortController();
let timedOut = false;
const timer = setTimeout(() => { timedOut = true; controller.abort(); }, timeoutMs);
(async () => {
  try {
    const headers = {'accept': 'application/json'};
    if (contentType !== null) { headers['content-type'] = contentType; }
    const response = await fetch(url, {
      method, headers, body, credentials, cache: 'no-store', redirect: 'manual',
      signal: controller.signal,
    });
    if (response.type === 'opaqueredirect') { done({kind: 'redirect'}); return; }
    const declared = Number(response.headers.get('content-length') || '0');
    if (declared > maxBytes) { controller.abort(); done({kind: 'too_large'}); return; }
    const chunks = [];
    let total = 0;
    if (response.body !== null) {
      const reader = response.body.getReader();
      for (;;) {
        const {done: end, value} = await reader.read();
        if (end) { break; }
        total += value.length;
        if (total > maxBytes) { controller.abort(); done({kind: 'too_large'}); return; }
        chunks.push(value);
      }
    }
    const bytes = new Uint8Array(total);
    let at = 0;
    for (const chunk of chunks) { bytes.set(chunk, at); at += chunk.length; }
    const answer = {kind: 'response', status: response.status,
                    contentType: response.headers.get('content-type')};
    try {
      answer.text = new TextDecoder('utf-8', {fatal: true, ignoreBOM: true}).decode(bytes);
    } catch (_) {
      let binary = '';
      for (let i = 0; i < bytes.length; i += 0x8000) {
        binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
      }
      answer.base64 = btoa(binary);
    }
    done(answer);
  } catch (e) {
    done(timedOut ? {kind: 'timeout'} : {kind: 'network', message: String(e)});
  } finally {
    clearTimeout(timer);
  }
})();
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
