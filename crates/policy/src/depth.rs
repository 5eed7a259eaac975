//! The nesting-depth pre-scan of PromQL text. Everything that works on a parsed
//! expression (the parser's own type checks, `walk`, label binding, the read-window
//! check, AST equality, printing and dropping) recurses once per level of the tree, so a
//! deeply nested expression can overflow a small thread stack and abort the process. This
//! linear, non-recursive scan bounds the depth of the tree from the text alone, before the
//! parser runs, and the expression is refused beyond [`MAX_PROMQL_DEPTH`].

/// The deepest nesting an expression may have. Each group in parentheses or brackets,
/// each function call, aggregation and subquery, and each operator of a chain (unary
/// minus included) adds a level; label matchers, strings and comments add none; `up` is
/// 1 deep, `abs(up)` 2, `rate(up[5m])` 4. Deeper expressions are refused with
/// `promql_too_deep` before they are parsed.
///
/// 64 levels is several times what real diagnosis queries use (a
/// `histogram_quantile(0.99, sum by (le) (rate(x[5m])))` over a ratio nests about 8 deep),
/// and it keeps every recursive pass over the parsed tree a small fraction of a 2 MiB
/// thread stack (tested: locking at this depth succeeds on a 2 MiB thread in a debug build),
/// where the 4,096-byte expression limit alone admits trees over 4,000 levels deep.
pub const MAX_PROMQL_DEPTH: usize = 64;

/// One bracketed group of the text being scanned.
struct Group {
    /// The bracket that opened it.
    open: u8,
    /// Operators directly in the group: unary and binary operators, set operators and
    /// range or subquery brackets that wrap the operand before them. Each can add one
    /// level to the tree of the group.
    ops: usize,
    /// The deepest group nested directly in this one.
    deepest_child: usize,
}

impl Group {
    fn new(open: u8) -> Self {
        Group {
            open,
            ops: 0,
            deepest_child: 0,
        }
    }

    /// The depth of the group: itself, its operators and its deepest child group. Label
    /// matchers in braces are part of their selector, not a level of the tree, so that
    /// binding a scope label (`up` to `up{cluster_id="c1"}`) never deepens an expression.
    fn depth(&self) -> usize {
        if self.open == b'{' {
            self.deepest_child
        } else {
            1 + self.ops + self.deepest_child
        }
    }

    /// Matchers in braces and durations in brackets hold no operators.
    fn holds_expressions(&self) -> bool {
        self.open != b'{' && self.open != b'['
    }
}

/// An upper bound on the depth of the tree the parser builds from `text`, computed in one
/// pass without recursion: every group in parentheses, brackets or braces is one level
/// plus the operators directly in it (a chain of `n` unary or binary operators is at most
/// `n` levels deep) plus its deepest child group; label matchers in braces add no level. Function calls, aggregations, subqueries
/// (`(e)[5m:1m]` counts its parentheses, its bracket and the bracket as an operator on the
/// operand) and chains of unary minus all count. String literals (`"..."`, `'...'` and
/// `` `...` ``, with backslash escapes as the parser reads them) and `#` comments are
/// skipped. `up` is 1 deep,
/// `abs(up)` 2, `-(-up)` 4. Unbalanced text gets a number too; the parser refuses it.
pub(crate) fn nesting_depth(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut stack = vec![Group::new(0)];
    // True when the last token ends an operand, so a following `[` wraps it.
    let mut after_operand = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let in_expr = stack.last().is_some_and(Group::holds_expressions);
        match c {
            b'"' | b'\'' | b'`' => {
                i = skip_quoted(bytes, i);
                after_operand = true;
                continue;
            }
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'(' | b'[' | b'{' => {
                if let Some(top) = stack.last_mut()
                    && c == b'['
                    && after_operand
                    && in_expr
                {
                    top.ops += 1;
                }
                stack.push(Group::new(c));
                after_operand = false;
            }
            b')' | b']' | b'}' => {
                if stack.len() > 1
                    && let Some(closed) = stack.pop()
                    && let Some(parent) = stack.last_mut()
                {
                    parent.deepest_child = parent.deepest_child.max(closed.depth());
                }
                after_operand = true;
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'^' | b'=' | b'!' | b'<' | b'>' => {
                if in_expr {
                    if let Some(top) = stack.last_mut() {
                        top.ops += 1;
                    }
                    // `==`, `!=`, `<=`, `>=`, `=~`, `!~` are one operator.
                    if matches!(c, b'=' | b'!' | b'<' | b'>')
                        && matches!(bytes.get(i + 1), Some(b'=' | b'~'))
                    {
                        i += 1;
                    }
                }
                after_operand = false;
            }
            b',' | b'@' => after_operand = false,
            _ if c.is_ascii_digit() || c == b'.' => {
                i = skip_number(bytes, i);
                after_operand = true;
                continue;
            }
            _ if c.is_ascii_alphabetic() || c == b'_' || c == b':' => {
                let end = skip_word(bytes, i);
                let word = &text[i..end];
                let operator = ["and", "or", "unless", "atan2"]
                    .iter()
                    .any(|k| word.eq_ignore_ascii_case(k));
                if operator
                    && in_expr
                    && let Some(top) = stack.last_mut()
                {
                    top.ops += 1;
                }
                after_operand = !operator;
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    while stack.len() > 1 {
        if let Some(closed) = stack.pop()
            && let Some(parent) = stack.last_mut()
        {
            parent.deepest_child = parent.deepest_child.max(closed.depth());
        }
    }
    stack.last().map_or(1, Group::depth)
}

/// The index after the string literal opening at `start` (or the end of the text when it
/// is unterminated). A backslash escapes the next byte in all three quotings, as
/// `promql-parser`'s lexer reads them (it reads `` `a\`b` `` as one string, unlike
/// Prometheus, where backquoted strings are raw).
fn skip_quoted(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The index after a number or duration starting at `start` (`1.5e-3`, `0x1f`, `5m30s`):
/// a sign right after an exponent `e` of a decimal number belongs to the number.
fn skip_number(bytes: &[u8], start: usize) -> usize {
    let hex = bytes
        .get(start..start + 2)
        .is_some_and(|p| p.eq_ignore_ascii_case(b"0x"));
    let mut i = start;
    while i < bytes.len() {
        let b = bytes[i];
        let exponent_sign = (b == b'+' || b == b'-')
            && !hex
            && i > start
            && bytes[i - 1].eq_ignore_ascii_case(&b'e');
        if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || exponent_sign {
            i += 1;
        } else {
            break;
        }
    }
    i
}

/// The index after an identifier or keyword starting at `start`.
fn skip_word(bytes: &[u8], start: usize) -> usize {
    let mut i = start;
    while i < bytes.len()
        && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b':')
    {
        i += 1;
    }
    i
}

/// Refuses text nested deeper than [`MAX_PROMQL_DEPTH`], with a message for the model.
pub(crate) fn check_depth(text: &str) -> Result<(), String> {
    let depth = nesting_depth(text);
    if depth > MAX_PROMQL_DEPTH {
        Err(format!(
            "the expression is nested {depth} levels deep, more than the {MAX_PROMQL_DEPTH} allowed (parentheses, brackets, function calls, aggregations, subqueries and chains of operators each add a level)"
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn depths() {
        for (text, depth) in [
            ("up", 1),
            ("abs(up)", 2),
            ("-(-up)", 4),
            ("-up", 2),
            ("1e-7 + up", 2),
            ("0x1e-1", 2),
            ("rate(up[5m])", 4),
            ("max_over_time((up)[5m:])", 4),
            (r#"up{job=~"a(((b", x!="-"}"#, 1),
            (r#"rate(up{a="b"}[5m])"#, 4),
            (r#"label_replace(up, "a", "\"((((", 'b\'((', `\((((`)"#, 2),
            ("up # ((((\n + 1", 2),
            ("up and on (job) down", 3),
            ("sum by (job) (rate(x[5m])) / 2", 6),
            ("(((", 4),
            (")))", 1),
        ] {
            assert_eq!(nesting_depth(text), depth, "{text}");
        }
    }

    #[test]
    fn the_issue_inputs_are_refused() {
        let minus = format!("{}up", "-".repeat(4090));
        assert_eq!(nesting_depth(&minus), 4091);
        let parens = format!("{}up{}", "(".repeat(2046), ")".repeat(2046));
        assert_eq!(nesting_depth(&parens), 2047);
        assert!(check_depth(&minus).unwrap_err().contains("4091 levels"));
        assert!(check_depth(&parens).is_err());
        let limit = format!("{}up", "-".repeat(MAX_PROMQL_DEPTH - 1));
        assert!(check_depth(&limit).is_ok());
        assert!(check_depth(&format!("-{limit}")).is_err());
    }

    /// A nested expression built from constructors whose depth is known independently
    /// of the scan.
    #[derive(Debug, Clone)]
    enum Shape {
        Leaf,
        Paren(Box<Shape>),
        Call(Box<Shape>),
        Neg(Box<Shape>),
        AddOne(Box<Shape>),
        Subquery(Box<Shape>),
        Sum(Box<Shape>),
        Quoted(Box<Shape>),
        Commented(Box<Shape>),
    }

    impl Shape {
        fn text(&self) -> String {
            match self {
                Shape::Leaf => r#"up{job="a(b"}"#.to_owned(),
                Shape::Paren(e) => format!("({})", e.text()),
                Shape::Call(e) => format!("abs({})", e.text()),
                Shape::Neg(e) => format!("-{}", e.text()),
                Shape::AddOne(e) => format!("{} + 1", e.text()),
                Shape::Subquery(e) => format!("max_over_time(({})[5m:1m])", e.text()),
                Shape::Sum(e) => format!("sum by (job) ({})", e.text()),
                Shape::Quoted(e) => format!(
                    r#"label_replace({}, "x\"(", '\'((', "y", `(.*)`)"#,
                    e.text()
                ),
                Shape::Commented(e) => format!("{} # ((([[\n", e.text()),
            }
        }

        /// The depth by construction: each parenthesis group, call or aggregation adds
        /// one level, each operator one, a subquery three (its call, its parentheses and
        /// its bracket); strings and comments none.
        fn depth(&self) -> usize {
            match self {
                Shape::Leaf => 1,
                Shape::Paren(e)
                | Shape::Call(e)
                | Shape::Neg(e)
                | Shape::AddOne(e)
                | Shape::Sum(e)
                | Shape::Quoted(e) => e.depth() + 1,
                Shape::Subquery(e) => e.depth() + 3,
                Shape::Commented(e) => e.depth(),
            }
        }
    }

    fn shape(levels: u32) -> impl Strategy<Value = Shape> {
        Just(Shape::Leaf).prop_recursive(levels, levels, 1, |inner| {
            prop_oneof![
                inner.clone().prop_map(|e| Shape::Paren(Box::new(e))),
                inner.clone().prop_map(|e| Shape::Call(Box::new(e))),
                inner.clone().prop_map(|e| Shape::Neg(Box::new(e))),
                inner.clone().prop_map(|e| Shape::AddOne(Box::new(e))),
                inner.clone().prop_map(|e| Shape::Subquery(Box::new(e))),
                inner.clone().prop_map(|e| Shape::Sum(Box::new(e))),
                inner.clone().prop_map(|e| Shape::Quoted(Box::new(e))),
                inner.prop_map(|e| Shape::Commented(Box::new(e))),
            ]
        })
    }

    /// The height of a parsed tree (the tests only build shallow ones).
    fn height(expr: &promql_parser::parser::Expr) -> usize {
        use promql_parser::parser::Expr;
        1 + match expr {
            Expr::Aggregate(a) => a.param.as_deref().map_or(0, height).max(height(&a.expr)),
            Expr::Unary(u) => height(&u.expr),
            Expr::Binary(b) => height(&b.lhs).max(height(&b.rhs)),
            Expr::Paren(p) => height(&p.expr),
            Expr::Subquery(s) => height(&s.expr),
            Expr::Call(c) => c.args.args.iter().map(|a| height(a)).max().unwrap_or(0),
            _ => 0,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// The scan's depth equals the depth by construction, bounds the height of the
        /// parsed tree, and an expression within the limit is never refused for depth.
        #[test]
        fn scan_depth_is_the_constructed_depth(s in shape(40)) {
            let text = s.text();
            prop_assert_eq!(nesting_depth(&text), s.depth(), "{}", text);
            if s.depth() <= MAX_PROMQL_DEPTH {
                // Every generated shape is valid PromQL, so the height is always checked.
                prop_assert!(crate::promql::parse(&text).is_ok(), "{}", text);
                prop_assert!(check_depth(&text).is_ok());
                let ast = crate::promql::parse(&text);
                prop_assert!(
                    !matches!(ast, Err(crate::promql::ParseError::TooDeep(_))),
                    "{}", text
                );
                if let Ok(ast) = ast {
                    prop_assert!(height(&ast) <= nesting_depth(&text), "{}", text);
                }
            } else {
                prop_assert!(check_depth(&text).is_err());
            }
        }
    }
}
