//! # tokensieve: constrained decoding for LLMs
//!
//! An inference loop calls tokensieve once per decoding step: it says which tokens of the
//! vocabulary may come next (a token bitmask), and it advances when the sampled token is
//! accepted. Whatever the model's logits say, the output then matches the grammar.
//!
//! The pipeline: a grammar (EBNF / GBNF text, or IR from another front end) → byte-level
//! rule automata → a per-node token mask cache ([`CompiledGrammar`], shared through an
//! `Arc`) → one [`GrammarMatcher`] per sequence.
//!
//! ```
//! use tokensieve::{GrammarCompiler, GrammarMatcher, Vocabulary};
//!
//! // A toy vocabulary; real ones come from `Vocabulary::from_tokenizer_json` or
//! // `Vocabulary::o200k_base`.
//! let tokens: Vec<&[u8]> = vec![b"{", b"}", b"\"", b"a", b":", b"1", b"<eos>"];
//! let vocab = Vocabulary::from_token_bytes(&tokens, &[6], &[6]).unwrap();
//! let compiler = GrammarCompiler::new(vocab);
//! let json = compiler.compile_builtin_json().unwrap();
//! let mut matcher = GrammarMatcher::new(json);
//! let mut bitmask = vec![0u32; matcher.bitmask_words()];
//! for token in [0, 2, 3, 2, 4, 5, 1] {
//!     matcher.fill_next_token_bitmask(&mut bitmask).unwrap();
//!     assert!(tokensieve::mask::is_token_allowed(&bitmask, token));
//!     assert!(matcher.accept_token(token));
//! }
//! assert!(matcher.accept_token(6)); // the stop token, where the JSON value may end
//! assert!(matcher.is_terminated());
//! ```
#![warn(missing_docs)]

mod automaton;
mod compiler;
pub mod engine;
mod error;
pub mod grammar;
pub mod json_schema;
pub mod limits;
pub mod mask;
pub mod matcher;
mod parser;
pub mod regex;
pub mod structural_tag;
pub mod vocab;

pub use crate::regex::{RegexError, RegexOptions};
pub use automaton::AutomatonError;
#[allow(deprecated)]
pub use compiler::RegexCompileError;
pub use compiler::{
    CompileError, CompiledGrammar, DeserializeError, GrammarCacheStats, GrammarCompiler,
    Precompute, RuleAutomatonCacheStats, SerializeError, FORMAT_VERSION,
};
pub use grammar::{Grammar, RuleId};
pub use json_schema::{json_schema_to_grammar, JsonSchemaError, JsonSchemaOptions};
pub use limits::{Limit, LimitExceeded, Limits};
pub use mask::BackgroundStatus;
pub use matcher::{GrammarMatcher, MatcherError, MatcherOptions, TokenRejection};
pub use structural_tag::{structural_tag_to_grammar, StructuralTag, StructuralTagError};
pub use vocab::{VocabError, Vocabulary};
