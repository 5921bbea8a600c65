//! Right-linear recursion becomes loops: a group of mutually recursive rules that only ever
//! call each other as the *last* thing they do (`text ::= [^<] text | "<" lt | ""`) describes a
//! regular language. Left as calls, every byte of such text would push one Earley item and
//! every completion would cascade back through all of them (quadratic in the text's length).
//! Built as one automaton, where a tail call is an ε-edge into the callee's body, the text
//! runs in one DFA like any regular rule. Free text that avoids a set of strings (the
//! structural tags' `any_text` with `excludes`) is written this way.

use crate::grammar::{Expr, Grammar};
use rustc_hash::{FxHashMap, FxHashSet};

/// Which calls are built inline, as jumps, and which rules need no automaton of their own.
#[derive(Default)]
pub(crate) struct TailPlan<'g> {
    /// The strongly connected component of each rule, when it is right-linear (every call
    /// between its members is a tail call); `None` for other rules.
    pub component: Vec<Option<u32>>,
    /// The `Expr::Rule` nodes (by address inside the grammar) that are tail calls into the
    /// caller's own right-linear component: they become ε-edges.
    pub tail_calls: FxHashSet<*const Expr>,
    /// Rules of right-linear components that are only ever entered through tail calls from
    /// their own component (and are not the root): nothing calls their automaton.
    pub unused: Vec<bool>,
    /// The bodies of the rules, by rule index.
    pub bodies: Vec<&'g Expr>,
}

impl<'g> TailPlan<'g> {
    /// Computes the plan for `grammar` (validated). Linear in the grammar's size.
    pub(crate) fn new(grammar: &'g Grammar) -> Self {
        let n = grammar.rules.len();
        let bodies: Vec<&Expr> = grammar.rules.iter().map(|r| &r.body).collect();
        // Every call, with whether it is in tail position of its rule.
        let calls: Vec<Vec<(u32, bool, *const Expr)>> = bodies
            .iter()
            .map(|b| {
                let mut v = Vec::new();
                let mut stack: Vec<(&Expr, bool)> = vec![(b, true)];
                while let Some((e, tail)) = stack.pop() {
                    match e {
                        Expr::Rule(r) => v.push((r.0, tail, e as *const Expr)),
                        Expr::Seq(items) => {
                            // Only the last part can be in tail position (an ε-only suffix
                            // would also do, but front ends do not write one).
                            let last = items.len().saturating_sub(1);
                            for (i, x) in items.iter().enumerate() {
                                stack.push((x, tail && i == last));
                            }
                        }
                        Expr::Choice(items) => stack.extend(items.iter().map(|x| (x, tail))),
                        Expr::Repeat { expr, .. } => stack.push((expr, false)),
                        _ => {}
                    }
                }
                v
            })
            .collect();
        let comp = strongly_connected(n, |v| calls[v].iter().map(|c| c.0 as usize));
        // A component is right-linear when it is recursive and every call inside it is a
        // tail call.
        let mut size: FxHashMap<u32, u32> = FxHashMap::default();
        for &c in &comp {
            *size.entry(c).or_default() += 1;
        }
        let mut linear: FxHashMap<u32, bool> = FxHashMap::default();
        for v in 0..n {
            let c = comp[v];
            let recursive = size[&c] > 1 || calls[v].iter().any(|x| x.0 as usize == v);
            let entry = linear.entry(c).or_insert(true);
            if !recursive {
                *entry = false;
            }
            for &(w, tail, _) in &calls[v] {
                if comp[w as usize] == c && !tail {
                    *entry = false;
                }
            }
        }
        let mut plan = TailPlan {
            component: vec![None; n],
            tail_calls: FxHashSet::default(),
            unused: vec![false; n],
            bodies,
        };
        let mut entered_from_outside = vec![false; n];
        entered_from_outside[grammar.root.index()] = true;
        for v in 0..n {
            let c = comp[v];
            if linear[&c] {
                plan.component[v] = Some(c);
            }
            for &(w, _, ptr) in &calls[v] {
                if linear[&c] && comp[w as usize] == c {
                    plan.tail_calls.insert(ptr);
                } else {
                    entered_from_outside[w as usize] = true;
                }
            }
        }
        for (v, outside) in entered_from_outside.into_iter().enumerate() {
            plan.unused[v] = plan.component[v].is_some() && !outside;
        }
        plan
    }

    /// True when the call at `e` (an `Expr::Rule` inside this grammar) is built as a jump.
    pub(crate) fn is_tail_call(&self, e: &Expr) -> bool {
        !self.tail_calls.is_empty() && self.tail_calls.contains(&(e as *const Expr))
    }
}

/// Tarjan's algorithm without recursion: the component id of every vertex.
fn strongly_connected<I: Iterator<Item = usize>>(n: usize, succ: impl Fn(usize) -> I) -> Vec<u32> {
    const UNSEEN: u32 = u32::MAX;
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut comp = vec![UNSEEN; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut next_index = 0u32;
    let mut next_comp = 0u32;
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        let mut work: Vec<(usize, Vec<usize>, usize)> = Vec::new();
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        work.push((root, succ(root).collect(), 0));
        while let Some((v, succs, i)) = work.last_mut() {
            let v = *v;
            if *i < succs.len() {
                let w = succs[*i];
                *i += 1;
                if index[w] == UNSEEN {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, succ(w).collect(), 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some((u, _, _)) = work.last() {
                    low[*u] = low[*u].min(low[v]);
                }
                if low[v] == index[v] {
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp[w] = next_comp;
                        if w == v {
                            break;
                        }
                    }
                    next_comp += 1;
                }
            }
        }
    }
    comp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::parse_ebnf;

    #[test]
    fn right_linear_component_is_found_and_inner_rules_are_unused() {
        let g = parse_ebnf(
            "root ::= \"[\" text \"]\"\ntext ::= [^<\\]] text | \"<\" lt | \"\"\nlt ::= [^/\\]] text | \"\"",
            "root",
        )
        .unwrap();
        let plan = TailPlan::new(&g);
        let text = g.rule_id("text").unwrap().index();
        let lt = g.rule_id("lt").unwrap().index();
        let root = g.root.index();
        assert!(plan.component[text].is_some());
        assert_eq!(plan.component[text], plan.component[lt]);
        assert_eq!(plan.component[root], None);
        assert_eq!(plan.tail_calls.len(), 3);
        assert!(!plan.unused[text], "root calls text");
        assert!(plan.unused[lt], "lt is only entered by tail calls");
    }

    #[test]
    fn a_non_tail_call_inside_the_component_keeps_it_context_free() {
        let g = parse_ebnf("root ::= \"(\" root \")\" root | \"\"", "root").unwrap();
        let plan = TailPlan::new(&g);
        assert_eq!(plan.component[g.root.index()], None);
        assert!(plan.tail_calls.is_empty());
    }
}
