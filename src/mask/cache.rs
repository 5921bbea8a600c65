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

/// A node's token set is a list (of accepted or of rejected ids) only when it holds at most
/// `words / LIST_PER_WORDS` ids (`words`: the bitmask length); a bitset otherwise. Applying
/// a list costs about 1 ns an id (scattered bit updates), a bitset about 0.25 ns a word.
const LIST_PER_WORDS: usize = 4;

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
/// subtrees). `None` when `deadline` passed during the walk (looked at every
/// [`DEADLINE_EVERY`] trie nodes and every [`DEADLINE_WORK`] units of chart work).
pub(crate) fn compute_node_mask(
    aut: &Automaton,
    trie: &TokenTrie,
    node: u32,
    words: usize,
    memo: (&SubtreeMemo, &[u32]),
    deadline: &Deadline,
) -> Option<NodeMask> {
    let follow = &aut.follow[aut.rule_of(node) as usize];
    walk(trie, aut, node, follow, words, memo, deadline)
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

/// The sets one subtree contributes (trie positions, ascending within the subtree).
#[derive(Debug)]
struct Subtree {
    accepted: Box<[u32]>,
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

    fn insert(&self, key: (u32, u32), accepted: &[u32], uncertain: &[u32]) {
        use std::sync::atomic::Ordering::Relaxed;
        let size = (accepted.len() + uncertain.len()) * 4 + 64;
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
    pub(crate) fn clear(&mut self) {
        self.map
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        *self.bytes.get_mut() = 0;
    }
}

/// Per walk: the DFA nodes met so far, each with a dense transition table. A node steps
/// as a DFA state when it is a real node with no call edges and pairwise disjoint byte
/// edges: the chart would hold it as a lone item, and one table lookup per trie node
/// replaces a chart push. Any other node needs the Earley chart.
struct DfaTables {
    /// Real nodes of the automaton (`slot` may be longer).
    nodes: usize,
    /// Per real node: [`UNSEEN`], [`NOT_DFA`], or the offset of its table in `tables`.
    /// Borrowed from the thread's [`DFA_SLOTS`] and given back all [`UNSEEN`] again, so a
    /// walk that meets a few nodes does not pay for one slot per node of the automaton.
    slot: Vec<u32>,
    /// The nodes whose slot was set.
    touched: Vec<u32>,
    /// 256 entries per table: the target node on that byte, with [`FINAL`] set when the
    /// target is final, or [`NO_EDGE`].
    tables: Vec<u32>,
}

const UNSEEN: u32 = u32::MAX;
const NOT_DFA: u32 = u32::MAX - 1;
const NO_EDGE: u32 = u32::MAX;
const FINAL: u32 = 1 << 31;

thread_local! {
    /// Slots of [`DfaTables`] between walks on this thread, all [`UNSEEN`].
    static DFA_SLOTS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for DfaTables {
    fn drop(&mut self) {
        for &n in &self.touched {
            self.slot[n as usize] = UNSEEN;
        }
        let slot = std::mem::take(&mut self.slot);
        DFA_SLOTS.with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if s.len() < slot.len() {
                    *s = slot;
                }
            }
        });
    }
}

impl DfaTables {
    fn new(aut: &Automaton) -> Self {
        let nodes = aut.nodes.len();
        let mut slot = DFA_SLOTS
            .with(|s| s.try_borrow_mut().map(|mut s| std::mem::take(&mut *s)))
            .unwrap_or_default();
        if slot.len() < nodes {
            slot.resize(nodes, UNSEEN);
        }
        DfaTables {
            nodes,
            slot,
            touched: Vec::new(),
            tables: Vec::new(),
        }
    }

    /// The table offset of node `n`, or `None` when it needs the chart (a virtual node
    /// too, or a node id that does not fit beside the [`FINAL`] bit).
    #[inline]
    fn table(&mut self, aut: &Automaton, n: u32) -> Option<u32> {
        if n as usize >= self.nodes {
            return None;
        }
        let slot = &mut self.slot[n as usize];
        if *slot == UNSEEN {
            self.touched.push(n);
            let node = &aut.nodes[n as usize];
            let edges = &aut.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize];
            let dfa = node.calls.0 == node.calls.1
                && edges.windows(2).all(|w| w[0].hi < w[1].lo)
                && edges.iter().all(|e| e.target < FINAL);
            *slot = if dfa {
                let off = self.tables.len();
                self.tables.resize(off + 256, NO_EDGE);
                for e in edges {
                    let fin = aut.is_final(e.target) as u32 * FINAL;
                    self.tables[off + e.lo as usize..=off + e.hi as usize].fill(e.target | fin);
                }
                off as u32
            } else {
                NOT_DFA
            };
        }
        (*slot != NOT_DFA).then_some(*slot)
    }
}

/// Marks a depth whose state is in the chart rather than in `dfa`.
const IN_CHART: u32 = u32::MAX;

/// Walks the trie from base node `node` (the mask walk of [`compute_node_mask`]). While
/// the chart would hold one item at a DFA node (see [`Step`]), the walk steps that node
/// directly; at the first other node it starts a chart there (its closure is what the
/// chart would hold: the base item keeps origin [`crate::parser::EXT`]) and walks that
/// subtree with the chart. The sets are those of a walk with the chart throughout.
fn walk(
    trie: &TokenTrie,
    aut: &Automaton,
    node: u32,
    follow: &[u64; 4],
    words: usize,
    (memo, class): (&SubtreeMemo, &[u32]),
    deadline: &Deadline,
) -> Option<NodeMask> {
    let mut dfa_tables = DfaTables::new(aut);
    let mut chart = Chart::new(aut, node);
    // Depth (bytes consumed) of the chart's set 0 while a subtree is walked with the chart.
    let start = dfa_tables.table(aut, node);
    let mut chart_from = if start.is_some() { usize::MAX } else { 0 };
    // dfa[c]: the table of the DFA node after c bytes, or IN_CHART.
    let mut dfa: Vec<u32> = vec![start.unwrap_or(IN_CHART)];
    let mut accepted: Vec<u32> = Vec::new(); // trie positions
    let mut uncertain: Vec<u32> = Vec::new();
    // exit_here[c]: after c bytes the base rule could end; prefix_ok[c]: it could end after
    // some k in 1..c bytes with byte k in `follow`.
    let mut prefix_ok: Vec<bool> = vec![false];
    let mut exit_here: Vec<bool> = vec![false];
    let n = trie.byte.len();
    let mut i = 0usize;
    // Cost: one edge lookup (DFA) or chart push per trie node visited; failed subtrees are
    // skipped whole.
    let mut visits = 0usize;
    let mut last_look = 0u64;
    // The subtree under a first byte being walked for the memo: (key, where its accepted
    // and uncertain positions start, visits before it).
    let mut open: Option<((u32, u32), usize, usize, usize)> = None;
    while i < n {
        visits += 1;
        if past_deadline(visits, &chart, &mut last_look, deadline) {
            return None;
        }
        let d = trie.depth[i] as usize;
        if d == 1 {
            if let Some((key, a, u, v)) = open.take() {
                if visits - v >= SubtreeMemo::MIN_VISITS {
                    memo.insert(key, &accepted[a..], &uncertain[u..]);
                }
            }
        }
        prefix_ok.truncate(d);
        exit_here.truncate(d);
        dfa.truncate(d);
        if chart_from != usize::MAX {
            if d - 1 < chart_from {
                chart_from = usize::MAX;
            } else {
                chart.truncate(d - chart_from);
            }
        }
        let b = trie.byte[i];
        // Could the rule end before this byte (after d - 1 >= 1 bytes) with b following it?
        let ok_before = prefix_ok[d - 1] || (d >= 2 && exit_here[d - 1] && byte_in(follow, b));
        let exit = if chart_from != usize::MAX {
            chart.push_byte(aut, b).then(|| {
                dfa.push(IN_CHART);
                chart.can_exit()
            })
        } else {
            let e = dfa_tables.tables[dfa[d - 1] as usize + b as usize];
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
                open = Some((key, accepted.len(), uncertain.len(), visits));
            }
            (e != NO_EDGE).then(|| {
                let t = e & !FINAL;
                match dfa_tables.table(aut, t) {
                    Some(off) => {
                        dfa.push(off);
                        e & FINAL != 0
                    }
                    None => {
                        chart.reset(aut, t);
                        chart_from = d;
                        dfa.push(IN_CHART);
                        chart.can_exit()
                    }
                }
            })
        };
        match exit {
            Some(exit) => {
                accepted.extend(trie.tok_start[i]..trie.tok_here_end[i]);
                prefix_ok.push(ok_before);
                exit_here.push(exit);
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
    if let Some((key, a, u, v)) = open.take() {
        if visits - v >= SubtreeMemo::MIN_VISITS {
            memo.insert(key, &accepted[a..], &uncertain[u..]);
        }
    }
    let count = accepted.len();
    if count <= words / LIST_PER_WORDS && count <= trie.token_count() - count {
        // A short list: sorted directly (each trie position is one token, met once).
        let mut ids: Vec<u32> = accepted.iter().map(|&p| trie.sorted[p as usize]).collect();
        ids.sort_unstable();
        return Some(NodeMask {
            accepted: TokenSet::Accepted(ids),
            uncertain,
        });
    }
    // Sorting ids through a bitset: cheaper than sorting a list of 100k+ ids.
    let mut bits = vec![0u32; words].into_boxed_slice();
    for &p in &accepted {
        let id = trie.sorted[p as usize];
        bits[(id / 32) as usize] |= 1 << (id % 32);
    }
    Some(NodeMask {
        accepted: token_set(trie, bits, count, words),
        uncertain,
    })
}

/// The smallest form of the token set `bits` (`count` text tokens set, `words` words).
pub(crate) fn token_set(
    trie: &TokenTrie,
    bits: Box<[u32]>,
    count: usize,
    words: usize,
) -> TokenSet {
    let rejected_count = trie.token_count() - count;
    // The rejected form lists every text token that is not accepted (uncertain ones too).
    // A list is applied one scattered bit at a time (about 1 ns an id), a bitset a word
    // at a time with SIMD (about 0.25 ns a word): lists only up to a quarter of the words.
    let list_max = words / LIST_PER_WORDS;
    if count <= list_max && count <= rejected_count {
        TokenSet::Accepted(set_bits(&bits))
    } else if rejected_count <= list_max {
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
    }
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
