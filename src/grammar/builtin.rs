//! Built-in grammars, written in EBNF and parsed by [`parse_ebnf`].

use super::ebnf::parse_ebnf;
use super::ir::Grammar;

/// Any JSON value (RFC 8259), as EBNF; the root rule is `root`.
///
/// * `root` is a `value` with optional whitespace before and after.
/// * Whitespace is `[ \t\n\r]*`, unbounded as in the RFC (XGrammar's built-in JSON grammar
///   limits it; a caller wanting that can write its own grammar).
/// * Strings reject raw control characters U+0000..U+001F and accept the escapes `\" \\ \/
///   \b \f \n \r \t \uHHHH` (any four hex digits, as the RFC's grammar allows).
/// * Numbers follow the RFC exactly: `-0`, `1e5`, `1.5E-3` are valid; `-05`, `1.`, `.5`,
///   `+1`, `01` are not.
///
/// The grammar is unambiguous: whitespace is consumed at exactly one place between tokens.
pub const JSON_EBNF: &str = r#"# Any JSON value (RFC 8259).
root ::= ws value ws
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws (member ("," ws member)*)? "}"
member ::= string ws ":" ws value ws
array ::= "[" ws (element ("," ws element)*)? "]"
element ::= value ws
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1F] | "\\" escape
escape ::= ["\\/bfnrt] | "u" hex hex hex hex
hex ::= [0-9a-fA-F]
number ::= "-"? integer fraction? exponent?
integer ::= "0" | [1-9] [0-9]*
fraction ::= "." [0-9]+
exponent ::= [eE] [+\-]? [0-9]+
ws ::= [ \t\n\r]*
"#;

/// The grammar of any JSON value ([`JSON_EBNF`] parsed), with root rule `root`.
pub fn json_grammar() -> Grammar {
    // JSON_EBNF is a constant checked by the tests below.
    parse_ebnf(JSON_EBNF, "root").expect("JSON_EBNF is a valid grammar")
}

/// XGrammar 0.2.9's built-in JSON grammar, as its `compile_builtin_json_grammar()`
/// accepts: [`JSON_EBNF`] with the root an object or an array, no whitespace before or
/// after it (`" {}"`, `"{}\n"` and a bare `1` or `"a"` are refused; whitespace between
/// tokens inside stays). [`json_grammar`] is the RFC's any value, whitespace around.
pub fn json_object_or_array_grammar() -> Grammar {
    let text = JSON_EBNF.replacen("root ::= ws value ws", "root ::= object | array", 1);
    // JSON_EBNF (with that line) is a constant checked by the tests below.
    parse_ebnf(&text, "root").expect("JSON_EBNF with an object-or-array root is valid")
}

/// A tiny reference recognizer over the IR, for tests: the set of end positions of every
/// way `expr` can match `input` from a start position. Exact for grammars without left
/// recursion; exponential in the worst case, fine for short inputs.
#[cfg(test)]
pub(crate) mod reference {
    use std::collections::{BTreeSet, HashMap};

    use crate::grammar::ir::{Expr, Grammar};

    type Ends = BTreeSet<usize>;

    struct Matcher<'a> {
        g: &'a Grammar,
        input: &'a [u8],
        memo: HashMap<(usize, usize), Ends>,
    }

    impl Matcher<'_> {
        fn rule(&mut self, id: usize, pos: usize) -> Ends {
            if let Some(r) = self.memo.get(&(id, pos)) {
                return r.clone();
            }
            let g = self.g;
            let r = self.expr(&g.rules[id].body, pos);
            self.memo.insert((id, pos), r.clone());
            r
        }

        fn expr(&mut self, e: &Expr, pos: usize) -> Ends {
            let input = self.input;
            match e {
                Expr::Empty => [pos].into(),
                Expr::Bytes(b) => {
                    if input[pos..].starts_with(b) {
                        [pos + b.len()].into()
                    } else {
                        Ends::new()
                    }
                }
                Expr::Class(c) => {
                    let rest = &input[pos..];
                    let len = match rest.first() {
                        None => return Ends::new(),
                        Some(&b) if b < 0x80 => 1,
                        Some(&b) if b >= 0xF0 => 4,
                        Some(&b) if b >= 0xE0 => 3,
                        Some(_) => 2,
                    };
                    let Some(ch) = rest
                        .get(..len)
                        .and_then(|s| std::str::from_utf8(s).ok())
                        .and_then(|s| s.chars().next())
                    else {
                        return Ends::new();
                    };
                    let cp = ch as u32;
                    if c.normalized().iter().any(|&(lo, hi)| lo <= cp && cp <= hi) {
                        [pos + len].into()
                    } else {
                        Ends::new()
                    }
                }
                Expr::Seq(items) => {
                    let mut cur: Ends = [pos].into();
                    for item in items {
                        let mut next = Ends::new();
                        for p in cur {
                            next.extend(self.expr(item, p));
                        }
                        cur = next;
                    }
                    cur
                }
                Expr::Choice(alts) => {
                    let mut out = Ends::new();
                    for a in alts {
                        out.extend(self.expr(a, pos));
                    }
                    out
                }
                Expr::Repeat { expr, min, max } => {
                    let mut out = Ends::new();
                    let mut cur: Ends = [pos].into();
                    let mut seen = Ends::new();
                    let mut k = 0u32;
                    loop {
                        if k >= *min {
                            out.extend(cur.iter().copied());
                        }
                        if max.is_some_and(|m| k >= m) || cur.is_empty() {
                            break;
                        }
                        let mut next = Ends::new();
                        for p in &cur {
                            next.extend(self.expr(expr, *p));
                        }
                        k += 1;
                        if k > *min {
                            // Past the minimum only new positions matter.
                            next.retain(|p| seen.insert(*p));
                        }
                        cur = next;
                    }
                    out
                }
                Expr::Rule(id) => self.rule(id.index(), pos),
                Expr::Token(_) => Ends::new(),
            }
        }
    }

    /// The grammar of one rule, `root ::= e`.
    pub(crate) fn language(e: Expr) -> Grammar {
        Grammar {
            rules: vec![crate::grammar::ir::Rule {
                name: "root".into(),
                body: e,
            }],
            root: crate::grammar::ir::RuleId(0),
        }
    }

    /// Whether `g` matches all of `input`.
    pub(crate) fn accepts(g: &Grammar, input: &str) -> bool {
        let mut m = Matcher {
            g,
            input: input.as_bytes(),
            memo: HashMap::new(),
        };
        m.rule(g.root.index(), 0).contains(&input.len())
    }
}

#[cfg(test)]
mod tests {
    use super::reference::accepts;
    use super::*;

    #[test]
    fn json_grammar_parses_validates_and_round_trips() {
        let g = json_grammar();
        g.validate().unwrap();
        assert_eq!(g.rules[g.root.index()].name, "root");
        assert_eq!(g.rules.len(), 15);
        let printed = g.to_string();
        assert_eq!(parse_ebnf(&printed, "root").unwrap(), g, "{printed}");
    }

    /// XGrammar 0.2.9's `compile_builtin_json_grammar()` on these strings (checked with the
    /// installed package): an object or array, nothing around it.
    #[test]
    fn object_or_array_grammar_refuses_scalars_and_surrounding_whitespace() {
        let g = json_object_or_array_grammar();
        g.validate().unwrap();
        for s in [
            "{ }",
            "[ 1 , 2 ]",
            "{\"a\" :\n1}",
            "[1, \"x\", {\"k\": null}]",
        ] {
            assert!(accepts(&g, s), "should accept {s:?}");
        }
        for s in [
            " {}", "{} ", "{}\n", "\n[1]", "\t{}", "1", " 1", "\"a\"", "true",
        ] {
            assert!(!accepts(&g, s), "should reject {s:?}");
        }
    }

    const VALID: &[&str] = &[
        "0",
        "-0",
        "1",
        "-1",
        "10",
        "123.456",
        "-0.0",
        "1e5",
        "1E+5",
        "1e-05",
        "0.5e0",
        "-12.5E-10",
        "true",
        "false",
        "null",
        "\"\"",
        "\"abc\"",
        "\"é 世界 😀\"",
        "\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00\"",
        "\"\u{7f}\"",
        "[]",
        "{}",
        "[1,2,3]",
        "[ 1 , [ 2 ] , { } ]",
        "{\"a\":1}",
        "{ \"a\" : [true, false, null] , \"b\" : {\"c\": \"d\"} }",
        " \t\n\r 1 \r\n\t ",
        "[\n  {\"k\": -0.5e-3}\n]\n",
    ];

    const INVALID: &[&str] = &[
        "",
        " ",
        "-05",
        "01",
        "1.",
        ".5",
        "+1",
        "-",
        "1e",
        "1e+",
        "0x10",
        "1.5.5",
        "--1",
        "Infinity",
        "NaN",
        "tru",
        "True",
        "nul",
        "\"abc",
        "\"\\x41\"",
        "\"\\u12\"",
        "\"\\u12G4\"",
        "\"\\a\"",
        "\"a\u{0}b\"",
        "\"a\nb\"",
        "\"a\tb\"",
        "\"\u{1f}\"",
        "'a'",
        "[1,]",
        "[,1]",
        "[1 2]",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\":1,}",
        "{a:1}",
        "{1:1}",
        "[",
        "]",
        "{\"a\":1}}",
        "1 2",
        "\u{a0}1",
        "1\u{b}",
    ];

    #[test]
    fn json_grammar_follows_rfc_8259() {
        let g = json_grammar();
        for s in VALID {
            assert!(accepts(&g, s), "should accept {s:?}");
            assert!(
                serde_json::from_str::<serde_json::Value>(s).is_ok(),
                "test case {s:?} is not valid JSON per serde_json"
            );
        }
        for s in INVALID {
            assert!(!accepts(&g, s), "should reject {s:?}");
            assert!(
                serde_json::from_str::<serde_json::Value>(s).is_err(),
                "test case {s:?} is valid JSON per serde_json"
            );
        }
    }

    #[test]
    fn json_grammar_agrees_with_serde_json_on_mutations() {
        // Every single-character deletion and a few insertions of each valid document.
        let g = json_grammar();
        let inserts = [
            '0', '-', '.', 'e', '"', ',', ':', '[', '}', ' ', '\\', '\u{1}',
        ];
        for s in VALID {
            let chars: Vec<char> = s.chars().collect();
            for i in 0..=chars.len() {
                let mut variants = Vec::new();
                if i < chars.len() {
                    let mut v = chars.clone();
                    v.remove(i);
                    variants.push(v);
                }
                for c in inserts {
                    let mut v = chars.clone();
                    v.insert(i, c);
                    variants.push(v);
                }
                for v in variants {
                    let t: String = v.into_iter().collect();
                    let parsed = serde_json::from_str::<serde_json::Value>(&t);
                    let accepted = accepts(&g, &t);
                    // serde_json rejects unpaired surrogate escapes; the RFC grammar does not.
                    let surrogate_error = parsed.as_ref().is_err_and(|e| {
                        let m = e.to_string();
                        m.contains("surrogate")
                            || m.contains("hex escape")
                            || m.contains("unicode code point")
                    });
                    if accepted && surrogate_error {
                        continue;
                    }
                    assert_eq!(accepted, parsed.is_ok(), "{t:?}");
                }
            }
        }
    }
}
