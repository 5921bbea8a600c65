//! A small helper for front ends that assemble a grammar from parts: fresh rule names,
//! rules declared before their bodies (recursion), and whole grammars embedded as rules.

use super::{Expr, Grammar, Rule, RuleId};
use rustc_hash::{FxHashMap, FxHashSet};

/// Collects rules under unique names; [`GrammarBuilder::finish`] gives the grammar.
#[derive(Default)]
pub(crate) struct GrammarBuilder {
    rules: Vec<Rule>,
    names: FxHashSet<String>,
    /// Per base name, the next numeric suffix to try (so n rules from one hint cost O(n),
    /// not O(n²) probes).
    suffix: FxHashMap<String, u32>,
}

impl GrammarBuilder {
    /// An unused rule name made from `hint` (letters, digits, `_`, `-`; anything else
    /// becomes `_`), with a numeric suffix when taken.
    fn fresh(&mut self, hint: &str) -> String {
        let mut base: String = hint
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if !base.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            base.insert(0, '_');
        }
        let mut name = base.clone();
        let i = self.suffix.entry(base.clone()).or_insert(1);
        while self.names.contains(&name) {
            name = format!("{base}_{i}");
            *i += 1;
        }
        self.names.insert(name.clone());
        name
    }

    /// Adds a rule; returns its id.
    pub(crate) fn add(&mut self, hint: &str, body: Expr) -> RuleId {
        let name = self.fresh(hint);
        self.rules.push(Rule { name, body });
        RuleId((self.rules.len() - 1) as u32)
    }

    /// Adds a rule whose body is set later with [`GrammarBuilder::set`].
    pub(crate) fn reserve(&mut self, hint: &str) -> RuleId {
        self.add(hint, Expr::Empty)
    }

    /// Sets the body of a rule.
    pub(crate) fn set(&mut self, id: RuleId, body: Expr) {
        self.rules[id.index()].body = body;
    }

    /// Number of rules so far (the id the next rule gets).
    pub(crate) fn rules_len(&self) -> usize {
        self.rules.len()
    }

    /// Moves every rule of `g` in, renamed under `prefix`; returns the id of `g`'s root.
    pub(crate) fn embed(&mut self, g: Grammar, prefix: &str) -> RuleId {
        let base = self.rules.len() as u32;
        let root = g.root.0;
        for r in g.rules {
            let name = self.fresh(&format!("{prefix}_{}", r.name));
            let mut r = r;
            let mut body = std::mem::replace(&mut r.body, Expr::Empty);
            // Iterative: embedded grammars may be deep.
            let mut stack = vec![&mut body];
            while let Some(e) = stack.pop() {
                match e {
                    Expr::Rule(id) => id.0 += base,
                    Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter_mut()),
                    Expr::Repeat { expr, .. } => stack.push(expr),
                    _ => {}
                }
            }
            self.rules.push(Rule { name, body });
        }
        RuleId(base + root)
    }

    /// The grammar with `root` as its root rule.
    pub(crate) fn finish(self, root: RuleId) -> Grammar {
        Grammar {
            rules: self.rules,
            root,
        }
    }
}
