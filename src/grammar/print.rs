//! Printing a [`Grammar`] as EBNF that [`parse_ebnf`](super::ebnf::parse_ebnf) reads back.
//!
//! # Output
//!
//! One rule per line, `name ::= body`, in rule order (the root wherever it is). Parentheses
//! are added exactly where the parser's normal form needs them (see the
//! [`ebnf` module](super::ebnf)): a `Seq` or `Choice` item of a `Seq`, a `Choice`
//! alternative of a `Choice`, and a `Seq`, `Choice` or `Repeat` under a postfix operator.
//!
//! * `Empty` prints as `""`; a `Seq` of no items as `""`, a `Choice` of no alternatives as
//!   `[]` (matches nothing); a one-part `Seq` or `Choice` as its part.
//! * Strings print printable characters raw (including non-ASCII) and escape `"`, `\`,
//!   `\n`, `\r`, `\t`, and other control or non-space whitespace characters as `\uNNNN` /
//!   `\UNNNNNNNN` (never the variable-length XGrammar `\x`, so XGrammar reads them the same).
//! * Bytes that are not valid UTF-8 print as `\xNN`, which the parser reads as the code point
//!   U+00NN: such grammars do not round-trip.
//! * Classes print their ranges as stored (not normalized), escaping `]`, `[`, `\`, `^`, `-`,
//!   control and whitespace characters other than space, and surrogates; `[^]` is the
//!   any-character class that `.` parses to.
//! * Repetitions print as `*`, `+`, `?`, `{m}`, `{m,}` or `{m,n}`.
//! * Tokens print as `<[id]>` or as their text.
//!
//! # Round trip
//!
//! For a grammar in the parser's normal form whose names are valid identifiers, whose bounds
//! are at most [`MAX_REPEAT_BOUND`](super::ebnf::MAX_REPEAT_BOUND), whose tree depth is at
//! most [`MAX_NESTING_DEPTH`](super::ebnf::MAX_NESTING_DEPTH), whose byte strings are UTF-8
//! and whose token texts are `<...>` on one line without an inner `>` (and not of the form
//! `<[digits]>`), `parse_ebnf(&g.to_string(), root_name) == Ok(g)`. Other grammars print as
//! an equivalent grammar where possible. The printer uses an explicit stack, so deep trees do
//! not overflow the call stack.

use std::fmt::{self, Write};

use super::ir::{CharClass, Expr, Grammar, TokenRef};

/// Where an expression is printed; decides whether it needs parentheses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// A rule body or inside parentheses.
    Top,
    /// An alternative of a `Choice`.
    Alt,
    /// An item of a `Seq`.
    Item,
    /// The operand of a postfix operator.
    Operand,
}

enum Task<'a> {
    Expr(&'a Expr, Ctx),
    Text(&'static str),
    Suffix(u32, Option<u32>),
}

/// Looks through one-part `Seq`s and `Choice`s, which print as their part.
fn view(mut e: &Expr) -> &Expr {
    loop {
        match e {
            Expr::Seq(v) | Expr::Choice(v) if v.len() == 1 => e = &v[0],
            _ => return e,
        }
    }
}

fn needs_parens(e: &Expr, ctx: Ctx) -> bool {
    match (e, ctx) {
        (_, Ctx::Top) => false,
        (Expr::Choice(v), _) => v.len() >= 2,
        (Expr::Seq(v), Ctx::Item | Ctx::Operand) => v.len() >= 2,
        (Expr::Repeat { .. }, Ctx::Operand) => true,
        _ => false,
    }
}

/// Writes `c` as an escape: `\uNNNN` or `\UNNNNNNNN`.
fn write_code_escape(out: &mut impl Write, c: u32) -> fmt::Result {
    if c <= 0xFFFF {
        write!(out, "\\u{c:04X}")
    } else {
        write!(out, "\\U{c:08X}")
    }
}

/// Writes one code point, escaping the characters in `special` with a backslash.
fn write_code_point(out: &mut impl Write, c: u32, special: &str) -> fmt::Result {
    match char::from_u32(c) {
        Some('\n') => out.write_str("\\n"),
        Some('\r') => out.write_str("\\r"),
        Some('\t') => out.write_str("\\t"),
        Some(ch) if special.contains(ch) => {
            out.write_char('\\')?;
            out.write_char(ch)
        }
        Some(ch) if ch.is_control() || (ch.is_whitespace() && ch != ' ') => {
            write_code_escape(out, c)
        }
        Some(ch) => out.write_char(ch),
        // Surrogates (only possible in classes) and values past U+10FFFF.
        None => write_code_escape(out, c),
    }
}

fn write_bytes(out: &mut impl Write, bytes: &[u8]) -> fmt::Result {
    out.write_char('"')?;
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            write_code_point(out, c as u32, "\"\\")?;
        }
        for b in chunk.invalid() {
            write!(out, "\\x{b:02X}")?;
        }
    }
    out.write_char('"')
}

fn write_class(out: &mut impl Write, class: &CharClass) -> fmt::Result {
    out.write_str(if class.negated { "[^" } else { "[" })?;
    for &(lo, hi) in &class.ranges {
        write_code_point(out, lo, "]\\^-[")?;
        if hi != lo {
            out.write_char('-')?;
            write_code_point(out, hi, "]\\^-[")?;
        }
    }
    out.write_char(']')
}

fn write_token(out: &mut impl Write, t: &TokenRef) -> fmt::Result {
    match t {
        TokenRef::Id(id) => write!(out, "<[{id}]>"),
        TokenRef::Text(s) => out.write_str(s),
    }
}

impl Grammar {
    /// Prints one expression of this grammar as EBNF (rule references by name), as it
    /// appears in a rule body of the `Display` output.
    pub fn expr_to_ebnf(&self, expr: &Expr) -> String {
        let mut s = String::new();
        // Writing to a String cannot fail.
        let _ = self.write_expr(&mut s, expr);
        s
    }

    fn write_expr(&self, out: &mut impl Write, root: &Expr) -> fmt::Result {
        let mut stack = vec![Task::Expr(root, Ctx::Top)];
        while let Some(task) = stack.pop() {
            let (e, ctx) = match task {
                Task::Text(s) => {
                    out.write_str(s)?;
                    continue;
                }
                Task::Suffix(min, max) => {
                    match (min, max) {
                        (0, None) => out.write_char('*')?,
                        (1, None) => out.write_char('+')?,
                        (0, Some(1)) => out.write_char('?')?,
                        (m, None) => write!(out, "{{{m},}}")?,
                        (m, Some(n)) if m == n => write!(out, "{{{m}}}")?,
                        (m, Some(n)) => write!(out, "{{{m},{n}}}")?,
                    }
                    continue;
                }
                Task::Expr(e, ctx) => (view(e), ctx),
            };
            if needs_parens(e, ctx) {
                stack.push(Task::Text(")"));
                stack.push(Task::Expr(e, Ctx::Top));
                out.write_char('(')?;
                continue;
            }
            match e {
                Expr::Empty => out.write_str("\"\"")?,
                Expr::Bytes(b) if b.is_empty() => out.write_str("\"\"")?,
                Expr::Bytes(b) => write_bytes(out, b)?,
                Expr::Class(c) => write_class(out, c)?,
                Expr::Token(t) => write_token(out, t)?,
                Expr::Rule(id) => match self.rules.get(id.index()) {
                    Some(rule) => out.write_str(&rule.name)?,
                    None => write!(out, "undefined_rule_{}", id.0)?,
                },
                Expr::Seq(v) if v.is_empty() => out.write_str("\"\"")?,
                Expr::Choice(v) if v.is_empty() => out.write_str("[]")?,
                Expr::Seq(v) | Expr::Choice(v) => {
                    let (sep, part_ctx) = if matches!(e, Expr::Seq(_)) {
                        (" ", Ctx::Item)
                    } else {
                        (" | ", Ctx::Alt)
                    };
                    for (i, part) in v.iter().enumerate().rev() {
                        stack.push(Task::Expr(part, part_ctx));
                        if i > 0 {
                            stack.push(Task::Text(sep));
                        }
                    }
                }
                Expr::Repeat { expr, min, max } => {
                    stack.push(Task::Suffix(*min, *max));
                    stack.push(Task::Expr(expr, Ctx::Operand));
                }
            }
        }
        Ok(())
    }
}

/// Prints the grammar as EBNF, one `name ::= body` line per rule in rule order; see the
/// [module docs](self) for the exact form and the round-trip guarantee with
/// [`parse_ebnf`](super::ebnf::parse_ebnf).
impl fmt::Display for Grammar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for rule in &self.rules {
            write!(f, "{} ::= ", rule.name)?;
            self.write_expr(f, &rule.body)?;
            f.write_char('\n')?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::ebnf::parse_ebnf;
    use super::super::ir::{Rule, RuleId};
    use super::*;

    fn roundtrip(src: &str) -> String {
        let g = parse_ebnf(src, "root").unwrap_or_else(|e| panic!("{e}\n{src}"));
        let printed = g.to_string();
        let back = parse_ebnf(&printed, "root").unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(g, back, "{printed}");
        printed
    }

    #[test]
    fn prints_canonically() {
        assert_eq!(
            roundtrip("root ::= \"a\"   \"b\" |\n \"c\" # x\n"),
            "root ::= \"a\" \"b\" | \"c\"\n"
        );
        assert_eq!(
            roundtrip("root ::= ((\"a\" \"b\") \"c\") (\"d\" | \"e\")"),
            "root ::= ((\"a\" \"b\") \"c\") (\"d\" | \"e\")\n"
        );
        assert_eq!(
            roundtrip("root ::= (\"a\" | \"b\") | (\"c\" \"d\") | \"\""),
            "root ::= (\"a\" | \"b\") | \"c\" \"d\" | \"\"\n"
        );
        assert_eq!(
            roundtrip("root ::= \"a\"* \"b\"+ \"c\"? \"d\"{2} \"e\"{2,} \"f\"{2,3} \"g\"{0,1} \"h\"{,4} \"i\"{1,1}"),
            "root ::= \"a\"* \"b\"+ \"c\"? \"d\"{2} \"e\"{2,} \"f\"{2,3} \"g\"? \"h\"{0,4} \"i\"{1}\n"
        );
        assert_eq!(
            roundtrip("root ::= (\"a\" \"b\")* (\"a\" | \"b\")+ \"c\"*? ((\"d\"))?"),
            "root ::= (\"a\" \"b\")* (\"a\" | \"b\")+ (\"c\"*)? \"d\"?\n"
        );
        assert_eq!(
            roundtrip("root ::= . [] [^] [a-z\\-\\]\\^\\[\\\\] [\\x00-\\x1f\\u00A0\\uD800] [é😀]"),
            "root ::= [^] [] [^] [a-z\\-\\]\\^\\[\\\\] [\\u0000-\\u001F\\u00A0\\uD800] [é😀]\n"
        );
        assert_eq!(
            roundtrip("root ::= \"q\\\"b\\\\s\\n\\r\\t\\x07\\u2028 é😀\\/\" <|im_end|> <[42]>"),
            "root ::= \"q\\\"b\\\\s\\n\\r\\t\\u0007\\u2028 é😀/\" <|im_end|> <[42]>\n"
        );
        assert_eq!(
            roundtrip("a ::= b\nroot ::= a b\nb ::= \"x\" (= \"y\")"),
            "a ::= b\nroot ::= a b\nb ::= \"x\"\n"
        );
    }

    #[test]
    fn non_normal_trees_print_sensibly() {
        let g = Grammar {
            rules: vec![Rule {
                name: "root".into(),
                body: Expr::Seq(vec![
                    Expr::Seq(vec![Expr::Bytes(b"a".to_vec())]),
                    Expr::Choice(vec![]),
                    Expr::Seq(vec![]),
                    Expr::Bytes(vec![]),
                    Expr::Bytes(vec![b'x', 0xFF]),
                    Expr::Rule(RuleId(9)),
                    Expr::Repeat {
                        expr: Box::new(Expr::Choice(vec![Expr::Seq(vec![
                            Expr::Bytes(b"b".to_vec()),
                            Expr::Bytes(b"c".to_vec()),
                        ])])),
                        min: 0,
                        max: None,
                    },
                ]),
            }],
            root: RuleId(0),
        };
        assert_eq!(
            g.to_string(),
            "root ::= \"a\" [] \"\" \"\" \"x\\xFF\" undefined_rule_9 (\"b\" \"c\")*\n"
        );
        assert_eq!(g.expr_to_ebnf(&Expr::Rule(RuleId(0))), "root");
    }

    #[test]
    fn deep_hand_built_tree_prints_without_recursion() {
        let mut e = Expr::Bytes(b"a".to_vec());
        for _ in 0..50_000 {
            e = Expr::Seq(vec![Expr::Bytes(b"a".to_vec()), e]);
        }
        let g = Grammar {
            rules: vec![Rule {
                name: "root".into(),
                body: e,
            }],
            root: RuleId(0),
        };
        let s = g.to_string();
        assert_eq!(s.matches('(').count(), 49_999);
        // A rule drops its body without recursion.
        drop(g);
    }
}
