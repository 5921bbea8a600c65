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
    /// numbered as in the module docs, and nullability and follow bytes are computed again
    /// for the whole.
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
                    a.nullable.push(false);
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
        a.nullable.iter_mut().for_each(|x| *x = false);
        a.follow.iter_mut().for_each(|f| *f = [0; 4]);
        let end = a.compute_nullable();
        a.compute_follow(&end);
        Ok((a, splice))
    }
}

/// A copy of `v` with room for `extra` more items.
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
