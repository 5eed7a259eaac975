//! The output guard itself: scanning output (automaton, then bounded decode-and-rescan)
//! and enforcing the verdict on a tool result, which passes unchanged or is replaced whole
//! by an `output_blocked` failure.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;

use aho_corasick::AhoCorasick;
use evidence_result::{Details, ErrorCode, Failure, FailureClass, Origin, QueryId, ToolResult};

use super::decode::decode_level;
use super::limits::GuardLimits;
use super::prefilter::Prefilter;
use super::verdict::{BlockCause, Blocked, Guarded, ScanFailure, Verdict};

/// The fail-closed output guard: one Aho-Corasick automaton over every encoding of every
/// protected value, plus a bounded decode-and-rescan of base64, hex, percent-encoded and
/// JSON-escaped runs.
///
/// The automaton holds the encoded values in memory for its lifetime (it is not zeroized).
pub struct OutputGuard {
    /// One automaton over every searched form of every value.
    pub(super) automaton: AhoCorasick,
    /// The prefilter in front of it, when the forms are long enough for one.
    pub(super) prefilter: Option<Prefilter>,
    /// For each pattern, the labels (indexes into `labels`) it belongs to.
    pub(super) owners: Vec<Vec<u32>>,
    /// The names of the protected values (a secret, or `secret: what`).
    pub(super) labels: Vec<String>,
    /// The limits of a scan.
    pub(super) limits: GuardLimits,
}

impl fmt::Debug for OutputGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputGuard")
            .field("values", &self.labels)
            .field("patterns", &self.automaton.patterns_len())
            .field("limits", &self.limits)
            .finish()
    }
}

/// At most this many secret names are collected for one blocked output.
const MAX_BLOCKED_NAMES: usize = 16;

impl OutputGuard {
    /// The limits in force.
    pub fn limits(&self) -> GuardLimits {
        self.limits
    }

    /// The names of the protected values (never the values).
    pub fn protected(&self) -> &[String] {
        &self.labels
    }

    /// Scans raw output bytes.
    pub fn scan_bytes(&self, output: &[u8]) -> Verdict {
        if output.len() > self.limits.max_output_bytes {
            return self.failed(ScanFailure::TooLarge {
                bytes: output.len(),
                limit: self.limits.max_output_bytes,
            });
        }
        self.scan_uncapped(output)
    }

    /// Scans output bytes whatever their size: the automaton, then the bounded
    /// decode-and-rescan.
    fn scan_uncapped(&self, output: &[u8]) -> Verdict {
        if self.labels.is_empty() {
            return Verdict::Clean;
        }
        let budget = output
            .len()
            .saturating_mul(self.limits.decode_budget_factor)
            .max(1024 * 1024);
        let mut spent = 0usize;
        let mut level: Cow<'_, [u8]> = Cow::Borrowed(output);
        let mut depth = 0;
        loop {
            if let Some(found) = self.find(&level) {
                return Verdict::Blocked(found);
            }
            if depth >= self.limits.max_decode_depth || level.is_empty() {
                return Verdict::Clean;
            }
            let remaining = budget.saturating_sub(spent);
            match decode_level(&level, remaining) {
                Some(next) => {
                    spent += next.len();
                    level = Cow::Owned(next);
                }
                None => return self.failed(ScanFailure::DecodeBudget { limit: budget }),
            }
            depth += 1;
        }
    }

    /// Scans output text.
    pub fn scan_text(&self, output: &str) -> Verdict {
        self.scan_bytes(output.as_bytes())
    }

    /// Scans a result in its serialized JSON form (which holds `text` and `details`).
    pub fn scan_result(&self, result: &ToolResult) -> Verdict {
        match result.to_json() {
            Ok(json) => self.scan_text(&json),
            Err(_) => self.failed(ScanFailure::Serialize),
        }
    }

    /// Passes a clean result through unchanged and replaces a blocked one, whole, with an
    /// `output_blocked` failure. It never fails and never passes unguarded output: a scan
    /// that cannot complete (too large, a decode bomb, a result that cannot be
    /// serialized) blocks like a found secret.
    ///
    /// The replacement names neither a protected value nor a secret; the returned
    /// [`Guarded::verdict`] says, for the audit record, which secrets matched or that the
    /// scan failed.
    pub fn enforce(&self, result: ToolResult) -> Guarded {
        match self.scan_result(&result) {
            Verdict::Clean => Guarded {
                result,
                verdict: Verdict::Clean,
            },
            Verdict::Blocked(blocked) => {
                let details = result.details();
                let query_id = details
                    .query_id
                    .clone()
                    .filter(|q| !self.scan_text(q.as_str()).is_blocked());
                Guarded {
                    result: self.blocked_result(details.origin(), query_id, &blocked),
                    verdict: Verdict::Blocked(blocked),
                }
            }
        }
    }

    /// The `output_blocked` failure that replaces a blocked output: why it was withheld
    /// (a protected value, or a failed scan), never which secret. Its own text is scanned
    /// too (whatever the size cap: it is small and made by the guard); should it still be
    /// blocked (or should the contract refuse it), the fixed [`ToolResult::withheld`]
    /// failure of `origin` replaces it. It never fails.
    pub fn blocked_result(
        &self,
        origin: Origin,
        query_id: Option<QueryId>,
        blocked: &Blocked,
    ) -> ToolResult {
        let failure = Failure::new(
            ErrorCode::output_blocked(),
            FailureClass::OutputBlocked,
            blocked.cause.model_detail(),
        )
        .with_correction(blocked.cause.model_correction());
        match ToolResult::new(Details::failure(origin.clone(), query_id, None, failure)) {
            Ok(replacement) if self.is_clean_replacement(&replacement) => replacement,
            _ => ToolResult::withheld(origin),
        }
    }

    /// True when a replacement made by the guard holds no protected value.
    fn is_clean_replacement(&self, replacement: &ToolResult) -> bool {
        match replacement.to_json() {
            Ok(json) => !self.scan_uncapped(json.as_bytes()).is_blocked(),
            Err(_) => false,
        }
    }

    fn failed(&self, why: ScanFailure) -> Verdict {
        Verdict::Blocked(Blocked {
            secrets: Vec::new(),
            cause: BlockCause::ScanFailed(why),
        })
    }

    fn find(&self, haystack: &[u8]) -> Option<Blocked> {
        let Some(prefilter) = &self.prefilter else {
            return self.find_in(haystack);
        };
        let mut found = None;
        prefilter.candidates(haystack, |range| {
            found = self.find_in(&haystack[range]);
            found.is_none()
        });
        found
    }

    fn find_in(&self, haystack: &[u8]) -> Option<Blocked> {
        let first = self.automaton.find(haystack)?;
        let mut names = BTreeSet::new();
        for m in self.automaton.find_iter(&haystack[first.start()..]) {
            for &owner in &self.owners[m.pattern().as_usize()] {
                if let Some(label) = self.labels.get(owner as usize) {
                    names.insert(label.clone());
                }
            }
            if names.len() >= MAX_BLOCKED_NAMES {
                break;
            }
        }
        Some(Blocked {
            secrets: names.into_iter().collect(),
            cause: BlockCause::SecretFound,
        })
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    use secrecy::SecretString;

    use super::*;
    use crate::guard::GuardBuilder;
    use crate::guard::encodings::percent_encode;

    fn guard(values: &[(&str, &str)]) -> OutputGuard {
        let mut b = GuardBuilder::default();
        for (name, value) in values {
            b.add_secret(name, &SecretString::from(value.to_string()))
                .unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn base64_cores_are_found_at_every_alignment() {
        let secret = "s3cr3t-Value/+?";
        let g = guard(&[("token", secret)]);
        for prefix in ["", "a", "ab", "abc"] {
            let text = format!("{prefix}{secret}{prefix}");
            for engine in [
                &base64::engine::general_purpose::STANDARD,
                &base64::engine::general_purpose::URL_SAFE,
                &STANDARD_NO_PAD,
                &URL_SAFE_NO_PAD,
            ] {
                let enc = engine.encode(text.as_bytes());
                let out = format!("{{\"v\":\"{enc}\"}}");
                assert!(g.scan_text(&out).is_blocked(), "{prefix:?} {enc}");
            }
        }
    }

    #[test]
    fn nested_encodings_are_decoded() {
        let secret = "correct horse battery";
        let g = guard(&[("pw", secret)]);
        let hex_then_b64 = base64::engine::general_purpose::STANDARD.encode(hex::encode(secret));
        assert!(g.scan_text(&format!("x={hex_then_b64};")).is_blocked());
        let pct_then_b64 = base64::engine::general_purpose::STANDARD.encode(percent_encode(
            secret.as_bytes(),
            &|b: u8| b.is_ascii_lowercase(),
            true,
            false,
        ));
        assert!(g.scan_text(&format!("glued{pct_then_b64}")).is_blocked());
        let double_json =
            serde_json::to_string(&serde_json::to_string(&format!("\"{secret}\"")).unwrap())
                .unwrap();
        assert!(g.scan_text(&double_json).is_blocked());
        assert!(!g.scan_text("correct horse, battery staple").is_blocked());
    }

    #[test]
    fn limits_fail_closed() {
        let mut b = GuardBuilder::new(GuardLimits {
            max_output_bytes: 64,
            ..GuardLimits::default()
        });
        b.add_secret("k", &SecretString::from("abcdefgh12345678"))
            .unwrap();
        let g = b.build().unwrap();
        let v = g.scan_text(&"x".repeat(65));
        match v {
            Verdict::Blocked(Blocked {
                secrets,
                cause: BlockCause::ScanFailed(ScanFailure::TooLarge { .. }),
            }) => {
                // Nothing matched, so no secret is named.
                assert!(secrets.is_empty(), "{secrets:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    fn origin() -> Origin {
        Origin {
            package: evidence_result::PackageId::clinic(),
            provider: evidence_result::Provider::Clinic,
            operation: evidence_result::Operation::QueryRange,
            policy_source: None,
        }
    }

    fn failed_with(detail: &str) -> ToolResult {
        let failure = Failure::new(
            ErrorCode::promql_parse_error(),
            FailureClass::InvalidArgument,
            detail,
        );
        let query_id = QueryId::new("tidb_cpu").unwrap();
        ToolResult::new(Details::failure(origin(), Some(query_id), None, failure)).unwrap()
    }

    #[test]
    fn the_guard_code_is_in_the_contract_table_with_its_class() {
        let g = guard(&[("k", "abcdefgh12345678")]);
        for result in [
            g.enforce(failed_with("abcdefgh12345678")).result,
            ToolResult::withheld(origin()),
        ] {
            let error = result.details().error.clone().unwrap();
            assert!(evidence_result::codes::is_known(
                error.code.as_str(),
                error.class
            ));
        }
    }

    #[test]
    fn a_scan_failure_yields_a_blocked_result() {
        let mut b = GuardBuilder::new(GuardLimits {
            max_output_bytes: 1024,
            ..GuardLimits::default()
        });
        b.add_secret("clinic_api_token", &SecretString::from("abcdefgh12345678"))
            .unwrap();
        let g = b.build().unwrap();
        // Too large to scan: fail closed, never an error and never the output.
        let big = failed_with(&"x".repeat(2048));
        let guarded = g.enforce(big);
        let Some(blocked) = guarded.blocked() else {
            panic!("not blocked: {guarded:?}")
        };
        assert!(matches!(
            blocked.cause,
            BlockCause::ScanFailed(ScanFailure::TooLarge { .. })
        ));
        assert!(blocked.secrets.is_empty(), "{:?}", blocked.secrets);
        let d = guarded.result.details();
        let error = d.error.as_ref().unwrap();
        assert_eq!(error.code, ErrorCode::output_blocked());
        assert_eq!(error.class, FailureClass::OutputBlocked);
        assert_eq!(d.query_id.as_ref().map(QueryId::as_str), Some("tidb_cpu"));
        let detail = d.detail_error.as_deref().unwrap();
        assert!(
            detail.contains("secret scan could not complete"),
            "{detail}"
        );
        assert!(!detail.contains("clinic_api_token"), "{detail}");
        // The correction says what happened: the scan's cap, not a protected value.
        let correction = d.correction.as_ref().unwrap();
        assert!(!correction.allowed);
        assert!(
            correction.instruction.contains("scan cap")
                && !correction
                    .instruction
                    .contains("contained a protected value"),
            "{}",
            correction.instruction
        );
        assert!(!guarded.result.text().contains(&"x".repeat(2048)));
        // A clean result passes unchanged.
        let small = failed_with("bad");
        let guarded = g.enforce(small.clone());
        assert_eq!(guarded.verdict, Verdict::Clean);
        assert_eq!(guarded.into_result(), small);
    }

    #[test]
    fn a_replacement_that_would_itself_leak_is_the_fixed_withheld_result() {
        // The secret is part of the replacement's own words: the fixed result replaces
        // it, and that result carries no query id.
        let secret = "tool output was withheld because";
        let g = guard(&[("phrase", secret)]);
        let guarded = g.enforce(failed_with(secret));
        assert!(guarded.verdict.is_blocked());
        assert_eq!(guarded.result, ToolResult::withheld(origin()));
        assert!(!g.scan_result(&guarded.result).is_blocked());
    }
}
