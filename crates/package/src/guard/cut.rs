//! Cuts at character boundaries: where text that may hold a protected value is cut (the
//! guard's searched prefix of a long value, an excerpt of a provider's body, the retained
//! start of a long body), the cut never ends inside a UTF-8 character. A cut inside one
//! would be read back as U+FFFD after the kept bytes, so the longest prefix of a value a
//! cut text can hold ends at a character boundary; the guard searches that prefix and a
//! redactor of cut text removes it.

/// The start of `bytes`, at most `max` bytes long, that does not end inside a UTF-8
/// character: a multi-byte sequence that the cut (or the end of `bytes`) leaves
/// incomplete is dropped whole. Bytes that are no UTF-8 are kept as they are.
pub fn cut_at_char_boundary(bytes: &[u8], max: usize) -> &[u8] {
    let cut = bytes.get(..max).unwrap_or(bytes);
    // The start of the last character: at most three continuation bytes back.
    let Some(start) = (cut.len().saturating_sub(4)..cut.len())
        .rev()
        .find(|&i| cut.get(i).is_some_and(|b| b & 0xC0 != 0x80))
    else {
        return cut;
    };
    let needed = match cut.get(start) {
        Some(0xC0..=0xDF) => 2,
        Some(0xE0..=0xEF) => 3,
        Some(0xF0..=0xF7) => 4,
        _ => 1,
    };
    if cut.len() - start < needed {
        cut.get(..start).unwrap_or(cut)
    } else {
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cuts_drop_an_incomplete_character() {
        let text = "aé€😀".as_bytes();
        assert_eq!(cut_at_char_boundary(text, 1), b"a");
        assert_eq!(cut_at_char_boundary(text, 2), b"a");
        assert_eq!(cut_at_char_boundary(text, 3), "aé".as_bytes());
        assert_eq!(cut_at_char_boundary(text, 5), "aé".as_bytes());
        assert_eq!(cut_at_char_boundary(text, 6), "aé€".as_bytes());
        assert_eq!(cut_at_char_boundary(text, 9), "aé€".as_bytes());
        assert_eq!(cut_at_char_boundary(text, 10), text);
        assert_eq!(cut_at_char_boundary(text, 100), text);
        assert_eq!(cut_at_char_boundary(b"", 4), b"");
        assert_eq!(cut_at_char_boundary(b"\xff\xfe", 2), b"\xff\xfe");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// A cut of UTF-8 text is the longest start of it, within `max`, that ends at a
        /// character boundary.
        #[test]
        fn a_cut_is_the_longest_prefix_at_a_character_boundary(text in "\\PC{0,24}", max in 0usize..100) {
            let cut = cut_at_char_boundary(text.as_bytes(), max);
            let want = (0..=max.min(text.len())).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
            prop_assert_eq!(cut.len(), want);
        }
    }
}
