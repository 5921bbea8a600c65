//! The crate's compile errors: [`CompileError`], the one error type of every `compile_*`
//! entry point, whose variants carry each front end's own error (EBNF, JSON Schema, regex,
//! structural tag) beside the errors of the pipeline (invalid IR, unknown tokens, an empty
//! language, size limits). It sits at the crate's root, below the compiler, so that the
//! deprecated 0.x error kept at `tokensieve::regex` does not make a front end name the
//! compiler.

use crate::automaton::AutomatonError;
use crate::grammar::ebnf::EbnfError;
use crate::grammar::InvalidGrammar;
use crate::json_schema::JsonSchemaError;
use crate::limits::LimitExceeded;
use crate::regex::RegexError;
use crate::structural_tag::StructuralTagError;

/// Why a grammar could not be compiled.
///
/// Non-exhaustive: new front ends and limits add variants, so a `match` needs a `_` arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// The EBNF text has a syntax error (the message gives line:column).
    #[error(transparent)]
    Ebnf(#[from] EbnfError),
    /// A grammar built by hand or by a front end breaks an IR invariant.
    #[error("invalid grammar: {0}")]
    Invalid(#[from] InvalidGrammar),
    /// A token terminal names a token the vocabulary does not have.
    #[error("rule `{rule}`: token terminal `{text}` is not a token of the vocabulary (write a special token exactly as the tokenizer spells it; to match the characters, write a string: `\"{text}\"`)")]
    UnknownToken {
        /// The rule where it occurs.
        rule: String,
        /// Its text, as written (such as `<|im_end|>`).
        text: String,
    },
    /// A token terminal `<[id]>` past the vocabulary.
    #[error("rule `{rule}`: token terminal <[{id}]> is past the vocabulary of {size} tokens (ids run from 0 to size - 1)")]
    TokenOutOfRange {
        /// The rule where it occurs.
        rule: String,
        /// The id.
        id: u32,
        /// The tokenizer's size.
        size: usize,
    },
    /// The grammar matches no string at all (its root can never complete), so a matcher
    /// would allow no token, not even a stop token.
    #[error("the grammar matches nothing: rule `{root}` can never complete (an empty character class, or rules that only call each other?)")]
    EmptyLanguage {
        /// The root rule's name.
        root: String,
    },
    /// The automata exceed a hard size limit.
    #[error(transparent)]
    Automaton(AutomatonError),
    /// The input exceeds one of the compiler's [`Limits`](crate::Limits) (the error names the limit, its
    /// value and the input's value).
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    /// A structural tag could not be read or lowered (the message gives its JSON path).
    #[error(transparent)]
    StructuralTag(#[from] StructuralTagError),
    /// A JSON Schema could not be turned into a grammar: a keyword that cannot be enforced
    /// exactly, an invalid or unsatisfiable schema (the message gives its JSON pointer).
    /// A limit the schema exceeds is [`CompileError::Limit`], with the pointer.
    #[error(transparent)]
    JsonSchema(JsonSchemaError),
    /// A regex could not be turned into a grammar: a syntax error or an unsupported
    /// construct (the message gives its position).
    #[error(transparent)]
    Regex(#[from] RegexError),
}

/// The error [`crate::GrammarCompiler::compile_regex`] returned before every entry point
/// returned [`CompileError`] (0.x, before the workspace split), kept so that code matching
/// on it still compiles: `Regex` for syntax errors and unsupported constructs, `Compile`
/// for everything the compiler refuses (a size limit, a pattern that matches nothing).
///
/// Convert with `RegexCompileError::from(e)` (or `?` in a function returning it):
/// [`CompileError::Regex`] becomes [`RegexCompileError::Regex`], any other
/// [`CompileError`] [`RegexCompileError::Compile`]; `CompileError::from` goes back.
///
/// ```
/// # #![allow(deprecated)]
/// use tokensieve::regex::RegexCompileError;
/// use tokensieve::{GrammarCompiler, Vocabulary};
///
/// let vocab = Vocabulary::from_token_bytes(&[b"a".as_slice(), b"<eos>"], &[1], &[1]).unwrap();
/// let compiler = GrammarCompiler::new(vocab);
/// match compiler.compile_regex("a(").map_err(RegexCompileError::from) {
///     Err(RegexCompileError::Regex(e)) => println!("{e}"),
///     Err(RegexCompileError::Compile(e)) => panic!("not a regex error: {e}"),
///     Ok(_) => panic!("`a(` is not a regex"),
/// }
/// ```
#[deprecated(
    since = "0.1.0",
    note = "every compile entry point returns `CompileError`: match `CompileError::Regex(e)` \
            where you matched `RegexCompileError::Regex(e)`, and any other variant where you \
            matched `RegexCompileError::Compile(e)`"
)]
#[derive(Debug, thiserror::Error)]
pub enum RegexCompileError {
    /// The pattern could not be lowered to grammar IR ([`CompileError::Regex`]).
    #[error(transparent)]
    Regex(RegexError),
    /// The grammar could not be compiled (any [`CompileError`] but `Regex`).
    #[error(transparent)]
    Compile(CompileError),
}

#[allow(deprecated)]
impl From<CompileError> for RegexCompileError {
    /// [`CompileError::Regex`] becomes [`RegexCompileError::Regex`], anything else
    /// [`RegexCompileError::Compile`].
    fn from(e: CompileError) -> Self {
        match e {
            CompileError::Regex(e) => RegexCompileError::Regex(e),
            e => RegexCompileError::Compile(e),
        }
    }
}

#[allow(deprecated)]
impl From<RegexError> for RegexCompileError {
    fn from(e: RegexError) -> Self {
        RegexCompileError::Regex(e)
    }
}

#[allow(deprecated)]
impl From<RegexCompileError> for CompileError {
    /// The inverse of `RegexCompileError::from`.
    fn from(e: RegexCompileError) -> Self {
        match e {
            RegexCompileError::Regex(e) => CompileError::Regex(e),
            RegexCompileError::Compile(e) => e,
        }
    }
}

impl From<JsonSchemaError> for CompileError {
    /// A limit the schema exceeds becomes [`CompileError::Limit`] (as from every entry
    /// point), anything else [`CompileError::JsonSchema`].
    fn from(e: JsonSchemaError) -> Self {
        match e {
            JsonSchemaError::Limit(l) => CompileError::Limit(l),
            e => CompileError::JsonSchema(e),
        }
    }
}

impl From<AutomatonError> for CompileError {
    fn from(e: AutomatonError) -> Self {
        match e {
            AutomatonError::Limit(l) => CompileError::Limit(l),
            e => CompileError::Automaton(e),
        }
    }
}
