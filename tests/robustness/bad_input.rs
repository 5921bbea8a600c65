//! Bad input gives typed errors with clear messages, never a panic and never partial state:
//! malformed EBNF (with line:column), undefined rules, empty grammars, token terminals that
//! name no token or an id past the vocabulary, bad repetition bounds, invalid IR, and token
//! ids past the vocabulary at the matcher.
//!
//! Run with `cargo test --release --test robustness bad_input::`.

use crate::common;

use rand::{rngs::StdRng, Rng, SeedableRng};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use tokensieve::grammar::{EbnfErrorKind, Expr, Grammar, InvalidGrammar, Rule, RuleId};
use tokensieve::{CompileError, GrammarCompiler, GrammarMatcher, TokenRejection, Vocabulary};

/// Every byte as a token, some words, two special tokens and a stop token.
fn small_vocab() -> Vocabulary {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for w in ["ab", "abc", "hello", " world", "{\"", "\":", "<|", "|>"] {
        tokens.push(w.as_bytes().to_vec());
    }
    let sep = tokens.len() as u32;
    tokens.push(b"<|sep|>".to_vec());
    let eos = tokens.len() as u32;
    tokens.push(b"<|eos|>".to_vec());
    Vocabulary::from_token_bytes(&tokens, &[sep, eos], &[eos]).unwrap()
}

fn compiler() -> GrammarCompiler {
    GrammarCompiler::new(small_vocab())
}

/// Compiles `src`, turning a panic into a test failure that names the input.
fn compile(
    c: &GrammarCompiler,
    src: &str,
) -> Result<Arc<tokensieve::CompiledGrammar>, CompileError> {
    match catch_unwind(AssertUnwindSafe(|| c.compile_grammar(src))) {
        Ok(r) => r,
        Err(_) => panic!("compile_grammar panicked on {src:?}"),
    }
}

/// Expects an EBNF error: checks the kind, the position, and that the message starts with
/// `line:column:` and contains every string of `contains`.
fn expect_ebnf(
    c: &GrammarCompiler,
    src: &str,
    kind: impl Fn(&EbnfErrorKind) -> bool,
    at: (usize, usize),
    contains: &[&str],
) {
    let e = match compile(c, src) {
        Ok(_) => panic!("{src:?} compiled"),
        Err(e) => e,
    };
    let msg = e.to_string();
    let CompileError::Ebnf(ref ee) = e else {
        panic!("{src:?}: not an EBNF error: {e:?}");
    };
    assert!(
        kind(ee.kind()),
        "{src:?}: unexpected kind {:?} ({msg})",
        ee.kind()
    );
    assert_eq!((ee.line(), ee.column()), at, "{src:?}: position ({msg})");
    let prefix = format!("{}:{}:", at.0, at.1);
    assert!(
        msg.starts_with(&prefix),
        "{src:?}: message {msg:?} lacks {prefix}"
    );
    for s in contains {
        assert!(msg.contains(s), "{src:?}: message {msg:?} lacks {s:?}");
    }
}

#[test]
fn syntax_errors_carry_line_and_column() {
    let c = compiler();
    use EbnfErrorKind as K;
    expect_ebnf(
        &c,
        r#"root ::= "abc"#,
        |k| matches!(k, K::UnterminatedString),
        (1, 10),
        &["unterminated string"],
    );
    expect_ebnf(
        &c,
        "root ::= \"ab\ncd\"",
        |k| matches!(k, K::UnterminatedString),
        (1, 10),
        &[],
    );
    expect_ebnf(
        &c,
        r#"root ::= ( "a" | "b""#,
        |k| matches!(k, K::UnclosedGroup { .. }),
        (1, 10),
        &["("],
    );
    expect_ebnf(
        &c,
        r#"root ::= "a" )"#,
        |k| matches!(k, K::UnmatchedParen),
        (1, 14),
        &[")"],
    );
    expect_ebnf(
        &c,
        r#"root ::= * "a""#,
        |k| matches!(k, K::NothingToRepeat { op: '*' }),
        (1, 10),
        &["*"],
    );
    expect_ebnf(
        &c,
        r#"root ::= "\q""#,
        |k| matches!(k, K::InvalidEscape { escape } if escape == "\\q"),
        (1, 11),
        &["\\q"],
    );
    expect_ebnf(
        &c,
        r#"root ::= "\x4""#,
        |k| matches!(k, K::BadHexEscape { digits: 2, .. }),
        (1, 11),
        &["hex"],
    );
    expect_ebnf(
        &c,
        r#"root ::= "\U00110000""#,
        |k| matches!(k, K::InvalidCodePoint { code: 0x110000, .. }),
        (1, 11),
        &["110000"],
    );
    expect_ebnf(
        &c,
        r#"root ::= "\uD800""#,
        |k| matches!(k, K::InvalidCodePoint { code: 0xD800, .. }),
        (1, 11),
        &["D800"],
    );
    expect_ebnf(
        &c,
        "root ::= [a-",
        |k| matches!(k, K::UnterminatedClass),
        (1, 10),
        &["]"],
    );
    expect_ebnf(
        &c,
        "root ::= <|sep",
        |k| matches!(k, K::UnterminatedToken),
        (1, 10),
        &[">"],
    );
    expect_ebnf(
        &c,
        "root ::= <>",
        |k| matches!(k, K::EmptyToken),
        (1, 10),
        &["<>"],
    );
    expect_ebnf(
        &c,
        "root ::= <[12x]>",
        |k| matches!(k, K::InvalidTokenId { text } if text == "<[12x]>"),
        (1, 10),
        &["<[12x]>"],
    );
    expect_ebnf(
        &c,
        "root ::= <[99999999999]>",
        |k| matches!(k, K::InvalidTokenId { .. }),
        (1, 10),
        &["99999999999"],
    );
    // Errors on later lines, after comments and multi-byte characters.
    expect_ebnf(
        &c,
        "# comment\nroot ::= a b\na ::= \"日本\" # 語\nb ::= [z-a]\n",
        |k| matches!(k, K::ReversedRange { low, high } if *low == 'z' as u32 && *high == 'a' as u32),
        (4, 8),
        &["reversed"],
    );
    expect_ebnf(
        &c,
        "root ::= \"é\" \"\\q\"",
        |k| matches!(k, K::InvalidEscape { .. }),
        (1, 15),
        &[],
    );
    expect_ebnf(
        &c,
        "root := \"a\"",
        |k| matches!(k, K::ExpectedDefine { name, .. } if name == "root"),
        (1, 6),
        &["root", "::="],
    );
    expect_ebnf(
        &c,
        "root ::= \"a\"\n\"b\" ::= \"c\"",
        |k| {
            matches!(
                k,
                K::UnexpectedChar { .. } | K::ExpectedRuleName { .. } | K::ExpectedDefine { .. }
            )
        },
        (2, 5),
        &[],
    );
}

#[test]
fn bad_repetition_bounds() {
    let c = compiler();
    use EbnfErrorKind as K;
    expect_ebnf(
        &c,
        r#"root ::= "a"{3,2}"#,
        |k| matches!(k, K::BadRepeat { min: 3, max: 2 }),
        (1, 13),
        &["{3,2}", "max < min"],
    );
    for (src, col) in [
        // Reported at the offending character (or the end of the input).
        (r#"root ::= "a"{}"#, 14),
        (r#"root ::= "a"{x}"#, 14),
        (r#"root ::= "a"{1,2"#, 17),
        (r#"root ::= "a"{-1}"#, 14),
        (r#"root ::= "a"{1,,2}"#, 16),
    ] {
        expect_ebnf(
            &c,
            src,
            |k| matches!(k, K::BadRepeatSyntax { .. }),
            (1, col),
            &["repetition"],
        );
    }
    expect_ebnf(
        &c,
        r#"root ::= [a-z]{2000001}"#,
        |k| matches!(k, K::RepeatTooLarge { value, .. } if value == "2000001"),
        (1, 16),
        &[
            "2000001",
            &tokensieve::grammar::MAX_REPEAT_BOUND.to_string(),
        ],
    );
    expect_ebnf(
        &c,
        r#"root ::= [a-z]{1,99999999999999}"#,
        |k| matches!(k, K::RepeatTooLarge { .. }),
        (1, 18),
        &["99999999999999"],
    );
    // On a later line.
    expect_ebnf(
        &c,
        "root ::= x\nx ::= \"a\"{5,4}",
        |k| matches!(k, K::BadRepeat { min: 5, max: 4 }),
        (2, 10),
        &["{5,4}"],
    );
    // The largest allowed bound compiles (compactly).
    let g = compile(&c, r#"root ::= "a"{1000000}"#).unwrap();
    assert!(g.node_count() < 10_000, "{} nodes", g.node_count());
}

#[test]
fn undefined_missing_duplicate_and_empty() {
    let c = compiler();
    use EbnfErrorKind as K;
    expect_ebnf(
        &c,
        "root ::= greeting \" \" name\ngreeting ::= \"hi\"\n",
        |k| matches!(k, K::UndefinedRule { name } if name == "name"),
        (1, 23),
        &["undefined rule", "`name`"],
    );
    expect_ebnf(
        &c,
        "root ::= a\na ::= \"x\" | b_2\n",
        |k| matches!(k, K::UndefinedRule { name } if name == "b_2"),
        (2, 13),
        &["b_2"],
    );
    for src in ["", "   \n\t\n", "# only a comment\n# and another"] {
        expect_ebnf(
            &c,
            src,
            |k| matches!(k, K::EmptyGrammar),
            (1, 1),
            &["no rules"],
        );
    }
    expect_ebnf(
        &c,
        "start ::= \"a\"",
        |k| matches!(k, K::MissingRoot { name } if name == "root"),
        (1, 1),
        &["root"],
    );
    expect_ebnf(
        &c,
        "root ::= a\na ::= \"x\"\na ::= \"y\"",
        |k| matches!(k, K::DuplicateRule { name, first_line: 2, first_column: 1 } if name == "a"),
        (3, 1),
        &["`a`", "defined twice", "2:1"],
    );
    // The same through another root name.
    let e = c
        .compile_grammar_with_root("root ::= \"a\"", "main")
        .unwrap_err();
    assert!(
        matches!(&e, CompileError::Ebnf(ee) if matches!(ee.kind(), K::MissingRoot { name } if name == "main")),
        "{e:?}"
    );
    assert!(e.to_string().contains("main"), "{e}");
}

#[test]
fn nesting_limits_do_not_overflow_the_stack() {
    let c = compiler();
    // Redundant parentheses add no depth: this parses.
    let deep_parens = format!("root ::= {}\"a\"{}", "(".repeat(20_000), ")".repeat(20_000));
    compile(&c, &deep_parens).unwrap();
    // Real nesting past the limit is a typed error.
    let n = tokensieve::grammar::MAX_NESTING_DEPTH + 10;
    let deep = format!("root ::= {}\"a\"{}", "(\"a\" ".repeat(n), ")".repeat(n));
    let e = compile(&c, &deep).unwrap_err();
    assert!(
        matches!(&e, CompileError::Ebnf(ee) if matches!(ee.kind(), EbnfErrorKind::TooDeep { .. })),
        "{e:?}"
    );
    assert!(e.to_string().contains("nested"), "{e}");
    // Unclosed groups by the thousand.
    let e = compile(&c, &format!("root ::= {}", "(".repeat(50_000))).unwrap_err();
    assert!(matches!(&e, CompileError::Ebnf(_)), "{e:?}");
}

#[test]
fn token_terminals_naming_no_token() {
    let c = compiler();
    let size = c.vocabulary().tokenizer_size();
    // An id past the vocabulary.
    let e = compile(&c, "root ::= \"a\" <[999999]>").unwrap_err();
    match &e {
        CompileError::TokenOutOfRange { rule, id, size: s } => {
            assert_eq!((rule.as_str(), *id, *s), ("root", 999_999, size));
        }
        other => panic!("{other:?}"),
    }
    let msg = e.to_string();
    for s in ["root", "999999", &size.to_string()] {
        assert!(msg.contains(s), "{msg:?} lacks {s:?}");
    }
    // The first id past the end, in a non-root rule.
    let e = compile(&c, &format!("root ::= x\nx ::= <[{size}]>")).unwrap_err();
    assert!(
        matches!(&e, CompileError::TokenOutOfRange { rule, id, .. } if rule == "x" && *id as usize == size),
        "{e:?}"
    );
    // The last id is fine.
    compile(&c, &format!("root ::= <[{}]>", size - 1)).unwrap();
    // An unknown token text, named with its rule.
    let e = compile(&c, "root ::= \"a\" tail\ntail ::= \"b\" | <|nope|>").unwrap_err();
    match &e {
        CompileError::UnknownToken { rule, text } => {
            assert_eq!((rule.as_str(), text.as_str()), ("tail", "<|nope|>"));
        }
        other => panic!("{other:?}"),
    }
    let msg = e.to_string();
    assert!(msg.contains("tail") && msg.contains("<|nope|>"), "{msg:?}");
    // Known ones compile.
    compile(&c, "root ::= \"a\" <|sep|> <|eos|>").unwrap();
}

#[cfg(feature = "hf")]
#[test]
fn token_terminals_on_a_real_vocabulary() {
    let Some(path) = common::tokenizer_path("qwen3") else {
        return;
    };
    let vocab = Vocabulary::from_tokenizer_json(&path)
        .unwrap()
        .with_vocab_size(151_936)
        .unwrap();
    let c = GrammarCompiler::new(vocab).with_precompute(tokensieve::Precompute::Lazy);
    let e = compile(&c, "root ::= \"a\" <[999999]>").unwrap_err();
    assert!(
        matches!(&e, CompileError::TokenOutOfRange { rule, id: 999_999, size: 151_669 } if rule == "root"),
        "{e:?}"
    );
    // A padding id (below the logits width, past the tokenizer) is not a token either.
    let e = compile(&c, "root ::= <[151700]>").unwrap_err();
    assert!(
        matches!(
            &e,
            CompileError::TokenOutOfRange {
                id: 151_700,
                size: 151_669,
                ..
            }
        ),
        "{e:?}"
    );
    let e = compile(&c, "root ::= <|im_end|> <|nope|>").unwrap_err();
    assert!(
        matches!(&e, CompileError::UnknownToken { rule, text } if rule == "root" && text == "<|nope|>"),
        "{e:?}"
    );
    // Near misses of a real special token are unknown, not silently matched.
    for text in ["<|im_end |>", "<|IM_END|>", "<im_end>"] {
        let e = compile(&c, &format!("root ::= {text}")).unwrap_err();
        assert!(
            matches!(&e, CompileError::UnknownToken { .. }),
            "{text}: {e:?}"
        );
        assert!(e.to_string().contains(text), "{e}");
    }
    compile(&c, "root ::= <|im_start|> \"x\" <|im_end|> <[151668]>").unwrap();
}

fn rule(name: &str, body: Expr) -> Rule {
    Rule {
        name: name.into(),
        body,
    }
}

#[test]
fn invalid_ir_is_a_typed_error() {
    let c = compiler();
    type Check = fn(&InvalidGrammar) -> bool;
    let bad: Vec<(Grammar, Check)> = vec![
        (
            Grammar {
                rules: vec![],
                root: RuleId(0),
            },
            |e| matches!(e, InvalidGrammar::Empty),
        ),
        (
            Grammar {
                rules: vec![rule("root", Expr::Rule(RuleId(5)))],
                root: RuleId(0),
            },
            |e| matches!(e, InvalidGrammar::DanglingRule { rule, id: 5, count: 1 } if rule == "root"),
        ),
        (
            Grammar {
                rules: vec![rule("root", Expr::Bytes(b"a".to_vec()))],
                root: RuleId(3),
            },
            |e| matches!(e, InvalidGrammar::DanglingRule { id: 3, .. }),
        ),
        (
            Grammar {
                rules: vec![
                    rule("root", Expr::Rule(RuleId(1))),
                    rule(
                        "r",
                        Expr::Repeat {
                            expr: Box::new(Expr::Bytes(b"a".to_vec())),
                            min: 3,
                            max: Some(2),
                        },
                    ),
                ],
                root: RuleId(0),
            },
            |e| matches!(e, InvalidGrammar::BadRepeat { rule, min: 3, max: 2 } if rule == "r"),
        ),
        (
            Grammar {
                rules: vec![rule("root", Expr::Empty), rule("root", Expr::Empty)],
                root: RuleId(0),
            },
            |e| matches!(e, InvalidGrammar::DuplicateRule(n) if n == "root"),
        ),
    ];
    for (g, check) in bad {
        let r = catch_unwind(AssertUnwindSafe(|| c.compile_ir(&g)))
            .unwrap_or_else(|_| panic!("compile_ir panicked on {g:?}"));
        match r {
            Err(CompileError::Invalid(ref e)) => {
                assert!(check(e), "{g:?}: {e:?}");
                assert!(!r.as_ref().unwrap_err().to_string().is_empty());
            }
            Err(e) => panic!("{g:?}: {e:?}"),
            Ok(_) => panic!("{g:?} compiled"),
        }
    }
}

#[test]
fn bad_token_ids_at_the_matcher() {
    let c = compiler();
    let vocab = c.vocabulary().clone();
    let g = compile(&c, "root ::= \"ab\" [0-9]* <|sep|>?").unwrap();
    let mut m = GrammarMatcher::new(g);
    for t in [u32::MAX, u32::MAX - 1, vocab.vocab_size() as u32, 1 << 31] {
        assert!(!m.accept_token(t));
        let e = m.try_accept_token(t).unwrap_err();
        assert_eq!(
            e,
            TokenRejection::OutOfRange {
                token: t,
                vocab_size: vocab.vocab_size()
            }
        );
        assert!(e.to_string().contains(&t.to_string()), "{e}");
    }
    // Other typed reasons.
    let eos = vocab.stop_tokens()[0];
    let sep = vocab.special_token_id("<|sep|>").unwrap();
    assert_eq!(
        m.try_accept_token(eos),
        Err(TokenRejection::StopNotAllowed { token: eos })
    );
    assert_eq!(
        m.try_accept_token(sep),
        Err(TokenRejection::SpecialNotAllowed { token: sep })
    );
    assert_eq!(
        m.try_accept_token(b'x' as u32),
        Err(TokenRejection::Bytes {
            token: b'x' as u32,
            offset: 0,
            byte: b'x'
        })
    );
    assert_eq!(m.num_accepted_steps(), 0);
    assert!(m.accept_string("ab1"));
    assert_eq!(
        m.try_accept_bytes(b"2x"),
        Err(TokenRejection::Bytes {
            token: u32::MAX,
            offset: 1,
            byte: b'x'
        })
    );
    assert!(!m.accept_string("\u{0}"));
    assert_eq!(m.num_accepted_steps(), 1);
    assert!(m.accept_token(sep));
    assert!(m.accept_token(eos));
    assert_eq!(
        m.try_accept_token(u32::MAX),
        Err(TokenRejection::Terminated { token: u32::MAX })
    );
    assert!(!m.accept_string("1"));
}

/// Truncations and random mutations of valid grammars: compile returns Ok or a typed error
/// (with a position inside the text for syntax errors), never a panic; and the compiler
/// stays usable after every error.
#[test]
fn mangled_grammars_never_panic() {
    let c = compiler().with_precompute(tokensieve::Precompute::Lazy);
    let sources = [
        tokensieve::grammar::JSON_EBNF.to_string(),
        "# kv\nroot ::= (key \"=\" value \"\\n\")+ <|sep|>?\nkey ::= [A-Za-z_][A-Za-z0-9_]{0,30}\nvalue ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [nt\"\\\\])* \"\\\"\" | [0-9]{1,3} | <[5]>\n"
            .to_string(),
        "root ::= expr\nexpr ::= expr (\"+\" | \"-\") term | term\nterm ::= \"(\" expr \")\" | [\\u0030-\\u0039]+ | \"\\U0001F600\"?\n".to_string(),
    ];
    let mut rng = StdRng::seed_from_u64(99);
    let alphabet: Vec<char> = "()[]{}<>|\"\\:=*+?^-,.#\n 0123456789azéx日\u{1F600}"
        .chars()
        .collect();
    let mut errors = 0;
    let mut oks = 0;
    let mut check = |src: &str| {
        match compile(&c, src) {
            Ok(g) => {
                oks += 1;
                // The result is usable.
                let mut m = GrammarMatcher::new(g);
                let mut mask = vec![0u32; m.bitmask_words()];
                m.fill_next_token_bitmask(&mut mask).unwrap();
            }
            Err(e) => {
                errors += 1;
                let msg = e.to_string();
                assert!(!msg.is_empty());
                if let CompileError::Ebnf(ee) = &e {
                    let lines = src.split('\n').count();
                    assert!(ee.line() >= 1 && ee.line() <= lines, "{src:?}: {msg}");
                    let line_len = src.split('\n').nth(ee.line() - 1).unwrap().chars().count();
                    assert!(
                        ee.column() >= 1 && ee.column() <= line_len + 1,
                        "{src:?}: {msg} (line has {line_len} chars)"
                    );
                    assert!(
                        msg.starts_with(&format!("{}:{}:", ee.line(), ee.column())),
                        "{msg}"
                    );
                }
            }
        }
    };
    for src in &sources {
        // Every truncation at a character boundary.
        for (i, _) in src.char_indices() {
            check(&src[..i]);
        }
        // Random edits: delete, insert or replace a character, 1-3 times.
        let chars: Vec<char> = src.chars().collect();
        for _ in 0..400 {
            let mut s = chars.clone();
            for _ in 0..rng.gen_range(1..=3) {
                let i = rng.gen_range(0..s.len());
                match rng.gen_range(0..3) {
                    0 => {
                        s.remove(i);
                    }
                    1 => s.insert(i, alphabet[rng.gen_range(0..alphabet.len())]),
                    _ => s[i] = alphabet[rng.gen_range(0..alphabet.len())],
                }
            }
            check(&s.into_iter().collect::<String>());
        }
    }
    eprintln!("{oks} compiled, {errors} typed errors");
    assert!(errors > 100 && oks > 10);
    // Still usable afterwards.
    let g = compile(&c, "root ::= \"ab\"").unwrap();
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_string("ab"));
}
