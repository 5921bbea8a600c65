//! Deferred rules (issue 24, item 1: compile only what the first mask needs).
//!
//! A structural tag over N tools holds N argument grammars that the first masks never
//! reach: the first mask is the free text before the first call marker. With deferral, the
//! compile builds a *stub grammar*: the lowered grammar in which every rule the root reaches
//! only through a *deferral root* (an embedded tool schema) has the body `"\xFF"` (a byte no
//! UTF-8 text holds), so its automaton is two nodes and nothing of the tool is built. The
//! full grammar is compiled once, the first time a matcher comes near a stub
//! (`compiler::deferred`), and the matcher replays its input on it.
//!
//! Exactness rests on [`NearStubs`]: a token of at most `reach` bytes accepted from a
//! state of the stub grammar is accepted from the same state of the full grammar and vice
//! versa, unless its path enters a stub. A path enters a stub only after at most
//! `reach - 1` bytes from an item of the current chart set, so a state none of whose items
//! is *near* a stub (within `reach` bytes of a call of one, through calls, completions back
//! into any caller, but not through special-token edges, which are tokens of their own) has
//! the same mask and the same accepted tokens in both grammars.

use super::{add_range, byte_in, Automaton};
use crate::grammar::{Expr, Grammar, RuleId};
use crate::mask::TokenTrie;

/// `stub[r]`: rule `r` is reached from the root only through a rule with `roots[r]` set
/// (roots included; indices past `roots`' end count as unset). The root is never a stub.
pub(crate) fn stub_rules(grammar: &Grammar, roots: &[bool]) -> Vec<bool> {
    let n = grammar.rules.len();
    let is_root = |r: usize| roots.get(r).copied().unwrap_or(false);
    let mut reached = vec![false; n];
    let root = grammar.root.index();
    reached[root] = true;
    let mut stack = vec![root];
    while let Some(r) = stack.pop() {
        super::lower::for_each_call(&grammar.rules[r].body, &mut |c| {
            let c = c as usize;
            if !reached[c] && !is_root(c) {
                reached[c] = true;
                stack.push(c);
            }
        });
    }
    reached.iter().map(|&r| !r).collect()
}

/// The stub body: one byte that no UTF-8 text holds, so it is productive, not nullable,
/// and never part of a real output that the stub grammar is asked about.
pub(crate) const STUB_BYTE: u8 = 0xFF;

/// `grammar` cut to the rules its root still reaches once every rule with `stub[r]` set has
/// the stub body (the deferral roots it calls are kept, as stubs; what only they reach is
/// left out), in their original order, renumbered; with, per rule kept, its id in
/// `grammar`. The other bodies are copied.
pub(crate) fn stubbed(grammar: &Grammar, stub: &[bool]) -> (Grammar, Vec<u32>) {
    let n = grammar.rules.len();
    let is_stub = |r: usize| stub.get(r).copied().unwrap_or(false);
    let mut reached = vec![false; n];
    let root = grammar.root.index();
    reached[root] = true;
    let mut stack = vec![root];
    while let Some(r) = stack.pop() {
        if is_stub(r) {
            continue;
        }
        super::lower::for_each_call(&grammar.rules[r].body, &mut |c| {
            if !reached[c as usize] {
                reached[c as usize] = true;
                stack.push(c as usize);
            }
        });
    }
    let kept: Vec<u32> = (0..n as u32).filter(|&r| reached[r as usize]).collect();
    let mut new_id = vec![u32::MAX; n];
    for (i, &r) in kept.iter().enumerate() {
        new_id[r as usize] = i as u32;
    }
    let rules = kept
        .iter()
        .map(|&r| {
            let rule = &grammar.rules[r as usize];
            let body = if is_stub(r as usize) {
                Expr::Bytes(vec![STUB_BYTE])
            } else {
                let mut body = rule.body.clone();
                body.rename_rules(|c| new_id[c as usize]);
                body
            };
            crate::grammar::Rule {
                name: rule.name.clone(),
                body,
            }
        })
        .collect();
    let g = Grammar {
        rules,
        root: RuleId(new_id[root]),
    };
    (g, kept)
}

/// Which chart items are near a stub (see the module docs): first a lower bound on the
/// bytes from each node to a stub call ([`near_stubs`]); where that is under the longest
/// token, a walk of the token trie along the automaton decides, once per node.
#[derive(Debug, Default)]
pub(crate) struct NearStubs {
    /// Per real node: fewest bytes to a stub call (a lower bound, capped at `reach`).
    dist: Vec<u32>,
    /// Per rule: fewest bytes from its end to a stub call (for virtual nodes: counted
    /// rules have no calls inside, and may end at once).
    ret: Vec<u32>,
    /// The longest text token plus one.
    reach: u32,
    /// `stub[r]`.
    stub: Vec<bool>,
    /// Per rule: where its call sites continue (the targets of the call edges to it).
    returns: Vec<Vec<u32>>,
    /// Per real node: 0 not decided yet, 1 no token reaches a stub from it, 2 one does.
    decided: Vec<std::sync::atomic::AtomicU8>,
}

impl NearStubs {
    /// True when a text token read from an item at node `n` may enter a stub: some token
    /// has a proper prefix spelling a path from `n` to a call of a stub (through calls,
    /// and completions back to any call site of the rule).
    pub(crate) fn is_near(&self, aut: &Automaton, trie: &TokenTrie, n: u32) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if self.lower_bound(aut, n) >= self.reach {
            return false;
        }
        let Some(cell) = self.decided.get(n as usize) else {
            // A virtual node (a counted repetition's state): walked each time, not kept
            // (there are count × states of them).
            return self.walk(aut, trie, n, None);
        };
        match cell.load(Relaxed) {
            1 => false,
            2 => true,
            _ => {
                let near = self.walk(aut, trie, n, None);
                cell.store(if near { 2 } else { 1 }, Relaxed);
                near
            }
        }
    }

    /// The stub rules that a text token read from an item at node `n` can enter (a proper
    /// prefix of the token spells a path into a call of the rule): appended to `out`,
    /// which is then sorted without repeats.
    pub(crate) fn stubs_entered(
        &self,
        aut: &Automaton,
        trie: &TokenTrie,
        n: u32,
        out: &mut Vec<u32>,
    ) {
        if self.lower_bound(aut, n) >= self.reach {
            return;
        }
        self.walk(aut, trie, n, Some(out));
        out.sort_unstable();
        out.dedup();
    }

    /// True when automaton rule `r` is a stub.
    #[inline]
    pub(crate) fn is_stub(&self, r: u32) -> bool {
        self.stub.get(r as usize).copied().unwrap_or(false)
    }

    /// Appends the stub rules with an item in `items` (a chart set) to `out`.
    pub(crate) fn stubs_in(
        &self,
        aut: &Automaton,
        items: &[crate::parser::Item],
        out: &mut Vec<u32>,
    ) {
        out.extend(
            items
                .iter()
                .map(|it| aut.rule_of(it.node))
                .filter(|&r| self.is_stub(r)),
        );
    }

    /// True when the node's lower bound alone says it may be near (no trie walk): for the
    /// first token of an output read in its start form, which the trie does not hold.
    pub(crate) fn may_be_near(&self, aut: &Automaton, n: u32) -> bool {
        self.lower_bound(aut, n) < self.reach
    }

    fn lower_bound(&self, aut: &Automaton, n: u32) -> u32 {
        match self.dist.get(n as usize) {
            Some(&d) => d,
            None => self.ret[aut.rule_of(n) as usize],
        }
    }

    /// The trie walk of [`NearStubs::is_near`], depth first over the trie. At each trie
    /// node it holds the states the bytes above it lead to: (automaton node, where the
    /// rule instance returns: the target of the call the walk entered it by, or any call
    /// site), each once, closed under calls and completions. A state is dropped when no
    /// token below its trie node is long enough to reach a stub from its automaton node and
    /// write a byte inside it. With `entered`, walks on past the first stub call and
    /// appends every stub rule called.
    ///
    /// Cost: per trie node kept, its states' calls and completions, and one pass over its
    /// children (a child is looked at further only when some token below it is long enough
    /// for the nearest state: a byte edge lowers the bound by at most one).
    fn walk(
        &self,
        aut: &Automaton,
        trie: &TokenTrie,
        n: u32,
        mut entered: Option<&mut Vec<u32>>,
    ) -> bool {
        const NONE: u32 = u32::MAX;
        let deepest = trie.deepest();
        // (depth, longest token below) of trie node `t` (NONE: the root).
        let span = |t: u32| match t {
            NONE => (0, trie.max_depth as u32),
            t => (trie.depth[t as usize] as u32, deepest[t as usize] as u32),
        };
        let useful = |v: u32, (depth, longest): (u32, u32)| {
            depth.saturating_add(self.lower_bound(aut, v)) < longest
        };
        if !useful(n, span(NONE)) {
            return false;
        }
        // The states of the trie nodes still to visit lie end to end in `arena`; a frame
        // is (trie node, start, end). Frames are taken last first, so a frame's states are
        // always the top of the arena when it is taken.
        let mut arena: Vec<(u32, u32)> = vec![(n, NONE)];
        let mut frames: Vec<(u32, u32, u32)> = vec![(NONE, 0, 1)];
        let mut states: Vec<(u32, u32)> = Vec::new();
        let mut unique = Unique::default();
        let mut found = false;
        while let Some((t, start, end)) = frames.pop() {
            debug_assert_eq!(arena.len(), end as usize, "a frame's states top the arena");
            states.clear();
            states.extend_from_slice(&arena[start as usize..]);
            arena.truncate(start as usize);
            let here = span(t);
            unique.restart();
            let mut add = |states: &mut Vec<(u32, u32)>, state: (u32, u32)| {
                if useful(state.0, here) {
                    unique.push(states, 0, state);
                }
            };
            let mut k = 0;
            while k < states.len() {
                let (v, back) = states[k];
                k += 1;
                for c in aut.calls_of(v) {
                    if self.stub[c.rule as usize] {
                        match entered.as_deref_mut() {
                            None => return true,
                            Some(out) => {
                                found = true;
                                out.push(c.rule);
                                continue;
                            }
                        }
                    }
                    add(&mut states, (aut.rule_start[c.rule as usize], c.target));
                }
                if aut.is_final(v) {
                    match back {
                        NONE => {
                            for &w in &self.returns[aut.rule_of(v) as usize] {
                                add(&mut states, (w, NONE));
                            }
                        }
                        w => add(&mut states, (w, NONE)),
                    }
                }
            }
            let Some(nearest) = states.iter().map(|&(v, _)| self.lower_bound(aut, v)).min() else {
                continue;
            };
            let need = here.0.saturating_add(nearest);
            let more_than = need.min(u16::MAX as u32) as u16;
            // The bytes some state has an edge on: a child on another byte leads nowhere.
            // The trie's root and its children have children on most byte values (after
            // a space: every letter), where a few states' edges take a few (digits, a
            // quote, whitespace). Read there only (deeper nodes have a few children each,
            // which the states' edges cost more to read than to try), for at most
            // `NARROW_EDGES` edges of real nodes (past that, as at a tag's name dispatch,
            // every child is tried).
            let on = match here.0 {
                0 | 1 => narrow_bytes(aut, &states).unwrap_or([u64::MAX; 4]),
                _ => [u64::MAX; 4],
            };
            trie.for_each_child_deeper((t != NONE).then_some(t), more_than, |b, c| {
                if !byte_in(&on, b) {
                    return;
                }
                let below = span(c);
                let first = arena.len();
                unique.restart();
                for &(v, back) in &states {
                    aut.for_each_byte_target(v, b, |w| {
                        if useful(w, below) {
                            unique.push(&mut arena, first, (w, back));
                        }
                    });
                }
                if arena.len() > first {
                    frames.push((c, first as u32, arena.len() as u32));
                }
            });
        }
        found
    }

    /// Bytes of the analysis (for `memory_bytes`).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.dist.capacity() * 4
            + self.ret.capacity() * 4
            + self.stub.capacity()
            + self.decided.capacity()
            + self
                .returns
                .iter()
                .map(|r| r.capacity() * 4 + 24)
                .sum::<usize>()
    }

    /// The same analysis without its memo of trie walks (what a build starts from).
    pub(crate) fn without_memo(&self) -> NearStubs {
        NearStubs {
            dist: self.dist.clone(),
            ret: self.ret.clone(),
            reach: self.reach,
            stub: self.stub.clone(),
            returns: self.returns.clone(),
            decided: Vec::new(),
        }
    }

    /// The analysis of `aut`, this analysis's automaton with tools spliced in as `splice`
    /// says ([`Automaton::splice`](super::Automaton::splice)), without solving the stub
    /// grammar's part again. Its nodes and rules keep their bounds: a stub built is one
    /// path fewer to a stub and its body at least as long as the stub's one byte, so every
    /// bound of the stub grammar is still a lower bound (smaller bounds only send more
    /// nodes to the trie walk, which decides exactly). A tool's nodes reach no stub inside
    /// it (its rules call only its own): from there, the bytes to its rule's end, then the
    /// rule's bound from its end, solved over the tool's nodes and call sites alone (its
    /// root's from the stub's call sites, and any recursive ones). `None` when a tool's
    /// root can end within less than one byte (then solve the whole with [`near_stubs`]).
    pub(crate) fn spliced(
        &self,
        aut: &Automaton,
        splice: &super::splice::Splice,
    ) -> Option<NearStubs> {
        let cap = self.reach;
        let (base_nodes, base_rules) = (splice.base_nodes as usize, splice.base_rules as usize);
        let (nodes, rules) = (aut.nodes.len(), aut.rule_start.len());
        let new = base_nodes..nodes;
        // m[n - base_nodes]: fewest bytes from a new node to its rule's end (virtual: 0).
        let mut m = vec![cap; nodes - base_nodes];
        let at = |m: &[u32], n: u32| -> u32 {
            match (n as usize).checked_sub(base_nodes) {
                Some(i) if i < m.len() => m[i],
                _ => 0,
            }
        };
        loop {
            let mut changed = false;
            for n in new.clone().rev() {
                let best = bytes_to_end(aut, n, cap, |t| at(&m, t));
                if best < m[n - base_nodes] {
                    m[n - base_nodes] = best;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut stub = self.stub.clone();
        stub.resize(rules, false);
        let mut ret = self.ret.clone();
        ret.resize(rules, cap);
        for &(slot, _) in &splice.slots {
            stub[slot as usize] = false;
            let start = aut.rule_start[slot as usize];
            if !aut.is_virtual(start) && at(&m, start) == 0 {
                return None;
            }
        }
        let mut returns = self.returns.clone();
        returns.resize(rules, Vec::new());
        for n in new.clone() {
            for c in aut.calls_of(n as u32) {
                returns[c.rule as usize].push(c.target);
            }
        }
        // The tools' rule bounds, by rounds over their call sites (targets are new nodes).
        let d = |ret: &[u32], t: u32| -> u32 {
            let r = aut.rule_of(t) as usize;
            at(&m, t).saturating_add(ret[r]).min(cap)
        };
        loop {
            let mut changed = false;
            for n in new.clone() {
                for c in aut.calls_of(n as u32) {
                    let v = d(&ret, c.target);
                    if v < ret[c.rule as usize] {
                        ret[c.rule as usize] = v;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let mut dist = self.dist.clone();
        dist.extend(new.map(|n| d(&ret, n as u32)));
        debug_assert!(base_rules <= rules && dist.len() == nodes);
        Some(NearStubs {
            dist,
            ret,
            reach: cap,
            stub,
            returns,
            decided: (0..nodes)
                .map(|_| std::sync::atomic::AtomicU8::new(0))
                .collect(),
        })
    }

    /// The bounds per real node and per rule, and the cap.
    #[cfg(test)]
    pub(crate) fn bounds(&self) -> (&[u32], &[u32], u32) {
        (&self.dist, &self.ret, self.reach)
    }

    /// Number of real nodes within reach by the lower bound.
    #[cfg(test)]
    pub(crate) fn near_nodes(&self) -> usize {
        self.dist.iter().filter(|&&d| d < self.reach).count()
    }
}

/// Edges read at most by [`narrow_bytes`].
const NARROW_EDGES: usize = 64;

/// The bytes on which some state of `states` (real nodes, with any return targets) has a
/// byte edge, as a 256-bit set; `None` when a state is virtual or the states have more
/// than [`NARROW_EDGES`] edges in all.
fn narrow_bytes(aut: &Automaton, states: &[(u32, u32)]) -> Option<[u64; 4]> {
    let mut on = [0u64; 4];
    let mut budget = NARROW_EDGES;
    for &(v, _) in states {
        if aut.is_virtual(v) {
            return None;
        }
        let edges = aut.bytes_of(v);
        budget = budget.checked_sub(edges.len())?;
        for e in edges {
            add_range(&mut on, e.lo, e.hi);
        }
    }
    Some(on)
}

/// Appends states to the end of a list, each once: looked up in the list while the part
/// being built is short (a trie node holds a few states), in a hash set past that (a
/// completion into a rule called from many places returns to every call site).
#[derive(Default)]
struct Unique {
    set: rustc_hash::FxHashSet<(u32, u32)>,
    /// The set holds the part being built (it is long).
    hashed: bool,
}

impl Unique {
    /// Parts up to this long are searched (tests take the set from two states on, so both
    /// ways are exercised).
    const LINEAR: usize = if cfg!(test) { 2 } else { 32 };

    /// Starts a new part.
    #[inline]
    fn restart(&mut self) {
        if self.hashed {
            self.set.clear();
            self.hashed = false;
        }
    }

    /// Appends `state` to `list` unless `list[from..]` (the part) holds it.
    #[inline]
    fn push(&mut self, list: &mut Vec<(u32, u32)>, from: usize, state: (u32, u32)) {
        let part = &list[from..];
        if !self.hashed {
            if part.contains(&state) {
                return;
            }
            if part.len() < Self::LINEAR {
                list.push(state);
                return;
            }
            self.set.extend(part.iter().copied());
            self.hashed = true;
        }
        if self.set.insert(state) {
            list.push(state);
        }
    }
}

/// Computes, for the stub grammar's automaton `aut` (with `stub[r]` for its stub rules),
/// a lower bound on the bytes from each node to a call of a stub rule (byte edges, calls,
/// completions back to any call site of the rule; special-token edges are tokens of their
/// own and end every path), capped at `reach` (the longest text token plus one). Counted
/// rules may end at once; every call site counts as a caller. The node bounds are the
/// greatest solution of their equations at most `reach`, found by one sweep over the
/// nodes and then only the nodes whose inputs dropped ([`Readers::relax`]): about one pass
/// over the edges. The bounds per rule (from its end) are then found by rounds over the
/// call sites.
pub(crate) fn near_stubs(aut: &Automaton, stub: &[bool], reach: u32) -> NearStubs {
    let readers = Readers::of(aut);
    near_stubs_by(aut, stub, reach, |_, step| readers.relax(step))
}

/// [`near_stubs`] with the fixed-point solver `solve(nodes, step)` (`step(n)` re-evaluates
/// node `n` and says whether its bound dropped): tests compare [`Readers::relax`] with the plain
/// rounds over every node that it replaced.
fn near_stubs_by(
    aut: &Automaton,
    stub: &[bool],
    reach: u32,
    mut solve: impl FnMut(usize, &mut dyn FnMut(usize) -> bool),
) -> NearStubs {
    let cap = reach;
    let nodes = aut.nodes.len();
    let rules = aut.rule_start.len();
    let is_stub = |r: u32| stub.get(r as usize).copied().unwrap_or(false);
    let start = |r: u32| aut.rule_start[r as usize];
    // m[n]: fewest bytes from node n to its rule's end (text only: special-token edges
    // are never inside one text token). Virtual nodes: 0 (a lower bound).
    let mut m = vec![cap; nodes];
    let at = |v: &Vec<u32>, n: u32| v.get(n as usize).copied().unwrap_or(0);
    solve(nodes, &mut |n| {
        let best = bytes_to_end(aut, n, cap, |t| at(&m, t));
        if best < m[n] {
            m[n] = best;
            return true;
        }
        false
    });
    // e[n]: fewest bytes from node n to a call of a stub, inside this rule instance (and
    // the rules it calls). Virtual nodes: never (counted bodies have no calls).
    let mut e = vec![cap; nodes];
    let inner = |v: &Vec<u32>, n: u32| v.get(n as usize).copied().unwrap_or(cap);
    solve(nodes, &mut |n| {
        if is_stub(aut.nodes[n].rule) {
            // A stub's own nodes are reached only through a call of it.
            let changed = e[n] != 0;
            e[n] = 0;
            return changed;
        }
        let mut best = cap;
        for b in aut.bytes_of(n as u32) {
            best = best.min(inner(&e, b.target).saturating_add(1));
        }
        for c in aut.calls_of(n as u32) {
            if is_stub(c.rule) {
                best = 0;
                break;
            }
            let into = inner(&e, start(c.rule));
            let after = at(&m, start(c.rule)).saturating_add(inner(&e, c.target));
            best = best.min(into).min(after);
        }
        best = best.min(cap);
        if best < e[n] {
            e[n] = best;
            return true;
        }
        false
    });
    // ret[r]: fewest bytes from the end of rule r to a stub call, over every call site
    // (the root returns to the end of the output: never).
    let mut ret = vec![cap; rules];
    let d = |ret: &Vec<u32>, n: u32| -> u32 {
        if aut.is_virtual(n) {
            return ret[aut.rule_of(n) as usize];
        }
        let via_end = m[n as usize].saturating_add(ret[aut.nodes[n as usize].rule as usize]);
        e[n as usize].min(via_end).min(cap)
    };
    // Rounds over the call sites (a rule's bound reads its callers' rules' bounds).
    let mut returns: Vec<Vec<u32>> = vec![Vec::new(); rules];
    for n in 0..nodes as u32 {
        for c in aut.calls_of(n) {
            returns[c.rule as usize].push(c.target);
        }
    }
    loop {
        let mut changed = false;
        for (r, sites) in returns.iter().enumerate() {
            for &t in sites {
                let v = d(&ret, t);
                if v < ret[r] {
                    ret[r] = v;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    NearStubs {
        dist: (0..nodes as u32).map(|n| d(&ret, n)).collect(),
        ret,
        reach,
        stub: (0..rules).map(|r| is_stub(r as u32)).collect(),
        returns,
        decided: (0..nodes)
            .map(|_| std::sync::atomic::AtomicU8::new(0))
            .collect(),
    }
}

/// One step of the equations of `m` in [`near_stubs`]: the fewest bytes from real node `n`
/// to its rule's end, by its edges and calls, from the current bounds `m` (virtual nodes
/// read as 0), capped at `cap`.
fn bytes_to_end(aut: &Automaton, n: usize, cap: u32, m: impl Fn(u32) -> u32) -> u32 {
    let mut best = if aut.nodes[n].is_final { 0 } else { cap };
    for e in aut.bytes_of(n as u32) {
        best = best.min(m(e.target).saturating_add(1));
    }
    for c in aut.calls_of(n as u32) {
        let start = aut.rule_start[c.rule as usize];
        best = best.min(m(start).saturating_add(m(c.target)));
    }
    best.min(cap)
}

/// Who reads whom in [`near_stubs`]' node equations, and the order to evaluate them in.
struct Readers {
    /// Compressed rows (`refine`'s [`dependents`](super::refine::dependents)): row `t`
    /// lists the nodes whose bound reads node `t`'s (`t` the target of one of their byte or
    /// call edges, or the start of a rule they call; virtual nodes are constants and have
    /// no row).
    offsets: Vec<u32>,
    rows: Vec<u32>,
    /// The real nodes, each after the nodes it reads but around cycles (a depth-first
    /// post-order): a sweep in this order mostly reads bounds already final.
    order: Vec<u32>,
    /// `rank[n]`: the index of node `n` in `order`.
    rank: Vec<u32>,
}

impl Readers {
    fn of(aut: &Automaton) -> Readers {
        let nodes = aut.nodes.len();
        // The `k`-th node that node `n` reads (virtual ones and `u32::MAX` included).
        let reads = |n: u32, k: usize| -> Option<u32> {
            let bytes = aut.bytes_of(n);
            if k < bytes.len() {
                return Some(bytes[k].target);
            }
            let c = aut.calls_of(n).get((k - bytes.len()) / 2)?;
            Some(match (k - bytes.len()) % 2 {
                0 => c.target,
                _ => aut.rule_start[c.rule as usize],
            })
        };
        let mut pairs: Vec<(u32, u32)> =
            Vec::with_capacity(aut.byte_edges.len() + 2 * aut.call_edges.len());
        // The same nodes as `reads` lists (written out: a pass over the edges, not a call
        // per read). A read missing here would leave a bound stale; the test against
        // whole rounds finds it.
        for n in 0..nodes as u32 {
            for e in aut.bytes_of(n) {
                pairs.push((e.target, n));
            }
            for c in aut.calls_of(n) {
                pairs.push((c.target, n));
                pairs.push((aut.rule_start[c.rule as usize], n));
            }
        }
        pairs.retain(|&(t, _)| (t as usize) < nodes);
        let (offsets, rows) = super::refine::dependents(nodes, &pairs);
        drop(pairs);
        // Post-order of a depth-first search along "reads": a node after every node it
        // reads, but around cycles.
        let mut order: Vec<u32> = Vec::with_capacity(nodes);
        let mut visited = vec![false; nodes];
        let mut stack: Vec<(u32, usize)> = Vec::new();
        for root in 0..nodes as u32 {
            if visited[root as usize] {
                continue;
            }
            visited[root as usize] = true;
            stack.push((root, 0));
            while let Some(top) = stack.last_mut() {
                let (n, k) = *top;
                match reads(n, k) {
                    Some(t) => {
                        top.1 += 1;
                        if (t as usize) < nodes && !visited[t as usize] {
                            visited[t as usize] = true;
                            stack.push((t, 0));
                        }
                    }
                    None => {
                        order.push(n);
                        stack.pop();
                    }
                }
            }
        }
        let mut rank = vec![0u32; nodes];
        for (i, &n) in order.iter().enumerate() {
            rank[n as usize] = i as u32;
        }
        Readers {
            offsets,
            rows,
            order,
            rank,
        }
    }

    /// Brings every node's bound to the fixed point of `step` (`step(n)` re-evaluates node
    /// `n` from the bounds it reads and says whether its own dropped; bounds only drop):
    /// one sweep in [`Readers::order`], then, until none is left, the nodes that read a
    /// bound after it dropped. Chaotic iteration of one monotone step from the same start
    /// reaches the same fixed point as whole rounds over every node, which cost a pass over
    /// every edge per round (five rounds at 500 tools).
    fn relax(&self, step: &mut dyn FnMut(usize) -> bool) {
        let nodes = self.order.len();
        let mut queued = vec![false; nodes];
        let mut work: Vec<u32> = Vec::new();
        let wake = |t: usize, done: u32, queued: &mut [bool], work: &mut Vec<u32>| {
            let (a, b) = (self.offsets[t] as usize, self.offsets[t + 1] as usize);
            for &v in &self.rows[a..b] {
                // In the sweep, readers still to come will read the bound as it is now.
                if self.rank[v as usize] <= done && !queued[v as usize] {
                    queued[v as usize] = true;
                    work.push(v);
                }
            }
        };
        for (i, &n) in self.order.iter().enumerate() {
            if step(n as usize) {
                wake(n as usize, i as u32, &mut queued, &mut work);
            }
        }
        while let Some(n) = work.pop() {
            let n = n as usize;
            queued[n] = false;
            if step(n) {
                wake(n, u32::MAX, &mut queued, &mut work);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::ebnf::parse_ebnf;
    use crate::limits::{Deadline, Limits};
    use crate::vocab::Vocabulary;

    /// The automaton of `src` with the rules `roots` deferred, and the trie of `tokens`.
    fn build(src: &str, roots: &[&str], tokens: &[&str]) -> (Automaton, Vec<bool>, TokenTrie) {
        let g = parse_ebnf(src, "root").unwrap();
        let bytes: Vec<&[u8]> = tokens.iter().map(|t| t.as_bytes()).collect();
        build_grammar(&g, roots, &bytes).unwrap()
    }

    /// [`build`] from a grammar; `None` when its automaton cannot be built.
    fn build_grammar(
        g: &Grammar,
        roots: &[&str],
        tokens: &[&[u8]],
    ) -> Option<(Automaton, Vec<bool>, TokenTrie)> {
        let marks: Vec<bool> = g
            .rules
            .iter()
            .map(|r| roots.contains(&r.name.as_str()))
            .collect();
        let stub = stub_rules(g, &marks);
        let (s, kept) = stubbed(g, &stub);
        let mut stub: Vec<bool> = kept.iter().map(|&r| stub[r as usize]).collect();
        // Large repetitions become counted rules (virtual nodes), appended after the others.
        let simplified = crate::automaton::lower::simplify_repeats(s).ok()?;
        let (s, counted) = crate::automaton::lower::lower_repeats(simplified);
        stub.resize(s.rules.len(), false);
        let limits = Limits::default();
        let deadline = Deadline::start(None);
        let aut = Automaton::build(&s, &counted, &|_| 0, &limits, &deadline, None, &stub).ok()?;
        let vocab = Vocabulary::from_token_bytes(tokens, &[], &[]).unwrap();
        Some((aut, stub, TokenTrie::new(&vocab)))
    }

    /// Whether the root's first state is near a stub, and how many nodes are within reach
    /// of one by the lower bound.
    fn root_near(src: &str, roots: &[&str], tokens: &[&str]) -> (bool, usize) {
        let (aut, stub, trie) = build(src, roots, tokens);
        let near = near_stubs(&aut, &stub, trie.max_depth as u32 + 1);
        let start = aut.rule_start[aut.root as usize];
        (near.is_near(&aut, &trie, start), near.near_nodes())
    }

    #[test]
    fn stubs_are_what_only_deferral_roots_reach() {
        let g = parse_ebnf(
            r#"root ::= "a" tool "b" shared
               tool ::= "{" inner shared "}"
               inner ::= "x"+
               shared ::= "s""#,
            "root",
        )
        .unwrap();
        let marks: Vec<bool> = g.rules.iter().map(|r| r.name == "tool").collect();
        let stub = stub_rules(&g, &marks);
        let names: Vec<&str> = g
            .rules
            .iter()
            .zip(&stub)
            .filter(|(_, &s)| s)
            .map(|(r, _)| r.name.as_str())
            .collect();
        assert_eq!(names, ["tool", "inner"]);
        // What only the deferral root reaches (`inner`) is left out.
        let (s, kept) = stubbed(&g, &stub);
        assert_eq!(kept, [0, 1, 3]);
        assert_eq!(s.rules[1].body, Expr::Bytes(vec![STUB_BYTE]));
        assert_eq!(s.rules[2].body, g.rules[3].body);
        let mut calls = Vec::new();
        crate::automaton::lower::for_each_call(&s.rules[0].body, &mut |c| calls.push(c));
        calls.sort_unstable();
        assert_eq!(calls, [1, 2]);
    }

    #[test]
    fn near_when_a_token_runs_into_a_stub() {
        let src = r#"root ::= "hello" tool "!"
                     tool ::= "{" "x"* "}""#;
        // "hello{" runs from the start into the tool; "hello" alone stops at its call.
        assert!(root_near(src, &["tool"], &["hel", "lo", "hello{", "!"]).0);
        let (near, within) = root_near(src, &["tool"], &["hel", "lo", "hello", "!", "{"]);
        assert!(!near);
        assert!(within > 0);
        // Through a call of a rule written first, and its completion.
        let src = r#"root ::= pre tool
                     pre ::= "ab" | "abc"
                     tool ::= "{" "x"* "}""#;
        assert!(root_near(src, &["tool"], &["abc{"]).0);
        // Any token longer than a path to the stub may run into it: "abc" after "ab".
        assert!(root_near(src, &["tool"], &["abc", "{"]).0);
        assert!(!root_near(src, &["tool"], &["a", "b", "c", "{", "bc{"]).0);
    }

    #[test]
    fn special_token_edges_and_far_calls_are_not_near() {
        // A special-token edge is a token of its own: no text token crosses it.
        let src = r#"root ::= "a"* <[0]> "bc" tool
                     tool ::= "{" "}""#;
        assert!(!root_near(src, &["tool"], &["a", "aa", "abc{", "bc{"]).0);
        // Farther than the longest token.
        let src = r#"root ::= "abcdefgh" tool
                     tool ::= "{" "}""#;
        assert!(!root_near(src, &["tool"], &["abc", "ab"]).0);
    }

    #[test]
    fn a_rule_entered_by_the_walk_returns_to_its_call() {
        // `w` is also called right before the stub; entered from the root's first call it
        // returns before "long text", so no token from the start reaches the stub, but an
        // item inside `w` (any caller) is near.
        let src = r#"root ::= w "long text" w tool
                     w ::= " "*
                     tool ::= "{" "}""#;
        let tokens = [" ", "  {", "long", " text"];
        assert!(!root_near(src, &["tool"], &tokens).0);
        let (aut, stub, trie) = build(src, &["tool"], &tokens);
        let near = near_stubs(&aut, &stub, trie.max_depth as u32 + 1);
        let w = aut.rule_names.iter().position(|n| n == "w").unwrap();
        assert!(near.is_near(&aut, &trie, aut.rule_start[w]));
    }

    /// The stub rules that some token of `tokens` enters from node `n`, token by token
    /// without a trie or a bound (the oracle of [`NearStubs::walk`]): the states a token's
    /// bytes lead to, each (automaton node, where its rule instance returns: a call's
    /// target, or any call site), closed under calls and completions; a stub call in a
    /// state reached with bytes of the token still to come is entered. Sorted, no repeats.
    fn entered_by_tokens(aut: &Automaton, stub: &[bool], tokens: &[&[u8]], n: u32) -> Vec<u32> {
        const ANY: u32 = u32::MAX;
        let mut returns: Vec<Vec<u32>> = vec![Vec::new(); aut.rule_start.len()];
        for v in 0..aut.nodes.len() as u32 {
            for c in aut.calls_of(v) {
                returns[c.rule as usize].push(c.target);
            }
        }
        let close = |set: &mut Vec<(u32, u32)>, stubs: Option<&mut Vec<u32>>| {
            let mut stubs = stubs;
            let mut k = 0;
            while k < set.len() {
                let (v, back) = set[k];
                k += 1;
                let mut next = Vec::new();
                for c in aut.calls_of(v) {
                    if stub[c.rule as usize] {
                        if let Some(out) = stubs.as_deref_mut() {
                            out.push(c.rule);
                        }
                    } else {
                        next.push((aut.rule_start[c.rule as usize], c.target));
                    }
                }
                if aut.is_final(v) {
                    match back {
                        ANY => {
                            next.extend(returns[aut.rule_of(v) as usize].iter().map(|&w| (w, ANY)))
                        }
                        w => next.push((w, ANY)),
                    }
                }
                for s in next {
                    if !set.contains(&s) {
                        set.push(s);
                    }
                }
            }
        };
        let mut out = Vec::new();
        for token in tokens {
            let mut set = vec![(n, ANY)];
            for &b in token.iter() {
                // Bytes of the token are still to come: a stub called here is entered.
                close(&mut set, Some(&mut out));
                let mut next = Vec::new();
                for &(v, back) in &set {
                    aut.for_each_byte_target(v, b, |w| {
                        if !next.contains(&(w, back)) {
                            next.push((w, back));
                        }
                    });
                }
                set = next;
                if set.is_empty() {
                    break;
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// A random grammar over `a`, `b` and `c`: rules `r0` (the root) to `r{rules - 2}` and
    /// `tool`, every rule free to call any other (`tool` included, which is the deferral
    /// root of [`the_walk_equals_token_by_token_reading`]).
    fn random_grammar(rand: &mut impl FnMut(u64) -> u64, rules: usize) -> Grammar {
        fn expr(rand: &mut impl FnMut(u64) -> u64, rules: usize, depth: u32) -> Expr {
            let pick = rand(if depth > 2 { 3 } else { 6 });
            match pick {
                0 => Expr::Bytes((0..1 + rand(2)).map(|_| b'a' + rand(3) as u8).collect()),
                1 => Expr::Rule(RuleId(rand(rules as u64) as u32)),
                2 => Expr::Empty,
                3 | 4 => {
                    let parts: Vec<Expr> = (0..1 + rand(3))
                        .map(|_| expr(rand, rules, depth + 1))
                        .collect();
                    match pick {
                        3 => Expr::Seq(parts),
                        _ => Expr::Choice(parts),
                    }
                }
                // Up to 40: a counted rule (virtual nodes) when its body is bytes only and
                // more than one ASCII character (those are written out up to 64 copies).
                _ => Expr::Repeat {
                    expr: Box::new(expr(rand, rules, depth + 1)),
                    min: rand(2) as u32,
                    max: [None, Some(2), Some(40)][rand(3) as usize],
                },
            }
        }
        Grammar {
            rules: (0..rules)
                .map(|i| crate::grammar::Rule {
                    name: if i + 1 == rules {
                        "tool".into()
                    } else {
                        format!("r{i}")
                    },
                    body: expr(rand, rules, 0),
                })
                .collect(),
            root: RuleId(0),
        }
    }

    /// The trie walk (bounds, pruning, shared prefixes) finds near nodes and the stubs they
    /// enter exactly as reading each token byte by byte from the node does, on every node
    /// (virtual nodes of counted repetitions included) of 600 random grammars with random
    /// vocabularies; and the lower bound the walk prunes by drops by at most one along a
    /// byte edge.
    #[test]
    fn the_walk_equals_token_by_token_reading() {
        let mut rand = crate::automaton::minimize::tests::xorshift(0x2545_F491_4F6C_DD1D);
        let (mut near_seen, mut far_seen, mut built, mut virtuals) = (0, 0, 0, 0);
        for i in 0..600 {
            let g = random_grammar(&mut rand, 2 + i % 5);
            let mut tokens: Vec<Vec<u8>> = (0..4 + rand(12))
                .map(|_| (0..1 + rand(6)).map(|_| b'a' + rand(3) as u8).collect())
                .collect();
            tokens.sort();
            tokens.dedup();
            let bytes: Vec<&[u8]> = tokens.iter().map(|t| t.as_slice()).collect();
            let Some((aut, stub, trie)) = build_grammar(&g, &["tool"], &bytes) else {
                continue;
            };
            built += 1;
            let near = near_stubs(&aut, &stub, trie.max_depth as u32 + 1);
            let virtual_nodes = aut.counted.iter().flat_map(|c| {
                let counts = c.max.unwrap_or(c.min + 1);
                c.first..c.first + counts * (c.states + 1)
            });
            let nodes: Vec<u32> = (0..aut.nodes.len() as u32).chain(virtual_nodes).collect();
            virtuals += nodes.len() - aut.nodes.len();
            for &n in &nodes {
                aut.for_each_byte_range(n, |lo, hi| {
                    for b in lo..=hi {
                        aut.for_each_byte_target(n, b, |w| {
                            let (from, to) = (near.lower_bound(&aut, n), near.lower_bound(&aut, w));
                            assert!(
                                from <= to + 1,
                                "grammar {i}: {n} -> {w} bounds {from}, {to}"
                            );
                        });
                    }
                });
            }
            for &n in &nodes {
                let expected = entered_by_tokens(&aut, &stub, &bytes, n);
                assert_eq!(
                    near.is_near(&aut, &trie, n),
                    !expected.is_empty(),
                    "grammar {i} node {n}: {g:?} tokens {tokens:?}"
                );
                let mut entered = Vec::new();
                near.stubs_entered(&aut, &trie, n, &mut entered);
                assert_eq!(entered, expected, "grammar {i} node {n}");
                if expected.is_empty() {
                    far_seen += 1;
                } else {
                    near_seen += 1;
                }
            }
        }
        assert!(
            built > 500 && virtuals > 1000 && near_seen > 200 && far_seen > 200,
            "{built} grammars built, {virtuals} virtual nodes; {near_seen} near, {far_seen} far"
        );
    }

    /// Whole rounds over every node, last to first, until one changes nothing: the solver
    /// [`Readers::relax`] replaced, kept as its oracle.
    fn rounds(nodes: usize, step: &mut dyn FnMut(usize) -> bool) {
        loop {
            let mut changed = false;
            for n in (0..nodes).rev() {
                changed |= step(n);
            }
            if !changed {
                return;
            }
        }
    }

    #[test]
    fn the_work_list_finds_the_bounds_of_whole_rounds() {
        let mut rand = crate::automaton::minimize::tests::xorshift(0x9E37_79B9_7F4A_7C15);
        let (mut built, mut needed_more) = (0, 0);
        for i in 0..2000 {
            let g = random_grammar(&mut rand, 2 + i % 5);
            let Some((aut, stub, trie)) = build_grammar(&g, &["tool"], &[b"a", b"ab"]) else {
                continue;
            };
            built += 1;
            let reach = trie.max_depth as u32 + 1 + rand(8) as u32;
            let fast = near_stubs(&aut, &stub, reach);
            let slow = near_stubs_by(&aut, &stub, reach, rounds);
            assert_eq!(fast.dist, slow.dist, "grammar {i}: {g:?}");
            assert_eq!(fast.ret, slow.ret, "grammar {i}: {g:?}");
            // What the sweep alone finds, before the work list.
            let readers = Readers::of(&aut);
            let swept = near_stubs_by(&aut, &stub, reach, |_, step| {
                for &n in &readers.order {
                    step(n as usize);
                }
            });
            if (swept.dist, swept.ret) != (slow.dist, slow.ret) {
                needed_more += 1;
            }
        }
        // The work list is exercised: one sweep alone falls short on these grammars.
        assert!(
            built > 1800 && needed_more > 25,
            "{built} grammars built, {needed_more} needing more than one sweep"
        );
    }

    /// The walk's byte filter reads the states' edges: their bytes as a set, or nothing
    /// (no filter) for a virtual state or past `NARROW_EDGES` edges.
    #[test]
    fn narrow_bytes_are_the_states_edge_bytes() {
        let (aut, _, _) = build(
            r#"root ::= ("a" | [0-9] | "\"") rest | big
               rest ::= "z"
               big ::= "q"{300,400}"#,
            &[],
            &["a"],
        );
        let start = aut.rule_start[aut.root as usize];
        let want = {
            let mut on = [0u64; 4];
            for b in [b'a', b'"'].into_iter().chain(b'0'..=b'9') {
                on[(b >> 6) as usize] |= 1 << (b & 63);
            }
            on
        };
        let none = u32::MAX;
        // The root's start: its own edges (the counted rule is a call, not a byte edge).
        let own = narrow_bytes(&aut, &[(start, none)]);
        assert_eq!(own, Some(want));
        let edges = aut.bytes_of(start).len();
        assert!(edges > 0);
        let many = vec![(start, none); NARROW_EDGES / edges + 1];
        assert_eq!(narrow_bytes(&aut, &many), None, "past the edges read");
        let counted = aut.counted.first().expect("a counted rule");
        assert!(aut.is_virtual(counted.first));
        assert_eq!(
            narrow_bytes(&aut, &[(start, none), (counted.first, none)]),
            None
        );
    }
}
