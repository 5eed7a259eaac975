//! The fail-closed output guard: every tool output is scanned for every bound secret, in
//! raw and encoded form, and replaced whole by an `output_blocked` failure when one is
//! found or when the scan cannot complete.
//!
//! One concern per file: `builder` collects the protected values and builds the
//! automaton (every guard is made there); `limits` bounds a scan; `cut` cuts text at
//! character boundaries; `encodings` lists the searched forms of a value; `prefilter` is
//! the hash prefilter in front of the automaton; `decode` holds the decoders of the
//! decode-and-rescan pass; `verdict` the outcome types; `scan` the guard that scans and
//! enforces. The imports run one way: `builder` uses `scan`, never the reverse.

mod builder;
mod cut;
mod decode;
mod encodings;
mod limits;
mod prefilter;
mod scan;
mod verdict;

pub use builder::GuardBuilder;
pub use cut::cut_at_char_boundary;
pub use encodings::searched_forms;
pub use limits::GuardLimits;
pub use scan::OutputGuard;
pub use verdict::{BlockCause, Blocked, Guarded, ScanFailure, Verdict};
