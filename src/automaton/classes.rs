//! Nodes with the same future share one token mask.
//!
//! Front ends repeat structure: every string-valued property of a JSON schema has its own
//! copy of the string-body automaton, every tool of a structural tag its own JSON
//! punctuation. A node's mask depends only on what can follow it inside its rule (bytes,
//! calls, tokens, where the rule may end) and on the bytes that may follow the rule, so
//! nodes that are bisimilar under those observations have equal masks. Moore-style
//! partition refinement finds them; masks are then computed once per class.

use super::refine::{dependents, refine, Deps};
use super::Automaton;
use rustc_hash::FxHashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::OnceLock;

/// Most refinement rounds of [`Automaton::mask_classes`]. A long literal such as `"abab…"`
/// needs one round per byte to be told apart; a round costs work in proportion to the nodes
/// that moved in the round before (not to the automaton), so the bound is generous. Past
/// it, every node of a class that has not split down to one node gets a class of its own:
/// sound (classes only ever split), at the price of masks that are no longer shared.
const MAX_ROUNDS: usize = 4096;

impl Automaton {
    /// The class of every real node (ids `0..classes`), such that nodes of one class have
    /// equal masks: the coarsest partition, finer than (finality, follow bytes of the
    /// node's rule), in which nodes of one class have, edge label by edge label, targets in
    /// equal classes (a call edge's label is the class of the callee's start).
    ///
    /// Moore's refinement with a worklist (`super::refine`): a round re-signs only the
    /// nodes whose edge targets changed class in the round before, so its work is
    /// proportional to what moved, not to the automaton. At most [`MAX_ROUNDS`] rounds,
    /// then the classes still shared are split into single nodes. `Err` when `deadline`
    /// passes (looked at every round).
    pub(crate) fn mask_classes(
        &self,
        deadline: &crate::limits::Deadline,
    ) -> Result<(Vec<u32>, usize), crate::LimitExceeded> {
        let mut parts: Vec<(u64, u64)> = Vec::new();
        let r = refine(
            self.initial_classes(),
            None,
            &Deps::whole(&self.dependents()),
            |v, class, out| self.sign(v, class, &mut parts, out),
            MAX_ROUNDS,
            deadline,
        )?;
        Ok((r.class, r.count))
    }

    /// Per rule: its first real node and its number of real nodes (a rule's nodes are
    /// numbered together; a counted rule has none).
    fn rule_nodes(&self) -> Vec<(u32, u32)> {
        let mut out = vec![(0u32, 0u32); self.rule_start.len()];
        for (n, node) in self.nodes.iter().enumerate() {
            let r = &mut out[node.rule as usize];
            if r.1 == 0 {
                r.0 = n as u32;
            }
            r.1 += 1;
        }
        out
    }

    /// What [`Automaton::mask_classes_seeded`] needs of this automaton's classes `class`
    /// (`classes` of them).
    pub(crate) fn class_seed(&self, class: &[u32], classes: usize) -> ClassSeed {
        ClassSeed {
            nodes: self.rule_nodes(),
            follow: self.follow.clone(),
            class: class.to_vec(),
            classes,
            had_dead_ends: self.had_dead_ends,
            // Read by builds spliced into this automaton, made only of one that had no
            // dead ends (`compiler::deferred`).
            deps: match self.had_dead_ends {
                true => (vec![0; self.nodes.len() + 1], Vec::new()),
                false => self.dependents(),
            },
        }
    }

    /// Mask classes as [`Automaton::mask_classes`] gives, for an automaton whose rules
    /// below `seed`'s rule count are those of the automaton `seed` was made of, except
    /// the rules with `rebuilt[r]` set (and the rules past `rebuilt`'s end, all new): the
    /// rules of a deferred tag's stub grammar with some tools built (`compiler::deferred`).
    /// The nodes of an unchanged rule (same node count, same follow bytes) start in their
    /// class of `seed`; those of the other rules in new classes by (finality, follow
    /// bytes); and the refinement starts from the new nodes and the nodes that read them
    /// (`refine`'s seeded form), so its work is in proportion to the rules built, not to
    /// the tag. The classes are stable (nodes of a class have equal masks), and may be
    /// finer than the coarsest. `Ok(None)` when an unchanged rule's node count differs
    /// (then use [`Automaton::mask_classes`]).
    ///
    /// With `seeded.spliced` (`Automaton::splice`'s layout), only the rules that changed
    /// and the new nodes are looked at, and the seed's rows of readers are kept
    /// ([`Automaton::mask_classes_spliced`]).
    pub(crate) fn mask_classes_seeded(
        &self,
        seeded: Seeded<'_>,
        deadline: &crate::limits::Deadline,
    ) -> Result<Option<(Vec<u32>, usize)>, crate::LimitExceeded> {
        let Seeded {
            seed,
            rebuilt,
            spliced,
        } = seeded;
        let layout = seed.class.len() <= self.nodes.len() && rebuilt.len() == seed.nodes.len();
        if spliced && layout && !seed.had_dead_ends {
            return self.mask_classes_spliced(seed, rebuilt, deadline).map(Some);
        }
        let now = self.rule_nodes();
        let mut fresh = vec![true; now.len()];
        for (r, f) in fresh.iter_mut().enumerate() {
            let (Some(&(_, count)), Some(follow)) = (seed.nodes.get(r), seed.follow.get(r)) else {
                continue;
            };
            if rebuilt.get(r).copied().unwrap_or(true) || *follow != self.follow[r] {
                continue;
            }
            if count != now[r].1 {
                return Ok(None);
            }
            *f = false;
        }
        // Classes: those of `seed` for unchanged nodes, then new ones; then made dense
        // (classes of `seed` that only rebuilt nodes had are left out).
        let mut ids: FxHashMap<[u64; 5], u32> = FxHashMap::default();
        let mut changed = Vec::new();
        let mut class: Vec<u32> = Vec::with_capacity(self.nodes.len());
        for (v, node) in self.nodes.iter().enumerate() {
            let r = node.rule as usize;
            if fresh[r] {
                let f = &self.follow[r];
                let key = [node.is_final as u64, f[0], f[1], f[2], f[3]];
                let next = ids.len() as u32;
                class.push(seed.classes as u32 + *ids.entry(key).or_insert(next));
                changed.push(v as u32);
            } else {
                let old = seed.nodes[r].0 as usize + (v - now[r].0 as usize);
                class.push(seed.class[old]);
            }
        }
        dense_classes(&mut class, seed.classes + ids.len());
        let mut parts: Vec<(u64, u64)> = Vec::new();
        let r = refine(
            class,
            Some(&changed),
            &Deps::whole(&self.dependents()),
            |v, class, out| self.sign(v, class, &mut parts, out),
            MAX_ROUNDS,
            deadline,
        )?;
        Ok(Some((r.class, r.count)))
    }

    /// [`Automaton::mask_classes_seeded`] for an automaton that `Automaton::splice` made of
    /// the seed's: its nodes below the seed's count are the seed automaton's, with the
    /// same ids, rules and edges, but the nodes of the `rebuilt` rules (the slots), left
    /// with none; the tools' nodes follow. The unchanged rules' nodes keep their classes
    /// (a copy); the slots' old nodes, the nodes of rules whose follow bytes changed and
    /// the new nodes start in new classes. Readers: the seed's rows for the old nodes, and
    /// rows made here for the new ones (a slot's new start is read by the callers that
    /// read its old nodes).
    fn mask_classes_spliced(
        &self,
        seed: &ClassSeed,
        rebuilt: &[bool],
        deadline: &crate::limits::Deadline,
    ) -> Result<(Vec<u32>, usize), crate::LimitExceeded> {
        let from = seed.class.len();
        let n = self.nodes.len();
        let mut ids: FxHashMap<[u64; 5], u32> = FxHashMap::default();
        let mut changed = Vec::new();
        let mut class: Vec<u32> = Vec::with_capacity(n);
        class.extend_from_slice(&seed.class);
        class.resize(n, 0);
        let mut fresh = |v: usize, class: &mut [u32]| {
            let node = &self.nodes[v];
            let f = &self.follow[node.rule as usize];
            let key = [node.is_final as u64, f[0], f[1], f[2], f[3]];
            let next = ids.len() as u32;
            class[v] = seed.classes as u32 + *ids.entry(key).or_insert(next);
            changed.push(v as u32);
        };
        for (r, &(first, count)) in seed.nodes.iter().enumerate() {
            if rebuilt.get(r).copied().unwrap_or(true) || seed.follow[r] != self.follow[r] {
                for v in first as usize..(first + count) as usize {
                    fresh(v, &mut class);
                }
            }
        }
        for v in from..n {
            fresh(v, &mut class);
        }
        dense_classes(&mut class, seed.classes + ids.len());
        // Rows of the new nodes: what reads them among the new nodes, and a slot's new
        // start read by what read the slot's old nodes.
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for v in from..n {
            self.reading(v as u32, |m| {
                if m as usize >= from {
                    pairs.push((m - from as u32, v as u32));
                }
            });
        }
        for (r, &(first, count)) in seed.nodes.iter().enumerate() {
            let start = self.rule_start[r] as usize;
            if rebuilt.get(r).copied().unwrap_or(true) && (from..n).contains(&start) {
                for old in first..first + count {
                    let (lo, hi) = (seed.deps.0[old as usize], seed.deps.0[old as usize + 1]);
                    for &v in &seed.deps.1[lo as usize..hi as usize] {
                        pairs.push(((start - from) as u32, v));
                    }
                }
            }
        }
        let top = dependents(n - from, &pairs);
        let mut parts: Vec<(u64, u64)> = Vec::new();
        let r = refine(
            class,
            Some(&changed),
            &Deps::layered(&seed.deps, from, &top),
            |v, class, out| self.sign(v, class, &mut parts, out),
            MAX_ROUNDS,
            deadline,
        )?;
        Ok((r.class, r.count))
    }

    /// Classes by (finality, follow bytes of the node's rule), ids dense from 0.
    ///
    /// For [`Automaton::mask_classes`], also by the part of the signature that reads no
    /// class ([`Automaton::local_sign`]): nodes that differ there never share a class, so
    /// the partition found is the same, with fewer rounds of refinement to find it.
    fn initial_classes(&self) -> Vec<u32> {
        self.initial_classes_by(true)
    }

    /// [`Automaton::initial_classes`], by the local signature too when `local`.
    fn initial_classes_by(&self, local: bool) -> Vec<u32> {
        let mut ids: FxHashMap<[u64; 6], u32> = FxHashMap::default();
        let mut scratch = Vec::new();
        self.nodes
            .iter()
            .enumerate()
            .map(|(v, node)| {
                let f = &self.follow[node.rule as usize];
                let local = match local {
                    true => self.local_sign(v as u32, &mut scratch),
                    false => 0,
                };
                let key = [node.is_final as u64, f[0], f[1], f[2], f[3], local];
                let next = ids.len() as u32;
                *ids.entry(key).or_insert(next)
            })
            .collect()
    }

    /// A hash of what [`Automaton::sign`] writes of node `v` with every class left out:
    /// its byte ranges and its token ids, each sorted, and its number of call edges. Nodes
    /// whose hashes differ sign differently under every partition.
    fn local_sign(&self, v: u32, scratch: &mut Vec<u64>) -> u64 {
        let node = &self.nodes[v as usize];
        scratch.clear();
        let bytes = &self.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize];
        scratch.extend(bytes.iter().map(|e| ((e.lo as u64) << 8) | e.hi as u64));
        if !bytes.windows(2).all(|w| w[0].hi < w[1].lo) {
            scratch.sort_unstable();
        }
        scratch.push(u64::MAX);
        scratch.push((node.calls.1 - node.calls.0) as u64);
        let tokens = &self.token_edges[node.tokens.0 as usize..node.tokens.1 as usize];
        let at = scratch.len();
        scratch.extend(tokens.iter().map(|e| e.token as u64));
        scratch[at..].sort_unstable();
        rustc_hash::FxBuildHasher.hash_one(&scratch[..])
    }

    /// For every node `m`, the nodes whose signature reads `m`'s class (an edge targets
    /// `m`, or a call edge enters the rule that `m` starts), in compressed rows:
    /// `(offsets, nodes)`, row `m` being `nodes[offsets[m]..offsets[m + 1]]`.
    fn dependents(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.nodes.len();
        let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(
            self.byte_edges.len() + 2 * self.call_edges.len() + self.token_edges.len(),
        );
        for v in 0..n as u32 {
            self.reading(v, |m| pairs.push((m, v)));
        }
        dependents(n, &pairs)
    }

    /// Calls `f` with each real node whose class node `v`'s signature reads: its edges'
    /// targets, and the starts of the rules it calls.
    #[inline]
    fn reading(&self, v: u32, mut f: impl FnMut(u32)) {
        let n = self.nodes.len();
        let node = &self.nodes[v as usize];
        for e in &self.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize] {
            f(e.target);
        }
        for e in &self.call_edges[node.calls.0 as usize..node.calls.1 as usize] {
            f(e.target);
            let start = self.rule_start[e.rule as usize];
            if (start as usize) < n {
                f(start);
            }
        }
        for e in &self.token_edges[node.tokens.0 as usize..node.tokens.1 as usize] {
            f(e.target);
        }
    }

    /// Appends node `v`'s signature under `class` to `out`: its byte edges (range, target
    /// class), its call edges (callee start class, return target class) and its token
    /// edges (token, target class), each list sorted, behind a separator.
    fn sign(&self, v: u32, class: &[u32], parts: &mut Vec<(u64, u64)>, out: &mut Vec<u64>) {
        let node = &self.nodes[v as usize];
        // Appends `parts`, sorted, behind a separator, and empties it.
        let flush = |parts: &mut Vec<(u64, u64)>, out: &mut Vec<u64>| {
            if parts.len() > 1 {
                parts.sort_unstable();
            }
            out.reserve(1 + 2 * parts.len());
            out.push(u64::MAX);
            for &(a, b) in parts.iter() {
                out.push(a);
                out.push(b);
            }
            parts.clear();
        };
        parts.clear();
        let bytes = &self.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize];
        if bytes.windows(2).all(|w| w[0].hi < w[1].lo) {
            // Disjoint ranges in ascending order: already sorted, and no two share a range.
            out.reserve(1 + 2 * bytes.len());
            out.push(u64::MAX);
            for e in bytes {
                out.push(((e.lo as u64) << 8) | e.hi as u64);
                out.push(class[e.target as usize] as u64);
            }
        } else {
            for e in bytes {
                let range = ((e.lo as u64) << 8) | e.hi as u64;
                parts.push((range, class[e.target as usize] as u64));
            }
            flush(parts, out);
        }
        for e in &self.call_edges[node.calls.0 as usize..node.calls.1 as usize] {
            let start = self.rule_start[e.rule as usize];
            let callee = match class.get(start as usize) {
                Some(&c) => c as u64,
                // A counted rule (virtual start): only equal to itself.
                None => (1 << 40) | e.rule as u64,
            };
            parts.push((callee, class[e.target as usize] as u64));
        }
        flush(parts, out);
        for e in &self.token_edges[node.tokens.0 as usize..node.tokens.1 as usize] {
            parts.push((e.token as u64, class[e.target as usize] as u64));
        }
        flush(parts, out);
    }
}

#[cfg(test)]
impl Automaton {
    /// Whether `class` is a stable partition of the real nodes: members of a class have
    /// equal finality, follow bytes and signature (so equal masks).
    pub(crate) fn is_stable_partition(&self, class: &[u32]) -> bool {
        let mut parts = Vec::new();
        let mut first: FxHashMap<u32, (u64, [u64; 4], Vec<u64>)> = FxHashMap::default();
        self.nodes.iter().enumerate().all(|(v, node)| {
            let mut sig = Vec::new();
            self.sign(v as u32, class, &mut parts, &mut sig);
            let mine = (node.is_final as u64, self.follow[node.rule as usize], sig);
            first.entry(class[v]).or_insert_with(|| mine.clone()) == &mine
        })
    }

    /// Plain Moore refinement (every round re-signs every node of a shared class): the
    /// reference [`Automaton::mask_classes`] must agree with, class for class.
    fn mask_classes_reference(&self) -> Vec<u32> {
        let n = self.nodes.len();
        // From the classes by finality and follow bytes alone: the local signatures of
        // `initial_classes` must not change the partition found.
        let mut class = self.initial_classes_by(false);
        let mut parts = Vec::new();
        loop {
            let mut ids: FxHashMap<(u32, Vec<u64>), u32> = FxHashMap::default();
            let mut next = Vec::with_capacity(n);
            for v in 0..n as u32 {
                let mut sig = Vec::new();
                self.sign(v, &class, &mut parts, &mut sig);
                let fresh = ids.len() as u32;
                next.push(*ids.entry((class[v as usize], sig)).or_insert(fresh));
            }
            let before = class.iter().copied().max().map_or(0, |m| m + 1);
            if ids.len() as u32 == before {
                return next;
            }
            class = next;
        }
    }
}

/// An automaton's mask classes by rule ([`Automaton::class_seed`]), to seed those of an
/// automaton that shares most of its rules ([`Automaton::mask_classes_seeded`]).
#[derive(Debug)]
pub(crate) struct ClassSeed {
    /// Who reads whom (`Automaton::dependents`), for builds spliced from it.
    deps: (Vec<u32>, Vec<u32>),
    /// Per rule: first real node, number of real nodes.
    nodes: Vec<(u32, u32)>,
    /// Per rule: the bytes that may follow it (`Automaton::follow`).
    follow: Vec<[u64; 4]>,
    /// Per node: its class.
    class: Vec<u32>,
    classes: usize,
    /// The automaton's pruning removed an edge ([`Automaton::had_dead_ends`]).
    had_dead_ends: bool,
}

impl ClassSeed {
    /// The automaton it was made of had edges into dead ends, removed when it was built:
    /// a build from it must examine every rule for them
    /// ([`Automaton::prune_unproductive`]).
    pub(crate) fn had_dead_ends(&self) -> bool {
        self.had_dead_ends
    }

    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * 8
            + self.follow.capacity() * 32
            + self.class.capacity() * 4
            + (self.deps.0.capacity() + self.deps.1.capacity()) * 4
    }
}

/// How an automaton relates to the one a [`ClassSeed`] was made of
/// ([`Automaton::mask_classes_seeded`]).
#[derive(Clone, Copy)]
pub(crate) struct Seeded<'a> {
    pub seed: &'a ClassSeed,
    /// Per rule of the seed's: it differs from the seed automaton's rule (a tool built);
    /// the rules past its end are new.
    pub rebuilt: &'a [bool],
    /// `Automaton::splice`'s layout: the seed automaton's nodes keep their ids and edges
    /// (but the rebuilt rules', left with none), the new nodes come after them.
    pub spliced: bool,
}

/// Renumbers the classes of `class` (ids below `ids`) densely from 0, in order of first
/// appearance (classes no node has are left out).
fn dense_classes(class: &mut [u32], ids: usize) {
    let mut dense = vec![u32::MAX; ids];
    let mut count = 0u32;
    for c in class.iter_mut() {
        if dense[*c as usize] == u32::MAX {
            dense[*c as usize] = count;
            count += 1;
        }
        *c = dense[*c as usize];
    }
}

/// Classes whose future reaches more than this many classes get no cross-grammar key (the
/// key's size and its cost are proportional to that future). On 100 MaskBench schemas, 93%
/// of the keys that found a mask were under about 30 classes, while most keys over that
/// found none (an object's members, with their names): at 256, keys were a tenth of the
/// cold masks' time.
const MAX_KEY_CLASSES: usize = 48;

/// Total classes visited while making the keys of one grammar; past it, no more keys (huge
/// grammars would otherwise spend more on keys than the keys save).
const KEY_BUDGET: usize = 1 << 18;

/// What [`Automaton::class_key`] needs, made once per grammar on first use: a
/// representative node per mask class, the structural hash of each class met so far (to
/// order edges that share a label; made on demand, [`Automaton::class_hash`]), and the
/// class visits spent on keys so far (against [`KEY_BUDGET`]).
#[derive(Debug)]
pub(crate) struct KeyBasis {
    rep: Vec<u32>,
    /// Hashes made so far, at `round * classes + class` for rounds 0 to [`HASH_ROUNDS`]
    /// (0: not made yet; allocated on the first key): a key reads the hashes of the few
    /// classes near the one it is made for, so a grammar of thousands of classes (a tag of
    /// hundreds of tools, or a tool built into it) hashes those, not every class. Atomic,
    /// so keys made on several threads never wait on each other: a hash is a function of
    /// the automaton, and two threads that make it store the same value.
    hash: OnceLock<Box<[AtomicU32]>>,
    /// Per class: its future is known to reach more than [`MAX_KEY_CLASSES`] classes, so
    /// it gets no key, and neither does any class whose future holds it (a key walk that
    /// meets it stops there). Allocated with `hash`. Walks stopped early add less to
    /// `spent`, so a grammar that reaches [`KEY_BUDGET`] may key a few more classes than
    /// without the marks; a key's meaning never changes.
    big: OnceLock<Box<[AtomicBool]>>,
    spent: std::sync::atomic::AtomicUsize,
}

impl KeyBasis {
    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        let hashes = self.hash.get().map_or(0, |h| h.len() * 4);
        let big = self.big.get().map_or(0, |b| b.len());
        self.rep.capacity() * 4 + hashes + big
    }
}

/// Rounds of structural hashing: a class's hash sums up its future this many edges deep.
const HASH_ROUNDS: usize = 4;

impl Automaton {
    /// The [`KeyBasis`] of the partition `class` (`classes` classes): a representative per
    /// class (one pass over the nodes); hashes are made on demand.
    pub(crate) fn key_basis(&self, class: &[u32], classes: usize) -> KeyBasis {
        let mut rep = vec![u32::MAX; classes];
        for (n, &c) in class.iter().enumerate().rev() {
            rep[c as usize] = n as u32;
        }
        KeyBasis {
            rep,
            hash: Default::default(),
            big: Default::default(),
            spent: Default::default(),
        }
    }

    /// The structural hash of class `c` after `round` rounds: round 0 hashes the finality
    /// and follow bytes of its representative, each later round adds, per edge of the
    /// representative, its label and the previous round's hash of its target (of the
    /// callee's start and the return target, for a call). Kept in `memo`
    /// ([`KeyBasis::hash`]).
    fn class_hash(
        &self,
        rep: &[u32],
        class: &[u32],
        memo: &[AtomicU32],
        round: usize,
        c: u32,
    ) -> u32 {
        let at = round * rep.len() + c as usize;
        let made = memo[at].load(Relaxed);
        if made != 0 {
            return made;
        }
        let node = &self.nodes[rep[c as usize] as usize];
        let h = if round == 0 {
            let f = &self.follow[node.rule as usize];
            mix(&[node.is_final as u64, f[0], f[1], f[2], f[3]])
        } else {
            let mut prev = |c: u32| self.class_hash(rep, class, memo, round - 1, c) as u64;
            let mut acc = prev(c);
            for e in &self.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize] {
                let t = prev(class[e.target as usize]);
                acc = acc.wrapping_add(mix(&[1, e.lo as u64, e.hi as u64, t]));
            }
            for e in &self.call_edges[node.calls.0 as usize..node.calls.1 as usize] {
                let start = class
                    .get(self.rule_start[e.rule as usize] as usize)
                    .copied();
                let callee = start.map_or(u64::MAX, &mut prev);
                let t = prev(class[e.target as usize]);
                acc = acc.wrapping_add(mix(&[2, callee, t]));
            }
            for e in &self.token_edges[node.tokens.0 as usize..node.tokens.1 as usize] {
                let t = prev(class[e.target as usize]);
                acc = acc.wrapping_add(mix(&[3, e.token as u64, t]));
            }
            mix(&[acc])
        };
        // 0 marks a hash not made yet.
        let h = (h as u32).max(1);
        memo[at].store(h, Relaxed);
        h
    }

    /// The canonical key of mask class `c0`: the whole automaton reachable from the class
    /// (bytes, calls into other rules, tokens, finality, follow bytes), serialised in
    /// breadth-first order. Equal keys, in any two grammars over one vocabulary, mean equal
    /// masks, so masks can be shared across grammars. `None` where no key is made: the
    /// future includes a counted repetition, or is larger than [`MAX_KEY_CLASSES`], or the
    /// grammar's [`KEY_BUDGET`] is spent. Made on demand, before a class's mask is walked:
    /// a grammar pays only for the keys of the masks it needs.
    ///
    /// The order in which edges are listed only affects how often keys coincide, never what
    /// a key means: it is made as canonical as cheap hashing allows.
    pub(crate) fn class_key(&self, basis: &KeyBasis, class: &[u32], c0: u32) -> Option<Box<[u64]>> {
        if basis.spent.load(Relaxed) > KEY_BUDGET {
            return None;
        }
        let rep = &basis.rep;
        let memo = basis.hash.get_or_init(|| {
            (0..(HASH_ROUNDS + 1) * rep.len())
                .map(|_| AtomicU32::new(0))
                .collect()
        });
        let big = basis
            .big
            .get_or_init(|| (0..rep.len()).map(|_| AtomicBool::new(false)).collect());
        let is_big = |c: u32| big[c as usize].load(Relaxed);
        if is_big(c0) {
            return None;
        }
        let h = |c: u32| self.class_hash(rep, class, memo, HASH_ROUNDS, c) as u64;
        let start_class = |rule: u32| -> Option<u32> {
            class.get(self.rule_start[rule as usize] as usize).copied()
        };
        // Sized for a key of the limit's classes, so a key grows no table on the way.
        let mut num: FxHashMap<u32, u64> =
            FxHashMap::with_capacity_and_hasher(MAX_KEY_CLASSES + 1, Default::default());
        let mut order: Vec<u32> = Vec::with_capacity(MAX_KEY_CLASSES + 1);
        order.push(c0);
        let mut key: Vec<u64> = Vec::with_capacity(8 * (MAX_KEY_CLASSES + 1));
        // (kind, label, tie-break hash, target class, second class for calls).
        let mut edges: Vec<(u64, u64, u64, u32, u32)> = Vec::new();
        num.insert(c0, 0);
        let mut i = 0;
        let ok = 'walk: loop {
            if i == order.len() {
                break true;
            }
            if order.len() > MAX_KEY_CLASSES {
                big[c0 as usize].store(true, Relaxed);
                break false;
            }
            let c = order[i];
            i += 1;
            let node = &self.nodes[rep[c as usize] as usize];
            let f = &self.follow[node.rule as usize];
            key.extend_from_slice(&[node.is_final as u64, f[0], f[1], f[2], f[3]]);
            edges.clear();
            // A target known to be too big makes this future too big: stop before hashing.
            let mut too_big = false;
            for e in &self.byte_edges[node.bytes.0 as usize..node.bytes.1 as usize] {
                let t = class[e.target as usize];
                too_big |= is_big(t);
                let range = ((e.lo as u64) << 8) | e.hi as u64;
                edges.push((1, range, 0, t, u32::MAX));
            }
            for e in &self.call_edges[node.calls.0 as usize..node.calls.1 as usize] {
                let Some(s) = start_class(e.rule) else {
                    break 'walk false;
                };
                let t = class[e.target as usize];
                too_big |= is_big(s) || is_big(t);
                // The callee's start, then the return target.
                edges.push((2, 0, 0, s, t));
            }
            for e in &self.token_edges[node.tokens.0 as usize..node.tokens.1 as usize] {
                let t = class[e.target as usize];
                too_big |= is_big(t);
                edges.push((3, e.token as u64, 0, t, u32::MAX));
            }
            if too_big {
                big[c0 as usize].store(true, Relaxed);
                break false;
            }
            // A call's label is its callee's hash. The targets' hashes only break ties
            // between edges of one label (an NFA node's), so they are made only then: the
            // order, and so the key, is the same as when they are always made (up to
            // edges equal in kind, label and hash, whose order was arbitrary before too).
            for e in edges.iter_mut().filter(|e| e.0 == 2) {
                e.1 = h(e.3);
            }
            edges.sort_unstable_by_key(|e| (e.0, e.1));
            if edges
                .windows(2)
                .any(|w| (w[0].0, w[0].1) == (w[1].0, w[1].1))
            {
                for e in edges.iter_mut() {
                    e.2 = h(if e.0 == 2 { e.4 } else { e.3 });
                }
                edges.sort_unstable_by_key(|e| (e.0, e.1, e.2));
            }
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
        };
        basis.spent.fetch_add(order.len(), Relaxed);
        ok.then(|| key.into_boxed_slice())
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

#[cfg(test)]
mod tests {
    use crate::{GrammarCompiler, JsonSchemaOptions, Vocabulary};

    fn compiler() -> GrammarCompiler {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(b"</s>".to_vec());
        GrammarCompiler::new(Vocabulary::from_token_bytes(&tokens, &[256], &[256]).unwrap())
    }

    /// Both partitions put the same nodes together (ids may differ).
    fn assert_same_partition(a: &[u32], b: &[u32]) {
        assert_eq!(a.len(), b.len());
        let mut ab = std::collections::HashMap::new();
        let mut ba = std::collections::HashMap::new();
        for (v, (&x, &y)) in a.iter().zip(b).enumerate() {
            assert_eq!(
                *ab.entry(x).or_insert(y),
                y,
                "node {v}: class {x} split in one"
            );
            assert_eq!(
                *ba.entry(y).or_insert(x),
                x,
                "node {v}: class {y} split in other"
            );
        }
    }

    fn check(g: &crate::CompiledGrammar) -> usize {
        let deadline = crate::limits::Deadline::never();
        let (class, count) = g.aut.mask_classes(&deadline).unwrap();
        assert!(class.iter().all(|&c| (c as usize) < count));
        let mut used = vec![false; count];
        class.iter().for_each(|&c| used[c as usize] = true);
        assert!(used.iter().all(|&u| u), "class ids are dense");
        assert_same_partition(&class, &g.aut.mask_classes_reference());
        count
    }

    #[test]
    fn the_worklist_refinement_finds_moores_partition() {
        let c = compiler();
        let grammars = [
            // Long literals that differ only at their far end, and shared suffixes.
            r#"root ::= "abababababababababababx" | "abababababababababababy" | "zzababababy""#,
            r#"root ::= a a b | b a a
               a ::= "xyz" | "xyzw"
               b ::= "xyz" ("q")*"#,
            r#"root ::= "[" (item ("," item)*)? "]"
               item ::= [0-9]+ | "\"" [a-z]* "\"" | root"#,
        ];
        for g in grammars {
            let compiled = c.compile_grammar(g).unwrap();
            check(&compiled);
        }
        check(&c.compile_builtin_json().unwrap());
        let schemas = [
            serde_json::json!({"type": "object", "properties": {
                "aaaaaaaaaaaaaaaaaaaaaa1": {"type": "string"},
                "aaaaaaaaaaaaaaaaaaaaaa2": {"type": "string", "maxLength": 3},
                "b": {"enum": ["red", "green", "greenish", "blue"]},
                "n": {"type": "integer", "minimum": -5, "maximum": 120},
                "list": {"type": "array", "items": {"$ref": "#"}}},
                "required": ["b", "n"]}),
            serde_json::json!({"anyOf": [{"type": "string", "format": "date"},
                {"type": "array", "items": {"type": "number"}, "minItems": 2}]}),
        ];
        for (i, s) in schemas.iter().enumerate() {
            for any_order in [false, true] {
                let o = JsonSchemaOptions {
                    any_order,
                    ..Default::default()
                };
                let compiled = c.compile_json_schema(s, &o).unwrap();
                let count = check(&compiled);
                // Rule automata are minimized, so nodes share a class only across rules;
                // the first schema's long keys still give such pairs.
                assert!(
                    i > 0 || count < compiled.aut.nodes.len(),
                    "schema {i}: some nodes share"
                );
            }
        }
    }

    /// A class's structure key is made when its future reaches at most
    /// [`MAX_KEY_CLASSES`] classes, and not past that: a literal's first letter has a key
    /// when the literal is short, none when it is longer than the limit (such futures,
    /// an object's members with their names, are seldom met again in another grammar,
    /// and their keys cost more than the walks they would save).
    #[test]
    fn keys_are_made_for_small_futures_only() {
        let c = compiler();
        let key_of_start = |lit: &str| {
            let g = c.compile_grammar(&format!("root ::= \"{lit}\"")).unwrap();
            let (class, count) = g
                .aut
                .mask_classes(&crate::limits::Deadline::never())
                .unwrap();
            let basis = g.aut.key_basis(&class, count);
            let start = g.aut.rule_start[g.aut.root as usize];
            g.aut.class_key(&basis, &class, class[start as usize])
        };
        let short: String = ('a'..='z').take(20).collect();
        let long: String = ('a'..='z')
            .chain('A'..='Z')
            .take(super::MAX_KEY_CLASSES + 4)
            .collect();
        assert!(key_of_start(&short).is_some());
        assert!(key_of_start(&long).is_none());
    }

    /// A class whose future is too big for a key is marked so, and a later key walk that
    /// meets it stops there (its future holds the marked one's): the key of a literal's
    /// start, made after its second letter's, visits one class instead of the limit's
    /// number, and is none, as a fresh walk finds.
    #[test]
    fn a_key_walk_stops_at_a_class_known_too_big() {
        use std::sync::atomic::Ordering::Relaxed;
        let c = compiler();
        let long: String = ('a'..='z')
            .chain('A'..='Z')
            .take(super::MAX_KEY_CLASSES + 4)
            .collect();
        let g = c.compile_grammar(&format!("root ::= \"{long}\"")).unwrap();
        let aut = &g.aut;
        let (class, count) = aut.mask_classes(&crate::limits::Deadline::never()).unwrap();
        let start = aut.rule_start[aut.root as usize];
        let second = aut.bytes_of(start)[0].target;
        let (c0, c1) = (class[start as usize], class[second as usize]);
        let fresh = aut.key_basis(&class, count);
        assert!(aut.class_key(&fresh, &class, c0).is_none());
        let walked_alone = fresh.spent.load(Relaxed);
        assert!(walked_alone > super::MAX_KEY_CLASSES, "{walked_alone}");
        let basis = aut.key_basis(&class, count);
        assert!(aut.class_key(&basis, &class, c1).is_none());
        let before = basis.spent.load(Relaxed);
        assert!(aut.class_key(&basis, &class, c0).is_none());
        assert_eq!(basis.spent.load(Relaxed) - before, 1, "one class visited");
        // Asked again, a marked class stops before any visit.
        assert!(aut.class_key(&basis, &class, c0).is_none());
        assert_eq!(basis.spent.load(Relaxed) - before, 1);
    }

    /// Class hashes are made on demand and kept: each equals the hash made by whole
    /// rounds over every class (the reference below), whatever order they are asked in,
    /// and a key of a class near the end of a long grammar hashes a few classes only.
    #[test]
    fn class_hashes_made_on_demand_equal_whole_rounds() {
        use std::sync::atomic::Ordering::Relaxed;
        let c = compiler();
        // Calls (whose labels are hashes) and a long literal (many classes).
        let g = c
            .compile_grammar(
                r#"root ::= "[" item ("," item)* "]" | "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
item ::= "a" | "(" item ")" | "{" item item "}"
"#,
            )
            .unwrap();
        let aut = &g.aut;
        let (class, count) = aut.mask_classes(&crate::limits::Deadline::never()).unwrap();
        let basis = aut.key_basis(&class, count);
        // The reference: round 0 per class, then whole rounds, as the eager basis was made.
        let rep = &basis.rep;
        let start = |rule: u32| class.get(aut.rule_start[rule as usize] as usize).copied();
        let mut h: Vec<u32> = rep
            .iter()
            .map(|&n| {
                let node = &aut.nodes[n as usize];
                let f = &aut.follow[node.rule as usize];
                (super::mix(&[node.is_final as u64, f[0], f[1], f[2], f[3]]) as u32).max(1)
            })
            .collect();
        for _ in 0..super::HASH_ROUNDS {
            h = rep
                .iter()
                .enumerate()
                .map(|(c, &n)| {
                    let node = &aut.nodes[n as usize];
                    let mut acc = h[c] as u64;
                    for e in aut.bytes_of(n) {
                        let t = h[class[e.target as usize] as usize] as u64;
                        acc = acc.wrapping_add(super::mix(&[1, e.lo as u64, e.hi as u64, t]));
                    }
                    for e in aut.calls_of(n) {
                        let callee = start(e.rule).map_or(u64::MAX, |s| h[s as usize] as u64);
                        let t = h[class[e.target as usize] as usize] as u64;
                        acc = acc.wrapping_add(super::mix(&[2, callee, t]));
                    }
                    for e in &aut.token_edges[node.tokens.0 as usize..node.tokens.1 as usize] {
                        let t = h[class[e.target as usize] as usize] as u64;
                        acc = acc.wrapping_add(super::mix(&[3, e.token as u64, t]));
                    }
                    (super::mix(&[acc]) as u32).max(1)
                })
                .collect();
        }
        // One key first (of the last class whose key hashes: one that reads a call or
        // two edges of one label): it hashes some classes, not all.
        let made = |b: &super::KeyBasis| {
            let memo = b.hash.get().expect("made by the key");
            memo.iter().filter(|x| x.load(Relaxed) != 0).count()
        };
        let keyed = (0..count as u32)
            .rev()
            .find(|&c| {
                let b = aut.key_basis(&class, count);
                aut.class_key(&b, &class, c).is_some() && made(&b) > 0
            })
            .expect("some class has a key that hashes");
        assert!(aut.class_key(&basis, &class, keyed).is_some());
        assert!(made(&basis) > 0);
        assert!(
            made(&basis) < (super::HASH_ROUNDS + 1) * count,
            "{} of {} hashes made for one key",
            made(&basis),
            (super::HASH_ROUNDS + 1) * count
        );
        // Then every class, from the last one down.
        let memo = basis.hash.get().unwrap();
        for c in (0..count as u32).rev() {
            let lazy = aut.class_hash(rep, &class, memo, super::HASH_ROUNDS, c);
            assert_eq!(lazy, h[c as usize], "class {c} of {count}");
        }
    }
}
