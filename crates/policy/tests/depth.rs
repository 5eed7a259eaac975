//! Bounded PromQL depth: `lock` on a 2 MiB thread (a tokio worker's default stack) refuses
//! deeply nested expressions with `promql_too_deep` before the parser or any recursive
//! pass runs, instead of overflowing the stack, and still locks deep-but-allowed ones.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use evidence_policy::{depth::MAX_PROMQL_DEPTH, lock, lock::LockedItem};
use evidence_result::{FailureClass, PolicySource};
use support::*;

/// The code of locking `expr` as one Clinic query on a thread with a 2 MiB stack:
/// `"ready"` or the rejection code. An overflow aborts the test process.
fn lock_on_small_stack(expr: String) -> String {
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || {
            let policy = apid_29213("clinic");
            let args = one_query("clinic", "deep", &expr);
            let locked = lock(&policy, PolicySource::TrustedEnvelope, &args, &scope()).unwrap();
            match &locked.items[0] {
                LockedItem::Ready(_) => "ready".to_owned(),
                LockedItem::Rejected { failure, .. } => {
                    if failure.error.code.as_str() == "promql_too_deep" {
                        assert_eq!(failure.error.class, FailureClass::InvalidArgument);
                        assert!(failure.correction.allowed);
                    }
                    failure.error.code.as_str().to_owned()
                }
            }
        })
        .unwrap()
        .join()
        .unwrap()
}

fn nested(n: usize, open: &str, inner: &str, close: &str) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

/// The inputs of the issue, each within the 4,096-byte `expr` limit: 4,090 unary minus
/// signs and 2,046 nested parentheses are `promql_too_deep` on a 2 MiB stack.
#[test]
fn the_issue_inputs_are_refused_on_a_2_mib_thread() {
    let minus = format!("{}up", "-".repeat(4090));
    let parens = nested(2046, "(", "up", ")");
    assert!(minus.len() <= evidence_policy::args::MAX_EXPR_BYTES);
    assert!(parens.len() <= evidence_policy::args::MAX_EXPR_BYTES);
    assert_eq!(lock_on_small_stack(minus), "promql_too_deep");
    assert_eq!(lock_on_small_stack(parens), "promql_too_deep");
}

/// 680 nested `abs()` calls, 400 nested `sum()` and a 2,040-term `+1` chain are
/// `promql_too_deep`; parentheses inside strings and comments do not count.
#[test]
fn deep_function_nesting_and_binary_chains_are_refused() {
    // 680 calls of abs() fit in 4,096 bytes.
    assert_eq!(
        lock_on_small_stack(nested(680, "abs(", "up", ")")),
        "promql_too_deep"
    );
    assert_eq!(
        lock_on_small_stack(nested(400, "sum(", "up", ")")),
        "promql_too_deep"
    );
    // A left-leaning chain of binary operators is as deep as it is long.
    let chain = format!("up{}", "+1".repeat(2040));
    assert_eq!(lock_on_small_stack(chain), "promql_too_deep");
    // Parentheses inside strings and comments do not count; nesting around them does.
    let quoted = format!(
        "{} # {}\n",
        nested(
            60,
            "abs(",
            r#"label_replace(up, "a", "((((", "b", "(.*)")"#,
            ")"
        ),
        "(".repeat(3000)
    );
    assert_eq!(lock_on_small_stack(quoted), "ready");
}

/// Nested subqueries lock up to 64 levels (21 nested `max_over_time((...)[1m:15s])`) and
/// are `promql_too_deep` beyond.
#[test]
fn nested_subqueries_are_refused_beyond_the_limit() {
    // Each level `max_over_time((...)[1m:15s])` adds three levels of nesting.
    let level = |n: usize| nested(n, "max_over_time((", "up", ")[1m:15s])");
    assert_eq!(lock_on_small_stack(level(21)), "ready", "64 levels deep");
    assert_eq!(lock_on_small_stack(level(22)), "promql_too_deep");
    assert_eq!(lock_on_small_stack(level(100)), "promql_too_deep");
}

/// Inputs at the limit lock: one level below `MAX_PROMQL_DEPTH` is `ready`, the limit
/// itself is `promql_too_deep`.
#[test]
fn deep_but_allowed_inputs_still_lock() {
    let limit = MAX_PROMQL_DEPTH;
    assert_eq!(
        lock_on_small_stack(format!("{}up", "-".repeat(limit - 1))),
        "ready"
    );
    assert_eq!(
        lock_on_small_stack(format!("{}up", "-".repeat(limit))),
        "promql_too_deep"
    );
    assert_eq!(
        lock_on_small_stack(nested(limit - 1, "(", "up", ")")),
        "ready"
    );
    assert_eq!(
        lock_on_small_stack(nested(limit, "(", "up", ")")),
        "promql_too_deep"
    );
    assert_eq!(
        lock_on_small_stack(nested(limit - 1, "abs(", "up", ")")),
        "ready"
    );
    assert_eq!(
        lock_on_small_stack(format!("up{}", "+1".repeat(limit - 1))),
        "ready"
    );
}
