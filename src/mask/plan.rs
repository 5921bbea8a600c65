//! Mask planning: which kind of mask each automaton node of a [`CompiledGrammar`] gets,
//! and where it comes from.
//!
//! A node's mask is one of:
//! * *shared*: bisimilar nodes share one mask class (`mask_classes`, on vocabularies of at
//!   least [`SHARE_MIN_TOKENS`] text tokens), and a class's structure key finds its mask in
//!   the compiler's content-keyed cache (`mask::shared`) before anything is walked;
//! * *call-only*: a node whose only edges are calls (or whose byte edges cover few tokens)
//!   is composed from its callees' start masks and context masks (`call_only_mask_by`);
//! * *delta*: a node whose first bytes mostly lead into a string-body loop takes that
//!   loop node's mask and walks only the other tokens (`mask::cache::delta_reference`);
//! * *counted*: a virtual node of a counted repetition is derived from a per-state base
//!   walk (`mask::counted`), or walked with the chart when its repetition is not
//!   deterministic;
//! * *walked*: otherwise, a trie walk from the node (`mask::cache`).
//!
//! Context masks (a node's uncertain tokens re-examined with one caller's rule after it)
//! are planned here too, as is the order of an eager precompute or a background fill.
//! Every mask is computed on first use and stored through a `OnceLock`, so eager,
//! background and lazy compiles store the same masks.

use crate::automaton::{Automaton, KeyBasis, Seeded};
use crate::compiler::CompiledGrammar;
use crate::limits::{Deadline, LimitExceeded};
use crate::mask::cache::{
    compute_node_mask, compute_pair_mask, delta_reference, first_bytes_walk_into, outside,
    NodeMask, TokenSet,
};
use crate::mask::counted::{base_key, body_dfa, counted_base, derive_mask, restarted, CountedBase};
use crate::mask::intern;
use crate::mask::token_set::Composer;
use crate::mask::TokenTrie;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::ops::Deref;
use std::sync::{Arc, OnceLock, RwLock};

#[cfg(test)]
pub(crate) mod tests;

/// Vocabularies with at least this many text tokens share masks between equivalent nodes.
pub(crate) const SHARE_MIN_TOKENS: usize = 8192;

/// (counted rule index, body state, distance to min, distance to max), clipped.
pub(crate) type VirtualKey = (u32, u32, u32, u32);

/// A node mask, borrowed from the grammar or shared from its cache of virtual-node masks.
pub(crate) enum MaskRef<'a> {
    Borrowed(&'a NodeMask),
    Shared(Arc<NodeMask>),
}

/// At most this many tokens under a node's first bytes make its walk cheap
/// ([`CompiledGrammar::cheap_walk`]): about the trie nodes a structure key costs.
const CHEAP_WALK_TOKENS: usize = 2048;

impl Deref for MaskRef<'_> {
    type Target = NodeMask;
    fn deref(&self) -> &NodeMask {
        match self {
            MaskRef::Borrowed(m) => m,
            MaskRef::Shared(m) => m,
        }
    }
}

/// Per real node its mask class, the number of classes, and the slot of the key basis
/// (`None` when masks are not shared across grammars).
pub(crate) type MaskClasses = (Vec<u32>, usize, Option<OnceLock<KeyBasis>>);

/// The mask classes of `aut`'s nodes, their number, and the slot of the key basis their
/// structure keys are made from. Sharing masks pays when a mask walk is costly (a real
/// vocabulary); over a few thousand tokens, finding the classes would cost more than the
/// walks it saves, so each node is then its own class and no key is made.
///
/// `seed`: the classes of an automaton sharing most rules with `aut` and, per rule of
/// `aut`, whether it was rebuilt since (`Automaton::mask_classes_seeded`: the refinement
/// then starts from the rebuilt rules).
///
/// # Errors
/// The limit error when `deadline` passes during the refinement.
pub(crate) fn mask_classes(
    aut: &Automaton,
    trie: &TokenTrie,
    deadline: &Deadline,
    seed: Option<Seeded<'_>>,
) -> Result<MaskClasses, LimitExceeded> {
    if trie.token_count() >= SHARE_MIN_TOKENS {
        let seeded = match seed {
            Some(seeded) => aut.mask_classes_seeded(seeded, deadline)?,
            None => None,
        };
        let (class, classes) = match seeded {
            Some(c) => c,
            None => aut.mask_classes(deadline)?,
        };
        Ok((class, classes, Some(OnceLock::new())))
    } else {
        let n = aut.nodes.len();
        Ok(((0..n as u32).collect(), n, None))
    }
}

impl CompiledGrammar {
    /// The mask of node `n`, computed on first use. `None` for nodes without byte or call
    /// edges (they accept no text token).
    pub(crate) fn node_mask(&self, n: u32) -> Option<MaskRef<'_>> {
        // Without a deadline the walk always finishes.
        self.node_mask_until(n, &Deadline::never()).unwrap_or(None)
    }

    /// As [`Self::node_mask`], but a mask not computed yet is walked only until `deadline`
    /// (the error then; nothing is stored).
    pub(crate) fn node_mask_until(
        &self,
        n: u32,
        deadline: &Deadline,
    ) -> Result<Option<MaskRef<'_>>, LimitExceeded> {
        Ok(self.node_mask_added(n, deadline)?.map(|(m, _)| m))
    }

    /// As [`Self::node_mask_until`], with the heap bytes the grammar holds anew for it: 0
    /// when the mask was known, or equal to one it holds (`mask::intern`).
    fn node_mask_added(
        &self,
        n: u32,
        deadline: &Deadline,
    ) -> Result<Option<(MaskRef<'_>, usize)>, LimitExceeded> {
        if self.aut.is_virtual(n) {
            let key = self.virtual_key(n);
            if let Some(m) = self.read_cache(&self.virtual_masks, &key) {
                return Ok(Some((MaskRef::Shared(m), 0)));
            }
            let (m, bytes) = self
                .interned
                .intern(Arc::new(self.virtual_mask_by(n, deadline)?));
            let mut w = self
                .virtual_masks
                .write()
                .unwrap_or_else(|e| e.into_inner());
            let m = w.entry(key).or_insert(m).clone();
            return Ok(Some((MaskRef::Shared(m), bytes)));
        }
        if !self.has_mask[n as usize] {
            return Ok(None);
        }
        let c = self.mask_class[n as usize] as usize;
        if let Some(m) = self.masks[c].get() {
            return Ok(Some((MaskRef::Borrowed(m), 0)));
        }
        let key = self
            .key_basis
            .as_ref()
            .filter(|_| !self.cheap_walk(n))
            .and_then(|basis| {
                let basis = basis.get_or_init(|| {
                    let classes = self.masks.len();
                    self.aut.key_basis(&self.mask_class, classes)
                });
                self.aut.class_key(basis, &self.mask_class, c as u32)
            });
        let (m, hash) = match key.as_ref().and_then(|k| self.shared.get(k)) {
            Some(hit) => hit,
            None => {
                let m = Arc::new(self.node_mask_by(n, deadline)?);
                let hash = intern::content_hash(&m);
                match &key {
                    Some(k) => self.shared.insert(k, m, hash),
                    None => (m, hash),
                }
            }
        };
        let (m, bytes) = self.interned.intern_hashed(m, hash);
        // Another thread may have set it meanwhile: the same mask, either one will do.
        Ok(Some((
            MaskRef::Borrowed(self.masks[c].get_or_init(|| m)),
            bytes,
        )))
    }

    /// Whether node `n`'s walk is cheaper than its structure key: it calls no rule and its
    /// first bytes start at most [`CHEAP_WALK_TOKENS`] tokens (a literal's next letters, a
    /// digit), so the walk visits no more trie nodes than the key would classes. Such a
    /// mask is walked again in each grammar rather than looked up (a key was most of the
    /// cost of a key literal's few-token mask).
    fn cheap_walk(&self, n: u32) -> bool {
        if !self.aut.calls_of(n).is_empty() {
            return false;
        }
        let mut tokens = 0;
        for e in self.aut.bytes_of(n) {
            for b in e.lo..=e.hi {
                tokens += self.trie.first_byte_range(b).len();
                if tokens > CHEAP_WALK_TOKENS {
                    return false;
                }
            }
        }
        true
    }

    /// The deadline for masks computed during one matcher call: the compiler's
    /// [`Limits::compile_time`], from the first walk's first look at it.
    pub(crate) fn lazy_deadline(&self) -> Deadline {
        Deadline::on_first_look(self.lazy_budget)
    }

    /// Walks node `n`'s uncertain tokens (`own`: its mask) for its context mask when called
    /// from `caller`; the limit error if `deadline` passed first.
    fn pair_mask_by(
        &self,
        own: &NodeMask,
        n: u32,
        caller: u32,
        deadline: &Deadline,
    ) -> Result<NodeMask, LimitExceeded> {
        self.walked(deadline, || {
            compute_pair_mask(&self.aut, &self.trie, own, n, caller, deadline)
        })
    }

    /// Walks the trie for node `n`'s mask (or composes it: [`Self::call_only_mask_by`]);
    /// the limit error if `deadline` passed first.
    fn node_mask_by(&self, n: u32, deadline: &Deadline) -> Result<NodeMask, LimitExceeded> {
        if let Some(m) = self.call_only_mask_by(n, deadline)? {
            return Ok(m);
        }
        let delta = delta_reference(&self.aut, &self.trie, &self.mask_class, n);
        // A reference has no reference of its own: this recursion is one level deep.
        let base = match &delta {
            Some(d) => self.node_mask_until(d.reference, deadline)?,
            None => None,
        };
        let from = base
            .as_deref()
            .zip(delta.as_ref())
            .map(|(b, d)| (b, d, &*self.text_bits));
        self.walked(deadline, || {
            compute_node_mask(
                &self.aut,
                &self.trie,
                n,
                self.vocab.bitmask_words(),
                (&self.subtrees, &self.mask_class),
                deadline,
                from,
            )
        })
    }

    /// The mask of a node whose only edges are calls (such as a member value's string after
    /// its opening quote), composed from its callees' start masks instead of walked with
    /// the chart: a token is accepted when some callee's start mask accepts it, or when it
    /// runs past that callee's end and the context mask of the pair (callee start, `n`)
    /// accepts it; it is uncertain when that context mask says so. This is the chart walk
    /// from `n` split by the callee its first byte enters, so the result is the same (the
    /// test `a_call_only_mask_equals_the_full_walk` compares the two), while the callee
    /// masks are often shared across grammars or derived (`mask::counted`), where a walk
    /// from `n` runs the chart over most of the vocabulary (~20 ms for 128k tokens).
    ///
    /// A nullable callee may also be skipped: the mask of the call's return node (same
    /// rule, same follow set) is then part of `n`'s.
    ///
    /// A node with byte edges beside its calls (a key state that avoids a schema's
    /// declared names: the next letter of a name, or the undeclared key's tail as a call)
    /// is composed the same way for the tokens whose first byte it has no edge on; the
    /// others, fewer than half of the vocabulary, are walked from `n` (the chart then
    /// sees both the edges and the calls). Its callees, and the return nodes of its
    /// nullable callees, must have no calls, so a composition never waits on another.
    ///
    /// `Ok(None)` when `n` is not such a node, or a callee starts at a call-only node
    /// itself, or a nullable callee returns to `n`, or to another call-only node whose own
    /// composition would read a call-only node again (so the composition never loops
    /// through left recursion); the limit error if `deadline` passed first.
    fn call_only_mask_by(
        &self,
        n: u32,
        deadline: &Deadline,
    ) -> Result<Option<NodeMask>, LimitExceeded> {
        let aut = &self.aut;
        let calls = aut.calls_of(n);
        if calls.is_empty() || aut.is_virtual(n) {
            return Ok(None);
        }
        let call_only = |m: u32| {
            !aut.is_virtual(m) && aut.bytes_of(m).is_empty() && !aut.calls_of(m).is_empty()
        };
        // Whether node `m`'s calls compose it without another call-only node.
        let leaf = |m: u32| {
            !aut.calls_of(m).iter().any(|c| {
                call_only(aut.rule_start[c.rule as usize])
                    || aut.nullable[c.rule as usize] && (c.target == m || call_only(c.target))
            })
        };
        let own = aut.bytes_of(n);
        if own.is_empty() {
            // A nullable callee may also be skipped: the token then starts at the call's
            // return node, which must be walked (or composed) without `n`'s mask. A
            // call-only return node (a value after whitespace) is composed when its own
            // composition reads no call-only node: one level, never a loop.
            if calls.iter().any(|c| {
                call_only(aut.rule_start[c.rule as usize])
                    || aut.nullable[c.rule as usize]
                        && (c.target == n || call_only(c.target) && !leaf(c.target))
            }) {
                return Ok(None);
            }
        } else if calls.iter().any(|c| {
            // A node with byte edges too composes only from nodes without calls, so no
            // composition ever waits on another.
            !aut.calls_of(aut.rule_start[c.rule as usize]).is_empty()
                || aut.nullable[c.rule as usize] && !aut.calls_of(c.target).is_empty()
        }) {
            return Ok(None);
        }
        // First bytes on `n`'s own byte edges: their tokens are walked from `n` (only when
        // they are fewer than half of the vocabulary: otherwise the walk is most of the
        // vocabulary anyway).
        let mut own_first = vec![false; 256];
        for e in own {
            own_first[e.lo as usize..=e.hi as usize].fill(true);
        }
        let own_ranges = self.trie.first_byte_ranges(&own_first);
        let own_tokens: usize = own_ranges.iter().map(|r| r.len()).sum();
        if own_tokens * 2 > self.trie.token_count() {
            return Ok(None);
        }
        // The accepted tokens: a list while the parts are short lists (`Composer`).
        let mut accepted = Composer::new(&self.trie, &self.text_bits);
        let mut uncertain: Vec<u32> = Vec::new();
        for c in calls {
            if aut.nullable[c.rule as usize] {
                if let Some(skip) = self.node_mask_until(c.target, deadline)? {
                    accepted.or(&skip.accepted);
                    uncertain.extend_from_slice(&skip.uncertain);
                }
            }
            let start = aut.rule_start[c.rule as usize];
            let Some(own) = self.node_mask_until(start, deadline)? else {
                continue;
            };
            accepted.or(&own.accepted);
            if own.uncertain.is_empty() {
                continue;
            }
            if !own_ranges.is_empty() {
                // Beside byte edges: the context mask of only the callee's uncertain tokens
                // that the walk below does not take over, and not kept (a key state's
                // context masks would add about half of an eager grammar's memory).
                let rule = aut.rule_of(start) as usize;
                if self.sites[rule].binary_search(&n).is_err() {
                    return Ok(None);
                }
                let rest = NodeMask {
                    accepted: TokenSet::default(),
                    uncertain: outside(&own.uncertain, &own_ranges),
                };
                if rest.uncertain.is_empty() {
                    continue;
                }
                let pair = self.pair_mask_by(&rest, start, n, deadline)?;
                accepted.or(&pair.accepted);
                uncertain.extend_from_slice(&pair.uncertain);
                continue;
            }
            let Some(pair) = self.pair_mask_until(start, n, deadline)? else {
                // Not a call site of the callee after all: leave it to the walk.
                return Ok(None);
            };
            accepted.or(&pair.accepted);
            uncertain.extend_from_slice(&pair.uncertain);
        }
        if !own.is_empty() {
            // The tokens whose first byte `n` has an edge on: the walk's verdict alone
            // (through the callees too), in place of the callees' above.
            accepted.remove_first_bytes(&own_first);
            uncertain.retain(|p| !own_ranges.iter().any(|r| r.contains(p)));
            let walked = self.walked(deadline, || {
                first_bytes_walk_into(
                    &self.aut,
                    &self.trie,
                    n,
                    (&self.subtrees, &self.mask_class),
                    deadline,
                    &own_first,
                    &mut accepted,
                )
            })?;
            uncertain.extend_from_slice(&walked);
        }
        uncertain.sort_unstable();
        uncertain.dedup();
        // A token accepted through one callee is not uncertain through another.
        let accepted = accepted.finish(&mut uncertain);
        Ok(Some(NodeMask {
            accepted,
            uncertain,
        }))
    }

    /// The mask of virtual node `n`: derived from the base walk of its body state when
    /// its repetition is deterministic (`mask::counted`: a base walk once per body state,
    /// then a fraction of a millisecond per count), else walked with the chart.
    fn virtual_mask_by(&self, n: u32, deadline: &Deadline) -> Result<NodeMask, LimitExceeded> {
        let k = self.aut.counted.partition_point(|c| c.first <= n) - 1;
        if !self.counted_derivable.get(k).copied().unwrap_or(false) {
            return self.node_mask_by(n, deadline);
        }
        let (s, to_min, to_max) = self.aut.counted[k].mask_key(n, self.max_token_len);
        let base = self.counted_base_of(k, s, deadline)?;
        Ok(derive_mask(
            &base,
            to_min,
            to_max,
            &self.trie,
            self.vocab.bitmask_words(),
        ))
    }

    /// The base walk of counted rule `k` (derivable) from body state `s`: this grammar's,
    /// else the compiler's shared one, else walked now (until `deadline`) and kept in both.
    pub(crate) fn counted_base_of(
        &self,
        k: usize,
        s: u32,
        deadline: &Deadline,
    ) -> Result<Arc<CountedBase>, LimitExceeded> {
        let cnt = &self.aut.counted[k];
        let s = cnt.representative(s);
        let key = (k as u32, s);
        if let Some(b) = self.read_cache(&self.counted_bases, &key) {
            return Ok(b);
        }
        let follow = &self.aut.follow[cnt.rule as usize];
        let shared_key = base_key(cnt, s, follow);
        let exit_only = s != 0 && cnt.body_final[s as usize] && cnt.edges_of(s).is_empty();
        let b = match self.shared.get_base(&shared_key) {
            Some(b) => b,
            // After a whole body (a string's character): state 0's walk, restarted.
            None if exit_only => {
                let zero = self.counted_base_of(k, 0, deadline)?;
                let b = restarted(&zero, s, &self.trie);
                self.shared.insert_base(&shared_key, Arc::new(b))
            }
            None => {
                let words = self.vocab.bitmask_words();
                // The rule's body DFA, from a base of another of its states when there is
                // one: one copy per rule, not per state.
                let dfa = self
                    .counted_bases
                    .read()
                    .ok()
                    .and_then(|m| {
                        m.iter()
                            .find(|((r, _), _)| *r == k as u32)
                            .map(|(_, b)| b.dfa().clone())
                    })
                    .unwrap_or_else(|| body_dfa(cnt, follow));
                let b = self.walked(deadline, || {
                    counted_base(cnt, s, dfa, &self.trie, words, deadline, true)
                })?;
                self.shared.insert_base(&shared_key, Arc::new(b))
            }
        };
        let mut w = self
            .counted_bases
            .write()
            .unwrap_or_else(|e| e.into_inner());
        Ok(w.entry(key).or_insert(b).clone())
    }

    /// Runs a mask walk under `deadline`. Once one walk under a bounded deadline ran out
    /// of time, later bounded walks of this grammar fail at once with the same error
    /// (retrying would spend the whole budget again on every matcher call); masks already
    /// computed keep being served, and unbounded walks always run.
    fn walked<T>(
        &self,
        deadline: &Deadline,
        walk: impl FnOnce() -> Option<T>,
    ) -> Result<T, LimitExceeded> {
        if deadline.is_bounded() {
            if let Some(e) = self.walk_failed.get() {
                return Err(e.clone());
            }
        }
        walk().ok_or_else(|| {
            let e = deadline.exceeded();
            let _ = self.walk_failed.set(e.clone());
            e
        })
    }

    /// The eager precompute of real node `n`'s mask class (as [`Self::node_mask`], but the
    /// walk stops at `deadline`). Returns the bytes the mask added (0 if it was known).
    pub(crate) fn precompute_node_mask(
        &self,
        n: u32,
        deadline: &Deadline,
    ) -> Result<usize, LimitExceeded> {
        if !self.has_mask[n as usize]
            || self.masks[self.mask_class[n as usize] as usize]
                .get()
                .is_some()
        {
            return Ok(0);
        }
        Ok(self.node_mask_added(n, deadline)?.map_or(0, |(_, b)| b))
    }

    /// One real node per mask class (the first of each), ascending: the node masks an
    /// eager precompute computes.
    fn class_representatives(&self) -> Vec<u32> {
        let mut first = vec![u32::MAX; self.masks.len()];
        for (n, &c) in self.mask_class.iter().enumerate().rev() {
            first[c as usize] = n as u32;
        }
        first.retain(|&n| n != u32::MAX);
        first
    }

    /// [`Self::class_representatives`] in the order a background fill computes them: the
    /// nodes reachable from the root's start, breadth first (through byte, token and call
    /// edges, and call returns), so the masks of the first steps come first; then the
    /// rest, ascending.
    pub(crate) fn fill_order(&self) -> Vec<u32> {
        let aut = &self.aut;
        let real = aut.nodes.len();
        let mut seen = vec![false; real];
        let mut order = Vec::with_capacity(real);
        let mut queue = std::collections::VecDeque::new();
        let mut visit = |n: u32, queue: &mut std::collections::VecDeque<u32>| {
            if (n as usize) < real && !std::mem::replace(&mut seen[n as usize], true) {
                queue.push_back(n);
            }
        };
        if let Some(&start) = aut.rule_start.get(aut.root as usize) {
            visit(start, &mut queue);
        }
        while let Some(n) = queue.pop_front() {
            order.push(n);
            for e in aut.bytes_of(n) {
                visit(e.target, &mut queue);
            }
            for e in aut.tokens_of(n) {
                visit(e.target, &mut queue);
            }
            for c in aut.calls_of(n) {
                visit(aut.rule_start[c.rule as usize], &mut queue);
                visit(c.target, &mut queue);
            }
        }
        order.extend((0..real as u32).filter(|&n| !seen[n as usize]));
        let mut taken = vec![false; self.masks.len()];
        order.retain(|&n| {
            let c = self.mask_class[n as usize] as usize;
            self.has_mask[n as usize] && !std::mem::replace(&mut taken[c], true)
        });
        order
    }

    /// (counted rule, body state) of the base walks an eager precompute computes: at the
    /// body states where an iteration may end (where tokens mostly stop inside a
    /// repetition), so each one's masks are then derived at any count in a fraction of a
    /// millisecond (`mask::counted`). Other states are walked on first use.
    pub(crate) fn counted_base_states(&self) -> Vec<(usize, u32)> {
        self.aut
            .counted
            .iter()
            .enumerate()
            .filter(|&(k, _)| self.counted_derivable[k])
            .flat_map(|(k, c)| {
                let mut finals: Vec<u32> = (0..c.states)
                    .filter(|&s| c.body_final[s as usize])
                    .map(|s| c.representative(s))
                    .collect();
                // A final state without edges takes state 0's base (`counted::restarted`):
                // that base is precomputed, and its bytes counted, too.
                if finals.iter().any(|&s| s != 0 && c.edges_of(s).is_empty()) {
                    finals.push(0);
                }
                finals.sort_unstable();
                finals.dedup();
                finals.into_iter().map(move |s| (k, s))
            })
            .collect()
    }

    /// (node, caller) of the context masks an eager precompute computes: every call site
    /// of the rule of each node whose mask has uncertain tokens (computes those node masks
    /// that are not computed yet).
    pub(crate) fn context_pairs(&self) -> Vec<(u32, u32)> {
        (0..self.aut.nodes.len() as u32)
            .filter(|&n| self.node_mask(n).is_some_and(|m| !m.uncertain.is_empty()))
            .flat_map(|n| {
                let rule = self.aut.rule_of(n) as usize;
                self.sites[rule].iter().map(move |&m| (n, m))
            })
            .collect()
    }

    /// The precompute of counted rule `k`'s base walk from body state `s` (the walk stops
    /// at `deadline`). Returns the bytes it holds, its rule's body DFA included when no
    /// other base holds it yet.
    pub(crate) fn precompute_counted_base(
        &self,
        k: usize,
        s: u32,
        deadline: &Deadline,
    ) -> Result<usize, LimitExceeded> {
        let b = self.counted_base_of(k, s, deadline)?;
        let dfa = b.dfa();
        let own = if Arc::strong_count(dfa) == 1 {
            dfa.memory_bytes()
        } else {
            0
        };
        Ok(b.memory_bytes() + own + 16)
    }

    /// True when real node `n`'s mask (that of its mask class) is computed; false for
    /// nodes without a mask.
    #[cfg(test)]
    pub(crate) fn mask_known(&self, n: u32) -> bool {
        self.has_mask[n as usize]
            && self.masks[self.mask_class[n as usize] as usize]
                .get()
                .is_some()
    }

    /// Called once a background fill has computed every mask: drops the walk memo.
    pub(crate) fn fill_finished(&self) {
        self.subtrees.clear();
    }

    /// The eager precompute of the context mask of real node `n` called from `caller` (as
    /// [`Self::pair_mask`], but the walk stops at `deadline`). Returns the bytes it added.
    pub(crate) fn precompute_pair_mask(
        &self,
        n: u32,
        caller: u32,
        deadline: &Deadline,
    ) -> Result<usize, LimitExceeded> {
        let rule = self.aut.rule_of(n) as usize;
        let sites = &self.sites[rule];
        let (Ok(k), Some(own)) = (sites.binary_search(&caller), self.node_mask(n)) else {
            return Ok(0);
        };
        let row = self.pair_masks[n as usize]
            .get_or_init(|| (0..sites.len()).map(|_| OnceLock::new()).collect());
        if row[k].get().is_some() {
            return Ok(0);
        }
        let m = self.pair_mask_by(&own, n, caller, deadline)?;
        let bytes = m.memory_bytes();
        let _ = row[k].set(m);
        Ok(bytes)
    }

    fn virtual_key(&self, n: u32) -> VirtualKey {
        let k = self.aut.counted.partition_point(|c| c.first <= n) - 1;
        let (s, to_min, to_max) = self.aut.counted[k].mask_key(n, self.max_token_len);
        (k as u32, s, to_min, to_max)
    }

    fn read_cache<K: std::hash::Hash + Eq, V>(
        &self,
        cache: &RwLock<FxHashMap<K, Arc<V>>>,
        key: &K,
    ) -> Option<Arc<V>> {
        cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    /// The mask of node `n` when its rule instance was called from node `caller` (which must
    /// be one of `sites[rule of n]`), computed on first use.
    pub(crate) fn pair_mask(&self, n: u32, caller: u32) -> Option<MaskRef<'_>> {
        // Without a deadline the walk always finishes.
        self.pair_mask_until(n, caller, &Deadline::never())
            .unwrap_or(None)
    }

    /// As [`Self::pair_mask`], but masks not computed yet are walked only until `deadline`
    /// (the error then; nothing is stored).
    pub(crate) fn pair_mask_until(
        &self,
        n: u32,
        caller: u32,
        deadline: &Deadline,
    ) -> Result<Option<MaskRef<'_>>, LimitExceeded> {
        let rule = self.aut.rule_of(n) as usize;
        let sites = &self.sites[rule];
        let Ok(k) = sites.binary_search(&caller) else {
            return Ok(None);
        };
        let Some(own) = self.node_mask_until(n, deadline)? else {
            return Ok(None);
        };
        let walk = || self.pair_mask_by(&own, n, caller, deadline);
        if self.aut.is_virtual(n) {
            let key = (self.virtual_key(n), caller);
            if let Some(m) = self.read_cache(&self.virtual_pair_masks, &key) {
                return Ok(Some(MaskRef::Shared(m)));
            }
            let m = Arc::new(walk()?);
            let mut w = self
                .virtual_pair_masks
                .write()
                .unwrap_or_else(|e| e.into_inner());
            return Ok(Some(MaskRef::Shared(w.entry(key).or_insert(m).clone())));
        }
        let row = self.pair_masks[n as usize]
            .get_or_init(|| (0..sites.len()).map(|_| OnceLock::new()).collect());
        if let Some(m) = row[k].get() {
            return Ok(Some(MaskRef::Borrowed(m)));
        }
        let m = walk()?;
        Ok(Some(MaskRef::Borrowed(row[k].get_or_init(|| m))))
    }

    /// Heap bytes of the key basis (kept only while masks may still be computed).
    pub(crate) fn key_basis_bytes(&self) -> usize {
        let basis = self.key_basis.as_ref().and_then(OnceLock::get);
        basis.map_or(0, KeyBasis::memory_bytes)
    }

    /// The eager precompute ([`crate::Precompute::Eager`]): one mask per mask class, the
    /// base walks of counted repetitions, then the context masks, each in parallel on the
    /// current rayon pool; `add` is told the bytes of each (and may stop the precompute
    /// with a memory limit). Drops the key basis and the walk memo afterwards.
    ///
    /// # Errors
    /// The limit error of `deadline` or of `add`.
    pub(crate) fn precompute_eager(
        &mut self,
        deadline: &Deadline,
        add: &(dyn Fn(usize) -> Result<(), LimitExceeded> + Sync),
    ) -> Result<(), LimitExceeded> {
        let this = &*self;
        this.class_representatives()
            .into_par_iter()
            .try_for_each(|n| {
                deadline.check()?;
                add(this.precompute_node_mask(n, deadline)?)
            })?;
        this.counted_base_states()
            .into_par_iter()
            .try_for_each(|(k, s)| {
                deadline.check()?;
                add(this.precompute_counted_base(k, s, deadline)?)
            })?;
        this.context_pairs()
            .into_par_iter()
            .try_for_each(|(n, m)| {
                deadline.check()?;
                add(this.precompute_pair_mask(n, m, deadline)?)
            })?;
        self.key_basis = None;
        self.subtrees.clear();
        Ok(())
    }
}
