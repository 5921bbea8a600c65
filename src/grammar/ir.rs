//! The grammar intermediate representation (IR) shared by every front end.
//!
//! A [`Grammar`] is a list of named [`Rule`]s, each with one [`Expr`] body, and a root rule.
//! Terminals are byte strings, Unicode character classes (code point ranges) and token
//! terminals (exactly one special token of the vocabulary). Front ends (EBNF, JSON Schema,
//! regex, structural tags) produce this form; the automaton builder consumes it. Nothing here
//! knows about a tokenizer: token terminals given by text are resolved at compile time.

use std::fmt;

/// Index of a rule in [`Grammar::rules`].
///
/// A newtype over `u32` so that a rule id can never be passed where a node or token id is
/// expected. Valid ids are `0..rules.len()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

impl RuleId {
    /// The largest number of rules a grammar may have (ids are `u32`, with headroom for
    /// helper rules that lowering adds).
    pub const LIMIT: usize = (u32::MAX / 2) as usize;

    /// The id as an index into [`Grammar::rules`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A token terminal: matches exactly one special token of the vocabulary.
///
/// Written `<|im_end|>` (by the token's text) or `<[151645]>` (by id) in EBNF. Resolved
/// against the vocabulary when the grammar is compiled; an unknown text or an id past the
/// vocabulary is a compile error.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenRef {
    /// A token id, as in `<[151645]>`.
    Id(u32),
    /// A special token's text, as in `<|im_end|>` (the text includes the angle brackets).
    Text(String),
}

/// A set of Unicode scalar values: inclusive code point ranges, optionally negated.
///
/// `ranges` need not be sorted or disjoint; [`CharClass::normalized`] gives the canonical
/// form (sorted, merged, negation applied, surrogates U+D800..U+DFFF removed). The class
/// matches one code point, encoded as 1–4 bytes of UTF-8.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CharClass {
    /// True for `[^...]`: the class matches every scalar value *not* in `ranges`.
    pub negated: bool,
    /// Inclusive `(low, high)` code point ranges, `low <= high <= 0x10FFFF`.
    pub ranges: Vec<(u32, u32)>,
}

impl CharClass {
    /// The class as sorted, disjoint, non-adjacent, non-negated ranges of Unicode scalar
    /// values (surrogates excluded). An empty result matches nothing.
    pub fn normalized(&self) -> Vec<(u32, u32)> {
        let mut r: Vec<(u32, u32)> = self
            .ranges
            .iter()
            .filter(|(lo, hi)| lo <= hi)
            .map(|&(lo, hi)| (lo.min(0x10FFFF), hi.min(0x10FFFF)))
            .collect();
        r.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(r.len());
        for (lo, hi) in r {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        if self.negated {
            let mut out = Vec::with_capacity(merged.len() + 1);
            let mut next = 0u32;
            for (lo, hi) in merged {
                if lo > next {
                    out.push((next, lo - 1));
                }
                next = hi + 1;
            }
            if next <= 0x10FFFF {
                out.push((next, 0x10FFFF));
            }
            merged = out;
        }
        // Remove surrogates: they are not scalar values and have no UTF-8 encoding.
        let mut out = Vec::with_capacity(merged.len() + 1);
        for (lo, hi) in merged {
            if hi < 0xD800 || lo > 0xDFFF {
                out.push((lo, hi));
            } else {
                if lo < 0xD800 {
                    out.push((lo, 0xD7FF));
                }
                if hi > 0xDFFF {
                    out.push((0xE000, hi));
                }
            }
        }
        out
    }
}

/// A grammar expression: the body of a rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// The empty string (ε), written `""` or `()` in EBNF.
    Empty,
    /// A literal byte string (UTF-8 of an EBNF string literal). Never empty; use
    /// [`Expr::Empty`] for the empty string.
    Bytes(Vec<u8>),
    /// One code point from a character class.
    Class(CharClass),
    /// The concatenation of the parts, in order.
    Seq(Vec<Expr>),
    /// Any one of the alternatives.
    Choice(Vec<Expr>),
    /// `expr` repeated between `min` and `max` times (`None` = unbounded). `*` is `{0,}`,
    /// `+` is `{1,}`, `?` is `{0,1}`. Large bounds are lowered compactly (no copies per
    /// repetition), so `{2,20000}` stays small.
    Repeat {
        /// What is repeated.
        expr: Box<Expr>,
        /// The least number of repetitions.
        min: u32,
        /// The most, or `None` for no upper bound. Always `>= min` when present.
        max: Option<u32>,
    },
    /// A reference to another rule (or to the same one: recursion, left recursion included).
    Rule(RuleId),
    /// Exactly one special token.
    Token(TokenRef),
}

/// A named rule: `name ::= body`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The rule's name as written in EBNF (`[A-Za-z_][A-Za-z0-9_-]*`); helper rules that
    /// front ends add have generated names that are still valid EBNF identifiers.
    pub name: String,
    /// What the rule matches.
    pub body: Expr,
}

/// A context-free grammar over bytes and special tokens.
///
/// Invariants (checked by [`Grammar::validate`]): `root` and every [`Expr::Rule`] refer to a
/// rule in `rules`; rule names are unique. The `Display` impl prints EBNF that the EBNF front
/// end parses back to an equal grammar.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Grammar {
    /// The rules; a [`RuleId`] indexes this vector.
    pub rules: Vec<Rule>,
    /// The rule the whole output must match.
    pub root: RuleId,
}

impl Grammar {
    /// Indices of the rules that match no string at all (every alternative needs a rule
    /// that never completes, or an empty character class), ascending. Recurses on
    /// expression depth, which [`Grammar::validate`] bounds.
    pub(crate) fn unproductive_rules(&self) -> Vec<usize> {
        fn productive(e: &Expr, prod: &[bool]) -> bool {
            match e {
                Expr::Empty | Expr::Bytes(_) | Expr::Token(_) => true,
                Expr::Class(c) => c.negated || !c.ranges.is_empty(),
                Expr::Seq(parts) => parts.iter().all(|p| productive(p, prod)),
                Expr::Choice(alts) => alts.iter().any(|a| productive(a, prod)),
                Expr::Repeat { expr, min, .. } => *min == 0 || productive(expr, prod),
                Expr::Rule(r) => prod.get(r.index()).copied().unwrap_or(false),
            }
        }
        let mut prod = vec![false; self.rules.len()];
        // Cost: one pass per rule that becomes productive, at most rules + 1 passes.
        loop {
            let mut changed = false;
            for (i, r) in self.rules.iter().enumerate() {
                if !prod[i] && productive(&r.body, &prod) {
                    prod[i] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        (0..prod.len()).filter(|&i| !prod[i]).collect()
    }
}

/// What is wrong with a [`Grammar`] built by hand or by a front end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidGrammar {
    /// A rule id that is not `< rules.len()`.
    #[error("rule `{rule}` refers to rule id {id}, but the grammar has only {count} rules (ids are indices into `Grammar::rules`)")]
    DanglingRule {
        /// The rule where the reference occurs (or `<root>`).
        rule: String,
        /// The bad id.
        id: u32,
        /// `rules.len()`.
        count: usize,
    },
    /// Two rules with the same name.
    #[error("rule `{0}` is defined twice: rule names must be unique")]
    DuplicateRule(String),
    /// The grammar has no rules.
    #[error("the grammar has no rules: add one and make `root` its id")]
    Empty,
    /// An expression nested deeper than [`Grammar::MAX_DEPTH`] (the compiler's passes
    /// recurse on expression depth; rules, not nesting, are the way to build deep grammars).
    #[error("rule `{rule}` nests expressions more than {limit} deep; split it into rules")]
    TooDeep {
        /// The rule.
        rule: String,
        /// The limit.
        limit: usize,
    },
    /// A repetition whose `max` is less than its `min`.
    #[error("rule `{rule}`: repetition {{{min},{max}}} has max < min: use min <= max")]
    BadRepeat {
        /// The rule where it occurs.
        rule: String,
        /// The lower bound.
        min: u32,
        /// The upper bound.
        max: u32,
    },
}

impl Grammar {
    /// The deepest expression nesting [`Grammar::validate`] accepts (the EBNF parser's own
    /// limit is the same).
    pub const MAX_DEPTH: usize = 1_000;

    /// Looks a rule up by name.
    pub fn rule_id(&self, name: &str) -> Option<RuleId> {
        self.rules
            .iter()
            .position(|r| r.name == name)
            .map(|i| RuleId(i as u32))
    }

    /// Checks the invariants listed on [`Grammar`].
    ///
    /// # Errors
    /// The first [`InvalidGrammar`] found, in rule order.
    pub fn validate(&self) -> Result<(), InvalidGrammar> {
        self.validate_visiting(|_, _, _| {})
    }

    /// [`Grammar::validate`], calling `visit(expr, depth, rule)` on every expression of
    /// every rule in the order the check meets them (rule order; within a rule, depth
    /// first, the root expression at depth 1), before its children: one walk of the IR for
    /// the compile's other checks too.
    ///
    /// # Errors
    /// As [`Grammar::validate`]; `visit` is not called past the first error.
    pub(crate) fn validate_visiting<'g>(
        &'g self,
        mut visit: impl FnMut(&'g Expr, usize, &'g Rule),
    ) -> Result<(), InvalidGrammar> {
        if self.rules.is_empty() {
            return Err(InvalidGrammar::Empty);
        }
        let count = self.rules.len();
        if self.root.index() >= count {
            return Err(InvalidGrammar::DanglingRule {
                rule: "<root>".into(),
                id: self.root.0,
                count,
            });
        }
        let mut names = rustc_hash::FxHashSet::default();
        names.reserve(count);
        let mut stack = Vec::new();
        for rule in &self.rules {
            if !names.insert(rule.name.as_str()) {
                return Err(InvalidGrammar::DuplicateRule(rule.name.clone()));
            }
            stack.push((&rule.body, 1usize));
            while let Some((e, depth)) = stack.pop() {
                if depth > Self::MAX_DEPTH {
                    return Err(InvalidGrammar::TooDeep {
                        rule: rule.name.clone(),
                        limit: Self::MAX_DEPTH,
                    });
                }
                match e {
                    Expr::Repeat {
                        min,
                        max: Some(max),
                        ..
                    } if max < min => {
                        return Err(InvalidGrammar::BadRepeat {
                            rule: rule.name.clone(),
                            min: *min,
                            max: *max,
                        });
                    }
                    Expr::Rule(id) if id.index() >= count => {
                        return Err(InvalidGrammar::DanglingRule {
                            rule: rule.name.clone(),
                            id: id.0,
                            count,
                        })
                    }
                    _ => {}
                }
                visit(e, depth, rule);
                match e {
                    Expr::Seq(v) | Expr::Choice(v) => {
                        stack.extend(v.iter().map(|x| (x, depth + 1)))
                    }
                    Expr::Repeat { expr, .. } => stack.push((expr, depth + 1)),
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

impl Grammar {
    /// This grammar without the rules its root never reaches, in their original order, with
    /// rule ids renumbered (the root keeps its name; front ends may leave helper rules that
    /// an optimization made unused). The language is unchanged. Used by `tokensieve
    /// compile` to print only what matters; a copy of [`Grammar::into_reachable`].
    pub fn reachable_only(&self) -> Grammar {
        self.clone().into_reachable()
    }

    /// As [`Grammar::reachable_only`], taking the grammar (no copy of the kept rules).
    ///
    /// Walks with explicit stacks: no recursion on expression depth. Dangling rule ids
    /// (an invalid grammar) are left as they are, unreached.
    pub fn into_reachable(mut self) -> Grammar {
        let count = self.rules.len();
        let mut seen = vec![false; count];
        let mut todo = Vec::new();
        if self.root.index() < count {
            seen[self.root.index()] = true;
            todo.push(self.root.index());
        }
        let mut exprs = Vec::new();
        while let Some(r) = todo.pop() {
            exprs.push(&self.rules[r].body);
            while let Some(e) = exprs.pop() {
                match e {
                    Expr::Seq(v) | Expr::Choice(v) => exprs.extend(v.iter()),
                    Expr::Repeat { expr, .. } => exprs.push(expr),
                    Expr::Rule(id) if id.index() < count && !seen[id.index()] => {
                        seen[id.index()] = true;
                        todo.push(id.index());
                    }
                    _ => {}
                }
            }
        }
        let mut new_id = vec![u32::MAX; count];
        let mut rules = Vec::new();
        for (i, rule) in self.rules.iter_mut().enumerate() {
            if seen[i] {
                new_id[i] = rules.len() as u32;
                rules.push(Rule {
                    name: std::mem::take(&mut rule.name),
                    body: std::mem::replace(&mut rule.body, Expr::Empty),
                });
            }
        }
        for rule in &mut rules {
            let mut stack = vec![&mut rule.body];
            while let Some(e) = stack.pop() {
                match e {
                    Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter_mut()),
                    Expr::Repeat { expr, .. } => stack.push(expr),
                    Expr::Rule(id) if id.index() < count => *id = RuleId(new_id[id.index()]),
                    _ => {}
                }
            }
        }
        let root = match new_id.get(self.root.index()) {
            Some(&id) => RuleId(id),
            None => self.root,
        };
        Grammar { rules, root }
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Levels below which [`drop_iteratively`] cuts subtrees off (the derived drop of what
/// is left recurses at most one level more).
const DROP_RECURSION: usize = 64;

/// Drops an expression tree so that dropping never recurses more than
/// [`DROP_RECURSION`] levels whatever its depth (the derived drop of [`Expr`] recurses
/// once per level and overflows a thread's stack a few tens of thousands of levels down):
/// the subtrees below that depth are cut off onto a stack and dropped the same way. A
/// tree no deeper (every rule of the front ends, nearly) is dropped as it is, without
/// allocating: moving each node through a stack was about 4% of a large schema's compile.
fn drop_iteratively(root: &mut Expr) {
    /// Moves the subtrees of `e` that sit `depth` levels down onto `out`.
    fn cut(e: &mut Expr, depth: usize, out: &mut Vec<Expr>) {
        match e {
            Expr::Seq(v) | Expr::Choice(v) => {
                if depth == 0 {
                    out.append(v);
                } else {
                    for c in v {
                        cut(c, depth - 1, out);
                    }
                }
            }
            Expr::Repeat { expr, .. } => {
                if depth == 0 {
                    if !matches!(**expr, Expr::Empty) {
                        out.push(std::mem::replace(&mut **expr, Expr::Empty));
                    }
                } else {
                    cut(expr, depth - 1, out);
                }
            }
            _ => {}
        }
    }
    let mut stack = Vec::new();
    cut(root, DROP_RECURSION, &mut stack);
    while let Some(mut e) = stack.pop() {
        cut(&mut e, DROP_RECURSION, &mut stack);
        // `e` now nests at most `DROP_RECURSION + 1` levels: its own drop recurses no deeper.
    }
}

impl Drop for Rule {
    /// Drops the body recursing at most 65 levels, whatever its depth (see
    /// [`Expr::into_flat_drop`]).
    fn drop(&mut self) {
        drop_iteratively(&mut self.body);
    }
}

/// Levels [`Expr::for_each_call`] recurses before it takes a stack.
const CALLS_RECURSION: usize = 128;

impl Expr {
    /// Drops this expression recursing at most 65 levels, whatever its depth.
    ///
    /// `Expr`'s own drop is the derived one, which recurses once per nesting level; a tree
    /// nested deeper than about 10,000 levels (only a hand-built one: every front end and
    /// [`Grammar::validate`] stop at [`Grammar::MAX_DEPTH`]) can overflow a 2 MiB thread
    /// stack when dropped. Call this on such a tree instead of letting it go out of scope.
    /// A [`Rule`] (and so a [`Grammar`]) always drops its body this way.
    pub fn into_flat_drop(mut self) {
        drop_iteratively(&mut self);
    }

    /// Calls `f` with the callee of every rule call in this expression, in preorder, the
    /// last child first. It runs over every body of every build, so it recurses without
    /// allocating down to [`CALLS_RECURSION`] levels and goes on with a stack below that
    /// (a hand-built expression may be nested deeper than a thread's stack holds).
    pub(crate) fn for_each_call(&self, f: &mut dyn FnMut(u32)) {
        self.calls_from(f, 0);
    }

    fn calls_from(&self, f: &mut dyn FnMut(u32), depth: usize) {
        if depth == CALLS_RECURSION {
            let mut stack = vec![self];
            while let Some(e) = stack.pop() {
                match e {
                    Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter()),
                    Expr::Repeat { expr, .. } => stack.push(expr),
                    Expr::Rule(r) => f(r.0),
                    _ => {}
                }
            }
            return;
        }
        match self {
            Expr::Seq(v) | Expr::Choice(v) => {
                v.iter().rev().for_each(|x| x.calls_from(f, depth + 1));
            }
            Expr::Repeat { expr, .. } => expr.calls_from(f, depth + 1),
            Expr::Rule(r) => f(r.0),
            _ => {}
        }
    }

    /// Renames every rule reference of this expression through `f` (without recursion on
    /// its depth).
    pub(crate) fn rename_rules(&mut self, mut f: impl FnMut(u32) -> u32) {
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            match e {
                Expr::Rule(id) => id.0 = f(id.0),
                Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter_mut()),
                Expr::Repeat { expr, .. } => stack.push(expr),
                _ => {}
            }
        }
    }
}

impl Grammar {
    /// The rules reachable from rule `root`, as a grammar of their own rooted there (rule
    /// 0), the others in the order of their ids here, their calls renamed; with, per rule
    /// of it, its id here. Names and bodies are copied. (Two components that share rules
    /// number them in the same relative order, so a shared rule's automaton has the same
    /// cache key in both: `automaton::rule_cache`.) Builds read it in place instead
    /// ([`Grammar::component_order`]).
    #[cfg(test)]
    pub(crate) fn component(&self, root: u32) -> (Grammar, Vec<u32>) {
        self.reached_from(&[root], None)
    }

    /// The rules reachable from `roots`, as a grammar of their own rooted at a new rule 0
    /// named `name` that chooses among them (in the order given), the others after it in
    /// the order of their ids here, their calls renamed; with, per rule after the new one,
    /// its id here.
    pub(crate) fn component_of(&self, roots: &[u32], name: &str) -> (Grammar, Vec<u32>) {
        self.reached_from(roots, Some(name))
    }

    /// `Grammar::component` (kept for tests) without its copy: the order of its rules
    /// (ids here, `root` first) and, per rule here, its index in that order (`u32::MAX`:
    /// not in it). A [`RulesView`] of them lets `automaton::lower::inline_rules_of` read
    /// the component from this grammar (a tool's build: no copy of the shared JSON rules
    /// it reaches).
    pub(crate) fn component_order(&self, root: u32) -> (Vec<u32>, Vec<u32>) {
        self.reached_order(&[root], false)
    }

    /// The order of [`Grammar::reached_from`]'s rules (ids here) and their new ids, per
    /// rule here (`u32::MAX`: not reached); with `named_root`, ids from 1 on.
    fn reached_order(&self, start: &[u32], named_root: bool) -> (Vec<u32>, Vec<u32>) {
        let mut seen = vec![false; self.rules.len()];
        let mut order = start.to_vec();
        order.iter().for_each(|&r| seen[r as usize] = true);
        let mut i = 0;
        while i < order.len() {
            crate::automaton::lower::for_each_call(&self.rules[order[i] as usize].body, &mut |c| {
                if !seen[c as usize] {
                    seen[c as usize] = true;
                    order.push(c);
                }
            });
            i += 1;
        }
        // A component's root stays first; the rest by id.
        order[usize::from(!named_root)..].sort_unstable();
        let first = u32::from(named_root);
        let mut new_id = vec![u32::MAX; self.rules.len()];
        for (i, &r) in order.iter().enumerate() {
            new_id[r as usize] = first + i as u32;
        }
        (order, new_id)
    }

    /// `Grammar::component` from `start` (distinct rule ids); with `root` named, a new
    /// rule 0 of that name chooses among them (and `start` is ordered with the others).
    fn reached_from(&self, start: &[u32], root: Option<&str>) -> (Grammar, Vec<u32>) {
        let (order, new_id) = self.reached_order(start, root.is_some());
        let chooser = root.map(|name| Rule {
            name: name.to_string(),
            body: Expr::Choice(
                start
                    .iter()
                    .map(|&r| Expr::Rule(RuleId(new_id[r as usize])))
                    .collect(),
            ),
        });
        let rules = chooser
            .into_iter()
            .chain(order.iter().map(|&r| {
                let rule = &self.rules[r as usize];
                let mut body = rule.body.clone();
                body.rename_rules(|c| new_id[c as usize]);
                Rule {
                    name: rule.name.clone(),
                    body,
                }
            }))
            .collect();
        let g = Grammar {
            rules,
            root: RuleId(0),
        };
        (g, order)
    }
}

/// The rules `automaton::lower::inline_rules_of` reads: all of a grammar's, or a
/// component of them without a copy (rule `i` is `grammar.rules[order[i]]`, its calls
/// renamed by `local`, from [`Grammar::component_order`]; its root is rule 0).
#[derive(Clone, Copy)]
pub(crate) struct RulesView<'a> {
    pub grammar: &'a Grammar,
    /// `(order, local)`.
    pub part: Option<(&'a [u32], &'a [u32])>,
}

impl RulesView<'_> {
    /// Rules in the view.
    pub(crate) fn len(&self) -> usize {
        self.part.map_or(self.grammar.rules.len(), |(o, _)| o.len())
    }

    /// The view's rule `i` (its body's calls in the grammar's ids: see [`Self::local`]).
    pub(crate) fn rule(&self, i: usize) -> &Rule {
        &self.grammar.rules[self.part.map_or(i, |(o, _)| o[i] as usize)]
    }

    /// The view's id of a call of rule `c` in one of its bodies.
    #[inline]
    pub(crate) fn local(&self, c: u32) -> u32 {
        self.part.map_or(c, |(_, l)| l[c as usize])
    }

    /// The view's root: the grammar's, or a component's first rule.
    pub(crate) fn root(&self) -> RuleId {
        self.part.map_or(self.grammar.root, |_| RuleId(0))
    }
}

#[cfg(test)]
mod tests {
    use super::super::ebnf::parse_ebnf;

    #[test]
    fn reachable_only_drops_unused_rules_and_renumbers() {
        let g = parse_ebnf(
            "unused ::= \"x\" b\nroot ::= a (b | \"c\")*\na ::= \"a\" root?\nb ::= \"b\"\nlonely ::= \"z\"\n",
            "root",
        )
        .unwrap();
        let r = g.reachable_only();
        assert!(r.validate().is_ok());
        assert_eq!(
            r.to_string(),
            "root ::= a (b | \"c\")*\na ::= \"a\" root?\nb ::= \"b\"\n"
        );
        assert_eq!(r.rules[r.root.index()].name, "root");
        // Already minimal: unchanged.
        assert_eq!(r.reachable_only(), r);
    }

    /// Calls are reported in the order of a walk with a stack (preorder, last child
    /// first), in a shallow body and in one nested far past the recursion's depth, which
    /// does not overflow the stack.
    #[test]
    fn calls_are_listed_in_stack_order_at_any_depth() {
        use super::{Expr, RuleId};
        let by_stack = |e: &Expr| {
            let mut out = Vec::new();
            let mut stack = vec![e];
            while let Some(e) = stack.pop() {
                match e {
                    Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter()),
                    Expr::Repeat { expr, .. } => stack.push(expr),
                    Expr::Rule(r) => out.push(r.0),
                    _ => {}
                }
            }
            out
        };
        let mut deep = Expr::Rule(RuleId(0));
        for i in 1..20_000u32 {
            let inner = if i % 3 == 0 {
                Expr::Repeat {
                    expr: Box::new(deep),
                    min: 0,
                    max: None,
                }
            } else {
                deep
            };
            deep = Expr::Seq(vec![
                Expr::Rule(RuleId(i)),
                inner,
                Expr::Choice(vec![Expr::Rule(RuleId(i + 1)), Expr::Empty]),
            ]);
        }
        let shallow = Expr::Choice(vec![
            Expr::Rule(RuleId(7)),
            Expr::Seq(vec![Expr::Rule(RuleId(8)), Expr::Rule(RuleId(9))]),
        ]);
        for e in [&shallow, &deep] {
            let mut got = Vec::new();
            e.for_each_call(&mut |c| got.push(c));
            assert_eq!(got, by_stack(e));
        }
        assert_eq!(by_stack(&shallow), [9, 8, 7]);
        deep.into_flat_drop();
    }

    /// Inlining a component read in place ([`Grammar::component_order`], [`RulesView`])
    /// gives the grammar that inlining its copy ([`Grammar::component`]) gives, for every
    /// root and with rules kept or not: a tool's build lowers its component so.
    #[test]
    fn a_component_inlined_in_place_equals_its_copy_inlined() {
        use super::RulesView;
        use crate::automaton::lower::{inline_rules, inline_rules_of};
        let g = parse_ebnf(
            "root ::= c a | big\na ::= \"a\" b | \"(\" a \")\"\nb ::= \"b\"\nc ::= b \"c\" b\n\
             d ::= c \"d\" a ws big ws\nws ::= [ \\t]*\n\
             big ::= \"0123456789\" \"abcdefghij\" \"klmnopqrst\" [a-z]+ \"uvwxyz\" b b b b\n",
            "root",
        )
        .unwrap();
        let mut compared = 0;
        for root in 0..g.rules.len() as u32 {
            let (copy, order) = g.component(root);
            let (order2, local) = g.component_order(root);
            assert_eq!(order, order2);
            for kept in [None, Some("ws"), Some("big"), Some("b")] {
                let keep: Vec<bool> = order
                    .iter()
                    .enumerate()
                    .map(|(i, &r)| i == 0 || Some(g.rules[r as usize].name.as_str()) == kept)
                    .collect();
                let view = RulesView {
                    grammar: &g,
                    part: Some((&order2, &local)),
                };
                assert_eq!(
                    inline_rules_of(view, &keep, &[]),
                    inline_rules(&copy, &keep, &[]),
                    "root {root}, {kept:?} kept"
                );
                compared += 1;
            }
        }
        assert_eq!(compared, 4 * g.rules.len());
    }

    /// A component keeps its root first and numbers the other rules in their order here
    /// (not the order a walk finds them); `component_of` puts a new rule choosing among
    /// its roots first, and orders the roots with the others.
    #[test]
    fn components_number_their_rules_in_order_of_id() {
        let g = parse_ebnf(
            "root ::= c a\na ::= \"a\" b\nb ::= \"b\"\nc ::= b \"c\"\nd ::= c \"d\" a\n",
            "root",
        )
        .unwrap();
        let id = |name: &str| g.rules.iter().position(|r| r.name == name).unwrap() as u32;
        let (c, order) = g.component(id("d"));
        let names: Vec<&str> = c.rules.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["d", "a", "b", "c"]);
        assert_eq!(order, [id("d"), id("a"), id("b"), id("c")]);
        assert_eq!(
            c.to_string(),
            "d ::= c \"d\" a\na ::= \"a\" b\nb ::= \"b\"\nc ::= b \"c\"\n"
        );
        let (c, order) = g.component_of(&[id("c"), id("a")], "both");
        let names: Vec<&str> = c.rules.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["both", "a", "b", "c"]);
        assert_eq!(order, [id("a"), id("b"), id("c")]);
        use super::{Expr, RuleId};
        let chooser = Expr::Choice(vec![Expr::Rule(RuleId(3)), Expr::Rule(RuleId(1))]);
        assert_eq!(c.rules[0].body, chooser);
        assert!(c.validate().is_ok());
    }
}
