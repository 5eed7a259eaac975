//! Building a guard: the protected values a caller adds (secrets and the values derived
//! from a browser storage state), and the one multi-pattern automaton and prefilter
//! built over every searched form of every value. Every [`OutputGuard`] is made here.

use std::collections::HashMap;
use std::fmt;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use secrecy::{ExposeSecret, SecretString};
use zeroize::{Zeroize as _, Zeroizing};

use super::cut::cut_at_char_boundary;
use super::encodings::encodings;
use super::limits::GuardLimits;
use super::prefilter::Prefilter;
use super::scan::OutputGuard;
use crate::manifest::MIN_SECRET_BYTES;
use crate::secrets::SecretError;
use crate::storage_state::rule::{Refusal, Treatment, refusal, treatment};
use crate::storage_state::{derive_values, jwt_segments};

/// Longest searched form; longer forms are searched by this prefix.
const MAX_NEEDLE: usize = 64;

/// Collects the protected values and builds an [`OutputGuard`].
pub struct GuardBuilder {
    values: Vec<(String, Zeroizing<Vec<u8>>)>,
    unguarded: Vec<String>,
    limits: GuardLimits,
}

impl fmt::Debug for GuardBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardBuilder")
            .field(
                "values",
                &self.values.iter().map(|(l, _)| l).collect::<Vec<_>>(),
            )
            .field("unguarded", &self.unguarded)
            .field("limits", &self.limits)
            .finish()
    }
}

impl Default for GuardBuilder {
    fn default() -> Self {
        GuardBuilder::new(GuardLimits::default())
    }
}

impl GuardBuilder {
    /// An empty builder with these limits.
    pub fn new(limits: GuardLimits) -> Self {
        GuardBuilder {
            values: Vec::new(),
            unguarded: Vec::new(),
            limits,
        }
    }

    /// Protects a secret value. A value under 8 bytes cannot be scanned without false
    /// positives and is refused.
    pub fn add_secret(&mut self, name: &str, value: &SecretString) -> Result<(), SecretError> {
        let bytes = value.expose_secret().as_bytes();
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(SecretError::SecretTooShort {
                name: name.to_owned(),
                what: "the value".to_owned(),
                min: MIN_SECRET_BYTES,
            });
        }
        self.push(name.to_owned(), bytes);
        Ok(())
    }

    /// Protects a browser storage state (Playwright `storageState` JSON): every cookie
    /// value as stored and percent-decoded, every localStorage value whole, each text,
    /// number and boolean leaf, at any depth, of those that are JSON (and of JSON held in
    /// a JSON string), and each segment of JWT-looking values.
    ///
    /// Every such value of 8 bytes or more is guarded, whatever it is. A shorter one
    /// cannot be searched for without false positives: when it is a credential (an
    /// `httpOnly` cookie; a cookie or localStorage key named like a session or
    /// credential; a text or number leaf below such a name or a JSON key named so, with
    /// no key between that describes a credential, as `expires_at`; a JWT) the whole
    /// state is refused, naming the entry; when it is page state (`"true"`, `"en"`, any
    /// boolean) or a segment of a guarded JWT it is left unguarded and listed in
    /// [`GuardBuilder::unguarded`]. A state that holds no credential at all is refused.
    pub fn add_storage_state(
        &mut self,
        name: &str,
        state: &SecretString,
    ) -> Result<(), SecretError> {
        let derived = derive_values(name, state.expose_secret())?;
        match refusal(&derived) {
            Some(Refusal::TooShort { what, why }) => {
                return Err(SecretError::SecretTooShort {
                    name: name.to_owned(),
                    what: format!("{what} ({why})"),
                    min: MIN_SECRET_BYTES,
                });
            }
            Some(Refusal::NoCredential) => {
                return Err(SecretError::StorageStateWithoutCredential {
                    name: name.to_owned(),
                });
            }
            None => {}
        }
        for d in derived {
            let label = format!("{name}: {}", d.what);
            match treatment(&d) {
                Treatment::Unguarded(why) => self.unguarded.push(format!(
                    "{label} ({why}, shorter than {MIN_SECRET_BYTES} bytes)"
                )),
                // A refused value never gets here (the state is refused above); were it
                // to, guarding it is the safe side.
                Treatment::Guarded | Treatment::Refused(_) => self.values.push((label, d.value)),
            }
        }
        Ok(())
    }

    /// The storage-state values left unguarded because they are page state shorter than
    /// 8 bytes (descriptions only, never values), for the binding report.
    pub fn unguarded(&self) -> &[String] {
        &self.unguarded
    }

    fn push(&mut self, label: String, value: &[u8]) {
        self.values
            .push((label.clone(), Zeroizing::new(value.to_vec())));
        if let Some(segments) = jwt_segments(value) {
            for (i, segment) in segments.into_iter().enumerate() {
                if segment.len() >= MIN_SECRET_BYTES {
                    self.values.push((
                        format!("{label} (JWT segment {})", i + 1),
                        Zeroizing::new(segment.to_vec()),
                    ));
                }
            }
        }
    }

    /// Builds one multi-pattern automaton over every encoding of every value.
    pub fn build(self) -> Result<OutputGuard, SecretError> {
        let mut labels: Vec<String> = Vec::new();
        let mut label_index: HashMap<String, u32> = HashMap::new();
        let mut pattern_index: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut patterns: Vec<Zeroizing<Vec<u8>>> = Vec::new();
        let mut owners: Vec<Vec<u32>> = Vec::new();
        for (label, value) in &self.values {
            let li = match label_index.get(label) {
                Some(i) => *i,
                None => {
                    let i = u32::try_from(labels.len())
                        .map_err(|_| SecretError::Guard("too many values".to_owned()))?;
                    labels.push(label.clone());
                    label_index.insert(label.clone(), i);
                    i
                }
            };
            for mut encoded in encodings(value) {
                // Any occurrence of a long form contains its first MAX_NEEDLE bytes, which
                // are themselves protected material: searching the prefix is enough. The
                // prefix ends at a character boundary, so a text cut inside the character
                // that follows (read back as U+FFFD) still holds it.
                let keep = cut_at_char_boundary(&encoded, MAX_NEEDLE).len();
                encoded.truncate(keep);
                match pattern_index.get(encoded.as_slice()) {
                    Some(&pi) => {
                        if !owners[pi].contains(&li) {
                            owners[pi].push(li);
                        }
                    }
                    None => {
                        pattern_index.insert(encoded.to_vec(), patterns.len());
                        patterns.push(encoded);
                        owners.push(vec![li]);
                    }
                }
            }
        }
        for (mut key, _) in pattern_index.drain() {
            key.zeroize();
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(patterns.iter().map(|p| p.as_slice()))
            .map_err(|e| SecretError::Guard(e.to_string()))?;
        let prefilter = Prefilter::new(&patterns);
        Ok(OutputGuard {
            automaton,
            prefilter,
            owners,
            labels,
            limits: self.limits,
        })
    }
}

impl OutputGuard {
    /// A guard that protects nothing but still enforces the size cap.
    pub fn empty(limits: GuardLimits) -> Result<Self, SecretError> {
        GuardBuilder::new(limits).build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// A long non-ASCII secret is searched by a prefix that ends at a character
        /// boundary: a text cut at byte 64 of it (inside a character or not) and read as
        /// UTF-8 still holds the searched prefix and is blocked.
        #[test]
        fn a_long_secret_cut_inside_a_character_is_still_blocked(
            secret in "[a-z]{0,64}[äöüé€日😀][a-zäöüé€日😀]{64,70}",
            before in "[a-z ]{0,8}",
        ) {
            let mut b = GuardBuilder::default();
            b.add_secret("s", &SecretString::from(secret.clone())).unwrap();
            let guard = b.build().unwrap();
            let cut = String::from_utf8_lossy(&secret.as_bytes()[..MAX_NEEDLE]);
            prop_assert!(guard.scan_text(&format!("{before}{cut} and more")).is_blocked(), "{}", cut);
        }
    }

    #[test]
    fn short_values_are_refused() {
        let mut b = GuardBuilder::default();
        let err = b
            .add_secret("pin", &SecretString::from("1234567"))
            .unwrap_err();
        assert!(err.to_string().contains("shorter than 8 bytes"), "{err}");
        assert!(!err.to_string().contains("1234567"));
    }
}
