//! Grammars: the IR every front end produces, the EBNF/GBNF front end, the printer, and
//! built-in grammars.

pub(crate) mod avoid;
pub(crate) mod builder;

pub mod builtin;
mod combine;
pub mod ebnf;
pub mod ir;
pub mod print;

pub use builtin::{json_grammar, json_object_or_array_grammar, JSON_EBNF};
pub use ebnf::{parse_ebnf, EbnfError, EbnfErrorKind, MAX_NESTING_DEPTH, MAX_REPEAT_BOUND};
/// How a prefix of undeclared keys is listed among a closed object's names (written by
/// the JSON Schema front end, read by the matcher's closed-object key check and kept in a
/// serialized grammar): after a NUL, which no narrowed (plain) declared name contains.
pub(crate) const OPEN_PREFIX_MARK: char = '\0';

pub(crate) use ir::RulesView;
pub use ir::{CharClass, Expr, Grammar, InvalidGrammar, Rule, RuleId, TokenRef};
