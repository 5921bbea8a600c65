//! Engine behaviour on grammars built as IR, over a small synthetic vocabulary, checked
//! against an independent recogniser (`tests/soundness/oracle.rs`): mask ⇔ accept at every step of
//! random walks, texts accepted at termination belong to the language, rollback and fork.

use crate::oracle;

use oracle::{Oracle, Sym};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;
use tokensieve::grammar::{CharClass, Expr, Grammar, Rule, RuleId, TokenRef};
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, Vocabulary};

const EOS: &[u8] = b"<eos>";
const SPECIAL: &[u8] = b"<|sep|>";

/// Every string of 1–3 symbols over `alphabet`, plus multi-byte characters, then the
/// special separator token and the stop token (last two ids).
fn synthetic_vocab(alphabet: &[&str]) -> Vocabulary {
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    for a in alphabet {
        tokens.push(a.as_bytes().to_vec());
        for b in alphabet {
            tokens.push(format!("{a}{b}").into_bytes());
            for c in alphabet {
                tokens.push(format!("{a}{b}{c}").into_bytes());
            }
        }
    }
    // Partial UTF-8: first byte of 'é' and of '😀' alone, and their continuations.
    tokens.push(vec![0xC3]);
    tokens.push(vec![0xA9]);
    tokens.push(vec![0xF0, 0x9F]);
    tokens.push(vec![0x98, 0x80]);
    tokens.push(b"\xF0\x9F\x98\x80".to_vec());
    tokens.push(SPECIAL.to_vec());
    tokens.push(EOS.to_vec());
    let n = tokens.len() as u32;
    Vocabulary::from_token_bytes(&tokens, &[n - 2, n - 1], &[n - 1]).unwrap()
}

fn lit(s: &str) -> Expr {
    Expr::Bytes(s.as_bytes().to_vec())
}

fn r(i: u32) -> Expr {
    Expr::Rule(RuleId(i))
}

fn class(ranges: &[(char, char)], negated: bool) -> Expr {
    Expr::Class(CharClass {
        negated,
        ranges: ranges.iter().map(|&(a, b)| (a as u32, b as u32)).collect(),
    })
}

fn rep(e: Expr, min: u32, max: Option<u32>) -> Expr {
    Expr::Repeat {
        expr: Box::new(e),
        min,
        max,
    }
}

fn grammar(rules: Vec<(&str, Expr)>) -> Grammar {
    Grammar {
        rules: rules
            .into_iter()
            .map(|(n, b)| Rule {
                name: n.to_string(),
                body: b,
            })
            .collect(),
        root: RuleId(0),
    }
}

/// Checks mask ⇔ accept for every token at the matcher's state; returns the allowed ids.
fn check_invariant(m: &GrammarMatcher, vocab: &Vocabulary) -> Vec<u32> {
    let mut mask = vec![0u32; vocab.bitmask_words()];
    let mut fork = m.clone();
    fork.fill_next_token_bitmask(&mut mask).unwrap();
    let mut allowed = Vec::new();
    for t in 0..vocab.vocab_size() as u32 {
        let bit = mask[(t / 32) as usize] >> (t % 32) & 1 == 1;
        let ok = fork.accept_token(t);
        assert_eq!(
            bit,
            ok,
            "token {t} {:?}: mask bit {bit}, accept_token {ok}",
            String::from_utf8_lossy(vocab.token_bytes(t).unwrap_or(b"?"))
        );
        if ok {
            allowed.push(t);
            fork.rollback(1).unwrap();
        }
    }
    allowed
}

fn to_syms(vocab: &Vocabulary, ids: &[u32]) -> Vec<Sym> {
    let mut out = Vec::new();
    for &id in ids {
        if vocab.is_special(id) {
            out.push(Sym::Token(id));
        } else {
            out.extend(vocab.token_bytes(id).unwrap().iter().map(|&b| Sym::Byte(b)));
        }
    }
    out
}

/// Random walks: at every step the mask must equal accept_token; at a stop token the text
/// must be accepted by the oracle; mid-walk, rollback must restore the exact mask.
fn random_walks(g: &Grammar, vocab: Vocabulary, walks: usize, max_steps: usize, seed: u64) {
    let vocab = Arc::new(vocab);
    let compiler = GrammarCompiler::new(vocab.clone());
    let compiled: Arc<CompiledGrammar> = compiler.compile_ir(g).unwrap();
    let special_text = String::from_utf8(SPECIAL.to_vec()).unwrap();
    let sep_id = vocab.special_token_id(&special_text);
    let text_to_id = |s: &str| if s == special_text { sep_id } else { None };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut terminated = 0;
    for _ in 0..walks {
        let mut m = GrammarMatcher::new(compiled.clone());
        let mut ids = Vec::new();
        for step in 0..max_steps {
            let allowed = check_invariant(&m, &vocab);
            if allowed.is_empty() {
                panic!(
                    "dead end after {:?}",
                    String::from_utf8_lossy(&vocab.decode_bytes(&ids))
                );
            }
            // Prefer ending late: stop tokens only half the time they are allowed.
            let mut t = allowed[rng.gen_range(0..allowed.len())];
            if vocab.is_stop_token(t)
                && allowed.len() > 1
                && rng.gen_bool(0.5)
                && step + 1 < max_steps
            {
                t = *allowed.iter().find(|&&x| !vocab.is_stop_token(x)).unwrap();
            }
            // Rollback check: the mask after accept + rollback equals the mask before.
            if step % 3 == 1 {
                let mut before = vec![0u32; vocab.bitmask_words()];
                let mut after = before.clone();
                m.fill_next_token_bitmask(&mut before).unwrap();
                assert!(m.accept_token(t));
                m.rollback(1).unwrap();
                m.fill_next_token_bitmask(&mut after).unwrap();
                assert_eq!(before, after, "rollback changed the mask");
            }
            assert!(m.accept_token(t));
            if vocab.is_stop_token(t) {
                assert!(m.is_terminated());
                let syms = to_syms(&vocab, &ids);
                assert!(
                    Oracle::accepts(g, &syms, &text_to_id),
                    "oracle rejects {:?}",
                    String::from_utf8_lossy(&vocab.decode_bytes(&ids))
                );
                terminated += 1;
                break;
            }
            ids.push(t);
        }
    }
    assert!(terminated > 0, "no walk reached a stop token");
}

#[test]
fn left_recursive_arithmetic() {
    // expr ::= expr "+" term | term ; term ::= term "*" factor | factor ;
    // factor ::= "(" expr ")" | [0-9]+
    let g = grammar(vec![
        (
            "expr",
            Expr::Choice(vec![Expr::Seq(vec![r(0), lit("+"), r(1)]), r(1)]),
        ),
        (
            "term",
            Expr::Choice(vec![Expr::Seq(vec![r(1), lit("*"), r(2)]), r(2)]),
        ),
        (
            "factor",
            Expr::Choice(vec![
                Expr::Seq(vec![lit("("), r(0), lit(")")]),
                rep(class(&[('0', '9')], false), 1, None),
            ]),
        ),
    ]);
    random_walks(
        &g,
        synthetic_vocab(&["1", "2", "+", "*", "(", ")", "x"]),
        20,
        30,
        1,
    );
}

#[test]
fn nullable_nested_stars_and_ambiguity() {
    // root ::= ((("a"*)*)*) "b" | ("a" | "aa")* "c" | x x ; x ::= "a"? | "ab"
    let g = grammar(vec![
        (
            "root",
            Expr::Choice(vec![
                Expr::Seq(vec![
                    rep(rep(rep(lit("a"), 0, None), 0, None), 0, None),
                    lit("b"),
                ]),
                Expr::Seq(vec![
                    rep(Expr::Choice(vec![lit("a"), lit("aa")]), 0, None),
                    lit("c"),
                ]),
                Expr::Seq(vec![r(1), r(1)]),
            ]),
        ),
        (
            "x",
            Expr::Choice(vec![rep(lit("a"), 0, Some(1)), lit("ab")]),
        ),
    ]);
    random_walks(&g, synthetic_vocab(&["a", "b", "c"]), 30, 40, 2);
}

#[test]
fn unicode_classes_and_partial_utf8_tokens() {
    // root ::= [a-zé😀-😂]+ "!" with negated class too
    let g = grammar(vec![(
        "root",
        Expr::Seq(vec![
            rep(
                class(&[('a', 'b'), ('é', 'é'), ('😀', '😂')], false),
                1,
                None,
            ),
            class(&[('a', 'z'), ('\u{80}', '\u{10FFFF}')], true),
        ]),
    )]);
    random_walks(&g, synthetic_vocab(&["a", "b", "!", "é"]), 30, 20, 3);
}

#[test]
fn bounded_repetition_small_and_large() {
    let g = grammar(vec![(
        "root",
        Expr::Seq(vec![
            rep(lit("a"), 2, Some(5)),
            lit("b"),
            rep(class(&[('a', 'b')], false), 3, Some(20_000)),
            lit("c"),
        ]),
    )]);
    random_walks(&g, synthetic_vocab(&["a", "b", "c"]), 20, 40, 4);
}

#[test]
fn large_repetition_is_compact_and_exact() {
    let g = grammar(vec![(
        "root",
        rep(class(&[('a', 'z')], false), 2, Some(20_000)),
    )]);
    let vocab = Arc::new(synthetic_vocab(&["a", "b", "-"]));
    let compiler = GrammarCompiler::new(vocab.clone());
    let compiled = compiler.compile_ir(&g).unwrap();
    assert!(
        compiled.node_count() < 400,
        "{} nodes",
        compiled.node_count()
    );
    let mut m = GrammarMatcher::new(compiled.clone());
    assert!(!m.accept_token(vocab.stop_tokens()[0]));
    assert!(m.accept_string("a"));
    assert!(!m.is_completed());
    assert!(m.accept_string("b"));
    assert!(m.is_completed());
    // Exactly 20,000 letters are allowed, not one more.
    let mut m = GrammarMatcher::new(compiled);
    assert!(m.accept_string(&"ab".repeat(9_999)));
    assert!(m.accept_string("zz"));
    assert!(m.is_completed());
    assert!(!m.accept_string("a"));
    assert!(m.accept_token(vocab.stop_tokens()[0]));
}

#[test]
fn special_token_terminal() {
    // root ::= "a"+ <|sep|> "b"+
    let g = grammar(vec![(
        "root",
        Expr::Seq(vec![
            rep(lit("a"), 1, None),
            Expr::Token(TokenRef::Text("<|sep|>".into())),
            rep(lit("b"), 1, None),
        ]),
    )]);
    random_walks(&g, synthetic_vocab(&["a", "b", "<", "|"]), 20, 20, 5);
}

#[test]
fn grammar_literal_equal_to_special_text_does_not_allow_the_special_token() {
    // The grammar's text "<|sep|>" is bytes; the special token of that text must stay masked.
    let g = grammar(vec![("root", lit("<|sep|>"))]);
    let vocab = Arc::new(synthetic_vocab(&["<", "|", "s", "e", "p", ">"]));
    let compiled = GrammarCompiler::new(vocab.clone()).compile_ir(&g).unwrap();
    let m = GrammarMatcher::new(compiled);
    let allowed = check_invariant(&m, &vocab);
    let sep = vocab.special_token_id("<|sep|>").unwrap();
    assert!(!allowed.contains(&sep));
    assert!(!allowed.is_empty());
}

/// Counted repetitions share masks between counts far from the bounds; near `min` and
/// `max` every count must still get exactly its own answer.
#[test]
fn counted_repetition_masks_are_exact_near_both_bounds() {
    // Tokens "a" .. "aaaaaaa", "b", "ab", "aab", the stop token.
    let mut tokens: Vec<Vec<u8>> = (1..=7).map(|k| vec![b'a'; k]).collect();
    tokens.extend([b"b".to_vec(), b"ab".to_vec(), b"aab".to_vec(), EOS.to_vec()]);
    let n = tokens.len() as u32;
    let vocab = Arc::new(Vocabulary::from_token_bytes(&tokens, &[n - 1], &[n - 1]).unwrap());
    for (min, max) in [(40u32, 45u32), (3, 40), (0, 33), (50, 50)] {
        let g = grammar(vec![(
            "root",
            Expr::Seq(vec![
                rep(class(&[('a', 'a')], false), min, Some(max)),
                lit("b"),
            ]),
        )]);
        let compiled = GrammarCompiler::new(vocab.clone()).compile_ir(&g).unwrap();
        for step in [1usize, 2, 3, 5, 7] {
            let mut m = GrammarMatcher::new(compiled.clone());
            let mut count = 0usize;
            loop {
                let allowed = check_invariant(&m, &vocab);
                // The letter count decides everything: check it against the bounds.
                let b_ok = count >= min as usize && count <= max as usize;
                assert_eq!(
                    allowed.contains(&7),
                    b_ok,
                    "{{{min},{max}}} after {count}: 'b'"
                );
                for k in 1..=7usize {
                    let ok = count + k <= max as usize;
                    assert_eq!(
                        allowed.contains(&(k as u32 - 1)),
                        ok,
                        "{{{min},{max}}} after {count}: {k} a's"
                    );
                }
                let ab_ok = count + 1 >= min as usize && count < max as usize;
                assert_eq!(
                    allowed.contains(&8),
                    ab_ok,
                    "{{{min},{max}}} after {count}: 'ab'"
                );
                let k = step.min(max as usize - count);
                if k == 0 {
                    break;
                }
                assert!(m.accept_token(k as u32 - 1));
                count += k;
            }
            assert_eq!(count, max as usize);
            assert!(m.accept_token(7));
            assert!(m.accept_token(n - 1));
        }
    }
}

/// Found by fuzzing: `+` nested in `+` a hundred times once doubled the automaton at every
/// level. One copy per level keeps it linear.
#[test]
fn deeply_nested_plus_compiles_linearly() {
    let mut e = lit("ab");
    for i in 0..100 {
        e = rep(e, if i % 3 == 0 { 0 } else { 1 }, None);
    }
    let g = grammar(vec![("root", Expr::Seq(vec![e, lit("c")]))]);
    let vocab = Arc::new(synthetic_vocab(&["a", "b", "c"]));
    let compiled = GrammarCompiler::new(vocab.clone()).compile_ir(&g).unwrap();
    assert!(
        compiled.node_count() < 10,
        "{} nodes",
        compiled.node_count()
    );
    let mut m = GrammarMatcher::new(compiled);
    assert!(m.accept_string("ababc"));
    assert!(m.is_completed());
}

/// Whole-language check against the oracle: every string up to a length over a small
/// alphabet is accepted by the engine (all bytes consumed, root complete) exactly when the
/// oracle accepts it. Random walks only see accepted texts; this also sees rejected ones.
fn assert_same_language(g: &Grammar, alphabet: &[u8], max_len: usize) {
    let tokens: Vec<Vec<u8>> = alphabet
        .iter()
        .map(|&b| vec![b])
        .chain([EOS.to_vec()])
        .collect();
    let n = tokens.len() as u32;
    let vocab = Arc::new(Vocabulary::from_token_bytes(&tokens, &[n - 1], &[n - 1]).unwrap());
    let compiled = GrammarCompiler::new(vocab).compile_ir(g).unwrap();
    let none = |_: &str| None;
    let mut strings: Vec<Vec<u8>> = vec![Vec::new()];
    let mut frontier = strings.clone();
    for _ in 0..max_len {
        let mut next = Vec::new();
        for s in &frontier {
            for &b in alphabet {
                let mut t = s.clone();
                t.push(b);
                next.push(t);
            }
        }
        strings.extend(next.iter().cloned());
        frontier = next;
    }
    for s in strings {
        let mut m = GrammarMatcher::new(compiled.clone());
        let engine = m.try_accept_bytes(&s).is_ok() && m.is_completed();
        let syms: Vec<Sym> = s.iter().map(|&b| Sym::Byte(b)).collect();
        let oracle = Oracle::accepts(g, &syms, &none);
        assert_eq!(
            engine,
            oracle,
            "{:?}: engine {engine}, oracle {oracle}",
            String::from_utf8_lossy(&s)
        );
    }
}

/// Found by review: a star's loop state doubled as its exit, so `c* b*` accepted "bc".
#[test]
fn consecutive_repetitions_keep_their_order() {
    let star = |s: &str| rep(lit(s), 0, None);
    let plus = |s: &str| rep(lit(s), 1, None);
    let cases = vec![
        grammar(vec![("root", Expr::Seq(vec![star("c"), star("b")]))]),
        grammar(vec![("root", Expr::Seq(vec![plus("a"), star("b")]))]),
        grammar(vec![(
            "root",
            rep(Expr::Seq(vec![lit("a"), star("c"), star("b")]), 1, None),
        )]),
        grammar(vec![
            ("root", Expr::Seq(vec![r(1), r(1)])),
            ("x", Expr::Seq(vec![lit("a"), star("c"), star("b")])),
        ]),
        grammar(vec![(
            "root",
            Expr::Seq(vec![
                rep(lit("a"), 1, Some(3)),
                star("b"),
                plus("c"),
                rep(lit("b"), 0, Some(2)),
            ]),
        )]),
        grammar(vec![(
            "root",
            Expr::Seq(vec![
                rep(rep(lit("ab"), 0, None), 1, None),
                lit("c"),
                star("a"),
            ]),
        )]),
        grammar(vec![(
            "root",
            Expr::Choice(vec![
                Expr::Seq(vec![star("a"), lit("b")]),
                Expr::Seq(vec![plus("b"), star("a"), lit("c")]),
            ]),
        )]),
    ];
    for g in &cases {
        assert_same_language(g, b"abc", 6);
    }
}

/// Found by review: `root ::= "a"+ <eos>` needed the stop token twice. A stop token used
/// as a terminal ends decoding when the root is complete after it.
#[test]
fn stop_token_as_terminal_terminates() {
    let g = grammar(vec![(
        "root",
        Expr::Seq(vec![
            rep(lit("a"), 1, None),
            Expr::Token(TokenRef::Text("<eos>".into())),
        ]),
    )]);
    let vocab = Arc::new(synthetic_vocab(&["a", "b"]));
    let eos = vocab.stop_tokens()[0];
    let compiled = GrammarCompiler::new(vocab.clone()).compile_ir(&g).unwrap();
    let mut m = GrammarMatcher::new(compiled);
    assert!(!m.accept_token(eos));
    assert!(m.accept_string("aa"));
    let allowed = check_invariant(&m, &vocab);
    assert!(allowed.contains(&eos));
    assert!(m.accept_token(eos));
    assert!(m.is_terminated());
    m.rollback(1).unwrap();
    assert!(!m.is_terminated());
    assert!(m.accept_string("a"));
}

/// Found by review: grammars matching nothing compiled and then allowed no token at all.
#[test]
fn grammar_matching_nothing_is_a_compile_error() {
    let vocab = Arc::new(synthetic_vocab(&["a"]));
    let compiler = GrammarCompiler::new(vocab);
    let empty_class = class(&[('\0', '\u{10FFFF}')], true);
    for g in [
        grammar(vec![("root", r(0))]),
        grammar(vec![("root", empty_class.clone())]),
        grammar(vec![
            ("root", Expr::Seq(vec![lit("a"), r(1)])),
            ("x", Expr::Seq(vec![lit("b"), r(1)])),
        ]),
        grammar(vec![("root", rep(empty_class.clone(), 40, Some(50)))]),
    ] {
        let err = compiler.compile_ir(&g).unwrap_err();
        assert!(
            matches!(err, tokensieve::CompileError::EmptyLanguage { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("matches nothing"), "{err}");
    }
    // Unproductive alternatives are fine while another one completes.
    let g = grammar(vec![(
        "root",
        Expr::Choice(vec![
            r(0),
            empty_class,
            lit("a"),
            rep(class(&[('a', 'a')], true), 40, Some(50)),
        ]),
    )]);
    assert!(compiler.compile_ir(&g).is_ok());
}

/// Found by review: `[a-z]{0,20} "y" [a-z]{0,20}` has an exponential DFA; such rules now
/// run as an ε-free NFA (several edges on one byte), with the same language.
#[test]
fn exponential_dfa_falls_back_to_nfa() {
    let az = || class(&[('a', 'z')], false);
    let g = grammar(vec![(
        "root",
        Expr::Seq(vec![
            rep(az(), 0, Some(20)),
            lit("y"),
            rep(az(), 0, Some(20)),
        ]),
    )]);
    let vocab = Arc::new(synthetic_vocab(&["a", "y", "b"]));
    let compiled = GrammarCompiler::new(vocab.clone()).compile_ir(&g).unwrap();
    assert!(
        compiled.node_count() < 500,
        "{} nodes",
        compiled.node_count()
    );
    for (text, ok) in [
        ("y", true),
        ("ayb", true),
        ("yyy", true),
        ("b", false),
        ("bab", false),
    ] {
        let mut m = GrammarMatcher::new(compiled.clone());
        assert_eq!(m.accept_string(text) && m.is_completed(), ok, "{text}");
    }
    let long = format!("{}y{}", "a".repeat(20), "b".repeat(20));
    let mut m = GrammarMatcher::new(compiled.clone());
    assert!(m.accept_string(&long) && m.is_completed());
    assert!(!m.accept_string("a"));
    assert_same_language(&g, b"ayb", 6);
    random_walks(&g, synthetic_vocab(&["a", "y", "b"]), 10, 30, 9);
}

/// Found by review: `root ::= "a" | "b" r1` with `r1 ::= "c" r1` allowed "b" and then "c"
/// forever, though no string through "b" completes. Dead ends are pruned at compile time.
#[test]
fn dead_ends_are_never_allowed() {
    let vocab = Arc::new(synthetic_vocab(&["a", "b", "c"]));
    let g = grammar(vec![
        (
            "root",
            Expr::Choice(vec![lit("a"), Expr::Seq(vec![lit("b"), r(1)])]),
        ),
        ("r1", Expr::Seq(vec![lit("c"), r(1)])),
    ]);
    let compiled = GrammarCompiler::new(vocab.clone()).compile_ir(&g).unwrap();
    let mut m = GrammarMatcher::new(compiled);
    let allowed = check_invariant(&m, &vocab);
    let a = allowed
        .iter()
        .map(|&t| vocab.token_bytes(t).unwrap().to_vec())
        .collect::<Vec<_>>();
    assert_eq!(a, vec![b"a".to_vec()], "only \"a\" can complete");
    assert!(!m.accept_string("b"));
    assert_same_language(&g, b"abc", 5);
}

/// Right-linear rules (calls only in tail position) are built as loops: the language must
/// not change, whether the component is entered from the root, from a call in the middle of
/// a sequence, or is the root itself; mutual recursion and self-loops included.
#[test]
fn right_linear_rules_keep_their_language() {
    let cases = [
        // a text avoiding "ab", then "!"
        "root ::= t \"!\"\nt ::= [^a] t | \"a\" a | \"\"\na ::= \"a\" a | [^ab] t | \"\"",
        // the root itself right-linear, with a non-tail call out of the component
        "root ::= \"a\" root | \"b\" x root | \"\"\nx ::= \"c\" | \"(\" x \")\"",
        // entered twice from one rule, and a component of one rule with a self-loop
        "root ::= s \"-\" s\ns ::= \"a\" s | \"b\" u\nu ::= \"c\" | \"c\" s",
        // tail call under a choice under a sequence's last part
        "root ::= \"x\" (\"a\" root | \"b\" (\"c\" root | \"d\"))",
    ];
    for src in cases {
        let g = tokensieve::grammar::parse_ebnf(src, "root").unwrap();
        assert_same_language(&g, b"abcdx!-()", 5);
    }
}

/// A long free text through right-linear rules stays cheap: 20,000 bytes are accepted and
/// the text can still end (the mask then allows the closing quote).
#[test]
fn long_text_through_right_linear_rules() {
    let src = "root ::= \"'\" t \"'\"\nt ::= [^'<] t | \"<\" lt | \"\"\nlt ::= [^'/] t | \"\"";
    let g = tokensieve::grammar::parse_ebnf(src, "root").unwrap();
    let vocab = Arc::new(synthetic_vocab(&["'", "a", "<", "/", "ab<", "<a"]));
    let compiled = GrammarCompiler::new(vocab.clone()).compile_ir(&g).unwrap();
    let mut m = GrammarMatcher::new(compiled);
    let text = "ab<".repeat(7000);
    assert!(m.accept_string(&format!("'{text}")));
    assert!(m.try_accept_bytes(b"/").is_err(), "\"</\" is excluded");
    let allowed = check_invariant(&m, &vocab);
    let quote = (0..vocab.vocab_size() as u32)
        .find(|&t| vocab.token_bytes(t) == Some(b"'"))
        .unwrap();
    assert!(allowed.contains(&quote));
    assert!(m.accept_string("'"));
    assert!(m.is_completed());
}

/// Masks of one compiler are shared across grammars by the structure of each node's future
/// (and within a grammar by bisimilar nodes): a grammar compiled after others must give
/// exactly the masks a fresh compiler gives, at every step. The pairs below differ only in
/// which call returns where, or in what follows a shared loop.
#[test]
fn shared_masks_equal_fresh_masks() {
    let grammars = [
        "root ::= a \"1\" | b \"2\"\na ::= \"x\" | \"x\" a\nb ::= \"y\" | \"y\" b",
        "root ::= a \"2\" | b \"1\"\na ::= \"x\" | \"x\" a\nb ::= \"y\" | \"y\" b",
        "root ::= \"'\" [^']* \"'\" (\",\" \"'\" [^']* \"'\")*",
        "root ::= \"'\" [^']* \"'\" \"!\"",
        "root ::= \"<\" [^<]* \">\" | \"(\" [^<]* \")\"",
        "root ::= ([^a] | \"a\" [^b])* \"ab\"",
    ];
    // Over 8,192 text tokens, so that the compiler shares masks (filler `~N` tokens).
    let base = synthetic_vocab(&["x", "y", "1", "2", "'", ",", "!", "<", ">", "a", "b", "("]);
    let mut tokens: Vec<Vec<u8>> = (0..base.tokenizer_size() as u32)
        .map(|t| base.token_bytes(t).unwrap_or(&[]).to_vec())
        .collect();
    let specials: Vec<u32> = base.special_tokens().collect();
    let stops = base.stop_tokens().to_vec();
    tokens.extend((0..8000).map(|i| format!("~{i}").into_bytes()));
    let vocab = Arc::new(Vocabulary::from_token_bytes(&tokens, &specials, &stops).unwrap());
    let shared = GrammarCompiler::new(vocab.clone());
    for pass in 0..2 {
        for src in grammars {
            let g = tokensieve::grammar::parse_ebnf(src, "root").unwrap();
            let a = shared.compile_ir(&g).unwrap();
            let b = GrammarCompiler::new(vocab.clone())
                .with_mask_cache_capacity(0)
                .compile_ir(&g)
                .unwrap();
            let mut rng = StdRng::seed_from_u64(pass);
            for _ in 0..20 {
                let mut ma = GrammarMatcher::new(a.clone());
                let mut mb = GrammarMatcher::new(b.clone());
                for _ in 0..12 {
                    let la = check_invariant(&ma, &vocab);
                    let lb = check_invariant(&mb, &vocab);
                    assert_eq!(la, lb, "{src}");
                    let Some(&t) = la.get(rng.gen_range(0..la.len().max(1))) else {
                        break;
                    };
                    if vocab.is_stop_token(t) {
                        break;
                    }
                    assert!(ma.accept_token(t) && mb.accept_token(t));
                }
            }
        }
    }
    let (bytes, count) = shared.mask_cache_stats();
    assert!(count > 0 && bytes > 0);
    // A second compile of a grammar adds nothing to the cache.
    let g = tokensieve::grammar::parse_ebnf(grammars[2], "root").unwrap();
    shared.compile_ir(&g).unwrap();
    assert_eq!(shared.mask_cache_stats().1, count);
}
