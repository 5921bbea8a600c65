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
        let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        let starts_well = hint.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        let base = if starts_well && hint.chars().all(valid) {
            hint.to_string()
        } else {
            let mut base: String = hint
                .chars()
                .map(|c| if valid(c) { c } else { '_' })
                .collect();
            if !starts_well {
                base.insert(0, '_');
            }
            base
        };
        self.take(base)
    }

    /// `base` if unused, else `base_N` for the first free `N` (from where the last probe
    /// of `base` stopped); marked used.
    fn take(&mut self, base: String) -> String {
        if !self.names.contains(&base) {
            self.names.insert(base.clone());
            return base;
        }
        let i = self.suffix.entry(base.clone()).or_insert(1);
        let mut name = String::with_capacity(base.len() + 4);
        loop {
            use std::fmt::Write;
            name.clear();
            name.push_str(&base);
            let _ = write!(name, "_{i}");
            *i += 1;
            if !self.names.contains(&name) {
                break;
            }
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
        self.embed_redirecting(g, prefix, &[])
    }

    /// [`GrammarBuilder::embed`], with the calls of `g`'s rule `from` sent to this
    /// builder's rule `to` instead, for each `(from, to)` of `redirects` (`from` is still
    /// moved in, uncalled).
    pub(crate) fn embed_redirecting(
        &mut self,
        g: Grammar,
        prefix: &str,
        redirects: &[(u32, RuleId)],
    ) -> RuleId {
        let base = self.rules.len() as u32;
        let root = g.root.0;
        let mut hint = String::new();
        for r in g.rules {
            hint.clear();
            hint.push_str(prefix);
            hint.push('_');
            hint.push_str(&r.name);
            let name = self.fresh(&hint);
            let mut r = r;
            let mut body = std::mem::replace(&mut r.body, Expr::Empty);
            body.rename_rules(|c| match redirects.iter().find(|r| r.0 == c) {
                Some(&(_, to)) => to.0,
                None => c + base,
            });
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
