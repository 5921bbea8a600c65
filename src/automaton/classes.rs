//! Nodes with the same future share one token mask.
//!
//! Front ends repeat structure: every string-valued property of a JSON schema has its own
//! copy of the string-body automaton, every tool of a structural tag its own JSON
//! punctuation. A node's mask depends only on what can follow it inside its rule (bytes,
//! calls, tokens, where the rule may end) and on the bytes that may follow the rule, so
//! nodes that are bisimilar under those observations have equal masks. Moore-style
//! partition refinement finds them; masks are then computed once per class.

use super::Automaton;
use rustc_hash::FxHashMap;

/// Most refinement rounds of [`Automaton::mask_classes`]. A round costs one signature per
/// node of a class that may still split; a long literal such as `"abab…"` needs one round
/// per byte to be told apart. Past this, every node of a class that has not split down to
/// one node gets a class of its own: sound (classes only ever split), at the price of
/// masks that are no longer shared.
const MAX_ROUNDS: usize = 256;

impl Automaton {
    /// The class of every real node (ids `0..classes`), such that nodes of one class have
    /// equal masks. Cost: per refinement round, one signature per node of a class with more
    /// than one node; at most [`MAX_ROUNDS`] rounds, then the classes still shared are split
    /// into single nodes. `Err` when `deadline` passes (looked at every round).
    pub(crate) fn mask_classes(
        &self,
        deadline: &crate::limits::Deadline,
    ) -> Result<(Vec<u32>, usize), crate::LimitExceeded> {
        let n = self.nodes.len();
        let mut ids: FxHashMap<Vec<u64>, u32> = FxHashMap::default();
        let mut class: Vec<u32> = Vec::with_capacity(n);
        for node in &self.nodes {
            let f = &self.follow[node.rule as usize];
            let key = vec![node.is_final as u64, f[0], f[1], f[2], f[3]];
            let next = ids.len() as u32;
            class.push(*ids.entry(key).or_insert(next));
        }
        let mut count = ids.len();
        let mut size = vec![0u32; count];
        for &c in &class {
            size[c as usize] += 1;
        }
        let mut sig: Vec<u64> = Vec::new();
        let mut parts: Vec<(u64, u64)> = Vec::new();
        // Per round: (old class, signature) → new class. The first signature met in a class
        // keeps the class's id, so ids of classes that do not split stay put, and nodes of
        // single-node classes (which cannot split) are never signed again.
        let mut split: FxHashMap<(u32, Vec<u64>), u32> = FxHashMap::default();
        let mut kept: Vec<bool> = Vec::new();
        for _ in 0..MAX_ROUNDS {
            deadline.check()?;
            split.clear();
            kept.clear();
            kept.resize(count, false);
            let mut next_class = class.clone();
            for (i, node) in self.nodes.iter().enumerate() {
                let old = class[i];
                if size[old as usize] <= 1 {
                    continue;
                }
                sig.clear();
                parts.clear();
                for e in &self.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize] {
                    let range = ((e.lo as u64) << 8) | e.hi as u64;
                    parts.push((range, class[e.target as usize] as u64));
                }
                parts.sort_unstable();
                sig.push(u64::MAX);
                sig.extend(parts.iter().flat_map(|&(a, b)| [a, b]));
                parts.clear();
                for e in &self.call_edges[node.calls.0 as usize..node.calls.1 as usize] {
                    let start = self.rule_start[e.rule as usize];
                    let callee = match class.get(start as usize) {
                        Some(&c) => c as u64,
                        // A counted rule (virtual start): only equal to itself.
                        None => (1 << 40) | e.rule as u64,
                    };
                    parts.push((callee, class[e.target as usize] as u64));
                }
                parts.sort_unstable();
                sig.push(u64::MAX);
                sig.extend(parts.iter().flat_map(|&(a, b)| [a, b]));
                parts.clear();
                for e in &self.token_edges[node.tokens.0 as usize..node.tokens.1 as usize] {
                    parts.push((e.token as u64, class[e.target as usize] as u64));
                }
                parts.sort_unstable();
                sig.push(u64::MAX);
                sig.extend(parts.iter().flat_map(|&(a, b)| [a, b]));
                let key = (old, std::mem::take(&mut sig));
                let id = match split.get(&key) {
                    Some(&id) => id,
                    None => {
                        let id = if kept[old as usize] {
                            count += 1;
                            (count - 1) as u32
                        } else {
                            kept[old as usize] = true;
                            old
                        };
                        split.insert(key, id);
                        id
                    }
                };
                next_class[i] = id;
            }
            let before = size.len();
            class = next_class;
            if count == before {
                return Ok((class, count));
            }
            size.clear();
            size.resize(count, 0);
            for &c in &class {
                size[c as usize] += 1;
            }
        }
        // Not settled: classes that still hold several nodes become one class per node.
        let mut seen = vec![false; count];
        for c in class.iter_mut() {
            if size[*c as usize] > 1 {
                if seen[*c as usize] {
                    *c = count as u32;
                    count += 1;
                } else {
                    seen[*c as usize] = true;
                }
            }
        }
        Ok((class, count))
    }
}

/// Classes whose future reaches more than this many classes get no cross-grammar key (the
/// key's size and its cost are proportional to that future).
const MAX_KEY_CLASSES: usize = 256;

/// Total classes visited while making the keys of one grammar; past it, no more keys (huge
/// grammars would otherwise spend more on keys than the keys save).
const KEY_BUDGET: usize = 1 << 18;

impl Automaton {
    /// A canonical key per mask class: the whole automaton reachable from the class (bytes,
    /// calls into other rules, tokens, finality, follow bytes), serialised in breadth-first
    /// order. Equal keys, in any two grammars over one vocabulary, mean equal masks, so masks
    /// can be shared across grammars. `None` where no key is made: the future includes a
    /// counted repetition, or is larger than [`MAX_KEY_CLASSES`], or the grammar's
    /// [`KEY_BUDGET`] is spent.
    ///
    /// The order in which edges are listed only affects how often keys coincide, never what
    /// a key means: it is made as canonical as cheap hashing allows.
    pub(crate) fn class_keys(&self, class: &[u32], classes: usize) -> Vec<Option<Box<[u64]>>> {
        let mut rep = vec![u32::MAX; classes];
        for (n, &c) in class.iter().enumerate().rev() {
            rep[c as usize] = n as u32;
        }
        let start_class = |rule: u32| -> Option<u32> {
            class.get(self.rule_start[rule as usize] as usize).copied()
        };
        // A few rounds of structural hashing, to order edges that share a label.
        let mut h: Vec<u64> = rep
            .iter()
            .map(|&n| {
                let node = &self.nodes[n as usize];
                let f = &self.follow[node.rule as usize];
                mix(&[node.is_final as u64, f[0], f[1], f[2], f[3]])
            })
            .collect();
        for _ in 0..4 {
            h = rep
                .iter()
                .enumerate()
                .map(|(c, &n)| {
                    let node = &self.nodes[n as usize];
                    let mut acc = h[c];
                    for e in &self.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize] {
                        let t = h[class[e.target as usize] as usize];
                        acc = acc.wrapping_add(mix(&[1, e.lo as u64, e.hi as u64, t]));
                    }
                    for e in &self.call_edges[node.calls.0 as usize..node.calls.1 as usize] {
                        let callee = start_class(e.rule).map_or(u64::MAX, |s| h[s as usize]);
                        let t = h[class[e.target as usize] as usize];
                        acc = acc.wrapping_add(mix(&[2, callee, t]));
                    }
                    for e in &self.token_edges[node.tokens.0 as usize..node.tokens.1 as usize] {
                        let t = h[class[e.target as usize] as usize];
                        acc = acc.wrapping_add(mix(&[3, e.token as u64, t]));
                    }
                    mix(&[acc])
                })
                .collect();
        }
        let mut keys = Vec::with_capacity(classes);
        let mut num: FxHashMap<u32, u64> = FxHashMap::default();
        let mut order: Vec<u32> = Vec::new();
        let mut key: Vec<u64> = Vec::new();
        // (kind, label, tie-break hash, target class, second class for calls).
        let mut edges: Vec<(u64, u64, u64, u32, u32)> = Vec::new();
        let mut spent = 0usize;
        for c0 in 0..classes as u32 {
            if spent > KEY_BUDGET {
                keys.push(None);
                continue;
            }
            num.clear();
            order.clear();
            key.clear();
            num.insert(c0, 0);
            order.push(c0);
            let mut i = 0;
            let mut ok = true;
            while i < order.len() {
                if order.len() > MAX_KEY_CLASSES {
                    ok = false;
                    break;
                }
                let c = order[i];
                i += 1;
                let node = &self.nodes[rep[c as usize] as usize];
                let f = &self.follow[node.rule as usize];
                key.extend_from_slice(&[node.is_final as u64, f[0], f[1], f[2], f[3]]);
                edges.clear();
                for e in &self.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize] {
                    let t = class[e.target as usize];
                    let range = ((e.lo as u64) << 8) | e.hi as u64;
                    edges.push((1, range, h[t as usize], t, u32::MAX));
                }
                for e in &self.call_edges[node.calls.0 as usize..node.calls.1 as usize] {
                    let Some(s) = start_class(e.rule) else {
                        ok = false;
                        break;
                    };
                    let t = class[e.target as usize];
                    // The callee's start, then the return target.
                    edges.push((2, h[s as usize], h[t as usize], s, t));
                }
                for e in &self.token_edges[node.tokens.0 as usize..node.tokens.1 as usize] {
                    let t = class[e.target as usize];
                    edges.push((3, e.token as u64, h[t as usize], t, u32::MAX));
                }
                if !ok {
                    break;
                }
                edges.sort_unstable_by_key(|e| (e.0, e.1, e.2));
                key.push(edges.len() as u64);
                for &(kind, label, _, t, t2) in &edges {
                    let mut id = |c: u32| -> u64 {
                        let next = num.len() as u64;
                        *num.entry(c).or_insert_with(|| {
                            order.push(c);
                            next
                        })
                    };
                    if kind == 2 {
                        // A call: the callee's number and the return target's.
                        let (a, b) = (id(t), id(t2));
                        key.extend_from_slice(&[kind, a, b]);
                    } else {
                        let a = id(t);
                        key.extend_from_slice(&[kind, label, a]);
                    }
                }
            }
            spent += order.len();
            keys.push(ok.then(|| key.clone().into_boxed_slice()));
        }
        keys
    }
}

/// A 64-bit mix of a few words (splitmix64 steps).
fn mix(words: &[u64]) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for &w in words {
        x = (x ^ w).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 31;
        x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 29;
    }
    x
}
