//! The model's discovery selector parsed within its scope. PromQL refuses a selector
//! whose matchers all match the empty string (`{}`, `{job=~".*"}`, `{__name__=~".*"}`)
//! as one that would select every series; a locked discovery selector is never that,
//! since the policy's scope labels are bound into it. Such a selector is parsed with the
//! first scope binding (the anchor) as its first matcher, which the binding then accepts
//! as its own; every other parse error stays the model's.

use promql_parser::parser::Expr;

use super::context::Ctx;
use crate::promql::{self, ParseError};

/// The first scope binding as a matcher's text (`cluster_id="SaaS01"`): what every
/// locked selector holds.
pub(super) fn scope_anchor(ctx: &Ctx<'_>) -> String {
    ctx.bindings
        .first()
        .map(|(label, value)| {
            let quoted = value.replace('\\', "\\\\").replace('"', "\\\"");
            format!("{label}=\"{quoted}\"")
        })
        .unwrap_or_default()
}

/// Parses the model's selector `text`; one refused only because its matchers all match
/// the empty string is parsed again with `anchor` ([`scope_anchor`]) as its first
/// matcher. Any other error, and an error of the anchored text, is the first one.
pub(super) fn parse_scoped(text: &str, anchor: &str) -> Result<Expr, ParseError> {
    let first = match promql::parse(text) {
        Err(ParseError::Syntax(m)) if m.contains(EMPTY_SELECTOR) => ParseError::Syntax(m),
        other => return other,
    };
    let Some(at) = first_brace(text) else {
        return Err(first);
    };
    let (head, tail) = text.split_at(at);
    promql::parse(&format!("{head}{anchor},{tail}")).map_err(|_| first)
}

/// How `promql-parser` (as Prometheus) refuses a selector whose matchers all match the
/// empty string.
const EMPTY_SELECTOR: &str = "vector selector must contain at least one non-empty matcher";

/// The byte offset just after the first `{` of `text` outside string literals and
/// comments.
fn first_brace(text: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut comment = false;
    for (i, c) in text.char_indices() {
        if comment {
            comment = c != '\n';
            continue;
        }
        match quote {
            Some(_) if escaped => escaped = false,
            Some(q) if c == '\\' && q != '`' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' | '`' => quote = Some(c),
                '#' => comment = true,
                '{' => return Some(i + 1),
                _ => {}
            },
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scope anchor goes in after the first `{` that opens matchers: never one in a
    /// string or a comment. Only the refusal of a selector whose matchers all match the
    /// empty string is retried with it; any other error stands as the model's.
    #[test]
    fn the_scope_anchor_goes_in_after_the_first_brace_of_the_selector() {
        assert_eq!(first_brace("{}"), Some(1));
        assert_eq!(first_brace("up{job=~\".*\"}"), Some(3));
        assert_eq!(first_brace("up"), None);
        assert_eq!(first_brace("# {\n{job=\"\"}"), Some(5));
        assert_eq!(first_brace("\"{\" {}"), Some(5));
        assert_eq!(first_brace("'\\'{' {}"), Some(7));
        assert_eq!(first_brace("`{\\` {}"), Some(6));
        let anchor = "cluster_id=\"SaaS01\"";
        let Ok(Expr::VectorSelector(vs)) = parse_scoped("{job=~\".*\",}", anchor) else {
            panic!("not parsed");
        };
        let matchers: Vec<String> = vs
            .matchers
            .matchers
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(matchers, vec![anchor.to_owned(), "job=~\".*\"".to_owned()]);
        // Other errors are the model's own, unchanged.
        let unclosed = parse_scoped("{job=~\".*\"", anchor).unwrap_err();
        assert_eq!(Err(unclosed), promql::parse("{job=~\".*\"").map(drop));
        assert!(matches!(
            parse_scoped("{job=~\".*\"} +", anchor),
            Err(ParseError::Syntax(_))
        ));
    }
}
