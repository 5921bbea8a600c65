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

use super::trie::TokenTrie;
use crate::automaton::{byte_in, Automaton};
use crate::limits::Deadline;
use crate::parser::Chart;
use crate::vocab::Vocabulary;

/// A set of token ids in its smallest form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TokenSet {
    /// The listed ids (sorted).
    Accepted(Vec<u32>),
    /// Every text token except the listed ids (sorted; uncertain tokens are listed too).
    Rejected(Vec<u32>),
    /// One bit per token id, `ceil(vocab_size / 32)` words.
    Bitset(Box<[u32]>),
}

impl Default for TokenSet {
    /// No token.
    fn default() -> Self {
        TokenSet::Accepted(Vec::new())
    }
}

/// The precomputed mask of one automaton node.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeMask {
    pub accepted: TokenSet,
    /// Trie positions (indices into [`TokenTrie::sorted`]) of uncertain tokens, ascending.
    pub uncertain: Vec<u32>,
}

impl NodeMask {
    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        let set = match &self.accepted {
            TokenSet::Accepted(v) | TokenSet::Rejected(v) => v.capacity() * 4,
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

/// Computes the mask of `node`. `words` is the bitmask length in `u32` words. `None` when
/// `deadline` passed during the walk (looked at every [`DEADLINE_EVERY`] trie nodes and
/// every [`DEADLINE_WORK`] units of chart work).
pub(crate) fn compute_node_mask(
    aut: &Automaton,
    trie: &TokenTrie,
    node: u32,
    words: usize,
    deadline: &Deadline,
) -> Option<NodeMask> {
    let follow = &aut.follow[aut.rule_of(node) as usize];
    let chart = Chart::new(aut, node);
    walk(trie, aut, chart, follow, words, deadline)
}

/// Computes the mask of `node` in a rule instance called from `caller` (a node with a call
/// edge to `node`'s rule). Only the node's own uncertain tokens are examined: the result's
/// `accepted` lists those that this context accepts (the node's own accepted set is applied
/// separately), and `uncertain` those that may also run past the caller's rule. `None` when
/// `deadline` passed (looked at every [`DEADLINE_EVERY`] tokens and every
/// [`DEADLINE_WORK`] units of chart work).
pub(crate) fn compute_pair_mask(
    aut: &Automaton,
    trie: &TokenTrie,
    vocab: &Vocabulary,
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
    // Bytes of `prev` on the chart; `failed`: byte `pushed` of `prev` was rejected.
    let mut pushed = 0usize;
    let mut failed = false;
    // Cost: one chart push per byte not shared with the previous token.
    let mut last_look = 0u64;
    for (k, &p) in node_mask.uncertain.iter().enumerate() {
        if past_deadline(k + 1, &chart, &mut last_look, deadline) {
            return None;
        }
        let id = trie.sorted[p as usize];
        let bytes = vocab.token_bytes(id).unwrap_or(&[]);
        let lcp = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
        if failed && lcp > pushed {
            // Shares the failed prefix: same verdict as the previous token.
            if prefix_ok_at_failure(&prefix_ok, &exit_here, pushed, prev[pushed], follow) {
                uncertain.push(p);
            }
            continue;
        }
        if lcp < pushed {
            chart.truncate(base + lcp);
            prefix_ok.truncate(lcp + 1);
            exit_here.truncate(lcp + 1);
            pushed = lcp;
        }
        failed = false;
        prev = bytes;
        while pushed < bytes.len() {
            let b = bytes[pushed];
            let ok_before = prefix_ok_at_failure(&prefix_ok, &exit_here, pushed, b, follow);
            if chart.push_byte(aut, b) {
                pushed += 1;
                prefix_ok.push(ok_before);
                exit_here.push(chart.can_exit());
            } else {
                failed = true;
                if ok_before {
                    uncertain.push(p);
                }
                break;
            }
        }
        if !failed {
            accepted.push(id);
        }
    }
    accepted.sort_unstable();
    Some(NodeMask {
        accepted: TokenSet::Accepted(accepted),
        uncertain,
    })
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

fn walk(
    trie: &TokenTrie,
    aut: &Automaton,
    mut chart: Chart,
    follow: &[u64; 4],
    words: usize,
    deadline: &Deadline,
) -> Option<NodeMask> {
    let base = chart.len();
    let mut accepted: Vec<u32> = Vec::new(); // trie positions
    let mut uncertain: Vec<u32> = Vec::new();
    // exit_here[c]: after c bytes the base rule could end; prefix_ok[c]: it could end after
    // some k in 1..c bytes with byte k in `follow`.
    let mut prefix_ok: Vec<bool> = vec![false];
    let mut exit_here: Vec<bool> = vec![false];
    let n = trie.byte.len();
    let mut i = 0usize;
    // Cost: one chart push per trie node visited; failed subtrees are skipped whole.
    let mut visits = 0usize;
    let mut last_look = 0u64;
    while i < n {
        visits += 1;
        if past_deadline(visits, &chart, &mut last_look, deadline) {
            return None;
        }
        let d = trie.depth[i] as usize;
        while chart.len() > base + d - 1 {
            chart.pop();
            prefix_ok.pop();
            exit_here.pop();
        }
        let b = trie.byte[i];
        // Could the rule end before this byte (after d - 1 >= 1 bytes) with b following it?
        let ok_before = prefix_ok[d - 1] || (d >= 2 && exit_here[d - 1] && byte_in(follow, b));
        if chart.push_byte(aut, b) {
            accepted.extend(trie.tok_start[i]..trie.tok_here_end[i]);
            prefix_ok.push(ok_before);
            exit_here.push(chart.can_exit());
            i += 1;
        } else {
            if ok_before {
                let end = trie.subtree_end[i] as usize;
                uncertain.extend(trie.tok_start[i]..trie.tok_start[end]);
            }
            i = trie.subtree_end[i] as usize;
        }
    }
    // Sorting ids through a bitset: cheaper than sorting a list of 100k+ ids.
    let mut bits = vec![0u32; words].into_boxed_slice();
    for &p in &accepted {
        let id = trie.sorted[p as usize];
        bits[(id / 32) as usize] |= 1 << (id % 32);
    }
    let count = accepted.len();
    let rejected_count = trie.token_count() - count;
    // The rejected form lists every text token that is not accepted (uncertain ones too).
    let accepted = if count <= words && count <= rejected_count {
        TokenSet::Accepted(set_bits(&bits))
    } else if rejected_count <= words {
        let mut rej: Vec<u32> = trie
            .sorted
            .iter()
            .copied()
            .filter(|&id| bits[(id / 32) as usize] >> (id % 32) & 1 == 0)
            .collect();
        rej.sort_unstable();
        TokenSet::Rejected(rej)
    } else {
        TokenSet::Bitset(bits)
    };
    Some(NodeMask {
        accepted,
        uncertain,
    })
}

/// The indices of the set bits, ascending.
fn set_bits(bits: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    for (w, &word) in bits.iter().enumerate() {
        let mut x = word;
        while x != 0 {
            out.push(w as u32 * 32 + x.trailing_zeros());
            x &= x - 1;
        }
    }
    out
}
