//! Free text that never contains any of a set of strings (`any_text` with `excludes`, the
//! text between triggered tags).
//!
//! The strings are matched Aho–Corasick style over code points: one rule per trie node that
//! no excluded string has completed, each `"" | c1 next1 | c2 next2 | [^A] start` where `A`
//! is the set of code points in the strings. Every call is a tail call, so the rules build
//! into one automaton (see the automaton's right-linear groups) with one node per trie
//! node: masks per node are precomputed like those of any regular rule.

use crate::grammar::builder::GrammarBuilder;
use crate::grammar::{CharClass, Expr, RuleId};
use rustc_hash::FxHashMap;

/// Any valid UTF-8 text: `[\u{0}-\u{10FFFF}]*`.
pub(crate) fn any_char() -> Expr {
    Expr::Class(CharClass {
        negated: false,
        ranges: vec![(0, 0x10FFFF)],
    })
}

/// Adds the rules of "text containing none of `excludes`" (non-empty strings) and returns
/// the expression that matches it.
pub(crate) fn text_avoiding(b: &mut GrammarBuilder, excludes: &[String], hint: &str) -> Expr {
    let mut words: Vec<Vec<char>> = excludes
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| s.chars().collect())
        .collect();
    words.sort();
    words.dedup();
    if words.is_empty() {
        return Expr::Repeat {
            expr: Box::new(any_char()),
            min: 0,
            max: None,
        };
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
    let ids: Vec<Option<RuleId>> = (0..n)
        .map(|s| (!done[s]).then(|| b.reserve(&format!("{hint}_{s}"))))
        .collect();
    let outside = Expr::Class(CharClass {
        negated: true,
        ranges: alphabet.iter().map(|&c| (c as u32, c as u32)).collect(),
    });
    for s in 0..n {
        let Some(id) = ids[s] else { continue };
        let mut by_target: Vec<(usize, Vec<(u32, u32)>)> = Vec::new();
        for (k, &c) in alphabet.iter().enumerate() {
            let t = delta[s][k];
            if done[t] {
                continue;
            }
            match by_target.iter_mut().find(|(x, _)| *x == t) {
                Some((_, cs)) => cs.push((c as u32, c as u32)),
                None => by_target.push((t, vec![(c as u32, c as u32)])),
            }
        }
        let mut alts = vec![
            Expr::Empty,
            Expr::Seq(vec![
                outside.clone(),
                Expr::Rule(ids[0].expect("root is live")),
            ]),
        ];
        for (t, ranges) in by_target {
            let class = Expr::Class(CharClass {
                negated: false,
                ranges,
            });
            alts.push(Expr::Seq(vec![class, Expr::Rule(ids[t].expect("live"))]));
        }
        b.set(id, Expr::Choice(alts));
    }
    Expr::Rule(ids[0].expect("the empty text contains no non-empty string"))
}
