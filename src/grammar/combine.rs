//! [`Grammar::union`] and [`Grammar::concat`]: one grammar from several, as XGrammar 0.2.9's
//! `Grammar.union(*grammars)` and `Grammar.concat(*grammars)`.

use std::collections::HashSet;

use super::ir::{Expr, Grammar, Rule, RuleId};

impl Grammar {
    /// The grammar of what any one of `grammars` matches: `root ::= root_1 | root_2 | …`,
    /// where `root_i` is the root rule of the `i`-th grammar (1-based). Rules are renamed
    /// apart: a name already taken gets the first free `_1`, `_2`… suffix, as XGrammar
    /// does. No grammars: `root ::= ""` (XGrammar's `root ::= ()`).
    pub fn union(grammars: &[Grammar]) -> Grammar {
        combine(grammars, Expr::Choice)
    }

    /// The grammar of one match of each of `grammars`, in order: `root ::= root_1 root_2
    /// …`, the rules renamed apart as in [`Grammar::union`]. No grammars: `root ::= ""`.
    pub fn concat(grammars: &[Grammar]) -> Grammar {
        combine(grammars, Expr::Seq)
    }
}

/// `root ::= join(root_1, root_2, …)` over the rules of `grammars`, shifted and renamed.
fn combine(grammars: &[Grammar], join: fn(Vec<Expr>) -> Expr) -> Grammar {
    let mut taken: HashSet<String> = HashSet::from(["root".to_string()]);
    let mut free = |base: &str| -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while taken.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        taken.insert(name.clone());
        name
    };
    let mut rules = vec![Rule {
        name: "root".into(),
        body: Expr::Empty,
    }];
    let mut roots = Vec::with_capacity(grammars.len());
    for g in grammars {
        let offset = rules.len() as u32;
        roots.push(Expr::Rule(RuleId(g.root.0 + offset)));
        for (i, rule) in g.rules.iter().enumerate() {
            let name = if i == g.root.index() {
                free("root")
            } else {
                free(&rule.name)
            };
            let mut body = rule.body.clone();
            shift_rule_ids(&mut body, offset);
            rules.push(Rule { name, body });
        }
    }
    rules[0].body = match roots.len() {
        0 => Expr::Empty,
        1 => roots.pop().unwrap_or(Expr::Empty),
        _ => join(roots),
    };
    Grammar {
        rules,
        root: RuleId(0),
    }
}

/// Adds `offset` to every rule id in `e` (explicit stack: no recursion on depth).
fn shift_rule_ids(e: &mut Expr, offset: u32) {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter_mut()),
            Expr::Repeat { expr, .. } => stack.push(expr),
            Expr::Rule(id) => id.0 += offset,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::builtin::reference::accepts;
    use super::super::ebnf::parse_ebnf;
    use super::Grammar;

    fn two() -> (Grammar, Grammar) {
        let a = parse_ebnf("root ::= \"a\" r\nr ::= \"x\" | \"x\" r", "root").unwrap();
        let b = parse_ebnf("s ::= \"b\" r root\nr ::= \"y\"\nroot ::= \"!\"", "s").unwrap();
        (a, b)
    }

    /// Names as XGrammar 0.2.9 gives them (checked: `root_1`, `r`, `root_2`, `r_1`).
    #[test]
    fn union_and_concat_rename_rules_apart() {
        let (a, b) = two();
        let u = Grammar::union(&[a.clone(), b.clone()]);
        u.validate().unwrap();
        let names: Vec<&str> = u.rules.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["root", "root_1", "r", "root_2", "r_1", "root_3"]);
        assert_eq!(
            u.to_string().lines().next(),
            Some("root ::= root_1 | root_2")
        );
        for s in ["ax", "axxx", "by!"] {
            assert!(accepts(&u, s), "union should accept {s:?}");
        }
        for s in ["a", "axby!", "b!", "by", ""] {
            assert!(!accepts(&u, s), "union should reject {s:?}");
        }
        let c = Grammar::concat(&[a.clone(), b]);
        c.validate().unwrap();
        assert!(accepts(&c, "axxby!"));
        for s in ["ax", "by!", "by!ax", "axby"] {
            assert!(!accepts(&c, s), "concat should reject {s:?}");
        }
        assert_eq!(parse_ebnf(&c.to_string(), "root").unwrap(), c);
        let one = Grammar::union(std::slice::from_ref(&a));
        assert_eq!(one.to_string().lines().next(), Some("root ::= root_1"));
        let none = Grammar::concat(&[]);
        assert!(accepts(&none, "") && !accepts(&none, "a"));
    }
}
