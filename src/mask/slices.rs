//! Vocabulary slices: token sets of a few lexeme-like languages, computed once per
//! vocabulary trie, that a mask walk takes whole instead of visiting token by token
//! (llguidance's "slices" play the same part in its mask computation).
//!
//! A slice is the set of text tokens whose bytes are a prefix of the UTF-8 encoding of a
//! string over the characters it allows: any text
//! ([`ANY_TEXT`]), JSON string contents ([`JSON_STRING`]: no `"`, `\` or control
//! character), free text that avoids `<` ([`NO_LT`]: before a `<tool_call>` trigger, say),
//! ASCII letters and digits alone ([`ALNUM`]: identifiers, `pattern`s, formats), JSON
//! string contents without `<` ([`JSON_STRING_NO_LT`]: tool arguments that refuse markers),
//! and JSON string contents without U+2028 and U+2029 ([`JSON_STRING_DOT`]: what
//! ECMA-262's `.` matches in a JSON string, so the strings and keys of `pattern`s and
//! `patternProperties` such as `.*` or `^(.)+`).
//! A token that starts with a UTF-8 continuation byte, or holds bytes that are not UTF-8,
//! is in no slice.
//!
//! The trie keeps, per slice, one bit per trie node: set when every token of the node's
//! subtree is in the slice ("pure"). When the automaton from a node `n` consumes every
//! string of a slice's language ([`consumed_depth_from`]), every token of a pure subtree is
//! accepted at `n`: the mask walk from `n` adds the subtree's tokens as one range of trie
//! positions and skips it. The walk then
//! visits only the trie nodes above a token outside the slice (for JSON string contents on
//! Llama 3.1: tokens with a quote, a backslash, a control character or a UTF-8 fragment),
//! and its result is the same as without the slice: the test
//! `a_sliced_walk_equals_the_full_walk` compares the two on every node.

use super::trie::TokenTrie;
use crate::automaton::{add_range, Automaton};

/// A slice's language: strings of the characters it allows, by the ASCII characters it
/// leaves out, and whether characters from U+0080 on are allowed (all of them, all but
/// the line and paragraph separators, or none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lang {
    /// Bit `b` set when ASCII byte `b` (0..=127) may not occur.
    pub excluded: u128,
    /// Every character from U+0080 on may occur (else none), but for the next field's.
    pub multibyte: bool,
    /// U+2028 and U+2029 (ECMA-262 line terminators, which JSON writes raw) may not occur.
    pub no_line_separators: bool,
}

/// The ASCII bytes `lo..=hi` as a set of [`Lang::excluded`].
const fn ascii(lo: u8, hi: u8) -> u128 {
    (u128::MAX >> (127 - hi as u32)) & (u128::MAX << lo as u32)
}

/// Any text: every character.
pub(crate) const ANY_TEXT: Lang = Lang {
    excluded: 0,
    multibyte: true,
    no_line_separators: false,
};

/// JSON string contents (RFC 8259 §7, unescaped): no `"` (0x22), `\` (0x5C) or control
/// character U+0000–U+001F.
pub(crate) const JSON_STRING: Lang = Lang {
    excluded: ascii(0x00, 0x1F) | (1 << 0x22) | (1 << 0x5C),
    multibyte: true,
    no_line_separators: false,
};

/// Free text without `<` (0x3C): what precedes tags such as `<tool_call>` or `<function=`.
pub(crate) const NO_LT: Lang = Lang {
    excluded: 1 << 0x3C,
    multibyte: true,
    no_line_separators: false,
};

/// JSON string contents without `<`: the argument strings of tool-call families whose
/// markers start with `<` (`<tool_call>`, `<function=`, `<|tool▁call|>` spelled as text)
/// and refuse them inside strings (`string_excludes`): a string body that avoids a marker
/// consumes every string of this language, not of [`JSON_STRING`].
pub(crate) const JSON_STRING_NO_LT: Lang = Lang {
    excluded: JSON_STRING.excluded | (1 << 0x3C),
    multibyte: true,
    no_line_separators: false,
};

/// ASCII letters and digits only: identifiers, the words of `pattern`s such as
/// `^[A-Za-z0-9_.-]+$`, e-mail addresses, host names.
pub(crate) const ALNUM: Lang = Lang {
    excluded: !(ascii(b'0', b'9') | ascii(b'A', b'Z') | ascii(b'a', b'z')),
    multibyte: false,
    no_line_separators: false,
};

/// JSON string contents without U+2028 and U+2029: the characters ECMA-262's `.` matches
/// (all but line terminators, ECMA-262 §22.2.2.7; `\n` and `\r` are control characters
/// JSON escapes anyway), written raw in a JSON string. A string or key of `pattern` `.*`
/// consumes every string of this language, not of [`JSON_STRING`].
pub(crate) const JSON_STRING_DOT: Lang = Lang {
    excluded: JSON_STRING.excluded,
    multibyte: true,
    no_line_separators: true,
};

/// The slices every trie computes, in this order.
pub(crate) const SLICES: [Lang; 6] = [
    ANY_TEXT,
    JSON_STRING,
    NO_LT,
    JSON_STRING_NO_LT,
    ALNUM,
    JSON_STRING_DOT,
];

/// One slice of a trie.
#[derive(Clone, Debug)]
pub(crate) struct Slice {
    /// Its language (tests name slices by it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub lang: Lang,
    /// Text tokens in the slice.
    pub tokens: usize,
    /// One bit per trie node (word `i / 64`, bit `i % 64`): every token of the node's
    /// subtree is in the slice.
    pub pure: Box<[u64]>,
    /// The tokens of the pure subtrees, one bit per token id (XGrammar's bitmask layout,
    /// up to the largest id of the trie): what a mask walk over the whole trie from a node
    /// that consumes the language takes whole, copied in at once rather than set token by
    /// token (a string body's hundred thousand tokens were most of its cold mask).
    pub pure_ids: Box<[u32]>,
    /// Per UTF-8 decoder state, the bytes the language allows next ([`lang_ranges`]),
    /// made once: [`consumed_depth_from`] reads them for every mask it is asked about.
    ranges: [Box<[(u8, u8, u8)]>; STATES],
}

impl Slice {
    /// True when every token of trie node `i`'s subtree is in the slice.
    #[inline]
    pub fn is_pure(&self, i: usize) -> bool {
        self.pure[i / 64] >> (i % 64) & 1 == 1
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.pure.len() * 8 + self.pure_ids.len() * 4
    }

    /// The bytes the language allows next from UTF-8 decoder state `state` (
    /// [`BOUNDARY`] at a character boundary), as ascending ranges `(lo, hi, state after)`.
    pub(crate) fn next_ranges(&self, state: u8) -> &[(u8, u8, u8)] {
        &self.ranges[state as usize]
    }
}

/// The UTF-8 decoder states of [`utf8_step`]: at a character boundary, or inside a
/// character with 1, 2 or 3 continuation bytes to come, or after a lead byte that narrows
/// the next byte's range (E0, ED, F0, F4; RFC 3629 §4).
pub(crate) const BOUNDARY: u8 = 0;
const NEED1: u8 = 1;
const NEED2: u8 = 2;
const NEED3: u8 = 3;
const AFTER_E0: u8 = 4;
const AFTER_ED: u8 = 5;
const AFTER_F0: u8 = 6;
const AFTER_F4: u8 = 7;
/// After `E2` in a language without U+2028 and U+2029 (`E2 80 A8`, `E2 80 A9`).
const AFTER_E2: u8 = 8;
/// After `E2 80` in such a language.
const AFTER_E2_80: u8 = 9;
/// The number of decoder states.
const STATES: usize = 10;

/// The decoder state after byte `b` from state `s`, or `None` when `b` cannot follow in a
/// string of the slice's language (a character it leaves out, or not UTF-8).
#[inline]
fn utf8_step(s: u8, b: u8, lang: Lang) -> Option<u8> {
    match s {
        BOUNDARY if b >= 0x80 && !lang.multibyte => None,
        BOUNDARY => match b {
            0x00..=0x7F => (lang.excluded >> b & 1 == 0).then_some(BOUNDARY),
            0xC2..=0xDF => Some(NEED1),
            0xE0 => Some(AFTER_E0),
            0xE2 if lang.no_line_separators => Some(AFTER_E2),
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
        AFTER_E2 => match b {
            0x80 => Some(AFTER_E2_80),
            0x81..=0xBF => Some(NEED1),
            _ => None,
        },
        AFTER_E2_80 => ((0x80..=0xBF).contains(&b) && b != 0xA8 && b != 0xA9).then_some(BOUNDARY),
        _ => None,
    }
}

/// True when `bytes` is a prefix of a string of the slice's language.
fn in_slice(bytes: &[u8], lang: Lang) -> bool {
    let mut s = BOUNDARY;
    for &b in bytes {
        match utf8_step(s, b, lang) {
            Some(t) => s = t,
            None => return false,
        }
    }
    true
}

/// Computes the slice of language `lang` of a trie (`bytes(position)`: the bytes of the token at that
/// position of the sorted list). Linear in the vocabulary's bytes plus the trie's nodes.
pub(crate) fn compute<'v>(trie: &TokenTrie, lang: Lang, bytes: &dyn Fn(u32) -> &'v [u8]) -> Slice {
    let n = trie.sorted.len();
    // outside[p]: tokens at positions < p that are not in the slice.
    let mut outside = Vec::with_capacity(n + 1);
    outside.push(0u32);
    let mut tokens = 0;
    for &id in &trie.sorted {
        let inside = in_slice(bytes(id), lang);
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
    // A token is in a pure subtree when its own node is pure (pure nodes' children are).
    let words = trie.sorted.iter().max().map_or(0, |&m| m as usize / 32 + 1);
    let mut pure_ids = vec![0u32; words].into_boxed_slice();
    for i in 0..nodes {
        if pure[i / 64] >> (i % 64) & 1 == 1 {
            for p in trie.tok_start[i]..trie.tok_here_end[i] {
                let id = trie.sorted[p as usize];
                pure_ids[(id / 32) as usize] |= 1 << (id % 32);
            }
        }
    }
    let ranges = std::array::from_fn(|st| lang_ranges(st as u8, lang).into_boxed_slice());
    Slice {
        lang,
        tokens,
        pure,
        pure_ids,
        ranges,
    }
}

/// States (decoder state, set of nodes) [`consumed_depth_from`] explores at most (enough for a
/// bounded repetition a longest token long, over every UTF-8 decoder state).
const MAX_PAIRS: usize = 1024;

/// Nodes a state of [`consumed_depth_from`] holds at most before it stops.
const MAX_SET: usize = 16;

/// Where [`consumed_depth_from`] starts from a node: the node with the start of every rule
/// it calls, transitively ([`closed`]), and the bytes some node of that set has an edge
/// on. Made once per node and read for every slice ([`crate::mask::cache::pick_slice`]).
pub(crate) struct Start {
    set: Vec<u32>,
    /// Bit `b % 64` of word `b / 64` set when a node of `set` has an edge on byte `b`.
    bytes: [u64; 4],
}

impl Start {
    /// The start from real node `n`; `None` when its set passes [`MAX_SET`] nodes (then
    /// [`consumed_depth_from`] is 0 for every slice).
    pub(crate) fn new(aut: &Automaton, n: u32) -> Option<Start> {
        let mut set = vec![n];
        if !closed(aut, &mut set) {
            return None;
        }
        let mut bytes = [0u64; 4];
        for &q in &set {
            for e in aut.bytes_of(q) {
                add_range(&mut bytes, e.lo, e.hi);
            }
        }
        Some(Start { set, bytes })
    }

    /// False when a byte that may start a string of `slice`'s language has no edge from
    /// the set: [`consumed_depth_from`] is then 0 (its first level fails on that byte), and
    /// need not be asked. A name's or a literal's next letter fails here for every slice,
    /// before any exploration.
    pub(crate) fn may_consume(&self, slice: &Slice) -> bool {
        slice.ranges[BOUNDARY as usize].iter().all(|&(lo, hi, _)| {
            let mut r = [0u64; 4];
            add_range(&mut r, lo, hi);
            (0..4).all(|w| r[w] & !self.bytes[w] == 0)
        })
    }
}

/// [`consumed_depth_from`] from node `n`.
#[cfg(test)]
pub(crate) fn consumed_depth(aut: &Automaton, n: u32, slice: &Slice, max_len: usize) -> usize {
    match Start::new(aut, n) {
        Some(start) => consumed_depth_from(aut, &start, slice, max_len),
        None => 0,
    }
}

/// How far the automaton, from a [`Start`] made for real node `n`, consumes every string
/// of `slice`'s language without leaving `n`'s rule: `usize::MAX` when it consumes them all
/// (a string body's loop), else the largest `k` such that it consumes every such string of
/// at most `k` bytes (a bounded repetition with `k` copies left, a pattern's `{0,254}`).
/// Every token of the slice of at most that many bytes is then accepted at `n`, whatever
/// follows.
///
/// Explores, level by level (one byte a level), the product of the UTF-8 decoder and the
/// sets of nodes a string can reach: a node's single byte step, and the start of every rule
/// a node of the set calls (a key's undeclared tail, say). A state met again is not
/// explored again: it was met first at a lower level, with more levels after it. Returns
/// into callers, virtual nodes and nodes with several edges on one byte are left out, so
/// the answer may be smaller than what the chart would consume, never larger. Stops at
/// `max_len` bytes (the longest token: enough), after [`MAX_PAIRS`] states or at a set of
/// more than [`MAX_SET`] nodes (answering the levels checked so far); fails fast on narrow
/// nodes: the first byte of the language that no node of the set has an edge on ends it.
pub(crate) fn consumed_depth_from(
    aut: &Automaton,
    start: &Start,
    slice: &Slice,
    max_len: usize,
) -> usize {
    if !start.may_consume(slice) {
        return 0;
    }
    // States, each its decoder state followed by its node set, one after another in
    // `level` (this level's) and `following` (the next one's), with their ends.
    let mut seen: rustc_hash::FxHashSet<Box<[u32]>> = Default::default();
    let mut key: Vec<u32> = Vec::with_capacity(start.set.len() + 1);
    key.push(u32::from(BOUNDARY));
    key.extend_from_slice(&start.set);
    seen.insert(key.as_slice().into());
    let (mut level, mut ends) = (key.clone(), vec![key.len()]);
    let (mut following, mut following_ends) = (Vec::new(), Vec::new());
    let mut bounds: Vec<u16> = Vec::new();
    let mut next: Vec<u32> = Vec::new();
    let mut depth = 0usize;
    while !ends.is_empty() {
        if depth >= max_len {
            return depth;
        }
        following.clear();
        following_ends.clear();
        let mut from = 0;
        for &to in &ends {
            let (s, set) = (level[from] as usize, &level[from + 1..to]);
            from = to;
            // Where an edge of a node of the set starts or ends: the language's ranges are
            // cut there, so that every piece has the same targets throughout.
            bounds.clear();
            for &q in set {
                for e in aut.bytes_of(q) {
                    bounds.extend([e.lo as u16, e.hi as u16 + 1]);
                }
            }
            bounds.sort_unstable();
            bounds.dedup();
            for &(lo, hi, s2) in slice.ranges[s].iter() {
                let end = hi as u16 + 1;
                let mut cut = bounds.partition_point(|&c| c <= lo as u16);
                let mut b = lo as u16;
                while b < end {
                    next.clear();
                    // A node with several edges on the byte (an NFA state) is left out.
                    next.extend(set.iter().filter_map(|&q| aut.dfa_step(q, b as u8)));
                    if next.is_empty() || !closed(aut, &mut next) {
                        return depth;
                    }
                    key.clear();
                    key.push(u32::from(s2));
                    key.extend_from_slice(&next);
                    if !seen.contains(key.as_slice()) {
                        if seen.len() >= MAX_PAIRS {
                            return depth;
                        }
                        seen.insert(key.as_slice().into());
                        following.extend_from_slice(&key);
                        following_ends.push(following.len());
                    }
                    b = match bounds.get(cut) {
                        Some(&c) if c < end => c,
                        _ => end,
                    };
                    cut += 1;
                }
            }
        }
        // Every string of `depth + 1` bytes is consumed.
        depth += 1;
        std::mem::swap(&mut level, &mut following);
        std::mem::swap(&mut ends, &mut following_ends);
    }
    usize::MAX
}

/// The bytes that may follow in language `lang` from decoder state `s`, as ascending
/// ranges `(lo, hi, state after)` (see [`utf8_step`]).
fn lang_ranges(s: u8, lang: Lang) -> Vec<(u8, u8, u8)> {
    let mut out: Vec<(u8, u8, u8)> = Vec::new();
    for b in 0..=255u8 {
        if let Some(t) = utf8_step(s, b, lang) {
            match out.last_mut() {
                Some(last) if last.1 as u16 + 1 == b as u16 && last.2 == t => last.1 = b,
                _ => out.push((b, b, t)),
            }
        }
    }
    out
}

/// Adds to `set` the start node of every rule its nodes call, transitively, then sorts
/// it and drops repeats. False past [`MAX_SET`] nodes (the set then partly extended).
fn closed(aut: &Automaton, set: &mut Vec<u32>) -> bool {
    let mut i = 0;
    while i < set.len() {
        for c in aut.calls_of(set[i]) {
            let st = aut.rule_start[c.rule as usize];
            if !set.contains(&st) {
                set.push(st);
            }
        }
        if set.len() > MAX_SET {
            return false;
        }
        i += 1;
    }
    set.sort_unstable();
    set.dedup();
    true
}

/// The exploration as first written (cuts per range, a scan of the edges per piece,
/// a copy per state): what [`consumed_depth`] must answer.
#[cfg(test)]
pub(crate) fn consumed_depth_reference(
    aut: &Automaton,
    n: u32,
    slice: &Slice,
    max_len: usize,
) -> usize {
    let mut next = vec![n];
    if !closed(aut, &mut next) {
        return 0;
    }
    // A state is its decoder state followed by its node set, in one slice: a state met
    // again is looked up without a copy (most steps lead to a state already met).
    let state = |s: u8, set: &[u32]| -> Box<[u32]> {
        std::iter::once(u32::from(s))
            .chain(set.iter().copied())
            .collect()
    };
    let start = state(BOUNDARY, &next);
    let mut seen: rustc_hash::FxHashSet<Box<[u32]>> = Default::default();
    seen.insert(start.clone());
    let mut level = vec![start];
    let mut cuts: Vec<u16> = Vec::new();
    let mut key: Vec<u32> = Vec::new();
    let mut depth = 0usize;
    while !level.is_empty() {
        if depth >= max_len {
            return depth;
        }
        let mut following = Vec::new();
        for st in &level {
            let (s, set) = (st[0] as usize, &st[1..]);
            // The bytes the language allows next, as ranges with one decoder state each;
            // each range is cut where an edge of a node of the set starts or ends, so that
            // every piece has the same targets throughout.
            for &(lo, hi, s2) in slice.ranges[s].iter() {
                cuts.clear();
                cuts.push(lo as u16);
                cuts.push(hi as u16 + 1);
                for &q in set {
                    for e in aut.bytes_of(q) {
                        for c in [e.lo as u16, e.hi as u16 + 1] {
                            if c > lo as u16 && c <= hi as u16 {
                                cuts.push(c);
                            }
                        }
                    }
                }
                cuts.sort_unstable();
                cuts.dedup();
                for w in cuts.windows(2) {
                    let b = w[0] as u8;
                    next.clear();
                    for &q in set {
                        let mut on_b = aut.bytes_of(q).iter().filter(|e| e.lo <= b && b <= e.hi);
                        // A node with several edges on `b` (an NFA state) is left out.
                        if let (Some(e), None) = (on_b.next(), on_b.next()) {
                            next.push(e.target);
                        }
                    }
                    if next.is_empty() || !closed(aut, &mut next) {
                        return depth;
                    }
                    key.clear();
                    key.push(u32::from(s2));
                    key.extend_from_slice(&next);
                    if !seen.contains(key.as_slice()) {
                        if seen.len() >= MAX_PAIRS {
                            return depth;
                        }
                        let t: Box<[u32]> = key.as_slice().into();
                        seen.insert(t.clone());
                        following.push(t);
                    }
                }
            }
        }
        // Every string of `depth + 1` bytes is consumed.
        depth += 1;
        level = following;
    }
    usize::MAX
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
        assert!(in_slice(b"Abc123", ALNUM));
        assert!(!in_slice(b"abc_1", ALNUM));
        assert!(!in_slice(b" abc", ALNUM));
        assert!(!in_slice("é".as_bytes(), ALNUM));
        // `.`'s characters: all but the line and paragraph separators.
        assert!(in_slice("a\u{2027}b€é😀".as_bytes(), JSON_STRING_DOT));
        assert!(!in_slice("a\u{2028}".as_bytes(), JSON_STRING_DOT));
        assert!(!in_slice("\u{2029}b".as_bytes(), JSON_STRING_DOT));
        assert!(in_slice("a\u{2028}".as_bytes(), JSON_STRING));
        assert!(!in_slice(b"a\"", JSON_STRING_DOT));
        // A separator cut at the token's end is a prefix of another character.
        assert!(in_slice(&"\u{2028}".as_bytes()[..2], JSON_STRING_DOT));
        assert!(!in_slice(&[0xE2, 0x80, 0xC0], JSON_STRING_DOT));
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
        // The pure subtrees' tokens by id: `ab` (under the impure `a`), `b` and `bc`; not
        // `a"`, `"` or `c\n`, nor any id past the vocabulary.
        let ids: Vec<u32> = (0..s.pure_ids.len() as u32 * 32)
            .filter(|&i| s.pure_ids[(i / 32) as usize] >> (i % 32) & 1 == 1)
            .collect();
        assert_eq!(ids, [0, 2, 3]);
    }
}
