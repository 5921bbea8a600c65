//! An adapter for serving engines: the per-request calls that vLLM's structured-output
//! backends implement (`vllm/v1/structured_output/backend_types.py`), over a
//! [`GrammarMatcher`].
//!
//! [`StructuredOutputBackend`] is the engine-level half (vLLM's `StructuredOutputBackend`:
//! one per model, holding the [`GrammarCompiler`] and its whole-grammar cache):
//! [`StructuredOutputBackend::compile_grammar`] takes a request's kind
//! ([`StructuredOutputKind`]: json, json_object, regex, grammar, structural_tag, choice)
//! and its specification text. [`StructuredOutputGrammar`] is the request-level half
//! (vLLM's `StructuredOutputGrammar`): `accept_tokens(request_id, tokens)`,
//! `validate_tokens(tokens)`, `rollback(n)`, `fill_bitmask(bitmask, row)`,
//! `is_terminated()`, `reset()`, with the semantics of vLLM's xgrammar backend: tokens
//! after termination are ignored by `accept_tokens` and validate to nothing, and
//! `validate_tokens` stops after a token that terminates. `docs/serving.md` maps vLLM's and
//! SGLang's backend methods onto these.
//!
//! ```
//! use tokensieve::engine::{StructuredOutputBackend, StructuredOutputKind};
//! use tokensieve::{GrammarCompiler, Vocabulary};
//!
//! let tokens: Vec<&[u8]> = vec![b"yes", b"no", b"y", b"</s>"];
//! let vocab = Vocabulary::from_token_bytes(&tokens, &[3], &[3]).unwrap();
//! let backend = StructuredOutputBackend::new(GrammarCompiler::new(vocab));
//! let mut g = backend
//!     .compile_grammar(StructuredOutputKind::Choice, r#"["yes", "no"]"#)
//!     .unwrap();
//! let mut bitmask = backend.allocate_token_bitmask(4); // 4 rows: the batch
//! g.fill_bitmask(&mut bitmask, 2).unwrap(); // this request's row
//! assert_eq!(g.validate_tokens(&[2, 0]), vec![2]); // "y", then "yes" would be "yyes"
//! assert!(g.accept_tokens("req-1", &[0, 3]));
//! assert!(g.is_terminated());
//! ```

use crate::json_schema::JsonSchemaOptions;
use crate::matcher::{MatcherError, MatcherOptions};
use crate::{
    CompileError, CompiledGrammar, GrammarCompiler, GrammarMatcher, JsonSchemaError, RegexError,
};
use std::sync::Arc;

/// The kind of a request's structured output (vLLM's `StructuredOutputOptions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StructuredOutputKind {
    /// A JSON Schema (the specification is its JSON text).
    Json,
    /// Any JSON object (the specification is ignored): the schema `{"type": "object"}`,
    /// open whatever the backend's `strict` option (vLLM's `json_object`).
    JsonObject,
    /// A regular expression (Rust `regex` syntax; see [`crate::regex`]).
    Regex,
    /// An EBNF grammar (XGrammar's dialect or GBNF) with a rule named `root`.
    Grammar,
    /// A structural tag in XGrammar's JSON.
    StructuralTag,
    /// One of a list of strings (the specification is a JSON array of strings).
    Choice,
}

/// Why a request's structured output could not be compiled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The JSON Schema (or `json_object`'s schema) was refused by its front end
    /// ([`CompileError::JsonSchema`]).
    #[error(transparent)]
    JsonSchema(JsonSchemaError),
    /// The regular expression (or a `choice`'s) was refused by its front end
    /// ([`CompileError::Regex`]).
    #[error(transparent)]
    Regex(RegexError),
    /// The grammar or structural tag was refused, or the grammar of any kind could not be
    /// compiled (a limit, a grammar that matches nothing...).
    #[error(transparent)]
    Compile(CompileError),
    /// A `choice` specification that is not a JSON array of strings.
    #[error("choice: {0} (expected a JSON array of strings, such as [\"yes\", \"no\"])")]
    Choice(String),
    /// The matcher options were refused (an override stop token past the vocabulary).
    #[error(transparent)]
    Matcher(#[from] MatcherError),
}

impl From<CompileError> for EngineError {
    /// The JSON Schema and regex front ends' errors get their own variants; the rest is
    /// [`EngineError::Compile`].
    fn from(e: CompileError) -> Self {
        match e {
            CompileError::JsonSchema(e) => EngineError::JsonSchema(e),
            CompileError::Regex(e) => EngineError::Regex(e),
            e => EngineError::Compile(e),
        }
    }
}

/// The engine-level half: one per model, compiles each request's structured output
/// through the compiler's whole-grammar cache (vLLM's `StructuredOutputBackend`).
#[derive(Clone, Debug)]
pub struct StructuredOutputBackend {
    compiler: GrammarCompiler,
    json_options: JsonSchemaOptions,
    matcher_options: MatcherOptions,
}

impl StructuredOutputBackend {
    /// A backend over `compiler`, with the default JSON Schema and matcher options.
    pub fn new(compiler: GrammarCompiler) -> Self {
        StructuredOutputBackend {
            compiler,
            json_options: JsonSchemaOptions::default(),
            matcher_options: MatcherOptions::default(),
        }
    }

    /// The JSON Schema options of `json` and `json_object` requests (vLLM's
    /// `disable_any_whitespace` is `any_whitespace: false`).
    pub fn with_json_options(mut self, options: JsonSchemaOptions) -> Self {
        self.json_options = options;
        self
    }

    /// The options of every request's matcher (vLLM passes `max_rollback_tokens =
    /// num_speculative_tokens`); [`Self::compile_grammar_with_stop_tokens`] overrides the
    /// stop tokens per request.
    pub fn with_matcher_options(mut self, options: MatcherOptions) -> Self {
        self.matcher_options = options;
        self
    }

    /// The compiler (for its cache: `clear_cache`, `cache_size_bytes`).
    pub fn compiler(&self) -> &GrammarCompiler {
        &self.compiler
    }

    /// A `[max_num_seqs, ceil(vocab_size / 32)]` bitmask, every bit set (vLLM's
    /// `allocate_token_bitmask`).
    pub fn allocate_token_bitmask(&self, max_num_seqs: usize) -> Vec<u32> {
        crate::mask::allocate_token_bitmask(max_num_seqs, self.compiler.vocabulary().vocab_size())
    }

    /// Compiles one request's structured output: `spec` read as `kind` says (vLLM's
    /// `compile_grammar(request_type, grammar_spec)`).
    ///
    /// # Errors
    /// The front end's error ([`EngineError::JsonSchema`], [`EngineError::Regex`],
    /// [`EngineError::Compile`]), or [`EngineError::Choice`].
    pub fn compile_grammar(
        &self,
        kind: StructuredOutputKind,
        spec: &str,
    ) -> Result<StructuredOutputGrammar, EngineError> {
        let compiled = self.compile(kind, spec)?;
        Ok(StructuredOutputGrammar::new(
            compiled,
            &self.matcher_options,
        )?)
    }

    /// As [`Self::compile_grammar`], with this request's stop tokens instead of the
    /// vocabulary's (vLLM's `stop_token_ids`; XGrammar's `override_stop_tokens`).
    ///
    /// # Errors
    /// As [`Self::compile_grammar`], and [`EngineError::Matcher`] for a stop token past the
    /// vocabulary.
    pub fn compile_grammar_with_stop_tokens(
        &self,
        kind: StructuredOutputKind,
        spec: &str,
        stop_tokens: &[u32],
    ) -> Result<StructuredOutputGrammar, EngineError> {
        let compiled = self.compile(kind, spec)?;
        let options = MatcherOptions {
            override_stop_tokens: Some(stop_tokens.to_vec()),
            ..self.matcher_options.clone()
        };
        Ok(StructuredOutputGrammar::new(compiled, &options)?)
    }

    /// The compiled grammar of a request, shared with every other request of the same
    /// kind, specification and options (the compiler's cache).
    ///
    /// # Errors
    /// As [`Self::compile_grammar`].
    pub fn compile(
        &self,
        kind: StructuredOutputKind,
        spec: &str,
    ) -> Result<Arc<CompiledGrammar>, EngineError> {
        let c = &self.compiler;
        Ok(match kind {
            StructuredOutputKind::Json => c.compile_json_schema(spec, &self.json_options)?,
            StructuredOutputKind::JsonObject => {
                // Any object, as vLLM means it: strict mode would close `{"type":"object"}`
                // to `{}`.
                let opts = crate::JsonSchemaOptions {
                    strict: false,
                    ..self.json_options.clone()
                };
                c.compile_json_schema(r#"{"type":"object"}"#, &opts)?
            }
            StructuredOutputKind::Regex => c.compile_regex(spec)?,
            StructuredOutputKind::Grammar => c.compile_grammar(spec)?,
            StructuredOutputKind::StructuralTag => c.compile_structural_tag(spec)?,
            StructuredOutputKind::Choice => {
                let choices: Vec<String> =
                    serde_json::from_str(spec).map_err(|e| EngineError::Choice(e.to_string()))?;
                if choices.is_empty() {
                    return Err(EngineError::Choice("no choices".into()));
                }
                let pattern = choices
                    .iter()
                    .map(|s| regex_syntax::escape(s))
                    .collect::<Vec<_>>()
                    .join("|");
                c.compile_regex(&pattern)?
            }
        })
    }
}

/// The request-level half: one matcher and vLLM's per-request calls
/// (`StructuredOutputGrammar` of `backend_types.py`, with the semantics of its xgrammar
/// backend).
#[derive(Clone, Debug)]
pub struct StructuredOutputGrammar {
    matcher: GrammarMatcher,
    /// Tokens accepted so far (vLLM's `num_processed_tokens`).
    num_processed_tokens: usize,
}

impl StructuredOutputGrammar {
    /// A request's grammar over `compiled`, with `options`.
    ///
    /// # Errors
    /// [`MatcherError::StopTokenOutOfRange`] for an override stop token past the vocabulary.
    pub fn new(
        compiled: Arc<CompiledGrammar>,
        options: &MatcherOptions,
    ) -> Result<Self, MatcherError> {
        Ok(StructuredOutputGrammar {
            matcher: GrammarMatcher::with_options(compiled, options)?,
            num_processed_tokens: 0,
        })
    }

    /// Accepts `tokens` in order (the sampled token, or the accepted part of a draft).
    /// True when every token up to termination was accepted; tokens after termination are
    /// ignored (true). False at the first token the grammar rejects, with the tokens before
    /// it accepted (vLLM logs an error then: with masks applied it does not happen).
    /// `request_id` names the request in the log line of a rejection.
    pub fn accept_tokens(&mut self, request_id: &str, tokens: &[u32]) -> bool {
        for &t in tokens {
            if self.matcher.is_terminated() {
                return true;
            }
            if let Err(e) = self.matcher.try_accept_token(t) {
                // The library does not log; the caller sees `false` (and may ask why with
                // `matcher().clone().try_accept_token`).
                let _ = (request_id, e);
                return false;
            }
            self.num_processed_tokens += 1;
        }
        true
    }

    /// The longest prefix of `tokens` that would be accepted, state unchanged (vLLM's
    /// `validate_tokens`, for speculative decoding): stops after a token that terminates,
    /// empty once terminated.
    pub fn validate_tokens(&mut self, tokens: &[u32]) -> Vec<u32> {
        if self.matcher.is_terminated() {
            return Vec::new();
        }
        let mut n = 0;
        for &t in tokens {
            if self.matcher.try_accept_token(t).is_err() {
                break;
            }
            n += 1;
            if self.matcher.is_terminated() {
                break;
            }
        }
        // Just accepted: n steps are there to undo, whatever max_rollback_tokens says.
        self.matcher.rollback_steps(n);
        tokens[..n].to_vec()
    }

    /// Undoes the last `num_tokens` accepted tokens (rejected drafts of speculative
    /// decoding).
    ///
    /// # Errors
    /// [`MatcherError::Rollback`] past the tokens accepted (or
    /// [`MatcherOptions::max_rollback_tokens`]); nothing changes then.
    pub fn rollback(&mut self, num_tokens: usize) -> Result<(), MatcherError> {
        self.matcher.rollback(num_tokens)?;
        self.num_processed_tokens = self.num_processed_tokens.saturating_sub(num_tokens);
        Ok(())
    }

    /// Fills row `row` of the batch bitmask `bitmask` (`[batch, words]`) with this
    /// request's next-token mask (vLLM's `fill_bitmask(bitmask, batch_index)`).
    ///
    /// # Errors
    /// As [`GrammarMatcher::fill_next_token_bitmask_at`].
    pub fn fill_bitmask(&mut self, bitmask: &mut [u32], row: usize) -> Result<(), MatcherError> {
        self.matcher.fill_next_token_bitmask_at(bitmask, row)
    }

    /// True once the request's output is finished (a stop token accepted, or with
    /// `terminate_without_stop_token` the grammar complete).
    pub fn is_terminated(&self) -> bool {
        self.matcher.is_terminated()
    }

    /// Back to the start, as a new request.
    pub fn reset(&mut self) {
        self.matcher.reset();
        self.num_processed_tokens = 0;
    }

    /// Tokens accepted so far (vLLM's `num_processed_tokens`).
    pub fn num_processed_tokens(&self) -> usize {
        self.num_processed_tokens
    }

    /// The bytes the grammar forces next (jump-forward decoding; SGLang's
    /// `try_jump_forward`), as a string cut to valid UTF-8.
    pub fn find_jump_forward_string(&mut self) -> String {
        self.matcher.find_jump_forward_string()
    }

    /// The matcher underneath.
    pub fn matcher(&self) -> &GrammarMatcher {
        &self.matcher
    }

    /// The matcher underneath, to drive directly (for example in a
    /// [`crate::mask::batch_fill_next_token_bitmask`] of the whole batch).
    pub fn matcher_mut(&mut self) -> &mut GrammarMatcher {
        &mut self.matcher
    }
}
