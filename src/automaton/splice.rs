//! A deferring compile's build made from its stub grammar's automaton (`compiler::deferred`):
//! the automata of the tools built are appended to it, each in the place of its stub, so the
//! build costs in proportion to the tools, not to the tag (whose rules, hundreds of tool
//! names among them, would otherwise be assembled again for every build).
//!
//! Layout: the stub grammar's real nodes keep their ids, so what was computed on them (mask
//! classes, near-stub bounds) is read at the same index. Each tool's real nodes follow
//! them, its root rule takes the stub rule's id, and its other rules get new ids after the
//! stub grammar's. The stub's own nodes (a stub's body is one byte: two nodes, no call)
//! are left behind with no edge and not final, the states of a new rule that nothing calls
//! (as `Automaton::build` leaves a dead state for the rules it builds inline into their
//! callers), so that every rule's nodes stay one run of ids. Their edges stay in the edge
//! arrays, in no node's range.
//! Virtual nodes (counted repetitions) are numbered again after the real nodes, the stub
//! grammar's first, in their order.

use super::{Automaton, AutomatonError, ByteEdge, CallEdge, Node, TokenEdge};
use crate::limits::{Limit, LimitExceeded, Limits};

/// Where a build's tools went in the automaton [`Automaton::splice`] returns.
#[derive(Debug)]
pub(crate) struct Splice {
    /// The stub grammar's number of real nodes (the tools' nodes start there).
    pub base_nodes: u32,
    /// The stub grammar's number of rules.
    pub base_rules: u32,
    /// Per tool, in the order given: its slot (the stub rule it replaced) and the new rule
    /// its stub's nodes were left in.
    pub slots: Vec<(u32, u32)>,
}

impl Automaton {
    /// This automaton (a stub grammar's) with each `(slot, tool)` of `tools` in the place of
    /// stub rule `slot`: `tool` is the automaton of one deferral root's rules alone
    /// (`Automaton::build` of its component, its root the rule to put at `slot`). The
    /// result reads the language of the stub grammar with those tools built; rules are
    /// numbered as in the module docs.
    ///
    /// Nullability and follow bytes: when no tool's root is nullable, the stub grammar's
    /// are kept and only the tools' are solved ([`Automaton::solve_appended`]): the work
    /// is in proportion to the tools. Else both are computed again for the whole.
    ///
    /// # Errors
    /// [`Limit::AutomatonNodes`] when the nodes together exceed `limits`; too many virtual
    /// nodes, as `Automaton::build` reports them.
    pub(crate) fn splice(
        &self,
        tools: &[(u32, &Automaton)],
        limits: &Limits,
    ) -> Result<(Automaton, Splice), AutomatonError> {
        let real: usize =
            self.nodes.len() + tools.iter().map(|(_, t)| t.nodes.len()).sum::<usize>();
        if real > limits.max_automaton_nodes {
            return Err(LimitExceeded::new(
                Limit::AutomatonNodes,
                limits.max_automaton_nodes as u64,
                real as u64,
                None,
            )
            .into());
        }
        // A copy with room for the tools: a clone's vectors are full, so the first push of
        // each would copy it again (at 500 tools, a tenth of a build's instructions went
        // to growing them).
        let extra = |f: fn(&Automaton) -> usize| tools.iter().map(|(_, t)| f(t)).sum::<usize>();
        let rules = extra(|t| t.rule_start.len());
        let mut a = Automaton {
            nodes: with_room(&self.nodes, extra(|t| t.nodes.len())),
            byte_edges: with_room(&self.byte_edges, extra(|t| t.byte_edges.len())),
            call_edges: with_room(&self.call_edges, extra(|t| t.call_edges.len())),
            token_edges: with_room(&self.token_edges, extra(|t| t.token_edges.len())),
            rule_start: with_room(&self.rule_start, rules),
            rule_names: with_room(&self.rule_names, rules),
            nullable: with_room(&self.nullable, rules),
            follow: with_room(&self.follow, rules),
            root: self.root,
            counted: self.counted.clone(),
            deterministic: self.deterministic,
            had_dead_ends: false,
            key_filters: None,
        };
        let mut counted = std::mem::take(&mut a.counted);
        let mut splice = Splice {
            base_nodes: self.nodes.len() as u32,
            base_rules: self.rule_start.len() as u32,
            slots: Vec::with_capacity(tools.len()),
        };
        for &(slot, tool) in tools {
            // The stub's nodes: a rule of their own that nothing calls, with no edge.
            let left = a.rule_start.len() as u32;
            // (A stub's nodes are the stub grammar's: the tools' come after them.)
            let base = splice.base_nodes as usize;
            for node in a.nodes[..base].iter_mut().filter(|n| n.rule == slot) {
                node.rule = left;
                node.is_final = false;
                node.bytes = (node.bytes.0, node.bytes.0);
                node.calls = (node.calls.0, node.calls.0);
                node.tokens = (node.tokens.0, node.tokens.0);
            }
            a.rule_start.push(self.rule_start[slot as usize]);
            a.rule_names
                .push(format!("{}#stub", self.rule_names[slot as usize]));
            a.nullable.push(false);
            a.follow.push([0; 4]);
            splice.slots.push((slot, left));
            // The tool's rules: its root at `slot`, the others after every rule so far.
            let mut next = a.rule_start.len() as u32;
            let rule: Vec<u32> = (0..tool.rule_start.len() as u32)
                .map(|r| {
                    if r == tool.root {
                        slot
                    } else {
                        next += 1;
                        next - 1
                    }
                })
                .collect();
            let off = a.nodes.len() as u32;
            for (r, name) in tool.rule_names.iter().enumerate() {
                if r as u32 != tool.root {
                    a.rule_start.push(u32::MAX);
                    a.rule_names.push(name.clone());
                    a.nullable.push(tool.nullable[r]);
                    a.follow.push([0; 4]);
                }
            }
            for (r, &s) in tool.rule_start.iter().enumerate() {
                // Counted rules' starts are set with the virtual numbering below.
                if !tool.is_virtual(s) {
                    a.rule_start[rule[r] as usize] = s + off;
                }
            }
            for node in &tool.nodes {
                let bytes = append(&mut a.byte_edges, &tool.byte_edges, node.bytes, |e| {
                    ByteEdge {
                        target: e.target + off,
                        ..*e
                    }
                });
                let calls = append(&mut a.call_edges, &tool.call_edges, node.calls, |e| {
                    CallEdge {
                        rule: rule[e.rule as usize],
                        target: e.target + off,
                    }
                });
                let tokens = append(&mut a.token_edges, &tool.token_edges, node.tokens, |e| {
                    TokenEdge {
                        target: e.target + off,
                        ..*e
                    }
                });
                a.nodes.push(Node {
                    rule: rule[node.rule as usize],
                    is_final: node.is_final,
                    bytes,
                    calls,
                    tokens,
                });
            }
            counted.extend(tool.counted.iter().map(|c| super::Counted {
                rule: rule[c.rule as usize],
                ..c.clone()
            }));
            a.deterministic &= tool.deterministic;
        }
        // Virtual nodes after the real ones, in the same order (`Automaton::build`'s spans).
        let mut first = a.nodes.len() as u64;
        for c in &mut counted {
            let span = super::virtual_span(c.min, c.max, c.states);
            if first + span >= u32::MAX as u64 / 2 {
                return Err(AutomatonError::TooManyStates {
                    rule: a.rule_names[c.rule as usize].clone(),
                    limit: (u32::MAX / 2) as usize,
                });
            }
            c.first = first as u32;
            a.rule_start[c.rule as usize] = c.first + c.states;
            first += span;
        }
        a.counted = counted;
        let incremental = tools
            .iter()
            .all(|(_, t)| !t.nullable.get(t.root as usize).copied().unwrap_or(true));
        if incremental {
            let _built = a.solve_appended(&splice);
            #[cfg(test)]
            check_appended(&a, _built);
        } else {
            a.solve_whole();
        }
        Ok((a, splice))
    }

    /// Nullability and follow bytes computed again for the whole automaton.
    fn solve_whole(&mut self) {
        self.nullable.iter_mut().for_each(|x| *x = false);
        self.follow.iter_mut().for_each(|f| *f = [0; 4]);
        let end = self.compute_nullable();
        self.compute_follow(&end);
    }

    /// Nullability and follow bytes of an automaton [`Automaton::splice`] made, from the
    /// stub grammar's (which it holds for the stub grammar's rules) and the tools' own
    /// nullability (set on their rules), solved over the tools' nodes alone.
    ///
    /// Why the stub grammar's stay right: a tool's root, like the stub it replaces, is not
    /// nullable, so nullability is unchanged, and only the first bytes of a built slot
    /// changed (the stub's one byte, `STUB_BYTE`, became the tool's first bytes). Every
    /// follow set that depends on them holds `STUB_BYTE`; each set that holds it gets
    /// every built tool's first bytes added (a set that holds it for another reason, such
    /// as a raw byte range of the grammar or another stub, gets them needlessly). So every
    /// follow set is a superset of the exact one, larger by at most `STUB_BYTE` and tools'
    /// first bytes. Follow bytes only ever let a walk defer a token that crosses its
    /// rule's end to the chart, which decides it exactly: masks are the same.
    /// Returns the built tools' first bytes.
    fn solve_appended(&mut self, splice: &Splice) -> [u64; 4] {
        let from = splice.base_nodes as usize;
        // Tool nodes call tool rules only: their targets and callees' starts are tool
        // nodes (or virtual).
        let at = |n: u32| n as usize - from;
        // end[i]: from tool node `from + i`, its rule can end through nullable calls only.
        let mut end: Vec<bool> = self.nodes[from..].iter().map(|n| n.is_final).collect();
        let callers: Vec<u32> = (from as u32..self.nodes.len() as u32)
            .filter(|&n| !self.calls_of(n).is_empty())
            .collect();
        loop {
            let mut changed = false;
            for &n in callers.iter().rev() {
                if !end[at(n)]
                    && self
                        .calls_of(n)
                        .iter()
                        .any(|c| self.nullable[c.rule as usize] && end[at(c.target)])
                {
                    end[at(n)] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let tool_rule =
            |r: u32| r >= splice.base_rules || splice.slots.iter().any(|&(slot, _)| slot == r);
        let first = self.first_bytes(from, &callers, tool_rule);
        // The stub grammar's follow sets that a stub could start: the built tools' first
        // bytes too.
        let mut built = [0u64; 4];
        for &(slot, _) in &splice.slots {
            let s = self.rule_start[slot as usize];
            match self.is_virtual(s) {
                true => {
                    let c = self.counted.iter().find(|c| c.rule == slot);
                    for e in c.map_or(&[][..], |c| c.edges_of(0)) {
                        super::add_range(&mut built, e.lo, e.hi);
                    }
                }
                false => super::or_into(&mut built, &first[at(s)]),
            }
        }
        for f in &mut self.follow[..splice.base_rules as usize] {
            if super::byte_in(f, super::defer::STUB_BYTE) {
                super::or_into(f, &built);
            }
        }
        // The tools' rules, from their call sites (a call that can end its caller's rule
        // adds the caller's follow bytes, a slot's among them).
        self.follow_rounds(from, &callers, &first, |n| end[at(n)]);
        built
    }
}

impl Automaton {
    /// True when no edge of the tools [`Automaton::splice`] appended leads into a dead
    /// end (a node from which its rule can never complete, a call of a rule that can
    /// never complete, a counted body state that cannot), and every slot's rule can
    /// complete: then the build needs no pruning ([`Automaton::prune_unproductive`] would
    /// remove nothing). The stub grammar's rules are taken as productive, as a build from
    /// a stub grammar whose pruning removed nothing may. Linear in the tools' nodes and
    /// edges; false sends the build to the whole pruning.
    pub(crate) fn appended_dead_free(&self, splice: &Splice) -> bool {
        let from = splice.base_nodes as usize;
        let len = self.nodes.len() - from;
        let at = |n: u32| n as usize - from;
        let base_rules = splice.base_rules as usize;
        let mut examined = vec![false; self.rule_start.len()];
        examined[base_rules..].iter_mut().for_each(|x| *x = true);
        for &(slot, _) in &splice.slots {
            examined[slot as usize] = true;
        }
        let mut rule_ok: Vec<bool> = examined.iter().map(|&x| !x).collect();
        // Counted rules of the tools: body states that reach a final one.
        for c in self.counted.iter().filter(|c| examined[c.rule as usize]) {
            let ok = c.productive_states();
            rule_ok[c.rule as usize] = c.min == 0 || ok.first().copied().unwrap_or(false);
            if c.edges.iter().any(|e| !ok[e.target as usize]) {
                return false;
            }
        }
        // Productive tool nodes, backwards from the final ones (reverse edges in
        // compressed rows; a call edge waits for its rule too).
        const NO_RULE: u32 = u32::MAX;
        let mut first = vec![0u32; len + 1];
        for n in from..self.nodes.len() {
            let n = n as u32;
            let targets = self.bytes_of(n).iter().map(|e| e.target);
            let targets = targets.chain(self.tokens_of(n).iter().map(|e| e.target));
            for t in targets.chain(self.calls_of(n).iter().map(|e| e.target)) {
                first[at(t) + 1] += 1;
            }
        }
        for i in 0..len {
            first[i + 1] += first[i];
        }
        let mut fill = first.clone();
        let mut rev = vec![(0u32, NO_RULE); first[len] as usize];
        let mut waiting: rustc_hash::FxHashMap<u32, Vec<(u32, u32)>> = Default::default();
        for n in from as u32..self.nodes.len() as u32 {
            let mut put = |t: u32, rule: u32| {
                rev[fill[at(t)] as usize] = (n, rule);
                fill[at(t)] += 1;
            };
            self.bytes_of(n).iter().for_each(|e| put(e.target, NO_RULE));
            self.tokens_of(n)
                .iter()
                .for_each(|e| put(e.target, NO_RULE));
            for e in self.calls_of(n) {
                put(e.target, e.rule);
                waiting.entry(e.rule).or_default().push((n, e.target));
            }
        }
        let mut starts: rustc_hash::FxHashMap<u32, Vec<u32>> = Default::default();
        for (r, &s) in self.rule_start.iter().enumerate() {
            if examined[r] && !self.is_virtual(s) && s as usize >= from {
                starts.entry(s).or_default().push(r as u32);
            }
        }
        let mut node_ok: Vec<bool> = self.nodes[from..].iter().map(|n| n.is_final).collect();
        let mut stack: Vec<u32> = (0..len as u32)
            .filter(|&i| node_ok[i as usize])
            .map(|i| i + from as u32)
            .collect();
        let mut rule_stack: Vec<u32> = waiting
            .keys()
            .copied()
            .filter(|&r| rule_ok[r as usize])
            .collect();
        loop {
            if let Some(r) = rule_stack.pop() {
                for &(p, t) in waiting.get(&r).map_or(&[][..], |w| &w[..]) {
                    if node_ok[at(t)] && !node_ok[at(p)] {
                        node_ok[at(p)] = true;
                        stack.push(p);
                    }
                }
                continue;
            }
            let Some(n) = stack.pop() else { break };
            for &r in starts.get(&n).map_or(&[][..], |s| &s[..]) {
                if !rule_ok[r as usize] {
                    rule_ok[r as usize] = true;
                    rule_stack.push(r);
                }
            }
            for &(p, r) in &rev[first[at(n)] as usize..first[at(n) + 1] as usize] {
                if !node_ok[at(p)] && (r == NO_RULE || rule_ok[r as usize]) {
                    node_ok[at(p)] = true;
                    stack.push(p);
                }
            }
        }
        let dead_edge = (from as u32..self.nodes.len() as u32).any(|n| {
            self.bytes_of(n).iter().any(|e| !node_ok[at(e.target)])
                || self.tokens_of(n).iter().any(|e| !node_ok[at(e.target)])
                || self
                    .calls_of(n)
                    .iter()
                    .any(|e| !rule_ok[e.rule as usize] || !node_ok[at(e.target)])
        });
        !dead_edge && splice.slots.iter().all(|&(slot, _)| rule_ok[slot as usize])
    }
}

/// Checks [`Automaton::solve_appended`] against the whole computation: the same
/// nullability, and follow sets that hold the exact ones and differ by `STUB_BYTE` and the
/// built tools' first bytes at most.
#[cfg(test)]
fn check_appended(a: &Automaton, built: [u64; 4]) {
    let mut whole = a.clone();
    whole.solve_whole();
    assert_eq!(whole.nullable, a.nullable, "nullability");
    let mut allowed = built;
    super::add_range(
        &mut allowed,
        super::defer::STUB_BYTE,
        super::defer::STUB_BYTE,
    );
    for (r, (got, exact)) in a.follow.iter().zip(&whole.follow).enumerate() {
        for w in 0..4 {
            assert_eq!(got[w] & exact[w], exact[w], "rule {r}: follow bytes lost");
            assert_eq!(
                got[w] & !exact[w] & !allowed[w],
                0,
                "rule {r}: follow bytes added"
            );
        }
    }
    APPENDED.with(|c| c.set(c.get() + 1));
}

#[cfg(test)]
thread_local! {
    /// Splices whose nullability and follow bytes were solved over the tools alone (tests).
    pub(crate) static APPENDED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A copy of `v` with room for `extra` more items.
#[inline]
fn with_room<T: Clone>(v: &[T], extra: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(v.len() + extra);
    out.extend_from_slice(v);
    out
}

/// Appends `from[range]`, each edge mapped by `f`, to `to`; returns where they went.
fn append<E: Copy>(
    to: &mut Vec<E>,
    from: &[E],
    range: (u32, u32),
    f: impl Fn(&E) -> E,
) -> (u32, u32) {
    let start = to.len() as u32;
    to.extend(from[range.0 as usize..range.1 as usize].iter().map(f));
    (start, to.len() as u32)
}
