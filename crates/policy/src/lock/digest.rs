//! Request-digest canonicalization: the canonical request a digest is computed over, for
//! a ready query (a fixed-order struct whose compact JSON is its RFC 8785 form) and for a
//! rejected one (the request as sent, valid values normalized).

use evidence_result::{Operation, PackageId, Provider, QueryId, RequestDigest};
use jiff::Timestamp;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::TrustedPolicy;

/// The caller-owned fields of a rejected request, each normalized when it was valid and
/// as sent otherwise, and every key outside the provider's spec as sent.
pub(super) struct SentFields {
    /// The expression printed from its AST, or its raw JSON when it does not parse.
    pub(super) expr: Value,
    /// The resolved step in seconds, or its raw JSON when invalid.
    pub(super) step: Value,
    /// The unit, or its raw JSON when invalid.
    pub(super) unit: Value,
    /// The instance reference, or its raw JSON when invalid.
    pub(super) instance_ref: Value,
    /// Keys outside the spec, as sent.
    pub(super) extra: Map<String, Value>,
}

/// The canonical request a digest is computed over.
#[derive(Serialize)]
struct DigestInput<'a> {
    v: u32,
    package: &'a PackageId,
    provider: Provider,
    operation: Operation,
    query_id: &'a QueryId,
    expr: Value,
    step: Value,
    unit: Value,
    instance_ref: Value,
    window_start: &'a Timestamp,
    window_end: &'a Timestamp,
    #[serde(skip_serializing_if = "Map::is_empty")]
    extra: Map<String, Value>,
}

/// The canonical request a ready query's digest is computed over. Its fields are
/// declared in RFC 8785 key order and hold only strings, integers and nulls, so its
/// compact `serde_json` form is its canonical JSON (tested), without the cost of a
/// general canonicalizer.
#[derive(Serialize)]
struct ReadyDigest<'a> {
    expr: &'a str,
    instance_ref: Option<&'a str>,
    operation: Operation,
    package: &'a PackageId,
    provider: Provider,
    query_id: &'a QueryId,
    step: u64,
    unit: Option<&'a str>,
    v: u32,
    window_end: &'a Timestamp,
    window_start: &'a Timestamp,
}

/// The digest of a rejected request, when it can be computed.
pub(super) fn rejected_digest(
    policy: &TrustedPolicy,
    query_id: &QueryId,
    sent: SentFields,
) -> Option<RequestDigest> {
    let input = DigestInput {
        v: 1,
        package: &policy.package,
        provider: policy.provider,
        operation: policy.operation,
        query_id,
        expr: sent.expr,
        step: sent.step,
        unit: sent.unit,
        instance_ref: sent.instance_ref,
        window_start: &policy.window.start,
        window_end: &policy.window.end,
        extra: sent.extra,
    };
    RequestDigest::of(&input).ok()
}

/// The digest of a ready query: the locked expression, step, unit and reference within
/// the policy's package, provider, operation and window.
pub(super) fn locked_digest(
    policy: &TrustedPolicy,
    query_id: &QueryId,
    expr: &str,
    step: u64,
    unit: Option<&str>,
    instance_ref: Option<&str>,
) -> Result<RequestDigest, serde_json::Error> {
    ready_digest(&ReadyDigest {
        expr,
        instance_ref,
        operation: policy.operation,
        package: &policy.package,
        provider: policy.provider,
        query_id,
        step,
        unit,
        v: 1,
        window_end: &policy.window.end,
        window_start: &policy.window.start,
    })
}

/// The SHA-256 of the compact JSON of a ready query's canonical request.
fn ready_digest(input: &ReadyDigest<'_>) -> Result<RequestDigest, serde_json::Error> {
    let json = serde_json::to_string(input)?;
    Ok(RequestDigest::from(evidence_result::Digest::sha256(
        json.as_bytes(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::fixtures::clinic;

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config { cases: 128, ..Default::default() })]

        /// The fast digest of a ready query is exactly the digest of its RFC 8785
        /// canonical JSON.
        #[test]
        fn ready_digest_is_canonical(
            expr in proptest::prelude::any::<String>(),
            unit in proptest::option::of(proptest::prelude::any::<String>()),
            instance_ref in proptest::option::of("[ -~]{0,40}"),
            step in 1u64..=crate::args::MAX_STEP_SECONDS,
            qid in "[A-Za-z0-9_.:-]{1,64}",
        ) {
            let p = clinic();
            let query_id = QueryId::new(qid).unwrap();
            let input = ReadyDigest {
                expr: &expr,
                instance_ref: instance_ref.as_deref(),
                operation: p.operation,
                package: &p.package,
                provider: p.provider,
                query_id: &query_id,
                step,
                unit: unit.as_deref(),
                v: 1,
                window_end: &p.window.end,
                window_start: &p.window.start,
            };
            let canonical = evidence_result::digest::canonical_json(&input).unwrap();
            proptest::prop_assert_eq!(serde_json::to_string(&input).unwrap(), canonical);
            proptest::prop_assert_eq!(ready_digest(&input).unwrap(), RequestDigest::of(&input).unwrap());
        }
    }
}
