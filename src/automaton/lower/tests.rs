use super::*;

fn rule(i: u32) -> Expr {
    Expr::Rule(RuleId(i))
}

/// A rule called once from a reached rule and once from one the root does not reach
/// is called twice: it is not moved into its reached caller (its body is over
/// [`INLINE_SHARED_MAX_SIZE`]), and the unreached caller is dropped unwalked.
#[test]
fn an_unreached_caller_still_counts_as_a_use() {
    let member = Expr::Seq((0..20).map(|i| Expr::Bytes(vec![b'a' + i])).collect());
    let g = Grammar {
        rules: vec![
            Rule {
                name: "root".into(),
                body: Expr::Seq(vec![Expr::Bytes(b"{".to_vec()), rule(1)]),
            },
            Rule {
                name: "member".into(),
                body: member.clone(),
            },
            Rule {
                name: "unreached".into(),
                body: Expr::Choice(vec![rule(1), rule(3)]),
            },
            Rule {
                name: "only_from_unreached".into(),
                body: Expr::Bytes(b"z".to_vec()),
            },
        ],
        root: RuleId(0),
    };
    let out = inline_rules(&g, &[], &[]);
    let names: Vec<&str> = out.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["root", "member"]);
    assert_eq!(
        out.rules[0].body,
        Expr::Seq(vec![Expr::Bytes(b"{".to_vec()), rule(1)])
    );
    assert_eq!(out.rules[1].body, member);
    // Without the unreached caller, the member is moved into the root.
    let mut alone = g.clone();
    alone.rules[2].body = rule(3);
    let out = inline_rules(&alone, &[], &[]);
    assert_eq!(out.rules.len(), 1);
    assert_eq!(
        out.rules[0].body,
        Expr::Seq(vec![Expr::Bytes(b"{".to_vec()), member])
    );
}

/// `fits` bounds depth and size as `size` counts it, repetitions multiplied.
#[test]
fn fits_bounds_depth_and_counted_size() {
    let x3 = Expr::Repeat {
        expr: Box::new(Expr::Bytes(b"ab".to_vec())),
        min: 3,
        max: Some(3),
    };
    assert_eq!(size(&x3), 7);
    assert!(fits(&x3, 2, 7));
    assert!(!fits(&x3, 2, 6));
    assert!(!fits(&x3, 1, 7), "the repeated bytes are at depth 2");
    let mut deep = Expr::Bytes(b"x".to_vec());
    for _ in 0..9 {
        deep = Expr::Seq(vec![deep]);
    }
    assert!(fits(&deep, 10, u64::MAX));
    assert!(!fits(&deep, 9, u64::MAX));
}

// The inlining pass as it was before it skipped unreached rules (e4d735a): the
// reference the new one must equal, rule for rule.
fn inline_rules_reference(grammar: &Grammar, keep: &[bool], always: &[bool]) -> Grammar {
    let n = grammar.rules.len();
    // Each rule's callees, and how many times each rule is called over every body.
    let mut uses = vec![0u32; n];
    let mut calls: Vec<Vec<u32>> = Vec::with_capacity(n);
    for r in &grammar.rules {
        let mut v = Vec::new();
        for_each_call(&r.body, &mut |c| v.push(c));
        for &c in &v {
            uses[c as usize] += 1;
        }
        v.sort_unstable();
        v.dedup();
        calls.push(v);
    }
    let cyclic = cyclic_rules(&calls);
    // Post-order over the call DAG of non-cyclic rules: callees are finished first, so an
    // inlined body never contains a call of another inlinable rule.
    let mut bodies: Vec<Expr> = grammar.rules.iter().map(|r| r.body.clone()).collect();
    let mut inline: Vec<Option<Expr>> = vec![None; n];
    let mut done = vec![false; n];
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
                let mut body = std::mem::replace(&mut bodies[v], Expr::Empty);
                substitute_reference(&mut body, &mut inline, &uses);
                let small = depth_reference(&body) <= INLINE_MAX_DEPTH
                    && (always.get(v).copied().unwrap_or(false) || {
                        let size = size(&body);
                        size <= INLINE_MAX_SIZE && (uses[v] <= 1 || size <= INLINE_SHARED_MAX_SIZE)
                    });
                if !cyclic[v]
                    && v != grammar.root.index()
                    && small
                    && !keep.get(v).copied().unwrap_or(false)
                {
                    // A rule called once is moved into its caller (it is unreachable
                    // after that); one called more often is copied into each.
                    if uses[v] == 1 {
                        inline[v] = Some(body);
                        continue;
                    }
                    inline[v] = Some(body.clone());
                }
                bodies[v] = body;
            }
        }
    }
    // Keep the rules reachable from the root.
    let rules = bodies
        .into_iter()
        .zip(&grammar.rules)
        .map(|(body, r)| Rule {
            name: r.name.clone(),
            body,
        })
        .collect();
    Grammar {
        rules,
        root: grammar.root,
    }
    .into_reachable()
}

fn depth_reference(e: &Expr) -> usize {
    let mut max = 0;
    let mut stack = vec![(e, 1usize)];
    while let Some((e, d)) = stack.pop() {
        max = max.max(d);
        match e {
            Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter().map(|x| (x, d + 1))),
            Expr::Repeat { expr, .. } => stack.push((expr, d + 1)),
            _ => {}
        }
    }
    max
}

fn substitute_reference(e: &mut Expr, inline: &mut [Option<Expr>], uses: &[u32]) {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::Rule(r) => {
                let r = r.index();
                if uses[r] == 1 {
                    if let Some(body) = inline[r].take() {
                        *e = body;
                    }
                } else if let Some(body) = &inline[r] {
                    *e = body.clone();
                }
            }
            Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter_mut()),
            Expr::Repeat { expr, .. } => stack.push(expr),
            _ => {}
        }
    }
}

/// A small deterministic generator (xorshift) of grammars: `rules` rules of bytes,
/// classes, sequences, choices, repetitions (large counts too) and calls of any rule.
fn random_grammar(seed: &mut u64, rules: usize) -> Grammar {
    fn next(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }
    fn expr(seed: &mut u64, rules: usize, depth: u32) -> Expr {
        let pick = next(seed) % if depth > 3 { 3 } else { 7 };
        match pick {
            0 => Expr::Bytes(vec![
                b'a' + (next(seed) % 26) as u8;
                1 + (next(seed) % 3) as usize
            ]),
            1 => Expr::Rule(RuleId((next(seed) % rules as u64) as u32)),
            2 => Expr::Empty,
            3 | 4 => {
                let parts = (0..1 + next(seed) % 4).map(|_| expr(seed, rules, depth + 1));
                match pick {
                    3 => Expr::Seq(parts.collect()),
                    _ => Expr::Choice(parts.collect()),
                }
            }
            5 => Expr::Repeat {
                expr: Box::new(expr(seed, rules, depth + 1)),
                min: (next(seed) % 3) as u32,
                max: [None, Some(3), Some(40)][(next(seed) % 3) as usize],
            },
            _ => Expr::Seq(vec![expr(seed, rules, depth + 1), Expr::Rule(RuleId(0))]),
        }
    }
    Grammar {
        rules: (0..rules)
            .map(|i| Rule {
                name: format!("r{i}"),
                body: expr(seed, rules, 0),
            })
            .collect(),
        root: RuleId(0),
    }
}

/// The pass that copies and walks only the reached rules gives exactly what the pass
/// over every rule gave, on 3,000 random grammars with random `keep` and `always`
/// flags (rules called once or many times, from reached and unreached rules, cyclic or
/// not, small or over the size bounds), and with the root out of range.
#[test]
fn inlining_equals_the_pass_over_every_rule() {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..3_000 {
        let rules = 1 + i % 9;
        let mut g = random_grammar(&mut seed, rules);
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let keep: Vec<bool> = (0..rules)
            .map(|r| seed >> r & 1 == 1 && r % 3 == 0)
            .collect();
        let always: Vec<bool> = (0..rules).map(|r| seed >> (r + 20) & 1 == 1).collect();
        if i % 500 == 499 {
            g.root = RuleId(rules as u32 + 1);
        }
        assert_eq!(
            inline_rules(&g, &keep, &always),
            inline_rules_reference(&g, &keep, &always),
            "grammar {i}: {g:?}"
        );
    }
}

#[test]
fn inlines_small_acyclic_rules_and_drops_unreachable() {
    // root ::= a b ; a ::= "x" ; b ::= "y" b | "" ; unused ::= "z"
    let g = Grammar {
        rules: vec![
            Rule {
                name: "root".into(),
                body: Expr::Seq(vec![rule(1), rule(2)]),
            },
            Rule {
                name: "a".into(),
                body: Expr::Bytes(b"x".to_vec()),
            },
            Rule {
                name: "b".into(),
                body: Expr::Choice(vec![
                    Expr::Seq(vec![Expr::Bytes(b"y".to_vec()), rule(2)]),
                    Expr::Empty,
                ]),
            },
            Rule {
                name: "unused".into(),
                body: Expr::Bytes(b"z".to_vec()),
            },
        ],
        root: RuleId(0),
    };
    let out = inline_rules(&g, &[], &[]);
    let names: Vec<&str> = out.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["root", "b"]);
    assert_eq!(
        out.rules[0].body,
        Expr::Seq(vec![Expr::Bytes(b"x".to_vec()), rule(1)])
    );
    assert_eq!(out.root, RuleId(0));
}

#[test]
fn rules_called_from_several_places_are_inlined_only_when_tiny() {
    // `big` (40 bytes) is called twice, `x` (one byte) twice, `once` (40 bytes) once.
    let src = format!(
        "root ::= x big \",\" small | x big small | once\nx ::= \"x\"\nbig ::= \"{}\"\nsmall ::= \"smal\"\nonce ::= \"{}\"",
        "b".repeat(40),
        "o".repeat(40)
    );
    let g = crate::grammar::parse_ebnf(&src, "root").unwrap();
    let out = inline_rules(&g, &[], &[]);
    let names: Vec<&str> = out.rules.iter().map(|r| r.name.as_str()).collect();
    // `x` is called twice but is one node; `big` would be copied: it stays a rule.
    assert_eq!(names, ["root", "big"]);
    let text = out.to_string();
    assert!(text.contains("\"x\" big"), "{text}");
    assert!(text.contains(&format!("\"{}\"", "o".repeat(40))), "{text}");
}

#[test]
fn kept_rules_are_not_inlined() {
    // root ::= s "," s ; s ::= "\"" [a]* "\"" (kept)
    let s = Expr::Seq(vec![
        Expr::Bytes(b"\"".to_vec()),
        Expr::Repeat {
            expr: Box::new(Expr::Bytes(b"a".to_vec())),
            min: 0,
            max: None,
        },
        Expr::Bytes(b"\"".to_vec()),
    ]);
    let g = Grammar {
        rules: vec![
            Rule {
                name: "root".into(),
                body: Expr::Seq(vec![rule(1), Expr::Bytes(b",".to_vec()), rule(1)]),
            },
            Rule {
                name: "s".into(),
                body: s.clone(),
            },
        ],
        root: RuleId(0),
    };
    assert_eq!(inline_rules(&g, &[], &[]).rules.len(), 1);
    let out = inline_rules(&g, &[false, true], &[]);
    assert_eq!(out.rules.len(), 2);
    assert_eq!(out.rules[1].body, s);
}

#[test]
fn merged_counts_are_the_union_of_the_copies() {
    // Exhaustive over small bounds: whenever `merge_counts` merges, the counts it gives
    // are exactly those of `(x{m1,n1}){m2,n2}`; it declines only when there is a gap.
    for m1 in 0..5u32 {
        for n1 in (m1..7).map(Some).chain([None]) {
            for m2 in 0..5u32 {
                for n2 in (m2..7).map(Some).chain([None]) {
                    // Lengths reachable (in copies of x), up to 60.
                    let mut reach = [false; 61];
                    for j in m2..=n2.unwrap_or(60) {
                        let hi = match n1 {
                            Some(n1) => (j * n1).min(60),
                            None if j == 0 => 0,
                            None => 60,
                        };
                        for k in (j * m1).min(61)..=hi {
                            reach[k as usize] = true;
                        }
                    }
                    let gap = (1..60).any(|k| {
                        !reach[k]
                            && reach[..k].iter().any(|&r| r)
                            && reach[k + 1..].iter().any(|&r| r)
                    });
                    match merge_counts(m1, n1, m2, n2) {
                        Some((lo, hi)) => {
                            for (k, &r) in reach.iter().enumerate().take(60) {
                                let k = k as u64;
                                let inside = k >= lo && hi.map_or(true, |h| k <= h);
                                assert_eq!(inside, r, "({m1},{n1:?}) ({m2},{n2:?}) at {k}");
                            }
                        }
                        None => assert!(gap, "({m1},{n1:?}) ({m2},{n2:?}) declined"),
                    }
                }
            }
        }
    }
}

#[test]
fn large_repetition_lowers_to_few_rules() {
    let g = Grammar {
        rules: vec![Rule {
            name: "root".into(),
            body: Expr::Repeat {
                expr: Box::new(Expr::Bytes(b"a".to_vec())),
                min: 2,
                max: Some(20_000),
            },
        }],
        root: RuleId(0),
    };
    let (out, counted) = lower_repeats(g.clone());
    assert_eq!(out.rules.len(), 2);
    assert_eq!(counted, vec![1]);
    // A body with a rule call cannot be counted: it becomes O(log n) helper rules.
    let g = Grammar {
        rules: vec![
            Rule {
                name: "root".into(),
                body: Expr::Repeat {
                    expr: Box::new(Expr::Rule(RuleId(1))),
                    min: 2,
                    max: Some(20_000),
                },
            },
            Rule {
                name: "x".into(),
                body: Expr::Bytes(b"a".to_vec()),
            },
        ],
        root: RuleId(0),
    };
    let (out, counted) = lower_repeats(g.clone());
    assert!(counted.is_empty());
    assert!(out.rules.len() < 60, "{} rules", out.rules.len());
}

/// One repetition of one ASCII class per rule is written out up to 64 copies; a
/// second one in the same rule, a larger one, a non-ASCII class and a longer body are
/// counted past 32; another rule writes out its own.
#[test]
fn one_ascii_class_repetition_per_rule_is_written_out_up_to_64() {
    let rep = |e: Expr, max: u32| Expr::Repeat {
        expr: Box::new(e),
        min: 0,
        max: Some(max),
    };
    let class = |lo: char, hi: char| {
        let ranges = vec![(lo as u32, hi as u32)];
        Expr::Class(crate::grammar::CharClass {
            negated: false,
            ranges,
        })
    };
    let az = || class('a', 'z');
    let counted_of = |bodies: Vec<Expr>| {
        let rules = bodies.into_iter().map(|body| Rule {
            name: "r".into(),
            body,
        });
        let rules = rules.collect();
        lower_repeats(Grammar {
            rules,
            root: RuleId(0),
        })
        .1
        .len()
    };
    assert_eq!(counted_of(vec![rep(az(), 61)]), 0);
    assert_eq!(counted_of(vec![rep(Expr::Bytes(b"-".to_vec()), 64)]), 0);
    assert_eq!(counted_of(vec![rep(az(), 65)]), 1);
    assert_eq!(counted_of(vec![rep(class('é', 'é'), 40)]), 1);
    assert_eq!(counted_of(vec![rep(Expr::Bytes(b"ab".to_vec()), 40)]), 1);
    // `[a-z]{0,63} "." [a-z]{0,63}`: the second is counted; `{0,20}` is not.
    let dot = || Expr::Bytes(b".".to_vec());
    let two = Expr::Seq(vec![rep(az(), 63), dot(), rep(az(), 63)]);
    assert_eq!(counted_of(vec![two.clone()]), 1);
    assert_eq!(
        counted_of(vec![Expr::Seq(vec![rep(az(), 63), dot(), rep(az(), 20)])]),
        0
    );
    assert_eq!(counted_of(vec![rep(az(), 63), rep(az(), 62)]), 0);
    assert_eq!(counted_of(vec![two, rep(az(), 62)]), 1);
}

/// A body of `n` distinct three-byte literals in a choice: pure bytes, not nullable, and
/// `size` about `4 * n` IR nodes.
fn big_body(n: u32) -> Expr {
    let words = (0..n).map(|i| Expr::Bytes(format!("{:03}", i % 1000).into_bytes()));
    Expr::Choice(words.collect())
}

/// Counted rules `lower_repeats` makes of one rule with `body`.
fn counted_rules(body: Expr) -> usize {
    let rules = vec![Rule {
        name: "r".into(),
        body,
    }];
    lower_repeats(Grammar {
        rules,
        root: RuleId(0),
    })
    .1
    .len()
}

#[test]
fn a_repetition_of_at_most_one_copy_is_never_counted() {
    // `x?`, `x*`, `x+` and `x{1}` build one copy of `x` however large it is (a loop or an
    // exit around it), so a counted rule (virtual nodes, base walks at first use) buys
    // nothing: drupal-libraries' optional array body of 2,126 IR nodes was one.
    let body = big_body(300);
    assert!(size(&body) > INLINE_BUDGET, "{}", size(&body));
    let rep = |min: u32, max: Option<u32>| Expr::Repeat {
        expr: Box::new(big_body(300)),
        min,
        max,
    };
    for (min, max) in [(0, Some(1)), (0, None), (1, None), (1, Some(1))] {
        assert_eq!(counted_rules(rep(min, max)), 0, "{{{min},{max:?}}}");
    }
    // Two copies of it are still counted.
    assert_eq!(counted_rules(rep(0, Some(2))), 1);
    assert_eq!(counted_rules(rep(2, None)), 1);
}
