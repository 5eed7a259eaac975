//! Sessions of a package's server over HTTP: the capability a call presents and the
//! delivery of each session's envelopes by the runtime.
//!
//! - The agent side holds only its session's token ([`evidence_policy::SessionToken`])
//!   and sends it with every request in the header [`SESSION_HEADER`] (OpenCode fills it
//!   from `{env:EVIDENCE_SESSION_TOKEN}`). A `tools/call` runs under the newest envelope
//!   delivered for that token's digest; a call without the header (or with a malformed
//!   token) answers `session_missing`, one whose session has no envelope here
//!   `session_unknown`, one whose newest envelope has expired `session_expired`, each a
//!   failed result with nothing sent and its audit record. `initialize` and
//!   `tools/list` need no session: the listing is the manifest's.
//! - The runtime delivers each envelope it signs for a session to the server, never
//!   through the agent: `POST` [`ENVELOPES_PATH`](super::ENVELOPES_PATH) with the envelope's JSON as the body.
//!   The server verifies it as it verifies a call's (signature, this package's digest,
//!   package, provider, times), requires it to name a session, and stores it when it was
//!   issued after the session's current one ([`crate::session_store`]). The answer is
//!   JSON: `200` with `"delivered": "stored"` (and the `policy_id` it replaced) or
//!   `"unchanged"`; `409` when the session holds an envelope issued at the same time or
//!   later (an earlier envelope is never brought back); `400` for a body that is not an
//!   envelope; `403` for one that does not verify here; `422` for one that names no
//!   session. Only a signed envelope can be delivered, so whoever reaches the port can
//!   deliver nothing the signer did not issue, and nothing older than what a session
//!   holds.

use bytes::Bytes;
use evidence_policy::{SessionToken, SignedPolicy, envelope::MAX_ENVELOPE_BYTES};
use hyper::StatusCode;
use hyper::http::request::Parts;
use jiff::Timestamp;
use serde_json::json;

use crate::failure::{RuntimeFailure, RuntimeFailureKind};
use crate::runtime_context::RuntimeContext;
use crate::session_store::{Delivered, SessionStore, SessionStoreError};
use evidence_package::Package;

/// The header that carries a session's token on every request of the agent side.
pub const SESSION_HEADER: &str = "X-Evidence-Session";

/// The refusal code of a delivery whose shared store could not be used.
pub(crate) const STORE_UNAVAILABLE: &str = "session_store_unavailable";

/// How long a delivery may wait for a shared (Redis) session store.
const DELIVERY_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// The envelope of a call that came with the request head `parts`: the current envelope
/// of the session its [`SESSION_HEADER`] names, with the session's digest.
pub(crate) fn session_envelope(
    parts: Option<&Parts>,
    store: &SessionStore,
    now: Timestamp,
    within: std::time::Duration,
) -> Result<(SignedPolicy, evidence_result::Digest), RuntimeFailure> {
    let missing = |why: &str| {
        Err(RuntimeFailure::new(
            RuntimeFailureKind::SessionMissing,
            format!("{why}; nothing was sent"),
        ))
    };
    let mut values = parts
        .map(|parts| parts.headers.get_all(SESSION_HEADER).iter())
        .into_iter()
        .flatten();
    let (Some(value), None) = (values.next(), values.next()) else {
        return missing(&format!(
            "a call over HTTP presents its session's token in one {SESSION_HEADER} header, \
             and this call presented none or several"
        ));
    };
    let Ok(text) = value.to_str() else {
        return missing(&format!("the {SESSION_HEADER} header is not text"));
    };
    let token = match SessionToken::parse(text) {
        Ok(token) => token,
        Err(e) => return missing(&format!("the {SESSION_HEADER} header: {e}")),
    };
    let session = token.digest();
    store
        .current(&session, now, within)
        .map(|env| (env, session))
}

/// The answer to a delivery: its status and JSON body.
#[derive(Debug)]
pub(crate) struct DeliveryAnswer {
    pub(crate) status: StatusCode,
    pub(crate) body: serde_json::Value,
    /// The refusal's code, for the request record.
    pub(crate) refused: Option<&'static str>,
    /// The delivered envelope's policy id, for the request record.
    pub(crate) policy_id: Option<String>,
}

impl DeliveryAnswer {
    fn new(status: StatusCode, body: serde_json::Value, policy_id: &str) -> Self {
        DeliveryAnswer {
            status,
            body,
            refused: None,
            policy_id: Some(policy_id.to_owned()),
        }
    }

    fn refused(status: StatusCode, error: &'static str, detail: impl std::fmt::Display) -> Self {
        DeliveryAnswer {
            status,
            body: json!({"error": error, "detail": detail.to_string()}),
            refused: Some(error),
            policy_id: None,
        }
    }

    /// The body as bytes.
    pub(crate) fn bytes(&self) -> Bytes {
        Bytes::from(self.body.to_string())
    }

    /// The outcome as metrics name it: the refusal's code, or `stored` or `unchanged`.
    pub(crate) fn outcome(&self) -> &'static str {
        match (self.refused, self.body["delivered"].as_str()) {
            (Some(code), _) => code,
            (None, Some("unchanged")) => "unchanged",
            (None, _) => "stored",
        }
    }
}

/// Takes one delivered envelope (`body`) for `package` under `context`'s keys at `now`.
pub(crate) fn deliver(
    package: &Package,
    context: &RuntimeContext,
    store: &SessionStore,
    body: &[u8],
    now: Timestamp,
) -> DeliveryAnswer {
    if body.len() > MAX_ENVELOPE_BYTES {
        return DeliveryAnswer::refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            "envelope_too_large",
            format!("an envelope is at most {MAX_ENVELOPE_BYTES} bytes"),
        );
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return DeliveryAnswer::refused(
            StatusCode::BAD_REQUEST,
            "malformed_envelope",
            "the body is not UTF-8",
        );
    };
    let envelope = match SignedPolicy::from_json(text) {
        Ok(envelope) => envelope,
        Err(e) => {
            return DeliveryAnswer::refused(StatusCode::BAD_REQUEST, "malformed_envelope", e);
        }
    };
    let keys = match context.keys() {
        Ok(keys) => keys,
        Err(e) => {
            return DeliveryAnswer::refused(
                StatusCode::INTERNAL_SERVER_ERROR,
                e.kind.code(),
                e.detail,
            );
        }
    };
    let policy = match evidence_policy::verify(
        &envelope,
        keys,
        &package.digest(),
        package.identity(),
        package.manifest().provider,
        now,
    ) {
        Ok(policy) => policy,
        Err(e) => {
            return DeliveryAnswer::refused(
                StatusCode::FORBIDDEN,
                RuntimeFailureKind::PolicyVerificationFailed.code(),
                format!("the envelope does not verify for this package: {e}"),
            );
        }
    };
    let Some(session) = policy.session else {
        return DeliveryAnswer::refused(
            StatusCode::UNPROCESSABLE_ENTITY,
            "no_session",
            "the policy names no session: a server over HTTP serves only policies signed for a \
             session (the digest of its token in `session`)",
        );
    };
    let policy_id = policy.policy_id.to_string();
    match store.deliver(&session, &envelope, &policy, DELIVERY_WITHIN) {
        Ok(Delivered::Stored { replaced }) => DeliveryAnswer::new(
            StatusCode::OK,
            json!({"delivered": "stored", "policy_id": policy_id, "replaced": replaced}),
            &policy_id,
        ),
        Ok(Delivered::Unchanged) => DeliveryAnswer::new(
            StatusCode::OK,
            json!({"delivered": "unchanged", "policy_id": policy_id}),
            &policy_id,
        ),
        Ok(Delivered::NotNewer {
            current,
            current_issued_at,
        }) => DeliveryAnswer {
            refused: Some("not_newer"),
            ..DeliveryAnswer::new(
                StatusCode::CONFLICT,
                json!({
                    "error": "not_newer",
                    "detail": format!(
                        "the session holds policy {current} issued at {current_issued_at}; an \
                         envelope is stored only when issued after the session's current one"
                    ),
                    "policy_id": policy_id,
                    "current": current,
                }),
                &policy_id,
            )
        },
        Err(e @ SessionStoreError::Shared(_)) => {
            DeliveryAnswer::refused(StatusCode::SERVICE_UNAVAILABLE, STORE_UNAVAILABLE, e)
        }
        Err(e) => DeliveryAnswer::refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "session_store_unusable",
            e,
        ),
    }
}
