//! No recursion on input depth: deeply nested inputs to every front end, to the grammar IR
//! and to the matcher give a correct answer or a typed error, never a stack overflow.
//!
//! Every test body runs on a thread with a 2 MiB stack, the default of a spawned Rust thread
//! (and of the test harness): what a server's worker thread has. The stack is deliberately
//! not enlarged, so a recursion on input depth shows up here as an abort.
//!
//! Run with `cargo test --release --test robustness deep_nesting::`.

use serde_json::{Map, Value};
use tokensieve::grammar::{EbnfErrorKind, Expr, Grammar, InvalidGrammar, Rule, RuleId};
use tokensieve::{
    CompileError, GrammarCompiler, GrammarMatcher, JsonSchemaError, JsonSchemaOptions, RegexError,
    Vocabulary,
};

/// The default stack of a spawned thread.
const STACK: usize = 2 << 20;

/// Runs `f` on a fresh thread with a 2 MiB stack and returns its result (a panic in `f`
/// fails the test; a stack overflow aborts the test binary, which fails it too).
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// Every byte as a token, a few JSON words, and a stop token.
fn vocab() -> Vocabulary {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for w in ["[[", "]]", "[]", "{\"", "\":", "null", "true", "a\""] {
        tokens.push(w.as_bytes().to_vec());
    }
    let eos = tokens.len() as u32;
    tokens.push(b"<eos>".to_vec());
    Vocabulary::from_token_bytes(&tokens, &[eos], &[eos]).unwrap()
}

fn eos(c: &GrammarCompiler) -> u32 {
    c.vocabulary().vocab_size() as u32 - 1
}

fn nested(depth: usize, open: &str, inner: &str, close: &str) -> String {
    let mut s = String::with_capacity(depth * (open.len() + close.len()) + inner.len());
    for _ in 0..depth {
        s.push_str(open);
    }
    s.push_str(inner);
    for _ in 0..depth {
        s.push_str(close);
    }
    s
}

#[test]
fn ebnf_60000_nested_groups_compile_and_match() {
    on_small_stack(|| {
        let c = GrammarCompiler::new(vocab());
        let src = format!("root ::= {}", nested(60_000, "(", "\"a\"", ")"));
        let g = c.compile_grammar(&src).unwrap();
        let mut m = GrammarMatcher::new(g.clone());
        assert!(!m.accept_string("b"));
        assert!(m.accept_string("a"));
        assert!(m.accept_token(eos(&c)));
        assert!(m.is_terminated());
        // The same nesting with a repetition at every level is a deep tree: a typed error.
        let src = format!("root ::= {}", nested(60_000, "(", "\"a\"", ")*"));
        let e = c.compile_grammar(&src).unwrap_err();
        let CompileError::Ebnf(ee) = &e else {
            panic!("not an EBNF error: {e:?}")
        };
        assert!(matches!(ee.kind(), EbnfErrorKind::TooDeep { limit: 1000 }));
        assert!(e.to_string().contains("1000"), "{e}");
        // And with a sequence at every level.
        let src = format!("root ::= {}", nested(60_000, "(\"a\" ", "\"a\"", ")"));
        assert!(matches!(
            c.compile_grammar(&src),
            Err(CompileError::Ebnf(ee)) if matches!(ee.kind(), EbnfErrorKind::TooDeep { .. })
        ));
    });
}

#[test]
fn ebnf_deep_rule_chain_and_deep_recursion_compile() {
    on_small_stack(|| {
        let c = GrammarCompiler::new(vocab());
        // 20,000 rules, each calling the next: depth through rules, not expressions.
        let mut src = String::from("root ::= r0\n");
        for i in 0..20_000 {
            src.push_str(&format!("r{i} ::= \"a\" r{}\n", i + 1));
        }
        src.push_str("r20000 ::= \"b\"\n");
        let g = c.compile_grammar(&src).unwrap();
        let mut m = GrammarMatcher::new(g);
        assert!(m.accept_string(&"a".repeat(20_000)));
        assert!(!m.clone().accept_string("a"));
        assert!(m.accept_string("b"));
        assert!(m.accept_token(eos(&c)));
    });
}

/// The built-in JSON grammar, an array nested 100,000 levels: accepted, byte by byte and
/// token by token, with masks along the way; one bracket too many or too few is refused.
#[test]
fn json_document_nested_100000_levels() {
    on_small_stack(|| {
        const DEPTH: usize = 100_000;
        let c = GrammarCompiler::new(vocab());
        let json = c.compile_builtin_json().unwrap();
        let stop = eos(&c);
        let doc = nested(DEPTH, "[", "", "]");

        // accept_string, all at once.
        let mut m = GrammarMatcher::new(json.clone());
        assert!(m.accept_string(&doc));
        assert!(m.is_completed());
        assert!(!m.clone().accept_string("]"));
        assert!(m.accept_token(stop));
        assert!(m.is_terminated());
        drop(m);

        // accept_token, one `[[` / `]]` token at a time, with masks.
        let open2 = 256u32; // "[["
        let close2 = 257u32; // "]]"
        let mut m = GrammarMatcher::new(json.clone());
        let mut mask = vec![0u32; m.bitmask_words()];
        let allowed = |mask: &[u32], t: u32| mask[(t / 32) as usize] >> (t % 32) & 1 == 1;
        for i in 0..DEPTH / 2 {
            if i % 5_000 == 0 {
                m.fill_next_token_bitmask(&mut mask).unwrap();
                assert!(allowed(&mask, open2));
                assert!(!allowed(&mask, stop));
            }
            assert!(m.accept_token(open2), "open {i}");
        }
        m.fill_next_token_bitmask(&mut mask).unwrap();
        assert!(allowed(&mask, close2));
        assert!(!allowed(&mask, stop));
        // Nothing is forced after `[` (a value or `]` may follow).
        assert_eq!(m.find_jump_forward_string(), "");
        for i in 0..DEPTH / 2 {
            if i % 5_000 == 0 {
                m.fill_next_token_bitmask(&mut mask).unwrap();
                assert!(allowed(&mask, close2));
                assert!(!allowed(&mask, stop));
            }
            assert!(m.accept_token(close2), "close {i}");
        }
        m.fill_next_token_bitmask(&mut mask).unwrap();
        assert!(allowed(&mask, stop));
        assert!(!allowed(&mask, close2));
        assert!(!allowed(&mask, b']' as u32));
        // Roll the whole document back, then forward again.
        m.rollback(DEPTH / 2).unwrap();
        assert!(!m.is_completed());
        assert!(m.accept_string(&"]".repeat(DEPTH)));
        assert!(m.accept_token(stop));
        drop(m);

        // One closing bracket short: not complete; one too many: refused.
        let mut m = GrammarMatcher::new(json.clone());
        assert!(m.accept_string(&doc[..doc.len() - 1]));
        assert!(!m.is_completed());
        assert!(!m.accept_token(stop));
        let mut m = GrammarMatcher::new(json);
        assert!(m.accept_string(&doc));
        assert!(!m.accept_string("]"));
        // Objects nested as deep.
        let c2 = GrammarCompiler::new(vocab());
        let json = c2.compile_builtin_json().unwrap();
        let doc = nested(DEPTH, "{\"a\":", "1", "}");
        let mut m = GrammarMatcher::new(json);
        assert!(m.accept_string(&doc));
        assert!(m.accept_token(stop));
    });
}

#[test]
fn regex_10000_nested_groups_is_a_typed_error() {
    on_small_stack(|| {
        let c = GrammarCompiler::new(vocab());
        for pattern in [
            nested(10_000, "(", "a", ")"),
            nested(10_000, "(?:", "a", ")"),
            nested(10_000, "(", "a", ")*"),
            nested(10_000, "(a|", "b", ")"),
            nested(10_000, "[", "a", "]"),
        ] {
            let e = c.compile_regex(&pattern).unwrap_err();
            let CompileError::Regex(RegexError::TooDeep { limit, .. }) = &e else {
                panic!("{}: not TooDeep: {e:?}", &pattern[..20]);
            };
            assert_eq!(*limit, 250);
            assert!(e.to_string().contains("250"), "{e}");
        }
        // Long but flat patterns are fine.
        let g = c.compile_regex(&"(a)".repeat(10_000)).unwrap();
        let mut m = GrammarMatcher::new(g);
        assert!(m.accept_string(&"a".repeat(10_000)));
        assert!(m.accept_token(eos(&c)));
    });
}

/// A hand-built expression `depth` levels deep: `Seq["a", Seq["a", ... "a"]]`, built
/// without recursion.
fn deep_expr(depth: usize) -> Expr {
    let mut e = Expr::Bytes(b"a".to_vec());
    for _ in 1..depth {
        e = Expr::Seq(vec![Expr::Bytes(b"a".to_vec()), e]);
    }
    e
}

#[test]
fn deep_hand_built_ir_is_refused_and_dropped_without_recursion() {
    on_small_stack(|| {
        let c = GrammarCompiler::new(vocab());
        let g = Grammar {
            rules: vec![Rule {
                name: "root".into(),
                body: deep_expr(200_000),
            }],
            root: RuleId(0),
        };
        assert_eq!(
            g.validate(),
            Err(InvalidGrammar::TooDeep {
                rule: "root".into(),
                limit: Grammar::MAX_DEPTH
            })
        );
        let e = c.compile_ir(&g).unwrap_err();
        assert!(matches!(
            e,
            CompileError::Invalid(InvalidGrammar::TooDeep { .. })
        ));
        assert!(e.to_string().contains("1000"), "{e}");
        // Printing it as EBNF does not recurse either.
        let text = g.to_string();
        assert_eq!(text.matches("\"a\"").count(), 200_000);
        // Dropping it (the grammar goes out of scope here) must not recurse.
        drop(g);
        // A standalone deep expression (no rule around it) drops flat on request.
        deep_expr(200_000).into_flat_drop();
        // Nor a deep repetition or choice inside a rule.
        let mut e = Expr::Bytes(b"a".to_vec());
        for i in 0..200_000u32 {
            e = if i % 2 == 0 {
                Expr::Repeat {
                    expr: Box::new(e),
                    min: 0,
                    max: Some(1),
                }
            } else {
                Expr::Choice(vec![e, Expr::Empty])
            };
        }
        drop(Rule {
            name: "r".into(),
            body: e,
        });
    });
}

#[test]
fn ir_at_the_depth_limit_compiles() {
    on_small_stack(|| {
        let c = GrammarCompiler::new(vocab());
        let g = Grammar {
            rules: vec![Rule {
                name: "root".into(),
                body: deep_expr(Grammar::MAX_DEPTH),
            }],
            root: RuleId(0),
        };
        let compiled = c.compile_ir(&g).unwrap();
        let mut m = GrammarMatcher::new(compiled);
        assert!(m.accept_string(&"a".repeat(Grammar::MAX_DEPTH)));
        assert!(m.accept_token(eos(&c)));
        // Nested repetitions at the limit (the lowering and the NFA builder see them all).
        let mut e = Expr::Bytes(b"ab".to_vec());
        for i in 1..Grammar::MAX_DEPTH {
            e = if i % 2 == 0 {
                Expr::Repeat {
                    expr: Box::new(e),
                    min: 1,
                    max: Some(2),
                }
            } else {
                Expr::Choice(vec![e, Expr::Bytes(b"c".to_vec())])
            };
        }
        let g = Grammar {
            rules: vec![Rule {
                name: "root".into(),
                body: e,
            }],
            root: RuleId(0),
        };
        let compiled = c.compile_ir(&g).unwrap();
        let mut m = GrammarMatcher::new(compiled);
        assert!(m.accept_string("abab"));
        assert!(m.accept_token(eos(&c)));

        // A rule at the depth limit whose innermost leaf calls a small rule that is itself
        // 59 deep: inlining puts that rule at the bottom, about 1,060 levels down, and every
        // later pass (lowering, NFA construction) still runs on a 2 MiB stack.
        let mut root = Expr::Rule(RuleId(1));
        for _ in 1..Grammar::MAX_DEPTH {
            root = Expr::Seq(vec![Expr::Bytes(b"a".to_vec()), root]);
        }
        let mut small = Expr::Bytes(b"z".to_vec());
        for _ in 1..30 {
            small = Expr::Repeat {
                expr: Box::new(Expr::Choice(vec![small])),
                min: 1,
                max: Some(1),
            };
        }
        let g = Grammar {
            rules: vec![
                Rule {
                    name: "root".into(),
                    body: root,
                },
                Rule {
                    name: "small".into(),
                    body: small,
                },
            ],
            root: RuleId(0),
        };
        let compiled = c.compile_ir(&g).unwrap();
        let mut m = GrammarMatcher::new(compiled);
        assert!(m.accept_string(&"a".repeat(Grammar::MAX_DEPTH - 1)));
        assert!(!m.clone().accept_string("a"));
        assert!(m.accept_string("z"));
        assert!(m.accept_token(eos(&c)));
    });
}

/// `{"items": {"items": ... {} ...}}`, 10,000 levels: an error or a grammar, no overflow.
#[test]
fn json_schema_nested_10000_levels() {
    on_small_stack(|| {
        let c = GrammarCompiler::new(vocab());
        let schema = nested(10_000, "{\"items\": ", "{}", "}");
        match c.compile_json_schema(schema.as_str(), &JsonSchemaOptions::default()) {
            Ok(g) => {
                let mut m = GrammarMatcher::new(g);
                assert!(m.accept_string(&nested(10_000, "[", "", "]")));
            }
            Err(e) => {
                // serde_json's recursion limit (128) refuses the text first.
                assert!(
                    matches!(
                        e,
                        tokensieve::CompileError::JsonSchema(JsonSchemaError::NotJson(_))
                    ),
                    "{e:?}"
                );
                assert!(e.to_string().contains("recursion limit"), "{e}");
            }
        }
        let schema = nested(10_000, "{\"properties\": {\"a\": ", "{}", "}}");
        assert!(c
            .compile_json_schema(schema.as_str(), &JsonSchemaOptions::default())
            .is_err());

        // The same schema as a `serde_json::Value` (built without the recursion limit): the
        // front end's own depth limit refuses it with a typed error naming the pointer.
        let mut v = Value::Object(Map::new());
        for _ in 0..10_000 {
            let mut m = Map::new();
            m.insert("items".into(), v);
            v = Value::Object(m);
        }
        let e = c
            .compile_json_schema(&v, &JsonSchemaOptions::default())
            .unwrap_err();
        assert!(
            e.to_string().contains("#/items/items/items"),
            "{}",
            &e.to_string()[..200.min(e.to_string().len())]
        );
        // serde_json's own drop recurses on depth: take the value apart by hand.
        let mut stack = vec![v];
        while let Some(v) = stack.pop() {
            if let Value::Object(m) = v {
                stack.extend(m.into_iter().map(|(_, x)| x));
            }
        }
    });
}
