//! Program output as a reader sees it: the terminal colour sequences some programs
//! (OpenCode) print even when their output is not a terminal, taken out.

/// `text` without ANSI escape sequences (`ESC [ ... letter`).
pub fn without_terminal_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_sequences_are_taken_out_and_the_text_kept() {
        assert_eq!(
            without_terminal_colours("\u{1b}[32m✓\u{1b}[0m clinic \u{1b}[2mconnected\u{1b}[22m"),
            "✓ clinic connected"
        );
        assert_eq!(without_terminal_colours("plain [text]"), "plain [text]");
    }
}
