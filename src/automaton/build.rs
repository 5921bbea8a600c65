//! Rule bodies → Thompson NFAs over byte ranges, rule calls and token terminals → DFAs by
//! subset construction. One automaton per rule; calls stay edges (the parser runs them with
//! a stack), so the automata stay small whatever the grammar's recursion.

use super::regular::TailPlan;
use super::{ByteEdge, CallEdge, TokenEdge};
use crate::grammar::{CharClass, Expr};
use crate::limits::Deadline;
use regex_syntax::utf8::Utf8Sequences;
use rustc_hash::FxHashMap;
use std::hash::BuildHasher;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Label {
    Eps,
    Bytes(u8, u8),
    Call(u32),
    Token(u32),
}

/// A Thompson NFA for one rule, while it is being built: its edges in the order added.
#[derive(Default)]
pub(crate) struct Nfa<'p> {
    /// Number of states.
    states: u32,
    /// (from, label, to), in the order added.
    edges: Vec<(u32, Label, u32)>,
    /// Tail calls into the rule's own right-linear component become jumps (see
    /// [`super::regular`]).
    plan: Option<&'p TailPlan<'p>>,
    /// Jumps met while adding: (from state, callee rule), resolved by `build_automaton`.
    jumps: Vec<(u32, u32)>,
    /// The edges of the classes met so far.
    memo: ClassMemo,
}

/// A class's NFA fragment, for any entry and exit: edges `(from, lo, hi, to)` between
/// local states, 0 the entry, 1 the exit, `2..2 + tails` states of its own.
#[derive(Debug)]
pub(crate) struct ClassTemplate {
    edges: Vec<(u32, u8, u8, u32)>,
    tails: u32,
}

/// What one automaton build keeps from rule to rule: class fragments by class (a JSON
/// string body's class recurs in every string of every rule, and each made anew cost its
/// normalization and UTF-8 split), and the vectors of the last rule's NFA for the next
/// rule to fill (a schema of thousands of rules grew them anew for each).
#[derive(Debug, Default)]
pub(crate) struct ClassMemo {
    classes: FxHashMap<CharClass, std::rc::Rc<ClassTemplate>>,
    /// The last rule's NFA edges (emptied before use).
    edges: Vec<(u32, Label, u32)>,
    /// The last rule's NFA frozen (its rows are overwritten by [`Frozen::new_in`]).
    frozen: Option<Frozen>,
}

impl ClassMemo {
    /// The fragment of `c`: each UTF-8 byte sequence of the class, its tails shared. Every
    /// sequence ends in the exit, so two whose last k byte ranges are equal share the
    /// states of those k ranges (regex-automata's UTF-8 suffix cache). A class of most of
    /// Unicode then has a state per "bytes still to read" and lead range kind instead of
    /// one per sequence, and the subset construction makes no state per sequence for
    /// minimization to merge back.
    fn class(&mut self, c: &CharClass) -> std::rc::Rc<ClassTemplate> {
        if let Some(t) = self.classes.get(c) {
            return t.clone();
        }
        let mut edges = Vec::new();
        let mut tails: Vec<(Tail, u32)> = Vec::new();
        for (lo, hi) in c.normalized() {
            let (Some(lo), Some(hi)) = (char::from_u32(lo), char::from_u32(hi)) else {
                continue;
            };
            for seq in Utf8Sequences::new(lo, hi) {
                let ranges = seq.as_slice();
                let mut next = 1;
                for i in (1..ranges.len()).rev() {
                    let tail = Tail::of(&ranges[i..]);
                    next = match tails.iter().find(|(t, _)| *t == tail) {
                        Some(&(_, s)) => s,
                        None => {
                            let s = 2 + tails.len() as u32;
                            edges.push((s, ranges[i].start, ranges[i].end, next));
                            tails.push((tail, s));
                            s
                        }
                    };
                }
                edges.push((0, ranges[0].start, ranges[0].end, next));
            }
        }
        let t = std::rc::Rc::new(ClassTemplate {
            edges,
            tails: tails.len() as u32,
        });
        self.classes.insert(c.clone(), t.clone());
        t
    }
}

/// The body of a rule failed to build (depth or size limit).
#[derive(Debug)]
pub(crate) enum BuildError {
    TooDeep(usize),
    TooManyStates,
    /// Subset construction exceeded its budget (internal: the caller falls back to the NFA).
    Blowup,
    /// The compile's deadline passed.
    Timeout,
    /// The construction's working memory (state sets, ε-free edges) passed its budget; the
    /// bytes used when it stopped.
    Memory(u64),
}

/// Bytes counted per element of a stored state set (the set and its hash-map key) and per
/// edge of the ε-free automaton: a lower bound of what they cost, so the budget is never
/// overstated.
const SET_ELEMENT_BYTES: u64 = 8;
const EDGE_BYTES: u64 = 8;

/// How deep an expression tree may be before the builder refuses it (it recurses).
pub(crate) const MAX_EXPR_DEPTH: usize = 2_000;

impl Nfa<'_> {
    fn state(&mut self) -> u32 {
        self.states += 1;
        self.states - 1
    }

    fn edge(&mut self, from: u32, label: Label, to: u32) {
        self.edges.push((from, label, to));
    }

    /// Adds `e` starting at `entry`; returns its exit state. `resolve` maps a token terminal
    /// to its id (already checked by the caller).
    pub(crate) fn add(
        &mut self,
        e: &Expr,
        entry: u32,
        depth: usize,
        token: &dyn Fn(&crate::grammar::TokenRef) -> u32,
    ) -> Result<u32, BuildError> {
        if depth > MAX_EXPR_DEPTH {
            return Err(BuildError::TooDeep(depth));
        }
        Ok(match e {
            Expr::Empty => entry,
            Expr::Bytes(b) => {
                let mut s = entry;
                for &c in b {
                    let t = self.state();
                    self.edge(s, Label::Bytes(c, c), t);
                    s = t;
                }
                s
            }
            Expr::Class(c) => {
                let exit = self.state();
                let template = self.memo.class(c);
                let base = self.states;
                self.states += template.tails;
                let local = |k: u32| match k {
                    0 => entry,
                    1 => exit,
                    k => base + k - 2,
                };
                for &(from, lo, hi, to) in template.edges.iter() {
                    self.edge(local(from), Label::Bytes(lo, hi), local(to));
                }
                exit
            }
            Expr::Seq(v) => {
                let mut s = entry;
                for x in v {
                    s = self.add(x, s, depth + 1, token)?;
                }
                s
            }
            Expr::Choice(v) => {
                let exit = self.state();
                for x in v {
                    let s = self.state();
                    self.edge(entry, Label::Eps, s);
                    let t = self.add(x, s, depth + 1, token)?;
                    self.edge(t, Label::Eps, exit);
                }
                exit
            }
            Expr::Repeat {
                expr,
                min,
                max: None,
            } => {
                // `x{m,}` = x^(m-1) x+ (or x* when m = 0): one copy in a loop through a fresh
                // head, left through a fresh exit, so nothing after it can loop back into it
                // and `+` nested in `+` does not double the automaton at every level.
                let s = self.copies(expr, entry, min.saturating_sub(1), depth, token)?;
                let head = self.state();
                self.edge(s, Label::Eps, head);
                let t = self.add(expr, head, depth + 1, token)?;
                self.edge(t, Label::Eps, head);
                let exit = self.state();
                self.edge(if *min == 0 { head } else { t }, Label::Eps, exit);
                exit
            }
            Expr::Repeat {
                expr,
                min,
                max: Some(max),
            } => {
                // x^min, then (max - min) nested optional copies, each able to leave through
                // one fresh exit.
                let mut s = self.copies(expr, entry, *min, depth, token)?;
                let exit = self.state();
                self.edge(s, Label::Eps, exit);
                for _ in *min..*max {
                    let t = self.add(expr, s, depth + 1, token)?;
                    self.edge(t, Label::Eps, exit);
                    s = t;
                }
                exit
            }
            Expr::Rule(r) if self.plan.is_some_and(|p| p.is_tail_call(e)) => {
                // The rest of the callee is the rest of this rule: jump, and leave through
                // a state nothing reaches (the callee's body leads to the accept state).
                self.jumps.push((entry, r.0));
                self.state()
            }
            Expr::Rule(r) => {
                let t = self.state();
                self.edge(entry, Label::Call(r.0), t);
                t
            }
            Expr::Token(tr) => {
                let t = self.state();
                self.edge(entry, Label::Token(token(tr)), t);
                t
            }
        })
    }

    /// Adds `k` copies of `e` in sequence from `entry`; returns the last exit.
    fn copies(
        &mut self,
        e: &Expr,
        entry: u32,
        k: u32,
        depth: usize,
        token: &dyn Fn(&crate::grammar::TokenRef) -> u32,
    ) -> Result<u32, BuildError> {
        let mut s = entry;
        for _ in 0..k {
            s = self.add(e, s, depth + 1, token)?;
        }
        Ok(s)
    }
}

/// The byte ranges that end a UTF-8 sequence (at most three: a sequence's lead range is
/// never shared), as the key of the state that reads them.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Tail([(u8, u8); 3], u8);

impl Tail {
    fn of(ranges: &[regex_syntax::utf8::Utf8Range]) -> Tail {
        let mut t = [(0, 0); 3];
        for (slot, r) in t.iter_mut().zip(ranges) {
            *slot = (r.start, r.end);
        }
        Tail(t, ranges.len() as u8)
    }
}

/// A built NFA: each state's edges in one slice (compressed rows, in the order added).
#[derive(Debug)]
struct Frozen {
    /// Row `s` is `edges[offsets[s]..offsets[s + 1]]`.
    offsets: Vec<u32>,
    edges: Vec<(Label, u32)>,
    /// `kept[s]`: state `s` has an edge that reads something, or is the accept state.
    /// Closures keep only these: the others (the exits of classes and choices, ε all the
    /// way) change neither what a set reads nor whether it accepts, and two sets that
    /// differ only in them would be two DFA states for minimization to merge back.
    kept: Vec<bool>,
}

impl Frozen {
    /// `nfa` frozen, in the vectors of `spare` (a frozen NFA no longer needed) when given.
    fn new_in(nfa: &Nfa, accept: u32, spare: Option<Frozen>) -> Frozen {
        let Frozen {
            mut offsets,
            mut edges,
            mut kept,
        } = spare.unwrap_or(Frozen {
            offsets: Vec::new(),
            edges: Vec::new(),
            kept: Vec::new(),
        });
        let n = nfa.states as usize;
        offsets.clear();
        offsets.resize(n + 1, 0);
        for &(from, _, _) in &nfa.edges {
            offsets[from as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        edges.clear();
        edges.resize(nfa.edges.len(), (Label::Eps, 0u32));
        // Each state's next free slot: its row's start, then moved along as it is filled
        // (so `offsets[s]` ends as row `s + 1`'s start, and is shifted back below).
        for &(from, l, to) in &nfa.edges {
            let at = &mut offsets[from as usize];
            edges[*at as usize] = (l, to);
            *at += 1;
        }
        for i in (1..=n).rev() {
            offsets[i] = offsets[i - 1];
        }
        offsets[0] = 0;
        kept.clear();
        kept.resize(n, false);
        for &(from, l, _) in &nfa.edges {
            kept[from as usize] |= l != Label::Eps;
        }
        if let Some(k) = kept.get_mut(accept as usize) {
            *k = true;
        }
        Frozen {
            offsets,
            edges,
            kept,
        }
    }

    fn states(&self) -> usize {
        self.offsets.len() - 1
    }

    fn edges_of(&self, s: u32) -> &[(Label, u32)] {
        &self.edges[self.offsets[s as usize] as usize..self.offsets[s as usize + 1] as usize]
    }

    /// Extends `set` to its ε-closure, keeps its [`Frozen::kept`] states, sorted and
    /// without repeats. `seen` (one flag per state, all false) and `stack` are scratch
    /// space, left as found.
    fn closure(&self, set: &mut Vec<u32>, seen: &mut [bool], stack: &mut Vec<u32>) {
        stack.clear();
        for &s in set.iter() {
            if !seen[s as usize] {
                seen[s as usize] = true;
                stack.push(s);
            }
        }
        set.clear();
        set.extend_from_slice(stack);
        while let Some(s) = stack.pop() {
            for &(l, t) in self.edges_of(s) {
                if l == Label::Eps && !seen[t as usize] {
                    seen[t as usize] = true;
                    set.push(t);
                    stack.push(t);
                }
            }
        }
        for &s in set.iter() {
            seen[s as usize] = false;
        }
        set.retain(|&s| self.kept[s as usize]);
        set.sort_unstable();
    }
}

/// One DFA state of a rule: its finality and its edges, as ranges of the [`Dfa`]'s lists.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DfaState {
    pub is_final: bool,
    pub bytes: (u32, u32),
    pub calls: (u32, u32),
    pub tokens: (u32, u32),
}

/// The automaton of one rule, edges to other states of the same rule (local indices):
/// every state's edges in three flat lists.
#[derive(Clone, Debug, Default)]
pub(crate) struct Dfa {
    pub states: Vec<DfaState>,
    pub bytes: Vec<ByteEdge>,
    pub calls: Vec<CallEdge>,
    pub tokens: Vec<TokenEdge>,
}

impl Dfa {
    pub(crate) fn len(&self) -> usize {
        self.states.len()
    }

    /// Bytes of its lists (lengths, not capacities).
    pub(crate) fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        self.states.len() * size_of::<DfaState>()
            + self.bytes.len() * size_of::<ByteEdge>()
            + self.calls.len() * size_of::<CallEdge>()
            + self.tokens.len() * size_of::<TokenEdge>()
    }

    pub(crate) fn bytes_of(&self, st: &DfaState) -> &[ByteEdge] {
        &self.bytes[st.bytes.0 as usize..st.bytes.1 as usize]
    }

    pub(crate) fn calls_of(&self, st: &DfaState) -> &[CallEdge] {
        &self.calls[st.calls.0 as usize..st.calls.1 as usize]
    }

    pub(crate) fn tokens_of(&self, st: &DfaState) -> &[TokenEdge] {
        &self.tokens[st.tokens.0 as usize..st.tokens.1 as usize]
    }

    /// Closes the state whose edges were pushed since the last one.
    pub(super) fn push_state(&mut self, is_final: bool) {
        let end = |len: usize, prev: u32| (prev, len as u32);
        let (b, c, t) = match self.states.last() {
            Some(p) => (p.bytes.1, p.calls.1, p.tokens.1),
            None => (0, 0, 0),
        };
        self.states.push(DfaState {
            is_final,
            bytes: end(self.bytes.len(), b),
            calls: end(self.calls.len(), c),
            tokens: end(self.tokens.len(), t),
        });
    }
}

/// Builds the automaton of `body`; state 0 is the start state. A DFA by subset construction
/// when it stays within a few times the NFA's size; otherwise (patterns such as
/// `[a-z]{0,20} "y" [a-z]{0,20}`, whose DFA is exponential) the ε-free NFA, whose states may
/// have several edges on one byte: the Earley parser runs either.
///
/// `plan` and `rule` name the rule being built, so that tail calls into its right-linear
/// component are built inline (each callee's body once, entered by ε-edges).
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_automaton(
    body: &Expr,
    token: &dyn Fn(&crate::grammar::TokenRef) -> u32,
    max_states: usize,
    max_bytes: u64,
    deadline: &Deadline,
    plan: &TailPlan<'_>,
    rule: u32,
    memo: &mut ClassMemo,
) -> Result<Dfa, BuildError> {
    let mut edges = std::mem::take(&mut memo.edges);
    edges.clear();
    let spare = memo.frozen.take();
    let mut nfa = Nfa {
        plan: Some(plan),
        memo: std::mem::take(memo),
        edges,
        ..Nfa::default()
    };
    let start = nfa.state();
    let accept = nfa.add(body, start, 0, token)?;
    let mut entries: FxHashMap<u32, u32> = FxHashMap::default();
    entries.insert(rule, start);
    while let Some((from, callee)) = nfa.jumps.pop() {
        let to = match entries.get(&callee) {
            Some(&s) => s,
            None => {
                let s = nfa.state();
                entries.insert(callee, s);
                let exit = nfa.add(plan.bodies[callee as usize], s, 0, token)?;
                nfa.edge(exit, Label::Eps, accept);
                if nfa.states as usize > max_states {
                    return Err(BuildError::TooManyStates);
                }
                s
            }
        };
        nfa.edge(from, Label::Eps, to);
    }
    let budget = (nfa.states as usize * 4 + 256).min(max_states);
    *memo = std::mem::take(&mut nfa.memo);
    let frozen = Frozen::new_in(&nfa, accept, spare);
    memo.edges = std::mem::take(&mut nfa.edges);
    let built = match subset_construction(&frozen, start, accept, budget, max_bytes, deadline) {
        Err(BuildError::Blowup | BuildError::Memory(_)) => {
            epsilon_free(&frozen, start, accept, max_states, max_bytes, deadline)
        }
        other => other,
    };
    memo.frozen = Some(frozen);
    built
}

/// How many states the constructions build between two looks at the deadline.
const DEADLINE_EVERY: usize = 256;

/// The ε-free NFA: one state per NFA state entered by a non-ε edge (and the start), with
/// the non-ε edges of its ε-closure.
fn epsilon_free(
    nfa: &Frozen,
    start: u32,
    accept: u32,
    max_states: usize,
    max_bytes: u64,
    deadline: &Deadline,
) -> Result<Dfa, BuildError> {
    let mut used = 0u64;
    let mut seen = vec![false; nfa.states()];
    let mut stack = Vec::new();
    let mut id: FxHashMap<u32, u32> = FxHashMap::default();
    let mut order: Vec<u32> = vec![start];
    id.insert(start, 0);
    let mut out = Dfa::default();
    let mut closure = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let q = order[i];
        i += 1;
        if i % DEADLINE_EVERY == 0 && deadline.expired() {
            return Err(BuildError::Timeout);
        }
        closure.clear();
        closure.push(q);
        nfa.closure(&mut closure, &mut seen, &mut stack);
        let (b0, c0, t0) = (out.bytes.len(), out.calls.len(), out.tokens.len());
        for &p in &closure {
            for &(l, t) in nfa.edges_of(p) {
                if l == Label::Eps {
                    continue;
                }
                let target = match id.get(&t) {
                    Some(&x) => x,
                    None => {
                        if order.len() >= max_states {
                            return Err(BuildError::TooManyStates);
                        }
                        let x = order.len() as u32;
                        id.insert(t, x);
                        order.push(t);
                        x
                    }
                };
                match l {
                    Label::Bytes(lo, hi) => out.bytes.push(ByteEdge { lo, hi, target }),
                    Label::Call(rule) => out.calls.push(CallEdge { rule, target }),
                    Label::Token(token) => out.tokens.push(TokenEdge { token, target }),
                    Label::Eps => {}
                }
            }
        }
        sort_dedup_from(&mut out.bytes, b0, |e| (e.lo, e.hi, e.target));
        sort_dedup_from(&mut out.calls, c0, |e| (e.rule, e.target));
        sort_dedup_from(&mut out.tokens, t0, |e| (e.token, e.target));
        used += (out.bytes.len() - b0 + out.calls.len() - c0 + out.tokens.len() - t0) as u64
            * EDGE_BYTES;
        if used > max_bytes {
            return Err(BuildError::Memory(used));
        }
        out.push_state(closure.binary_search(&accept).is_ok());
    }
    Ok(out)
}

/// Sorts `v[from..]` by `key` and drops repeats there.
fn sort_dedup_from<T: Copy + PartialEq, K: Ord>(
    v: &mut Vec<T>,
    from: usize,
    key: impl Fn(&T) -> K,
) {
    v[from..].sort_unstable_by_key(|e| key(e));
    let mut w = from;
    for r in from..v.len() {
        if w == from || v[r] != v[w - 1] {
            v[w] = v[r];
            w += 1;
        }
    }
    v.truncate(w);
}

/// The DFA states met so far, each an ε-closed set of NFA states (sorted), interned: the
/// sets lie end to end in `arena`, found again by their hash.
#[derive(Default)]
struct StateSets {
    arena: Vec<u32>,
    /// Per DFA state: its set, `arena[start..end]`.
    range: Vec<(u32, u32)>,
    /// Hash of a set → the last state with that hash; `same_hash[s]`: the one before it.
    by_hash: FxHashMap<u64, u32>,
    same_hash: Vec<u32>,
}

impl StateSets {
    /// Empty, keeping its room.
    fn clear(&mut self) {
        self.arena.clear();
        self.range.clear();
        self.by_hash.clear();
        self.same_hash.clear();
    }

    fn get(&self, s: u32) -> &[u32] {
        let (a, b) = self.range[s as usize];
        &self.arena[a as usize..b as usize]
    }

    /// The state of `set`, or the new state made for it (`Ok(None)` past `max_states`).
    fn intern(&mut self, set: &[u32], max_states: usize) -> Option<(u32, bool)> {
        let h = rustc_hash::FxBuildHasher.hash_one(set);
        let mut at = self.by_hash.get(&h).copied().unwrap_or(u32::MAX);
        while at != u32::MAX {
            if self.get(at) == set {
                return Some((at, false));
            }
            at = self.same_hash[at as usize];
        }
        if self.range.len() >= max_states {
            return None;
        }
        let id = self.range.len() as u32;
        let a = self.arena.len() as u32;
        self.arena.extend_from_slice(set);
        self.range.push((a, self.arena.len() as u32));
        self.same_hash
            .push(self.by_hash.insert(h, id).unwrap_or(u32::MAX));
        Some((id, true))
    }
}

fn subset_construction(
    nfa: &Frozen,
    start: u32,
    accept: u32,
    max_states: usize,
    max_bytes: u64,
    deadline: &Deadline,
) -> Result<Dfa, BuildError> {
    let mut scratch = SUBSET_SCRATCH
        .try_with(|s| s.try_borrow_mut().map(|mut s| std::mem::take(&mut *s)))
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    scratch.clear();
    let built = subset_construction_in(
        nfa,
        start,
        accept,
        (max_states, max_bytes),
        deadline,
        &mut scratch,
    );
    if scratch.held_bytes() <= MAX_SCRATCH_BYTES {
        let _ = SUBSET_SCRATCH.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                *s = scratch;
            }
        });
    }
    built
}

/// Bytes a thread's [`SubsetScratch`] keeps between builds at most, on each thread that
/// builds automata (the compiling threads and the background pool's): the scratch of a
/// rule past that (a blow-up near the state limit) is dropped. Not counted in a grammar's
/// memory: it belongs to no grammar.
const MAX_SCRATCH_BYTES: usize = 1 << 20;

/// The working sets of [`subset_construction`], kept per thread between rules: a schema of
/// thousands of rules grew each anew (about 5% of its compile in reallocations).
#[derive(Default)]
struct SubsetScratch {
    /// One flag per NFA state, all false between uses ([`Frozen::closure`] clears what it
    /// sets).
    seen: Vec<bool>,
    /// The closure's stack.
    stack: Vec<u32>,
    /// The DFA states, by their (closed) set of NFA states.
    sets: StateSets,
    /// Each distinct set of edge targets met so far, before its closure: a set met again,
    /// from another state or byte interval, skips closure and lookup.
    raw: StateSets,
    /// The DFA state of each set of `raw`.
    raw_state: Vec<u32>,
    /// The targets of one label (then their closure).
    targets: Vec<u32>,
    /// The set of the DFA state being expanded.
    set: Vec<u32>,
    /// Its byte edges, calls and tokens, and the bounds of its byte ranges.
    byte_ranges: Vec<(u8, u8, u32)>,
    calls: Vec<(u32, u32)>,
    toks: Vec<(u32, u32)>,
    bounds: Vec<u16>,
}

impl SubsetScratch {
    /// Heap bytes held (capacities; a hash entry counted as 24 bytes, its key, value and
    /// control byte with room to spare).
    fn held_bytes(&self) -> usize {
        let sets = |s: &StateSets| {
            s.arena.capacity() * 4
                + s.range.capacity() * 8
                + s.same_hash.capacity() * 4
                + s.by_hash.capacity() * 24
        };
        self.seen.capacity()
            + (self.stack.capacity()
                + self.raw_state.capacity()
                + self.targets.capacity()
                + self.set.capacity())
                * 4
            + sets(&self.sets)
            + sets(&self.raw)
            + self.byte_ranges.capacity() * 8
            + (self.calls.capacity() + self.toks.capacity()) * 8
            + self.bounds.capacity() * 2
    }

    /// Empties every part, keeping its room (`seen` is all false between uses).
    fn clear(&mut self) {
        self.stack.clear();
        self.sets.clear();
        self.raw.clear();
        self.raw_state.clear();
        self.targets.clear();
        self.set.clear();
        self.byte_ranges.clear();
        self.calls.clear();
        self.toks.clear();
        self.bounds.clear();
    }
}

thread_local! {
    /// [`SubsetScratch`] between builds on this thread.
    static SUBSET_SCRATCH: std::cell::RefCell<SubsetScratch> =
        std::cell::RefCell::new(SubsetScratch::default());
}

/// [`subset_construction`] with its working sets in `scratch` (cleared).
fn subset_construction_in(
    nfa: &Frozen,
    start: u32,
    accept: u32,
    (max_states, max_bytes): (usize, u64),
    deadline: &Deadline,
    scratch: &mut SubsetScratch,
) -> Result<Dfa, BuildError> {
    let SubsetScratch {
        seen,
        stack,
        sets,
        raw,
        raw_state,
        targets,
        set,
        byte_ranges,
        calls,
        toks,
        bounds,
    } = scratch;
    // `seen` is all false here (the closure clears what it sets).
    if seen.len() < nfa.states() {
        seen.resize(nfa.states(), false);
    }
    let mut used = 0u64;
    targets.push(start);
    nfa.closure(targets, seen, stack);
    sets.intern(targets, max_states.max(1));
    let mut out = Dfa::default();
    let mut i = 0;
    while i < sets.range.len() {
        if i % DEADLINE_EVERY == DEADLINE_EVERY - 1 && deadline.expired() {
            return Err(BuildError::Timeout);
        }
        set.clear();
        set.extend_from_slice(sets.get(i as u32));
        byte_ranges.clear();
        calls.clear();
        toks.clear();
        for &s in set.iter() {
            for &(l, t) in nfa.edges_of(s) {
                match l {
                    Label::Eps => {}
                    Label::Bytes(lo, hi) => byte_ranges.push((lo, hi, t)),
                    Label::Call(r) => calls.push((r, t)),
                    Label::Token(k) => toks.push((k, t)),
                }
            }
        }
        let mut intern =
            |targets: &mut Vec<u32>, sets: &mut StateSets| -> Result<u32, BuildError> {
                targets.sort_unstable();
                targets.dedup();
                let (r, new_raw) = raw.intern(targets, usize::MAX).ok_or(BuildError::Blowup)?;
                if !new_raw {
                    return Ok(raw_state[r as usize]);
                }
                used += targets.len() as u64 * SET_ELEMENT_BYTES * 2;
                nfa.closure(targets, seen, stack);
                let (id, new) = sets.intern(targets, max_states).ok_or(BuildError::Blowup)?;
                raw_state.push(id);
                if new {
                    used += targets.len() as u64 * SET_ELEMENT_BYTES * 2;
                }
                if used > max_bytes {
                    return Err(BuildError::Memory(used));
                }
                Ok(id)
            };
        // Split the byte ranges into elementary intervals with one target set each.
        bounds.clear();
        for &(lo, hi, _) in byte_ranges.iter() {
            bounds.push(lo as u16);
            bounds.push(hi as u16 + 1);
        }
        bounds.sort_unstable();
        bounds.dedup();
        let b0 = out.bytes.len();
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1] - 1);
            targets.clear();
            targets.extend(
                byte_ranges
                    .iter()
                    .filter(|&&(a, b, _)| a as u16 <= lo && hi <= b as u16)
                    .map(|&(_, _, t)| t),
            );
            if targets.is_empty() {
                continue;
            }
            let target = intern(targets, sets)?;
            match out.bytes[b0..].last_mut() {
                Some(last) if last.target == target && last.hi as u16 + 1 == lo => {
                    last.hi = hi as u8
                }
                _ => out.bytes.push(ByteEdge {
                    lo: lo as u8,
                    hi: hi as u8,
                    target,
                }),
            }
        }
        // Calls and tokens: one edge per label, to the set of all its targets.
        by_label(calls, targets, |rule, t| {
            let target = intern(t, sets)?;
            out.calls.push(CallEdge { rule, target });
            Ok(())
        })?;
        by_label(toks, targets, |token, t| {
            let target = intern(t, sets)?;
            out.tokens.push(TokenEdge { token, target });
            Ok(())
        })?;
        out.push_state(set.binary_search(&accept).is_ok());
        i += 1;
    }
    Ok(out)
}

/// Sorts `pairs` (label, target) and calls `f` once per label with all its targets (in
/// `targets`, scratch space).
fn by_label(
    pairs: &mut [(u32, u32)],
    targets: &mut Vec<u32>,
    mut f: impl FnMut(u32, &mut Vec<u32>) -> Result<(), BuildError>,
) -> Result<(), BuildError> {
    pairs.sort_unstable();
    for run in pairs.chunk_by(|a, b| a.0 == b.0) {
        targets.clear();
        targets.extend(run.iter().map(|p| p.1));
        f(run[0].0, targets)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::avoid::Avoid;
    use crate::grammar::{CharClass, Grammar, Rule, RuleId};
    use crate::limits::Deadline;

    /// The grammar of text avoiding `words` (`Avoid`'s rules, all tail calls), with `end`
    /// where the text stops and `restarts` (units back to the start), rooted at its start.
    fn avoiding(words: &[&str], banned: &[(u32, u32)], end: Expr, restarts: &[Expr]) -> Grammar {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let avoid = Avoid::new(&words, banned).expect("a word is left");
        let ids: Vec<RuleId> = (0..avoid.len() as u32).map(RuleId).collect();
        let rules = avoid
            .bodies(&ids, &end, restarts)
            .into_iter()
            .enumerate()
            .map(|(i, body)| Rule {
                name: format!("text_{i}"),
                body,
            })
            .collect();
        Grammar {
            rules,
            root: RuleId(0),
        }
    }

    /// The DFA of `g`'s root as the subset construction gives it, and minimized.
    fn sizes(g: &Grammar) -> (usize, usize) {
        let plan = TailPlan::new(g, &[]);
        let token = |_: &crate::grammar::TokenRef| 0;
        let dfa = build_automaton(
            &g.rules[0].body,
            &token,
            1 << 20,
            u64::MAX,
            &Deadline::start(None),
            &plan,
            0,
            &mut ClassMemo::default(),
        )
        .expect("builds");
        let built = dfa.len();
        (built, super::super::minimize::minimize(dfa).len())
    }

    /// Builds reuse the thread's subset-construction scratch and the build's NFA vectors
    /// (`SubsetScratch`, `ClassMemo`): a large rule, a small one, the large one under a
    /// state limit it passes, and the large one again, one after another on one thread and
    /// memo, give what each gives alone (the automaton, or the error) on a fresh thread
    /// with a fresh memo.
    #[test]
    fn builds_one_after_another_equal_fresh_builds() {
        let large = avoiding(&["</tool_call>", "<tool_call>"], &[], Expr::Empty, &[]);
        let small = avoiding(&["ab"], &[], Expr::Bytes(b"\"".to_vec()), &[]);
        let build = |g: &Grammar, max_states: usize, memo: &mut ClassMemo| {
            let plan = TailPlan::new(g, &[]);
            let token = |_: &crate::grammar::TokenRef| 0;
            let dfa = build_automaton(
                &g.rules[0].body,
                &token,
                max_states,
                u64::MAX,
                &Deadline::start(None),
                &plan,
                0,
                memo,
            );
            format!("{dfa:?}")
        };
        let cases = [
            (&large, 1 << 20),
            (&small, 1 << 20),
            (&large, 8),
            (&large, 1 << 20),
        ];
        let mut memo = ClassMemo::default();
        let mut outputs = Vec::new();
        for (g, max) in cases {
            outputs.push(build(g, max, &mut memo));
        }
        for (k, (g, max)) in cases.into_iter().enumerate() {
            let g = g.clone();
            let alone = std::thread::spawn(move || build(&g, max, &mut ClassMemo::default()))
                .join()
                .unwrap();
            assert_eq!(outputs[k], alone, "build {k}");
        }
        assert_ne!(outputs[0], outputs[1]);
        assert!(outputs[0].starts_with("Ok"), "{}", outputs[0]);
        assert_ne!(
            outputs[0], outputs[2],
            "the limited build gives up or is ε-free"
        );
    }

    /// Text avoiding a marker is one rule per live state of the marker's Aho–Corasick
    /// automaton; every state may leave the marker on any other character, one to four
    /// bytes of UTF-8. Those characters are built once, not once per state: the subset
    /// construction then gives about the minimal DFA, and no state set per state and
    /// UTF-8 prefix for minimization to merge back (20× the minimal size, when each state
    /// spelled out its own class).
    #[test]
    fn text_avoiding_markers_builds_near_its_minimal_automaton() {
        let free = avoiding(&["<tool_call>"], &[], Expr::Empty, &[]);
        // A JSON string body: no quote, backslash or control character, `\n` escapes.
        let escape = Expr::Seq(vec![
            Expr::Bytes(b"\\".to_vec()),
            Expr::Class(CharClass {
                negated: false,
                ranges: vec![(b'n' as u32, b'n' as u32), (b'"' as u32, b'"' as u32)],
            }),
        ]);
        let banned = [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)];
        let string = avoiding(
            &["</tool_call>", "<tool_call>"],
            &banned,
            Expr::Bytes(b"\"".to_vec()),
            &[escape],
        );
        for (what, g) in [("free text", free), ("string body", string)] {
            let (built, minimal) = sizes(&g);
            assert!(
                built <= 2 * minimal,
                "{what}: {built} states built for a minimal DFA of {minimal}"
            );
        }
    }
}
