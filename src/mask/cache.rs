//! The token mask cache: for every automaton node, which text tokens are accepted whatever
//! the context, and which are *uncertain* (they run past the end of the node's rule, so the
//! answer depends on the stack). All other text tokens are rejected whatever the context.
//!
//! A node's sets are computed by walking the vocabulary trie with an Earley chart whose
//! base item is the node: a byte that no item can scan prunes the whole subtree. A token
//! is *accepted* when all its bytes are consumed; it is *uncertain* when the walk failed
//! but the node's rule could have ended after `k >= 1` of its bytes and byte `k` may follow
//! that rule somewhere in the grammar. (Ending after 0 bytes is covered at run time: the
//! completed caller is itself in the matcher's item set.)

use super::slices::{self, Slice};
use super::token_set::{
    clear_positions, set_positions, Composer, LIST_PER_WORDS, RUNS_IDS_PER_WORD,
};
pub(crate) use super::token_set::{or_token_set, token_set, TokenSet};
use super::trie::TokenTrie;
use crate::automaton::{byte_in, Automaton};
use crate::limits::Deadline;
use crate::parser::{Chart, Item, EXT};

/// The precomputed mask of one automaton node.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct NodeMask {
    pub accepted: TokenSet,
    /// Trie positions (indices into [`TokenTrie::sorted`]) of uncertain tokens, ascending
    /// (`compute_pair_mask` relies on it: tokens of one prefix are then contiguous).
    #[serde(with = "super::wire::gaps")]
    pub uncertain: Vec<u32>,
}

impl NodeMask {
    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        let set = match &self.accepted {
            TokenSet::Accepted(v) | TokenSet::Rejected(v) | TokenSet::Runs(v) => v.capacity() * 4,
            TokenSet::Bitset(b) => b.len() * 4,
        };
        set + self.uncertain.capacity() * 4
    }
}

/// Trie nodes (or tokens) a mask walk visits between two looks at the deadline: a look
/// costs a clock read (~25 ns), a visit at least a chart push.
const DEADLINE_EVERY: usize = 1024;

/// Chart work units (items added or looked at, a few nanoseconds each) between two looks at
/// the deadline, whatever the visits: a walk over an ambiguous grammar's large item sets
/// spends far more per trie node than a plain one.
const DEADLINE_WORK: u64 = 1 << 20;

/// True when it is time to look at the deadline and it has passed: every
/// [`DEADLINE_EVERY`] steps, or every [`DEADLINE_WORK`] chart work units since the last
/// look (`last_look`).
fn past_deadline(step: usize, chart: &Chart, last_look: &mut u64, deadline: &Deadline) -> bool {
    if step % DEADLINE_EVERY != 0 && chart.work() - *last_look < DEADLINE_WORK {
        return false;
    }
    *last_look = chart.work();
    deadline.expired()
}

/// Computes the mask of `node`. `words` is the bitmask length in `u32` words; `memo` is
/// the grammar's [`SubtreeMemo`] and its mask class per real node (bisimilar nodes share
/// subtrees). With `delta` (the mask of a [`delta_reference`], the reference, and
/// `text_bits`: the bitset of all text tokens, `words` words), only the tokens whose first
/// byte is marked in `Delta::differ` are walked from `node`; every other token keeps its
/// verdict in that mask, and the result is the same as without. `None` when `deadline`
/// passed during the walk (looked at every [`DEADLINE_EVERY`] trie nodes and every
/// [`DEADLINE_WORK`] units of chart work).
pub(crate) fn compute_node_mask(
    aut: &Automaton,
    trie: &TokenTrie,
    node: u32,
    words: usize,
    memo: (&SubtreeMemo, &[u32]),
    deadline: &Deadline,
    delta: Option<(&NodeMask, &Delta, &[u32])>,
) -> Option<NodeMask> {
    let slice = pick_slice(aut, trie, node);
    compute_node_mask_in(aut, trie, node, words, memo, deadline, delta, slice)
}

/// The part of `node`'s mask made of the tokens whose first byte is marked in `only` (256
/// entries): the walk from `node` over those tokens alone. Adds the accepted tokens to
/// `accepted` (a composed mask's, added in place rather than made a mask of their own and
/// merged into it) and returns the uncertain tokens' trie positions, ascending. `None`
/// when `deadline` passed (`accepted` then untouched).
pub(crate) fn first_bytes_walk_into(
    aut: &Automaton,
    trie: &TokenTrie,
    node: u32,
    memo: (&SubtreeMemo, &[u32]),
    deadline: &Deadline,
    only: &[bool],
    accepted: &mut Composer,
) -> Option<Vec<u32>> {
    let follow = &aut.follow[aut.rule_of(node) as usize];
    let slice = pick_slice(aut, trie, node);
    let w = walk(
        trie,
        aut,
        node,
        follow,
        Some(only),
        slice,
        memo,
        deadline,
        false,
    )?;
    accepted.add_positions(&w.accepted);
    Some(w.uncertain)
}

/// The positions of `sorted` (ascending) that no range of `ranges` (ascending, disjoint)
/// holds, copied a run at a time: a callee's uncertain tokens (after a space, most of the
/// vocabulary) less those of a node's own first bytes, or a delta reference's less those
/// walked again, without a look at each one.
pub(crate) fn outside(sorted: &[u32], ranges: &[std::ops::Range<u32>]) -> Vec<u32> {
    debug_assert!(
        sorted.windows(2).all(|w| w[0] <= w[1]),
        "positions ascending"
    );
    debug_assert!(
        ranges.windows(2).all(|w| w[0].end <= w[1].start),
        "ranges ascending"
    );
    let mut out = Vec::with_capacity(sorted.len());
    let mut at = 0;
    for r in ranges {
        let a = at + sorted[at..].partition_point(|&p| p < r.start);
        out.extend_from_slice(&sorted[at..a]);
        at = a + sorted[a..].partition_point(|&p| p < r.end);
    }
    out.extend_from_slice(&sorted[at..]);
    out
}

/// A vocabulary slice a walk takes whole, and up to which token length: the automaton
/// from the walk's node consumes every string of the slice's language of at most `len`
/// bytes ([`slices::consumed_depth_from`]; `usize::MAX`: all of them).
#[derive(Clone, Copy)]
pub(crate) struct Taken<'t> {
    pub slice: &'t Slice,
    pub len: usize,
}

impl Taken<'_> {
    /// Whether the walk takes trie node `i`'s subtree whole.
    #[inline]
    fn takes(&self, trie: &TokenTrie, i: usize) -> bool {
        self.slice.is_pure(i) && trie.deepest()[i] as usize <= self.len
    }

    /// Whether every pure subtree of the slice is taken (no token is longer than `len`).
    fn whole(&self, trie: &TokenTrie) -> bool {
        self.len >= trie.max_depth
    }
}

/// The vocabulary slice that a walk from `node` takes whole ([`Taken`]): of the trie's
/// slices whose every token the automaton from `node` consumes, the one with the most
/// tokens; else, of those it consumes up to some length, the one with the longest.
pub(crate) fn pick_slice<'t>(aut: &Automaton, trie: &'t TokenTrie, node: u32) -> Option<Taken<'t>> {
    let start = slices::Start::new(aut, node)?;
    let mut best: Option<Taken> = None;
    for s in &trie.slices {
        if best.is_some_and(|b| b.whole(trie) && b.slice.tokens >= s.tokens) {
            continue;
        }
        let len = match slices::consumed_depth_from(aut, &start, s, trie.max_depth) {
            0 => continue,
            d if d >= trie.max_depth => usize::MAX,
            d => d,
        };
        let t = Taken { slice: s, len };
        best = match best {
            None => Some(t),
            Some(b) if t.whole(trie) && !b.whole(trie) => Some(t),
            Some(b) if t.whole(trie) && b.slice.tokens < s.tokens => Some(t),
            Some(b) if !b.whole(trie) && t.len > b.len => Some(t),
            keep => keep,
        };
    }
    best
}

/// [`compute_node_mask`] with the slice to take whole given (`None`: walk every token).
#[allow(clippy::too_many_arguments)]
pub(crate) fn compute_node_mask_in(
    aut: &Automaton,
    trie: &TokenTrie,
    node: u32,
    words: usize,
    memo: (&SubtreeMemo, &[u32]),
    deadline: &Deadline,
    delta: Option<(&NodeMask, &Delta, &[u32])>,
    slice: Option<Taken>,
) -> Option<NodeMask> {
    let follow = &aut.follow[aut.rule_of(node) as usize];
    let Some((base, delta, text_bits)) = delta else {
        // The slice's bitset stands for its pure subtrees only when the walk takes them all.
        let whole = slice.filter(|t| t.whole(trie));
        let w = walk(
            trie,
            aut,
            node,
            follow,
            None,
            slice,
            memo,
            deadline,
            whole.is_some(),
        )?;
        let pure = whole.map(|t| (t.slice, &w.pure[..]));
        return Some(finish(trie, &w.accepted, w.uncertain, words, pure));
    };
    let Walked {
        accepted,
        mut uncertain,
        ..
    } = walk(
        trie,
        aut,
        node,
        follow,
        Some(&delta.differ),
        slice,
        memo,
        deadline,
        false,
    )?;
    let mut bits = vec![0u32; words].into_boxed_slice();
    // Allocated zeroed (see `TokenSet::is_list`).
    let mut blank = !base.accepted.is_list();
    or_token_set(
        &mut bits,
        &mut blank,
        &base.accepted,
        text_bits,
        &trie.sorted,
        &mut Vec::new(),
    );
    let walked = trie.first_byte_ranges(&delta.differ);
    clear_positions(trie, &walked, &mut bits);
    set_positions(trie, &accepted, &mut bits);
    let count = bits.iter().map(|w| w.count_ones() as usize).sum();
    uncertain.extend(outside(&base.uncertain, &walked));
    uncertain.sort_unstable();
    Some(NodeMask {
        accepted: token_set(trie, bits, count, words),
        uncertain,
    })
}

/// A node whose mask is derived from another's: see [`delta_reference`].
#[derive(Clone, Debug)]
pub(crate) struct Delta {
    /// The node whose mask is reused: a node of the same rule.
    pub reference: u32,
    /// Per byte value (256 entries): true when tokens with that first byte must be walked
    /// (the two nodes step to different mask classes on it); the reference's verdict holds
    /// for every other token.
    pub differ: Vec<bool>,
}

/// The byte table of a node that steps as a DFA state (a real node, no call edges,
/// pairwise disjoint byte edges): 256 targets, [`NO_EDGE`] where it has none.
fn dfa_row(aut: &Automaton, n: u32) -> Option<Vec<u32>> {
    if !is_dfa_node(aut, n) {
        return None;
    }
    let node = &aut.nodes[n as usize];
    let mut row = vec![NO_EDGE; 256];
    for e in &aut.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize] {
        row[e.lo as usize..=e.hi as usize].fill(e.target);
    }
    Some(row)
}

/// True when real node `n` steps as a DFA state: no call edges, pairwise disjoint byte
/// edges, and targets that fit beside the [`FINAL`] bit.
fn is_dfa_node(aut: &Automaton, n: u32) -> bool {
    let Some(node) = aut.nodes.get(n as usize) else {
        return false;
    };
    let edges = &aut.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize];
    node.calls.0 == node.calls.1
        && edges.windows(2).all(|w| w[0].hi < w[1].lo)
        && edges.iter().all(|e| e.target < FINAL)
}

/// The target that the first bytes of the most tokens lead to from a DFA `row`, counting
/// targets of one mask class (`class`: per real node) together, with that token count;
/// `NO_EDGE` when no token's first byte has an edge.
fn dominant_target(trie: &TokenTrie, class: &[u32], row: &[u32]) -> (u32, u64) {
    // (class or, for a virtual node, the node id with the top bit set; first target seen;
    // tokens).
    let mut weights: Vec<(u32, u32, u64)> = Vec::new();
    // Bytes in runs of one target (a row is a few ranges): one lookup per run.
    let mut b = 0usize;
    while b < row.len() {
        let t = row[b];
        let from = b;
        while b < row.len() && row[b] == t {
            b += 1;
        }
        let w = trie.first_bytes_tokens(from..b) as u64;
        if t == NO_EDGE || w == 0 {
            continue;
        }
        let c = class.get(t as usize).copied().unwrap_or(t | 1 << 31);
        match weights.iter_mut().find(|(x, _, _)| *x == c) {
            Some((_, _, acc)) => *acc += w,
            None => weights.push((c, t, w)),
        }
    }
    // Ties go to the lowest class, so the choice does not depend on byte order.
    weights
        .into_iter()
        .max_by_key(|&(c, _, w)| (w, std::cmp::Reverse(c)))
        .map_or((NO_EDGE, 0), |(_, t, w)| (t, w))
}

/// Tokens whose first byte must agree before a delta is worth it: below that, the walk
/// of `node` alone costs about as much as copying the reference's mask.
const DELTA_MIN_TOKENS: u64 = 2048;

/// A reference for `node`'s mask, when one pays: `node` steps as a DFA state, and the node
/// `t` that most tokens' first bytes lead to is a node of the same rule and of another
/// mask class, one that leads most tokens back into its own class (a loop such as a
/// string body). Tokens whose first byte takes `node` and `t` to the same mask class
/// (`class`: per real node) get the same verdict from both, accepted, uncertain or
/// rejected (the walk after the first byte depends only on the node reached and the
/// rule's follow set, as in [`SubtreeMemo`]): only the others need a walk. `None` unless at least [`DELTA_MIN_TOKENS`] tokens agree and
/// they outnumber those that do not.
///
/// Example: the states of a key automaton that avoids a schema's declared property names
/// step into one free string-content node on every byte but a declared name's next
/// letter. A state's mask is then the free node's with the subtrees of those letters
/// walked again: a few thousand tokens, not the vocabulary.
pub(crate) fn delta_reference(
    aut: &Automaton,
    trie: &TokenTrie,
    class: &[u32],
    node: u32,
) -> Option<Delta> {
    let row = dfa_row(aut, node)?;
    let (t, _) = dominant_target(trie, class, &row);
    // A virtual target has no class (nor a DFA row): no reference.
    let (&class_t, &class_n) = (class.get(t as usize)?, class.get(node as usize)?);
    if class_t == class_n {
        return None;
    }
    let reference = dfa_row(aut, t)?;
    if aut.rule_of(t) != aut.rule_of(node) {
        return None;
    }
    // The reference leads most tokens into its own class, so its own reference (a node of
    // that class) is refused just above: no chain, no cycle.
    let (u, _) = dominant_target(trie, class, &reference);
    if class.get(u as usize) != Some(&class_t) {
        return None;
    }
    let same = |x: u32, y: u32| {
        x == y
            || (x != NO_EDGE
                && y != NO_EDGE
                && class.get(x as usize).is_some()
                && class.get(x as usize) == class.get(y as usize))
    };
    let (mut agree, mut disagree) = (0u64, 0u64);
    let mut differ = vec![false; 256];
    for b in 0..256 {
        let w = trie.first_byte_range(b as u8).len() as u64;
        if w == 0 || (row[b] == NO_EDGE && reference[b] == NO_EDGE) {
            continue;
        }
        if same(row[b], reference[b]) {
            agree += w;
        } else {
            differ[b] = true;
            disagree += w;
        }
    }
    (agree >= DELTA_MIN_TOKENS && agree > disagree).then_some(Delta {
        reference: t,
        differ,
    })
}

/// Computes the mask of `node` in a rule instance called from `caller` (a node with a call
/// edge to `node`'s rule). Only the node's own uncertain tokens are examined: the result's
/// `accepted` lists those that this context accepts (the node's own accepted set is applied
/// separately), and `uncertain` those that may also run past the caller's rule. `None` when
/// `deadline` passed (looked at every [`DEADLINE_EVERY`] tokens visited, a run of tokens
/// skipped together counting as one, and every [`DEADLINE_WORK`] units of chart work).
pub(crate) fn compute_pair_mask(
    aut: &Automaton,
    trie: &TokenTrie,
    node_mask: &NodeMask,
    node: u32,
    caller: u32,
    deadline: &Deadline,
) -> Option<NodeMask> {
    let follow = &aut.follow[aut.rule_of(caller) as usize];
    let mut chart = Chart::with_caller(aut, caller, node);
    let base = chart.len();
    let mut accepted: Vec<u32> = Vec::new();
    let mut uncertain: Vec<u32> = Vec::new();
    let mut prefix_ok: Vec<bool> = vec![false];
    let mut exit_here: Vec<bool> = vec![false];
    let mut prev: &[u8] = &[];
    // Bytes of `prev` on the chart.
    let mut pushed = 0usize;
    // Cost: one chart push per byte not shared with the previous token; the tokens that
    // share a rejected prefix are skipped as one run (found by a galloping search: tokens
    // of one prefix are contiguous in trie order), so a whitespace node's thousands of
    // uncertain tokens that fail on their second byte (` the`, ` for`...) cost a search,
    // not a visit each.
    let mut last_look = 0u64;
    let all = &node_mask.uncertain[..];
    let mut k = 0usize;
    // Tokens visited (a skipped run counts as one), for the deadline's count.
    let mut visits = 0usize;
    while k < all.len() {
        let p = all[k];
        visits += 1;
        if past_deadline(visits, &chart, &mut last_look, deadline) {
            return None;
        }
        let id = trie.sorted[p as usize];
        let bytes = trie.bytes_at(p);
        let lcp = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
        if lcp < pushed {
            chart.truncate(base + lcp);
            prefix_ok.truncate(lcp + 1);
            exit_here.truncate(lcp + 1);
            pushed = lcp;
        }
        prev = bytes;
        let mut failed = false;
        while pushed < bytes.len() {
            let b = bytes[pushed];
            let ok_before = prefix_ok_at_failure(&prefix_ok, &exit_here, pushed, b, follow);
            if chart.push_byte(aut, b) {
                pushed += 1;
                prefix_ok.push(ok_before);
                exit_here.push(chart.can_exit());
            } else {
                failed = true;
                // Every later token with these `pushed + 1` bytes first fails here too,
                // with the same verdict.
                let end = k + 1 + run_with_prefix(trie, &all[k + 1..], &bytes[..=pushed]);
                if ok_before {
                    uncertain.extend_from_slice(&all[k..end]);
                }
                k = end;
                break;
            }
        }
        if !failed {
            accepted.push(id);
            k += 1;
        }
    }
    accepted.sort_unstable();
    Some(NodeMask {
        accepted: TokenSet::Accepted(accepted),
        uncertain,
    })
}

/// How many trie positions at the start of `positions` (ascending) hold tokens that start
/// with `prefix`: they are contiguous in trie order, so a galloping search finds the end
/// of the run in about `2 log2` of its length looks.
fn run_with_prefix(trie: &TokenTrie, positions: &[u32], prefix: &[u8]) -> usize {
    let has = |i: usize| trie.bytes_at(positions[i]).starts_with(prefix);
    // Grow a window `lo..hi` whose start holds the prefix until its end does not.
    let (mut lo, mut hi) = (0usize, 1usize);
    while hi <= positions.len() && has(hi - 1) {
        lo = hi;
        hi *= 2;
    }
    let hi = hi.min(positions.len());
    lo + positions[lo..hi].partition_point(|&q| trie.bytes_at(q).starts_with(prefix))
}

/// With `c` bytes consumed and byte `b` next: could the base rule have ended after some
/// `k` in `1..=c` bytes with the byte after it in `follow`?
#[inline]
fn prefix_ok_at_failure(
    prefix_ok: &[bool],
    exit_here: &[bool],
    c: usize,
    b: u8,
    follow: &[u64; 4],
) -> bool {
    prefix_ok[c] || (c >= 1 && exit_here[c] && byte_in(follow, b))
}

/// Results of trie subtrees under one first byte, shared by the mask walks of one grammar:
/// keyed by (root child's trie node, mask class of the node reached on its byte), the trie
/// positions of the tokens of that subtree accepted and uncertain. A walk from any DFA
/// node that reaches the same node on the same first byte gets the same sets (both depend
/// only on where the first byte leads: the rule, and so the follow set, is that node's).
/// In a JSON Schema, the nodes of a key automaton that avoids the declared names mostly
/// step into one string-body node: its subtrees are walked once instead of once per node.
#[derive(Debug, Default)]
pub(crate) struct SubtreeMemo {
    map: std::sync::RwLock<rustc_hash::FxHashMap<(u32, u32), std::sync::Arc<Subtree>>>,
    bytes: std::sync::atomic::AtomicUsize,
}

/// The sets one subtree contributes: accepted as ranges of trie positions, uncertain as
/// trie positions (both ascending within the subtree; see [`walk`]).
#[derive(Debug)]
struct Subtree {
    accepted: Box<[(u32, u32)]>,
    uncertain: Box<[u32]>,
}

impl SubtreeMemo {
    /// Subtrees whose walk visited fewer trie nodes than this are not kept: walking them
    /// again costs about as much as looking them up.
    const MIN_VISITS: usize = 256;
    /// Bytes kept at most; later subtrees are walked again.
    const CAPACITY: usize = 64 << 20;

    fn get(&self, key: (u32, u32)) -> Option<std::sync::Arc<Subtree>> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned()
    }

    fn insert(&self, key: (u32, u32), accepted: &[(u32, u32)], uncertain: &[u32]) {
        use std::sync::atomic::Ordering::Relaxed;
        let size = accepted.len() * 8 + uncertain.len() * 4 + 64;
        if self.bytes.load(Relaxed) + size > Self::CAPACITY {
            return;
        }
        let sub = Subtree {
            accepted: accepted.into(),
            uncertain: uncertain.into(),
        };
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if map.insert(key, std::sync::Arc::new(sub)).is_none() {
            self.bytes.fetch_add(size, Relaxed);
        }
    }

    /// Bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Drops every subtree (once no more masks will be walked).
    pub(crate) fn clear(&self) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.clear();
        self.bytes.store(0, std::sync::atomic::Ordering::Relaxed);
    }
}

mod tables;
#[cfg(test)]
use tables::TABLES_PER_CHUNK;
use tables::{DfaTables, FINAL, NO_EDGE};
#[cfg(test)]
pub(crate) use tables::{CHAR_RUN_TAKES, NO_BYTE_RUNS, RUN_TAKES};

/// Marks a depth whose state is in the chart rather than in `dfa`.
const IN_CHART: u32 = u32::MAX;

/// Ascending, disjoint, half-open ranges of trie positions.
type PositionRanges = Vec<(u32, u32)>;

/// Appends the trie positions `a..z` to `ranges` (ascending, half-open), merged into the
/// last range when they continue it and that range lies at or past index `floor`.
#[inline]
fn push_range(ranges: &mut PositionRanges, floor: usize, a: u32, z: u32) {
    if z <= a {
        return;
    }
    if ranges.len() > floor {
        if let Some(last) = ranges.last_mut() {
            if last.1 == a {
                last.1 = z;
                return;
            }
        }
    }
    ranges.push((a, z));
}

/// The state of a [`walk`] at one depth `c` (bytes consumed), written when it enters a
/// trie node of depth `c` and read by that node's children.
#[derive(Clone, Copy)]
struct Depth {
    /// The table of the DFA node reached, or [`IN_CHART`].
    dfa: u32,
    /// Inside the chart (depths from the walk's `chart_from` on), a state that is one item
    /// at a DFA node (`dfa` its table, `item` the item) steps by table lookups as long as
    /// the node reached needs no completion: a callee's string body is walked as fast as
    /// the base rule's.
    item: Item,
    /// The chart's length holding the state at this depth (or the state before it, when
    /// the state is not a set of its own).
    sets: usize,
    /// The state is a set of the chart (not a lone DFA item stepped past it).
    real: bool,
    /// For a set of the chart: the table of the item whose DFA node has the widest byte
    /// run ([`set_run`]), or [`IN_CHART`] (a lone item steps by `dfa` instead). A token that one item's run
    /// steps stays alive in the chart, so a subtree that run takes is accepted whole.
    run: u32,
    /// The base rule could end after some k in 1..c bytes with byte k in its follow set.
    prefix_ok: bool,
    /// The base rule could end here.
    exit_here: bool,
}

/// Walks the trie from base node `node` (the mask walk of [`compute_node_mask`]). While
/// the chart would hold one item at a DFA node (see [`Step`]), the walk steps that node
/// directly; at the first other node it starts a chart there (its closure is what the
/// chart would hold: the base item keeps origin [`crate::parser::EXT`]) and walks that
/// subtree with the chart. The sets are those of a walk with the chart throughout: the
/// accepted tokens as ascending, disjoint half-open ranges of trie positions (a string
/// body's hundred thousand tokens are a few ranges), and the uncertain ones as ascending
/// trie positions. With `only` (256 entries), the tokens whose first byte is not marked
/// are skipped. With `slice` (one that the automaton from `node` consumes: see
/// [`pick_slice`]), every subtree pure in it is accepted whole without a visit.
#[allow(clippy::too_many_arguments)]
fn walk(
    trie: &TokenTrie,
    aut: &Automaton,
    node: u32,
    follow: &[u64; 4],
    only: Option<&[bool]>,
    slice: Option<Taken>,
    (memo, class): (&SubtreeMemo, &[u32]),
    deadline: &Deadline,
    pure_apart: bool,
) -> Option<Walked> {
    let mut dfa_tables = DfaTables::new(aut, trie.max_depth);
    let mut chart = Chart::new(aut, node);
    // Depth (bytes consumed) of the chart's set 0 while a subtree is walked with the chart.
    let start = dfa_tables.table(aut, node);
    let mut chart_from = if start.is_some() { usize::MAX } else { 0 };
    // Per depth c (bytes consumed), written when the walk enters a trie node of depth c
    // and read by its children: `at[c]` ([`Depth`]), one record per depth so that a visit
    // reads its parent's state and writes its own with one bounds check each.
    let depths = trie.max_depth + 1;
    let mut at: Vec<Depth> = vec![
        Depth {
            dfa: IN_CHART,
            item: Item { node: 0, origin: 0 },
            sets: chart.len(),
            real: true,
            run: IN_CHART,
            prefix_ok: false,
            exit_here: false,
        };
        depths
    ];
    if start.is_none() {
        at[0].run = set_run(&mut dfa_tables, aut, chart.current());
    }
    at[0].dfa = start.unwrap_or(IN_CHART);
    let mut accepted: PositionRanges = Vec::new();
    let mut uncertain: Vec<u32> = Vec::new();
    // With `pure_apart`, the slice's pure subtrees taken whole (see `Walked::pure`).
    let mut pure: PositionRanges = Vec::new();
    let n = trie.byte.len();
    let mut i = 0usize;
    // Cost: one edge lookup (DFA) or chart push per trie node visited; failed subtrees are
    // skipped whole.
    let mut visits = 0usize;
    let mut last_look = 0u64;
    // The subtree under a first byte being walked for the memo: (key, where its accepted
    // and uncertain entries start, visits before it, where its pure ranges start). Ranges
    // are not merged across its start, so its own entries are exactly `accepted[a..]`.
    let mut open: Option<OpenSubtree> = None;
    let mut floor = 0usize;
    // The same for `pure`: a memo entry's pure ranges must not be merged into the range
    // before its subtree (the entry would then miss them).
    let mut pure_floor = 0usize;
    // The slice, with whether it takes every pure subtree whatever its depth.
    let sliced = slice.map(|t| (t, t.whole(trie)));
    // The trie's arrays, cut to its `n` nodes (`tok_start` has one entry more), so that
    // the hot loop's reads at `i < n` need no bounds check.
    let (depth, byte) = (&trie.depth[..n], &trie.byte[..n]);
    let (subtree_end, tok_here_end) = (&trie.subtree_end[..n], &trie.tok_here_end[..n]);
    let (tok_start, deepest) = (&trie.tok_start[..=n], &trie.deepest()[..n]);
    let bytes_below = &trie.bytes_below()[..n];
    while i < n {
        if chart_from == usize::MAX {
            // The walk's hot loop: the base node's own DFA stepped by table lookups, one
            // trie node a turn, below the first byte (a first byte's memo and `only` are
            // the loop below's). It leaves a node it cannot step (a callee's start, a
            // virtual node) to the loop below, which visits it afresh.
            while i < n {
                let d = depth[i] as usize;
                if d < 2 || d >= at.len() {
                    break;
                }
                visits += 1;
                if visits % DEADLINE_EVERY == 0 && deadline.expired() {
                    return None;
                }
                let up = at[d - 1];
                let b = byte[i];
                let e = dfa_tables.entry(up.dfa, b);
                if e == NO_EDGE {
                    // Most visits of a narrow node: its byte fails (a slice's or a run's
                    // subtree never starts with a byte the node has no edge on).
                    let end = subtree_end[i] as usize;
                    if up.prefix_ok || (up.exit_here && byte_in(follow, b)) {
                        uncertain.extend(tok_start[i]..tok_start[end]);
                    }
                    i = end;
                } else {
                    if let Some((t, whole)) = sliced {
                        if t.slice.is_pure(i) && (whole || deepest[i] as usize <= t.len) {
                            let end = subtree_end[i] as usize;
                            let (ranges, fl) = if pure_apart {
                                (&mut pure, pure_floor)
                            } else {
                                (&mut accepted, floor)
                            };
                            push_range(ranges, fl, tok_start[i], tok_start[end]);
                            i = end;
                            continue;
                        }
                    }
                    let whole = || trie.whole_chars_below(i);
                    if dfa_tables.run_takes(up.dfa, bytes_below[i], deepest[i], d, whole) {
                        // Every token below is bytes of the node's run, no longer than it:
                        // the subtree is accepted whole.
                        let end = subtree_end[i] as usize;
                        push_range(&mut accepted, floor, tok_start[i], tok_start[end]);
                        i = end;
                        continue;
                    }
                    let Some(off) = dfa_tables.table(aut, e & !FINAL) else {
                        break;
                    };
                    let here = &mut at[d];
                    here.dfa = off;
                    here.prefix_ok = up.prefix_ok || (up.exit_here && byte_in(follow, b));
                    here.exit_here = e & FINAL != 0;
                    push_range(&mut accepted, floor, tok_start[i], tok_here_end[i]);
                    i += 1;
                }
            }
            if i >= n {
                break;
            }
        }
        visits += 1;
        if past_deadline(visits, &chart, &mut last_look, deadline) {
            return None;
        }
        let d = trie.depth[i] as usize;
        if d == 1 {
            if let Some((key, a, u, v, p)) = open.take() {
                if visits - v >= SubtreeMemo::MIN_VISITS {
                    memo.insert(key, &merged(&accepted[a..], &pure[p..]), &uncertain[u..]);
                }
            }
            if only.is_some_and(|o| !o[trie.byte[i] as usize]) {
                i = trie.subtree_end[i] as usize;
                continue;
            }
        }
        if slice.is_some_and(|t| t.takes(trie, i)) {
            // Every token below is in the slice, so consumed from `node` (`pick_slice`): the
            // walk would accept each one. Nothing of the walk's state is left changed: the
            // next node visited resets the chart to its parent's depth.
            let end = trie.subtree_end[i] as usize;
            if pure_apart {
                push_range(
                    &mut pure,
                    pure_floor,
                    trie.tok_start[i],
                    trie.tok_start[end],
                );
            } else {
                push_range(&mut accepted, floor, trie.tok_start[i], trie.tok_start[end]);
            }
            i = end;
            continue;
        }
        let up = at[d - 1];
        if chart_from != usize::MAX {
            if d - 1 < chart_from {
                chart_from = usize::MAX;
            } else {
                chart.truncate(up.sets);
            }
        }
        // A DFA node, or a lone item at one in the chart: the hot loop's byte runs; or a
        // set of the chart with an item whose node has a run.
        let run = if up.dfa != IN_CHART { up.dfa } else { up.run };
        if run != IN_CHART {
            let (below, deepest) = (trie.bytes_below()[i], trie.deepest()[i]);
            if dfa_tables.run_takes(run, below, deepest, d, || trie.whole_chars_below(i)) {
                let end = trie.subtree_end[i] as usize;
                push_range(&mut accepted, floor, trie.tok_start[i], trie.tok_start[end]);
                i = end;
                continue;
            }
        }
        let b = trie.byte[i];
        // Could the rule end before this byte (after d - 1 >= 1 bytes) with b following it?
        let ok_before = up.prefix_ok || (d >= 2 && up.exit_here && byte_in(follow, b));
        let exit = if chart_from != usize::MAX {
            let mut stepped = None;
            if up.dfa != IN_CHART {
                let e = dfa_tables.entry(up.dfa, b);
                let it = up.item;
                if e == NO_EDGE {
                    stepped = Some(None);
                } else if it.origin == EXT || e & FINAL == 0 {
                    let t = e & !FINAL;
                    if let Some(off) = dfa_tables.table(aut, t) {
                        let here = &mut at[d];
                        here.dfa = off;
                        here.item = Item {
                            node: t,
                            origin: it.origin,
                        };
                        here.real = false;
                        here.sets = up.sets;
                        stepped = Some(Some(it.origin == EXT && e & FINAL != 0));
                    }
                }
                if stepped.is_none() && !up.real {
                    let exit = it.origin == EXT && aut.is_final(it.node);
                    // (A walk's chart never checks key names, so the byte is not kept.)
                    chart.push_closed_item(it, exit, 0);
                }
            }
            stepped.unwrap_or_else(|| {
                chart.push_byte(aut, b).then(|| {
                    let here = &mut at[d];
                    here.dfa = IN_CHART;
                    here.real = true;
                    here.sets = chart.len();
                    here.run = IN_CHART;
                    match chart.current() {
                        [one] => {
                            if let Some(off) = dfa_tables.table(aut, one.node) {
                                here.dfa = off;
                                here.item = *one;
                            }
                        }
                        items => here.run = set_run(&mut dfa_tables, aut, items),
                    }
                    chart.can_exit()
                })
            })
        } else {
            let e = dfa_tables.entry(up.dfa, b);
            // Bisimilar nodes (one mask class) have the same subtree sets; virtual nodes
            // have no class and are not memoised.
            let class_of = |t: u32| class.get(t as usize).copied();
            if let Some(c) = (d == 1 && e != NO_EDGE)
                .then(|| class_of(e & !FINAL))
                .flatten()
            {
                let key = (i as u32, c);
                if let Some(sub) = memo.get(key) {
                    accepted.extend_from_slice(&sub.accepted);
                    uncertain.extend_from_slice(&sub.uncertain);
                    i = trie.subtree_end[i] as usize;
                    continue;
                }
                open = Some((key, accepted.len(), uncertain.len(), visits, pure.len()));
                floor = accepted.len();
                pure_floor = pure.len();
            }
            (e != NO_EDGE).then(|| {
                let t = e & !FINAL;
                match dfa_tables.table(aut, t) {
                    Some(off) => {
                        at[d].dfa = off;
                        e & FINAL != 0
                    }
                    None => {
                        chart.reset(aut, t);
                        chart_from = d;
                        let run = set_run(&mut dfa_tables, aut, chart.current());
                        let here = &mut at[d];
                        here.dfa = IN_CHART;
                        here.real = true;
                        here.sets = chart.len();
                        here.run = run;
                        chart.can_exit()
                    }
                }
            })
        };
        match exit {
            Some(exit) => {
                push_range(
                    &mut accepted,
                    floor,
                    trie.tok_start[i],
                    trie.tok_here_end[i],
                );
                let here = &mut at[d];
                here.prefix_ok = ok_before;
                here.exit_here = exit;
                i += 1;
            }
            None => {
                if ok_before {
                    let end = trie.subtree_end[i] as usize;
                    uncertain.extend(trie.tok_start[i]..trie.tok_start[end]);
                }
                i = trie.subtree_end[i] as usize;
            }
        }
    }
    if let Some((key, a, u, v, p)) = open.take() {
        if visits - v >= SubtreeMemo::MIN_VISITS {
            memo.insert(key, &merged(&accepted[a..], &pure[p..]), &uncertain[u..]);
        }
    }
    Some(Walked {
        accepted,
        uncertain,
        pure,
    })
}

/// Items of a chart set that [`set_run`] looks at: a set of more is a wide grammar's
/// (a tag's tool names), where a look at every item would cost more than it saves.
const SET_RUN_ITEMS: usize = 8;

/// The table of the item of `items` (a chart set of at most [`SET_RUN_ITEMS`]) whose DFA
/// node has the widest byte run, or [`IN_CHART`] when none has one.
fn set_run(tables: &mut DfaTables, aut: &Automaton, items: &[Item]) -> u32 {
    if items.len() > SET_RUN_ITEMS {
        return IN_CHART;
    }
    let mut best = (IN_CHART, 0);
    for it in items {
        if let Some(off) = tables.table(aut, it.node) {
            let width = tables.run_width(off);
            if width > best.1 {
                best = (off, width);
            }
        }
    }
    best.0
}

/// A subtree of [`walk`] being walked for the memo: its key, then where its accepted,
/// uncertain and pure entries start and the visits before it.
type OpenSubtree = ((u32, u32), usize, usize, usize, usize);

/// What a [`walk`] found: the tokens accepted and uncertain (see there).
struct Walked {
    /// Ascending, disjoint ranges of trie positions.
    accepted: PositionRanges,
    /// Ascending trie positions.
    uncertain: Vec<u32>,
    /// With `pure_apart`: the subtrees pure in the walk's slice, accepted too but kept out
    /// of `accepted`, so that [`finish`] takes them as the slice's bitset
    /// ([`Slice::pure_ids`]) instead of token by token. Empty otherwise.
    pure: PositionRanges,
}

/// Two ascending lists of disjoint ranges as one (a walk's subtree, for the memo).
fn merged(a: &[(u32, u32)], b: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out: PositionRanges = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = if j == b.len() || (i < a.len() && a[i].0 < b[j].0) {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        push_range(&mut out, 0, next.0, next.1);
    }
    out
}

/// The mask of a walk's sets (`accepted`: ascending, disjoint ranges of trie positions, as
/// [`walk`] returns them; `words`: the bitmask length), in the smallest form
/// ([`token_set`]'s choice).
fn finish(
    trie: &TokenTrie,
    accepted: &[(u32, u32)],
    uncertain: Vec<u32>,
    words: usize,
    pure: Option<(&Slice, &[(u32, u32)])>,
) -> NodeMask {
    if let Some((slice, _)) = pure.filter(|(_, r)| !r.is_empty()) {
        // Every pure subtree of the slice was taken (a walk from the trie's root over a
        // language the node consumes reaches each one): the slice's own bitset holds
        // them, and only the other accepted tokens are set one by one.
        let mut bits = vec![0u32; words].into_boxed_slice();
        let n = slice.pure_ids.len().min(words);
        bits[..n].copy_from_slice(&slice.pure_ids[..n]);
        set_positions(trie, accepted, &mut bits);
        let count = bits.iter().map(|w| w.count_ones() as usize).sum();
        return NodeMask {
            accepted: token_set(trie, bits, count, words),
            uncertain,
        };
    }
    let positions = || accepted.iter().flat_map(|&(a, z)| a..z);
    let count: usize = accepted.iter().map(|&(a, z)| (z - a) as usize).sum();
    let rejected = trie.token_count() - count;
    let list_max = words / LIST_PER_WORDS;
    let as_list = count <= list_max && count <= rejected;
    if (as_list && 2 * accepted.len() < count)
        || (!as_list
            && rejected > list_max
            && count <= words * RUNS_IDS_PER_WORD
            && 2 * accepted.len() <= list_max)
    {
        // Few runs of the trie's order (the walk's ranges are ascending and disjoint;
        // neighbours are merged).
        let mut bounds: Vec<u32> = Vec::with_capacity(2 * accepted.len());
        for &(a, z) in accepted.iter().filter(|(a, z)| a < z) {
            match bounds.last_mut() {
                Some(last) if *last == a => *last = z,
                _ => bounds.extend([a, z]),
            }
        }
        bounds.shrink_to_fit();
        return NodeMask {
            accepted: TokenSet::Runs(bounds),
            uncertain,
        };
    }
    if as_list {
        // A short list: sorted directly (each trie position is one token, met once).
        let mut ids: Vec<u32> = positions().map(|p| trie.sorted[p as usize]).collect();
        ids.sort_unstable();
        return NodeMask {
            accepted: TokenSet::Accepted(ids),
            uncertain,
        };
    }
    if rejected <= list_max {
        // Nearly every token (free text, a string body): the rejected list is the gaps
        // between the accepted ranges, read in time proportional to it rather than to
        // the vocabulary (a bitset of 150k scattered ids, then a scan of every token,
        // was most of a cold free-text mask).
        let mut ids: Vec<u32> = Vec::with_capacity(rejected);
        let mut at = 0;
        for &(a, z) in accepted {
            ids.extend_from_slice(&trie.sorted[at..a as usize]);
            at = z as usize;
        }
        ids.extend_from_slice(&trie.sorted[at..]);
        ids.sort_unstable();
        return NodeMask {
            accepted: TokenSet::Rejected(ids),
            uncertain,
        };
    }
    // Sorting ids through a bitset: cheaper than sorting a list of 100k+ ids.
    let mut bits = vec![0u32; words].into_boxed_slice();
    set_positions(trie, accepted, &mut bits);
    NodeMask {
        accepted: token_set(trie, bits, count, words),
        uncertain,
    }
}

#[cfg(test)]
mod tests;
