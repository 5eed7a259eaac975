//! The bound on provider text held per series: label names and values (the metric name
//! is the `__name__` label) and provider warnings longer than [`MAX_LABEL_CHARS`]
//! characters are cut, at a character boundary, and marked with [`CUT_MARK`] as they are
//! parsed, before anything holds, folds, sanitizes or guards them. What one series costs
//! the fold is then bounded whatever the provider's labels hold.
//!
//! A cut keeps no part of a word: the run of word characters (letters, digits and
//! `.:-_~+/=%@[]`, what addresses, host names, tokens and base64 are made of) that the
//! bound splits is dropped whole, so no start of an instance address (which the Manus
//! sealer recognizes only whole) or of a credential is left before the mark.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// The most characters of a label name or value (and of a provider warning) that are
/// kept; a longer one keeps its first this many characters followed by [`CUT_MARK`].
pub const MAX_LABEL_CHARS: usize = 256;

/// What follows a text cut at [`MAX_LABEL_CHARS`] characters.
pub const CUT_MARK: &str = "…[cut]";

/// `text` bounded to [`MAX_LABEL_CHARS`] characters: unchanged (still borrowed) when it
/// is not longer, else at most its first that many characters, without the word the
/// bound splits, and [`CUT_MARK`]. Never cuts inside a character.
pub(crate) fn bounded(text: Cow<'_, str>) -> Cow<'_, str> {
    match cut_at(&text, MAX_LABEL_CHARS) {
        None => text,
        Some(end) => Cow::Owned(format!("{}{CUT_MARK}", &text[..end])),
    }
}

/// [`bounded`] to `max` characters instead of [`MAX_LABEL_CHARS`] (provider metadata).
pub(crate) fn bounded_to(text: &str, max: usize) -> Cow<'_, str> {
    match cut_at(text, max) {
        None => Cow::Borrowed(text),
        Some(end) => Cow::Owned(format!("{}{CUT_MARK}", &text[..end])),
    }
}

/// The byte index where `text` is cut, when it is longer than `max` characters: after
/// its first `max` characters, less the word the bound splits.
fn cut_at(text: &str, max: usize) -> Option<usize> {
    if text.len() <= max {
        return None;
    }
    let (end, next) = text.char_indices().nth(max)?;
    if !is_word(next) {
        return Some(end);
    }
    let kept = &text[..end];
    Some(kept.trim_end_matches(is_word).len())
}

/// Whether `c` can be part of an address, host name, token or base64 run.
pub(crate) fn is_word(c: char) -> bool {
    c.is_alphanumeric() || ".:-_~+/=%@[]".contains(c)
}

/// The kept part of a text [`bounded`] cut, when it was cut: what precedes the mark.
pub(crate) fn cut_prefix(text: &str) -> Option<&str> {
    text.strip_suffix(CUT_MARK)
}

/// A label name or value read from the body and bounded before it is held: a borrowed
/// string stays borrowed, an escaped one is cut before it is copied.
pub(crate) struct BoundedStr<'a>(pub(crate) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for BoundedStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_str_with(deserializer, bounded).map(BoundedStr)
    }
}

/// Reads a string through `keep` before anything holds it: a string without escapes is
/// passed borrowed from the input, an escaped one before it is copied.
pub(crate) fn deserialize_str_with<'de, D: Deserializer<'de>>(
    deserializer: D,
    keep: for<'x> fn(Cow<'x, str>) -> Cow<'x, str>,
) -> Result<Cow<'de, str>, D::Error> {
    struct V(for<'x> fn(Cow<'x, str>) -> Cow<'x, str>);
    impl<'de> Visitor<'de> for V {
        type Value = Cow<'de, str>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok((self.0)(Cow::Borrowed(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Cow::Owned((self.0)(Cow::Borrowed(v)).into_owned()))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok((self.0)(Cow::Owned(v)))
        }
    }
    deserializer.deserialize_str(V(keep))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A bounded text is the text itself when short enough, else a prefix of it of
        /// exactly the bound in characters (never a part of a character) and the mark;
        /// read through serde, escaped or not, it is the same.
        #[test]
        fn a_bounded_text_is_a_marked_prefix_at_a_character_boundary(
            text in prop::collection::vec(
                prop_oneof![Just('a'), Just('é'), Just('猫'), Just('🦀'), Just('"'), Just('\n'),
                            Just(' '), Just('.'), Just(':')],
                0..600,
            ).prop_map(|c| c.into_iter().collect::<String>()),
        ) {
            let out = bounded(Cow::Borrowed(&text));
            let chars = text.chars().count();
            if chars <= MAX_LABEL_CHARS {
                prop_assert_eq!(&*out, text.as_str());
            } else {
                let prefix = cut_prefix(&out).unwrap();
                prop_assert!(text.starts_with(prefix));
                prop_assert!(prefix.chars().count() <= MAX_LABEL_CHARS);
                // No part of a word: what follows the kept part in the text starts no
                // word that the kept part ends in.
                let next = text[prefix.len()..].chars().next().unwrap();
                prop_assert!(
                    !(is_word(next) && prefix.chars().next_back().is_some_and(is_word)),
                    "{:?} | {:?}", prefix, next
                );
                // Only the split word is dropped.
                let first: String = text.chars().take(MAX_LABEL_CHARS).collect();
                prop_assert!(first[prefix.len()..].chars().all(is_word));
                if !text[first.len()..].chars().next().is_some_and(is_word) {
                    prop_assert_eq!(prefix, first.as_str());
                }
            }
            let json = serde_json::to_string(&text).unwrap();
            let BoundedStr(read) = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(read, out);
        }
    }

    /// An address or token split by the bound is dropped whole.
    #[test]
    fn a_split_address_leaves_no_part() {
        for tail in [
            "10.21.1.17:20180",
            "tidb-07.saas01.svc",
            "[fd00::1]:9100",
            "dG9rZW4=",
        ] {
            let text = format!("{}{tail} and more", " ".repeat(MAX_LABEL_CHARS - 5));
            let out = bounded(Cow::Borrowed(&text));
            assert_eq!(
                &*out,
                format!("{}{CUT_MARK}", " ".repeat(MAX_LABEL_CHARS - 5))
            );
        }
        let one_word = "x".repeat(1 << 10);
        assert_eq!(&*bounded(Cow::Borrowed(&one_word)), CUT_MARK);
    }

    #[test]
    fn a_long_value_is_cut_without_a_copy_of_it() {
        let long = "x".repeat(1 << 20);
        let json = format!("\"{long}\"");
        let BoundedStr(read) = serde_json::from_str(&json).unwrap();
        assert_eq!(read, CUT_MARK);
        let json = format!("\"{}\"", "x ".repeat(1 << 19));
        let BoundedStr(read) = serde_json::from_str(&json).unwrap();
        assert_eq!(read.len(), MAX_LABEL_CHARS + CUT_MARK.len());
        let short = "\"tikv-0:20180\"";
        let BoundedStr(read) = serde_json::from_str(short).unwrap();
        assert!(matches!(read, Cow::Borrowed("tikv-0:20180")));
    }
}
