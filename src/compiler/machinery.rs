//! What the tools of a deferring compile share, built by the compile (issue 24, item 4:
//! the JSON machinery is built once per compiler, not once per tool build).
//!
//! A tool's build (`compiler::deferred`) lowers the rules its schema reaches and builds an
//! automaton per rule left, through the compiler's rule-automaton cache. Some of those
//! rules are the same in every tool of a tag: the tag's one JSON string rule (when a tool
//! calls it from several places, it stays a rule) and its one generic JSON value rule
//! (`structural_tag::lower`), and each tool's capped whitespace and number rules (a copy
//! per tool, all alike). Built cold, they were most of a small tool's build (Hermes
//! on Qwen3, 10 tools: the whitespace and string automata were about 270 µs of the first
//! call's 800 µs build). The compile builds them once instead, so that a build finds them
//! in the cache and builds only the rules of its own schema; the next tag compiled with
//! the same compiler finds them there too.
//!
//! What is built: a grammar whose root chooses among the shared rules, lowered as a tool
//! is (`inline_rules` keeping its root and the rules to inline back, the capped
//! whitespace, the number and the integer, as
//! `deferred::lowered_component` does: a small rule, such as the string's `"` then its
//! body's call, is inlined into its callers in both; the root calls each shared rule
//! twice, as a tool that shares it calls it from several places; `Grammar::component_of`
//! numbers the rules in IR order, as a tool's component does), so that each rule left
//! has, as a rule, the cache key a tool's build makes. A shared rule inlined here (a
//! small one) has no automaton of its own, and the rules it calls are built instead.
//! Where a tool lowers otherwise (a shared rule it calls once is inlined into its
//! caller), the build builds that caller with the rule in it: a cache miss, never a
//! wrong automaton, since the key holds the body. Best effort: an
//! error (a limit) ends the warm-up, the rules built before it stay cached, and the
//! compile goes on. It runs within the compile's time budget.

use super::GrammarCompiler;
use crate::automaton::lower::{for_each_call, inline_rules, lower_repeats, simplify_repeats};
use crate::automaton::Automaton;
use crate::grammar::{Expr, Grammar, TokenRef};
use crate::limits::Deadline;

/// Distinct bodies of rules to inline back built at most: whitespace (a tag's tools
/// normally share one setting), the integer and the number (`json_schema::numbers`).
const MAX_ALWAYS_BODIES: usize = 6;

/// Tools looked at for what they share: the first ones of the tag. What tools share is
/// the tag's own (its JSON string rule, the whitespace its family sets), so a few tools
/// show it, and the scan of a tag of 500 tools stays a small part of its compile (reading
/// every tool's rules was 2% of it).
const MAX_SCANNED_ROOTS: usize = 16;

/// Among the rules of `ir` that the first [`MAX_SCANNED_ROOTS`] deferral roots
/// (`roots[r]`) reach: those that more than one of them reaches and that a rule of one
/// tool alone calls (the outermost of what tools share: the JSON string rule, not the
/// escapes it calls), then one rule of each distinct body among those with `always[r]`
/// set (at most [`MAX_ALWAYS_BODIES`]); ascending ids.
pub(super) fn shared_tool_rules(ir: &Grammar, roots: &[bool], always: &[bool]) -> Vec<u32> {
    let n = ir.rules.len();
    let flag = |of: &[bool], r: usize| of.get(r).copied().unwrap_or(false);
    // How many roots reach each rule, by a walk from each root; `mark` holds the last root
    // that reached a rule. A rule is walked by the first root that reaches it only (the
    // outermost shared rule is still found: it is reached again from a rule of one tool),
    // so each body is read once. `calls` keeps every call read, as (caller, callee).
    let mut reach = vec![0u8; n];
    let mut mark = vec![u32::MAX; n];
    let mut todo = Vec::new();
    let mut calls: Vec<(u32, u32)> = Vec::new();
    for root in (0..n).filter(|&r| flag(roots, r)).take(MAX_SCANNED_ROOTS) {
        mark[root] = root as u32;
        reach[root] = reach[root].saturating_add(1);
        todo.push(root);
        while let Some(r) = todo.pop() {
            for_each_call(&ir.rules[r].body, &mut |c| {
                calls.push((r as u32, c));
                let c = c as usize;
                if c < n && mark[c] != root as u32 {
                    mark[c] = root as u32;
                    reach[c] = reach[c].saturating_add(1);
                    if reach[c] == 1 {
                        todo.push(c);
                    }
                }
            });
        }
    }
    let mut shared = vec![false; n];
    for &(r, c) in &calls {
        let (r, c) = (r as usize, c as usize);
        if reach[r] == 1 && c < n && reach[c] >= 2 && !flag(roots, c) {
            shared[c] = true;
        }
    }
    let mut bodies: Vec<&Expr> = Vec::new();
    for r in 0..n {
        if reach[r] == 0 || !flag(always, r) || shared[r] {
            continue;
        }
        let body = &ir.rules[r].body;
        if bodies.len() < MAX_ALWAYS_BODIES && !bodies.contains(&body) {
            bodies.push(body);
            shared[r] = true;
        }
    }
    (0..n as u32).filter(|&r| shared[r as usize]).collect()
}

impl GrammarCompiler {
    /// Builds the automata of the rules `rules` of `ir` (from [`shared_tool_rules`]; for
    /// those small enough to be inlined, of the rules they call instead) into the
    /// compiler's rule-automaton cache, lowered as a tool's build lowers them: only the
    /// rules with `always[r]` set kept from inlining, as `deferred::lowered_component`
    /// does (keeping more made a build's generic value, which inlines the string's small
    /// rule, a cache miss). Nothing when there are none or the cache is off. `rules`
    /// ascending; `token` resolves token terminals.
    pub(super) fn build_shared_tool_rules(
        &self,
        ir: &Grammar,
        always: &[bool],
        rules: &[u32],
        token: &dyn Fn(&TokenRef) -> u32,
        deadline: &Deadline,
    ) {
        if rules.is_empty() || !self.rule_automata.is_on() {
            return;
        }
        debug_assert!(rules.windows(2).all(|w| w[0] < w[1]), "rules ascending");
        let (mut g, order) = ir.component_of(rules, "#shared");
        // Each call twice, with a byte after each: a rule called only last in its caller
        // would be built into it (`regular::TailPlan`), not as an automaton of its own;
        // and `inline_rules` inlines a larger rule called once (a JSON string written
        // out) than one called from several places, as a tool that shares it calls it.
        if let Expr::Choice(calls) = &mut g.rules[0].body {
            for c in calls.iter_mut() {
                let call = std::mem::replace(c, Expr::Empty);
                let nul = Expr::Bytes(vec![0]);
                *c = Expr::Seq(vec![call.clone(), nul.clone(), call, nul]);
            }
        }
        // The new root stays a rule; the rest is inlined or not as in a tool's build.
        let keep: Vec<bool> = std::iter::once(true)
            .chain(
                order
                    .iter()
                    .map(|&r| always.get(r as usize).copied().unwrap_or(false)),
            )
            .collect();
        let Ok(simplified) = simplify_repeats(inline_rules(&g, &keep, &[])) else {
            return;
        };
        let (lowered, counted) = lower_repeats(simplified);
        let cache = Some(&*self.rule_automata);
        let _ = Automaton::build(
            &lowered,
            &counted,
            token,
            &self.limits,
            deadline,
            cache,
            &[],
        );
    }
}
