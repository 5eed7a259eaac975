//! What a scan decides: a clean output, or a blocked one with the names of the secrets
//! involved and why (a secret was found, or the scan itself failed).

use std::fmt;

use evidence_result::{Correction, FailureClass, ToolResult};

/// Why an output was blocked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockCause {
    /// A protected value was found, in some encoding.
    SecretFound,
    /// The scan itself failed; the output is blocked rather than passed unscanned.
    ScanFailed(ScanFailure),
}

impl BlockCause {
    /// The `detail_error` of the result that replaces a blocked output: why it was
    /// withheld, naming no secret.
    pub fn model_detail(&self) -> String {
        match self {
            BlockCause::SecretFound => {
                "the tool output was withheld because it contained a protected value".to_owned()
            }
            BlockCause::ScanFailed(why) => {
                format!(
                    "the tool output was withheld because the secret scan could not complete \
                     ({why}); no protected value was found in what was scanned"
                )
            }
        }
    }

    /// The correction of the result that replaces a blocked output. A found secret keeps
    /// the class's standard instruction; a scan that could not complete says so (its
    /// size cap or decoding budget, not a protected value). Either way the class is
    /// `output_blocked` and the turn stops: what was not scanned may hold a secret, and
    /// a guarded result of at most 4 KiB exceeds the budget only when the provider's
    /// data nests encodings on purpose, which no change of the query corrects.
    pub fn model_correction(&self) -> Correction {
        let mut correction = Correction::for_class(
            FailureClass::OutputBlocked,
            None,
            Correction::default_keep(),
        );
        if let BlockCause::ScanFailed(why) = self {
            correction.instruction = format!(
                "The output was withheld because the secret scan could not complete ({why}); \
                 nothing protected was found in what was scanned, but an output that was not \
                 scanned whole is never passed on. This stops the turn: do not call any \
                 evidence tool again in this turn, for this or any other objective; report \
                 the objective as failed."
            );
        }
        correction
    }
}

/// A failure of the scan itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanFailure {
    /// The output is larger than the size cap.
    TooLarge {
        /// The output size.
        bytes: usize,
        /// The cap.
        limit: usize,
    },
    /// Decoding produced more than the decode budget (a decode bomb).
    DecodeBudget {
        /// The budget in bytes.
        limit: usize,
    },
    /// The result could not be serialized for scanning.
    Serialize,
}

impl fmt::Display for ScanFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScanFailure::TooLarge { bytes, limit } => {
                write!(
                    f,
                    "output of {bytes} bytes exceeds the {limit}-byte scan cap"
                )
            }
            ScanFailure::DecodeBudget { limit } => {
                write!(
                    f,
                    "decoding nested encodings exceeded the {limit}-byte budget"
                )
            }
            ScanFailure::Serialize => f.write_str("the result could not be serialized"),
        }
    }
}

/// A blocked output: which secrets (names only) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// Names of the secrets found; empty when the scan failed (then none matched, and
    /// the audit record names none). Storage-state values are named `secret: what` (a
    /// cookie or localStorage name, never a value).
    pub secrets: Vec<String>,
    /// Why.
    pub cause: BlockCause,
}

impl Blocked {
    /// A description for the audit record: the names of the secrets involved (never
    /// their values) and why. Never for the model: the replacement result says only why
    /// ([`BlockCause::model_detail`]).
    pub fn detail(&self) -> String {
        let names = if self.secrets.is_empty() {
            "none".to_owned()
        } else {
            self.secrets.join(", ")
        };
        match &self.cause {
            BlockCause::SecretFound => format!(
                "the tool output was withheld because it contained a protected value of: {names}"
            ),
            BlockCause::ScanFailed(why) => format!(
                "the tool output was withheld because the secret scan could not complete ({why}); \
                 no secret matched in what was scanned"
            ),
        }
    }
}

/// The outcome of a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing protected was found and the scan completed.
    Clean,
    /// The output must not be passed on.
    Blocked(Blocked),
}

impl Verdict {
    /// Whether the output is blocked.
    pub fn is_blocked(&self) -> bool {
        matches!(self, Verdict::Blocked(_))
    }
}

/// A result after the output guard, and the verdict that decided it.
///
/// `result` is what may be passed on: the result unchanged when the scan was clean,
/// otherwise an `output_blocked` failure that names neither a protected value nor a
/// secret. `verdict` is for the audit record only: which secrets matched, or that the
/// scan failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Guarded {
    /// The result that may be passed on.
    pub result: ToolResult,
    /// The verdict of the scan.
    pub verdict: Verdict,
}

impl Guarded {
    /// The result that may be passed on.
    pub fn into_result(self) -> ToolResult {
        self.result
    }

    /// Why the output was blocked, if it was.
    pub fn blocked(&self) -> Option<&Blocked> {
        match &self.verdict {
            Verdict::Clean => None,
            Verdict::Blocked(blocked) => Some(blocked),
        }
    }
}
