//! What a scan decides: a clean output, or a blocked one with the names of the secrets
//! involved and why (a secret was found, or the scan itself failed).

use std::fmt;

/// Why an output was blocked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockCause {
    /// A protected value was found, in some encoding.
    SecretFound,
    /// The scan itself failed; the output is blocked rather than passed unscanned.
    ScanFailed(ScanFailure),
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
    /// Names of the secrets involved: the ones found, or every guarded one when the scan
    /// failed. Storage-state values are named `secret: what` (a cookie or localStorage
    /// name, never a value).
    pub secrets: Vec<String>,
    /// Why.
    pub cause: BlockCause,
}

impl Blocked {
    /// The `detail_error` of the replacement result: names, never values.
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
                "the tool output was withheld because the secret scan failed ({why}); guarded secrets: {names}"
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
