//! Vocabulary slices: token sets of a few lexeme-like languages, computed once per
//! vocabulary trie, that a mask walk takes whole instead of visiting token by token
//! (llguidance's "slices" play the same part in its mask computation).
//!
//! A slice is the set of text tokens whose bytes are a prefix of the UTF-8 encoding of a
//! string over every character except a given set of ASCII characters: any text
//! ([`ANY_TEXT`]), JSON string contents ([`JSON_STRING`]: no `"`, `\` or control
//! character), free text that avoids `<` ([`NO_LT`]: before a `<tool_call>` trigger, say).
//! A token that starts with a UTF-8 continuation byte, or holds bytes that are not UTF-8,
//! is in no slice.
//!
//! The trie keeps, per slice, one bit per trie node: set when every token of the node's
//! subtree is in the slice ("pure"). When the automaton from a node `n` consumes every
//! string of a slice's language, through nodes that step as DFA states
//! ([`subsumes`]), every token of a pure subtree is accepted at `n`: the mask walk from `n`
//! adds the subtree's tokens as one range of trie positions and skips it. The walk then
//! visits only the trie nodes above a token outside the slice (for JSON string contents on
//! Llama 3.1: tokens with a quote, a backslash, a control character or a UTF-8 fragment),
//! and its result is the same as without the slice: the test
//! `a_sliced_walk_equals_the_full_walk` compares the two on every node.

use super::trie::TokenTrie;
use crate::automaton::Automaton;

/// A slice's language, by the ASCII characters it leaves out: bit `b` of the `u128` set
/// when ASCII byte `b` (0..=127) may not occur. Every character from U+0080 on may.
pub(crate) type Excluded = u128;

/// Any text: no character excluded.
pub(crate) const ANY_TEXT: Excluded = 0;

/// JSON string contents (RFC 8259 §7, unescaped): no `"` (0x22), `\` (0x5C) or control
/// character U+0000–U+001F.
pub(crate) const JSON_STRING: Excluded = 0xFFFF_FFFF | (1 << 0x22) | (1 << 0x5C);

/// Free text without `<` (0x3C): what precedes tags such as `<tool_call>` or `<function=`.
pub(crate) const NO_LT: Excluded = 1 << 0x3C;

/// The slices every trie computes, in this order.
pub(crate) const SLICES: [Excluded; 3] = [ANY_TEXT, JSON_STRING, NO_LT];

/// One slice of a trie.
#[derive(Clone, Debug)]
pub(crate) struct Slice {
    /// The ASCII characters left out.
    pub excluded: Excluded,
    /// Text tokens in the slice.
    pub tokens: usize,
    /// One bit per trie node (word `i / 64`, bit `i % 64`): every token of the node's
    /// subtree is in the slice.
    pub pure: Box<[u64]>,
}

impl Slice {
    /// True when every token of trie node `i`'s subtree is in the slice.
    #[inline]
    pub fn is_pure(&self, i: usize) -> bool {
        self.pure[i / 64] >> (i % 64) & 1 == 1
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.pure.len() * 8
    }
}

/// The UTF-8 decoder states of [`utf8_step`]: at a character boundary, or inside a
/// character with 1, 2 or 3 continuation bytes to come, or after a lead byte that narrows
/// the next byte's range (E0, ED, F0, F4; RFC 3629 §4).
const BOUNDARY: u8 = 0;
const NEED1: u8 = 1;
const NEED2: u8 = 2;
const NEED3: u8 = 3;
const AFTER_E0: u8 = 4;
const AFTER_ED: u8 = 5;
const AFTER_F0: u8 = 6;
const AFTER_F4: u8 = 7;

/// The decoder state after byte `b` from state `s`, or `None` when `b` cannot follow in a
/// string of the slice's language (`excluded` ASCII characters, or not UTF-8).
#[inline]
fn utf8_step(s: u8, b: u8, excluded: Excluded) -> Option<u8> {
    match s {
        BOUNDARY => match b {
            0x00..=0x7F => (excluded >> b & 1 == 0).then_some(BOUNDARY),
            0xC2..=0xDF => Some(NEED1),
            0xE0 => Some(AFTER_E0),
            0xED => Some(AFTER_ED),
            0xE1..=0xEF => Some(NEED2),
            0xF0 => Some(AFTER_F0),
            0xF4 => Some(AFTER_F4),
            0xF1..=0xF3 => Some(NEED3),
            _ => None,
        },
        NEED1 | NEED2 | NEED3 => (0x80..=0xBF).contains(&b).then_some(s - 1),
        AFTER_E0 => (0xA0..=0xBF).contains(&b).then_some(NEED1),
        AFTER_ED => (0x80..=0x9F).contains(&b).then_some(NEED1),
        AFTER_F0 => (0x90..=0xBF).contains(&b).then_some(NEED2),
        AFTER_F4 => (0x80..=0x8F).contains(&b).then_some(NEED2),
        _ => None,
    }
}

/// True when `bytes` is a prefix of a string of the slice's language.
fn in_slice(bytes: &[u8], excluded: Excluded) -> bool {
    let mut s = BOUNDARY;
    for &b in bytes {
        match utf8_step(s, b, excluded) {
            Some(t) => s = t,
            None => return false,
        }
    }
    true
}

/// Computes slice `excluded` of a trie (`bytes(position)`: the bytes of the token at that
/// position of the sorted list). Linear in the vocabulary's bytes plus the trie's nodes.
pub(crate) fn compute<'v>(
    trie: &TokenTrie,
    excluded: Excluded,
    bytes: &dyn Fn(u32) -> &'v [u8],
) -> Slice {
    let n = trie.sorted.len();
    // outside[p]: tokens at positions < p that are not in the slice.
    let mut outside = Vec::with_capacity(n + 1);
    outside.push(0u32);
    let mut tokens = 0;
    for &id in &trie.sorted {
        let inside = in_slice(bytes(id), excluded);
        tokens += inside as usize;
        let last = *outside.last().unwrap_or(&0);
        outside.push(last + !inside as u32);
    }
    let nodes = trie.byte.len();
    let mut pure = vec![0u64; nodes.div_ceil(64)].into_boxed_slice();
    for i in 0..nodes {
        let a = trie.tok_start[i] as usize;
        let z = trie.tok_start[trie.subtree_end[i] as usize] as usize;
        if outside[z] == outside[a] {
            pure[i / 64] |= 1 << (i % 64);
        }
    }
    Slice {
        excluded,
        tokens,
        pure,
    }
}

/// Pairs (decoder state, node) [`subsumes`] explores at most before it answers no.
const MAX_PAIRS: usize = 512;

/// True when the automaton, from real node `n`, consumes every string of slice `excluded`'s
/// language by steps between nodes that step as DFA states (`is_dfa`): every token of the
/// slice is then accepted at `n`, whatever follows. Explores the product of the UTF-8
/// decoder and the automaton from (character boundary, `n`); answers no after
/// [`MAX_PAIRS`] pairs. Fails fast on narrow nodes: the first byte of the language that
/// `n` has no edge on ends it.
pub(crate) fn subsumes(
    aut: &Automaton,
    n: u32,
    excluded: Excluded,
    is_dfa: &dyn Fn(u32) -> bool,
) -> bool {
    if !is_dfa(n) {
        return false;
    }
    let mut seen: rustc_hash::FxHashSet<(u8, u32)> = Default::default();
    let mut stack = vec![(BOUNDARY, n)];
    seen.insert((BOUNDARY, n));
    while let Some((s, q)) = stack.pop() {
        for b in 0..=255u8 {
            let Some(s2) = utf8_step(s, b, excluded) else {
                continue;
            };
            let Some(t) = aut.dfa_step(q, b) else {
                return false;
            };
            if seen.insert((s2, t)) {
                if seen.len() > MAX_PAIRS || !is_dfa(t) {
                    return false;
                }
                stack.push((s2, t));
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_membership_follows_utf8_and_the_excluded_characters() {
        assert!(in_slice(b"hello world", JSON_STRING));
        assert!(!in_slice(b"say \"hi", JSON_STRING));
        assert!(!in_slice(b"a\\n", JSON_STRING));
        assert!(!in_slice(b"line\n", JSON_STRING));
        assert!(in_slice(b"line\n", ANY_TEXT));
        assert!(in_slice("é".as_bytes(), JSON_STRING));
        // A character cut at the token's end is a prefix of the language.
        assert!(in_slice(&"é".as_bytes()[..1], JSON_STRING));
        assert!(in_slice(&"😀".as_bytes()[..3], ANY_TEXT));
        // A continuation byte first, an overlong lead, a surrogate: not UTF-8.
        assert!(!in_slice(&"é".as_bytes()[1..], ANY_TEXT));
        assert!(!in_slice(&[0xC0, 0x80], ANY_TEXT));
        assert!(!in_slice(&[0xED, 0xA0, 0x80], ANY_TEXT));
        assert!(!in_slice(&[0xF5], ANY_TEXT));
        assert!(!in_slice(b"a<b", NO_LT));
        assert!(in_slice(b"a>b\"", NO_LT));
    }

    #[test]
    fn pure_nodes_hold_only_slice_tokens() {
        let tokens: Vec<&[u8]> = vec![b"ab", b"a\"", b"b", b"bc", b"\"", b"c\n"];
        let v = crate::vocab::Vocabulary::from_token_bytes(&tokens, &[], &[]).unwrap();
        let trie = TokenTrie::new(&v);
        let bytes = |id: u32| v.token_bytes(id).unwrap_or(&[]);
        let s = compute(&trie, JSON_STRING, &bytes);
        assert_eq!(s.tokens, 3, "ab, b, bc");
        let node = |path: &[u8]| {
            (0..trie.byte.len())
                .find(|&i| {
                    let d = trie.depth[i] as usize;
                    d == path.len()
                        && trie.byte[i] == path[d - 1]
                        && (0..trie.sorted.len()).any(|p| {
                            bytes(trie.sorted[p]).starts_with(path)
                                && (trie.tok_start[i] as usize
                                    ..trie.tok_start[trie.subtree_end[i] as usize] as usize)
                                    .contains(&p)
                        })
                })
                .unwrap()
        };
        assert!(!s.is_pure(node(b"a")), "a\" is under a");
        assert!(s.is_pure(node(b"ab")));
        assert!(s.is_pure(node(b"b")));
        assert!(!s.is_pure(node(b"\"")));
        assert!(!s.is_pure(node(b"c")));
    }
}
