//! Which rules can match the empty string, and from which nodes a rule can reach its end
//! through nullable calls only; then the follow bytes of each rule
//! (`Automaton::compute_follow`), over every node or over the nodes a splice appended
//! (`Automaton::solve_appended`).

use super::{add_range, or_into, Automaton};

impl Automaton {
    /// Sets `nullable[r]` for every rule whose start reaches its end through nullable
    /// calls only (counted rules: `min == 0`), and returns `end[n]`: from node `n` the
    /// rule can reach its end through nullable calls only. Both least fixed points, found
    /// with a worklist over the call edges read backwards, so every edge is looked at a
    /// bounded number of times (a round per change over every node would be quadratic in
    /// chains of nullable rules, such as a JSON Schema object's optional members).
    pub(super) fn compute_nullable(&mut self) -> Vec<bool> {
        for c in &self.counted {
            self.nullable[c.rule as usize] = c.min == 0;
        }
        let nodes = self.nodes.len();
        let rules = self.rule_start.len();
        // Call edges by target node, as (caller node, rule), and by rule, as (caller
        // node, target): compressed rows.
        let mut by_target = vec![0u32; nodes + 1];
        let mut by_rule = vec![0u32; rules + 1];
        for c in &self.call_edges {
            by_target[c.target as usize + 1] += 1;
            by_rule[c.rule as usize + 1] += 1;
        }
        for i in 0..nodes {
            by_target[i + 1] += by_target[i];
        }
        for i in 0..rules {
            by_rule[i + 1] += by_rule[i];
        }
        // (Every call edge lies in exactly one node's range, so the rows fill exactly.)
        let (mut fill_t, mut fill_r) = (by_target.clone(), by_rule.clone());
        let mut callers_t = vec![(0u32, 0u32); self.call_edges.len()];
        let mut callers_r = vec![(0u32, 0u32); self.call_edges.len()];
        for (n, node) in self.nodes.iter().enumerate() {
            for c in &self.call_edges[node.calls.0 as usize..node.calls.1 as usize] {
                callers_t[fill_t[c.target as usize] as usize] = (n as u32, c.rule);
                fill_t[c.target as usize] += 1;
                callers_r[fill_r[c.rule as usize] as usize] = (n as u32, c.target);
                fill_r[c.rule as usize] += 1;
            }
        }
        debug_assert!(fill_t[..nodes] == by_target[1..] && fill_r[..rules] == by_rule[1..]);
        // The rule each real node starts, if any.
        let mut starts = vec![u32::MAX; nodes];
        for (r, &s) in self.rule_start.iter().enumerate() {
            if !self.is_virtual(s) {
                debug_assert_eq!(starts[s as usize], u32::MAX, "two rules start at one node");
                starts[s as usize] = r as u32;
            }
        }
        enum Event {
            End(u32),
            Nullable(u32),
        }
        let mut end = vec![false; nodes];
        let mut work = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            if node.is_final {
                end[n] = true;
                work.push(Event::End(n as u32));
            }
        }
        for r in 0..rules {
            if self.nullable[r] {
                work.push(Event::Nullable(r as u32));
            }
        }
        while let Some(event) = work.pop() {
            match event {
                Event::End(m) => {
                    let m = m as usize;
                    let (lo, hi) = (by_target[m] as usize, by_target[m + 1] as usize);
                    for &(n, rule) in &callers_t[lo..hi] {
                        if self.nullable[rule as usize] && !end[n as usize] {
                            end[n as usize] = true;
                            work.push(Event::End(n));
                        }
                    }
                    let r = starts[m];
                    if r != u32::MAX && !self.nullable[r as usize] {
                        self.nullable[r as usize] = true;
                        work.push(Event::Nullable(r));
                    }
                }
                Event::Nullable(r) => {
                    let r = r as usize;
                    let (lo, hi) = (by_rule[r] as usize, by_rule[r + 1] as usize);
                    for &(n, target) in &callers_r[lo..hi] {
                        if end[target as usize] && !end[n as usize] {
                            end[n as usize] = true;
                            work.push(Event::End(n));
                        }
                    }
                }
            }
        }
        end
    }
}

impl Automaton {
    /// `end`: from [`Automaton::compute_nullable`]. Least fixed points by rounds over the
    /// nodes with call edges only (the others' first bytes are their own edges').
    pub(super) fn compute_follow(&mut self, end: &[bool]) {
        let callers: Vec<u32> = (0..self.nodes.len() as u32)
            .filter(|&n| !self.calls_of(n).is_empty())
            .collect();
        let first = self.first_bytes(0, &callers, |_| true);
        self.follow_rounds(0, &callers, &first, |n| end[n as usize]);
    }

    /// Per node from `from` on: the bytes that can come first from it, through calls and
    /// nullable calls (least fixed point by rounds over `callers`, the nodes from `from`
    /// on with call edges; their callees' starts are such nodes, or virtual). Counted
    /// rules (those `counted` accepts) start with their body's start state's bytes.
    pub(super) fn first_bytes(
        &self,
        from: usize,
        callers: &[u32],
        counted: impl Fn(u32) -> bool,
    ) -> Vec<[u64; 4]> {
        let mut counted_first: Vec<[u64; 4]> = vec![[0; 4]; self.rule_start.len()];
        for c in self.counted.iter().filter(|c| counted(c.rule)) {
            for e in c.edges_of(0) {
                add_range(&mut counted_first[c.rule as usize], e.lo, e.hi);
            }
        }
        let mut first: Vec<[u64; 4]> = vec![[0; 4]; self.nodes.len() - from];
        for (i, f) in first.iter_mut().enumerate() {
            for e in self.bytes_of((from + i) as u32) {
                add_range(f, e.lo, e.hi);
            }
        }
        loop {
            let mut changed = false;
            for &n in callers {
                let mut acc = first[n as usize - from];
                for c in self.calls_of(n) {
                    let s = self.rule_start[c.rule as usize];
                    let f = match self.is_virtual(s) {
                        true => counted_first[c.rule as usize],
                        false => first[s as usize - from],
                    };
                    or_into(&mut acc, &f);
                    if self.nullable[c.rule as usize] {
                        or_into(&mut acc, &first[c.target as usize - from]);
                    }
                }
                if acc != first[n as usize - from] {
                    first[n as usize - from] = acc;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        first
    }

    /// Adds to the follow bytes of each rule called from `callers` (nodes from `from` on,
    /// calling rules whose nodes are from `from` on) what can come after its calls: the
    /// first bytes of the return node (`first`, from [`Automaton::first_bytes`]) and, when
    /// the caller's rule can end there (`end`), the caller's rule's follow bytes. Least
    /// fixed point by rounds, from the follow bytes the rules hold.
    pub(super) fn follow_rounds(
        &mut self,
        from: usize,
        callers: &[u32],
        first: &[[u64; 4]],
        end: impl Fn(u32) -> bool,
    ) {
        loop {
            let mut changed = false;
            for &n in callers {
                let caller = self.nodes[n as usize].rule as usize;
                let (cs, ce) = self.nodes[n as usize].calls;
                for ci in cs..ce {
                    let c = self.call_edges[ci as usize];
                    let mut acc = self.follow[c.rule as usize];
                    or_into(&mut acc, &first[c.target as usize - from]);
                    if end(c.target) {
                        let fc = self.follow[caller];
                        or_into(&mut acc, &fc);
                    }
                    if acc != self.follow[c.rule as usize] {
                        self.follow[c.rule as usize] = acc;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::lower;
    use crate::grammar::ebnf::parse_ebnf;
    use crate::limits::{Deadline, Limits};

    /// The least fixed point of `nullable` and `end` by rounds over every node, as
    /// [`Automaton::compute_nullable`] computed it before its worklist: the reference.
    fn nullable_by_rounds(a: &Automaton) -> (Vec<bool>, Vec<bool>) {
        let mut nullable = vec![false; a.rule_start.len()];
        for c in &a.counted {
            nullable[c.rule as usize] = c.min == 0;
        }
        loop {
            let mut end: Vec<bool> = a.nodes.iter().map(|n| n.is_final).collect();
            loop {
                let mut changed = false;
                for n in 0..a.nodes.len() {
                    if !end[n]
                        && a.calls_of(n as u32)
                            .iter()
                            .any(|c| nullable[c.rule as usize] && end[c.target as usize])
                    {
                        end[n] = true;
                        changed = true;
                    }
                }
                if !changed {
                    break;
                }
            }
            let mut changed = false;
            for (r, &s) in nullable.iter_mut().zip(&a.rule_start) {
                if !a.is_virtual(s) && !*r && end[s as usize] {
                    *r = true;
                    changed = true;
                }
            }
            if !changed {
                return (nullable, end);
            }
        }
    }

    /// The worklist finds the rounds' fixed points, from scratch: chains of nullable rules
    /// (in both orders of definition), a rule nullable only through a nullable call after
    /// a non-nullable one is ruled out, recursion, and counted rules (of bytes, so they
    /// stay counted) with and without a zero minimum.
    #[test]
    fn nullable_rules_are_the_rounds_fixed_point() {
        for (src, any) in [
            (
                r#"root ::= a "x" | b
               a ::= b c
               b ::= c | "y"
               c ::= d d
               d ::= "" | "z""#,
                true,
            ),
            (
                r#"root ::= d
               d ::= c c
               c ::= b
               b ::= a | "q"
               a ::= """#,
                true,
            ),
            (
                r#"root ::= a b "!"
               a ::= "k" a | b
               b ::= a "m" | "n" | """#,
                true,
            ),
            (
                r#"root ::= x{0,300} y{2,300} z
               x ::= "a" | ""
               y ::= "b"
               z ::= y{0,300} | "c""#,
                true,
            ),
            (
                r#"root ::= "a"{0,300} "b"{2,300} z
               z ::= "b"{0,300} | "c""#,
                true,
            ),
            (
                r#"root ::= "a"{1,300} w "!" w
               w ::= "b"{2,300} | """#,
                true,
            ),
            (
                r#"root ::= e f
               e ::= f "w"
               f ::= e | g
               g ::= "v""#,
                false,
            ),
        ] {
            let g = parse_ebnf(src, "root").unwrap();
            let (g, counted) = lower::lower_repeats(g);
            let (limits, deadline) = (Limits::default(), Deadline::start(None));
            let mut a =
                Automaton::build(&g, &counted, &|_| 0, &limits, &deadline, None, &[]).unwrap();
            let (nullable, end) = nullable_by_rounds(&a);
            assert_eq!(a.nullable, nullable, "{src}");
            assert_eq!(nullable.iter().any(|&n| n), any, "{src}");
            // From scratch: both fixed points, not `end` alone.
            a.nullable.fill(false);
            assert_eq!(a.compute_nullable(), end, "{src}");
            assert_eq!(a.nullable, nullable, "{src}");
            if src.contains("\"{") {
                assert!(!a.counted.is_empty(), "{src}: counted rules");
                // Of non-empty bytes: nullable exactly when the minimum is zero.
                for c in &a.counted {
                    assert_eq!(nullable[c.rule as usize], c.min == 0, "{src}: {}", c.min);
                }
            }
        }
    }
}
