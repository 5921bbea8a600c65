//! Rule bodies → Thompson NFAs over byte ranges, rule calls and token terminals → DFAs by
//! subset construction. One automaton per rule; calls stay edges (the parser runs them with
//! a stack), so the automata stay small whatever the grammar's recursion.

use super::regular::TailPlan;
use super::{ByteEdge, CallEdge, TokenEdge};
use crate::grammar::Expr;
use crate::limits::Deadline;
use regex_syntax::utf8::Utf8Sequences;
use rustc_hash::FxHashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Label {
    Eps,
    Bytes(u8, u8),
    Call(u32),
    Token(u32),
}

/// A Thompson NFA for one rule.
#[derive(Default)]
pub(crate) struct Nfa<'p> {
    edges: Vec<Vec<(Label, u32)>>,
    /// Tail calls into the rule's own right-linear component become jumps (see
    /// [`super::regular`]).
    plan: Option<&'p TailPlan<'p>>,
    /// Jumps met while adding: (from state, callee rule), resolved by `build_automaton`.
    jumps: Vec<(u32, u32)>,
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
        self.edges.push(Vec::new());
        (self.edges.len() - 1) as u32
    }

    fn edge(&mut self, from: u32, label: Label, to: u32) {
        self.edges[from as usize].push((label, to));
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
                for (lo, hi) in c.normalized() {
                    let (Some(lo), Some(hi)) = (char::from_u32(lo), char::from_u32(hi)) else {
                        continue;
                    };
                    for seq in Utf8Sequences::new(lo, hi) {
                        let ranges = seq.as_slice();
                        let mut s = entry;
                        for (i, r) in ranges.iter().enumerate() {
                            let t = if i + 1 == ranges.len() {
                                exit
                            } else {
                                self.state()
                            };
                            self.edge(s, Label::Bytes(r.start, r.end), t);
                            s = t;
                        }
                    }
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

    fn closure(&self, set: &mut Vec<u32>, seen: &mut [bool]) {
        let mut stack: Vec<u32> = set.clone();
        for &s in set.iter() {
            seen[s as usize] = true;
        }
        while let Some(s) = stack.pop() {
            for &(l, t) in &self.edges[s as usize] {
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
        set.sort_unstable();
        set.dedup();
    }
}

/// One DFA state of a rule, with edges to other states of the same rule (local indices).
pub(crate) struct DfaState {
    pub is_final: bool,
    pub bytes: Vec<ByteEdge>,
    pub calls: Vec<CallEdge>,
    pub tokens: Vec<TokenEdge>,
}

/// Builds the automaton of `body`; state 0 is the start state. A DFA by subset construction
/// when it stays within a few times the NFA's size; otherwise (patterns such as
/// `[a-z]{0,20} "y" [a-z]{0,20}`, whose DFA is exponential) the ε-free NFA, whose states may
/// have several edges on one byte: the Earley parser runs either.
///
/// `plan` and `rule` name the rule being built, so that tail calls into its right-linear
/// component are built inline (each callee's body once, entered by ε-edges).
pub(crate) fn build_automaton(
    body: &Expr,
    token: &dyn Fn(&crate::grammar::TokenRef) -> u32,
    max_states: usize,
    max_bytes: u64,
    deadline: &Deadline,
    plan: &TailPlan<'_>,
    rule: u32,
) -> Result<Vec<DfaState>, BuildError> {
    let mut nfa = Nfa {
        plan: Some(plan),
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
                if nfa.edges.len() > max_states {
                    return Err(BuildError::TooManyStates);
                }
                s
            }
        };
        nfa.edge(from, Label::Eps, to);
    }
    let budget = (nfa.edges.len() * 4 + 256).min(max_states);
    match subset_construction(&nfa, start, accept, budget, max_bytes, deadline) {
        Err(BuildError::Blowup | BuildError::Memory(_)) => {
            epsilon_free(&nfa, start, accept, max_states, max_bytes, deadline)
        }
        other => other,
    }
}

/// How many states the constructions build between two looks at the deadline.
const DEADLINE_EVERY: usize = 256;

/// The ε-free NFA: one state per NFA state entered by a non-ε edge (and the start), with
/// the non-ε edges of its ε-closure.
fn epsilon_free(
    nfa: &Nfa,
    start: u32,
    accept: u32,
    max_states: usize,
    max_bytes: u64,
    deadline: &Deadline,
) -> Result<Vec<DfaState>, BuildError> {
    let mut used = 0u64;
    let mut seen = vec![false; nfa.edges.len()];
    let mut id: FxHashMap<u32, u32> = FxHashMap::default();
    let mut order: Vec<u32> = vec![start];
    id.insert(start, 0);
    let mut out = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let q = order[i];
        i += 1;
        if i % DEADLINE_EVERY == 0 && deadline.expired() {
            return Err(BuildError::Timeout);
        }
        let mut closure = vec![q];
        nfa.closure(&mut closure, &mut seen);
        let mut st = DfaState {
            is_final: closure.binary_search(&accept).is_ok(),
            bytes: Vec::new(),
            calls: Vec::new(),
            tokens: Vec::new(),
        };
        for &p in &closure {
            for &(l, t) in &nfa.edges[p as usize] {
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
                    Label::Bytes(lo, hi) => st.bytes.push(ByteEdge { lo, hi, target }),
                    Label::Call(rule) => st.calls.push(CallEdge { rule, target }),
                    Label::Token(token) => st.tokens.push(TokenEdge { token, target }),
                    Label::Eps => {}
                }
            }
        }
        st.bytes.sort_unstable_by_key(|e| (e.lo, e.hi, e.target));
        st.bytes.dedup();
        st.calls.sort_unstable_by_key(|e| (e.rule, e.target));
        st.calls.dedup();
        st.tokens.sort_unstable_by_key(|e| (e.token, e.target));
        st.tokens.dedup();
        used += (st.bytes.len() + st.calls.len() + st.tokens.len()) as u64 * EDGE_BYTES;
        if used > max_bytes {
            return Err(BuildError::Memory(used));
        }
        out.push(st);
    }
    Ok(out)
}

fn subset_construction(
    nfa: &Nfa,
    start: u32,
    accept: u32,
    max_states: usize,
    max_bytes: u64,
    deadline: &Deadline,
) -> Result<Vec<DfaState>, BuildError> {
    let mut seen = vec![false; nfa.edges.len()];
    let mut used = 0u64;

    let mut start_set = vec![start];
    nfa.closure(&mut start_set, &mut seen);
    let mut ids: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
    let mut sets: Vec<Vec<u32>> = vec![start_set.clone()];
    ids.insert(start_set, 0);
    let mut out: Vec<DfaState> = Vec::new();
    let mut i = 0;
    while i < sets.len() {
        if i % DEADLINE_EVERY == DEADLINE_EVERY - 1 && deadline.expired() {
            return Err(BuildError::Timeout);
        }
        let set = sets[i].clone();
        let mut byte_ranges: Vec<(u8, u8, u32)> = Vec::new();
        let mut calls: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        let mut toks: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        for &s in &set {
            for &(l, t) in &nfa.edges[s as usize] {
                match l {
                    Label::Eps => {}
                    Label::Bytes(lo, hi) => byte_ranges.push((lo, hi, t)),
                    Label::Call(r) => calls.entry(r).or_default().push(t),
                    Label::Token(k) => toks.entry(k).or_default().push(t),
                }
            }
        }
        let mut intern = |mut targets: Vec<u32>,
                          sets: &mut Vec<Vec<u32>>,
                          ids: &mut FxHashMap<Vec<u32>, u32>|
         -> Result<u32, BuildError> {
            targets.sort_unstable();
            targets.dedup();
            nfa.closure(&mut targets, &mut seen);
            if let Some(&id) = ids.get(&targets) {
                return Ok(id);
            }
            if sets.len() >= max_states {
                return Err(BuildError::Blowup);
            }
            used += targets.len() as u64 * SET_ELEMENT_BYTES * 2;
            if used > max_bytes {
                return Err(BuildError::Memory(used));
            }
            let id = sets.len() as u32;
            ids.insert(targets.clone(), id);
            sets.push(targets);
            Ok(id)
        };
        // Split the byte ranges into elementary intervals with one target set each.
        let mut bounds: Vec<u16> = Vec::with_capacity(byte_ranges.len() * 2);
        for &(lo, hi, _) in &byte_ranges {
            bounds.push(lo as u16);
            bounds.push(hi as u16 + 1);
        }
        bounds.sort_unstable();
        bounds.dedup();
        let mut bytes: Vec<ByteEdge> = Vec::new();
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1] - 1);
            let targets: Vec<u32> = byte_ranges
                .iter()
                .filter(|&&(a, b, _)| a as u16 <= lo && hi <= b as u16)
                .map(|&(_, _, t)| t)
                .collect();
            if targets.is_empty() {
                continue;
            }
            let target = intern(targets, &mut sets, &mut ids)?;
            match bytes.last_mut() {
                Some(last) if last.target == target && last.hi as u16 + 1 == lo => {
                    last.hi = hi as u8
                }
                _ => bytes.push(ByteEdge {
                    lo: lo as u8,
                    hi: hi as u8,
                    target,
                }),
            }
        }
        let mut call_edges = Vec::new();
        let mut call_keys: Vec<u32> = calls.keys().copied().collect();
        call_keys.sort_unstable();
        for r in call_keys {
            let t = calls.remove(&r).unwrap_or_default();
            call_edges.push(CallEdge {
                rule: r,
                target: intern(t, &mut sets, &mut ids)?,
            });
        }
        let mut tok_edges = Vec::new();
        let mut tok_keys: Vec<u32> = toks.keys().copied().collect();
        tok_keys.sort_unstable();
        for k in tok_keys {
            let t = toks.remove(&k).unwrap_or_default();
            tok_edges.push(TokenEdge {
                token: k,
                target: intern(t, &mut sets, &mut ids)?,
            });
        }
        out.push(DfaState {
            is_final: set.binary_search(&accept).is_ok(),
            bytes,
            calls: call_edges,
            tokens: tok_edges,
        });
        i += 1;
    }
    Ok(out)
}
