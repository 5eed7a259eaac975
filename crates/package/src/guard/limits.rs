//! The bounds of one scan of the output guard.

/// Bounds of one scan. Exceeding a bound is a scan failure, and a scan failure blocks the
/// output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardLimits {
    /// Largest output scanned; a larger one is blocked.
    pub max_output_bytes: usize,
    /// How many times decoded text is decoded again (base64, hex, percent-encoding, JSON
    /// escapes).
    pub max_decode_depth: usize,
    /// Decoded bytes allowed in total, as a multiple of the output size (at least 1 MiB);
    /// more is treated as a decode bomb.
    pub decode_budget_factor: usize,
}

impl Default for GuardLimits {
    fn default() -> Self {
        GuardLimits {
            max_output_bytes: 16 * 1024 * 1024,
            max_decode_depth: 3,
            decode_budget_factor: 8,
        }
    }
}
