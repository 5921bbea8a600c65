//! Masks whose walk took a subtree from an earlier walk of the same grammar (the walk
//! memo: a first byte's subtree walked from an automaton node is kept by trie node and
//! node class, and taken whole by later walks that reach the same pair).
//!
//! Run with `cargo test --release --test soundness subtree_memo::`.

use std::sync::Arc;
use tokensieve::{GrammarCompiler, GrammarMatcher, Precompute, Vocabulary};

/// Mask bit ⇔ `accept_token`, for every token, at `m`'s state; the tokens that disagree.
fn disagreements(m: &mut GrammarMatcher, tokens: &[Vec<u8>]) -> Vec<String> {
    let mut mask = vec![0u32; m.bitmask_words()];
    m.fill_next_token_bitmask(&mut mask).unwrap();
    (0..tokens.len())
        .filter(|&i| {
            let bit = tokensieve::mask::is_token_allowed(&mask, i as u32);
            bit != m.clone().accept_token(i as u32)
        })
        .map(|i| String::from_utf8_lossy(&tokens[i]).into_owned())
        .collect()
}

/// A walk over a slice its node consumes keeps the slice's pure subtrees apart from the
/// other accepted tokens. The memo entry of a first byte's subtree must hold both, even
/// when the subtree's first pure range continues the one before it: here `A` (taken
/// whole) and then `a0` under `a`, whose node has no token of its own. A later walk that
/// reaches the `a` subtree through the memo (from the node after `x`) must accept `a0`.
#[test]
fn a_memoised_subtree_keeps_the_pure_tokens_it_starts_with() {
    let mut tokens: Vec<Vec<u8>> =
        vec![b"x".to_vec(), b"A".to_vec(), b"a0".to_vec(), b".".to_vec()];
    // Enough tokens under `a` for its subtree to be kept in the memo.
    for c1 in b'B'..=b'U' {
        for c2 in b'B'..=b'U' {
            tokens.push(vec![b'a', c1, c2, b'.']);
        }
    }
    tokens.push(b"</s>".to_vec());
    let stop = tokens.len() as u32 - 1;
    let compile = || {
        let vocab = Vocabulary::from_token_bytes(&tokens, &[stop], &[stop]).unwrap();
        GrammarCompiler::new(Arc::new(vocab))
            .with_precompute(Precompute::Lazy)
            .compile_regex("xa[a-zA-Z0-9.]*")
            .unwrap()
    };
    let (x, a0) = (0, 2);
    let g = compile();
    // The loop's walk first: it stores the `a` subtree.
    let mut m = GrammarMatcher::new(g.clone());
    assert!(m.accept_token(x) && m.accept_token(a0));
    assert_eq!(
        disagreements(&mut m, &tokens),
        Vec::<String>::new(),
        "in the loop"
    );
    // Then the node after `x`, whose walk takes that subtree from the memo.
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_token(x));
    assert_eq!(
        disagreements(&mut m, &tokens),
        Vec::<String>::new(),
        "after x"
    );
    // And the same state in a grammar whose memo is empty.
    let mut m = GrammarMatcher::new(compile());
    assert!(m.accept_token(x));
    assert_eq!(
        disagreements(&mut m, &tokens),
        Vec::<String>::new(),
        "fresh, after x"
    );
}
