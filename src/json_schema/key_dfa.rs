//! Deterministic automata over characters (code points of decoded JSON text).
//!
//! - Key languages of `patternProperties`: an automaton over the characters of plain
//!   (unescaped) JSON keys that tells, for every key, which patterns match it and whether it
//!   is a declared name. From it come, for each set of matching patterns, the grammar of
//!   exactly the keys that match those patterns and no other (the complement a single regex
//!   grammar cannot give), none of them a declared name.
//! - String values whose decoded text must match a `pattern` *and* have a length in
//!   `minLength..=maxLength` characters: the product of the pattern's automaton with a
//!   character counter ([`KeyDfa::bounded`]), so both keywords hold exactly (JSON Schema
//!   draft 2020-12 §6.3.1–6.3.3) instead of one being dropped. `bounded` takes a tag set,
//!   so several regular languages at once (a `pattern` and a `format`) would use the same
//!   product; that is not wired yet.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::grammar::{CharClass, Expr};

/// The most NFA states (after expanding counted repetitions).
const MAX_NFA_STATES: usize = 20_000;

/// The most DFA states.
const MAX_DFA_STATES: usize = 400;

/// A Thompson NFA over code points.
#[derive(Default)]
struct Nfa {
    /// ε-edges per state.
    eps: Vec<Vec<usize>>,
    /// Character edges per state: ranges (inclusive) and target.
    edges: Vec<Vec<((u32, u32), usize)>>,
    /// The tag of an accepting state (bit index), if any.
    accept: Vec<Option<usize>>,
}

impl Nfa {
    fn state(&mut self) -> Result<usize, String> {
        if self.eps.len() >= MAX_NFA_STATES {
            return Err("the patterns' automaton is too large".into());
        }
        self.eps.push(Vec::new());
        self.edges.push(Vec::new());
        self.accept.push(None);
        Ok(self.eps.len() - 1)
    }

    /// Adds `e` from `from`; returns its end state.
    fn add(&mut self, e: &Expr, from: usize) -> Result<usize, String> {
        Ok(match e {
            Expr::Empty => from,
            Expr::Bytes(b) => {
                let s = std::str::from_utf8(b).map_err(|_| "a pattern is not text")?;
                let mut at = from;
                for c in s.chars() {
                    let n = self.state()?;
                    self.edges[at].push(((c as u32, c as u32), n));
                    at = n;
                }
                at
            }
            Expr::Class(c) => {
                let n = self.state()?;
                for r in c.normalized() {
                    self.edges[from].push((r, n));
                }
                n
            }
            Expr::Seq(v) => {
                let mut at = from;
                for x in v {
                    at = self.add(x, at)?;
                }
                at
            }
            Expr::Choice(v) => {
                let end = self.state()?;
                for x in v {
                    let s = self.state()?;
                    self.eps[from].push(s);
                    let t = self.add(x, s)?;
                    self.eps[t].push(end);
                }
                end
            }
            Expr::Repeat { expr, min, max } => {
                let mut at = from;
                for _ in 0..*min {
                    at = self.add(expr, at)?;
                }
                match max {
                    None => {
                        let s = self.state()?;
                        self.eps[at].push(s);
                        let t = self.add(expr, s)?;
                        self.eps[t].push(s);
                        s
                    }
                    Some(m) => {
                        let end = self.state()?;
                        for _ in *min..*m {
                            self.eps[at].push(end);
                            at = self.add(expr, at)?;
                        }
                        self.eps[at].push(end);
                        end
                    }
                }
            }
            Expr::Rule(_) | Expr::Token(_) => {
                return Err("a pattern's grammar has rules or tokens".into())
            }
        })
    }

    fn closure(&self, set: &mut BTreeSet<usize>) {
        let mut stack: Vec<usize> = set.iter().copied().collect();
        while let Some(s) = stack.pop() {
            for &t in &self.eps[s] {
                if set.insert(t) {
                    stack.push(t);
                }
            }
        }
    }
}

/// The automaton of the keys: states, transitions on character intervals, and per state
/// the set (bits) of tags of its accepting NFA states.
pub(crate) struct KeyDfa {
    /// Per state: (interval, target) transitions; intervals of plain key characters.
    trans: Vec<Vec<((u32, u32), usize)>>,
    /// Per state: the tags accepted there (bit `i`: language `i`).
    tags: Vec<u64>,
}

/// Characters a plain JSON key may hold (no escapes).
const PLAIN: &[(u32, u32)] = &[(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)];

/// Every Unicode scalar value: the characters a decoded JSON string may hold (raw or
/// escaped).
const SCALARS: &[(u32, u32)] = &[(0, 0xD7FF), (0xE000, 0x10FFFF)];

/// The most (state, count) pairs [`KeyDfa::bounded`] turns into rules: past it the schema is
/// refused rather than compiled into a grammar too large to be useful.
pub(crate) const MAX_BOUNDED_PAIRS: usize = 6_000;

/// The JSON string content (escapes included) of one character from a set of code-point
/// ranges, or `None` when it has none.
pub(crate) type EscapeClass<'a> = &'a dyn Fn(&[(u32, u32)]) -> Option<Expr>;

impl KeyDfa {
    /// The automaton of the languages `langs` (grammars over decoded text; language `i` sets
    /// tag bit `i`), at most 64 of them, over plain key characters.
    pub(crate) fn new(langs: &[Expr]) -> Result<KeyDfa, String> {
        Self::over(langs, PLAIN)
    }

    /// As [`KeyDfa::new`], over every character a decoded JSON string may hold.
    pub(crate) fn scalars(langs: &[Expr]) -> Result<KeyDfa, String> {
        Self::over(langs, SCALARS)
    }

    /// As [`KeyDfa::new`], over the characters in `alphabet` (sorted, disjoint, inclusive).
    fn over(langs: &[Expr], alphabet: &[(u32, u32)]) -> Result<KeyDfa, String> {
        if langs.len() > 64 {
            return Err("more than 64 key languages".into());
        }
        let mut nfa = Nfa::default();
        let start = nfa.state()?;
        for (i, e) in langs.iter().enumerate() {
            let s = nfa.state()?;
            nfa.eps[start].push(s);
            let t = nfa.add(e, s)?;
            let acc = nfa.state()?;
            nfa.eps[t].push(acc);
            nfa.accept[acc] = Some(i);
        }
        // The alphabet's intervals: cut the plain characters at every range boundary.
        let mut cuts: BTreeSet<u32> = BTreeSet::new();
        for &(lo, hi) in alphabet {
            cuts.insert(lo);
            cuts.insert(hi + 1);
        }
        for edges in &nfa.edges {
            for &((lo, hi), _) in edges {
                cuts.insert(lo);
                cuts.insert(hi.saturating_add(1));
            }
        }
        let cuts: Vec<u32> = cuts.into_iter().collect();
        let mut intervals: Vec<(u32, u32)> = Vec::new();
        for w in cuts.windows(2) {
            let (lo, hi) = (w[0], w[1] - 1);
            if alphabet.iter().any(|&(a, b)| a <= lo && hi <= b) {
                intervals.push((lo, hi));
            }
        }
        let mut init = BTreeSet::from([start]);
        nfa.closure(&mut init);
        let mut ids: HashMap<BTreeSet<usize>, usize> = HashMap::new();
        let mut sets: Vec<BTreeSet<usize>> = Vec::new();
        ids.insert(init.clone(), 0);
        sets.push(init);
        let mut trans: Vec<Vec<((u32, u32), usize)>> = Vec::new();
        let mut tags: Vec<u64> = Vec::new();
        let mut i = 0;
        while i < sets.len() {
            let set = sets[i].clone();
            tags.push(
                set.iter()
                    .filter_map(|&s| nfa.accept[s])
                    .fold(0u64, |m, t| m | 1 << t),
            );
            let mut row = Vec::new();
            for &(lo, hi) in &intervals {
                let mut next = BTreeSet::new();
                for &s in &set {
                    for &((a, b), t) in &nfa.edges[s] {
                        if a <= lo && hi <= b {
                            next.insert(t);
                        }
                    }
                }
                // The empty set is a state too: keys no language matches.
                nfa.closure(&mut next);
                let id = match ids.get(&next) {
                    Some(&id) => id,
                    None => {
                        if sets.len() >= MAX_DFA_STATES {
                            return Err("the patterns' automaton has too many states".into());
                        }
                        ids.insert(next.clone(), sets.len());
                        sets.push(next);
                        sets.len() - 1
                    }
                };
                row.push(((lo, hi), id));
            }
            trans.push(row);
            i += 1;
        }
        Ok(KeyDfa { trans, tags })
    }

    /// The tag sets of the keys: every set some key ends with.
    pub(crate) fn tag_sets(&self) -> BTreeSet<u64> {
        self.tags.iter().copied().collect()
    }

    /// The rest of a JSON key after its opening quote (closing quote included): the plain
    /// keys whose tag set is exactly `want`, as rules built through `add_rule` (one per
    /// state that can reach such an end). `None` when there is no such key.
    pub(crate) fn keys_with(
        &self,
        want: u64,
        add_rule: &mut dyn FnMut(Expr) -> crate::grammar::RuleId,
        set_body: &mut dyn FnMut(crate::grammar::RuleId, Expr),
    ) -> Option<Expr> {
        let n = self.trans.len();
        // States that can reach an end with tag set `want`.
        let mut live: Vec<bool> = self.tags.iter().map(|&t| t == want).collect();
        let mut changed = true;
        while changed {
            changed = false;
            for s in 0..n {
                if !live[s] && self.trans[s].iter().any(|&(_, t)| live[t]) {
                    live[s] = true;
                    changed = true;
                }
            }
        }
        if !live[0] {
            return None;
        }
        let ids: Vec<Option<crate::grammar::RuleId>> = (0..n)
            .map(|s| live[s].then(|| add_rule(Expr::Empty)))
            .collect();
        for s in 0..n {
            let Some(id) = ids[s] else { continue };
            let mut alts = Vec::new();
            if self.tags[s] == want {
                alts.push(super::lit("\""));
            }
            // Group the intervals by target.
            let mut by_target: BTreeMap<usize, Vec<(u32, u32)>> = BTreeMap::new();
            for &(r, t) in &self.trans[s] {
                if live[t] {
                    by_target.entry(t).or_default().push(r);
                }
            }
            for (t, ranges) in by_target {
                alts.push(super::seq(vec![
                    Expr::Class(CharClass {
                        negated: false,
                        ranges,
                    }),
                    Expr::Rule(ids[t]?),
                ]));
            }
            let body = if alts.len() == 1 {
                alts.pop()?
            } else {
                Expr::Choice(alts)
            };
            set_body(id, body);
        }
        Some(Expr::Rule(ids[0]?))
    }

    /// The strings (decoded text) whose tag set holds every bit of `want` and none of
    /// `forbid` (the pair given as one argument), and whose length
    /// in characters is in `min..=max` (`max: None`: no upper bound), as the start rule of a
    /// right-linear grammar: one rule per live (state, count) pair, built through
    /// `add_rule`/`set_body`. Each character edge is written through `escape` (its grammar
    /// as JSON string content). The count saturates at `min` when there is no `max`. Only
    /// pairs from which an accepting end is reachable get a rule, so every prefix the
    /// grammar allows can still be completed.
    ///
    /// `Ok(None)`: no string qualifies. `Err`: more than [`MAX_BOUNDED_PAIRS`] live pairs.
    pub(crate) fn bounded(
        &self,
        (want, forbid): (u64, u64),
        min: u32,
        max: Option<u32>,
        escape: EscapeClass<'_>,
        add_rule: &mut dyn FnMut(Expr) -> crate::grammar::RuleId,
        set_body: &mut dyn FnMut(crate::grammar::RuleId, Expr),
    ) -> Result<Option<Expr>, String> {
        let n = self.trans.len();
        let accepting: Vec<bool> = self
            .tags
            .iter()
            .map(|&t| t & want == want && t & forbid == 0)
            .collect();
        let top = max.unwrap_or(min) as usize;
        let next = |c: usize| -> Option<usize> {
            match max {
                Some(m) => (c < m as usize).then_some(c + 1),
                None => Some((c + 1).min(min as usize)),
            }
        };
        // live[c * n + s]: from state `s` with `c` characters read, an accepting end with a
        // length in bounds is reachable. Levels are filled from the top count down; the top
        // level without `max` loops onto itself (a fixpoint).
        let levels = top + 1;
        if levels.saturating_mul(n) > 64 * MAX_BOUNDED_PAIRS {
            return Err(format!(
                "the pattern's automaton times the length bounds is too large (more than {MAX_BOUNDED_PAIRS} states)"
            ));
        }
        let mut live = vec![false; levels * n];
        for c in (0..levels).rev() {
            let ok_end = c >= min as usize;
            loop {
                let mut changed = false;
                for s in 0..n {
                    if live[c * n + s] {
                        continue;
                    }
                    let l = (accepting[s] && ok_end)
                        || next(c)
                            .is_some_and(|c2| self.trans[s].iter().any(|&(_, t)| live[c2 * n + t]));
                    if l {
                        live[c * n + s] = true;
                        changed = true;
                    }
                }
                // Only the saturated top level (no `max`) has edges back into itself.
                if !changed || max.is_some() || c != top {
                    break;
                }
            }
        }
        if !live[0] {
            return Ok(None);
        }
        let count = live.iter().filter(|&&l| l).count();
        if count > MAX_BOUNDED_PAIRS {
            return Err(format!(
                "the pattern's automaton times the length bounds has {count} states (at most \
                 {MAX_BOUNDED_PAIRS})"
            ));
        }
        let mut ids: Vec<Option<crate::grammar::RuleId>> = vec![None; levels * n];
        for (i, l) in live.iter().enumerate() {
            if *l {
                ids[i] = Some(add_rule(Expr::Empty));
            }
        }
        for c in 0..levels {
            for s in 0..n {
                let Some(id) = ids[c * n + s] else { continue };
                let mut alts = Vec::new();
                if accepting[s] && c >= min as usize {
                    alts.push(Expr::Empty);
                }
                if let Some(c2) = next(c) {
                    let mut by_target: BTreeMap<usize, Vec<(u32, u32)>> = BTreeMap::new();
                    for &(r, t) in &self.trans[s] {
                        if live[c2 * n + t] {
                            by_target.entry(t).or_default().push(r);
                        }
                    }
                    for (t, ranges) in by_target {
                        let (Some(e), Some(to)) = (escape(&ranges), ids[c2 * n + t]) else {
                            return Err("a character class has no JSON form".into());
                        };
                        alts.push(super::seq(vec![e, Expr::Rule(to)]));
                    }
                }
                let body = if alts.len() == 1 {
                    alts.pop().unwrap_or(Expr::Empty)
                } else {
                    Expr::Choice(alts)
                };
                set_body(id, body);
            }
        }
        Ok(ids[0].map(Expr::Rule))
    }
}
