//! Free text that never contains any of a set of strings (`any_text` with `excludes`, the
//! text between triggered tags), built on [`Avoid`] (one rule per live state of the
//! strings' Aho–Corasick automaton, all tail calls, so one automaton).

use crate::grammar::avoid::Avoid;
use crate::grammar::builder::GrammarBuilder;
use crate::grammar::{CharClass, Expr, RuleId};

/// Any valid UTF-8 text: `[\u{0}-\u{10FFFF}]*`.
pub(crate) fn any_char() -> Expr {
    Expr::Class(CharClass {
        negated: false,
        ranges: vec![(0, 0x10FFFF)],
    })
}

/// Adds the rules of "text containing none of `excludes`" (non-empty strings) and returns
/// the expression that matches it.
pub(crate) fn text_avoiding(b: &mut GrammarBuilder, excludes: &[String], hint: &str) -> Expr {
    let Some(avoid) = Avoid::new(excludes, &[]) else {
        return Expr::Repeat {
            expr: Box::new(any_char()),
            min: 0,
            max: None,
        };
    };
    let ids: Vec<RuleId> = (0..avoid.len())
        .map(|s| b.reserve(&format!("{hint}_{s}")))
        .collect();
    for (id, body) in ids.iter().zip(avoid.bodies(&ids, &Expr::Empty, &[])) {
        b.set(*id, body);
    }
    Expr::Rule(ids[0])
}
