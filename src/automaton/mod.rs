//! Byte-level rule automata: every rule of a [`Grammar`] becomes a DFA whose edges are byte
//! ranges, calls of other rules and special-token terminals.
//!
//! The parser (`crate::parser`) runs these automata as an Earley recogniser: an item is a
//! node of one rule's automaton plus the input position where that rule started. Because
//! calls stay edges, left recursion, ambiguity and nullable rules need no rewriting.
//! Node ids (`u32`) are global across rules; `rule_start[r]` is rule `r`'s start node.

mod build;
mod classes;
pub(crate) mod defer;
pub(crate) use classes::{ClassSeed, KeyBasis, Seeded};
pub(crate) mod lower;
mod measure;
pub(crate) mod minimize;
mod nullable;
mod refine;
mod regular;
pub(crate) mod rule_cache;
pub(crate) mod splice;

use crate::grammar::{Expr, Grammar, RuleId, TokenRef};
use crate::limits::{Deadline, Limit, LimitExceeded, Limits};

/// An edge on one byte range `lo..=hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ByteEdge {
    pub lo: u8,
    pub hi: u8,
    pub target: u32,
}

/// An edge that runs rule `rule` to its end, then continues at `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CallEdge {
    pub rule: u32,
    pub target: u32,
}

/// An edge on exactly one (special) token id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct TokenEdge {
    pub token: u32,
    pub target: u32,
}

/// One automaton node. Edge lists index the automaton's flat edge arrays.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Node {
    pub rule: u32,
    pub is_final: bool,
    pub bytes: (u32, u32),
    pub calls: (u32, u32),
    pub tokens: (u32, u32),
}

/// Why a grammar could not become automata.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AutomatonError {
    /// An expression nested deeper than the builder allows.
    #[error("rule `{rule}` nests expressions {depth} deep, more than the limit of {limit}")]
    TooDeep {
        /// The rule.
        rule: String,
        /// How deep it got before the builder stopped.
        depth: usize,
        /// The limit.
        limit: usize,
    },
    /// The automata would need more node ids than the id space holds (a hard limit; the
    /// configurable ones are [`AutomatonError::Limit`]).
    #[error("rule `{rule}` needs more than {limit} automaton states; split it into smaller rules")]
    TooManyStates {
        /// The rule.
        rule: String,
        /// The limit.
        limit: usize,
    },
    /// Directly nested repetitions, merged into one (their bounds multiply: `(x{0,a}){0,b}`
    /// is `x{0,a·b}`), repeat more times than a repetition's counter holds (a hard limit:
    /// `u32::MAX / 2`).
    #[error("rule `{rule}` repeats one expression up to {count} times through nested repetitions (their bounds multiply), more than the {limit} a repetition can count; lower the bounds")]
    RepeatTooLarge {
        /// The rule.
        rule: String,
        /// The merged bound.
        count: u64,
        /// The limit.
        limit: u64,
    },
    /// One of the compiler's [`Limits`](crate::Limits) (rule states, automaton nodes,
    /// compile time).
    #[error(transparent)]
    Limit(#[from] crate::limits::LimitExceeded),
}

/// All rule automata of one grammar, with the facts the parser and the mask cache need.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Automaton {
    pub(crate) nodes: Vec<Node>,
    pub(crate) byte_edges: Vec<ByteEdge>,
    pub(crate) call_edges: Vec<CallEdge>,
    pub(crate) token_edges: Vec<TokenEdge>,
    pub(crate) rule_start: Vec<u32>,
    pub(crate) rule_names: Vec<String>,
    /// `nullable[r]`: rule `r` derives the empty string.
    pub(crate) nullable: Vec<bool>,
    /// `follow[r]`: a 256-bit set of the bytes that may come right after rule `r` ends.
    pub(crate) follow: Vec<[u64; 4]>,
    pub(crate) root: u32,
    /// Counted rules, by ascending first virtual node id.
    pub(crate) counted: Vec<Counted>,
    /// True when no real node has two edges on one byte (every rule built as a DFA).
    pub(crate) deterministic: bool,
    /// Set when [`Automaton::prune_unproductive`] removed an edge (not kept across
    /// serialization: only a deferring compile's seed reads it).
    #[serde(skip)]
    pub(crate) had_dead_ends: bool,
    /// The key rules whose completions the matcher's chart checks against declared names
    /// (`parser::key_filter`); stored by rule name beside a serialized automaton.
    #[serde(skip)]
    pub(crate) key_filters: Option<std::sync::Arc<crate::parser::key_filter::KeyFilters>>,
}

/// A counted repetition `body{min,max}` whose body is a non-nullable byte DFA.
///
/// Its nodes are *virtual*: node `first + c * (S + 1) + s` is "c iterations completed, in
/// body state `s`" (`s == S` is the rule's start, with `c == 0`). Nothing per count is
/// stored, so `{2,20000}` costs one body DFA. Two virtual nodes with the same
/// [`Counted::mask_key`] have the same token masks, since a token of at most `L` bytes
/// completes at most `L` iterations.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Counted {
    pub rule: u32,
    pub first: u32,
    /// Body DFA states `S`.
    pub states: u32,
    pub min: u32,
    pub max: Option<u32>,
    pub body_final: Vec<bool>,
    /// Per body state: range of its edges in `edges` (targets are body states).
    pub body_edges: Vec<(u32, u32)>,
    pub edges: Vec<ByteEdge>,
}

impl Counted {
    #[inline]
    fn id(&self, c: u32, s: u32) -> u32 {
        self.first + c * (self.states + 1) + s
    }

    #[inline]
    pub(crate) fn split(&self, n: u32) -> (u32, u32) {
        let k = n - self.first;
        (k / (self.states + 1), k % (self.states + 1))
    }

    /// Per body state: whether it reaches a final body state (backwards from the final
    /// ones, linear in the body's edges).
    pub(crate) fn productive_states(&self) -> Vec<bool> {
        let mut preds: Vec<Vec<u32>> = vec![Vec::new(); self.states as usize];
        for st in 0..self.states {
            for e in self.edges_of(st) {
                preds[e.target as usize].push(st);
            }
        }
        let mut ok = self.body_final.clone();
        let mut stack: Vec<u32> = (0..self.states).filter(|&s| ok[s as usize]).collect();
        while let Some(t) = stack.pop() {
            for &p in &preds[t as usize] {
                if !ok[p as usize] {
                    ok[p as usize] = true;
                    stack.push(p);
                }
            }
        }
        ok
    }

    /// Edges of body state `s`; the rule's start behaves as body state 0.
    #[inline]
    pub(crate) fn edges_of(&self, s: u32) -> &[ByteEdge] {
        let s = if s == self.states { 0 } else { s };
        let (a, b) = self.body_edges[s as usize];
        &self.edges[a as usize..b as usize]
    }

    /// The count after completing one more iteration at count `c`, if another may start.
    #[inline]
    fn next_count(&self, c: u32) -> Option<u32> {
        match self.max {
            Some(max) => (c + 1 < max).then_some(c + 1),
            None => Some((c + 1).min(self.min)),
        }
    }

    #[inline]
    fn is_final(&self, c: u32, s: u32) -> bool {
        if s == self.states {
            self.min == 0
        } else {
            self.body_final[s as usize] && c + 1 >= self.min
        }
    }

    /// True when every virtual node has at most one edge on any byte: each body state's
    /// edges are disjoint, and a final body state's edges are disjoint from the start's
    /// (where the next iteration may begin). A token then has one path through the
    /// repetition, whatever the count, and the count only cuts it short (see
    /// `mask::counted`).
    pub(crate) fn is_deterministic(&self) -> bool {
        let disjoint = |e: &[ByteEdge]| e.windows(2).all(|w| w[0].hi < w[1].lo);
        let start = self.edges_of(0);
        (0..self.states).all(|s| {
            let own = self.edges_of(s);
            disjoint(own)
                && (!self.body_final[s as usize]
                    || own
                        .iter()
                        .all(|a| start.iter().all(|b| a.hi < b.lo || b.hi < a.lo)))
        })
    }

    /// The first body state with the same finality and the same edges as body state `s`
    /// (the rule's start counts as state 0): the two have the same future, so one token
    /// walk serves both (a string body has several final states with no edges: after a
    /// plain character, an escape, a multi-byte character).
    pub(crate) fn representative(&self, s: u32) -> u32 {
        let s = if s == self.states { 0 } else { s };
        let (fin, edges) = (self.body_final[s as usize], self.edges_of(s));
        (0..s)
            .find(|&t| self.body_final[t as usize] == fin && self.edges_of(t) == edges)
            .unwrap_or(s)
    }

    /// The key under which virtual node `(c, s)` shares its masks: body state, and the
    /// distances to `min` and `max` clipped at `max_token_len + 2`.
    pub fn mask_key(&self, n: u32, max_token_len: u32) -> (u32, u32, u32) {
        let (c, s) = self.split(n);
        let clip = max_token_len.saturating_add(2);
        let to_min = self.min.saturating_sub(c).min(clip);
        let to_max = self.max.map_or(u32::MAX, |m| (m - c).min(clip));
        (s, to_min, to_max)
    }
}

impl Automaton {
    /// Builds the automata of `grammar` (already validated and lowered). `token` maps each
    /// token terminal to its id. Stops with [`AutomatonError::Limit`] past
    /// `limits.max_rule_states` states in one rule, `limits.max_automaton_nodes` nodes in
    /// all, or the deadline. With `cache`, a rule whose automaton was built before (by
    /// content, [`rule_cache`]) takes it from there, and the rules built here are kept in it.
    /// Rules with `stub[r]` set (indices past its end count as unset; see [`defer`]) are
    /// stubs: never built inline into a caller, built without the cache.
    pub(crate) fn build(
        grammar: &Grammar,
        counted_rules: &[u32],
        token: &dyn Fn(&TokenRef) -> u32,
        limits: &Limits,
        deadline: &Deadline,
        cache: Option<&rule_cache::RuleAutomatonCache>,
        stub: &[bool],
    ) -> Result<Self, AutomatonError> {
        let mut a = Automaton {
            nodes: Vec::new(),
            byte_edges: Vec::new(),
            call_edges: Vec::new(),
            token_edges: Vec::new(),
            rule_start: Vec::with_capacity(grammar.rules.len()),
            rule_names: grammar.rules.iter().map(|r| r.name.clone()).collect(),
            nullable: vec![false; grammar.rules.len()],
            follow: vec![[0; 4]; grammar.rules.len()],
            root: grammar.root.0,
            counted: Vec::new(),
            deterministic: false,
            had_dead_ends: false,
            key_filters: None,
        };
        let mut pending: Vec<(u32, build::Dfa, u32, Option<u32>)> = Vec::new();
        let is_stub = |r: usize| stub.get(r).copied().unwrap_or(false);
        // Stubs stay rules of their own: the calls of them are what `defer` looks for.
        let kept: Vec<u32> = counted_rules
            .iter()
            .copied()
            .chain((0..grammar.rules.len() as u32).filter(|&r| is_stub(r as usize)))
            .collect();
        let plan = regular::TailPlan::new(grammar, &kept);
        let mut classes = build::ClassMemo::default();
        let mut stub_dfa: Option<(Expr, build::Dfa)> = None;
        for (ri, rule) in grammar.rules.iter().enumerate() {
            let is_counted = counted_rules.contains(&(ri as u32));
            let body = match (&rule.body, is_counted) {
                (Expr::Repeat { expr, .. }, true) => expr.as_ref(),
                _ => &rule.body,
            };
            if plan.unused[ri] {
                // Built inline into the rules of its component that are called; one dead
                // state keeps rule ids and node numbering simple.
                a.rule_start.push(a.nodes.len() as u32);
                let b0 = a.byte_edges.len() as u32;
                let c0 = a.call_edges.len() as u32;
                let t0 = a.token_edges.len() as u32;
                a.nodes.push(Node {
                    rule: ri as u32,
                    is_final: false,
                    bytes: (b0, b0),
                    calls: (c0, c0),
                    tokens: (t0, t0),
                });
                continue;
            }
            deadline.check()?;
            let max_states = limits.max_rule_states.min(RuleId::LIMIT);
            let key = cache.filter(|_| !is_stub(ri)).and_then(|c| {
                let limits = (max_states, limits.max_memory_bytes);
                c.key(body, ri as u32, &plan, token, limits)
            });
            // Stubs all have one body: its automaton is built once per grammar.
            let hit = match &stub_dfa {
                Some((b, dfa)) if is_stub(ri) && b == body => Some(dfa.clone()),
                _ => cache.zip(key.as_ref()).and_then(|(c, k)| c.get(k)),
            };
            let fresh = hit.is_none();
            let built = match hit {
                Some(dfa) => Ok(dfa),
                None => build::build_automaton(
                    body,
                    token,
                    max_states,
                    limits.max_memory_bytes,
                    deadline,
                    &plan,
                    ri as u32,
                    &mut classes,
                )
                .map_err(|e| match e {
                    build::BuildError::TooDeep(depth) => AutomatonError::TooDeep {
                        rule: rule.name.clone(),
                        depth,
                        limit: build::MAX_EXPR_DEPTH,
                    },
                    build::BuildError::TooManyStates | build::BuildError::Blowup => {
                        LimitExceeded::new(
                            Limit::RuleStates,
                            max_states as u64,
                            max_states as u64 + 1,
                            Some(&rule.name),
                        )
                        .into()
                    }
                    build::BuildError::Timeout => {
                        deadline.error(deadline.budget().unwrap_or_default()).into()
                    }
                    build::BuildError::Memory(used) => LimitExceeded::new(
                        Limit::MemoryBytes,
                        limits.max_memory_bytes,
                        used,
                        Some(&rule.name),
                    )
                    .into(),
                }),
            };
            // A fresh build is minimized before it is kept, so a hit is minimized too.
            let dfa = if fresh {
                minimize::minimize(built?)
            } else {
                built?
            };
            if let (true, Some(c), Some(k)) = (fresh, cache, key) {
                c.insert(k, &dfa);
            }
            if fresh && is_stub(ri) && stub_dfa.is_none() {
                stub_dfa = Some((body.clone(), dfa.clone()));
            }
            let total = a.nodes.len() + if is_counted { 0 } else { dfa.len() };
            if total > limits.max_automaton_nodes {
                return Err(LimitExceeded::new(
                    Limit::AutomatonNodes,
                    limits.max_automaton_nodes as u64,
                    total as u64,
                    Some(&rule.name),
                )
                .into());
            }
            if let (Expr::Repeat { min, max, .. }, true) = (&rule.body, is_counted) {
                a.rule_start.push(u32::MAX); // set below, once real nodes are numbered
                pending.push((ri as u32, dfa, *min, *max));
                continue;
            }
            let base = a.nodes.len() as u32;
            a.rule_start.push(base);
            for st in &dfa.states {
                let b0 = a.byte_edges.len() as u32;
                a.byte_edges
                    .extend(dfa.bytes_of(st).iter().map(|e| ByteEdge {
                        target: e.target + base,
                        ..*e
                    }));
                let c0 = a.call_edges.len() as u32;
                a.call_edges
                    .extend(dfa.calls_of(st).iter().map(|e| CallEdge {
                        target: e.target + base,
                        ..*e
                    }));
                let t0 = a.token_edges.len() as u32;
                a.token_edges
                    .extend(dfa.tokens_of(st).iter().map(|e| TokenEdge {
                        target: e.target + base,
                        ..*e
                    }));
                a.nodes.push(Node {
                    rule: ri as u32,
                    is_final: st.is_final,
                    bytes: (b0, a.byte_edges.len() as u32),
                    calls: (c0, a.call_edges.len() as u32),
                    tokens: (t0, a.token_edges.len() as u32),
                });
            }
        }
        // Virtual node ids of counted rules follow the real nodes.
        let mut next = a.nodes.len() as u64;
        for (rule, dfa, min, max) in pending {
            let states = dfa.len() as u32;
            let span = virtual_span(min, max, states);
            if next + span >= u32::MAX as u64 / 2 {
                return Err(AutomatonError::TooManyStates {
                    rule: a.rule_names[rule as usize].clone(),
                    limit: (u32::MAX / 2) as usize,
                });
            }
            let mut edges = Vec::new();
            let mut body_edges = Vec::with_capacity(dfa.len());
            let mut body_final = Vec::with_capacity(dfa.len());
            for st in &dfa.states {
                let e0 = edges.len() as u32;
                edges.extend_from_slice(dfa.bytes_of(st));
                body_edges.push((e0, edges.len() as u32));
                body_final.push(st.is_final);
            }
            let c = Counted {
                rule,
                first: next as u32,
                states,
                min,
                max,
                body_final,
                body_edges,
                edges,
            };
            a.rule_start[rule as usize] = c.id(0, states);
            a.counted.push(c);
            next += span;
        }
        a.deterministic = a.nodes.iter().all(|n| {
            let e = &a.byte_edges[n.bytes.0 as usize..n.bytes.1 as usize];
            e.windows(2).all(|w| w[0].hi < w[1].lo)
        });
        let end = a.compute_nullable();
        a.compute_follow(&end);
        Ok(a)
    }

    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        let counted: usize = self
            .counted
            .iter()
            .map(|c| {
                c.edges.capacity() * 8 + c.body_edges.capacity() * 8 + c.body_final.capacity() + 64
            })
            .sum();
        counted
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.byte_edges.capacity() * 8
            + self.call_edges.capacity() * 8
            + self.token_edges.capacity() * 8
            + self.rule_start.capacity() * 4
            + self.nullable.capacity()
            + self.follow.capacity() * 32
            + self
                .rule_names
                .iter()
                .map(|n| n.capacity() + 24)
                .sum::<usize>()
            + self.key_filters.as_deref().map_or(0, |f| f.memory_bytes())
    }

    /// Removes every edge into a dead end: a node from which its rule can never complete,
    /// or a call of a rule that can never complete. Masks then never allow a token after
    /// which no completion exists. Returns false when the root itself can never complete.
    /// Sets [`Automaton::had_dead_ends`] when it removed an edge.
    ///
    /// `only`: the rules to examine (`only[r]`, and every rule past its end); the others
    /// are taken as productive, every node of them with every edge. That holds for the
    /// rules a deferring compile's build shares with a stub grammar whose pruning removed
    /// nothing, once the rules built are productive: when one of them is not, the whole
    /// automaton is examined after all. Examining a few rules costs in proportion to them.
    pub(crate) fn prune_unproductive(&mut self, only: Option<&[bool]>) -> bool {
        if let Some(only) = only {
            let examined = |r: usize| only.get(r).copied().unwrap_or(true);
            let (node_ok, rule_ok, counted_ok) = self.productive(&examined);
            let root_ok = rule_ok[self.root as usize];
            if root_ok && !self.has_dead_edges(&examined, &node_ok, &rule_ok, &counted_ok) {
                self.had_dead_ends = false;
                return true;
            }
        }
        let (node_ok, rule_ok, counted_ok) = self.productive(&|_| true);
        let dead = self.has_dead_edges(&|_| true, &node_ok, &rule_ok, &counted_ok);
        self.had_dead_ends = dead;
        if dead {
            self.remove_dead_edges(&node_ok, &rule_ok, &counted_ok);
        }
        rule_ok[self.root as usize]
    }

    /// True when an edge of a node of a rule `examined` accepts leads into a dead end (a
    /// node or counted body state that cannot complete, or a call of a rule that cannot),
    /// or a call from another rule's node calls an examined rule that cannot complete.
    /// Rules nothing calls (built inline into their callers) may be dead: no edge leads
    /// into them.
    fn has_dead_edges(
        &self,
        examined: &dyn Fn(usize) -> bool,
        node_ok: &[bool],
        rule_ok: &[bool],
        counted_ok: &[Vec<bool>],
    ) -> bool {
        let dead_call = |e: &CallEdge| !rule_ok[e.rule as usize] || !node_ok[e.target as usize];
        let dead_node = (0..self.nodes.len() as u32).any(|n| {
            if examined(self.nodes[n as usize].rule as usize) {
                self.bytes_of(n).iter().any(|e| !node_ok[e.target as usize])
                    || self
                        .tokens_of(n)
                        .iter()
                        .any(|e| !node_ok[e.target as usize])
                    || self.calls_of(n).iter().any(dead_call)
            } else {
                self.calls_of(n)
                    .iter()
                    .any(|e| examined(e.rule as usize) && dead_call(e))
            }
        });
        dead_node
            || self.counted.iter().zip(counted_ok).any(|(c, ok)| {
                examined(c.rule as usize) && c.edges.iter().any(|e| !ok[e.target as usize])
            })
    }

    /// Per real node, per rule and per counted rule's body state: whether it can complete
    /// (backwards from the final nodes, linear in nodes and edges), examining the nodes of
    /// the rules `examined` accepts and taking the others as productive.
    #[allow(clippy::type_complexity)]
    fn productive(
        &self,
        examined: &dyn Fn(usize) -> bool,
    ) -> (Vec<bool>, Vec<bool>, Vec<Vec<bool>>) {
        let rules = self.rule_start.len();
        let mut rule_ok: Vec<bool> = (0..rules).map(|r| !examined(r)).collect();
        let mut counted_ok: Vec<Vec<bool>> = Vec::with_capacity(self.counted.len());
        for c in &self.counted {
            if !examined(c.rule as usize) {
                counted_ok.push(vec![true; c.states as usize]);
                continue;
            }
            let ok = c.productive_states();
            rule_ok[c.rule as usize] = c.min == 0 || ok.first().copied().unwrap_or(false);
            counted_ok.push(ok);
        }
        // Productive nodes, backwards from the final ones: a node is productive through a
        // byte or token edge to a productive node, or through a call edge whose rule is
        // productive and whose return node is.
        let n_nodes = self.nodes.len();
        let examined_node: Vec<bool> = self
            .nodes
            .iter()
            .map(|n| examined(n.rule as usize))
            .collect();
        let mut node_ok: Vec<bool> = self
            .nodes
            .iter()
            .zip(&examined_node)
            .map(|(n, &x)| n.is_final || !x)
            .collect();
        // Reverse edges of the examined nodes in CSR form: (predecessor, rule of a call
        // edge or NO_RULE).
        const NO_RULE: u32 = u32::MAX;
        let mut first = vec![0u32; n_nodes + 1];
        for n in (0..n_nodes as u32).filter(|&n| examined_node[n as usize]) {
            for e in self.bytes_of(n) {
                first[e.target as usize + 1] += 1;
            }
            for e in self.tokens_of(n) {
                first[e.target as usize + 1] += 1;
            }
            for e in self.calls_of(n) {
                first[e.target as usize + 1] += 1;
            }
        }
        for i in 0..n_nodes {
            first[i + 1] += first[i];
        }
        let mut fill = first.clone();
        let mut rev = vec![(0u32, NO_RULE); first[n_nodes] as usize];
        let mut waiting: Vec<Vec<(u32, u32)>> = vec![Vec::new(); rules];
        for n in (0..n_nodes as u32).filter(|&n| examined_node[n as usize]) {
            let mut put = |target: u32, rule: u32| {
                let slot = &mut fill[target as usize];
                rev[*slot as usize] = (n, rule);
                *slot += 1;
            };
            for e in self.bytes_of(n) {
                put(e.target, NO_RULE);
            }
            for e in self.tokens_of(n) {
                put(e.target, NO_RULE);
            }
            for e in self.calls_of(n) {
                put(e.target, e.rule);
                waiting[e.rule as usize].push((n, e.target));
            }
        }
        // The examined rules each real node starts.
        let mut starts: rustc_hash::FxHashMap<u32, Vec<u32>> = Default::default();
        for (r, &s) in self.rule_start.iter().enumerate() {
            if !self.is_virtual(s) && examined(r) {
                starts.entry(s).or_default().push(r as u32);
            }
        }
        let mut stack: Vec<u32> = (0..n_nodes as u32)
            .filter(|&n| examined_node[n as usize] && node_ok[n as usize])
            .collect();
        // Rules productive already (counted ones, and those not examined): their waiting
        // callers may be too.
        let mut rule_stack: Vec<u32> = (0..rules as u32).filter(|&r| rule_ok[r as usize]).collect();
        loop {
            if let Some(r) = rule_stack.pop() {
                for &(p, t) in &waiting[r as usize] {
                    if node_ok[t as usize] && !node_ok[p as usize] {
                        node_ok[p as usize] = true;
                        stack.push(p);
                    }
                }
                continue;
            }
            let Some(n) = stack.pop() else { break };
            if let Some(rs) = starts.get(&n) {
                for &r in rs {
                    if !rule_ok[r as usize] {
                        rule_ok[r as usize] = true;
                        rule_stack.push(r);
                    }
                }
            }
            for &(p, r) in &rev[first[n as usize] as usize..first[n as usize + 1] as usize] {
                if !node_ok[p as usize] && (r == NO_RULE || rule_ok[r as usize]) {
                    node_ok[p as usize] = true;
                    stack.push(p);
                }
            }
        }
        (node_ok, rule_ok, counted_ok)
    }

    /// Rebuilds the flat edge arrays without the edges into dead ends.
    fn remove_dead_edges(&mut self, node_ok: &[bool], rule_ok: &[bool], counted_ok: &[Vec<bool>]) {
        let (mut bytes, mut calls, mut tokens) = (Vec::new(), Vec::new(), Vec::new());
        for n in 0..self.nodes.len() {
            let n32 = n as u32;
            let b0 = bytes.len() as u32;
            bytes.extend(
                self.bytes_of(n32)
                    .iter()
                    .filter(|e| node_ok[e.target as usize]),
            );
            let c0 = calls.len() as u32;
            calls.extend(
                self.calls_of(n32)
                    .iter()
                    .filter(|e| rule_ok[e.rule as usize] && node_ok[e.target as usize]),
            );
            let t0 = tokens.len() as u32;
            tokens.extend(
                self.tokens_of(n32)
                    .iter()
                    .filter(|e| node_ok[e.target as usize]),
            );
            let node = &mut self.nodes[n];
            node.bytes = (b0, bytes.len() as u32);
            node.calls = (c0, calls.len() as u32);
            node.tokens = (t0, tokens.len() as u32);
        }
        self.byte_edges = bytes;
        self.call_edges = calls;
        self.token_edges = tokens;
        for (c, ok) in self.counted.iter_mut().zip(counted_ok) {
            let mut edges = Vec::with_capacity(c.edges.len());
            for st in 0..c.states as usize {
                let (a, b) = c.body_edges[st];
                let e0 = edges.len() as u32;
                edges.extend(
                    c.edges[a as usize..b as usize]
                        .iter()
                        .filter(|e| ok[e.target as usize]),
                );
                c.body_edges[st] = (e0, edges.len() as u32);
            }
            c.edges = edges;
        }
    }

    /// True for the virtual nodes of counted rules.
    #[inline]
    pub(crate) fn is_virtual(&self, n: u32) -> bool {
        n as usize >= self.nodes.len()
    }

    /// The counted rule a virtual node belongs to, with its (count, state).
    #[inline]
    pub(crate) fn locate(&self, n: u32) -> (&Counted, u32, u32) {
        let k = self.counted.partition_point(|c| c.first <= n) - 1;
        let c = &self.counted[k];
        let (count, s) = c.split(n);
        (c, count, s)
    }

    /// The rule node `n` belongs to.
    #[inline]
    pub(crate) fn rule_of(&self, n: u32) -> u32 {
        match self.nodes.get(n as usize) {
            Some(node) => node.rule,
            None => self.locate(n).0.rule,
        }
    }

    /// True when the rule may end at node `n`.
    #[inline]
    pub(crate) fn is_final(&self, n: u32) -> bool {
        match self.nodes.get(n as usize) {
            Some(node) => node.is_final,
            None => {
                let (c, count, s) = self.locate(n);
                c.is_final(count, s)
            }
        }
    }

    /// The one node a real node `n` reaches on byte `b`, when there is exactly one (`None`
    /// for virtual nodes, no edge, or several edges on `b`).
    #[inline]
    pub(crate) fn dfa_step(&self, n: u32, b: u8) -> Option<u32> {
        let node = self.nodes.get(n as usize)?;
        let edges = &self.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize];
        // Edges are sorted by `lo`: the last edge starting at or below `b`.
        let i = edges.partition_point(|e| e.lo <= b);
        if i == 0 || edges[i - 1].hi < b {
            return None;
        }
        // An NFA state may have another edge on `b` before it.
        if !self.deterministic && edges[..i - 1].iter().any(|e| e.hi >= b) {
            return None;
        }
        Some(edges[i - 1].target)
    }

    /// Calls `f` with each node reached from `n` on byte `b` (at most one for a real node,
    /// at most two for a virtual one: go on in the iteration, or start the next).
    #[inline]
    pub(crate) fn for_each_byte_target(&self, n: u32, b: u8, mut f: impl FnMut(u32)) {
        // Edges are sorted by `lo`; an NFA state (see `build_automaton`) may have several
        // edges on one byte, a DFA state at most one.
        if let Some(node) = self.nodes.get(n as usize) {
            let (s, e) = node.bytes;
            for edge in &self.byte_edges[s as usize..e as usize] {
                if edge.lo > b {
                    break;
                }
                if b <= edge.hi {
                    f(edge.target);
                }
            }
            return;
        }
        let (c, count, s) = self.locate(n);
        for edge in c.edges_of(s) {
            if edge.lo > b {
                break;
            }
            if b <= edge.hi {
                f(c.id(count, edge.target));
            }
        }
        if s != c.states && c.body_final[s as usize] {
            if let Some(next) = c.next_count(count) {
                for edge in c.edges_of(0) {
                    if edge.lo > b {
                        break;
                    }
                    if b <= edge.hi {
                        f(c.id(next, edge.target));
                    }
                }
            }
        }
    }

    /// Calls `f(lo, hi)` for each byte range leaving node `n`.
    pub(crate) fn for_each_byte_range(&self, n: u32, mut f: impl FnMut(u8, u8)) {
        if !self.is_virtual(n) {
            for e in self.bytes_of(n) {
                f(e.lo, e.hi);
            }
            return;
        }
        let (c, count, s) = self.locate(n);
        for e in c.edges_of(s) {
            f(e.lo, e.hi);
        }
        if s != c.states && c.body_final[s as usize] && c.next_count(count).is_some() {
            for e in c.edges_of(0) {
                f(e.lo, e.hi);
            }
        }
    }

    /// [`Self::has_edges`] of every real node, in order: read from the nodes' edge bounds
    /// in one pass (a build of a tag of hundreds of tools asks it of thousands of nodes).
    pub(crate) fn real_nodes_with_edges(&self) -> Vec<bool> {
        self.nodes
            .iter()
            .map(|node| node.bytes.0 != node.bytes.1 || node.calls.0 != node.calls.1)
            .collect()
    }

    /// True when node `n` has byte or call edges (so it has a token mask).
    pub(crate) fn has_edges(&self, n: u32) -> bool {
        let mut any = false;
        self.for_each_byte_range(n, |_, _| any = true);
        any || !self.calls_of(n).is_empty()
    }

    /// Byte edges of a real node (none for a virtual one: see
    /// [`Automaton::for_each_byte_target`]).
    pub(crate) fn bytes_of(&self, n: u32) -> &[ByteEdge] {
        match self.nodes.get(n as usize) {
            Some(node) => &self.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize],
            None => &[],
        }
    }

    /// Call edges of node `n` (virtual nodes have none).
    #[inline]
    pub(crate) fn calls_of(&self, n: u32) -> &[CallEdge] {
        match self.nodes.get(n as usize) {
            Some(node) => &self.call_edges[node.calls.0 as usize..node.calls.1 as usize],
            None => &[],
        }
    }

    /// Token edges of node `n` (virtual nodes have none).
    #[inline]
    pub(crate) fn tokens_of(&self, n: u32) -> &[TokenEdge] {
        match self.nodes.get(n as usize) {
            Some(node) => &self.token_edges[node.tokens.0 as usize..node.tokens.1 as usize],
            None => &[],
        }
    }

    /// Number of nodes over all rules.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Every index in range, for automata read from bytes (`compiler::serialize`): rules,
    /// edge ranges, edge targets and rule starts, counted rules and their virtual node
    /// ranges. The first problem found.
    pub(crate) fn check_indices(&self) -> Result<(), String> {
        let rules = self.rule_start.len();
        let n = self.nodes.len();
        if self.rule_names.len() != rules
            || self.nullable.len() != rules
            || self.follow.len() != rules
            || self.root as usize >= rules
        {
            return Err(format!("per-rule tables do not match {rules} rules"));
        }
        let range = |(a, b): (u32, u32), len: usize| a <= b && b as usize <= len;
        for (i, node) in self.nodes.iter().enumerate() {
            if node.rule as usize >= rules
                || !range(node.bytes, self.byte_edges.len())
                || !range(node.calls, self.call_edges.len())
                || !range(node.tokens, self.token_edges.len())
            {
                return Err(format!("node {i}: rule or edge range out of bounds"));
            }
            let edges = &self.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize];
            if !edges.windows(2).all(|w| w[0].lo <= w[1].lo) || edges.iter().any(|e| e.lo > e.hi) {
                return Err(format!("node {i}: byte edges not sorted"));
            }
        }
        if self.byte_edges.iter().any(|e| e.target as usize >= n)
            || self
                .call_edges
                .iter()
                .any(|e| e.target as usize >= n || e.rule as usize >= rules)
            || self.token_edges.iter().any(|e| e.target as usize >= n)
        {
            return Err("an edge leads out of the automaton".into());
        }
        // Virtual ids: counted rule k owns `first .. first + counts * (S + 1)`, as `build`
        // numbers them (counts: `max`, at least 1, or `min + 1` when unbounded).
        let mut next_free = n as u64;
        for (k, c) in self.counted.iter().enumerate() {
            let s = c.states as usize;
            let counts = match c.max {
                Some(m) => m.max(1) as u64,
                None => c.min as u64 + 1,
            };
            let span = counts * (c.states as u64 + 1);
            let end = c.first as u64 + span;
            if s == 0
                || (c.first as u64) < next_free
                || end > u32::MAX as u64
                || c.rule as usize >= rules
                || c.max.is_some_and(|m| m < c.min)
                || c.body_final.len() != s
                || c.body_edges.len() != s
                || c.body_edges
                    .iter()
                    .any(|&(a, b)| !range((a, b), c.edges.len()))
                || c.edges
                    .iter()
                    .any(|e| e.target as usize >= s || e.lo > e.hi)
            {
                return Err(format!("counted rule {k}: inconsistent"));
            }
            next_free = end;
        }
        for (r, &start) in self.rule_start.iter().enumerate() {
            let ok = (start as usize) < n
                || self
                    .counted
                    .iter()
                    .any(|c| c.rule as usize == r && start == c.first + c.states);
            if !ok {
                return Err(format!("rule {r}: start node {start} out of range"));
            }
        }
        Ok(())
    }
}

/// Adds the bytes `lo..=hi` to the 256-bit set `f`.
pub(crate) fn add_range(f: &mut [u64; 4], lo: u8, hi: u8) {
    for w in (lo >> 6)..=(hi >> 6) {
        let from = lo.max(w << 6) - (w << 6);
        let to = hi.min((w << 6) | 63) - (w << 6);
        f[w as usize] |= (u64::MAX >> (63 - to)) & (u64::MAX << from);
    }
}

/// How many virtual node ids a counted rule `body{min,max}` of a `states`-state body takes:
/// one run of `states + 1` per count it tells apart ([`Counted`]).
fn virtual_span(min: u32, max: Option<u32>, states: u32) -> u64 {
    let counts = match max {
        Some(m) => m.max(1),
        None => min + 1,
    };
    counts as u64 * (states as u64 + 1)
}

fn or_into(a: &mut [u64; 4], b: &[u64; 4]) {
    for i in 0..4 {
        a[i] |= b[i];
    }
}

/// True when byte `b` is in the 256-bit set `s`.
#[inline]
pub(crate) fn byte_in(s: &[u64; 4], b: u8) -> bool {
    s[(b >> 6) as usize] >> (b & 63) & 1 == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::ebnf::parse_ebnf;

    /// A byte range added word-wise sets exactly the bits a byte-by-byte loop sets.
    #[test]
    fn add_range_sets_exactly_the_range() {
        for lo in 0..=255u8 {
            for hi in lo..=255u8 {
                let mut by_byte = [0u64; 4];
                for b in lo..=hi {
                    by_byte[(b >> 6) as usize] |= 1 << (b & 63);
                }
                let mut f = [0u64; 4];
                add_range(&mut f, lo, hi);
                assert_eq!(f, by_byte, "{lo}..={hi}");
            }
        }
    }

    fn automaton(src: &str) -> Automaton {
        let g = parse_ebnf(src, "root").unwrap();
        let (limits, deadline) = (Limits::default(), Deadline::start(None));
        Automaton::build(&g, &[], &|_| 0, &limits, &deadline, None, &[]).unwrap()
    }

    fn edges(a: &Automaton) -> (Vec<ByteEdge>, Vec<CallEdge>) {
        (a.byte_edges.clone(), a.call_edges.clone())
    }

    /// Pruning only the rules given finds what a whole pruning finds: nothing to remove
    /// when they are productive, and when one of them can never complete, the whole
    /// automaton is examined (its callers' edges go too), as without `only`.
    #[test]
    fn pruning_only_some_rules_matches_the_whole_pruning() {
        let src = r#"root ::= "a" b | "c" d
                     b ::= "x" b | "y"
                     d ::= "z" d"#;
        let mut whole = automaton(src);
        assert!(whole.prune_unproductive(None));
        assert!(whole.had_dead_ends, "`d` never ends: the edges into it go");
        let rule = |a: &Automaton, name: &str| a.rule_names.iter().position(|n| n == name);
        let d = rule(&whole, "d").unwrap() as u32;
        assert!(whole.call_edges.iter().all(|e| e.rule != d));
        // `d` examined: found unproductive, so every rule is examined.
        let mut some = automaton(src);
        let only: Vec<bool> = some.rule_names.iter().map(|n| n == "d").collect();
        assert!(some.prune_unproductive(Some(&only)));
        assert!(some.had_dead_ends);
        assert_eq!(edges(&some), edges(&whole));
        // Productive rules examined alone: nothing removed, nothing else looked at.
        let ok = r#"root ::= "a" b | "c" e
                    b ::= "x" b | "y"
                    e ::= "z" e | "w""#;
        let mut whole = automaton(ok);
        assert!(whole.prune_unproductive(None));
        assert!(!whole.had_dead_ends);
        let mut some = automaton(ok);
        let only: Vec<bool> = some.rule_names.iter().map(|n| n == "e").collect();
        assert!(some.prune_unproductive(Some(&only)));
        assert!(!some.had_dead_ends);
        assert_eq!(edges(&some), edges(&whole));
    }

    /// The one-pass edge flags are `has_edges` node by node: nodes with byte edges, with
    /// calls only, with both, and final nodes with neither.
    #[test]
    fn real_nodes_with_edges_are_the_nodes_has_edges_names() {
        let a = automaton(
            r#"root ::= "a" b c | d
               b ::= "x" b | "y"
               c ::= b b
               d ::= "" | "q""#,
        );
        let flags = a.real_nodes_with_edges();
        assert_eq!(flags.len(), a.nodes.len());
        let want: Vec<bool> = (0..a.nodes.len() as u32).map(|n| a.has_edges(n)).collect();
        assert_eq!(flags, want);
        assert!(flags.contains(&true) && flags.contains(&false));
        let call_only = (0..a.nodes.len() as u32)
            .any(|n| a.bytes_of(n).is_empty() && !a.calls_of(n).is_empty());
        assert!(call_only, "a node with calls alone");
    }
}
