//! A rule's automaton with its indistinguishable states merged (issue 24, session 19's lead:
//! the JSON Schema front end's inline copies of shared tails leave many states whose futures
//! are equal; merged, a median MaskBench schema's automaton fell from 2,256 to 854 nodes).
//!
//! Two states are merged when no sequence of edges tells them apart: same finality, and edges
//! on the same byte ranges, callees and token ids into merged states (Moore's refinement,
//! applied to the edge lists as they are, so it holds for the ε-free NFA form too: merged
//! states are bisimilar, hence accept the same continuations and have the same masks). The
//! start stays state 0. The refinement is the worklist form of `super::refine` (a round
//! re-signs only the states whose edge targets moved; session 22 — Moore's full rounds
//! were 30–37% of a tool tag's compile); paid once per rule the compiler's cache of rule
//! automata does not hold.

use super::build::Dfa;
use super::refine::{dependents, refine, Deps};
use super::{ByteEdge, CallEdge, TokenEdge};
use crate::limits::Deadline;

/// The most rounds of refinement tried; an automaton that needs more is kept as built. A
/// round costs work in proportion to the states that moved in the round before, so the
/// bound only stops chains of thousands of states told apart one per round.
const MAX_ROUNDS: usize = 4096;

/// `dfa` with equivalent states merged; `dfa` itself when none are, or when telling its
/// states apart takes more than [`MAX_ROUNDS`] rounds.
pub(crate) fn minimize(dfa: Dfa) -> Dfa {
    let n = dfa.states.len();
    if n <= 1 {
        return dfa;
    }
    let Some((block, count)) = blocks(&dfa) else {
        return dfa;
    };
    #[cfg(test)]
    tests::agrees_with_moore(&dfa, &block);
    if count == n {
        return dfa;
    }
    let mut scratch = Edges::default();
    // Number blocks by their first state, so the start's block is 0 and the order of
    // states is kept.
    let mut renumber = vec![u32::MAX; count];
    let mut firsts = Vec::with_capacity(count);
    for (s, &b) in block.iter().enumerate() {
        if renumber[b as usize] == u32::MAX {
            renumber[b as usize] = firsts.len() as u32;
            firsts.push(s);
        }
    }
    let block: Vec<u32> = block.iter().map(|&b| renumber[b as usize]).collect();
    let mut out = Dfa::default();
    for &s in &firsts {
        scratch.of(&dfa, s, &block);
        out.bytes.extend(
            scratch
                .bytes
                .iter()
                .map(|&(lo, hi, target)| ByteEdge { lo, hi, target }),
        );
        out.calls.extend(
            scratch
                .calls
                .iter()
                .map(|&(rule, target)| CallEdge { rule, target }),
        );
        out.tokens.extend(
            scratch
                .tokens
                .iter()
                .map(|&(token, target)| TokenEdge { token, target }),
        );
        out.push_state(dfa.states[s].is_final);
    }
    out
}

/// The block of every state (ids `0..count`) and `count`: the coarsest partition, finer
/// than finality, in which states of one block have edges on the same labels into the same
/// blocks (after [`Edges::of`]'s joining of ranges). Worklist refinement
/// (`super::refine`): O(m log n) signatures, not Moore's pass over every edge per round.
/// `None` past [`MAX_ROUNDS`] rounds.
fn blocks(dfa: &Dfa) -> Option<(Vec<u32>, usize)> {
    if let Some(found) = acyclic_blocks(dfa) {
        return Some(found);
    }
    let n = dfa.states.len();
    let first_final = dfa.states[0].is_final;
    let initial: Vec<u32> = dfa
        .states
        .iter()
        .map(|s| (s.is_final != first_final) as u32)
        .collect();
    let mut pairs: Vec<(u32, u32)> =
        Vec::with_capacity(dfa.bytes.len() + dfa.calls.len() + dfa.tokens.len());
    for (v, st) in dfa.states.iter().enumerate() {
        let v = v as u32;
        pairs.extend(dfa.bytes_of(st).iter().map(|e| (e.target, v)));
        pairs.extend(dfa.calls_of(st).iter().map(|e| (e.target, v)));
        pairs.extend(dfa.tokens_of(st).iter().map(|e| (e.target, v)));
    }
    let deps = dependents(n, &pairs);
    let mut scratch = Edges::default();
    let sign = |v: u32, class: &[u32], out: &mut Vec<u64>| {
        scratch.of(dfa, v as usize, class);
        scratch.write(out);
    };
    let r = refine(
        initial,
        None,
        &Deps::whole(&deps),
        sign,
        MAX_ROUNDS,
        &Deadline::never(),
    )
    .ok()?;
    r.settled.then_some((r.class, r.count))
}

/// [`blocks`] of a DFA without cycles (a tag's choice of literal begin strings, each
/// ending in its own call, is one of thousands of states), in one pass: states in post
/// order (every target before the states that reach it), each in the block of the states
/// with its finality and its edges into the same blocks. For an acyclic DFA that is the
/// coarsest such partition (by induction from the states without edges), found in time
/// linear in the edges instead of by refinement rounds. `None` when the DFA has a cycle.
fn acyclic_blocks(dfa: &Dfa) -> Option<(Vec<u32>, usize)> {
    const NEW: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let n = dfa.states.len();
    let targets = |v: usize, out: &mut Vec<u32>| {
        let st = &dfa.states[v];
        out.clear();
        out.extend(dfa.bytes_of(st).iter().map(|e| e.target));
        out.extend(dfa.calls_of(st).iter().map(|e| e.target));
        out.extend(dfa.tokens_of(st).iter().map(|e| e.target));
    };
    let mut mark = vec![NEW; n];
    let mut order: Vec<u32> = Vec::with_capacity(n);
    // (state, its targets, next target to visit)
    let mut stack: Vec<(u32, Vec<u32>, usize)> = Vec::new();
    let mut spare: Vec<Vec<u32>> = Vec::new();
    for s in 0..n {
        if mark[s] != NEW {
            continue;
        }
        let mut t = spare.pop().unwrap_or_default();
        targets(s, &mut t);
        mark[s] = OPEN;
        stack.push((s as u32, t, 0));
        while let Some((v, ts, i)) = stack.last_mut() {
            if let Some(&w) = ts.get(*i) {
                *i += 1;
                match mark[w as usize] {
                    OPEN => return None,
                    DONE => {}
                    _ => {
                        let mut t = spare.pop().unwrap_or_default();
                        targets(w as usize, &mut t);
                        mark[w as usize] = OPEN;
                        stack.push((w, t, 0));
                    }
                }
            } else {
                mark[*v as usize] = DONE;
                order.push(*v);
                if let Some((_, t, _)) = stack.pop() {
                    spare.push(t);
                }
            }
        }
    }
    let mut block = vec![u32::MAX; n];
    let mut ids: rustc_hash::FxHashMap<Vec<u32>, u32> = Default::default();
    let mut scratch = Edges::default();
    let mut sig: Vec<u32> = Vec::new();
    for &v in &order {
        scratch.of(dfa, v as usize, &block);
        sig.clear();
        sig.push(dfa.states[v as usize].is_final as u32);
        scratch.write(&mut sig);
        let next = ids.len() as u32;
        block[v as usize] = *ids.entry(sig.clone()).or_insert(next);
    }
    let count = ids.len();
    Some((block, count))
}

/// One state's edges with targets replaced by their blocks, sorted, without repeats, and
/// adjacent byte ranges into one block joined.
#[derive(Default)]
struct Edges {
    bytes: Vec<(u8, u8, u32)>,
    calls: Vec<(u32, u32)>,
    tokens: Vec<(u32, u32)>,
}

impl Edges {
    fn of(&mut self, dfa: &Dfa, s: usize, block: &[u32]) {
        let st = &dfa.states[s];
        self.bytes.clear();
        self.bytes.extend(
            dfa.bytes_of(st)
                .iter()
                .map(|e| (e.lo, e.hi, block[e.target as usize])),
        );
        self.bytes.sort_unstable();
        self.bytes.dedup();
        let mut w = 0;
        for r in 0..self.bytes.len() {
            let e = self.bytes[r];
            if w > 0 {
                let p = &mut self.bytes[w - 1];
                if p.2 == e.2 && p.1 as u16 + 1 == e.0 as u16 {
                    p.1 = e.1;
                    continue;
                }
            }
            self.bytes[w] = e;
            w += 1;
        }
        self.bytes.truncate(w);
        self.calls.clear();
        self.calls.extend(
            dfa.calls_of(st)
                .iter()
                .map(|e| (e.rule, block[e.target as usize])),
        );
        self.calls.sort_unstable();
        self.calls.dedup();
        self.tokens.clear();
        self.tokens.extend(
            dfa.tokens_of(st)
                .iter()
                .map(|e| (e.token, block[e.target as usize])),
        );
        self.tokens.sort_unstable();
        self.tokens.dedup();
    }

    /// Appends the lists to `sig`, each behind its length (the last one's is implied).
    fn write<T: From<u32>>(&self, sig: &mut Vec<T>) {
        sig.push((self.bytes.len() as u32).into());
        for &(lo, hi, b) in &self.bytes {
            sig.push(((lo as u32) << 8 | hi as u32).into());
            sig.push(b.into());
        }
        sig.push((self.calls.len() as u32).into());
        for &(r, b) in &self.calls {
            sig.push(r.into());
            sig.push(b.into());
        }
        for &(t, b) in &self.tokens {
            sig.push(t.into());
            sig.push(b.into());
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    /// Moore's refinement as session 21 ran it (every state re-signed every round, at most
    /// 64 rounds): the blocks the worklist form must find. `None` past 64 rounds.
    fn moore_blocks(dfa: &Dfa) -> Option<Vec<u32>> {
        let n = dfa.states.len();
        let mut block: Vec<u32> = dfa.states.iter().map(|s| s.is_final as u32).collect();
        let mut count = 1 + (block.contains(&0) && block.contains(&1)) as usize;
        let mut ids: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
        let mut sig = Vec::new();
        let mut scratch = Edges::default();
        for _ in 0..64 {
            ids.clear();
            let mut next = Vec::with_capacity(n);
            for s in 0..n {
                sig.clear();
                sig.push(block[s]);
                scratch.of(dfa, s, &block);
                scratch.write(&mut sig);
                let fresh = ids.len() as u32;
                next.push(*ids.entry(sig.clone()).or_insert(fresh));
            }
            block = next;
            if ids.len() == count {
                return Some(block);
            }
            count = ids.len();
        }
        None
    }

    /// Both partitions put the same states together (ids may differ).
    fn same_partition(a: &[u32], b: &[u32]) -> bool {
        let mut ab = FxHashMap::default();
        let mut ba = FxHashMap::default();
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(&x, &y)| *ab.entry(x).or_insert(y) == y && *ba.entry(y).or_insert(x) == x)
    }

    /// Called by every minimization in the crate's unit tests (every rule automaton that
    /// any of them builds): the worklist blocks are Moore's.
    pub(super) fn agrees_with_moore(dfa: &Dfa, block: &[u32]) {
        if dfa.len() > 4000 {
            return;
        }
        if let Some(moore) = moore_blocks(dfa) {
            assert!(same_partition(&moore, block), "minimization: {dfa:?}");
        }
    }

    /// A seeded xorshift generator: `rand(m)` is in `0..m` (0 when `m` is 0). The one
    /// generator of the crate's unit tests.
    pub(crate) fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |m| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m.max(1)
        }
    }

    /// Random automata of 1–40 states over a few byte ranges, calls and tokens, with
    /// overlapping ranges (the ε-free NFA form) in some: the worklist blocks are Moore's,
    /// and the minimized automaton is a fixed point.
    #[test]
    fn worklist_blocks_are_moores_on_random_automata() {
        let mut rand = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut merged = 0;
        for round in 0..3000 {
            let n = 1 + rand(40) as u32;
            let mut d = Dfa::default();
            for _ in 0..n {
                for _ in 0..rand(4) {
                    let lo = b'a' + rand(6) as u8;
                    let hi = if round % 3 == 0 {
                        lo + rand(3) as u8
                    } else {
                        lo
                    };
                    d.bytes.push(ByteEdge {
                        lo,
                        hi,
                        target: rand(n as u64) as u32,
                    });
                }
                if rand(4) == 0 {
                    let (rule, target) = (rand(2) as u32, rand(n as u64) as u32);
                    d.calls.push(CallEdge { rule, target });
                }
                if rand(8) == 0 {
                    let (token, target) = (rand(2) as u32, rand(n as u64) as u32);
                    d.tokens.push(TokenEdge { token, target });
                }
                d.push_state(rand(3) == 0);
            }
            let (block, count) = blocks(&d).expect("settles");
            let moore = moore_blocks(&d).expect("settles in 64 rounds");
            assert!(same_partition(&moore, &block), "{d:?}");
            let m = minimize(d.clone());
            assert_eq!(m.len(), count);
            assert_eq!(minimize(m.clone()).len(), m.len(), "a fixed point");
            merged += (count < n as usize) as usize;
        }
        assert!(merged > 300, "the sample merges states ({merged})");
    }

    /// Random acyclic automata (every edge to a later state, the form of a tag's choice of
    /// literals): the one-pass blocks are Moore's and merge states in a good part of the
    /// sample; a back edge makes the one-pass form give way to refinement.
    #[test]
    fn acyclic_blocks_are_moores_on_random_dags() {
        let mut rand = xorshift(0x2545_f491_4f6c_dd1d);
        let mut merged = 0;
        for _ in 0..2000 {
            let n = 2 + rand(40) as u32;
            let mut d = Dfa::default();
            for v in 0..n {
                let later = |r: u64| v + 1 + r as u32;
                let room = (n - v - 1) as u64;
                if room > 0 {
                    for _ in 0..rand(4) {
                        let lo = b'a' + rand(4) as u8;
                        let target = later(rand(room.min(3)));
                        d.bytes.push(ByteEdge { lo, hi: lo, target });
                    }
                    if rand(5) == 0 {
                        let target = later(rand(room));
                        d.calls.push(CallEdge {
                            rule: rand(2) as u32,
                            target,
                        });
                    }
                }
                d.push_state(rand(3) == 0 || room == 0);
            }
            let (block, count) = acyclic_blocks(&d).expect("acyclic");
            let moore = moore_blocks(&d).expect("settles in 64 rounds");
            assert!(same_partition(&moore, &block), "{d:?}");
            assert_eq!(minimize(d.clone()).len(), count);
            merged += (count < n as usize) as usize;
            // One loop on the last state: a cycle.
            let mut c = d.clone();
            let last = n - 1;
            c.bytes.push(ByteEdge {
                lo: b'z',
                hi: b'z',
                target: last,
            });
            if let Some(st) = c.states.last_mut() {
                st.bytes.1 = c.bytes.len() as u32;
            }
            assert!(acyclic_blocks(&c).is_none());
        }
        assert!(merged > 300, "the sample merges states ({merged})");
    }

    /// A chain of 3,000 states told apart only at its end (one state per round, past
    /// Moore's old cap of 64 rounds), ending in two equal final states: the worklist
    /// settles it and merges the two.
    #[test]
    fn a_long_chain_settles() {
        let n = 3_000u32;
        let mut d = Dfa::default();
        for s in 0..n {
            let e = |lo: u8, target: u32| ByteEdge { lo, hi: lo, target };
            if s + 1 < n {
                d.bytes.push(e(b'a', s + 1));
            } else {
                d.bytes.extend([e(b'b', n), e(b'c', n + 1)]);
            }
            d.push_state(false);
        }
        d.push_state(true);
        d.push_state(true);
        let m = minimize(d);
        assert_eq!(m.len(), n as usize + 1);
        assert_eq!(m.bytes.last().map(|e| (e.lo, e.hi)), Some((b'b', b'c')));
    }

    /// A state: finality, byte edges `(lo, hi, target)`, call edges `(rule, target)`.
    type State<'a> = (bool, &'a [(u8, u8, u32)], &'a [(u32, u32)]);
    /// The same, owned.
    type Shape = Vec<(bool, Vec<(u8, u8, u32)>, Vec<(u32, u32)>)>;

    fn dfa(states: &[State]) -> Dfa {
        let mut d = Dfa::default();
        for (fin, bytes, calls) in states {
            d.bytes.extend(
                bytes
                    .iter()
                    .map(|&(lo, hi, target)| ByteEdge { lo, hi, target }),
            );
            d.calls.extend(
                calls
                    .iter()
                    .map(|&(rule, target)| CallEdge { rule, target }),
            );
            d.push_state(*fin);
        }
        d
    }

    fn shape(d: &Dfa) -> Shape {
        d.states
            .iter()
            .map(|s| {
                (
                    s.is_final,
                    d.bytes_of(s)
                        .iter()
                        .map(|e| (e.lo, e.hi, e.target))
                        .collect(),
                    d.calls_of(s).iter().map(|e| (e.rule, e.target)).collect(),
                )
            })
            .collect()
    }

    /// `a(x|y)` written with two copies of the tail `x|y`, and a state that splits a range
    /// (`[x-y]` as `x`, `y` into equal states): the copies merge, the range joins, the
    /// start stays 0.
    #[test]
    fn equal_futures_merge_and_the_start_stays_first() {
        let d = dfa(&[
            (false, &[(b'a', b'a', 1), (b'b', b'b', 2)], &[]),
            (false, &[(b'x', b'x', 3), (b'y', b'y', 4)], &[]),
            (false, &[(b'x', b'y', 3)], &[]),
            (true, &[], &[]),
            (true, &[], &[]),
        ]);
        let m = minimize(d);
        assert_eq!(
            shape(&m),
            [
                (false, vec![(b'a', b'b', 1)], vec![]),
                (false, vec![(b'x', b'y', 2)], vec![]),
                (true, vec![], vec![]),
            ]
        );
    }

    /// States that differ in finality, in a callee or only at the end of a chain stay apart.
    #[test]
    fn distinguishable_states_stay() {
        let d = dfa(&[
            (false, &[(b'a', b'a', 1), (b'b', b'b', 2)], &[]),
            (false, &[], &[(7, 3)]),
            (false, &[], &[(8, 3)]),
            (true, &[], &[]),
        ]);
        assert_eq!(minimize(d.clone()).len(), 4);
        let chain = dfa(&[
            (false, &[(b'a', b'a', 1), (b'b', b'b', 3)], &[]),
            (false, &[(b'c', b'c', 2)], &[]),
            (true, &[], &[]),
            (false, &[(b'c', b'c', 4)], &[]),
            (false, &[], &[]),
        ]);
        // 1 → final, 3 → a dead end: apart; the dead end 4 is not final.
        assert_eq!(minimize(chain).len(), 5);
    }
}
