//! Rule automata built once per compiler, found again by content (issue 24: "the JSON
//! string, number and key machinery is shared across every grammar of a compiler").
//!
//! Front ends write the same rules in grammar after grammar: a JSON string body, a number,
//! the rest of an undeclared key after a given set of first characters, whitespace, a tool's
//! arguments. Each rule's DFA (`build::build_automaton`: Thompson NFA, then subset
//! construction) is the larger part of a compile. A rule's DFA depends only on its body, on
//! the bodies of the rules built inline into it (tail calls into its right-linear
//! component, see [`super::regular`]), on the token ids of its token terminals and on the
//! build's limits; the rule ids it names matter only through which of them are equal and
//! how they sort (call edges are ordered by callee id). So the key is the body written out
//! with the rule ids renamed in order of first appearance (the rule itself first), then the
//! order of the original ids, then the limits; the value is the DFA with its call edges
//! naming the renamed ids. A hit maps them back, and the result is the DFA the build would
//! have made, edge for edge.

use super::build::{Dfa, MAX_EXPR_DEPTH};
use super::regular::TailPlan;
use crate::grammar::{Expr, TokenRef};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex};

/// Figures of a compiler's cache of rule automata
/// ([`crate::GrammarCompiler::rule_automaton_cache_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleAutomatonCacheStats {
    /// Rule automata held.
    pub entries: usize,
    /// Their bytes (keys and automata, about).
    pub size_bytes: usize,
    /// Rules whose automaton was taken from the cache.
    pub hits: u64,
    /// Rules whose automaton was built (and kept, while the cache has room).
    pub builds: u64,
}

/// One cached automaton: its DFA, call edges naming renamed rule ids.
#[derive(Debug)]
struct Entry {
    dfa: Dfa,
}

#[derive(Debug, Default)]
struct State {
    map: FxHashMap<Box<[u32]>, Arc<Entry>>,
    bytes: usize,
    hits: u64,
    builds: u64,
}

/// The cache, shared by a compiler and its clones. Bounded in bytes: past its limit it is
/// emptied and refilled by the compiles that follow (the rules that recur come back first).
#[derive(Debug)]
pub(crate) struct RuleAutomatonCache {
    limit: usize,
    state: Mutex<State>,
}

/// A rule's key and the renaming it was written with (renamed id → rule id).
pub(crate) struct RuleKey {
    key: Box<[u32]>,
    rules: Vec<u32>,
}

impl RuleAutomatonCache {
    /// An empty cache holding at most about `limit` bytes (0: nothing is kept).
    pub(crate) fn new(limit: usize) -> Self {
        RuleAutomatonCache {
            limit,
            state: Mutex::new(State::default()),
        }
    }

    /// True when the cache keeps automata (its capacity is not zero).
    pub(crate) fn is_on(&self) -> bool {
        self.limit > 0
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The key of rule `rule` whose body (as built: a counted rule's repeated body) is
    /// `body`, or `None` when the cache keeps nothing or the body nests deeper than the
    /// builder allows (the build then reports it). `limits` are the build's own
    /// (`max_states`, `max_bytes`): they decide between a DFA and the ε-free NFA.
    pub(crate) fn key(
        &self,
        body: &Expr,
        rule: u32,
        plan: &TailPlan<'_>,
        token: &dyn Fn(&TokenRef) -> u32,
        limits: (usize, u64),
    ) -> Option<RuleKey> {
        if self.limit == 0 {
            return None;
        }
        let mut w = KeyWriter {
            plan,
            token,
            out: Vec::with_capacity(64),
            renamed: FxHashMap::default(),
            rules: Vec::new(),
            inline: Vec::new(),
        };
        w.rename(rule);
        w.expr(body, 0)?;
        // The bodies built inline (jump targets), each once, in order of renaming.
        let mut i = 0;
        while i < w.inline.len() {
            let r = w.inline[i];
            i += 1;
            if r == 0 {
                // A jump back to the rule itself enters its start: no second copy.
                continue;
            }
            w.out.push(u32::MAX);
            w.out.push(r);
            w.expr(plan.bodies[w.rules[r as usize] as usize], 0)?;
        }
        // How the original ids sort (call edges are ordered by callee id).
        let mut order: Vec<u32> = (0..w.rules.len() as u32).collect();
        order.sort_unstable_by_key(|&r| w.rules[r as usize]);
        w.out.push(u32::MAX);
        w.out.extend(order);
        w.out.push(limits.0.min(u32::MAX as usize) as u32);
        w.out.push((limits.1 >> 32) as u32);
        w.out.push(limits.1 as u32);
        Some(RuleKey {
            key: w.out.into_boxed_slice(),
            rules: w.rules,
        })
    }

    /// The automaton cached under `key`, its call edges naming the grammar's rule ids.
    pub(crate) fn get(&self, key: &RuleKey) -> Option<Dfa> {
        let entry = {
            let mut st = self.state();
            let e = st.map.get(&key.key)?.clone();
            st.hits += 1;
            e
        };
        let mut dfa = entry.dfa.clone();
        for c in &mut dfa.calls {
            c.rule = key.rules[c.rule as usize];
        }
        Some(dfa)
    }

    /// Keeps `dfa`, just built for `key` (counted as a build either way).
    pub(crate) fn insert(&self, key: RuleKey, dfa: &Dfa) {
        let mut renamed: FxHashMap<u32, u32> = FxHashMap::default();
        for (i, &r) in key.rules.iter().enumerate() {
            renamed.insert(r, i as u32);
        }
        let mut kept = dfa.clone();
        for c in &mut kept.calls {
            // Every callee is named in the body, so it has a renamed id.
            c.rule = renamed[&c.rule];
        }
        let bytes = key.key.len() * 4 + kept.memory_bytes() + 64;
        let mut st = self.state();
        st.builds += 1;
        if bytes > self.limit {
            return;
        }
        if st.bytes + bytes > self.limit {
            st.map.clear();
            st.bytes = 0;
        }
        if st
            .map
            .insert(key.key, Arc::new(Entry { dfa: kept }))
            .is_none()
        {
            st.bytes += bytes;
        }
    }

    /// Entries, bytes, hits and builds.
    pub(crate) fn stats(&self) -> RuleAutomatonCacheStats {
        let st = self.state();
        RuleAutomatonCacheStats {
            entries: st.map.len(),
            size_bytes: st.bytes,
            hits: st.hits,
            builds: st.builds,
        }
    }

    /// Bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.state().bytes
    }

    /// Drops every entry (the counts stay).
    pub(crate) fn clear(&self) {
        let mut st = self.state();
        st.map.clear();
        st.bytes = 0;
    }
}

/// Writes a body out as `u32`s, renaming rule ids in order of first appearance.
struct KeyWriter<'a, 'p> {
    plan: &'a TailPlan<'p>,
    token: &'a dyn Fn(&TokenRef) -> u32,
    out: Vec<u32>,
    /// Rule id → renamed id.
    renamed: FxHashMap<u32, u32>,
    /// Renamed id → rule id.
    rules: Vec<u32>,
    /// Renamed ids of jump targets, in order of first jump (repeats allowed).
    inline: Vec<u32>,
}

impl KeyWriter<'_, '_> {
    fn rename(&mut self, rule: u32) -> u32 {
        let next = self.rules.len() as u32;
        let r = *self.renamed.entry(rule).or_insert(next);
        if r == next {
            self.rules.push(rule);
        }
        r
    }

    /// `None` past the builder's depth limit (as `Nfa::add` counts it).
    fn expr(&mut self, e: &Expr, depth: usize) -> Option<()> {
        if depth > MAX_EXPR_DEPTH {
            return None;
        }
        match e {
            Expr::Empty => self.out.push(0),
            Expr::Bytes(b) => {
                self.out.push(1);
                self.out.push(b.len() as u32);
                self.out.extend(b.iter().map(|&x| x as u32));
            }
            Expr::Class(c) => {
                self.out.push(2);
                self.out.push(c.negated as u32);
                self.out.push(c.ranges.len() as u32);
                for &(lo, hi) in &c.ranges {
                    self.out.push(lo);
                    self.out.push(hi);
                }
            }
            Expr::Seq(v) | Expr::Choice(v) => {
                self.out.push(if matches!(e, Expr::Seq(_)) { 3 } else { 4 });
                self.out.push(v.len() as u32);
                for x in v {
                    self.expr(x, depth + 1)?;
                }
            }
            Expr::Repeat { expr, min, max } => {
                self.out.push(5);
                self.out.push(*min);
                match max {
                    Some(m) => {
                        self.out.push(1);
                        self.out.push(*m);
                    }
                    None => self.out.push(0),
                }
                self.expr(expr, depth + 1)?;
            }
            Expr::Rule(r) => {
                let jump = self.plan.is_tail_call(e);
                let renamed = self.rename(r.0);
                if jump && !self.inline.contains(&renamed) {
                    self.inline.push(renamed);
                }
                self.out.push(if jump { 6 } else { 7 });
                self.out.push(renamed);
            }
            Expr::Token(t) => {
                self.out.push(8);
                self.out.push((self.token)(t));
            }
        }
        Some(())
    }
}
