//! A rule's automaton with its indistinguishable states merged (issue 24, session 19's lead:
//! the JSON Schema front end's inline copies of shared tails leave many states whose futures
//! are equal; merged, a median MaskBench schema's automaton fell from 2,256 to 854 nodes).
//!
//! Two states are merged when no sequence of edges tells them apart: same finality, and edges
//! on the same byte ranges, callees and token ids into merged states (Moore's refinement,
//! applied to the edge lists as they are, so it holds for the ε-free NFA form too: merged
//! states are bisimilar, hence accept the same continuations and have the same masks). The
//! start stays state 0. Cost: one pass over the edges per round, rounds up to the length
//! of the longest chain of states that only its end tells apart, at most 64 (past that the
//! automaton is kept as built); paid once per rule the compiler's cache of rule automata
//! does not hold.

use super::build::Dfa;
use super::{ByteEdge, CallEdge, TokenEdge};
use rustc_hash::FxHashMap;

/// The most rounds of refinement tried; an automaton that needs more is kept as built
/// (the cost of a round is one pass over its edges).
const MAX_ROUNDS: usize = 64;

/// `dfa` with equivalent states merged; `dfa` itself when none are, or when telling its
/// states apart takes more than [`MAX_ROUNDS`] rounds.
pub(crate) fn minimize(dfa: Dfa) -> Dfa {
    let n = dfa.states.len();
    if n <= 1 {
        return dfa;
    }
    let mut block: Vec<u32> = dfa.states.iter().map(|s| s.is_final as u32).collect();
    let mut count = if block.contains(&0) && block.contains(&1) {
        2
    } else {
        1
    };
    let mut ids: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
    let mut sig = Vec::new();
    let mut scratch = Edges::default();
    let mut rounds = 0;
    loop {
        rounds += 1;
        if rounds > MAX_ROUNDS {
            // A long chain told apart only at its end (a 20,000-rule chain inlined): the
            // refinement would be quadratic. Stopping early would merge states that differ,
            // so keep the automaton as built.
            return dfa;
        }
        ids.clear();
        let mut next = Vec::with_capacity(n);
        for s in 0..n {
            sig.clear();
            sig.push(block[s]);
            scratch.of(&dfa, s, &block);
            scratch.write(&mut sig);
            let fresh = ids.len() as u32;
            next.push(match ids.get(&sig) {
                Some(&b) => b,
                None => {
                    ids.insert(sig.clone(), fresh);
                    fresh
                }
            });
        }
        block = next;
        // The signature holds the old block, so blocks only split: an unchanged count is
        // a fixed point.
        if ids.len() == count {
            break;
        }
        count = ids.len();
    }
    if count == n {
        return dfa;
    }
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

    fn write(&self, sig: &mut Vec<u32>) {
        sig.push(self.bytes.len() as u32);
        for &(lo, hi, b) in &self.bytes {
            sig.push((lo as u32) << 8 | hi as u32);
            sig.push(b);
        }
        sig.push(self.calls.len() as u32);
        for &(r, b) in &self.calls {
            sig.push(r);
            sig.push(b);
        }
        for &(t, b) in &self.tokens {
            sig.push(t);
            sig.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
