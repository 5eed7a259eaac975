//! The drift check of command lines: every flag a Markdown file shows for one of the
//! documented programs (`sign-policy --mint-session`, `cargo run --example
//! init_workspace -- DIR --mcp-remote ...`, `"command": ["clinic-tool", "--mcp"]`)
//! appears in that program's `--help`. A command is read from inline code and from the
//! lines of code blocks (a line ending in `\` continues; `#` starts a comment), from the
//! program's name (its path's last part) to the end of the command (`|`, `;`, `&&`, `&`,
//! a closing `)`). Usage blocks are the help itself and are checked against it
//! elsewhere.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use crate::blocks::blocks;
use crate::files::MarkdownFile;

/// One flag shown for a program: where, which program, which flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shown {
    /// `FILE:LINE`.
    pub(crate) at: String,
    /// The program's name.
    pub(crate) program: String,
    /// The flag, without a value (`--mcp-http`).
    pub(crate) flag: String,
}

/// Tokens that end a command.
const ENDS: [&str; 7] = ["|", "||", "&&", ";", "&", "|&", ")"];

/// A token without the quoting and punctuation around it in shell, JSON or prose.
fn bare(token: &str) -> &str {
    token.trim_matches(|c: char| {
        matches!(
            c,
            '"' | '\'' | '`' | '[' | ']' | '(' | ')' | ',' | ';' | '{' | '}'
        )
    })
}

/// The flag a token is, without its `=value`.
fn flag_of(token: &str) -> Option<&str> {
    let token = bare(token);
    let name = token.split('=').next().unwrap_or_default();
    let rest = name.strip_prefix("--")?;
    (rest.starts_with(|c: char| c.is_ascii_lowercase())
        && rest
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
    .then_some(name)
}

/// The flags shown for each of `programs` in one command text (one logical line).
fn flags_in(command: &str, programs: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<&str> = None;
    for token in command.split_whitespace() {
        if token.starts_with('#') {
            break;
        }
        if ENDS.contains(&token) {
            current = None;
            continue;
        }
        // A program's name inside a command (`--mcp name=/srv/bin/clinic-tool`) is an
        // argument of that command.
        let name = bare(token).rsplit('/').next().unwrap_or_default();
        let program = programs
            .iter()
            .find(|p| **p == name && !token.contains('='));
        if let (None, Some(program)) = (current, program) {
            current = Some(program);
        } else if let (Some(program), Some(flag)) = (current, flag_of(token)) {
            out.push((program.to_owned(), flag.to_owned()));
        }
        if token.ends_with([';', ')']) && !token.ends_with("\")") {
            current = None;
        }
    }
    out
}

/// The logical lines of a code block: continued lines joined, comments dropped.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        let (start, mut joined) = open.take().unwrap_or((n, String::new()));
        match line.trim_end().strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                joined.push(' ');
                open = Some((start, joined));
            }
            None => {
                joined.push_str(line);
                out.push((start, joined));
            }
        }
    }
    out.extend(open);
    out
}

/// Every flag `files` show for one of `programs`.
pub(crate) fn shown_flags(files: &[MarkdownFile], programs: &[&str]) -> Vec<Shown> {
    let mut out = Vec::new();
    for file in files {
        let line_of = |offset: usize| file.text[..offset].matches('\n').count() + 1;
        // Inline code.
        let mut in_block = false;
        for (event, range) in Parser::new_ext(&file.text, Options::ENABLE_TABLES).into_offset_iter()
        {
            match event {
                Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))) => in_block = true,
                Event::End(TagEnd::CodeBlock) => in_block = false,
                Event::Code(code) if !in_block => {
                    for (program, flag) in flags_in(&code, programs) {
                        out.push(Shown {
                            at: format!("{}:{}", file.path, line_of(range.start)),
                            program,
                            flag,
                        });
                    }
                }
                _ => {}
            }
        }
        // Code blocks, but the usage blocks (the help itself).
        let fenced = blocks(&file.path, &file.text).unwrap_or_else(|e| panic!("{e}"));
        for block in fenced.iter().filter(|b| b.attr("usage").is_none()) {
            for (n, line) in logical_lines(&block.text) {
                for (program, flag) in flags_in(&line, programs) {
                    out.push(Shown {
                        at: format!("{}:{}", block.file, block.line + 1 + n),
                        program,
                        flag,
                    });
                }
            }
        }
    }
    out
}

/// Whether `help` names `flag` as a whole word.
pub(crate) fn help_has(help: &str, flag: &str) -> bool {
    flag == "--help"
        || help.match_indices(flag).any(|(i, _)| {
            let after = help[i + flag.len()..].chars().next();
            let before = help[..i].chars().next_back();
            !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
                && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROGRAMS: [&str; 3] = ["clinic-tool", "sign-policy", "init_workspace"];

    #[test]
    fn flags_are_read_up_to_the_end_of_their_command() {
        let md = "# T\n\nRun `clinic-tool --mcp` or `--mcp-http` alone.\n\n\
                  ```sh session=x\n\
                  \"$B/sign-policy\" --package-dir \"$FH/$1\" \\\n  --kid k --key-file f | curl --data-binary @-\n\
                  cargo run --example init_workspace -- \"$WS\" --mcp a=/bin/clinic-tool --mcp-arg a=--x # --not-this\n\
                  # \"$B/sign-policy\" --commented-out\n\
                  ( cd x && \"$B/sign-policy\" --mint-session ) && echo --not-this\n\
                  ```\n\n\
                  ```json\n\"command\": [\"/srv/bin/clinic-tool\", \"--mcp\"], \"args\": [\"--x-y\"]\n```\n";
        let files = [MarkdownFile {
            path: "a.md".into(),
            text: md.into(),
        }];
        let shown: Vec<(String, String, String)> = shown_flags(&files, &PROGRAMS)
            .into_iter()
            .map(|s| (s.at, s.program, s.flag))
            .collect();
        let row = |at: &str, p: &str, f: &str| (at.to_owned(), p.to_owned(), f.to_owned());
        assert_eq!(
            shown,
            [
                row("a.md:3", "clinic-tool", "--mcp"),
                row("a.md:6", "sign-policy", "--package-dir"),
                row("a.md:6", "sign-policy", "--kid"),
                row("a.md:6", "sign-policy", "--key-file"),
                row("a.md:8", "init_workspace", "--mcp"),
                row("a.md:8", "init_workspace", "--mcp-arg"),
                row("a.md:10", "sign-policy", "--mint-session"),
                row("a.md:14", "clinic-tool", "--mcp"),
                row("a.md:14", "clinic-tool", "--x-y"),
            ]
        );
    }

    #[test]
    fn a_flag_is_in_the_help_as_a_whole_word() {
        let help = "usage: t --mcp-http IP:PORT [--tls-cert FILE]\n       t --mcp";
        assert!(help_has(help, "--mcp"));
        assert!(help_has(help, "--tls-cert"));
        assert!(help_has(help, "--help"));
        assert!(!help_has(help, "--tls"));
        assert!(!help_has(help, "--mcp-remote"));
    }
}
