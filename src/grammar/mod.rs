//! Grammars: the IR every front end produces, the EBNF/GBNF front end, the printer, and
//! built-in grammars.

pub mod ir;

pub use ir::{CharClass, Expr, Grammar, InvalidGrammar, Rule, RuleId, TokenRef};
