//! Masks of the virtual nodes of counted repetitions (`body{m,n}`, see
//! `automaton::Counted`), derived from one trie walk per body state instead of one per
//! count (and a final body state without edges takes state 0's walk, restarted:
//! [`restarted`]).
//!
//! A virtual node is "`c` iterations done, in body state `s`"; its masks depend on `s` and
//! on the distances to `min` and `max` (`Counted::mask_key`), so `{24,24}` has a different
//! mask at every count and a full chart walk of a 128k vocabulary costs ~10 ms each. When
//! the repetition is deterministic (`Counted::is_deterministic`), a token has one path
//! through it whatever the count: its bytes step the body DFA, starting the next iteration
//! where the current one ends, and the count only matters in two places:
//!
//! * the path is cut at its `to_max`-th restart (`c + i < max` allows restart `i`), and
//! * the rule may end after `k` bytes only once `r_k + 1 >= to_min` (`r_k`: restarts in
//!   the first `k` bytes).
//!
//! So one walk with no bounds at all (the *base*: every restart allowed, every end of an
//! iteration an exit) gives each node's mask as an edit: accepted are the base's accepted
//! tokens with fewer than `to_max` restarts; the others, and the base's uncertain tokens,
//! are run again through the body DFA with the bounds (a few bytes each). Base tokens
//! rejected stay rejected: bounds only take exits and restarts away.

use std::sync::Arc;

use super::cache::{token_set, NodeMask};
use super::trie::TokenTrie;
use crate::automaton::{byte_in, Counted};
use crate::limits::Deadline;

/// No edge on that byte.
const NONE: u32 = u32::MAX;

/// Restart counts are kept up to this; a token with more is run again when it matters.
const SATURATED: u8 = u8::MAX;

/// A deterministic counted repetition's body DFA as dense tables: one per counted rule,
/// shared by the base walks of all its body states ([`body_dfa`]; a body of a few
/// thousand states takes megabytes, and a grammar may walk a base per state).
#[derive(Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct BodyDfa {
    /// `S * 256` entries: the body state reached from state `s` on byte `b`, or [`NONE`].
    #[serde(with = "super::wire::words")]
    next: Box<[u32]>,
    /// Per body state: an iteration may end there.
    fin: Box<[bool]>,
    /// Bytes that may follow the rule.
    follow: [u64; 4],
}

/// Where byte `b` leads from body state `s`, and whether it starts the next iteration
/// there; `None` when nowhere.
#[inline]
fn step(dfa: &BodyDfa, s: u32, b: u8) -> Option<(u32, bool)> {
    let t = dfa.next[s as usize * 256 + b as usize];
    if t != NONE {
        return Some((t, false));
    }
    if dfa.fin[s as usize] {
        let t = dfa.next[b as usize];
        if t != NONE {
            return Some((t, true));
        }
    }
    None
}

/// The unbounded walk of one body state: what every virtual node at that state derives
/// its masks from.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct CountedBase {
    #[serde(serialize_with = "write_dfa", deserialize_with = "read_dfa")]
    dfa: Arc<BodyDfa>,
    /// The body state the walk starts in.
    state: u32,
    /// Ids of the tokens consumed whole with any number of restarts (`words` words).
    #[serde(with = "super::wire::words")]
    bits: Box<[u32]>,
    count: usize,
    /// Per trie position: restarts the token needs when accepted (0 otherwise), at most
    /// [`SATURATED`] (then maybe more).
    restarts: Box<[u8]>,
    /// The largest of `restarts`.
    max_restarts: u8,
    /// Some accepted token passes an exit on its way (an iteration end followed by a
    /// byte that may follow the rule): cut tokens must be run again, not just dropped.
    exits_inside: bool,
    /// Trie positions of the uncertain tokens, ascending.
    #[serde(with = "super::wire::gaps")]
    uncertain: Box<[u32]>,
}

/// Writes a base's body DFA whole (each base read back gets its own copy).
fn write_dfa<S: serde::Serializer>(dfa: &Arc<BodyDfa>, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&**dfa, s)
}

/// Reads a base's body DFA.
fn read_dfa<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Arc<BodyDfa>, D::Error> {
    <BodyDfa as serde::Deserialize>::deserialize(d).map(Arc::new)
}

impl BodyDfa {
    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.next.len() * 4 + self.fin.len()
    }
}

impl CountedBase {
    /// Its body DFA (shared with the other bases of its counted rule).
    pub(crate) fn dfa(&self) -> &Arc<BodyDfa> {
        &self.dfa
    }

    /// The same base over another DFA (tests forge bytes with it).
    #[cfg(test)]
    pub(crate) fn with_dfa(&self, dfa: Arc<BodyDfa>) -> CountedBase {
        let bytes = postcard::to_allocvec(self).expect("a base serializes");
        let mut b: CountedBase = postcard::from_bytes(&bytes).expect("and reads back");
        b.dfa = dfa;
        b
    }

    /// Everything but the DFA, for tests to compare bases.
    #[cfg(test)]
    #[allow(clippy::type_complexity)]
    pub(crate) fn parts(&self) -> (u32, &[u32], usize, &[u8], u8, bool, &[u32]) {
        (
            self.state,
            &self.bits,
            self.count,
            &self.restarts,
            self.max_restarts,
            self.exits_inside,
            &self.uncertain,
        )
    }

    /// Holds `dfa` (equal to its own) instead: the bases of a rule read back from bytes
    /// share one copy again.
    pub(crate) fn share_dfa(&mut self, dfa: &Arc<BodyDfa>) {
        debug_assert!(*self.dfa == **dfa);
        self.dfa = dfa.clone();
    }

    /// Every index in range, for a base read from bytes: the DFA's tables agree in size
    /// (at least one state) and lead to states, the start is a state, the bitset has
    /// `words` words, and the per-position tables cover the trie's `trie_len` positions.
    pub(crate) fn check_indices(&self, trie_len: usize, words: usize) -> Result<(), String> {
        let states = self.dfa.fin.len();
        if states == 0 || self.dfa.next.len() != states * 256 {
            return Err(format!(
                "{} transitions for {states} body states",
                self.dfa.next.len()
            ));
        }
        if self
            .dfa
            .next
            .iter()
            .any(|&t| t != NONE && t as usize >= states)
            || self.state as usize >= states
        {
            return Err("a body state out of range".into());
        }
        if self.bits.len() != words || self.restarts.len() != trie_len {
            return Err("tables of the wrong length".into());
        }
        let count: usize = self.bits.iter().map(|w| w.count_ones() as usize).sum();
        let max = self.restarts.iter().copied().max().unwrap_or(0);
        if count != self.count || max != self.max_restarts {
            return Err("counts that do not match the tables".into());
        }
        let ascending = self.uncertain.windows(2).all(|w| w[0] < w[1]);
        if !ascending
            || self
                .uncertain
                .last()
                .is_some_and(|&p| p as usize >= trie_len)
        {
            return Err("uncertain positions out of range or not ascending".into());
        }
        Ok(())
    }

    /// Heap bytes held, its body DFA not included (shared by the bases of its rule:
    /// [`CountedBase::dfa`], [`BodyDfa::memory_bytes`]).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.bits.len() * 4 + self.restarts.len() + self.uncertain.len() * 4 + 128
    }
}

/// True when the virtual masks of `cnt` can be derived here: a deterministic repetition.
pub(crate) fn derivable(cnt: &Counted) -> bool {
    cnt.is_deterministic()
}

/// The key of the base walk of `cnt` from body state `s` with `follow` in the masks
/// shared across grammars: the body DFA, the state and the follow set are all it depends
/// on (besides the vocabulary, one per compiler).
pub(crate) fn base_key(cnt: &Counted, s: u32, follow: &[u64; 4]) -> Box<[u64]> {
    // A tag no `Automaton::class_keys` key starts with keeps the two kinds apart.
    let mut key = vec![0xc0c0_7ed0_ba5e_0000, s as u64, cnt.states as u64];
    key.extend_from_slice(follow);
    for st in 0..cnt.states {
        let edges = cnt.edges_of(st);
        key.push((cnt.body_final[st as usize] as u64) << 32 | edges.len() as u64);
        key.extend(
            edges
                .iter()
                .map(|e| (e.lo as u64) << 40 | (e.hi as u64) << 32 | e.target as u64),
        );
    }
    key.into_boxed_slice()
}

/// The body DFA of `cnt` as dense tables, `follow` the bytes that may follow its rule.
pub(crate) fn body_dfa(cnt: &Counted, follow: &[u64; 4]) -> Arc<BodyDfa> {
    let states = cnt.states as usize;
    let mut next = vec![NONE; states * 256].into_boxed_slice();
    for st in 0..cnt.states {
        for e in cnt.edges_of(st) {
            let row = st as usize * 256;
            next[row + e.lo as usize..=row + e.hi as usize].fill(e.target);
        }
    }
    Arc::new(BodyDfa {
        next,
        fin: cnt.body_final.clone().into_boxed_slice(),
        follow: *follow,
    })
}

/// How a counted rule's body reads the strings of one vocabulary slice's language, when it
/// reads each character as one iteration: from body state 0, every byte the language
/// allows steps (never out of the body), a character's first byte restarts (but from
/// state 0, where the walk starts), its other bytes do not, state 0 is never entered
/// again, and no such byte may follow the rule. Then a token of the slice read from a
/// body state at a character boundary restarts once per character (its
/// [`TokenTrie::leads`], one fewer from state 0) and ends no iteration before a byte
/// that may follow: a walk takes a pure subtree whole.
struct SliceReading<'t> {
    slice: &'t super::slices::Slice,
    /// Per body state: met at a character boundary (and never inside one).
    boundary: Vec<bool>,
}

/// The [`SliceReading`] of `dfa` over the trie's slice with the most tokens that it reads
/// that way, if any.
fn slice_reading<'t>(dfa: &BodyDfa, trie: &'t TokenTrie) -> Option<SliceReading<'t>> {
    use super::slices::BOUNDARY;
    let states = dfa.fin.len();
    let reads = |slice: &super::slices::Slice| -> Option<Vec<bool>> {
        // The UTF-8 decoder state each body state is met in (one only).
        let mut met: Vec<Option<u8>> = vec![None; states];
        met[0] = Some(BOUNDARY);
        let mut stack = vec![(BOUNDARY, 0u32)];
        while let Some((u, q)) = stack.pop() {
            for &(lo, hi, u2) in slice.next_ranges(u) {
                for b in lo..=hi {
                    if byte_in(&dfa.follow, b) {
                        return None;
                    }
                    let (q2, restart) = step(dfa, q, b)?;
                    if q2 == 0 || restart != (u == BOUNDARY && q != 0) {
                        return None;
                    }
                    match met[q2 as usize] {
                        None => {
                            met[q2 as usize] = Some(u2);
                            stack.push((u2, q2));
                        }
                        Some(seen) if seen == u2 => {}
                        Some(_) => return None,
                    }
                }
            }
        }
        Some(met.iter().map(|&m| m == Some(BOUNDARY)).collect())
    };
    trie.slices
        .iter()
        .filter_map(|slice| Some((slice, reads(slice)?)))
        .max_by_key(|(slice, _)| slice.tokens)
        .map(|(slice, boundary)| SliceReading { slice, boundary })
}

#[cfg(test)]
thread_local! {
    /// Base walks made on this thread (tests check that a base was derived instead).
    pub(crate) static WALKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The unbounded walk of `cnt` from body state `s` (`s == cnt.states`: the rule's start),
/// over `dfa`, its [`body_dfa`] (shared by the walks of one rule), taking a slice's pure
/// subtrees whole when `sliced` and the body reads the slice a character an iteration
/// ([`SliceReading`]; tests walk with `sliced` off to compare). `None` when `deadline`
/// passed (looked at every 1024 trie nodes). `cnt` must be [`derivable`].
pub(crate) fn counted_base(
    cnt: &Counted,
    s: u32,
    dfa: Arc<BodyDfa>,
    trie: &TokenTrie,
    words: usize,
    deadline: &Deadline,
    sliced: bool,
) -> Option<CountedBase> {
    #[cfg(test)]
    WALKS.with(|w| w.set(w.get() + 1));
    let follow = &dfa.follow;
    // The rule's start steps as body state 0, which is not final (the body is not
    // nullable): no iteration ends there either.
    let state = if s == cnt.states { 0 } else { s };
    let mut bits = vec![0u32; words].into_boxed_slice();
    let mut count = 0usize;
    let mut restarts = vec![0u8; trie.token_count()].into_boxed_slice();
    let mut max_restarts = 0u8;
    let mut exits_inside = false;
    let mut uncertain: Vec<u32> = Vec::new();
    // Per depth d (bytes consumed): body state, restarts (saturated), and as in
    // `cache::walk`: an iteration ends after d >= 1 bytes (`exit`), one ended after some k
    // in 1..d bytes with byte k + 1 a follow byte (`ok`).
    // `leads`: the UTF-8 lead bytes read so far (for [`SliceReading`]).
    #[derive(Clone, Copy)]
    struct Frame {
        state: u32,
        restarts: u8,
        exit: bool,
        ok: bool,
        leads: u16,
    }
    let max_depth = trie.max_depth;
    let mut frames = vec![
        Frame {
            state,
            restarts: 0,
            exit: false,
            ok: false,
            leads: 0,
        };
        max_depth + 1
    ];
    // Only from a state the reading met at a boundary: every slice string read from it
    // then stays within what the reading checked.
    let reading = slice_reading(&dfa, trie).filter(|r| sliced && r.boundary[state as usize]);
    let n = trie.byte.len();
    let mut i = 0usize;
    let mut visits = 0usize;
    // Cost: one table lookup per trie node visited; failed subtrees are skipped whole, and
    // so are subtrees of a slice the body reads a character an iteration (one pass over
    // their tokens).
    while i < n {
        visits += 1;
        if visits % 1024 == 0 && deadline.expired() {
            return None;
        }
        let d = trie.depth[i] as usize;
        let up = frames[d - 1];
        if let Some(r) = &reading {
            if r.boundary[up.state as usize] && r.slice.is_pure(i) {
                let end = trie.subtree_end[i] as usize;
                let (a, z) = (trie.tok_start[i], trie.tok_start[end]);
                // One restart per character below this node, but the first from state 0
                // (which starts the first iteration).
                let (add, sub) = (up.restarts as u32, up.leads as u32 + (up.state == 0) as u32);
                let mut most = 0u8;
                for p in a..z {
                    let id = trie.sorted[p as usize];
                    bits[(id / 32) as usize] |= 1 << (id % 32);
                    let rs = (add + trie.leads[p as usize] as u32)
                        .saturating_sub(sub)
                        .min(SATURATED as u32) as u8;
                    restarts[p as usize] = rs;
                    most = most.max(rs);
                }
                if z > a {
                    count += (z - a) as usize;
                    max_restarts = max_restarts.max(most);
                    exits_inside |= up.ok;
                }
                i = end;
                continue;
            }
        }
        let b = trie.byte[i];
        let ok_before = up.ok || (d >= 2 && up.exit && byte_in(follow, b));
        match step(&dfa, up.state, b) {
            Some((t, restart)) => {
                let r = (up.restarts as u32 + restart as u32).min(SATURATED as u32) as u8;
                let (a, z) = (trie.tok_start[i], trie.tok_here_end[i]);
                if z > a {
                    for p in a..z {
                        let id = trie.sorted[p as usize];
                        bits[(id / 32) as usize] |= 1 << (id % 32);
                        restarts[p as usize] = r;
                    }
                    count += (z - a) as usize;
                    max_restarts = max_restarts.max(r);
                    exits_inside |= ok_before;
                }
                frames[d] = Frame {
                    state: t,
                    restarts: r,
                    exit: dfa.fin[t as usize],
                    ok: ok_before,
                    leads: up.leads + (b & 0xC0 != 0x80) as u16,
                };
                i += 1;
            }
            None => {
                let end = trie.subtree_end[i] as usize;
                if ok_before {
                    uncertain.extend(trie.tok_start[i]..trie.tok_start[end]);
                }
                i = end;
            }
        }
    }
    Some(CountedBase {
        dfa,
        state,
        bits,
        count,
        restarts,
        max_restarts,
        exits_inside,
        uncertain: uncertain.into_boxed_slice(),
    })
}

/// The base of body state `s`, final and without edges (after a character of a string
/// body, say), from `zero`, the base of body state 0: every first byte from `s` restarts
/// into the state that state 0 steps to on it, so the walk is state 0's with one restart
/// more for every accepted token (saturating), the same tokens and the same uncertain
/// ones. Costs one pass over the positions instead of a walk of the whole trie.
pub(crate) fn restarted(zero: &CountedBase, s: u32, trie: &TokenTrie) -> CountedBase {
    debug_assert_eq!(zero.state, 0);
    debug_assert!(zero.dfa.fin[s as usize]);
    debug_assert!(zero.dfa.next[s as usize * 256..][..256]
        .iter()
        .all(|&t| t == NONE));
    let bits = zero.bits.clone();
    let accepted = |p: usize| {
        let id = trie.sorted[p];
        bits[(id / 32) as usize] & (1 << (id % 32)) != 0
    };
    let restarts: Box<[u8]> = zero
        .restarts
        .iter()
        .enumerate()
        .map(|(p, &r)| match r {
            0 if !accepted(p) => 0,
            r => r.saturating_add(1),
        })
        .collect();
    let max_restarts = restarts.iter().copied().max().unwrap_or(0);
    CountedBase {
        dfa: zero.dfa.clone(),
        state: s,
        bits,
        count: zero.count,
        restarts,
        max_restarts,
        exits_inside: zero.exits_inside,
        uncertain: zero.uncertain.clone(),
    }
}

/// What a token is from a virtual node: accepted, uncertain, or rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Accepted,
    Uncertain,
    Rejected,
}

/// Runs `bytes` from `base`'s state with the bounds `to_min`, `to_max` (as
/// `Counted::mask_key`): the verdict of a chart walk from that virtual node.
fn verdict(base: &CountedBase, bytes: &[u8], to_min: u32, to_max: u32) -> Verdict {
    let dfa = &base.dfa;
    let mut s = base.state;
    let mut r = 0u32;
    let mut exit = false;
    let mut ok = false;
    for (k, &b) in bytes.iter().enumerate() {
        let ok_before = ok || (k >= 1 && exit && byte_in(&dfa.follow, b));
        match step(dfa, s, b) {
            Some((t, restart)) if !restart || r + 1 < to_max => {
                r += restart as u32;
                s = t;
                exit = dfa.fin[t as usize] && r + 1 >= to_min;
                ok = ok_before;
            }
            _ => {
                return if ok_before {
                    Verdict::Uncertain
                } else {
                    Verdict::Rejected
                }
            }
        }
    }
    Verdict::Accepted
}

/// The mask of the virtual node at `base`'s state with bounds `to_min`, `to_max` (as
/// `Counted::mask_key`), as `cache::compute_node_mask` would walk it.
pub(crate) fn derive_mask(
    base: &CountedBase,
    to_min: u32,
    to_max: u32,
    trie: &TokenTrie,
    words: usize,
) -> NodeMask {
    let mut bits = base.bits.clone();
    let mut count = base.count;
    let mut again: Vec<u32> = Vec::new();
    // Cost: one pass over the positions when some token is cut, then a DFA run of a few
    // bytes per token run again.
    let cut_from = to_max.min(SATURATED as u32);
    if base.max_restarts as u32 >= cut_from {
        // Chunks with no restart count that high are skipped on their maximum (which
        // vectorizes): most tokens are a few characters long.
        const CHUNK: usize = 64;
        let hits = base
            .restarts
            .chunks(CHUNK)
            .enumerate()
            .filter(|(_, c)| c.iter().copied().max().unwrap_or(0) as u32 >= cut_from)
            .flat_map(|(k, c)| c.iter().enumerate().map(move |(j, &r)| (k * CHUNK + j, r)));
        for (p, r) in hits {
            if (r as u32) < cut_from {
                continue;
            }
            if r == SATURATED && to_max > SATURATED as u32 {
                // Maybe fewer restarts than `to_max`: run it.
                let bytes = trie.bytes_at(p as u32);
                match verdict(base, bytes, to_min, to_max) {
                    Verdict::Accepted => continue,
                    Verdict::Uncertain => again.push(p as u32),
                    Verdict::Rejected => {}
                }
            } else if base.exits_inside {
                again.push(p as u32);
            }
            let id = trie.sorted[p];
            bits[(id / 32) as usize] &= !(1 << (id % 32));
            count -= 1;
        }
    }
    let uncertain_of = |p: u32| {
        let bytes = trie.bytes_at(p);
        let v = verdict(base, bytes, to_min, to_max);
        debug_assert_ne!(v, Verdict::Accepted);
        v == Verdict::Uncertain
    };
    let mut uncertain: Vec<u32> = again.into_iter().filter(|&p| uncertain_of(p)).collect();
    let cut = uncertain.len();
    uncertain.extend(base.uncertain.iter().copied().filter(|&p| uncertain_of(p)));
    if cut > 0 {
        uncertain.sort_unstable();
    }
    NodeMask {
        accepted: token_set(trie, bits, count, words),
        uncertain,
    }
}

#[cfg(test)]
mod tests {
    use crate::compiler::CompiledGrammar;
    use crate::mask::cache::{compute_node_mask, NodeMask, SubtreeMemo};
    use crate::{limits::Deadline, GrammarCompiler, Vocabulary};

    /// A vocabulary of every string of up to 2 bytes over a small alphabet, plus longer
    /// pseudo-random ones (up to 60 bytes: past the bounds below, so counts cut them).
    fn vocab() -> Vocabulary {
        let alphabet: &[u8] = b"abcxy\"\\n\xc3\xa9";
        let mut tokens: Vec<Vec<u8>> = Vec::new();
        for &a in alphabet {
            tokens.push(vec![a]);
            for &b in alphabet {
                tokens.push(vec![a, b]);
            }
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..3000 {
            let len = 3 + (next() % 58) as usize;
            // Mostly letters, so long tokens stay inside the repetitions.
            let t: Vec<u8> = (0..len)
                .map(|_| match next() % 16 {
                    0 => alphabet[(next() % alphabet.len() as u64) as usize],
                    k => b"abc"[(k % 3) as usize],
                })
                .collect();
            tokens.push(t);
        }
        tokens.sort();
        tokens.dedup();
        tokens.push(b"</s>".to_vec());
        let stop = tokens.len() as u32 - 1;
        Vocabulary::from_token_bytes(&tokens, &[stop], &[stop]).unwrap()
    }

    fn normalise(m: &NodeMask, g: &CompiledGrammar) -> (Vec<u32>, Vec<u32>) {
        let ids = m.accepted.ids(&g.text_bits, &g.trie.sorted);
        (ids, m.uncertain.clone())
    }

    /// Derived masks are exactly the chart walk's, at every count and body state.
    /// A serialized grammar whose base of one counted rule carries another rule's body DFA
    /// is refused (the rule's other states would walk over that DFA), and a faithful one
    /// reads back with one DFA per rule.
    #[test]
    fn a_base_over_another_rules_dfa_is_refused() {
        let compiler = GrammarCompiler::new(vocab())
            .with_precompute(crate::Precompute::Eager)
            .with_cache_enabled(false);
        let g = compiler
            .compile_grammar(r#"root ::= [a-c]{0,70} "x" [0-9]{0,70} "y""#)
            .unwrap();
        let back = CompiledGrammar::deserialize(&g.serialize().unwrap(), &compiler).unwrap();
        {
            let bases = back.counted_bases.read().unwrap();
            for ((k, _), b) in bases.iter() {
                let first = bases.iter().find(|((r, _), _)| r == k).unwrap().1;
                assert!(std::sync::Arc::ptr_eq(b.dfa(), first.dfa()), "rule {k}");
            }
        }
        let (of0, of1) = {
            let bases = g.counted_bases.read().unwrap();
            let of = |k: u32| {
                bases
                    .iter()
                    .find(|((r, _), _)| *r == k)
                    .map(|(key, b)| (*key, b.clone()))
            };
            (
                of(0).expect("a base of rule 0"),
                of(1).expect("a base of rule 1"),
            )
        };
        assert!(**of0.1.dfa() != **of1.1.dfa());
        let forged = of0.1.with_dfa(of1.1.dfa().clone());
        g.counted_bases
            .write()
            .unwrap()
            .insert(of0.0, std::sync::Arc::new(forged));
        let err = CompiledGrammar::deserialize(&g.serialize().unwrap(), &compiler).unwrap_err();
        assert!(
            err.to_string().contains("body DFA is not its rule's"),
            "{err}"
        );
    }

    /// A compiler of [`vocab`], lazy and without shared masks: a grammar's bases are its
    /// own, walked one by one (a background fill or another grammar's base could bring a
    /// second copy of a DFA, which is only memory, never a wrong mask).
    fn lazy_unshared() -> GrammarCompiler {
        GrammarCompiler::new(vocab())
            .with_precompute(crate::Precompute::Lazy)
            .with_mask_cache_capacity(0)
    }

    /// The base of a final body state without edges, derived from state 0's base
    /// (`restarted`), is the one its own walk gives (and the walks taking a slice whole
    /// equal those of every token); a grammar's base of such a state is derived, not
    /// walked (the thread's walk count does not move).
    #[test]
    fn a_base_after_a_whole_body_is_state_zeros_restarted() {
        let compiler = lazy_unshared();
        let grammars = [
            r#"root ::= "\"" [a-c]{0,70} "\"""#,
            r#"root ::= "\"" ("\\" ["n] | [^"\\]){0,40} "\"""#,
            r#"root ::= [a-c]{70,} "\"""#,
            r#"root ::= ("ab" | "c"){3,50} "a" | "x""#,
        ];
        let (mut checked, mut read) = (0, 0);
        for ebnf in grammars {
            let g = compiler.compile_grammar(ebnf).unwrap();
            for (k, cnt) in g.aut.counted.iter().enumerate() {
                let follow = &g.aut.follow[cnt.rule as usize];
                let dfa = super::body_dfa(cnt, follow);
                read += super::slice_reading(&dfa, &g.trie).is_some() as usize;
                let words = g.vocab.bitmask_words();
                let never = Deadline::never();
                let zero =
                    super::counted_base(cnt, 0, dfa.clone(), &g.trie, words, &never, true).unwrap();
                for s in 1..cnt.states {
                    if !(cnt.body_final[s as usize] && cnt.edges_of(s).is_empty()) {
                        continue;
                    }
                    let walked =
                        super::counted_base(cnt, s, dfa.clone(), &g.trie, words, &never, true)
                            .unwrap();
                    let derived = super::restarted(&zero, s, &g.trie);
                    assert_eq!(derived.parts(), walked.parts(), "{ebnf}: state {s}");
                    // And the walks taking a slice whole equal the walks of every token.
                    let full = |s| {
                        super::counted_base(cnt, s, dfa.clone(), &g.trie, words, &never, false)
                            .unwrap()
                    };
                    assert_eq!(walked.parts(), full(s).parts(), "{ebnf}: state {s}");
                    assert_eq!(zero.parts(), full(0).parts(), "{ebnf}: state 0");
                    assert!(walked.max_restarts > 0, "{ebnf}: nothing accepted");
                    g.counted_base_of(k, 0, &never).unwrap();
                    let walks = super::WALKS.with(|w| w.get());
                    let base = g.counted_base_of(k, s, &never).unwrap();
                    assert_eq!(base.parts(), walked.parts(), "{ebnf}: state {s}");
                    assert_eq!(
                        super::WALKS.with(|w| w.get()),
                        walks,
                        "{ebnf}: state {s} was walked"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 3, "{checked} states checked");
        // The string body reads the JSON-string slice: the sliced walks were compared.
        assert!(read >= 1, "no body read a slice");
    }

    /// On Llama 3.1's vocabulary, the bases of JSON strings of bounded length (the body a
    /// character an iteration, with escapes) take the JSON-string slice whole, and equal
    /// the walk of every token, from every body state.
    #[cfg(feature = "hf")]
    #[test]
    fn a_sliced_base_walk_equals_the_full_walk() {
        let Some(vocab) = crate::mask::background::tests::llama() else {
            eprintln!("skipping: ../shared missing");
            return;
        };
        let compiler = GrammarCompiler::new(vocab).with_precompute(crate::Precompute::Lazy);
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "maxLength": 20},
                "b": {"type": "string", "minLength": 3, "maxLength": 300},
                "c": {"type": "string", "pattern": "^[a-z]{2,80}$"}
            }
        });
        let g = compiler
            .compile_json_schema(&schema, &crate::JsonSchemaOptions::default())
            .unwrap();
        let words = g.vocab.bitmask_words();
        let never = Deadline::never();
        let mut sliced = 0;
        for cnt in &g.aut.counted {
            let follow = &g.aut.follow[cnt.rule as usize];
            let dfa = super::body_dfa(cnt, follow);
            let reading = super::slice_reading(&dfa, &g.trie);
            for s in 0..=cnt.states {
                let walk = |sliced| {
                    super::counted_base(cnt, s, dfa.clone(), &g.trie, words, &never, sliced)
                        .unwrap()
                };
                assert_eq!(walk(true).parts(), walk(false).parts(), "rule {}", cnt.rule);
            }
            if let Some(r) = reading {
                assert_eq!(r.slice.lang, crate::mask::slices::JSON_STRING);
                sliced += 1;
            }
        }
        assert!(sliced >= 2, "{sliced} counted rules read a slice");
    }

    /// The precompute lists state 0's base beside a final state without edges (whose base
    /// is derived from it), so that base's bytes are counted against the memory limit.
    #[test]
    fn the_precompute_lists_state_zero_for_a_restarted_base() {
        let compiler = GrammarCompiler::new(vocab()).with_precompute(crate::Precompute::Lazy);
        let g = compiler
            .compile_grammar(r#"root ::= "\"" [a-c]{0,70} "\"""#)
            .unwrap();
        let cnt = &g.aut.counted[0];
        let exit_only: Vec<u32> = (1..cnt.states)
            .filter(|&s| cnt.body_final[s as usize] && cnt.edges_of(s).is_empty())
            .collect();
        assert!(!exit_only.is_empty());
        let listed = g.counted_base_states();
        assert!(listed.contains(&(0, 0)), "{listed:?}");
        for s in exit_only {
            assert!(listed.contains(&(0, cnt.representative(s))), "{listed:?}");
        }
    }

    #[test]
    fn derived_masks_equal_chart_walks() {
        let compiler = lazy_unshared();
        let grammars = [
            (r#"root ::= "\"" [a-c]{0,70} "\"""#, true),
            (r#"root ::= [a-c]{65,70} "b""#, true),
            (r#"root ::= ("ab" | "c"){3,50} "a" | "x""#, true),
            (r#"root ::= [a-c]{70,} "\"""#, true),
            (r#"root ::= "x"{65,} "y" | "y""#, true),
            (r#"root ::= "\"" ("\\" ["n] | [^"\\]){0,40} "\"""#, true),
            (r#"root ::= "\"" [^"\\]{34,45} "\"" "a"?"#, true),
            (r#"root ::= ([ab] [ab]?){33,40} "x""#, false),
            (r#"root ::= ("a" [b-c]*){33,40} "x""#, true),
            (r#"root ::= ("a" [a-c]*){33,40} "x""#, false),
        ];
        for (ebnf, deterministic) in grammars {
            let g = compiler.compile_grammar(ebnf).unwrap();
            let aut = &g.aut;
            assert!(!aut.counted.is_empty(), "{ebnf}: no counted rule");
            for (k, cnt) in aut.counted.iter().enumerate() {
                assert_eq!(g.counted_derivable[k], deterministic, "{ebnf}");
                let counts = match cnt.max {
                    Some(m) => m.max(1),
                    None => cnt.min + 1,
                };
                for c in 0..counts {
                    for s in 0..=cnt.states {
                        if s == cnt.states && c > 0 {
                            continue;
                        }
                        let n = cnt.first + c * (cnt.states + 1) + s;
                        let memo = SubtreeMemo::default();
                        let walked = compute_node_mask(
                            aut,
                            &g.trie,
                            n,
                            g.vocab.bitmask_words(),
                            (&memo, &[]),
                            &Deadline::never(),
                            None,
                        )
                        .unwrap();
                        let derived = g.node_mask(n).unwrap();
                        assert_eq!(
                            normalise(&derived, &g),
                            normalise(&walked, &g),
                            "{ebnf}: count {c}, body state {s}"
                        );
                    }
                }
            }
            // The bases of one rule share its body DFA (one copy per rule, counted once).
            let bases = g.counted_bases.read().unwrap();
            for (k, cnt) in aut.counted.iter().enumerate() {
                let of_k: Vec<_> = bases.iter().filter(|((r, _), _)| *r == k as u32).collect();
                if deterministic && cnt.states > 1 {
                    assert!(of_k.len() > 1, "{ebnf}: {} bases", of_k.len());
                }
                for (_, b) in &of_k {
                    assert!(
                        std::sync::Arc::ptr_eq(b.dfa(), of_k[0].1.dfa()),
                        "{ebnf}: a DFA per base"
                    );
                }
            }
        }
    }
}
