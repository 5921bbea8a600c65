//! The regex front end (`GrammarCompiler::compile_regex`, `regex::regex_to_expr`).
//!
//! - Accept/reject tables per construct, each text cross-checked against the `regex` crate
//!   with `^(?:pattern)$` (or the unanchored pattern in unanchored mode).
//! - Mask ⇔ accept over the whole real vocabulary at every step of teacher-forcing accepted
//!   texts (Llama 3.1, Qwen3), and on Llama 2 where characters arrive as `<0xNN>` byte
//!   fallback tokens.
//! - Seeded random walks whose outputs must match the `regex` crate.
//! - Typed errors with positions; 10,000 nested groups give an error, not a stack overflow.
//!
//! Run with `cargo test --release --test front_ends regex::`.

use crate::common;

use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;
use tokensieve::grammar::Expr;
use tokensieve::regex::{regex_to_expr, regex_to_grammar, RegexOptions};
use tokensieve::{
    CompileError, CompiledGrammar, GrammarCompiler, GrammarMatcher, RegexError, Vocabulary,
};

/// Every single byte as a token, plus `<eos>` (id 256): any UTF-8 text tokenises.
fn byte_compiler() -> &'static GrammarCompiler {
    static C: std::sync::OnceLock<GrammarCompiler> = std::sync::OnceLock::new();
    C.get_or_init(|| {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(b"<eos>".to_vec());
        GrammarCompiler::new(Vocabulary::from_token_bytes(&tokens, &[256], &[256]).unwrap())
    })
}

/// Whether the matcher accepts exactly `text` (then the stop token).
fn accepts(compiled: &Arc<CompiledGrammar>, text: &str) -> bool {
    let mut m = GrammarMatcher::new(compiled.clone());
    m.accept_string(text) && m.accept_token(256) && m.is_terminated()
}

fn oracle(pattern: &str, unanchored: bool, dot_nl: bool) -> regex::Regex {
    let p = if unanchored {
        pattern.to_string()
    } else {
        format!("^(?:{pattern})$")
    };
    regex::RegexBuilder::new(&p)
        .dot_matches_new_line(dot_nl)
        .build()
        .unwrap_or_else(|e| panic!("regex crate refuses {p:?}: {e}"))
}

/// One row: a construct, a pattern, texts it accepts and texts it rejects.
struct Row {
    construct: &'static str,
    pattern: &'static str,
    accept: &'static [&'static str],
    reject: &'static [&'static str],
}

const ROWS: &[Row] = &[
    Row {
        construct: "literal",
        pattern: r"héllo, 世界\.\*",
        accept: &["héllo, 世界.*"],
        reject: &[
            "hello, 世界.*",
            "héllo, 世界",
            "héllo, 世界.*x",
            "",
            "héllo, 世界a*",
        ],
    },
    Row {
        construct: "literal",
        pattern: r"a\tb\x41\u{1F600}\n",
        accept: &["a\tbA😀\n"],
        reject: &["a\tbA😀", "a bA😀\n", "atbA😀\n", "a\tba😀\n", "a\tbA😁\n"],
    },
    Row {
        construct: "literal",
        pattern: r"a\.b",
        accept: &["a.b"],
        reject: &["axb", "a\\.b"],
    },
    Row {
        construct: "literal",
        pattern: "😀",
        accept: &["😀"],
        reject: &["😁"],
    },
    Row {
        construct: "literal",
        pattern: r"\[x\]",
        accept: &["[x]"],
        reject: &["x"],
    },
    Row {
        construct: "literal",
        pattern: "ab",
        accept: &["ab"],
        reject: &["a", "b", "abab"],
    },
    Row {
        construct: "class",
        pattern: r"[a-c_\d]+",
        accept: &["a", "abc", "_", "c0_9", "٣", "cab1"],
        reject: &["", "d", "abcd", "-", "A", "a b"],
    },
    Row {
        construct: "negated class",
        pattern: r"[^a-c\n]",
        accept: &["d", "Z", "é", "😀", "\r", " "],
        reject: &["a", "b", "c", "\n", "", "dd"],
    },
    Row {
        construct: r"\p{L}",
        pattern: r"\p{L}+",
        accept: &["abc", "Ωmega", "日本語", "ﬁ", "é", "ДЖ"],
        reject: &["", "1", "a1", "😀", "a b", "_"],
    },
    Row {
        construct: r"\p{Han}",
        pattern: r"\p{Han}+",
        accept: &["日本", "中文", "𠀀", "龘", "㐀", "𪚥"],
        reject: &["", "ひらがな", "a", "日本a", "한", "日 本"],
    },
    Row {
        construct: r"\p{Greek}",
        pattern: r"\p{Greek}\P{Greek}",
        accept: &["αa", "Ω1", "ω😀", "Σ ", "λ\n"],
        reject: &["", "α", "αβ", "aα", "αab"],
    },
    Row {
        construct: r"\d",
        pattern: r"\d{2}",
        accept: &["12", "00", "٣٤", "9٠", "१२"],
        reject: &["1", "123", "a1", "1a", "", "½1"],
    },
    Row {
        construct: r"\D",
        pattern: r"\D+",
        accept: &["a", "abc", " ", "½", "[", "😀\n"],
        reject: &["", "1", "a1", "٣", "१", "a9b"],
    },
    Row {
        construct: r"\w",
        pattern: r"\w+",
        accept: &["abc", "a_1", "日本", "é", "Ω9", "_"],
        reject: &["", "a b", "-", "a.b", "😀", "["],
    },
    Row {
        construct: r"\W",
        pattern: r"\W+",
        accept: &[" ", "-", "[", "😀", ".,;", "\n"],
        reject: &["", "a", "_", "1", " a", "é"],
    },
    Row {
        construct: r"\s",
        pattern: r"\s+",
        accept: &[" ", "\t", "\n", "\r\n", "\u{3000}", "\u{a0}"],
        reject: &["", "a", " a", "[", "_", "\u{200b}"],
    },
    Row {
        construct: r"\S",
        pattern: r"\S+",
        accept: &["[", "a", "😀", "\u{200b}", "a[b]", "é"],
        reject: &["", " ", "a b", "\t", "\n", "\u{3000}"],
    },
    Row {
        construct: "dot",
        pattern: r"a.c",
        accept: &["abc", "a.c", "a c", "a😀c", "a\rc", "aéc"],
        reject: &["a\nc", "ac", "abbc", "abc\n", "", "xbc"],
    },
    Row {
        construct: "dot (?s)",
        pattern: r"(?s)a.c",
        accept: &["abc", "a\nc", "a c", "a😀c", "a\rc"],
        reject: &["ac", "abbc", "a\n\nc", "", "xbc"],
    },
    Row {
        construct: "alternation with empty branches",
        pattern: r"(ab|)c(|d)",
        accept: &["abc", "c", "cd", "abcd"],
        reject: &["ac", "bc", "", "abd", "abcdd", "ab"],
    },
    Row {
        construct: "alternation with empty branches",
        pattern: r"(|x)(y|)",
        accept: &["", "x", "y", "xy"],
        reject: &["yx", "xx", "yy", "z", "xyx"],
    },
    Row {
        construct: "alternation",
        pattern: r"cat|dog|bird|",
        accept: &["cat", "dog", "bird", "", "bird"],
        reject: &["ca", "cats", "do g", "catdog", "b", "Cat"],
    },
    Row {
        construct: "groups",
        pattern: r"(?:a(b(c)))+(?P<x>d)?",
        accept: &["abc", "abcabc", "abcd", "abcabcd", "abcabcabc"],
        reject: &["", "ab", "abcab", "d", "abcdd", "abcdabc"],
    },
    Row {
        construct: "case-insensitive group",
        pattern: r"(?i:hello) World",
        accept: &[
            "hello World",
            "HELLO World",
            "HeLlO World",
            "hEllo World",
            "HELLo World",
        ],
        reject: &[
            "hello world",
            "hello WORLD",
            "helo World",
            "",
            "hello  World",
        ],
    },
    Row {
        construct: "counted repetition",
        pattern: r"a{3}b{2,4}c{2,}d{0,2}",
        accept: &[
            "aaabbcc",
            "aaabbbbccccd",
            "aaabbbccdd",
            "aaabbcccccccc",
            "aaabbccd",
        ],
        reject: &[
            "aabbcc",
            "aaaabbcc",
            "aaabcc",
            "aaabbbbbcc",
            "aaabbc",
            "aaabbccddd",
        ],
    },
    Row {
        construct: "counted group repetition",
        pattern: r"(ab|c){2,3}",
        accept: &["abab", "cc", "abc", "cab", "ababab", "ccc"],
        reject: &["ab", "c", "abababab", "cccc", "aab", ""],
    },
    Row {
        construct: "lazy repetition",
        pattern: r"x+?y*?z??",
        accept: &["x", "xx", "xyyz", "xz", "xxxyyy"],
        reject: &["", "y", "xzz", "xzy", "yx"],
    },
    Row {
        construct: "anchors at the ends",
        pattern: r"^(?:^abc|de$)$",
        accept: &["abc", "de"],
        reject: &["", "abcde", "ab", "d", "xabc", "dex"],
    },
    Row {
        construct: "anchors at the ends",
        pattern: r"\A(?:^x|^y)?z?$\z",
        accept: &["", "x", "y", "z", "xz", "yz"],
        reject: &["xy", "zz", "zx", "a", "xx"],
    },
    Row {
        construct: "byte-oriented ASCII class (?-u)",
        pattern: r"(?-u:\w+)(?-u:[\x21-\x2F])",
        accept: &["ab!", "a_1-", "Zz/", "aa-", "x."],
        reject: &["a", "aa", "éb!", "a é", "", "a!!", "a\u{2010}"],
    },
];

/// Each construct's table: the regex crate must agree with the expectation, and so must
/// the compiled grammar.
#[test]
fn accept_reject_tables() {
    let c = byte_compiler();
    let mut failures = Vec::new();
    let mut checked = 0;
    for row in ROWS.iter() {
        let re = oracle(row.pattern, false, false);
        let compiled = c
            .compile_regex(row.pattern)
            .unwrap_or_else(|e| panic!("{}: {:?}: {e}", row.construct, row.pattern));
        for (texts, want) in [(row.accept, true), (row.reject, false)] {
            for &t in texts {
                checked += 1;
                if re.is_match(t) != want {
                    failures.push(format!(
                        "{} {:?} on {t:?}: table says {want}, regex crate says {}",
                        row.construct, row.pattern, !want
                    ));
                }
                if accepts(&compiled, t) != want {
                    failures.push(format!(
                        "{} {:?} on {t:?}: expected {want}, grammar says {}",
                        row.construct, row.pattern, !want
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Per construct group (several rows may share one), at least 5 accepted and 5 rejected.
    let mut per: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for row in ROWS.iter() {
        let e = per.entry(row.construct).or_default();
        e.0 += row.accept.len();
        e.1 += row.reject.len();
    }
    eprintln!(
        "{checked} table texts checked over {} constructs",
        per.len()
    );
}

/// The `.` option and `(?s)` agree with the regex crate's `dot_matches_new_line`.
#[test]
fn dot_matches_new_line_option() {
    let c = byte_compiler();
    let opts = RegexOptions::new().dot_matches_new_line(true);
    let p = "a.+b";
    let compiled = c.compile_regex_with(p, &opts).unwrap();
    let plain = c.compile_regex(p).unwrap();
    let re = oracle(p, false, true);
    let re_plain = oracle(p, false, false);
    for t in [
        "a\nb", "ax\nb", "a\n\nb", "axb", "ab", "a\nbc", "a😀\nb", "b\na",
    ] {
        assert_eq!(accepts(&compiled, t), re.is_match(t), "(?s) {t:?}");
        assert_eq!(accepts(&plain, t), re_plain.is_match(t), "{t:?}");
    }
    // Case-insensitive option.
    let ci = c
        .compile_regex_with("straße|ω", &RegexOptions::new().case_insensitive(true))
        .unwrap();
    let re_ci = regex::Regex::new("^(?i:straße|ω)$").unwrap();
    for t in ["STRASSE", "Straße", "STRAßE", "Ω", "ω", "strasse", "w"] {
        assert_eq!(accepts(&ci, t), re_ci.is_match(t), "(?i) {t:?}");
    }
}

/// `RegexOptions::ecmascript_classes`: `\d`, `\w`, `\s` and their complements take their
/// ECMAScript meaning (XGrammar's regex dialect: `[0-9]`, `[a-zA-Z0-9_]`, ECMAScript white
/// space) outside and inside brackets, while the default keeps Rust's Unicode classes.
#[test]
fn ecmascript_classes_option() {
    let c = byte_compiler();
    let opts = RegexOptions::new().ecmascript_classes(true);
    let ws = "[\\t\\n\\x0B\\x0C\\r\\x20\\xA0\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}]";
    let cases: &[(&str, String)] = &[
        (r"\d+", "[0-9]+".into()),
        (r"\D", "[^0-9]".into()),
        (r"\w+", "[0-9A-Za-z_]+".into()),
        (r"\W", "[^0-9A-Za-z_]".into()),
        (r"\s", ws.into()),
        (r"\S", format!("[^{}", &ws[1..])),
        (r"[\d.]+", "[0-9.]+".into()),
        (r"[^\w]", "[^0-9A-Za-z_]".into()),
        (r"[a\D]", "[a[^0-9]]".into()),
        (r"x[\s-]y", format!("x[{}-]y", &ws[1..ws.len() - 1])),
    ];
    let texts = [
        "7", "42", "٣", "a", "é", "_", "Z", " ", "\u{a0}", "\u{85}", "\u{feff}", "\u{2028}", ".",
        "-", "x y", "x-y", "x\u{85}y", "xay", "3.14", "a7", "aé",
    ];
    for (p, ascii) in cases {
        let compiled = c.compile_regex_with(p, &opts).unwrap();
        let re = regex::Regex::new(&format!("^(?:{ascii})$")).unwrap();
        let unicode = c.compile_regex(p).unwrap();
        let re_unicode = oracle(p, false, false);
        for t in texts {
            assert_eq!(
                accepts(&compiled, t),
                re.is_match(t),
                "{p} as {ascii}: {t:?}"
            );
            assert_eq!(
                accepts(&unicode, t),
                re_unicode.is_match(t),
                "{p} (Unicode): {t:?}"
            );
        }
    }
    // The difference that matters: the default is Unicode, the option is not.
    let digits = c.compile_regex_with(r"\d+", &opts).unwrap();
    assert!(!accepts(&digits, "٣"));
    assert!(accepts(&c.compile_regex(r"\d+").unwrap(), "٣"));
    // Errors keep the original pattern's positions.
    let e = c.compile_regex_with(r"\d\d(", &opts).unwrap_err();
    assert!(e.to_string().contains("1:5"), "{e}");
}

/// Unanchored mode (the JSON Schema `pattern` keyword): texts containing a match.
#[test]
fn unanchored_mode() {
    let c = byte_compiler();
    let opts = RegexOptions::new().unanchored(true);
    let cases: &[(&str, &[&str])] = &[
        (
            r"ab+c",
            &[
                "abc",
                "xxabbbcyy",
                "ab\nc",
                "\nabc\n",
                "",
                "ac",
                "abcabc",
                "a\nbc",
            ],
        ),
        (r"^ab", &["ab", "abx", "xab", "a", "ab\n", "\nab", ""]),
        (r"\d$", &["1", "a1", "1a", "", "12", "1\n", "\n1"]),
        (r"^\d+$", &["1", "123", "a1", "1a", "", "1\n"]),
        (
            r"^a|b$",
            &["a", "ax", "xa", "b", "xb", "bx", "ab", "ba", ""],
        ),
        (r"", &["", "anything", "\n"]),
        (r"^$", &["", "x", "\n"]),
        (r"(?s)a.b", &["a\nb", "xa\nbx", "ab"]),
        (r"[^a]", &["a", "aa", "ab", "", "b"]),
    ];
    let mut n = 0;
    for (p, texts) in cases {
        let e = regex_to_expr(p, &opts).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        let g = tokensieve::Grammar {
            rules: vec![tokensieve::grammar::Rule {
                name: "root".into(),
                body: e,
            }],
            root: tokensieve::RuleId(0),
        };
        let compiled = c.compile_ir(&g).unwrap();
        let via = c.compile_regex_with(p, &opts).unwrap();
        let re = oracle(p, true, false);
        for t in *texts {
            n += 1;
            assert_eq!(
                accepts(&compiled, t),
                re.is_match(t),
                "unanchored {p:?} on {t:?}"
            );
            assert_eq!(
                accepts(&via, t),
                re.is_match(t),
                "unanchored {p:?} on {t:?}"
            );
        }
    }
    eprintln!("{n} unanchored texts checked");
    // Anchors that do not anchor a whole top-level alternative, and multi-line anchors.
    for p in [r"(^|x)a", r"a(b|$)", r"(?m)^a", r"(?m)a$"] {
        let e = regex_to_expr(p, &opts).unwrap_err();
        assert!(
            matches!(e, RegexError::MisplacedAnchor { .. }),
            "{p:?}: {e:?}"
        );
    }
}

/// Large counted repetitions stay `Repeat` and compile compactly.
#[test]
fn large_repetition_is_compact() {
    let c = byte_compiler();
    let e = regex_to_expr(r"[ab]{2,20000}", &RegexOptions::new()).unwrap();
    assert!(
        matches!(
            e,
            Expr::Repeat {
                min: 2,
                max: Some(20000),
                ..
            }
        ),
        "{e:?}"
    );
    let compiled = c.compile_regex(r"x[ab]{2,20000}y").unwrap();
    assert!(
        compiled.node_count() < 2_000,
        "{} nodes",
        compiled.node_count()
    );
    let re = oracle(r"x[ab]{2,20000}y", false, false);
    for n in [0usize, 1, 2, 3, 999, 20000, 20001] {
        let t = format!("x{}y", "ab".repeat(n / 2) + &"a".repeat(n % 2));
        assert_eq!(accepts(&compiled, &t), re.is_match(&t), "{n} letters");
    }
    let exact = c.compile_regex(r"\d{1000}").unwrap();
    assert!(accepts(&exact, &"7".repeat(1000)));
    assert!(!accepts(&exact, &"7".repeat(999)));
    assert!(!accepts(&exact, &"7".repeat(1001)));
    // An empty class matches nothing: the compiler either refuses the grammar (the empty
    // language) or compiles one that accepts nothing.
    match c.compile_regex(r"[^\s\S]") {
        Ok(none) => {
            for t in ["", "a", " "] {
                assert!(!accepts(&none, t));
            }
        }
        // Not the front end's error: the compiler's (the empty language).
        Err(e) if !matches!(e, CompileError::Regex(_)) => {}
        Err(e) => panic!("[^\\s\\S]: {e}"),
    }
    // The grammar prints as EBNF.
    let g = regex_to_grammar(r"(ab|)c(|d)", &RegexOptions::new()).unwrap();
    assert!(g.to_string().contains("root"), "{g}");
}

fn position(e: &RegexError) -> (usize, usize, usize) {
    let p = e.position();
    (p.offset, p.line, p.column)
}

/// Unsupported constructs are typed errors naming the construct and its position.
#[test]
fn typed_errors_with_positions() {
    let opts = RegexOptions::new();
    let err = |p: &str| regex_to_expr(p, &opts).unwrap_err();

    let e = err(r"ab\bc");
    assert!(
        matches!(&e, RegexError::WordBoundary { text, .. } if text == r"\b"),
        "{e:?}"
    );
    assert_eq!(position(&e), (2, 1, 3));
    assert!(e.to_string().contains("1:3"), "{e}");
    let e = err(r"x\B");
    assert!(matches!(&e, RegexError::WordBoundary { text, .. } if text == r"\B"));
    assert_eq!(position(&e), (1, 1, 2));
    assert!(matches!(
        err(r"\b{start}a"),
        RegexError::WordBoundary { .. }
    ));

    let e = err(r"(?=a)b");
    assert!(matches!(e, RegexError::LookAround { .. }), "{e:?}");
    assert_eq!(position(&e).0, 0);
    let e = err(r"x(?!a)");
    assert!(matches!(e, RegexError::LookAround { .. }), "{e:?}");
    assert_eq!(position(&e).0, 1);
    assert!(matches!(err(r"(?<=a)b"), RegexError::LookAround { .. }));
    assert!(matches!(err(r"(?<!a)b"), RegexError::LookAround { .. }));

    let e = err(r"a^b");
    assert!(
        matches!(&e, RegexError::MisplacedAnchor { text, .. } if text == "^"),
        "{e:?}"
    );
    assert_eq!(position(&e), (1, 1, 2));
    let e = err(r"a$b");
    assert!(matches!(&e, RegexError::MisplacedAnchor { text, .. } if text == "$"));
    assert_eq!(position(&e), (1, 1, 2));
    for p in [r"(^a)+", r"a+$b?", r"(a$)*", r"a\Ab", r"a?^b"] {
        assert!(
            matches!(err(p), RegexError::MisplacedAnchor { .. }),
            "{p:?}: {:?}",
            err(p)
        );
    }

    let e = err(r"(a)\1");
    assert!(matches!(e, RegexError::Backreference { .. }), "{e:?}");
    assert_eq!(position(&e).0, 3);
    let e = err(r"\1");
    assert!(matches!(e, RegexError::Backreference { .. }), "{e:?}");
    assert_eq!(position(&e), (0, 1, 1));

    // Line and column in a multi-line pattern (verbose mode).
    let e = err("(?x)a\n  b \\b");
    assert!(matches!(e, RegexError::WordBoundary { .. }), "{e:?}");
    assert_eq!(position(&e), (10, 2, 5));

    // Syntax errors carry regex-syntax's error as their source.
    for (p, off) in [
        ("(ab", 0),
        ("a{3,2}", 1),
        (r"\p{NoSuchThing}", 0),
        ("[z-a]", 1),
    ] {
        let e = err(p);
        assert!(matches!(e, RegexError::Syntax { .. }), "{p:?}: {e:?}");
        assert_eq!(position(&e).0, off, "{p:?}: {e}");
        assert!(std::error::Error::source(&e).is_some());
    }

    // Non-UTF-8 byte classes.
    for p in [r"(?-u:\xFF)", r"(?-u:.)", r"(?-u:[^a])"] {
        assert!(
            matches!(err(p), RegexError::NonUtf8 { .. }),
            "{p:?}: {:?}",
            err(p)
        );
    }

    // Through the compiler, the same errors.
    let c = byte_compiler();
    assert!(matches!(
        c.compile_regex(r"\b"),
        Err(CompileError::Regex(RegexError::WordBoundary { .. }))
    ));
    // The 0.x error type, converted from today's (tests/layout/old_api.rs checks the rest
    // of the old paths).
    #[allow(deprecated)]
    let refused = matches!(
        c.compile_regex(r"\b")
            .map_err(tokensieve::RegexCompileError::from),
        Err(tokensieve::RegexCompileError::Regex(
            RegexError::WordBoundary { .. }
        ))
    );
    assert!(refused);
}

/// 10,000 nested groups (or classes, or repetitions) are an error, not a stack overflow;
/// nesting within the limit compiles.
#[test]
fn deep_nesting_is_bounded() {
    let opts = RegexOptions::new();
    let deep = format!("{}a{}", "(".repeat(10_000), ")".repeat(10_000));
    let e = regex_to_expr(&deep, &opts).unwrap_err();
    assert!(matches!(e, RegexError::TooDeep { limit: 250, .. }), "{e:?}");
    let deep = format!("{}a{}", "(?:".repeat(10_000), ")*".repeat(10_000));
    assert!(regex_to_expr(&deep, &opts).is_err());
    let deep = format!("{}a{}", "[".repeat(10_000), "]".repeat(10_000));
    assert!(regex_to_expr(&deep, &opts).is_err());
    let deep = format!("{}a{}", "(b|".repeat(10_000), ")".repeat(10_000));
    assert!(regex_to_expr(&deep, &opts).is_err());

    // Within the (raised) limit: compiles and matches.
    let c = byte_compiler();
    let opts = RegexOptions::new().nest_limit(100_000);
    let ok = format!("{}a{}", "(?:x|".repeat(100), ")".repeat(100));
    let compiled = c.compile_regex_with(&ok, &opts).unwrap();
    assert!(accepts(&compiled, "xa") || accepts(&compiled, "x"));
    assert!(accepts(&compiled, "a"));
    // Near the largest limit: 160 nested loops (480 levels for the parser) compile.
    let deepest = format!("{}a{}", "(?:x".repeat(160), ")*".repeat(160));
    let deep_compiled = c
        .compile_regex_with(&deepest, &RegexOptions::new().nest_limit(500))
        .unwrap();
    assert!(accepts(&deep_compiled, ""));
    assert!(accepts(&deep_compiled, &format!("{}a", "x".repeat(160))));
    assert!(!accepts(&deep_compiled, &format!("{}a", "x".repeat(159))));
    let re = oracle(&ok, false, false);
    for t in ["a", "x", "xa", "", "ax"] {
        assert_eq!(accepts(&compiled, t), re.is_match(t), "{t:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Real tokenizers.

#[cfg(feature = "hf")]
mod real {
    use super::*;
    use common::{check_all_tokens, RealTokenizer};

    /// Patterns with texts they accept, teacher-forced with every token checked at every
    /// step.
    const CASES: &[(&str, &[&str])] = &[
        (
            r"(ab|)c(|d) [\p{L}\d ]{1,12}",
            &["abcd Hello 42", "c ça va 7"],
        ),
        (
            r"\w+@\w+\.(com|org)",
            &["user_1@example.org", "数据@例子.com"],
        ),
        (r"\S+\s\S+", &["[hello] world!", "a\tb"]),
        (r"(?s)<p>.{0,40}</p>", &["<p>two\nlines</p>"]),
        (r"\d{3}-\d{4}|[A-Z]{2,5}", &["555-1234", "ABC"]),
        (r"\p{Han}+|[😀-🙏]+", &["漢字", "😀🙏"]),
        (r#"\{"a": -?\d+(\.\d+)?\}"#, &[r#"{"a": -12.5}"#]),
        (r"^[^\n]{2,8}\n.+$", &["line 1\nrest of it", "ab\n😀"]),
        (r"\D{1,6}\W\w{3}", &["abc! xyz", "ü-ü_1"]),
        (
            r"(?i:select) [a-z_, ]{1,2000} (?i:from) \w+",
            &["SELECT a, b_c FROM t1"],
        ),
        (r"((ab)|c)*(d|){3}", &["ababcdd", "ccab"]),
    ];

    fn force(rt: &RealTokenizer, pattern: &str, text: &str, failures: &mut Vec<String>) -> usize {
        let re = regex::Regex::new(&format!("^(?:{pattern})$")).unwrap();
        assert!(re.is_match(text), "{pattern:?} on {text:?}");
        let compiled = rt.compiler.compile_regex(pattern).unwrap();
        let ids = rt.encode_exact(text);
        let mut m = GrammarMatcher::new(compiled);
        let mut steps = 0;
        for (i, &id) in ids.iter().enumerate() {
            let (allowed, bad) = check_all_tokens(&m, &rt.vocab);
            steps += 1;
            for b in bad.iter().take(5) {
                failures.push(format!("{} {pattern:?} {text:?} step {i}: {b}", rt.name));
            }
            if !allowed.contains(&id) {
                failures.push(format!(
                    "{} {pattern:?} {text:?} step {i}: the text's token {id} is not allowed",
                    rt.name
                ));
                return steps;
            }
            assert!(m.accept_token(id));
        }
        let (allowed, bad) = check_all_tokens(&m, &rt.vocab);
        steps += 1;
        for b in bad.iter().take(5) {
            failures.push(format!("{} {pattern:?} {text:?} at the end: {b}", rt.name));
        }
        if !allowed.contains(&rt.stop()) || !m.accept_token(rt.stop()) || !m.is_terminated() {
            failures.push(format!(
                "{} {pattern:?} {text:?}: stop not accepted",
                rt.name
            ));
        }
        steps
    }

    fn invariant_on(name: &str) {
        let Some(rt) = RealTokenizer::load(name) else {
            return;
        };
        let start = std::time::Instant::now();
        let mut failures = Vec::new();
        let mut steps = 0;
        for (p, texts) in CASES {
            for t in *texts {
                steps += force(&rt, p, t, &mut failures);
            }
        }
        eprintln!(
            "{name}: {steps} exhaustive steps over {} tokens, {:.1} s",
            rt.vocab.vocab_size(),
            start.elapsed().as_secs_f64()
        );
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn invariant_llama3_1() {
        invariant_on("llama3_1");
    }

    #[test]
    fn invariant_qwen3() {
        invariant_on("qwen3");
    }

    /// Llama 2: rare CJK characters and emoji arrive as several `<0xNN>` byte tokens; the
    /// Unicode class must allow exactly the byte tokens that continue a member character.
    #[test]
    fn byte_fallback_llama2() {
        let Some(rt) = RealTokenizer::load("llama2") else {
            return;
        };
        let mut failures = Vec::new();
        let mut byte_tokens = 0;
        let cases: &[(&str, &str)] = &[
            (r"\p{Han}+", "𠀀龘𪚥中"),
            (r"[😀-🙏🚀]+x", "🙏🚀😀x"),
            (r"\P{Han}\p{Greek}{2}", "🚀Ωψ"),
        ];
        for (p, t) in cases {
            let ids = rt.encode_exact(t);
            byte_tokens += ids
                .iter()
                .filter(|&&id| {
                    rt.vocab
                        .token_bytes(id)
                        .is_some_and(|b| b.len() == 1 && b[0] >= 0x80)
                })
                .count();
            force(&rt, p, t, &mut failures);
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert!(
            byte_tokens >= 8,
            "only {byte_tokens} byte-fallback tokens were exercised"
        );
        // Byte tokens as first bytes: allowed exactly when some member starts with them.
        // Greek has 2-byte (CE, CF), 3-byte (E1, E2, EA) and 4-byte (F0) members, none
        // starting with E4 (U+4000..U+4FFF) or with ASCII.
        let compiled = rt.compiler.compile_regex(r"\p{Greek}+").unwrap();
        let m = GrammarMatcher::new(compiled);
        let (allowed, bad) = check_all_tokens(&m, &rt.vocab);
        assert!(bad.is_empty(), "{}", bad[0]);
        let byte = |b: u8| {
            (0..rt.vocab.vocab_size() as u32)
                .find(|&id| rt.vocab.token_bytes(id) == Some(&[b][..]))
                .unwrap()
        };
        for b in [0xCE, 0xCF, 0xE1, 0xF0] {
            assert!(allowed.contains(&byte(b)), "<0x{b:02X}>");
        }
        for b in [0xE4, 0xC3, 0x80, b'a'] {
            assert!(!allowed.contains(&byte(b)), "<0x{b:02X}>");
        }
    }

    /// Seeded random walks over Llama 3.1: sample any allowed token (the stop token with a
    /// raised probability) until the matcher terminates; the text must match the regex.
    #[test]
    fn random_walks_llama3_1() {
        let Some(rt) = RealTokenizer::load("llama3_1") else {
            return;
        };
        let patterns = [
            r"(ab|)c(|d)",
            r"\d{3}-\d{2,4}",
            r"[\p{Han}a-z]{1,8}",
            r"\S+ \S+",
            r"(x|yz)*\.",
            r"(?i)hello|\w{2}",
            r"[^a-z\s]{1,5}",
            r".{0,10}",
        ];
        walks(&rt.vocab, &rt.compiler, &patterns, 6, 2024, rt.stop());
    }
}

fn walks(
    vocab: &Vocabulary,
    compiler: &GrammarCompiler,
    patterns: &[&str],
    per_pattern: usize,
    seed: u64,
    stop: u32,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut mask = vec![0u32; vocab.bitmask_words()];
    let mut done = 0;
    for p in patterns {
        let re = regex::Regex::new(&format!("^(?:{p})$")).unwrap();
        let compiled = compiler.compile_regex(p).unwrap();
        for w in 0..per_pattern {
            let mut m = GrammarMatcher::new(compiled.clone());
            let mut ids = Vec::new();
            for step in 0..64 {
                m.fill_next_token_bitmask(&mut mask).unwrap();
                let allowed: Vec<u32> = (0..vocab.vocab_size() as u32)
                    .filter(|&t| tokensieve::mask::is_token_allowed(&mask, t))
                    .collect();
                assert!(
                    !allowed.is_empty(),
                    "{p:?} walk {w}: nothing allowed at step {step}"
                );
                let stop_ok = allowed.contains(&stop);
                let t = if stop_ok && (rng.gen_bool(0.3) || step > 40) {
                    stop
                } else {
                    let others: Vec<u32> = allowed.iter().copied().filter(|&t| t != stop).collect();
                    if others.is_empty() {
                        stop
                    } else {
                        others[rng.gen_range(0..others.len())]
                    }
                };
                assert!(m.accept_token(t), "{p:?}: allowed token {t} rejected");
                if t == stop {
                    break;
                }
                ids.push(t);
            }
            if !m.is_terminated() {
                continue;
            }
            let bytes = vocab.decode_bytes(&ids);
            let text = String::from_utf8(bytes)
                .unwrap_or_else(|e| panic!("{p:?} walk {w}: not UTF-8: {e}"));
            assert!(
                re.is_match(&text),
                "{p:?} walk {w}: {text:?} does not match"
            );
            done += 1;
        }
    }
    assert!(
        done >= patterns.len() * per_pattern / 2,
        "only {done} walks terminated"
    );
    eprintln!("{done} random walks matched the regex crate");
}

/// Random walks over a small multi-byte vocabulary (every construct), many more of them.
#[test]
fn random_walks_synthetic() {
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    for s in [
        "a", "b", "c", "d", "x", "y", "z", "ab", "cd", "abc", "1", "2", "12", "-", ".", " ", "\n",
        "[", "_", "é", "日", "本", "😀", "Ω", "\u{3000}", "a1", "1a", " a", "[a", "c\n",
    ] {
        tokens.push(s.as_bytes().to_vec());
    }
    // Every byte that can occur in UTF-8 alone too, so that no character is a dead end.
    for b in (0x80u8..=0xBF).chain(0xC2..=0xF4) {
        tokens.push(vec![b]);
    }
    tokens.push(b"<eos>".to_vec());
    let n = tokens.len() as u32;
    let vocab = Vocabulary::from_token_bytes(&tokens, &[n - 1], &[n - 1]).unwrap();
    let compiler = GrammarCompiler::new(vocab);
    let patterns = [
        r"(ab|)c(|d)",
        r"[a-c]+\d{1,3}",
        r"\w+\s\S*",
        r"\p{Han}+|\p{Greek}",
        r"(?:a(b(c)))*[^a]",
        r"a.b|.\n",
        r"(x|y){2,5}z?",
        r"[\[_]\D{0,4}",
        r"😀+|é{2}",
        r"^(ab|cd)*$",
    ];
    walks(compiler.vocabulary(), &compiler, &patterns, 40, 7, n - 1);
}

/// A random regex over a small alphabet, at most `depth` levels deep.
fn random_pattern(rng: &mut StdRng, depth: u32) -> String {
    random_pattern_over(rng, depth, ATOMS)
}

const ATOMS: &[&str] = &[
    "a", "b", "é", "😀", ".", "[ab]", "[^a]", r"\d", r"\s", r"\w", r"\S", r"\W", "[a-c1]",
    r"\p{L}", r"\n", "",
];

/// As [`random_pattern`], over the given atoms.
fn random_pattern_over(rng: &mut StdRng, depth: u32, atoms: &[&str]) -> String {
    if depth == 0 || rng.gen_bool(0.3) {
        return atoms[rng.gen_range(0..atoms.len())].to_string();
    }
    match rng.gen_range(0..4) {
        0 => {
            let n = rng.gen_range(2..4);
            (0..n)
                .map(|_| random_pattern_over(rng, depth - 1, atoms))
                .collect()
        }
        1 => {
            let n = rng.gen_range(2..4);
            let alts: Vec<String> = (0..n)
                .map(|_| random_pattern_over(rng, depth - 1, atoms))
                .collect();
            format!("(?:{})", alts.join("|"))
        }
        2 => {
            let ops = ["*", "+", "?", "{2}", "{0,2}", "{1,3}", "{2,}", "*?"];
            let op = ops[rng.gen_range(0..ops.len())];
            format!("({}){op}", random_pattern_over(rng, depth - 1, atoms))
        }
        _ => format!("({})", random_pattern_over(rng, depth - 1, atoms)),
    }
}

/// Differential test: for seeded random patterns and texts, the grammar accepts a text iff
/// the `regex` crate matches it with `^(?:pattern)$`.
#[test]
fn random_patterns_agree_with_regex_crate() {
    let c = byte_compiler();
    let mut rng = StdRng::seed_from_u64(99);
    let alphabet = ["a", "b", "1", " ", "\n", "é", "😀", "c", "_"];
    let (mut texts, mut matched) = (0, 0);
    for _ in 0..300 {
        let p = random_pattern(&mut rng, 4);
        let re = oracle(&p, false, false);
        let compiled = c.compile_regex(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        for _ in 0..60 {
            let len = rng.gen_range(0..7);
            let t: String = (0..len)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            let want = re.is_match(&t);
            assert_eq!(accepts(&compiled, &t), want, "{p:?} on {t:?}");
            texts += 1;
            matched += want as usize;
        }
    }
    eprintln!(
        "{texts} random (pattern, text) pairs agree with the regex crate ({matched} matches)"
    );
}

/// The same in unanchored mode, with `^` and `$` at random on the ends: the grammar accepts
/// a text iff the `regex` crate finds a match in it.
#[test]
fn random_unanchored_patterns_agree_with_regex_crate() {
    let c = byte_compiler();
    let opts = RegexOptions::new().unanchored(true);
    let mut rng = StdRng::seed_from_u64(5);
    let alphabet = ["a", "b", "1", " ", "\n", "é", "😀"];
    let mut texts = 0;
    for _ in 0..200 {
        let body = random_pattern(&mut rng, 3);
        let start = if rng.gen_bool(0.4) { "^" } else { "" };
        let end = if rng.gen_bool(0.4) { "$" } else { "" };
        let p = format!("{start}(?:{body}){end}");
        let re = oracle(&p, true, false);
        let compiled = c
            .compile_regex_with(&p, &opts)
            .unwrap_or_else(|e| panic!("{p:?}: {e}"));
        for _ in 0..40 {
            let len = rng.gen_range(0..7);
            let t: String = (0..len)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            assert_eq!(accepts(&compiled, &t), re.is_match(&t), "{p:?} on {t:?}");
            texts += 1;
        }
    }
    eprintln!("{texts} random unanchored (pattern, text) pairs agree with the regex crate");
}

/// Anchors anywhere: a pattern the front end accepts (its anchors trivially true) must agree
/// with the `regex` crate; the others must be `MisplacedAnchor`.
#[test]
fn random_anchor_placement_is_sound() {
    let c = byte_compiler();
    let mut atoms = ATOMS.to_vec();
    atoms.extend(["^", "$", r"\A", r"\z", "(?m:^)", "(?m:$)", "^", "$"]);
    let mut rng = StdRng::seed_from_u64(11);
    let alphabet = ["a", "b", "1", "\n", "é"];
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..600 {
        let p = random_pattern_over(&mut rng, 3, &atoms);
        let re = oracle(&p, false, false);
        match c.compile_regex(&p) {
            Ok(compiled) => {
                ok += 1;
                for _ in 0..30 {
                    let len = rng.gen_range(0..6);
                    let t: String = (0..len)
                        .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                        .collect();
                    assert_eq!(accepts(&compiled, &t), re.is_match(&t), "{p:?} on {t:?}");
                }
            }
            Err(CompileError::Regex(RegexError::MisplacedAnchor { .. })) => refused += 1,
            Err(e) => panic!("{p:?}: {e}"),
        }
    }
    eprintln!("anchors: {ok} patterns compiled and agree, {refused} refused as misplaced");
    assert!(ok > 200 && refused > 20, "{ok} compiled, {refused} refused");
}
