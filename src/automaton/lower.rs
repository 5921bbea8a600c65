//! IR → IR lowering that runs before automaton construction: repetitions with large bounds
//! become a logarithmic number of helper rules, so `[a-z]{2,20000}` compiles to about forty
//! small rules instead of 20,000 copies.
//!
//! Scheme (unambiguous for fixed-width bodies): with `B ::= body`,
//! `E_k` (exactly k) `::= E_{⌊k/2⌋} E_{k-⌊k/2⌋}`, `E_1 ::= B`;
//! `P_j` (0 to 2^j − 1, by binary digits) `::= P_{j-1} | E_{2^{j-1}} P_{j-1}`, `P_0 ::= ""`;
//! `A_k` (0 to k) `::= P_J | E_{2^J} A_{k-2^J}` where `2^J <= k < 2^{J+1}`.
//! So `body{m,n}` is `E_m A_{n-m}` and `body{m,}` is `E_m body*`.

pub(crate) use super::measure::size;
use super::measure::{is_pure_bytes, nullable};
use crate::grammar::{Expr, Grammar, Rule, RuleId, RulesView};
use rustc_hash::FxHashMap;

/// Repetitions whose inline expansion would exceed this many IR nodes become helper rules
/// or a counted rule (but one copy of a body that would be counted is written out).
const INLINE_BUDGET: u64 = 512;
/// Repetitions with more copies become helper rules or a counted rule (one of one ASCII
/// class or byte may have [`INLINE_MAX_CLASS_COUNT`]).
const INLINE_MAX_COUNT: u32 = 32;
/// One repetition of one ASCII class per rule (`[A-Za-z0-9-]{0,61}`) is written out up to
/// this many copies: a chain of DFA states whose mask walks take the class's tokens whole
/// (`mask::cache`'s byte runs), where a counted rule called from the pattern's rule made
/// each first mask a chart walk (4.5 ms after `https://` in `o21334` on Qwen3, 0.5 ms
/// written out). Two in a row would multiply their states: the second is counted.
const INLINE_MAX_CLASS_COUNT: u32 = 64;

struct Lowerer {
    rules: Vec<Rule>,
    names: rustc_hash::FxHashSet<String>,
    /// body expression → helper rule id for it.
    bodies: FxHashMap<Expr, u32>,
    exact: FxHashMap<(u32, u32), u32>,
    pow: FxHashMap<(u32, u32), u32>,
    atmost: FxHashMap<(u32, u32), u32>,
    counted: Vec<u32>,
    /// The rule being lowered has written out a repetition of one ASCII class of more
    /// than [`INLINE_MAX_COUNT`] copies (at most one is, per rule).
    long_class_written: bool,
    /// Per base name, the next numeric suffix to try.
    suffix: FxHashMap<String, u32>,
    /// Name of the source rule being lowered: helper rules are named `{source}/{kind}`,
    /// so errors in them (states, nodes) say which written rule needed them first.
    source: String,
}

impl Lowerer {
    fn fresh(&mut self, kind: &str, body: Expr) -> u32 {
        let base = format!("{}/{kind}", self.source);
        let base = base.as_str();
        let mut name = base.to_string();
        let i = self.suffix.entry(base.to_string()).or_insert(1);
        while self.names.contains(&name) {
            name = format!("{base}_{i}");
            *i += 1;
        }
        self.names.insert(name.clone());
        self.rules.push(Rule { name, body });
        (self.rules.len() - 1) as u32
    }

    fn body_rule(&mut self, body: &Expr) -> u32 {
        if let Expr::Rule(r) = body {
            return r.0;
        }
        if let Some(&r) = self.bodies.get(body) {
            return r;
        }
        let r = self.fresh("rep_body", body.clone());
        self.bodies.insert(body.clone(), r);
        r
    }

    /// Rule matching exactly `k >= 1` copies of rule `b`.
    fn exact(&mut self, b: u32, k: u32) -> u32 {
        if k == 1 {
            return b;
        }
        if let Some(&r) = self.exact.get(&(b, k)) {
            return r;
        }
        let h = k / 2;
        let left = self.exact(b, h);
        let right = self.exact(b, k - h);
        let r = self.fresh(
            &format!("rep_exact{k}"),
            Expr::Seq(vec![Expr::Rule(RuleId(left)), Expr::Rule(RuleId(right))]),
        );
        self.exact.insert((b, k), r);
        r
    }

    /// Rule matching 0 to `2^j - 1` copies.
    fn pow(&mut self, b: u32, j: u32) -> u32 {
        if let Some(&r) = self.pow.get(&(b, j)) {
            return r;
        }
        let body = if j == 0 {
            Expr::Empty
        } else {
            let lower = self.pow(b, j - 1);
            let block = self.exact(b, 1 << (j - 1));
            Expr::Choice(vec![
                Expr::Rule(RuleId(lower)),
                Expr::Seq(vec![Expr::Rule(RuleId(block)), Expr::Rule(RuleId(lower))]),
            ])
        };
        let r = self.fresh(&format!("rep_below{}", 1u64 << j), body);
        self.pow.insert((b, j), r);
        r
    }

    /// Rule matching 0 to `k` copies.
    fn atmost(&mut self, b: u32, k: u32) -> u32 {
        if let Some(&r) = self.atmost.get(&(b, k)) {
            return r;
        }
        let body = if k == 0 {
            Expr::Empty
        } else {
            let j = 31 - k.leading_zeros(); // 2^j <= k < 2^(j+1)
            let below = self.pow(b, j);
            let block = self.exact(b, 1 << j);
            let rest = self.atmost(b, k - (1 << j));
            Expr::Choice(vec![
                Expr::Rule(RuleId(below)),
                Expr::Seq(vec![Expr::Rule(RuleId(block)), Expr::Rule(RuleId(rest))]),
            ])
        };
        let r = self.fresh(&format!("rep_atmost{k}"), body);
        self.atmost.insert((b, k), r);
        r
    }

    fn lower(&mut self, e: Expr) -> Expr {
        match e {
            Expr::Seq(v) => Expr::Seq(v.into_iter().map(|x| self.lower(x)).collect()),
            Expr::Choice(v) => Expr::Choice(v.into_iter().map(|x| self.lower(x)).collect()),
            Expr::Repeat { expr, min, max } => {
                let inner = self.lower(*expr);
                let copies = max.unwrap_or(min).max(1);
                let most = if is_ascii_class(&inner) && !self.long_class_written {
                    INLINE_MAX_CLASS_COUNT
                } else {
                    INLINE_MAX_COUNT
                };
                if copies > INLINE_MAX_COUNT && copies <= most {
                    self.long_class_written = true;
                }
                // One copy (`x?`, `x*`, `x+`) of a body that would be counted is built
                // once whatever its size: nothing to count. (Other large bodies stay helper
                // rules, shared where they repeat.)
                let within_budget = size(&inner).saturating_mul(copies as u64) <= INLINE_BUDGET;
                let counted = is_pure_bytes(&inner) && !nullable(&inner);
                if (copies == 1 && counted) || (copies <= most && within_budget) {
                    return Expr::Repeat {
                        expr: Box::new(inner),
                        min,
                        max,
                    };
                }
                if is_pure_bytes(&inner) && !nullable(&inner) {
                    // A counted rule: the automaton runs one copy of the body's DFA with a
                    // counter (virtual nodes), however large the bounds.
                    let key = Expr::Repeat {
                        expr: Box::new(inner),
                        min,
                        max,
                    };
                    if let Some(&r) = self.bodies.get(&key) {
                        return Expr::Rule(RuleId(r));
                    }
                    let r = self.fresh("rep_counted", key.clone());
                    self.bodies.insert(key, r);
                    self.counted.push(r);
                    return Expr::Rule(RuleId(r));
                }
                let b = self.body_rule(&inner);
                let mut parts = Vec::new();
                if min > 0 {
                    parts.push(Expr::Rule(RuleId(self.exact(b, min))));
                }
                match max {
                    None => parts.push(Expr::Repeat {
                        expr: Box::new(Expr::Rule(RuleId(b))),
                        min: 0,
                        max: None,
                    }),
                    Some(max) if max > min => {
                        parts.push(Expr::Rule(RuleId(self.atmost(b, max - min))))
                    }
                    Some(_) => {}
                }
                match parts.len() {
                    0 => Expr::Empty,
                    1 => parts.pop().unwrap_or(Expr::Empty),
                    _ => Expr::Seq(parts),
                }
            }
            other => other,
        }
    }
}

/// True for one ASCII character: a class of ASCII characters only, or one byte below
/// 0x80 (what [`INLINE_MAX_CLASS_COUNT`] writes out).
fn is_ascii_class(e: &Expr) -> bool {
    match e {
        Expr::Class(c) => !c.negated && c.ranges.iter().all(|&(_, hi)| hi < 0x80),
        Expr::Bytes(b) => b.len() == 1 && b[0] < 0x80,
        _ => false,
    }
}

/// Lowers large repetitions of `grammar` into helper rules (appended after the existing
/// rules, so existing [`RuleId`]s keep their meaning). Returns the grammar and the ids of
/// the *counted* rules: each one's body is a single `Repeat` of a non-nullable, bytes-only
/// expression, run by the automaton with a counter.
pub(crate) fn lower_repeats(grammar: Grammar) -> (Grammar, Vec<u32>) {
    let root = grammar.root;
    let mut l = Lowerer {
        names: grammar.rules.iter().map(|r| r.name.clone()).collect(),
        rules: grammar.rules,
        bodies: FxHashMap::default(),
        exact: FxHashMap::default(),
        pow: FxHashMap::default(),
        atmost: FxHashMap::default(),
        counted: Vec::new(),
        long_class_written: false,
        suffix: FxHashMap::default(),
        source: String::new(),
    };
    for i in 0..l.rules.len() {
        l.source.clone_from(&l.rules[i].name);
        l.long_class_written = false;
        let body = std::mem::replace(&mut l.rules[i].body, Expr::Empty);
        l.rules[i].body = l.lower(body);
    }
    (
        Grammar {
            rules: l.rules,
            root,
        },
        l.counted,
    )
}

/// Rewrites repetitions into equivalent, less ambiguous ones before lowering:
///
/// - a nullable pure-bytes body repeated is its non-empty part repeated from zero:
///   `(b){m,n}` = `(b'){0,n}` where `b'` matches the non-empty strings of `b` (the empty
///   copies pad any count up to `m`), so `([a-z]?){0,1000}` becomes `[a-z]{0,1000}`;
/// - a repetition directly inside another, `(x{m1,n1}){m2,n2}`, is `x{m2·m1, n2·n1}` when
///   the ranges `[j·m1, j·n1]` for the counts `j` the outer one allows join without gaps.
///
/// Both keep the language and turn the nested forms, which are ambiguous (many ways to
/// split a run of letters between copies) and so costly for the mask precomputation, into
/// one counted repetition, whose cost does not grow with its bound. So the merged bound is
/// not held to [`Limits::max_repeat_bound`](crate::Limits::max_repeat_bound) (which
/// bounds what the input writes), only to what a repetition's counter holds.
///
/// # Errors
/// [`AutomatonError::RepeatTooLarge`](super::AutomatonError::RepeatTooLarge) when a merged
/// bound exceeds `u32::MAX / 2`, naming the rule and the product.
pub(crate) fn simplify_repeats(mut grammar: Grammar) -> Result<Grammar, super::AutomatonError> {
    for rule in &mut grammar.rules {
        let body = std::mem::replace(&mut rule.body, Expr::Empty);
        rule.body = simplify(body).map_err(|count| super::AutomatonError::RepeatTooLarge {
            rule: rule.name.clone(),
            count,
            limit: MAX_MERGED_BOUND,
        })?;
    }
    Ok(grammar)
}

/// Most a counted repetition's bounds may be (its virtual node ids are `u32`).
const MAX_MERGED_BOUND: u64 = (u32::MAX / 2) as u64;

/// [`simplify_repeats`] on one expression, in place (recursive: the IR is depth-bounded).
/// `Err` holds a merged bound too large for a `u32` counter.
fn simplify(e: Expr) -> Result<Expr, u64> {
    Ok(match e {
        Expr::Seq(mut v) => {
            for x in &mut v {
                *x = simplify(std::mem::replace(x, Expr::Empty))?;
            }
            Expr::Seq(v)
        }
        Expr::Choice(mut v) => {
            for x in &mut v {
                *x = simplify(std::mem::replace(x, Expr::Empty))?;
            }
            Expr::Choice(v)
        }
        Expr::Repeat { expr, min, max } => {
            let mut inner = simplify(*expr)?;
            let mut min = min;
            if max == Some(0) {
                return Ok(Expr::Empty);
            }
            if is_pure_bytes(&inner) && nullable(&inner) {
                match non_empty(&inner) {
                    Some(Some(x)) if size(&x) <= size(&inner).saturating_mul(4) + 16 => {
                        inner = x;
                        min = 0;
                    }
                    Some(None) => return Ok(Expr::Empty),
                    _ => {}
                }
            }
            let inner = unwrap_single(inner);
            if let Expr::Repeat {
                expr: x,
                min: m1,
                max: n1,
            } = inner
            {
                return Ok(match merge_counts(m1, n1, min, max) {
                    Some((lo, hi)) => {
                        let fit = |b: u64| {
                            if b > MAX_MERGED_BOUND {
                                Err(b)
                            } else {
                                Ok(b as u32)
                            }
                        };
                        Expr::Repeat {
                            expr: x,
                            min: fit(lo)?,
                            max: hi.map(fit).transpose()?,
                        }
                    }
                    None => Expr::Repeat {
                        expr: Box::new(Expr::Repeat {
                            expr: x,
                            min: m1,
                            max: n1,
                        }),
                        min,
                        max,
                    },
                });
            }
            Expr::Repeat {
                expr: Box::new(inner),
                min,
                max,
            }
        }
        other => other,
    })
}

/// A one-part sequence or choice is its part.
fn unwrap_single(e: Expr) -> Expr {
    match e {
        Expr::Seq(mut v) | Expr::Choice(mut v) if v.len() == 1 => {
            unwrap_single(v.pop().unwrap_or(Expr::Empty))
        }
        other => other,
    }
}

/// `(x{m1,n1}){m2,n2}` as `x{lo,hi}`: the union over counts `j` in `m2..=n2` of
/// `[j·m1, j·n1]`, when it has no gaps (`None` otherwise). Consecutive ranges join when
/// `(j+1)·m1 <= j·n1 + 1`, which is hardest at the smallest `j`. `hi` `None` = unbounded.
fn merge_counts(m1: u32, n1: Option<u32>, m2: u32, n2: Option<u32>) -> Option<(u64, Option<u64>)> {
    let (m1, m2) = (m1 as u64, m2 as u64);
    let several = n2.map_or(true, |n2| n2 as u64 > m2);
    if several {
        let joins = match n1 {
            _ if m2 == 0 => m1 <= 1,
            None => true,
            Some(n1) => (m2 + 1) * m1 <= m2 * n1 as u64 + 1,
        };
        if !joins {
            return None;
        }
    }
    let hi = match (n1, n2) {
        (Some(n1), Some(n2)) => Some(n1 as u64 * n2 as u64),
        (None, Some(0)) | (Some(0), None) => Some(0),
        _ => None,
    };
    Some((m1 * m2, hi))
}

/// The non-empty strings of a pure-bytes expression: `Some(Some(x))`, `Some(None)` when it
/// has none (it matches only the empty string), `None` when the rewrite would be large
/// (a sequence of many nullable parts).
fn non_empty(e: &Expr) -> Option<Option<Expr>> {
    Some(match e {
        Expr::Empty => None,
        Expr::Bytes(b) if b.is_empty() => None,
        _ if !nullable(e) => Some(e.clone()),
        Expr::Choice(v) => {
            let mut alts = Vec::with_capacity(v.len());
            for a in v {
                if let Some(x) = non_empty(a)? {
                    alts.push(x);
                }
            }
            match alts.len() {
                0 => None,
                1 => alts.pop(),
                _ => Some(Expr::Choice(alts)),
            }
        }
        // Every part is nullable: the first non-empty part, then anything.
        Expr::Seq(v) if v.len() <= 4 => {
            let mut alts = Vec::new();
            for (i, a) in v.iter().enumerate() {
                if let Some(x) = non_empty(a)? {
                    let mut seq = vec![x];
                    seq.extend(v[i + 1..].iter().cloned());
                    alts.push(Expr::Seq(seq));
                }
            }
            match alts.len() {
                0 => None,
                1 => alts.pop(),
                _ => Some(Expr::Choice(alts)),
            }
        }
        Expr::Repeat { expr, max, .. } => {
            // `x{m,n}` with `x` nullable or `m == 0`: one to `n` non-empty copies.
            let x = match non_empty(expr)? {
                Some(x) => x,
                None => return Some(None),
            };
            Some(Expr::Repeat {
                expr: Box::new(x),
                min: 1,
                max: *max,
            })
        }
        _ => return None,
    })
}

/// Rules whose body has at most this many IR nodes are inlined into their callers when
/// they are not recursive: one larger automaton per rule means fewer rule boundaries, and
/// tokens that cross a rule boundary are the ones the mask cache cannot decide alone.
const INLINE_MAX_SIZE: u64 = 256;
/// Rules called from more than one place are inlined only when their body has at most
/// this many IR nodes: a larger one would be copied (and built, minimized and given mask
/// classes) once per call site, where a call shares one automaton and its masks. A JSON
/// Schema object's member is referenced by up to four states of its object's chain; with
/// every member inlined, `WashingtonPost---wp_0` had 51,615 nodes (24,457 with this bound),
/// and on 100 MaskBench schemas (Llama 3.1, lazy, one thread) compile → first mask p50
/// went from 1.75 to 1.3–1.5 ms, p99 from 72 to 29–38 ms, and the mask mean down by a
/// tenth. Bounds of 4, 8 and 32 measured the same within noise.
const INLINE_SHARED_MAX_SIZE: u64 = 16;
/// Only bodies at most this deep are inlined, so inlining keeps every rule within
/// `Grammar::MAX_DEPTH + INLINE_MAX_DEPTH` levels (the later passes recurse on depth).
const INLINE_MAX_DEPTH: usize = 64;

/// Calls `f` with the callee of every rule call in `e` ([`Expr::for_each_call`]).
pub(crate) fn for_each_call(e: &Expr, f: &mut dyn FnMut(u32)) {
    e.for_each_call(f);
}

/// `cyclic[r]`: rule `r` can reach itself through calls (Tarjan's SCC, iterative).
fn cyclic_rules(calls: &[Vec<u32>]) -> Vec<bool> {
    let n = calls.len();
    let mut index = vec![u32::MAX; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut cyclic = vec![false; n];
    let mut next = 0u32;
    for root in 0..n {
        if index[root] != u32::MAX {
            continue;
        }
        // (node, next edge index)
        let mut work: Vec<(u32, usize)> = vec![(root as u32, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root as u32);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut ei)) = work.last_mut() {
            let v = v as usize;
            if *ei < calls[v].len() {
                let w = calls[v][*ei] as usize;
                *ei += 1;
                if w == v {
                    cyclic[v] = true;
                }
                if index[w] == u32::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w as u32);
                    on_stack[w] = true;
                    work.push((w as u32, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(u, _)) = work.last() {
                    low[u as usize] = low[u as usize].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut members = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w as usize] = false;
                        members.push(w);
                        if w as usize == v {
                            break;
                        }
                    }
                    if members.len() > 1 {
                        for w in members {
                            cyclic[w as usize] = true;
                        }
                    }
                }
            }
        }
    }
    cyclic
}

/// A copy of `e` in which every call of a rule with an inlined body (`inline[r]`) is that
/// body: moved out for a rule called once, copied otherwise. One pass: the copy and the
/// substitution (recursive, as `Expr`'s `Clone` is; bodies are at most
/// `Grammar::MAX_DEPTH` + [`INLINE_MAX_DEPTH`] deep).
fn copy_substituted(e: &Expr, inline: &mut [Option<Expr>], uses: &[u32], v: RulesView) -> Expr {
    match e {
        Expr::Rule(r) => {
            let i = v.local(r.0) as usize;
            if uses[i] == 1 {
                if let Some(body) = inline[i].take() {
                    return body;
                }
            } else if let Some(body) = &inline[i] {
                return body.clone();
            }
            Expr::Rule(RuleId(i as u32))
        }
        Expr::Seq(x) => Expr::Seq(
            x.iter()
                .map(|x| copy_substituted(x, inline, uses, v))
                .collect(),
        ),
        Expr::Choice(x) => Expr::Choice(
            x.iter()
                .map(|x| copy_substituted(x, inline, uses, v))
                .collect(),
        ),
        Expr::Repeat { expr, min, max } => Expr::Repeat {
            expr: Box::new(copy_substituted(expr, inline, uses, v)),
            min: *min,
            max: *max,
        },
        other => other.clone(),
    }
}

/// Inlines small non-recursive rules (called once, or tiny: [`INLINE_SHARED_MAX_SIZE`])
/// into their callers, then drops the rules the root can
/// no longer reach (ids are renumbered; the root keeps its name). Rules with `keep[r]` set
/// (indices past `keep`'s end count as unset) stay rules: a front end keeps a rule that is
/// called from many places and whose masks do not depend on the caller (such as a JSON
/// string), so that its masks are walked once and shared across grammars, and only the
/// tokens that run past its end are decided per call site. Rules with `always[r]` set (and
/// not kept) are inlined whatever their size, when not recursive (nor deeper than other
/// inlined bodies may be): a front end's shorthand
/// for a body it would otherwise have written out at every use (JSON whitespace with a
/// line cap), so that the IR it hands over stays small until it is lowered.
pub(crate) fn inline_rules(grammar: &Grammar, keep: &[bool], always: &[bool]) -> Grammar {
    let view = RulesView {
        grammar,
        part: None,
    };
    inline_rules_of(view, keep, always)
}

/// [`inline_rules`] over the rules of `view` (`keep` and `always` by its ids).
pub(crate) fn inline_rules_of(view: RulesView, keep: &[bool], always: &[bool]) -> Grammar {
    let n = view.len();
    let root = view.root().index();
    // The rules the root reaches (a front end may leave others: JSON Schema objects leave
    // a third of their state rules unreferenced) and each one's callees. Rules the root
    // does not reach are neither copied nor walked again, but their calls count in
    // `uses`, so what is inlined does not depend on them being left out: counting only
    // the reached callers would move more members of JSON Schema objects into their one
    // reached state, and on MaskBench (`--limit 400`) that raised the mask p99 from 0.27×
    // to 0.43× llguidance's (shared member rules keep masks shared).
    let mut reached = vec![false; n];
    let mut uses = vec![0u32; n];
    let mut calls: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut todo = Vec::new();
    if root < n {
        reached[root] = true;
        todo.push(root);
    }
    while let Some(r) = todo.pop() {
        let mut v = Vec::new();
        for_each_call(&view.rule(r).body, &mut |c| v.push(view.local(c)));
        for &c in &v {
            let c = c as usize;
            uses[c] += 1;
            if !reached[c] {
                reached[c] = true;
                todo.push(c);
            }
        }
        v.sort_unstable();
        v.dedup();
        calls[r] = v;
    }
    for r in (0..n).filter(|&r| !reached[r]) {
        // Unreached rules' calls (see above).
        for_each_call(&view.rule(r).body, &mut |c| {
            uses[view.local(c) as usize] += 1
        });
    }
    let cyclic = cyclic_rules(&calls);
    // Post-order over the call DAG of non-cyclic rules: callees are finished first, so an
    // inlined body never contains a call of another inlinable rule.
    let mut bodies: Vec<Expr> = vec![Expr::Empty; n];
    let mut inline: Vec<Option<Expr>> = vec![None; n];
    let mut inlined = vec![false; n];
    let mut done = reached.iter().map(|&r| !r).collect::<Vec<bool>>();
    for start in 0..n {
        if done[start] {
            continue;
        }
        let mut work: Vec<(usize, usize)> = vec![(start, 0)];
        done[start] = true;
        while let Some(&mut (v, ref mut ei)) = work.last_mut() {
            if *ei < calls[v].len() {
                let w = calls[v][*ei] as usize;
                *ei += 1;
                if !done[w] {
                    done[w] = true;
                    work.push((w, 0));
                }
            } else {
                work.pop();
                let body = copy_substituted(&view.rule(v).body, &mut inline, &uses, view);
                let candidate = !cyclic[v] && v != root && !keep.get(v).copied().unwrap_or(false);
                let shared_cap = if uses[v] <= 1 {
                    INLINE_MAX_SIZE
                } else {
                    INLINE_SHARED_MAX_SIZE
                };
                let cap = match always.get(v).copied().unwrap_or(false) {
                    true => u64::MAX,
                    false => shared_cap,
                };
                if candidate && fits(&body, INLINE_MAX_DEPTH, cap) {
                    // Every call of it in a reached rule is in a rule finished later (a
                    // caller finished earlier would be on a cycle through it), so each is
                    // replaced: moved into its one caller, or copied into each, and the
                    // rule itself is left unreachable (unreached callers are dropped).
                    inline[v] = Some(body);
                    inlined[v] = true;
                    continue;
                }
                bodies[v] = body;
            }
        }
    }
    // Keep the rules reached and not inlined, in their order, renumbered.
    let mut new_id = vec![u32::MAX; n];
    let mut rules = Vec::new();
    for (i, body) in bodies.into_iter().enumerate() {
        if reached[i] && !inlined[i] {
            new_id[i] = rules.len() as u32;
            rules.push(Rule {
                name: view.rule(i).name.clone(),
                body,
            });
        }
    }
    if rules.len() < n {
        for rule in &mut rules {
            rule.body.rename_rules(|c| {
                debug_assert_ne!(new_id[c as usize], u32::MAX, "a call of a dropped rule");
                new_id[c as usize]
            });
        }
    }
    let root = match new_id.get(root) {
        Some(&id) => RuleId(id),
        None => view.root(),
    };
    Grammar { rules, root }
}

/// Whether `e` is at most `max_depth` levels deep and has at most `max_size` IR nodes
/// (as [`size`] counts them; `u64::MAX`: any size). Stops at the first level or node past
/// either bound.
fn fits(e: &Expr, max_depth: usize, max_size: u64) -> bool {
    let mut n = 0u64;
    // (expression, its depth, copies of it in the whole: the product of the enclosing
    // repetitions' counts)
    let mut stack = vec![(e, 1usize, 1u64)];
    while let Some((e, d, copies)) = stack.pop() {
        if d > max_depth {
            return false;
        }
        let own = match e {
            Expr::Bytes(b) => b.len() as u64,
            Expr::Class(c) => 1 + c.ranges.len() as u64,
            _ => 1,
        };
        n = n.saturating_add(own.saturating_mul(copies));
        if n > max_size {
            return false;
        }
        match e {
            Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter().map(|x| (x, d + 1, copies))),
            Expr::Repeat { expr, min, max } => {
                let times = max.unwrap_or(*min).max(1) as u64;
                stack.push((expr, d + 1, copies.saturating_mul(times)));
            }
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests;
