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
    /// Computes the plan for `grammar` (validated); the rules in `counted` (counted
    /// repetitions, built with virtual nodes) are never built inline. Linear in the
    /// grammar's size, plus the copies that [`absorbed_rules`] sizes up (at most
    /// [`ABSORB_MAX_WORK`] rule visits).
    pub(crate) fn new(grammar: &'g Grammar, counted: &[u32]) -> Self {
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
        // Recursive rules and rules with a call before their end stay out: right-linear
        // components are built as above, and an object's member chains (recursive through
        // extra members, calling their values) keep their rules, whose masks are shared
        // between grammars (building them inline measured slower).
        let excluded: Vec<u32> = (0..n as u32)
            .filter(|&v| {
                let own = &calls[v as usize];
                size[&comp[v as usize]] > 1 || own.iter().any(|x| x.0 == v || !x.1)
            })
            .chain(counted.iter().copied())
            .collect();
        let absorbed = absorbed_rules(grammar, &calls, &excluded);
        let mut entered_from_outside = vec![false; n];
        entered_from_outside[grammar.root.index()] = true;
        for v in 0..n {
            let c = comp[v];
            if linear[&c] {
                plan.component[v] = Some(c);
            }
            for &(w, _, ptr) in &calls[v] {
                if (linear[&c] && comp[w as usize] == c) || absorbed[w as usize] {
                    plan.tail_calls.insert(ptr);
                } else {
                    entered_from_outside[w as usize] = true;
                }
            }
        }
        for (v, outside) in entered_from_outside.into_iter().enumerate() {
            plan.unused[v] = (plan.component[v].is_some() || absorbed[v]) && !outside;
        }
        plan
    }

    /// True when the call at `e` (an `Expr::Rule` inside this grammar) is built as a jump.
    pub(crate) fn is_tail_call(&self, e: &Expr) -> bool {
        !self.tail_calls.is_empty() && self.tail_calls.contains(&(e as *const Expr))
    }
}

/// IR size (about NFA states) that one group of rules built inline may add up to, copies
/// included: the chain of a `pattern` beside `maxLength: 255` (a rule per pattern state
/// and length) fits, an unbounded copying of shared rules does not.
const ABSORB_MAX_SIZE: u64 = 1 << 18;

/// Rule visits that the whole analysis may spend (past it, nothing is built inline).
const ABSORB_MAX_WORK: u64 = 1 << 22;

/// The rules built inline into the rules that reach them: every call of such a rule is a
/// tail call (`calls[v]`: the calls in rule `v`'s body, with whether each is in tail
/// position), and it is neither the root nor in `excluded`. Each
/// rule built on its own (an *owner*) gets a copy of the inline rules its tail calls
/// reach. A group of owners and inline rules joined by tail calls is kept inline only when
/// its copies add up to at most [`ABSORB_MAX_SIZE`].
///
/// Example: the rules of `pattern` × `maxLength` (a rule per state and length, each ending
/// with a call of the next) become one automaton, where a byte is one DFA step instead of a
/// call, a prediction and, at the end, a completion per byte written.
fn absorbed_rules(
    grammar: &Grammar,
    calls: &[Vec<(u32, bool, *const Expr)>],
    excluded: &[u32],
) -> Vec<bool> {
    let n = calls.len();
    let mut absorbed = vec![true; n];
    absorbed[grammar.root.index()] = false;
    for &r in excluded {
        if let Some(a) = absorbed.get_mut(r as usize) {
            *a = false;
        }
    }
    for list in calls {
        for &(w, tail, _) in list {
            if !tail {
                absorbed[w as usize] = false;
            }
        }
    }
    if !absorbed.iter().any(|&a| a) {
        return absorbed;
    }
    let sizes: Vec<u64> = grammar
        .rules
        .iter()
        .map(|r| super::lower::size(&r.body))
        .collect();
    // Groups by union-find; per group, the size of every owner's copies.
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut group_size = vec![0u64; n];
    let mut seen = vec![u32::MAX; n];
    let mut stack = Vec::new();
    let mut work = 0u64;
    for e in 0..n {
        if absorbed[e] {
            continue;
        }
        let mut copies = 0u64;
        stack.push(e);
        while let Some(v) = stack.pop() {
            for &(w, _, _) in &calls[v] {
                let w = w as usize;
                if !absorbed[w] || seen[w] == e as u32 {
                    continue;
                }
                seen[w] = e as u32;
                work += 1;
                copies = copies.saturating_add(sizes[w]);
                let (a, b) = (find(&mut parent, e), find(&mut parent, w));
                parent[a] = b;
                if copies <= ABSORB_MAX_SIZE {
                    stack.push(w);
                }
            }
        }
        stack.clear();
        let root = find(&mut parent, e);
        group_size[root] = group_size[root].saturating_add(copies);
        if work > ABSORB_MAX_WORK {
            return vec![false; n];
        }
    }
    // Sizes gathered at roots that later joined another group: sum them into the final root.
    let mut total = vec![0u64; n];
    for (v, &size) in group_size.iter().enumerate() {
        let r = find(&mut parent, v);
        total[r] = total[r].saturating_add(size);
    }
    for v in 0..n {
        if absorbed[v] && total[find(&mut parent, v)] > ABSORB_MAX_SIZE {
            absorbed[v] = false;
        }
    }
    absorbed
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
        let plan = TailPlan::new(&g, &[]);
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
    fn a_chain_of_tail_calls_is_built_inline_into_its_one_owner() {
        // `a` is called from `root` (not a tail call): it is built on its own, and `b`, `c`
        // (entered only by tail calls, without calls of their own otherwise) go inline.
        // `d` is also called by a non-tail call, `e` makes one: both stay rules.
        let g = parse_ebnf(
            "root ::= \"<\" a \">\" d \"!\"\n\
             a ::= [x] b | [y] c | [w] d\n\
             b ::= \"\" | [x] c\n\
             c ::= [z] | [v] e\n\
             d ::= [d]\n\
             e ::= [e] d \"e\"",
            "root",
        )
        .unwrap();
        let plan = TailPlan::new(&g, &[]);
        let id = |n: &str| g.rule_id(n).unwrap().index();
        assert!(plan.unused[id("b")] && plan.unused[id("c")]);
        assert!(!plan.unused[id("a")] && !plan.unused[id("root")]);
        assert!(
            !plan.unused[id("d")],
            "d is called by root, not as a tail call"
        );
        assert!(!plan.unused[id("e")], "e calls d before its end");
        // a→b, a→c, b→c: jumps; a→d, c→e stay calls (d and e are rules of their own).
        assert_eq!(plan.tail_calls.len(), 3);
        // Excluded rules (counted repetitions) are never built inline.
        let plan = TailPlan::new(&g, &[id("c") as u32]);
        assert!(plan.unused[id("b")] && !plan.unused[id("c")]);
    }

    #[test]
    fn a_pattern_beside_max_length_is_one_automaton_and_keeps_its_language() {
        use crate::{GrammarCompiler, GrammarMatcher, JsonSchemaOptions, Vocabulary};
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(b"</s>".to_vec());
        let vocab = Vocabulary::from_token_bytes(&tokens, &[256], &[256]).unwrap();
        let compiler = GrammarCompiler::new(vocab);
        // Not one class run: the pattern × length product is a rule per state and length,
        // each ending with a tail call of the next, too large to inline.
        let schema = serde_json::json!({
            "type": "string",
            "pattern": "^([a-c]|[ab][a-c]*[ab])$",
            "maxLength": 255
        });
        let g = compiler
            .compile_json_schema(&schema, &JsonSchemaOptions::default())
            .unwrap();
        let accepts = |text: &str| {
            let mut m = GrammarMatcher::new(g.clone());
            text.bytes().all(|b| m.accept_token(b as u32))
                && m.accept_token(256)
                && m.is_terminated()
        };
        let long = |n: usize| format!("\"a{}b\"", "c".repeat(n - 2));
        for ok in ["\"c\"", "\"ab\"", "\"acb\"", "\"bcca\""] {
            assert!(accepts(ok), "{ok}");
        }
        assert!(accepts(&long(255)));
        for bad in ["\"\"", "\"cb\"", "\"ac\"", "\"d\""] {
            assert!(!accepts(bad), "{bad}");
        }
        assert!(!accepts(&long(256)));
        // The chain's rules are built inline into the one that calls them: a few call
        // edges are left (8 here), not one per pattern state and length (3,144 when every
        // rule is built on its own).
        let calls: usize = (0..g.aut.nodes.len() as u32)
            .map(|n| g.aut.calls_of(n).len())
            .sum();
        assert!(calls <= 16, "{calls} call edges");
    }

    #[test]
    fn a_non_tail_call_inside_the_component_keeps_it_context_free() {
        let g = parse_ebnf("root ::= \"(\" root \")\" root | \"\"", "root").unwrap();
        let plan = TailPlan::new(&g, &[]);
        assert_eq!(plan.component[g.root.index()], None);
        assert!(plan.tail_calls.is_empty());
    }
}
