//! An Earley recogniser over the byte-level rule automata.
//!
//! An item is `(node, origin)`: a node of some rule's automaton and the chart position where
//! that rule instance started. The chart holds one item set per consumed symbol (a byte or a
//! special token). Scanning advances items over a byte edge; prediction adds the start node
//! of each called rule; completion advances the callers waiting at the origin. Nullable rules
//! are handled by advancing over their call at prediction time (Aycock & Horspool), so
//! completion never needs to revisit the set being built. The item count per position is
//! bounded by `nodes × positions`, so no grammar (left-recursive, ambiguous, nested stars)
//! blows up exponentially.
//!
//! The *base item* has origin [`EXT`]: it stands for a rule instance that began outside the
//! chart (the root rule in a matcher, or the rule of a node whose mask is being precomputed).
//! When it reaches a final node, the chart records an *exit* at that position instead of
//! completing a caller.
//!
//! Push and pop are O(items of one set), so the mask computation can walk a token trie by
//! pushing a byte per edge and popping on the way back.

use crate::automaton::Automaton;
use rustc_hash::FxHashSet;

pub(crate) mod key_filter;

/// Origin of the base item.
pub(crate) const EXT: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Item {
    pub node: u32,
    pub origin: u32,
}

/// An Earley chart whose sets can be pushed and popped.
#[derive(Clone, Debug)]
pub(crate) struct Chart {
    pub items: Vec<Item>,
    /// Start index in `items` of each set; set `k` ends where set `k + 1` starts.
    pub starts: Vec<u32>,
    /// `exits[k]`: the base item is at a final node in set `k`.
    pub exits: Vec<bool>,
    /// `bytes[k]`: the byte read to make set `k` (0 for set 0, for a special token, and
    /// for the caller set of [`Chart::with_caller`]).
    pub bytes: Vec<u8>,
    /// Completions of the rules the automaton's [`key_filter::KeyFilters`] name are
    /// checked against the bytes they read (the matcher's chart; a mask walk's chart reads
    /// tokens from the middle of the output, so it cannot).
    pub filtering: bool,
    /// Dedupe of the set being built: linear scan while it is small, then a hash set.
    seen: FxHashSet<u64>,
    hashed: bool,
    building: usize,
    /// Work units (items added or looked at) spent since the last [`Chart::refuel`].
    work: u64,
    /// Work allowed before pushes fail with [`Chart::exhausted`] set.
    fuel: u64,
    /// A push stopped because `work` passed `fuel` (its set was dropped).
    exhausted: bool,
}

impl Chart {
    /// A chart with one empty set.
    fn empty() -> Self {
        Chart {
            items: Vec::with_capacity(64),
            starts: vec![0],
            exits: vec![false],
            bytes: vec![0],
            filtering: false,
            seen: FxHashSet::default(),
            hashed: false,
            building: 0,
            work: 0,
            fuel: u64::MAX,
            exhausted: false,
        }
    }

    /// Starts a new work budget of `fuel` units (items added to a set, callers looked at
    /// during completion) for the pushes that follow, and clears [`Chart::exhausted`].
    pub fn refuel(&mut self, fuel: u64) {
        self.work = 0;
        self.fuel = fuel;
        self.exhausted = false;
    }

    /// True when a push since the last [`Chart::refuel`] ran out of work budget: it
    /// returned false with nothing changed, whether or not the byte could be scanned.
    #[inline]
    pub fn exhausted(&self) -> bool {
        self.exhausted
    }

    /// Work units spent since the last [`Chart::refuel`].
    #[inline]
    pub fn work(&self) -> u64 {
        self.work
    }

    /// A chart whose set 0 is the closure of the base item at `node`.
    pub fn new(aut: &Automaton, node: u32) -> Self {
        let mut c = Chart::empty();
        c.begin_set(0);
        c.add(Item { node, origin: EXT });
        c.close(aut, 0);
        c
    }

    /// Makes this chart what [`Chart::new`] makes for `node`, keeping its allocations.
    pub fn reset(&mut self, aut: &Automaton, node: u32) {
        self.items.clear();
        self.starts.clear();
        self.starts.push(0);
        self.exits.clear();
        self.exits.push(false);
        self.bytes.clear();
        self.bytes.push(0);
        self.seen.clear();
        self.hashed = false;
        self.begin_set(0);
        self.add(Item { node, origin: EXT });
        self.close(aut, 0);
    }

    /// A chart for a node of a rule instance whose caller is known: set 0 holds only the
    /// caller item at `caller` (origin [`EXT`], not closed), set 1 the closure of `node`
    /// (origin 0). Exits are then exits of the *caller's* rule.
    pub fn with_caller(aut: &Automaton, caller: u32, node: u32) -> Self {
        let mut c = Chart::empty();
        c.items.push(Item {
            node: caller,
            origin: EXT,
        });
        c.starts.push(1);
        c.exits.push(false);
        c.bytes.push(0);
        c.begin_set(1);
        c.add(Item { node, origin: 0 });
        c.close(aut, 1);
        c
    }

    /// Index of the current (last) set.
    #[inline]
    pub fn pos(&self) -> u32 {
        (self.starts.len() - 1) as u32
    }

    #[inline]
    pub fn set(&self, k: u32) -> &[Item] {
        let s = self.starts[k as usize] as usize;
        let e = self
            .starts
            .get(k as usize + 1)
            .map_or(self.items.len(), |&e| e as usize);
        &self.items[s..e]
    }

    #[inline]
    pub fn current(&self) -> &[Item] {
        self.set(self.pos())
    }

    /// True when the base rule may end at the current position.
    #[inline]
    pub fn can_exit(&self) -> bool {
        self.exits[self.exits.len() - 1]
    }

    #[inline]
    fn begin_set(&mut self, start: usize) {
        self.building = start;
        if self.hashed {
            self.seen.clear();
            self.hashed = false;
        }
    }

    /// Adds `it` to the set being built unless it is there already.
    #[inline]
    fn add(&mut self, it: Item) {
        const LINEAR: usize = 24;
        self.work += 1;
        if !self.hashed {
            if self.items[self.building..].contains(&it) {
                return;
            }
            self.items.push(it);
            if self.items.len() - self.building > LINEAR {
                self.hashed = true;
                for x in &self.items[self.building..] {
                    self.seen.insert(((x.node as u64) << 32) | x.origin as u64);
                }
            }
        } else if self
            .seen
            .insert(((it.node as u64) << 32) | it.origin as u64)
        {
            self.items.push(it);
        }
    }

    /// Consumes byte `b`. Returns false (and changes nothing) when no item can scan it.
    pub fn push_byte(&mut self, aut: &Automaton, b: u8) -> bool {
        let cur = self.pos();
        let (s, e) = (self.starts[cur as usize] as usize, self.items.len());
        // Fast path: one item stepping inside its rule's DFA to a node that predicts
        // nothing and completes nothing (no calls; final only for the base item, which
        // just marks an exit). Most steps of a vocabulary walk are of this kind.
        if self.exhausted {
            return false;
        }
        if e - s == 1 {
            self.work += 1;
            let it = self.items[s];
            if let Some(t) = aut.dfa_step(it.node, b) {
                if aut.calls_of(t).is_empty() && (it.origin == EXT || !aut.is_final(t)) {
                    self.items.push(Item {
                        node: t,
                        origin: it.origin,
                    });
                    self.starts.push(e as u32);
                    self.exits.push(it.origin == EXT && aut.is_final(t));
                    self.bytes.push(b);
                    return true;
                }
            }
        }
        let start = self.items.len();
        self.begin_set(start);
        // Cost: one pass over the current set's items and their byte edges.
        for i in s..e {
            let it = self.items[i];
            aut.for_each_byte_target(it.node, b, |target| {
                self.add(Item {
                    node: target,
                    origin: it.origin,
                })
            });
        }
        self.finish_set(aut, start, b)
    }

    /// Appends a set holding only `it`, taken as closed (its node predicts and completes
    /// nothing: a node without calls that is not final, or the base item's), with `exit`
    /// as the set's exit flag. The mask walk uses this to put back a set it stepped past
    /// without the chart.
    pub fn push_closed_item(&mut self, it: Item, exit: bool, byte: u8) {
        self.starts.push(self.items.len() as u32);
        self.items.push(it);
        self.exits.push(exit);
        self.bytes.push(byte);
    }

    /// Consumes special token `token` through a token edge. Returns false (and changes
    /// nothing) when no item has such an edge.
    pub fn push_token(&mut self, aut: &Automaton, token: u32) -> bool {
        if self.exhausted {
            return false;
        }
        let start = self.items.len();
        self.begin_set(start);
        let cur = self.pos();
        let (s, e) = (self.starts[cur as usize] as usize, self.items.len());
        for i in s..e {
            let it = self.items[i];
            for edge in aut.tokens_of(it.node) {
                if edge.token == token {
                    self.add(Item {
                        node: edge.target,
                        origin: it.origin,
                    });
                }
            }
        }
        self.finish_set(aut, start, 0)
    }

    /// Opens the set whose scanned items start at `start`, and closes it (prediction and
    /// completion). False, with nothing changed, when the scan added no item.
    fn finish_set(&mut self, aut: &Automaton, start: usize, byte: u8) -> bool {
        if self.items.len() == start {
            return false;
        }
        self.starts.push(start as u32);
        self.exits.push(false);
        self.bytes.push(byte);
        let dropped = self.close(aut, start);
        if self.work > self.fuel {
            self.exhausted = true;
            self.pop();
            return false;
        }
        if dropped && !self.without_dropped_keys(aut, start) {
            self.pop();
            return false;
        }
        true
    }

    /// Removes from the set at `start` (the last, closed) the items of key rules whose
    /// completion [`Chart::close`] dropped and that can do nothing else (a final node
    /// without edges: the key's closing quote). False when the set is then empty: the byte
    /// led only into keys that end on a declared name, and is refused.
    fn without_dropped_keys(&mut self, aut: &Automaton, start: usize) -> bool {
        let Some(f) = &aut.key_filters else {
            return true;
        };
        let pos = self.pos() as usize;
        let bytes = &self.bytes;
        let dead = |it: &Item| {
            it.origin != EXT
                && it.origin as usize != pos
                && aut.is_final(it.node)
                && !aut.has_edges(it.node)
                && aut.tokens_of(it.node).is_empty()
                && f.drops(aut.rule_of(it.node), &bytes[it.origin as usize + 1..=pos])
        };
        let mut kept = start;
        for i in start..self.items.len() {
            let it = self.items[i];
            if !dead(&it) {
                self.items[kept] = it;
                kept += 1;
            }
        }
        self.items.truncate(kept);
        kept > start
    }

    /// Removes the last set (undoes one push). Never removes set 0.
    pub fn pop(&mut self) {
        if self.starts.len() > 1 {
            let s = self.starts.pop().unwrap_or(0);
            self.exits.pop();
            self.bytes.pop();
            self.items.truncate(s as usize);
        }
    }

    /// Pops until `len` sets remain.
    pub fn truncate(&mut self, len: usize) {
        let len = len.max(1);
        if self.starts.len() > len {
            let s = self.starts[len];
            self.starts.truncate(len);
            self.exits.truncate(len);
            self.bytes.truncate(len);
            self.items.truncate(s as usize);
        }
    }

    /// Number of sets (positions + 1).
    #[inline]
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Prediction and completion for the items of the current set from index `from` on.
    /// `seen` already holds the items of the current set added so far.
    ///
    /// True when a completion of a key rule was dropped (its bytes decode to a declared
    /// name: `key_filter`).
    fn close(&mut self, aut: &Automaton, from: usize) -> bool {
        let pos = self.pos();
        let mut dropped = false;
        let mut j = from;
        while j < self.items.len() {
            if self.work > self.fuel {
                return dropped; // the caller drops the set
            }
            let it = self.items[j];
            j += 1;
            for c in aut.calls_of(it.node) {
                self.add(Item {
                    node: aut.rule_start[c.rule as usize],
                    origin: pos,
                });
                if aut.nullable[c.rule as usize] {
                    self.add(Item {
                        node: c.target,
                        origin: it.origin,
                    });
                }
            }
            if aut.is_final(it.node) {
                if it.origin == EXT {
                    let last = self.exits.len() - 1;
                    self.exits[last] = true;
                } else if it.origin != pos {
                    // Completion: advance every caller of this rule waiting at the origin.
                    let rule = aut.rule_of(it.node);
                    if self.filtering {
                        if let Some(f) = &aut.key_filters {
                            let read = &self.bytes[it.origin as usize + 1..=pos as usize];
                            if f.drops(rule, read) {
                                dropped = true;
                                continue; // a declared name written as an extra key
                            }
                        }
                    }
                    let (s, e) = (
                        self.starts[it.origin as usize] as usize,
                        self.starts[it.origin as usize + 1] as usize,
                    );
                    self.work += (e - s) as u64;
                    for k in s..e {
                        let caller = self.items[k];
                        for c in aut.calls_of(caller.node) {
                            if c.rule == rule {
                                self.add(Item {
                                    node: c.target,
                                    origin: caller.origin,
                                });
                            }
                        }
                    }
                }
            }
        }
        dropped
    }
}
