//! The DFA tables of one mask walk ([`DfaTables`]) and the byte runs it takes whole
//! ([`byte_run`]).

use super::is_dfa_node;
use crate::automaton::Automaton;

/// Per walk: the DFA nodes met so far, each with a dense transition table. A node steps
/// as a DFA state when it is a real node with no call edges and pairwise disjoint byte
/// edges: the chart would hold it as a lone item, and one table lookup per trie node
/// replaces a chart push. Any other node needs the Earley chart.
pub(super) struct DfaTables {
    /// Real nodes of the automaton (`slot` may be longer).
    nodes: usize,
    /// Per real node: [`UNSEEN`], [`NOT_DFA`], or its table's offset (`t * 256` for table
    /// `t`, read by [`DfaTables::entry`]).
    /// Borrowed from the thread's [`DFA_SLOTS`] and given back all [`UNSEEN`] again, so a
    /// walk that meets a few nodes does not pay for one slot per node of the automaton.
    slot: Vec<u32>,
    /// The nodes whose slot was set.
    touched: Vec<u32>,
    /// 256 entries per table: the target node on that byte, with [`FINAL`] set when the
    /// target is final, or [`NO_EDGE`]. The first [`TABLES_PER_CHUNK`] tables (all that
    /// most walks make) sit here, read with one bounds check; the others in `chunks`. Table
    /// `t`'s offset (what [`DfaTables::table`] returns) is `t * 256`.
    first: Vec<u32>,
    /// Tables past the first [`TABLES_PER_CHUNK`], in chunks of that many that never move:
    /// table `t` at `chunks[t / TABLES_PER_CHUNK - 1]`, entry `(t % TABLES_PER_CHUNK) * 256`.
    chunks: Vec<Vec<u32>>,
    /// Tables made so far.
    tables: usize,
    /// Per table: its node's [`byte_run`]. A subtree whose bytes are all of the run's and
    /// whose tokens are no longer than the run is accepted whole.
    runs: Vec<([u64; 2], u32)>,
    /// Bytes of the longest token: a run this long holds every token.
    max_depth: u32,
}

/// DFA tables in [`DfaTables::first`] and per chunk of [`DfaTables::chunks`] (256 `u32`
/// each, so 16 KiB a chunk). A walk that steps many DFA nodes (a tag's tool names after
/// `"name": "`: hundreds) once kept its tables in one vector grown by doubling, which
/// copied every table made so far at each growth; chunks are added instead. (Session 43
/// had reserved room for 16 tables up front, 135 → 122 µs at that step with 100 tools;
/// 4 MiB reserved up front was slower, for page faults, and table space kept per thread no
/// faster, session 42.)
pub(super) const TABLES_PER_CHUNK: usize = 16;

/// A slot of a node not met yet in this walk.
pub(super) const UNSEEN: u32 = u32::MAX;
/// A slot of a node that is not a DFA node (the walk needs the chart there).
pub(super) const NOT_DFA: u32 = u32::MAX - 1;
/// A table entry of a byte the node has no edge on.
pub(super) const NO_EDGE: u32 = u32::MAX;
/// Set in a table entry whose target node is final.
pub(super) const FINAL: u32 = 1 << 31;

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
    /// True when the byte run of the node whose table is at `off` (at depth `d - 1`) takes
    /// whole the subtree of a trie node at depth `d` with bytes `below` and longest token
    /// `deepest` ([`run_holds`]).
    ///
    /// A subtree with a byte 0 or a byte from `80` on (bit 0 of `below`) is taken only by
    /// a run that also loops on every multibyte character (bit 0 of its bytes) and when
    /// `whole_chars` says its tokens are whole characters
    /// ([`TokenTrie::whole_chars_below`](super::TokenTrie::whole_chars_below)).
    #[inline(always)]
    pub(super) fn run_takes(
        &self,
        off: u32,
        below: [u64; 2],
        deepest: u16,
        d: usize,
        whole_chars: impl FnOnce() -> bool,
    ) -> bool {
        let run = self.runs[(off / 256) as usize];
        let holds =
            run_holds(run, below, deepest, d) && (below[0] & run.0[0] & 1 == 0 || whole_chars());
        if holds {
            count_run_take(run.1, self.max_depth, below[0] & 1 != 0);
        }
        holds
    }

    /// How much the byte run of the table at `off` takes, to pick the widest of a chart
    /// set's items: its ASCII bytes (and 128 more when it takes multibyte characters too)
    /// times its length; 0 for no run.
    pub(super) fn run_width(&self, off: u32) -> u64 {
        let (bytes, len) = self.runs[(off / 256) as usize];
        let chars = (bytes[0] & 1) * 128;
        ((bytes[0] & !1).count_ones() as u64 + bytes[1].count_ones() as u64 + chars) * len as u64
    }

    /// The tables of a walk over `aut`, on a trie whose longest token is `max_depth`
    /// bytes (a byte run that long takes every token): none made yet, the slots borrowed
    /// from the thread's [`DFA_SLOTS`].
    pub(super) fn new(aut: &Automaton, max_depth: usize) -> Self {
        let max_depth = max_depth.min(u32::MAX as usize / 2) as u32;
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
            first: Vec::with_capacity(TABLES_PER_CHUNK * 256),
            chunks: Vec::new(),
            tables: 0,
            runs: Vec::new(),
            max_depth,
        }
    }

    /// Entry `b` of the table at offset `off` (from [`DfaTables::table`]).
    #[inline]
    pub(super) fn entry(&self, off: u32, b: u8) -> u32 {
        let at = off as usize + b as usize;
        match self.first.get(at) {
            Some(&e) => e,
            None => {
                const CHUNK: usize = TABLES_PER_CHUNK * 256;
                self.chunks[at / CHUNK - 1][at % CHUNK]
            }
        }
    }

    /// The table offset of node `n`, or `None` when it needs the chart (a virtual node
    /// too, or a node id that does not fit beside the [`FINAL`] bit). A node met before
    /// is one read, inlined into the walk's loop (which asks at nearly every trie node
    /// it visits); [`DfaTables::table_first`] sees a node the first time.
    #[inline(always)]
    pub(super) fn table(&mut self, aut: &Automaton, n: u32) -> Option<u32> {
        // Slots past the real nodes stay `UNSEEN` (`table_first` answers them).
        if let Some(&s) = self.slot.get(n as usize) {
            if s < NOT_DFA {
                return Some(s);
            }
        }
        self.table_first(aut, n)
    }

    /// [`DfaTables::table`] for a node not met before (or not a DFA node, or past the real
    /// nodes).
    #[inline(never)]
    fn table_first(&mut self, aut: &Automaton, n: u32) -> Option<u32> {
        if n as usize >= self.nodes {
            return None;
        }
        let slot = &mut self.slot[n as usize];
        if *slot == UNSEEN {
            self.touched.push(n);
            let node = &aut.nodes[n as usize];
            let edges = &aut.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize];
            *slot = if is_dfa_node(aut, n) {
                let t = self.tables;
                self.tables += 1;
                // Within its capacity: `first` and each chunk never move.
                let chunk = match t / TABLES_PER_CHUNK {
                    0 => &mut self.first,
                    c => {
                        if t % TABLES_PER_CHUNK == 0 {
                            self.chunks.push(Vec::with_capacity(TABLES_PER_CHUNK * 256));
                        }
                        &mut self.chunks[c - 1]
                    }
                };
                let at = (t % TABLES_PER_CHUNK) * 256;
                chunk.resize(at + 256, NO_EDGE);
                for e in edges {
                    let fin = aut.is_final(e.target) as u32 * FINAL;
                    chunk[at + e.lo as usize..=at + e.hi as usize].fill(e.target | fin);
                }
                #[cfg(test)]
                let run = if NO_BYTE_RUNS.with(|x| x.get()) {
                    ([0, 0], 0)
                } else {
                    byte_run(aut, n, self.max_depth)
                };
                #[cfg(not(test))]
                let run = byte_run(aut, n, self.max_depth);
                let mut run = run;
                if run.1 == self.max_depth && loops_on_every_character(aut, n, run.0) {
                    // Bit 0 (never an ASCII byte of a run): multibyte characters too.
                    run.0[0] |= 1;
                }
                self.runs.push(run);
                (t * 256) as u32
            } else {
                NOT_DFA
            };
        }
        (*slot != NOT_DFA).then_some(*slot)
    }
}

#[cfg(test)]
thread_local! {
    /// Walks on this thread take no byte run whole (tests compare them with those that do).
    pub(crate) static NO_BYTE_RUNS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Subtrees walks on this thread took whole by a byte run: (all, by a bounded run).
    pub(crate) static RUN_TAKES: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
    /// Of those, the subtrees with multibyte characters.
    pub(crate) static CHAR_RUN_TAKES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts a subtree taken whole by a run of length `len` of a walk whose runs hold every
/// token at `limit`, `_multibyte` when it has multibyte characters (tests only).
#[inline]
fn count_run_take(_len: u32, _limit: u32, _multibyte: bool) {
    #[cfg(test)]
    {
        RUN_TAKES.with(|t| {
            let (all, bounded) = t.get();
            t.set((all + 1, bounded + (_len < _limit) as usize));
        });
        CHAR_RUN_TAKES.with(|t| t.set(t.get() + _multibyte as usize));
    }
}

/// True when a [`byte_run`] `(bytes, length)` of the node at depth `d - 1` takes whole the
/// subtree of a trie node at depth `d` whose bytes are `below` and whose longest token is
/// `deepest` bytes: every byte is the run's, and the run is at least the
/// `deepest - (d - 1)` bytes its tokens read from that node.
#[inline(always)]
fn run_holds(run: ([u64; 2], u32), below: [u64; 2], deepest: u16, d: usize) -> bool {
    below[0] & !run.0[0] == 0 && below[1] & !run.0[1] == 0 && (deepest as u32) < run.1 + d as u32
}

/// The well-formed UTF-8 multibyte characters (Unicode Table 3-7) as byte ranges, one
/// row per shape.
const MULTIBYTE: [&[(u8, u8)]; 8] = [
    &[(0xC2, 0xDF), (0x80, 0xBF)],
    &[(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],
    &[(0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)],
    &[(0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)],
];

/// Whether real node `n` steps every byte of `run` (its byte run's ASCII bytes) back to
/// itself and every well-formed multibyte character back to itself too (each byte of it
/// having an edge): then every token of those bytes and characters, the last maybe cut
/// short, is accepted from `n`, and its run takes such a subtree whole. A string body's
/// loop (`[^"\\]`, `\W`) is one; a class without some character (`.` without U+2028) is
/// not.
fn loops_on_every_character(aut: &Automaton, n: u32, run: [u64; 2]) -> bool {
    let edges = aut.bytes_of(n);
    let ascii_home = (1u8..0x80).all(|b| {
        run[(b >> 6) as usize] >> (b & 63) & 1 == 0
            || edges
                .iter()
                .any(|e| e.lo <= b && b <= e.hi && e.target == n)
    });
    ascii_home && MULTIBYTE.iter().all(|row| reads_home(aut, n, row, n))
}

/// Whether from `at` every byte string of the ranges `rows` (one range per byte) has an
/// edge at each byte and ends at `home`.
fn reads_home(aut: &Automaton, at: u32, rows: &[(u8, u8)], home: u32) -> bool {
    let Some((&(lo, hi), rest)) = rows.split_first() else {
        return at == home;
    };
    let mut next = lo as u16;
    for e in aut.bytes_of(at) {
        if (e.hi as u16) < next || e.lo > hi {
            continue;
        }
        if e.lo as u16 > next || !reads_home(aut, e.target, rest, home) {
            return false;
        }
        next = e.hi as u16 + 1;
        if next > hi as u16 {
            return true;
        }
    }
    false
}

/// The ASCII bytes `lo..=hi`, from 1 to 127 only, as a set of
/// [`TokenTrie::bytes_below`](super::TokenTrie::bytes_below).
fn ascii_set(lo: u8, hi: u8) -> [u64; 2] {
    let (lo, hi) = (lo.max(1), hi.min(0x7F));
    let mut set = [0u64; 4];
    if lo <= hi {
        crate::automaton::add_range(&mut set, lo, hi);
    }
    [set[0], set[1]]
}

/// The most nodes of a chain that [`byte_run`] follows (a loop found within them still
/// gives the whole `limit`): a run this long takes every subtree whose longest token is
/// at most this many bytes below its node.
const CHAIN_MAX: u32 = 16;

/// The *byte run* of real node `n`: the ASCII bytes (1 to 127) on which it steps to its
/// most common such target, and how many of them in a row the automaton consumes from
/// `n`, one path through nodes that each step all of them to one node: every string of
/// those bytes of at most that many bytes is then accepted from `n`. A self-loop (a
/// string body's `[^"\\]`), or a run `limit` long (the longest token), gives `limit`; a
/// bounded repetition written out (a host name's label of at most 63 letters and digits),
/// the bound left. A node whose edges on the run's bytes go to more than one node ends
/// it, and so does a virtual node (it has no byte edges here). A chain that comes back to
/// `n` or to its first node loops: `limit`. A chain is followed for at most
/// [`CHAIN_MAX`] nodes.
fn byte_run(aut: &Automaton, n: u32, limit: u32) -> ([u64; 2], u32) {
    let or = |a: [u64; 2], b: [u64; 2]| [a[0] | b[0], a[1] | b[1]];
    let and = |a: [u64; 2], b: [u64; 2]| [a[0] & b[0], a[1] & b[1]];
    // The target with the most ASCII bytes, and those bytes.
    let mut counts: Vec<(u32, u32, [u64; 2])> = Vec::new();
    for e in aut.bytes_of(n) {
        let set = ascii_set(e.lo, e.hi);
        let k = set[0].count_ones() + set[1].count_ones();
        if k == 0 {
            continue;
        }
        match counts.iter_mut().find(|c| c.0 == e.target) {
            Some(c) => {
                c.1 += k;
                c.2 = or(c.2, set);
            }
            None => counts.push((e.target, k, set)),
        }
    }
    let Some(&(first, _, class)) = counts.iter().max_by_key(|c| c.1) else {
        return ([0, 0], 0);
    };
    let (mut at, mut len) = (first, 1u32);
    while len < limit {
        // Every byte of the class steps from `at` to one node.
        let (mut next, mut covered) = (None, [0u64; 2]);
        for e in aut.bytes_of(at) {
            let set = and(ascii_set(e.lo, e.hi), class);
            if set == [0, 0] {
                continue;
            }
            if next.is_some_and(|t| t != e.target) {
                return (class, len);
            }
            next = Some(e.target);
            covered = or(covered, set);
        }
        match next {
            Some(t) if covered == class => {
                if t == at || t == n || t == first {
                    return (class, limit);
                }
                if len == CHAIN_MAX {
                    // Long enough for nearly every subtree; following a longer chain (a
                    // written-out `{0,254}`) would cost its length at each of its nodes a
                    // walk meets.
                    return (class, len);
                }
                at = t;
                len += 1;
            }
            _ => return (class, len),
        }
    }
    (class, limit)
}
