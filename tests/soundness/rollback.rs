//! Rollback, reset and jump-forward on a real vocabulary (Llama 3.1).
//!
//! * accept k tokens, roll back j: the masks equal those of a fresh matcher fed k − j tokens
//!   (several k and j, on the built-in JSON grammar and an EBNF grammar), and replaying the
//!   rolled-back tokens gives the masks of k tokens again;
//! * after termination the stop token counts as one step;
//! * a rejected token whose first bytes matched (a multi-byte token, or a partial UTF-8
//!   character) leaves the state and the mask unchanged;
//! * `rollback(n)` past the history is a typed error that changes nothing;
//! * `reset()` is a new matcher;
//! * `find_jump_forward_string()` returns the forced text and changes nothing.
//!
//! Run with `cargo test --release --test soundness rollback::`.
#![cfg(feature = "hf")]

use crate::common;

use common::{Piece, RealTokenizer};
use std::sync::{Arc, OnceLock};
use tokensieve::{CompiledGrammar, GrammarMatcher, MatcherError, TokenRejection};

fn llama() -> Option<&'static RealTokenizer> {
    static RT: OnceLock<Option<RealTokenizer>> = OnceLock::new();
    RT.get_or_init(|| RealTokenizer::load("llama3_1")).as_ref()
}

/// What is compared between two matchers: the mask and the observable state.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Snapshot {
    mask: Vec<u32>,
    steps: usize,
    completed: bool,
    terminated: bool,
    jump: Vec<u8>,
}

fn snap(m: &mut GrammarMatcher) -> Snapshot {
    let mut mask = vec![0u32; m.bitmask_words()];
    m.fill_next_token_bitmask(&mut mask).unwrap();
    Snapshot {
        mask,
        steps: m.num_accepted_steps(),
        completed: m.is_completed(),
        terminated: m.is_terminated(),
        jump: m.find_jump_forward_bytes(),
    }
}

fn mask_diff(a: &[u32], b: &[u32]) -> String {
    let mut out = Vec::new();
    for (w, (x, y)) in a.iter().zip(b).enumerate() {
        let d = x ^ y;
        for bit in 0..32 {
            if d >> bit & 1 == 1 {
                out.push(format!("{}:{}", w * 32 + bit, x >> bit & 1));
            }
        }
    }
    let n = out.len();
    out.truncate(10);
    format!("{n} bits differ (token:bit-in-left) {}", out.join(" "))
}

fn assert_same(what: &str, got: &Snapshot, want: &Snapshot) {
    if got != want {
        panic!(
            "{what}: steps {} vs {}, completed {} vs {}, terminated {} vs {}, jump {:?} vs {:?}, \
             mask: {}",
            got.steps,
            want.steps,
            got.completed,
            want.completed,
            got.terminated,
            want.terminated,
            String::from_utf8_lossy(&got.jump),
            String::from_utf8_lossy(&want.jump),
            mask_diff(&got.mask, &want.mask)
        );
    }
}

/// The snapshots of a fresh matcher fed 0, 1, …, n tokens, then the stop token.
fn fresh_snapshots(compiled: &Arc<CompiledGrammar>, ids: &[u32], stop: u32) -> Vec<Snapshot> {
    let mut m = GrammarMatcher::new(compiled.clone());
    let mut out = vec![snap(&mut m)];
    for &id in ids.iter().chain(std::iter::once(&stop)) {
        assert!(m.accept_token(id), "token {id} rejected");
        out.push(snap(&mut m));
    }
    out
}

const DOC: &str = r#"{"name": "Ada Lovelace", "born": 1815, "tags": ["math", "poetry", null, true], "nested": {"x": -1.5e3, "y": "caf\u00e9 \"q\" 日本"}}"#;

const ARITH: &str = r#"root ::= expr
expr ::= expr "+" term | expr "-" term | term
term ::= term "*" factor | factor
factor ::= "(" expr ")" | [0-9]+ | " " factor"#;

fn inputs(rt: &RealTokenizer) -> Vec<(&'static str, Arc<CompiledGrammar>, Vec<u32>)> {
    vec![
        (
            "json",
            rt.compiler.compile_builtin_json().unwrap(),
            rt.encode_exact(DOC),
        ),
        (
            "arith",
            rt.compiler.compile_grammar(ARITH).unwrap(),
            rt.encode_exact("(12+345)*6- (7*(8+ 9))*1000+2"),
        ),
        (
            "counted repetitions",
            rt.compiler
                .compile_grammar(r#"root ::= "ab"{3,1000} [a-z]{2,20000} "!""#)
                .unwrap(),
            rt.encode_exact("abababababababbaxyzzyplugh!"),
        ),
    ]
}

#[test]
fn rollback_equals_fresh_prefix() {
    let Some(rt) = llama() else { return };
    let stop = rt.stop();
    let mut trials = 0;
    for (name, compiled, ids) in inputs(rt) {
        let fresh = fresh_snapshots(&compiled, &ids, stop);
        let total = ids.len() + 1; // the stop token is a step too
        let all: Vec<u32> = ids.iter().copied().chain([stop]).collect();
        for k in 0..=total {
            let mut js = vec![0, 1, 2, 3, 5, k / 2, k.saturating_sub(1), k];
            js.retain(|&j| j <= k);
            js.sort_unstable();
            js.dedup();
            // One matcher per k: accept k, then for each j roll back and replay.
            let mut m = GrammarMatcher::new(compiled.clone());
            for &id in &all[..k] {
                assert!(m.accept_token(id));
            }
            assert_same(&format!("{name}: fed {k}"), &snap(&mut m), &fresh[k]);
            for &j in &js {
                m.rollback(j).unwrap();
                assert_same(
                    &format!("{name}: accept {k}, rollback {j}"),
                    &snap(&mut m),
                    &fresh[k - j],
                );
                for &id in &all[k - j..k] {
                    assert!(m.accept_token(id), "{name}: replay after rollback {j}");
                }
                assert_same(
                    &format!("{name}: accept {k}, rollback {j}, replay {j}"),
                    &snap(&mut m),
                    &fresh[k],
                );
                trials += 1;
            }
        }
        // Rollback in several small pieces equals one big rollback.
        let mut m = GrammarMatcher::new(compiled.clone());
        for &id in &ids {
            assert!(m.accept_token(id));
        }
        let n = ids.len();
        let mut back = 0;
        for piece in [1, 2, 3, 1, 4] {
            if back + piece > n {
                break;
            }
            m.rollback(piece).unwrap();
            back += piece;
            assert_same(
                &format!("{name}: rollback in pieces, {back} back"),
                &snap(&mut m),
                &fresh[n - back],
            );
        }
        // A different continuation after a rollback, then back again.
        let mut m = GrammarMatcher::new(compiled.clone());
        for &id in &ids[..n / 2] {
            assert!(m.accept_token(id));
        }
        let mut mask = vec![0u32; m.bitmask_words()];
        m.fill_next_token_bitmask(&mut mask).unwrap();
        let other = (0..rt.vocab.vocab_size() as u32)
            .filter(|&t| tokensieve::mask::is_token_allowed(&mask, t))
            .find(|&t| t != ids[n / 2] && !rt.vocab.is_stop_token(t));
        if let Some(other) = other {
            assert!(m.accept_token(other));
            m.rollback(1).unwrap();
            assert_same(
                &format!("{name}: other continuation rolled back"),
                &snap(&mut m),
                &fresh[n / 2],
            );
        }
    }
    eprintln!("{trials} rollback trials");
}

#[test]
fn rollback_after_termination_counts_the_stop_token() {
    let Some(rt) = llama() else { return };
    let stop = rt.stop();
    for (name, compiled, ids) in inputs(rt) {
        let n = ids.len();
        let fresh = fresh_snapshots(&compiled, &ids, stop);
        let mut m = GrammarMatcher::new(compiled.clone());
        for &id in &ids {
            assert!(m.accept_token(id));
        }
        assert!(m.accept_token(stop));
        assert!(m.is_terminated());
        assert_eq!(m.num_accepted_steps(), n + 1);
        let s = snap(&mut m);
        assert!(
            s.mask.iter().all(|&w| w == 0),
            "{name}: mask after termination"
        );
        assert!(s.jump.is_empty());
        assert_eq!(
            m.try_accept_token(ids[0]),
            Err(TokenRejection::Terminated { token: ids[0] })
        );
        // One step back undoes exactly the stop token.
        m.rollback(1).unwrap();
        assert!(
            !m.is_terminated(),
            "{name}: still terminated after rollback(1)"
        );
        assert_eq!(m.num_accepted_steps(), n);
        let s = snap(&mut m);
        assert_same(&format!("{name}: rollback(1) after stop"), &s, &fresh[n]);
        assert!(tokensieve::mask::is_token_allowed(&s.mask, stop));
        assert!(
            m.accept_token(stop),
            "{name}: stop token not accepted again"
        );
        assert!(m.is_terminated());
        // Two steps back: the stop token and the last text token.
        m.rollback(2).unwrap();
        assert!(!m.is_terminated());
        assert_same(
            &format!("{name}: rollback(2) after stop"),
            &snap(&mut m),
            &fresh[n - 1],
        );
        // Everything, stop included.
        assert!(m.accept_token(ids[n - 1]));
        assert!(m.accept_token(stop));
        m.rollback(n + 1).unwrap();
        assert_same(
            &format!("{name}: rollback(all) after stop"),
            &snap(&mut m),
            &fresh[0],
        );
    }
}

/// Tokens that the grammar rejects after matching at least one of their bytes leave the state
/// and the mask unchanged.
#[test]
fn rejected_multibyte_tokens_leave_the_state_unchanged() {
    let Some(rt) = llama() else { return };
    let vocab = &rt.vocab;
    let mut checked = 0;
    for (name, compiled, ids) in inputs(rt) {
        for pos in [0, 1, ids.len() / 3, ids.len() / 2, ids.len() - 1] {
            let mut m = GrammarMatcher::new(compiled.clone());
            for &id in &ids[..pos] {
                assert!(m.accept_token(id));
            }
            let before = snap(&mut m);
            // Every token rejected past its first byte (at most 300 of them, spread out).
            let mut fork = m.clone();
            let mut late: Vec<(u32, usize)> = Vec::new();
            for t in 0..vocab.vocab_size() as u32 {
                match fork.try_accept_token(t) {
                    Ok(()) => fork.rollback(1).unwrap(),
                    Err(TokenRejection::Bytes { offset, .. }) if offset > 0 => {
                        late.push((t, offset))
                    }
                    Err(_) => {}
                }
            }
            let stride = late.len().div_ceil(300).max(1);
            for &(t, offset) in late.iter().step_by(stride) {
                let bytes = vocab.token_bytes(t).unwrap();
                match m.try_accept_token(t) {
                    Err(TokenRejection::Bytes {
                        token,
                        offset: o,
                        byte,
                    }) => {
                        assert_eq!((token, o, byte), (t, offset, bytes[offset]));
                    }
                    other => panic!("{name} at {pos}: token {t}: {other:?}"),
                }
                checked += 1;
            }
            assert_same(
                &format!("{name} at {pos}: after {} rejected tokens", late.len()),
                &snap(&mut m),
                &before,
            );
            if pos < ids.len() {
                assert!(m.accept_token(ids[pos]));
            }
        }
    }
    // A partial UTF-8 character: "è" (C3 A8) where "é" (C3 A9) is required.
    let g = rt
        .compiler
        .compile_grammar(r#"root ::= "caf" [é] "!""#)
        .unwrap();
    let mut m = GrammarMatcher::new(g);
    for id in rt.encode_exact("caf") {
        assert!(m.accept_token(id));
    }
    let before = snap(&mut m);
    let mut utf8_rejections = 0;
    for t in 0..vocab.tokenizer_size() as u32 {
        let Some(b) = vocab.token_bytes(t) else {
            continue;
        };
        if vocab.is_special(t) || b.len() < 2 || b[0] != 0xC3 || b[1] == 0xA9 {
            continue;
        }
        assert_eq!(
            m.try_accept_token(t),
            Err(TokenRejection::Bytes {
                token: t,
                offset: 1,
                byte: b[1]
            }),
            "token {t} {:?}",
            String::from_utf8_lossy(b)
        );
        utf8_rejections += 1;
    }
    assert!(utf8_rejections > 10, "{utf8_rejections}");
    assert_same("caf + rejected 0xC3 tokens", &snap(&mut m), &before);
    let e_acute = rt.token_id("é").unwrap();
    assert!(m.accept_token(e_acute));
    eprintln!("{checked} late rejections, {utf8_rejections} partial UTF-8 rejections checked");
}

#[test]
fn rollback_past_the_history_is_an_error_and_changes_nothing() {
    let Some(rt) = llama() else { return };
    for (name, compiled, ids) in inputs(rt) {
        let mut m = GrammarMatcher::new(compiled.clone());
        let fresh = snap(&mut m);
        assert_eq!(
            m.rollback(1),
            Err(MatcherError::Rollback {
                requested: 1,
                available: 0
            })
        );
        assert_eq!(m.rollback(0), Ok(()));
        assert_same(
            &format!("{name}: fresh after failed rollback"),
            &snap(&mut m),
            &fresh,
        );
        for k in [1, 3, ids.len()] {
            let mut m = GrammarMatcher::new(compiled.clone());
            for &id in &ids[..k] {
                assert!(m.accept_token(id));
            }
            let before = snap(&mut m);
            for n in [k + 1, k + 10, usize::MAX] {
                let e = m.rollback(n).unwrap_err();
                assert_eq!(
                    e,
                    MatcherError::Rollback {
                        requested: n,
                        available: k
                    }
                );
                assert!(e.to_string().contains(&n.to_string()), "{e}");
                assert_same(
                    &format!("{name}: {k} accepted, rollback({n})"),
                    &snap(&mut m),
                    &before,
                );
            }
            // Still fully usable.
            m.rollback(k).unwrap();
            assert_same(
                &format!("{name}: rollback({k}) of {k}"),
                &snap(&mut m),
                &fresh,
            );
        }
        // After termination: the stop token is one more step available.
        let mut m = GrammarMatcher::new(compiled.clone());
        for &id in &ids {
            assert!(m.accept_token(id));
        }
        assert!(m.accept_token(rt.stop()));
        let before = snap(&mut m);
        assert_eq!(
            m.rollback(ids.len() + 2),
            Err(MatcherError::Rollback {
                requested: ids.len() + 2,
                available: ids.len() + 1
            })
        );
        assert_same(
            &format!("{name}: terminated, failed rollback"),
            &snap(&mut m),
            &before,
        );
        assert!(m.is_terminated());
    }
}

#[test]
fn reset_equals_a_new_matcher() {
    let Some(rt) = llama() else { return };
    let stop = rt.stop();
    for (name, compiled, ids) in inputs(rt) {
        let fresh = fresh_snapshots(&compiled, &ids, stop);
        let mut m = GrammarMatcher::new(compiled.clone());
        // Reset of a fresh matcher, mid-way, after a rejected token, after termination.
        m.reset();
        assert_same(&format!("{name}: reset fresh"), &snap(&mut m), &fresh[0]);
        for &id in &ids[..ids.len() / 2] {
            assert!(m.accept_token(id));
        }
        m.reset();
        assert_same(&format!("{name}: reset mid-way"), &snap(&mut m), &fresh[0]);
        for &id in &ids[..3] {
            assert!(m.accept_token(id));
        }
        assert!(!m.accept_token(stop));
        assert!(!m.accept_token(u32::MAX));
        m.reset();
        assert_same(
            &format!("{name}: reset after rejections"),
            &snap(&mut m),
            &fresh[0],
        );
        for &id in &ids {
            assert!(m.accept_token(id));
        }
        assert!(m.accept_token(stop));
        m.reset();
        assert_same(
            &format!("{name}: reset after termination"),
            &snap(&mut m),
            &fresh[0],
        );
        assert!(m.rollback(1).is_err(), "{name}: history survives reset");
        // Replaying after a reset gives the same masks at every step.
        for (i, &id) in ids.iter().chain([&stop]).enumerate() {
            assert!(m.accept_token(id));
            assert_same(
                &format!("{name}: replay after reset, step {i}"),
                &snap(&mut m),
                &fresh[i + 1],
            );
        }
    }
}

#[test]
fn jump_forward_returns_the_forced_text() {
    let Some(rt) = llama() else { return };
    let c = &rt.compiler;
    let sp = "<|start_header_id|>";
    // (grammar, tokens fed first, expected jump-forward string)
    let cases: Vec<(String, Vec<Piece<'_>>, &str)> = vec![
        (
            r#"root ::= "hello" " world" ("!" | "?")"#.into(),
            vec![],
            "hello world",
        ),
        (
            r#"root ::= "hello" " world" ("!" | "?")"#.into(),
            vec![Piece::Text("hello")],
            " world",
        ),
        (
            r#"root ::= "hello" " world" ("!" | "?")"#.into(),
            vec![Piece::Text("hello world")],
            "",
        ),
        (
            r#"root ::= "hello" " world" ("!" | "?")"#.into(),
            vec![Piece::Plain("hel")],
            "lo world",
        ),
        (
            r#"root ::= "{\"name\": \"" [a-z]+ "\"}""#.into(),
            vec![],
            "{\"name\": \"",
        ),
        (
            r#"root ::= "{\"name\": \"" [a-z]+ "\"}""#.into(),
            vec![Piece::Text("{\"name\": \"ada")],
            "",
        ),
        (r#"root ::= "ab" "c"?"#.into(), vec![], "ab"),
        (r#"root ::= "ab" "c"?"#.into(), vec![Piece::Text("ab")], ""),
        (
            r#"root ::= "x" ws "y" ws ::= [ ]*"#.replace(" ws ::=", "\nws ::="),
            vec![],
            "x",
        ),
        (format!(r#"root ::= "a" {sp} "bc""#), vec![], "a"),
        (
            format!(r#"root ::= "a" {sp} "bc""#),
            vec![Piece::Text("a")],
            "",
        ),
        (
            format!(r#"root ::= "a" {sp} "bc""#),
            vec![Piece::Text("a"), Piece::Special(sp)],
            "bc",
        ),
        (r#"root ::= "日本語" [a-z]"#.into(), vec![], "日本語"),
        (
            r#"root ::= sub sub ::= "in" "ner" "!" "#.replace(" sub ::=", "\nsub ::="),
            vec![],
            "inner!",
        ),
        (
            r#"root ::= ("pre" "fix" | "pre" "fab") "x""#.into(),
            vec![],
            "pref",
        ),
    ];
    for (src, pieces, want) in cases {
        let g = c
            .compile_grammar(&src)
            .unwrap_or_else(|e| panic!("{src}: {e}"));
        let mut m = GrammarMatcher::new(g);
        for id in rt.encode_pieces(&pieces) {
            assert!(m.accept_token(id), "{src}: token {id}");
        }
        let before = snap(&mut m);
        let got = m.find_jump_forward_string();
        assert_eq!(got, want, "{src} after {pieces:?}");
        assert_eq!(m.find_jump_forward_bytes(), want.as_bytes());
        assert_same(
            &format!("{src}: jump-forward changed the state"),
            &snap(&mut m),
            &before,
        );
        // The forced text is accepted, as one step.
        if !want.is_empty() {
            assert!(m.accept_string(&got), "{src}: forced text rejected");
            assert_eq!(m.num_accepted_steps(), before.steps + 1);
            m.rollback(1).unwrap();
            assert_same(
                &format!("{src}: accept_string + rollback"),
                &snap(&mut m),
                &before,
            );
        }
    }
    // A partial UTF-8 character: after the first byte of 日 the forced bytes start mid-character;
    // the string is cut to its longest valid UTF-8 prefix (empty here).
    let g = c.compile_grammar(r#"root ::= "日本" [a-z]"#).unwrap();
    let mut m = GrammarMatcher::new(g);
    let byte_token = (0..rt.vocab.tokenizer_size() as u32)
        .find(|&t| rt.vocab.token_bytes(t) == Some(&[0xE6][..]))
        .expect("a single-byte token 0xE6");
    assert!(m.accept_token(byte_token));
    assert_eq!(m.find_jump_forward_bytes(), "日本".as_bytes()[1..].to_vec());
    assert_eq!(m.find_jump_forward_string(), "");
    // After termination nothing is forced.
    let g = c.compile_grammar(r#"root ::= "ab" "cd""#).unwrap();
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_string("abcd"));
    assert_eq!(m.find_jump_forward_string(), "");
    assert!(m.accept_token(rt.stop()));
    assert_eq!(m.find_jump_forward_string(), "");
}

/// A state reached again after a rollback, through other tokens, can hold the same items
/// with the same origins while the sets below it differ: here the item inside `s` after
/// `x`, whose callers in set 1 expect `!` after `a` and `?` after `b`. The matcher's memo
/// of the tokens it ran through the chart (`.!`, `.?` run past `s` and `m`) must not carry
/// over: the masks equal a fresh matcher's, before and after the rollback, and at a state
/// filled twice.
#[test]
fn states_met_again_after_a_rollback_are_not_taken_for_earlier_ones() {
    let tokens: Vec<&[u8]> = vec![
        b"a", b"b", b"x", b".", b"!", b"?", b".!", b".?", b"(", b")", b"</s>",
    ];
    let stop = tokens.len() as u32 - 1;
    let vocab = tokensieve::Vocabulary::from_token_bytes(&tokens, &[stop], &[stop]).unwrap();
    let compiler = tokensieve::GrammarCompiler::new(Arc::new(vocab));
    let g = compiler
        .compile_grammar(
            "root ::= \"a\" m \"!\" | \"b\" m \"?\"\nm ::= \"(\" m \")\" | s\ns ::= \"x\" s | \"x\" \".\"",
        )
        .unwrap();
    let id = |t: &[u8]| tokens.iter().position(|x| *x == t).unwrap() as u32;
    let fresh = |ids: &[u32]| {
        let mut m = GrammarMatcher::new(g.clone());
        for &t in ids {
            assert!(m.accept_token(t));
        }
        snap(&mut m)
    };
    let (a, b, x) = (id(b"a"), id(b"b"), id(b"x"));
    let mut m = GrammarMatcher::new(g.clone());
    assert!(m.accept_token(a) && m.accept_token(x));
    let after_a = snap(&mut m);
    assert_same("a x", &after_a, &fresh(&[a, x]));
    let allowed = |s: &Snapshot, t: &[u8]| tokensieve::mask::is_token_allowed(&s.mask, id(t));
    assert!(allowed(&after_a, b".!") && !allowed(&after_a, b".?"));
    m.rollback(2).unwrap();
    assert!(m.accept_token(b) && m.accept_token(x));
    let after_b = snap(&mut m);
    assert_same("a x, rollback 2, b x", &after_b, &fresh(&[b, x]));
    assert!(allowed(&after_b, b".?") && !allowed(&after_b, b".!"));
    assert_same("b x filled again", &snap(&mut m), &after_b);
    // Inside `s`, each `x` leaves the same state: the memo's answer is the chart's.
    assert!(m.accept_token(x));
    assert_same("b x x", &snap(&mut m), &fresh(&[b, x, x]));
}
