//! Property tests of the EBNF front end and printer: random grammars in the parser's normal
//! form print and parse back to an equal grammar; the parser never panics on arbitrary or
//! mutated input; the built-in JSON grammar round-trips.

use crate::common;

use proptest::prelude::*;
use tokensieve::grammar::{
    json_grammar, parse_ebnf, CharClass, Expr, Grammar, Rule, RuleId, TokenRef, MAX_REPEAT_BOUND,
};

/// Characters for literals: arbitrary scalars, with escapes-prone ASCII and odd Unicode
/// (controls, line separators, BOM, non-BMP) overweighted.
fn lit_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => any::<char>(),
        3 => prop::sample::select(vec![
            '"', '\\', '\n', '\r', '\t', '\0', '\x07', '\x1b', '\x7f', '#', '[', ']', '-', '^',
            '<', '>', '(', ')', '|', '*', '{', '}', '.', ' ', '\'', '/', '?',
            '\u{85}', '\u{a0}', '\u{2028}', '\u{feff}', 'é', '中', '😀', '\u{10FFFF}',
        ]),
        3 => proptest::char::range('a', 'z'),
    ]
}

fn code_point() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => 0u32..0x80,
        2 => 0u32..=0x10FFFF,
        1 => 0xD700u32..0xE100,
        2 => prop::sample::select(vec![
            b']' as u32, b'\\' as u32, b'^' as u32, b'-' as u32, b'[' as u32, 0, 0x1F, 0x85,
            0x2028, 0xFFFF, 0x10000, 0x10FFFF,
        ]),
    ]
}

fn class() -> impl Strategy<Value = CharClass> {
    (
        any::<bool>(),
        prop::collection::vec((code_point(), code_point()), 0..5),
    )
        .prop_map(|(negated, pairs)| CharClass {
            negated,
            ranges: pairs
                .into_iter()
                .map(|(a, b)| (a.min(b), a.max(b)))
                .collect(),
        })
}

fn token() -> impl Strategy<Value = TokenRef> {
    let text_char = lit_char().prop_filter("token text", |c| !matches!(c, '>' | '\n' | '\r'));
    prop_oneof![
        any::<u32>().prop_map(TokenRef::Id),
        prop::collection::vec(text_char, 1..8)
            .prop_filter("not an id form", |v| v[0] != '[')
            .prop_map(|v| TokenRef::Text(format!("<{}>", v.into_iter().collect::<String>()))),
        Just(TokenRef::Text("<|im_end|>".into())),
    ]
}

fn bound() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0u32..4, 1 => 0u32..=MAX_REPEAT_BOUND]
}

/// Expressions in the parser's normal form: `Seq`/`Choice` of at least two parts, non-empty
/// `Bytes` that are UTF-8, bounds within the limit.
fn expr(rules: u32) -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        1 => Just(Expr::Empty),
        4 => prop::collection::vec(lit_char(), 1..6)
            .prop_map(|v| Expr::Bytes(v.into_iter().collect::<String>().into_bytes())),
        3 => class().prop_map(Expr::Class),
        3 => (0..rules).prop_map(|i| Expr::Rule(RuleId(i))),
        1 => token().prop_map(Expr::Token),
    ];
    leaf.prop_recursive(5, 48, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 2..5).prop_map(Expr::Seq),
            prop::collection::vec(inner.clone(), 2..4).prop_map(Expr::Choice),
            (inner, bound(), prop::option::of(0u32..4)).prop_map(|(e, min, extra)| {
                Expr::Repeat {
                    expr: Box::new(e),
                    min,
                    max: extra.map(|x| min.saturating_add(x).min(MAX_REPEAT_BOUND).max(min)),
                }
            }),
        ]
    })
}

fn grammar() -> impl Strategy<Value = (Grammar, String)> {
    (1u32..6)
        .prop_flat_map(|n| {
            (
                prop::collection::vec("[A-Za-z_][A-Za-z0-9_.-]{0,6}", n as usize),
                prop::collection::vec(expr(n), n as usize),
                0..n,
            )
        })
        .prop_map(|(mut names, bodies, root)| {
            // Make names unique.
            for i in 0..names.len() {
                if names[..i].contains(&names[i]) {
                    names[i] = format!("{}_{i}", names[i]);
                }
            }
            let rules: Vec<Rule> = names
                .iter()
                .zip(bodies)
                .map(|(name, body)| Rule {
                    name: name.clone(),
                    body,
                })
                .collect();
            let root_name = names[root as usize].clone();
            (
                Grammar {
                    rules,
                    root: RuleId(root),
                },
                root_name,
            )
        })
}

proptest! {
    #![proptest_config(common::proptest_config(2000))]

    #[test]
    fn print_then_parse_is_identity((g, root) in grammar()) {
        prop_assert!(g.validate().is_ok());
        let printed = g.to_string();
        let back = parse_ebnf(&printed, &root);
        prop_assert!(back.is_ok(), "{}\n{}", back.unwrap_err(), printed);
        let back = back.unwrap();
        prop_assert_eq!(&back, &g, "{}", printed);
        // Printing is a fixed point.
        prop_assert_eq!(back.to_string(), printed);
    }

    #[test]
    fn parser_never_panics_on_grammar_like_noise(
        src in prop::collection::vec(prop::sample::select(vec![
            "root", " ::= ", "a", "::=", "\"", "\"x\"", "[", "]", "^", "-", "\\", "\\u00", "\\x4",
            "(", ")", "(=", "|", "*", "+", "?", "{", "}", ",", "1", "99999999999", "<", ">",
            "<[", "<|", ".", "#", "\n", " ", "é", "\u{0}", "\r\n", "a-b", "_x.y",
        ]), 0..40)
    ) {
        let src: String = src.concat();
        let _ = parse_ebnf(&src, "root");
    }

    #[test]
    fn parser_never_panics_on_arbitrary_text(src in any::<String>()) {
        let _ = parse_ebnf(&src, "root");
    }

    #[test]
    fn parser_never_panics_on_mutated_grammars(
        (g, root) in grammar(),
        cut in any::<prop::sample::Index>(),
        insert in prop::sample::select(vec!["", "(", ")", "\"", "[", "]", "|", "{", "<", "\\", "\n", "::="]),
    ) {
        let printed = g.to_string();
        let mut at = cut.index(printed.len() + 1);
        while !printed.is_char_boundary(at) {
            at -= 1;
        }
        let mutated = format!("{}{insert}{}", &printed[..at], &printed[at..]);
        let _ = parse_ebnf(&mutated, &root);
        let _ = parse_ebnf(&printed[..at], &root);
    }
}

#[test]
fn json_grammar_round_trips() {
    let g = json_grammar();
    let printed = g.to_string();
    assert_eq!(parse_ebnf(&printed, "root").unwrap(), g, "{printed}");
}

#[test]
fn error_positions_are_one_based_characters() {
    let err = parse_ebnf("root ::= \"é\"\n  \"ü\" | undefined_x", "root").unwrap_err();
    assert_eq!((err.line(), err.column()), (2, 9));
    assert!(
        err.to_string()
            .starts_with("2:9: undefined rule `undefined_x`: define it"),
        "{err}"
    );
}
