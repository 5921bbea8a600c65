//! tokensieve: constrained decoding for LLMs.

pub mod grammar;
pub mod vocab;

pub use grammar::{Grammar, RuleId};
pub use vocab::{VocabError, Vocabulary};
