//! Random sequences of matcher calls under proptest (the CI twin of `fuzz/matcher`):
//! `fill_next_token_bitmask`, `accept_token`, `accept_string`, `rollback`, `reset`,
//! `find_jump_forward_string` and forks (`clone`) on fixed grammars. After every call the
//! mask bit of every token equals `accept_token` on a fork, and a rollback restores the mask
//! of the state it returns to exactly.
//!
//! Run with `cargo test --release --test soundness api_sequences::`.

use crate::common;

use proptest::prelude::*;
use std::sync::{Arc, OnceLock};
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, Vocabulary};

const GRAMMARS: &[&str] = &[
    r#"root ::= expr
expr ::= expr "+" term | term
term ::= term "*" factor | factor
factor ::= "(" expr ")" | [0-9]+"#,
    r#"root ::= (("a"*)*)* "b" | ("a" | "aa")* "c""#,
    r#"root ::= "\"" [^"\\]{0,40} "\"" <s>? [a-c]{2,20000}"#,
    r#"root ::= "{" ("\"a\":" [0-9]{1,3} ("," "\"b\":" ("1" | "12"))?)? "}""#,
];

fn grammars() -> &'static Vec<Arc<CompiledGrammar>> {
    static G: OnceLock<Vec<Arc<CompiledGrammar>>> = OnceLock::new();
    G.get_or_init(|| {
        let tokens: Vec<&[u8]> = vec![
            b"a", b"b", b"c", b"aa", b"ab", b"(", b")", b"+", b"*", b"1", b"12", b"(1", b"1)",
            b"\"", b"\"a", b"a\"", b"\\", b"\xC3", b"\xA9", b"{", b"}", b"\"a\":", b",", b"2",
            b"<s>", b"</s>",
        ];
        let vocab = Vocabulary::from_token_bytes(&tokens, &[24, 25], &[25]).unwrap();
        let compiler = GrammarCompiler::new(vocab);
        GRAMMARS
            .iter()
            .map(|g| compiler.compile_grammar(g).unwrap())
            .collect()
    })
}

fn mask_of(m: &mut GrammarMatcher) -> Vec<u32> {
    let mut mask = vec![0u32; m.bitmask_words()];
    m.fill_next_token_bitmask(&mut mask).unwrap();
    mask
}

/// Checks the mask ⇔ accept invariant for every token of the vocabulary (and one id past
/// it), on forks.
fn check_invariant(m: &mut GrammarMatcher) -> Vec<u32> {
    let mask = mask_of(m);
    let n = m.compiled_grammar().vocabulary().vocab_size() as u32;
    for t in 0..=n {
        let bit = t < n && mask[(t / 32) as usize] >> (t % 32) & 1 == 1;
        assert_eq!(bit, m.clone().accept_token(t), "token {t}");
    }
    mask
}

#[derive(Clone, Debug)]
enum Op {
    Accept(u32),
    AcceptString(&'static str),
    Rollback(usize),
    Reset,
    JumpForward,
    Fork,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..27).prop_map(Op::Accept),
        2 => prop::sample::select(vec!["a", "(1+", "\"x", "b", "{\"a\":1", "2}", "é"])
            .prop_map(Op::AcceptString),
        2 => (0usize..4).prop_map(Op::Rollback),
        1 => Just(Op::Reset),
        1 => Just(Op::JumpForward),
        1 => Just(Op::Fork),
    ]
}

proptest! {
    #![proptest_config(common::proptest_config(2000))]

    #[test]
    fn random_api_sequences(which in 0usize..4, ops in prop::collection::vec(op(), 0..40)) {
        let g = grammars()[which].clone();
        let mut m = GrammarMatcher::new(g);
        // Masks of the states after each accepted step (index = steps accepted).
        let mut masks: Vec<Vec<u32>> = vec![check_invariant(&mut m)];
        for op in ops {
            match op {
                Op::Accept(t) => {
                    if m.accept_token(t) {
                        masks.push(check_invariant(&mut m));
                    }
                }
                Op::AcceptString(s) => {
                    let before = m.num_accepted_steps();
                    if m.accept_string(s) {
                        masks.push(check_invariant(&mut m));
                    } else {
                        prop_assert_eq!(m.num_accepted_steps(), before);
                        prop_assert_eq!(&mask_of(&mut m), masks.last().unwrap());
                    }
                }
                Op::Rollback(k) => {
                    let steps = m.num_accepted_steps();
                    match m.rollback(k) {
                        Ok(()) => {
                            prop_assert!(k <= steps);
                            masks.truncate(masks.len() - k);
                            prop_assert_eq!(&mask_of(&mut m), masks.last().unwrap());
                            if k > 0 {
                                prop_assert!(!m.is_terminated());
                            }
                        }
                        Err(_) => prop_assert!(k > steps),
                    }
                }
                Op::Reset => {
                    m.reset();
                    masks.truncate(1);
                    prop_assert_eq!(&mask_of(&mut m), &masks[0]);
                }
                Op::JumpForward => {
                    let forced = m.find_jump_forward_string();
                    // What is forced is accepted (on a fork).
                    if !forced.is_empty() {
                        prop_assert!(m.clone().accept_string(&forced), "{:?}", forced);
                    }
                }
                Op::Fork => {
                    let mut f = m.clone();
                    prop_assert_eq!(&mask_of(&mut f), masks.last().unwrap());
                    // The fork advancing leaves the original unchanged.
                    for t in 0..27 {
                        if f.accept_token(t) {
                            break;
                        }
                    }
                    prop_assert_eq!(&mask_of(&mut m), masks.last().unwrap());
                }
            }
            prop_assert_eq!(m.num_accepted_steps() + 1, masks.len());
        }
    }
}
