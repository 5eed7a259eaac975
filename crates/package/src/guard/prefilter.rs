//! The hash prefilter in front of the automaton: sampled 8-byte blocks of the output are
//! looked up in a bit set of every block of every searched form, so only windows around a
//! hit reach the automaton.

use zeroize::Zeroizing;

/// Bytes per sampled block of the prefilter.
const BLOCK: usize = 8;
/// Below this sampling step the prefilter does not pay off and the automaton runs alone.
const MIN_PREFILTER_STEP: usize = 4;

/// An exact sampling prefilter in front of the automaton (block hashing in the manner of
/// Wu-Manber). Every searched form is at least `shortest` bytes long, so each occurrence
/// contains an 8-byte block starting within its first `shortest - 7` bytes; sampling the
/// output every `shortest - 7` bytes therefore hits one of those blocks. A set bit for
/// every such block of every form sends the window around each hit sample to the
/// automaton; windows without a hit cannot hold a match. No false negatives; false
/// positives only cost an automaton pass over a short window.
pub(super) struct Prefilter {
    step: usize,
    span: usize,
    longest: usize,
    shift: u32,
    bits: Vec<u64>,
}

impl Prefilter {
    pub(super) fn new(patterns: &[Zeroizing<Vec<u8>>]) -> Option<Self> {
        let shortest = patterns.iter().map(|p| p.len()).min()?;
        let longest = patterns.iter().map(|p| p.len()).max()?;
        if shortest < BLOCK + MIN_PREFILTER_STEP - 1 {
            return None;
        }
        let span = shortest - BLOCK;
        let grams = patterns.len() * (span + 1);
        let bit_count = (grams * 256).next_power_of_two().clamp(1 << 16, 1 << 24);
        let shift = 64 - bit_count.trailing_zeros();
        let mut bits = vec![0u64; bit_count / 64];
        let mut filter = Prefilter {
            step: span + 1,
            span,
            longest,
            shift,
            bits: Vec::new(),
        };
        for p in patterns {
            for start in 0..=span {
                let h = filter.hash(block(&p[start..start + BLOCK]));
                bits[h / 64] |= 1 << (h % 64);
            }
        }
        filter.bits = bits;
        Some(filter)
    }

    fn hash(&self, block: u64) -> usize {
        // A full 64-bit mix: text blocks differ in few bits, a single multiply clusters them.
        let mut x = block ^ (block >> 31);
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 29;
        (x.wrapping_mul(0x94D0_49BB_1331_11EB) >> self.shift) as usize
    }

    fn hit(&self, block: u64) -> bool {
        let h = self.hash(block);
        self.bits
            .get(h / 64)
            .is_some_and(|w| w & (1 << (h % 64)) != 0)
    }

    /// Calls `verify` on merged candidate windows, in order, until it returns false.
    pub(super) fn candidates(
        &self,
        haystack: &[u8],
        mut verify: impl FnMut(std::ops::Range<usize>) -> bool,
    ) {
        let n = haystack.len();
        let mut pending: Option<std::ops::Range<usize>> = None;
        let mut q = 0;
        while q + BLOCK <= n {
            if self.hit(block(&haystack[q..q + BLOCK])) {
                let start = q.saturating_sub(self.span);
                let end = (q + self.longest).min(n);
                match &mut pending {
                    Some(r) if start <= r.end => r.end = end,
                    _ => {
                        if let Some(r) = pending.replace(start..end)
                            && !verify(r)
                        {
                            return;
                        }
                    }
                }
            }
            q += self.step;
        }
        if let Some(r) = pending {
            verify(r);
        }
    }
}

fn block(bytes: &[u8]) -> u64 {
    let mut b = [0u8; BLOCK];
    b.copy_from_slice(&bytes[..BLOCK]);
    u64::from_le_bytes(b)
}
