//! The code blocks of a Markdown file and what their fence says about running them.
//!
//! A fenced block's info string is its language followed by attributes, which GitHub
//! does not show: `sh session=first-hour`, `python session=clinic-demo file=mcp_call.py`,
//! `json schema=schemas/tool-details.schema.json`, `text usage=clinic-tool`,
//! `sh not-run="why"`. Values without spaces are bare; a value with spaces is quoted.
//! Inside a shell block, a line `#> TEXT` is output the reader should see: the session's
//! standard output holds each such text, in the file's order.

use std::collections::BTreeMap;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Attribute keys a fence may carry; any other is a typo and fails the test.
const KNOWN_ATTRIBUTES: [&str; 6] = ["session", "not-run", "file", "schema", "matches", "usage"];

/// One fenced code block of a Markdown file.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    /// The file it is in, relative to the repository root.
    pub(crate) file: String,
    /// The language word of the fence (`sh`, `python`, `json`, `text`, ...).
    pub(crate) lang: String,
    /// The attributes after the language.
    pub(crate) attrs: BTreeMap<String, String>,
    /// The block's text, ending in a newline.
    pub(crate) text: String,
    /// The line of the opening fence.
    pub(crate) line: usize,
}

impl Block {
    /// Where the block is, as `FILE:LINE`.
    pub(crate) fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }

    /// The value of attribute `key`.
    pub(crate) fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.get(key).map(String::as_str)
    }

    /// A shell or Python block, which the test runs (or states why not).
    pub(crate) fn is_command(&self) -> bool {
        matches!(
            self.lang.as_str(),
            "sh" | "bash" | "shell" | "console" | "python" | "py"
        )
    }

    /// The `#> ` lines of a shell block: output the reader should see.
    pub(crate) fn expectations(&self) -> Vec<String> {
        self.text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("#> "))
            .map(|s| s.trim_end().to_owned())
            .collect()
    }
}

/// Splits a fence's info string into its language and attributes.
fn parse_info(info: &str, at: &str) -> Result<(String, BTreeMap<String, String>), String> {
    let info = info.trim();
    let (lang, mut rest) = info.split_once(' ').unwrap_or((info, ""));
    let mut attrs = BTreeMap::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let (key, after) = rest
            .split_once('=')
            .ok_or_else(|| format!("{at}: attribute {rest:?} has no value (key=value)"))?;
        let (value, after) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted
                .find('"')
                .ok_or_else(|| format!("{at}: unclosed quote in {info:?}"))?;
            (&quoted[..end], &quoted[end + 1..])
        } else {
            after.split_once(' ').unwrap_or((after, ""))
        };
        if !KNOWN_ATTRIBUTES.contains(&key) {
            return Err(format!(
                "{at}: unknown fence attribute {key:?} (known: {})",
                KNOWN_ATTRIBUTES.join(", ")
            ));
        }
        attrs.insert(key.to_owned(), value.to_owned());
        rest = after;
    }
    Ok((lang.to_owned(), attrs))
}

/// Every fenced code block of `markdown`, the text of `file`, in order.
pub(crate) fn blocks(file: &str, markdown: &str) -> Result<Vec<Block>, String> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (event, range) in Parser::new_ext(markdown, Options::empty()).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let line = markdown[..range.start].lines().count() + 1;
                let (lang, attrs) = parse_info(&info, &format!("{file}:{line}"))?;
                open = Some(Block {
                    file: file.to_owned(),
                    lang,
                    attrs,
                    text: String::new(),
                    line,
                });
            }
            Event::Text(text) => {
                if let Some(block) = open.as_mut() {
                    block.text.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => out.extend(open.take()),
            _ => {}
        }
    }
    Ok(out)
}

/// The JSON values of a `json` block: one or more whole values, or an object's member
/// (`"mcp": {...}`), which is read as the object holding it.
pub(crate) fn json_values(block: &Block) -> Result<Vec<serde_json::Value>, String> {
    let text = block.text.trim();
    let text = if text.starts_with('"') {
        format!("{{{text}}}")
    } else {
        text.to_owned()
    };
    serde_json::Deserializer::from_str(&text)
        .into_iter::<serde_json::Value>()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: the json block does not parse: {e}", block.at()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_give_language_attributes_and_line() {
        let md = "# t\n\n```sh session=a not-run=\"a reason here\"\necho x\n#> x\n```\n\n```json\n\"k\": 1\n```\n";
        let b = blocks("x.md", md).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].lang, "sh");
        assert_eq!(b[0].attr("session"), Some("a"));
        assert_eq!(b[0].attr("not-run"), Some("a reason here"));
        assert_eq!(b[0].line, 3);
        assert_eq!(b[0].expectations(), ["x"]);
        assert_eq!(json_values(&b[1]).unwrap(), [serde_json::json!({"k": 1})]);
        assert_eq!(b[0].at(), "x.md:3");
        let typo = blocks("x.md", "\n```sh sesion=a\n```\n").unwrap_err();
        assert!(
            typo.starts_with("x.md:2: unknown fence attribute"),
            "{typo}"
        );
        assert!(blocks("x.md", "```sh session\n```\n").is_err());
    }
}
