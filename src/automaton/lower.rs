//! IR → IR lowering that runs before automaton construction: repetitions with large bounds
//! become a logarithmic number of helper rules, so `[a-z]{2,20000}` compiles to about forty
//! small rules instead of 20,000 copies.
//!
//! Scheme (unambiguous for fixed-width bodies): with `B ::= body`,
//! `E_k` (exactly k) `::= E_{⌊k/2⌋} E_{k-⌊k/2⌋}`, `E_1 ::= B`;
//! `P_j` (0 to 2^j − 1, by binary digits) `::= P_{j-1} | E_{2^{j-1}} P_{j-1}`, `P_0 ::= ""`;
//! `A_k` (0 to k) `::= P_J | E_{2^J} A_{k-2^J}` where `2^J <= k < 2^{J+1}`.
//! So `body{m,n}` is `E_m A_{n-m}` and `body{m,}` is `E_m body*`.

use crate::grammar::{Expr, Grammar, Rule, RuleId};
use rustc_hash::FxHashMap;

/// Repetitions whose inline expansion would exceed this many IR nodes become helper rules.
const INLINE_BUDGET: u64 = 512;
/// Repetitions with more than this many copies always become helper rules.
const INLINE_MAX_COUNT: u32 = 32;

/// Returns the number of IR nodes in `e` (saturating), a proxy for its automaton size.
fn size(e: &Expr) -> u64 {
    let mut n = 0u64;
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        n = n.saturating_add(match e {
            Expr::Bytes(b) => b.len() as u64,
            Expr::Class(c) => 1 + c.ranges.len() as u64,
            _ => 1,
        });
        match e {
            Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter()),
            Expr::Repeat { expr, min, max } => {
                let copies = max.unwrap_or(*min).max(1) as u64;
                n = n.saturating_add(size(expr).saturating_mul(copies));
            }
            _ => {}
        }
    }
    n
}

struct Lowerer {
    rules: Vec<Rule>,
    names: rustc_hash::FxHashSet<String>,
    /// body expression → helper rule id for it.
    bodies: FxHashMap<Expr, u32>,
    exact: FxHashMap<(u32, u32), u32>,
    pow: FxHashMap<(u32, u32), u32>,
    atmost: FxHashMap<(u32, u32), u32>,
}

impl Lowerer {
    fn fresh(&mut self, base: &str, body: Expr) -> u32 {
        let mut name = base.to_string();
        let mut i = 1;
        while self.names.contains(&name) {
            name = format!("{base}_{i}");
            i += 1;
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
                if copies <= INLINE_MAX_COUNT
                    && size(&inner).saturating_mul(copies as u64) <= INLINE_BUDGET
                {
                    return Expr::Repeat {
                        expr: Box::new(inner),
                        min,
                        max,
                    };
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

/// Lowers large repetitions of `grammar` into helper rules (appended after the existing
/// rules, so existing [`RuleId`]s keep their meaning).
pub(crate) fn lower_repeats(grammar: &Grammar) -> Grammar {
    let mut l = Lowerer {
        rules: grammar.rules.clone(),
        names: grammar.rules.iter().map(|r| r.name.clone()).collect(),
        bodies: FxHashMap::default(),
        exact: FxHashMap::default(),
        pow: FxHashMap::default(),
        atmost: FxHashMap::default(),
    };
    for i in 0..grammar.rules.len() {
        let body = std::mem::replace(&mut l.rules[i].body, Expr::Empty);
        l.rules[i].body = l.lower(body);
    }
    Grammar {
        rules: l.rules,
        root: grammar.root,
    }
}
