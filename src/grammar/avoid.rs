//! Text that never contains any of a set of strings, as right-linear rules: the shared
//! primitive behind a structural tag's free text (`any_text` with `excludes`) and JSON
//! string bodies that must not hold a tool-call family's markers.
//!
//! The strings are matched Aho–Corasick style over code points: one rule per trie node that
//! no excluded string has completed, each `end | c1 next1 | c2 next2 | [^A] start |
//! restart start` where `A` is the set of code points in the strings (plus the code points
//! the caller bans). Every call is a tail call, so the rules build into one automaton (see
//! the automaton's right-linear groups) with one node per trie node: masks per node are
//! precomputed like those of any regular rule.

use super::{CharClass, Expr, RuleId};
use rustc_hash::FxHashMap;

/// The moves of one state: (target live state, its characters as ranges).
type Moves = Vec<(usize, Vec<(u32, u32)>)>;

/// The live states of the Aho–Corasick automaton of some strings (state 0 is the start):
/// for each, the characters that move to another live state. A character of the strings
/// that is not listed from a state would complete one of them; a character outside
/// [`Avoid::alphabet`] goes back to the start.
pub(crate) struct Avoid {
    /// Code points of the strings, sorted (none banned).
    alphabet: Vec<char>,
    /// Per live state: (target live state, its characters as ranges).
    moves: Vec<Moves>,
    /// Code points a caller banned (never written as one character of the text).
    banned: Vec<(u32, u32)>,
}

impl Avoid {
    /// The automaton of text avoiding `words`, in which the code points of `banned` are
    /// never written as characters (the caller's grammar writes them otherwise, as escapes,
    /// or not at all): empty words and words holding a banned code point are ignored.
    /// `None` when no word is left.
    pub(crate) fn new(words: &[String], banned: &[(u32, u32)]) -> Option<Avoid> {
        let is_banned = |c: char| {
            banned
                .iter()
                .any(|&(lo, hi)| (lo..=hi).contains(&(c as u32)))
        };
        // A word with a banned code point is never written as characters of the text.
        let mut words: Vec<Vec<char>> = words
            .iter()
            .filter(|s| !s.is_empty() && !s.chars().any(is_banned))
            .map(|s| s.chars().collect())
            .collect();
        words.sort();
        words.dedup();
        if words.is_empty() {
            return None;
        }
        // The trie, its failure links and the full transition function over the alphabet.
        let mut goto: Vec<FxHashMap<char, usize>> = vec![FxHashMap::default()];
        let mut done: Vec<bool> = vec![false];
        for w in &words {
            let mut s = 0;
            for &c in w {
                s = match goto[s].get(&c) {
                    Some(&t) => t,
                    None => {
                        goto.push(FxHashMap::default());
                        done.push(false);
                        let t = goto.len() - 1;
                        goto[s].insert(c, t);
                        t
                    }
                };
            }
            done[s] = true;
        }
        let mut alphabet: Vec<char> = words.iter().flatten().copied().collect();
        alphabet.sort_unstable();
        alphabet.dedup();
        let n = goto.len();
        let mut fail = vec![0usize; n];
        let mut delta: Vec<Vec<usize>> = vec![vec![0; alphabet.len()]; n];
        // Breadth-first: a node's failure target is shallower, so finished before it.
        let mut order = vec![0usize];
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            i += 1;
            if s != 0 {
                done[s] = done[s] || done[fail[s]];
            }
            for (k, &c) in alphabet.iter().enumerate() {
                match goto[s].get(&c) {
                    Some(&t) => {
                        fail[t] = if s == 0 { 0 } else { delta[fail[s]][k] };
                        delta[s][k] = t;
                        order.push(t);
                    }
                    None => delta[s][k] = if s == 0 { 0 } else { delta[fail[s]][k] },
                }
            }
        }
        // Live states numbered in trie order; the root is live (no word is empty).
        let mut live = vec![usize::MAX; n];
        let mut count = 0;
        for s in 0..n {
            if !done[s] {
                live[s] = count;
                count += 1;
            }
        }
        let mut moves = Vec::with_capacity(count);
        for s in (0..n).filter(|&s| !done[s]) {
            let mut by_target: Moves = Vec::new();
            for (k, &c) in alphabet.iter().enumerate() {
                let t = delta[s][k];
                if done[t] {
                    continue;
                }
                let t = live[t];
                match by_target.iter_mut().find(|(x, _)| *x == t) {
                    Some((_, cs)) => cs.push((c as u32, c as u32)),
                    None => by_target.push((t, vec![(c as u32, c as u32)])),
                }
            }
            moves.push(by_target);
        }
        Some(Avoid {
            alphabet,
            moves,
            banned: banned.to_vec(),
        })
    }

    /// The number of rules [`Avoid::bodies`] needs: one per live state, then the rule
    /// that leaves the strings (shared by every state).
    pub(crate) fn len(&self) -> usize {
        self.moves.len() + 1
    }

    /// The bodies of the rules `ids` ([`Avoid::len`] of them): one per live state
    /// (`ids[0]` the start), each of which may take `end` (where the text stops), go on
    /// to the last rule, or take a character of the strings (to the next live state); and
    /// last the rule every state shares, which takes a character outside the strings and
    /// `banned`, or one of `restarts` (units such as escape sequences), back to the start.
    ///
    /// Why one shared rule: those characters are most of the text's bytes (every other
    /// code point, as one to four bytes of UTF-8). Written in each state, their UTF-8
    /// prefixes were built once per state, and the subset construction made a state per
    /// live state and prefix (20× the minimal automaton) for minimization to merge back;
    /// as a tail call of one rule, they are built once.
    pub(crate) fn bodies(&self, ids: &[RuleId], end: &Expr, restarts: &[Expr]) -> Vec<Expr> {
        let mut outside_ranges = self.banned.clone();
        outside_ranges.extend(self.alphabet.iter().map(|&c| (c as u32, c as u32)));
        let outside = Expr::Class(CharClass {
            negated: true,
            ranges: outside_ranges,
        });
        let leave = ids[self.moves.len()];
        let mut bodies: Vec<Expr> = self
            .moves
            .iter()
            .map(|moves| {
                let mut alts = vec![end.clone(), Expr::Rule(leave)];
                for (t, ranges) in moves {
                    let class = Expr::Class(CharClass {
                        negated: false,
                        ranges: ranges.clone(),
                    });
                    alts.push(Expr::Seq(vec![class, Expr::Rule(ids[*t])]));
                }
                Expr::Choice(alts)
            })
            .collect();
        let mut alts = vec![Expr::Seq(vec![outside, Expr::Rule(ids[0])])];
        for r in restarts {
            alts.push(Expr::Seq(vec![r.clone(), Expr::Rule(ids[0])]));
        }
        bodies.push(Expr::Choice(alts));
        bodies
    }
}
