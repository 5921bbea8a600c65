//! Byte-level rule automata: every rule of a [`Grammar`] becomes a DFA whose edges are byte
//! ranges, calls of other rules and special-token terminals.
//!
//! The parser (`crate::parser`) runs these automata as an Earley recogniser: an item is a
//! node of one rule's automaton plus the input position where that rule started. Because
//! calls stay edges, left recursion, ambiguity and nullable rules need no rewriting.
//! Node ids are global across rules ([`NodeId`]); `rule_start[r]` is rule `r`'s start node.

mod build;
pub(crate) mod lower;

use crate::grammar::{Grammar, TokenRef};

/// Index of a node in [`Automaton::nodes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// An edge on one byte range `lo..=hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ByteEdge {
    pub lo: u8,
    pub hi: u8,
    pub target: u32,
}

/// An edge that runs rule `rule` to its end, then continues at `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CallEdge {
    pub rule: u32,
    pub target: u32,
}

/// An edge on exactly one (special) token id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TokenEdge {
    pub token: u32,
    pub target: u32,
}

/// One automaton node. Edge lists index the automaton's flat edge arrays.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub rule: u32,
    pub is_final: bool,
    pub bytes: (u32, u32),
    pub calls: (u32, u32),
    pub tokens: (u32, u32),
}

/// Why a grammar could not become automata.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
    /// A rule's automaton would have too many states.
    #[error(
        "rule `{rule}` needs more than {limit} automaton states; simplify it or raise the limit"
    )]
    TooManyStates {
        /// The rule.
        rule: String,
        /// The limit.
        limit: usize,
    },
}

/// All rule automata of one grammar, with the facts the parser and the mask cache need.
#[derive(Clone, Debug)]
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
}

/// Most states one rule's DFA may have.
pub(crate) const MAX_RULE_STATES: usize = 100_000;

impl Automaton {
    /// Builds the automata of `grammar` (already validated and lowered). `token` maps each
    /// token terminal to its id.
    pub(crate) fn build(
        grammar: &Grammar,
        token: &dyn Fn(&TokenRef) -> u32,
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
        };
        for (ri, rule) in grammar.rules.iter().enumerate() {
            let dfa =
                build::build_dfa(&rule.body, token, MAX_RULE_STATES).map_err(|e| match e {
                    build::BuildError::TooDeep(depth) => AutomatonError::TooDeep {
                        rule: rule.name.clone(),
                        depth,
                        limit: build::MAX_EXPR_DEPTH,
                    },
                    build::BuildError::TooManyStates => AutomatonError::TooManyStates {
                        rule: rule.name.clone(),
                        limit: MAX_RULE_STATES,
                    },
                })?;
            let base = a.nodes.len() as u32;
            a.rule_start.push(base);
            for st in dfa {
                let b0 = a.byte_edges.len() as u32;
                a.byte_edges.extend(st.bytes.iter().map(|e| ByteEdge {
                    target: e.target + base,
                    ..*e
                }));
                let c0 = a.call_edges.len() as u32;
                a.call_edges.extend(st.calls.iter().map(|e| CallEdge {
                    target: e.target + base,
                    ..*e
                }));
                let t0 = a.token_edges.len() as u32;
                a.token_edges.extend(st.tokens.iter().map(|e| TokenEdge {
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
        a.compute_nullable();
        a.compute_follow();
        Ok(a)
    }

    pub(crate) fn bytes_of(&self, n: u32) -> &[ByteEdge] {
        let (s, e) = self.nodes[n as usize].bytes;
        &self.byte_edges[s as usize..e as usize]
    }

    pub(crate) fn calls_of(&self, n: u32) -> &[CallEdge] {
        let (s, e) = self.nodes[n as usize].calls;
        &self.call_edges[s as usize..e as usize]
    }

    pub(crate) fn tokens_of(&self, n: u32) -> &[TokenEdge] {
        let (s, e) = self.nodes[n as usize].tokens;
        &self.token_edges[s as usize..e as usize]
    }

    /// Number of nodes over all rules.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// `end[n]`: from node `n` the rule can reach its end through nullable calls only.
    fn nullable_to_end(&self) -> Vec<bool> {
        let mut end: Vec<bool> = self.nodes.iter().map(|n| n.is_final).collect();
        loop {
            let mut changed = false;
            for n in 0..self.nodes.len() {
                if end[n] {
                    continue;
                }
                if self
                    .calls_of(n as u32)
                    .iter()
                    .any(|c| self.nullable[c.rule as usize] && end[c.target as usize])
                {
                    end[n] = true;
                    changed = true;
                }
            }
            if !changed {
                return end;
            }
        }
    }

    fn compute_nullable(&mut self) {
        loop {
            let end = self.nullable_to_end();
            let mut changed = false;
            for r in 0..self.rule_start.len() {
                if !self.nullable[r] && end[self.rule_start[r] as usize] {
                    self.nullable[r] = true;
                    changed = true;
                }
            }
            if !changed {
                return;
            }
        }
    }

    fn compute_follow(&mut self) {
        let end = self.nullable_to_end();
        // first[n]: bytes that can come first from node n (through calls and nullable calls).
        let mut first: Vec<[u64; 4]> = vec![[0; 4]; self.nodes.len()];
        for (n, f) in first.iter_mut().enumerate() {
            for e in self.bytes_of(n as u32) {
                for b in e.lo..=e.hi {
                    f[(b >> 6) as usize] |= 1 << (b & 63);
                }
            }
        }
        loop {
            let mut changed = false;
            for n in 0..self.nodes.len() {
                let mut acc = first[n];
                for c in self.calls_of(n as u32) {
                    let s = self.rule_start[c.rule as usize] as usize;
                    or_into(&mut acc, &first[s]);
                    if self.nullable[c.rule as usize] {
                        or_into(&mut acc, &first[c.target as usize]);
                    }
                }
                if acc != first[n] {
                    first[n] = acc;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        loop {
            let mut changed = false;
            for n in 0..self.nodes.len() {
                let caller = self.nodes[n].rule as usize;
                let (cs, ce) = self.nodes[n].calls;
                for ci in cs..ce {
                    let c = self.call_edges[ci as usize];
                    let mut acc = self.follow[c.rule as usize];
                    or_into(&mut acc, &first[c.target as usize]);
                    if end[c.target as usize] {
                        let fc = self.follow[caller];
                        or_into(&mut acc, &fc);
                    }
                    if acc != self.follow[c.rule as usize] {
                        self.follow[c.rule as usize] = acc;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
    }
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
