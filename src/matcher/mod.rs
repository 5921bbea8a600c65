//! The grammar matcher: one per sequence being decoded.
//!
//! Per decoding step an inference loop calls [`GrammarMatcher::fill_next_token_bitmask`],
//! applies the mask to the logits, samples, then calls [`GrammarMatcher::accept_token`].
//! The invariant every test leans on: **for every token and every state, the mask bit is
//! set if and only if `accept_token` on that state would succeed**, within the call's
//! Earley work budget ([`Limits::max_step_items`](crate::Limits::max_step_items)): a call
//! past it fails with [`TokenRejection::StepLimit`] or [`MatcherError::Limit`] and changes
//! nothing, whatever the mask said.
//!
//! ```
//! use std::sync::Arc;
//! use tokensieve::{GrammarCompiler, GrammarMatcher, Vocabulary};
//!
//! let tokens: Vec<&[u8]> = vec![b"a", b"b", b"ab", b"</s>"];
//! let vocab = Vocabulary::from_token_bytes(&tokens, &[3], &[3]).unwrap();
//! let compiler = GrammarCompiler::new(vocab);
//! let grammar = compiler.compile_grammar(r#"root ::= "a" "b"+"#).unwrap();
//! let mut m = GrammarMatcher::new(grammar);
//! let mut mask = vec![0u32; m.bitmask_words()];
//! m.fill_next_token_bitmask(&mut mask).unwrap();
//! assert_eq!(mask[0], 0b0101); // "a" and "ab"
//! assert!(m.accept_token(2)); // "ab"
//! assert!(m.accept_token(3)); // </s>: the root may end here
//! assert!(m.is_terminated());
//! ```

use crate::compiler::CompiledGrammar;
use crate::limits::{Limit, LimitExceeded};
use crate::mask::background::ForegroundCall;
use crate::mask::cache::or_token_set;
use crate::parser::{Chart, EXT};
use std::sync::Arc;

mod filtered;
mod keys;
mod options;
pub(crate) use keys::ClosedObjects;
use keys::{KeyTracker, KeyViolation};
pub use options::MatcherOptions;

/// Why a token was rejected by [`GrammarMatcher::try_accept_token`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenRejection {
    /// A stop token was already accepted.
    #[error("token {token}: the matcher has terminated (a stop token was accepted); reset it or start a new one")]
    Terminated {
        /// The token id.
        token: u32,
    },
    /// The id is not below the vocabulary size (the logits width).
    #[error("token {token} is past the vocabulary size {vocab_size}")]
    OutOfRange {
        /// The token id.
        token: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
    /// A padding id: below the logits width but past the tokenizer.
    #[error("token {token} is a padding id (the tokenizer has {tokenizer_size} tokens)")]
    Padding {
        /// The token id.
        token: u32,
        /// The tokenizer's size.
        tokenizer_size: usize,
    },
    /// A stop token where the root rule cannot end.
    #[error("stop token {token} where the grammar cannot end (sample from logits masked by fill_next_token_bitmask, which never allows it here)")]
    StopNotAllowed {
        /// The token id.
        token: u32,
    },
    /// A stop token of a matcher made with
    /// [`MatcherOptions::terminate_without_stop_token`]: it ends with the grammar, and never
    /// accepts a stop token.
    #[error("stop token {token}: this matcher terminates without a stop token (terminate_without_stop_token), so it accepts none")]
    StopDisabled {
        /// The token id.
        token: u32,
    },
    /// A stop token of the vocabulary that this matcher's
    /// [`MatcherOptions::override_stop_tokens`] leaves out: no longer a stop token, and
    /// never text, it is accepted only through a token terminal of the grammar.
    #[error("token {token} is a stop token of the vocabulary but not of this matcher (override_stop_tokens); only a token terminal of the grammar accepts it")]
    StopOverridden {
        /// The token id.
        token: u32,
    },
    /// A special token that no token terminal allows here.
    #[error("special token {token} is not allowed here (sample from logits masked by fill_next_token_bitmask, which never allows it here)")]
    SpecialNotAllowed {
        /// The token id.
        token: u32,
    },
    /// A token with no bytes.
    #[error("token {token} has no bytes, so no grammar can accept it (sample from logits masked by fill_next_token_bitmask, which never allows it here)")]
    Empty {
        /// The token id.
        token: u32,
    },
    /// The grammar rejects the token's bytes at byte `offset`.
    #[error("{}: byte {offset} (0x{byte:02x}) does not match the grammar (sample from logits masked by fill_next_token_bitmask, which never allows it here)", step_name(*token))]
    Bytes {
        /// The token id (`u32::MAX` for `accept_string`).
        token: u32,
        /// Offset of the first rejected byte in the token.
        offset: usize,
        /// That byte.
        byte: u8,
    },
    /// The token would write an object key a second time in one object. Only grammars
    /// compiled from a JSON Schema check this
    /// ([`GrammarCompiler::compile_json_schema`](crate::GrammarCompiler::compile_json_schema)):
    /// names are compared decoded, so `"\u0061"` repeats `"a"`.
    #[error("{}: the key {key:?} is already in this object (the quote closing it is byte {offset}); each key may appear once per object", step_name(*token))]
    DuplicateKey {
        /// The token id (`u32::MAX` for `accept_string`).
        token: u32,
        /// Offset, in the token's bytes, of the quote that closes the repeated key.
        offset: usize,
        /// The repeated key, decoded (invalid UTF-8, such as a lone surrogate escape,
        /// replaced by U+FFFD).
        key: String,
    },
    /// The token would write, in a closed object whose names the matcher restricts, a key
    /// that no name left in that object starts with (every name that starts so is already
    /// written), or a `,` after every name was written: either way nothing could follow.
    /// Only grammars compiled from a JSON Schema with
    /// [`JsonSchemaOptions::any_order`](crate::JsonSchemaOptions::any_order) check this,
    /// for closed objects of more than 8 declared properties; names are compared decoded.
    #[error("{}: {what} at byte {offset}, but no name left in this object starts so; each name of a closed object may appear once", step_name(*token))]
    KeyNotAllowed {
        /// The token id (`u32::MAX` for `accept_string`).
        token: u32,
        /// Offset, in the token's bytes, of the byte after which nothing could follow.
        offset: usize,
        /// What the token would write there: `the key "…"` (decoded so far, invalid UTF-8
        /// replaced by U+FFFD) or `another key after ","`.
        what: String,
    },
    /// Deciding the token needed more Earley work than the compiler's
    /// [`Limits::max_step_items`](crate::Limits::max_step_items) allows (an ambiguous grammar
    /// deep into its input). Nothing was accepted; the grammar, not the token, is to blame.
    #[error("{}: {limit}", step_name(*token))]
    StepLimit {
        /// The token id (`u32::MAX` for `accept_string`).
        token: u32,
        /// The limit, its value and the work spent when it stopped.
        limit: LimitExceeded,
    },
    /// The token may enter rules whose compile was deferred
    /// ([`crate::GrammarCompiler::with_deferred_tool_rules`]), and that compile failed
    /// (a limit); the state is unchanged.
    #[error("{}: the deferred part of the grammar could not be compiled: {reason}", step_name(*token))]
    Deferred {
        /// The token id (`u32::MAX` for `accept_string`).
        token: u32,
        /// The compile error.
        reason: String,
    },
}

/// `token N`, or `the string` for the `u32::MAX` of `accept_string` / `try_accept_bytes`.
fn step_name(token: u32) -> String {
    match token {
        u32::MAX => "the string".to_string(),
        t => format!("token {t}"),
    }
}

/// Errors of the matcher's other calls.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatcherError {
    /// The bitmask buffer has the wrong length.
    #[error("bitmask has {got} words, expected ceil(vocab_size / 32) = {expected}")]
    BitmaskLength {
        /// `ceil(vocab_size / 32)`.
        expected: usize,
        /// The buffer's length.
        got: usize,
    },
    /// Rollback of more steps than were accepted.
    #[error("cannot roll back {requested} tokens: only {available} were accepted")]
    Rollback {
        /// Steps asked for.
        requested: usize,
        /// Steps available.
        available: usize,
    },
    /// The mask needed more Earley work than the compiler's
    /// [`Limits::max_step_items`](crate::Limits::max_step_items) allows (an ambiguous grammar
    /// deep into its input), or a node mask computed on first use (under
    /// [`Precompute::Lazy`](crate::Precompute::Lazy), or of a counted repetition) took
    /// longer than the compiler's [`Limits::compile_time`](crate::Limits::compile_time). The
    /// bitmask's content is unspecified and the matcher's state is unchanged (a mask that
    /// was not finished is not kept); end the sequence, or roll back and take another path.
    #[error("token bitmask not computed: {0}")]
    Limit(LimitExceeded),
    /// The mask needed rules whose compile was deferred
    /// ([`crate::GrammarCompiler::with_deferred_tool_rules`]), and that compile failed (a
    /// limit); the matcher's state is unchanged.
    #[error(
        "token bitmask not computed: the deferred part of the grammar could not be compiled: {0}"
    )]
    Deferred(String),
    /// A `[batch, words]` bitmask whose length is not a positive multiple of `words`.
    #[error(
        "batch bitmask has {got} words, not a positive multiple of ceil(vocab_size / 32) = {words}"
    )]
    BatchBitmaskLength {
        /// `ceil(vocab_size / 32)`: the words of one row.
        words: usize,
        /// The buffer's length.
        got: usize,
    },
    /// A row index past the batch bitmask.
    #[error("row {row} is past the bitmask's {rows} rows")]
    RowOutOfRange {
        /// The row asked for.
        row: usize,
        /// The rows of the buffer.
        rows: usize,
    },
    /// An id of [`MatcherOptions::override_stop_tokens`] past the tokenizer.
    #[error("override stop token {token} is past the tokenizer's {tokenizer_size} tokens")]
    StopTokenOutOfRange {
        /// The id.
        token: u32,
        /// The tokenizer's size.
        tokenizer_size: usize,
    },
}

#[derive(Clone, Copy, Debug)]
struct Step {
    /// Chart length before the step.
    chart_len: u32,
    /// The step was a stop token.
    stop: bool,
}

/// One accepted step, kept while the matcher runs a stub grammar (`compiler::deferred`) so
/// that it can replay them on the full grammar.
#[derive(Clone, Debug)]
enum Logged {
    Token(u32),
    Bytes(Box<[u8]>),
    Stop,
}

/// Matches one sequence against a compiled grammar, token by token.
///
/// Cheap to create from an `Arc<CompiledGrammar>`; `clone()` forks it (the chart is copied:
/// O(items accepted so far)). Not `Sync` (it mutates scratch space); `Send`.
#[derive(Clone, Debug)]
pub struct GrammarMatcher {
    compiled: Arc<CompiledGrammar>,
    chart: Chart,
    history: Vec<Step>,
    terminated: bool,
    // Scratch space reused by every mask computation (no allocation per step once warm).
    node_stamp: Vec<u32>,
    stamp: u32,
    kernel: Vec<crate::parser::Item>,
    /// (node, caller node) pairs whose uncertain tokens need the full chart this step.
    uncertain_lists: Vec<(u32, u32)>,
    /// (node, caller node, uncertain included) pairs already applied this step.
    pairs_seen: Vec<(u32, u32, bool)>,
    scratch_bits: Vec<u32>,
    scratch_uncertain: Vec<u32>,
    /// Tokens the chart decides at the end of a fill (`filtered`).
    recheck: Vec<u32>,
    /// The keys of the open objects, for grammars with unique keys.
    keys: Option<Box<KeyTracker>>,
    /// [`MatcherOptions::override_stop_tokens`], sorted; `None`: the vocabulary's.
    stop_tokens: Option<Arc<[u32]>>,
    /// [`MatcherOptions::terminate_without_stop_token`].
    terminate_without_stop_token: bool,
    /// [`MatcherOptions::max_rollback_tokens`].
    max_rollback_tokens: Option<usize>,
    /// The steps accepted so far, while `compiled` is a stub grammar (`compiler::deferred`).
    log: Vec<Logged>,
    /// After a move off the stub grammar it was made with: that grammar, which keeps the
    /// builds every matcher of it shares (`compiler::deferred`).
    origin: Option<Arc<CompiledGrammar>>,
    /// The uncertain tokens the chart accepted at the last fill that ran them, by the
    /// state it ran them from (see [`UncertainMemo`]).
    uncertain_memo: UncertainMemo,
}

/// The context-dependent tokens accepted from one parse state: the fill of a state met
/// again (each step inside a string value is at the same string node, in the same
/// callers) sets them without running them through the chart.
///
/// The state is the current set's items that did not start there (the items that did
/// start there follow from them), with their origins: chart sets below the current one
/// never change while the matcher moves forward, so equal items mean equal states, until
/// a rollback, a reset or a move to another grammar rewrites those sets (`generation`).
#[derive(Clone, Debug, Default)]
struct UncertainMemo {
    /// Bumped whenever chart sets below the current one may change.
    generation: u64,
    /// The generation and items (origins below their set) of the state recorded.
    at: Option<(u64, Vec<crate::parser::Item>)>,
    /// The token ids the chart accepted there, beyond the precomputed masks.
    accepted: Vec<u32>,
}

/// The batch fills of `crate::mask` (`fill_next_token_bitmask_batch`,
/// `batch_fill_next_token_bitmask`) fill one row per matcher through this.
impl crate::mask::FillNextTokenBitmask for GrammarMatcher {
    type Error = MatcherError;
    fn bitmask_words(&self) -> usize {
        GrammarMatcher::bitmask_words(self)
    }
    fn fill_next_token_bitmask(&mut self, row: &mut [u32]) -> Result<(), MatcherError> {
        GrammarMatcher::fill_next_token_bitmask(self, row)
    }
}

impl GrammarMatcher {
    /// A matcher at the start of `compiled`'s root rule.
    pub fn new(compiled: Arc<CompiledGrammar>) -> Self {
        let root_start = compiled.aut.rule_start[compiled.aut.root as usize];
        let mut chart = Chart::new(&compiled.aut, root_start);
        chart.filtering = true;
        let n = compiled.aut.nodes.len();
        GrammarMatcher {
            chart,
            history: Vec::new(),
            terminated: false,
            node_stamp: vec![0; n],
            stamp: 0,
            kernel: Vec::new(),
            uncertain_lists: Vec::new(),
            pairs_seen: Vec::new(),
            scratch_bits: Vec::new(),
            scratch_uncertain: Vec::new(),
            recheck: Vec::new(),
            keys: compiled
                .unique_keys
                .then(|| Box::new(KeyTracker::new(compiled.closed_objects.clone()))),
            stop_tokens: None,
            terminate_without_stop_token: false,
            max_rollback_tokens: None,
            log: Vec::new(),
            origin: None,
            uncertain_memo: UncertainMemo::default(),
            compiled,
        }
    }

    /// The compiled grammar this matcher runs.
    pub fn compiled_grammar(&self) -> &Arc<CompiledGrammar> {
        &self.compiled
    }

    /// The length in `u32` words of this matcher's bitmask: `ceil(vocab_size / 32)`.
    pub fn bitmask_words(&self) -> usize {
        self.compiled.vocab.bitmask_words()
    }

    /// True once a stop token has been accepted; every token is rejected after that.
    ///
    /// With [`MatcherOptions::terminate_without_stop_token`]: true whenever the output so
    /// far is a complete match of the root rule (as [`GrammarMatcher::is_completed`]); tokens
    /// that continue the grammar are still accepted then.
    pub fn is_terminated(&self) -> bool {
        if self.terminate_without_stop_token {
            return self.chart.can_exit();
        }
        self.terminated
    }

    /// True when the output so far is a complete match of the root rule (a stop token would
    /// be accepted now), or the matcher has terminated.
    pub fn is_completed(&self) -> bool {
        self.terminated || self.chart.can_exit()
    }

    /// Number of steps that [`GrammarMatcher::rollback`] can undo (at most
    /// [`MatcherOptions::max_rollback_tokens`]).
    pub fn num_accepted_steps(&self) -> usize {
        match self.max_rollback_tokens {
            Some(k) => self.history.len().min(k),
            None => self.history.len(),
        }
    }

    /// Accepts token `token` if the grammar allows it; returns false (state unchanged)
    /// otherwise. [`GrammarMatcher::try_accept_token`] says why.
    pub fn accept_token(&mut self, token: u32) -> bool {
        self.try_accept_token(token).is_ok()
    }

    /// Accepts token `token`, or says why not.
    ///
    /// Stop tokens are accepted exactly where the root rule can end, and terminate the
    /// matcher; a stop token that the grammar names as a terminal is accepted there too, and
    /// terminates the matcher when the root is complete after it and nothing else could
    /// follow (`root ::= "hi" <|eot_id|>` needs one stop token, not two). Special tokens are
    /// accepted only through a token terminal of the grammar.
    ///
    /// # Errors
    /// A [`TokenRejection`]; the matcher's state is then exactly as before the call.
    pub fn try_accept_token(&mut self, token: u32) -> Result<(), TokenRejection> {
        let _step = ForegroundCall::enter();
        if self.terminated {
            return Err(TokenRejection::Terminated { token });
        }
        self.settle()
            .map_err(|reason| TokenRejection::Deferred { token, reason })?;
        let compiled = self.compiled.clone();
        let vocab = &compiled.vocab;
        if token as usize >= vocab.vocab_size() {
            return Err(TokenRejection::OutOfRange {
                token,
                vocab_size: vocab.vocab_size(),
            });
        }
        let Some(bytes) = vocab.token_bytes(token) else {
            return Err(TokenRejection::Padding {
                token,
                tokenizer_size: vocab.tokenizer_size(),
            });
        };
        let before = self.chart.len() as u32;
        let aut = &self.compiled.aut;
        self.chart.refuel(compiled.max_step_items);
        if self.chart.push_token(aut, token) {
            // A stop token written in the grammar (`root ::= "hi" <|eot_id|>`) still ends
            // decoding when the root is complete after it and nothing else could follow.
            let stop = !self.terminate_without_stop_token
                && self.is_stop(token)
                && self.chart.can_exit()
                && !self.can_continue();
            self.terminated = stop;
            if let Some(k) = &mut self.keys {
                k.accept(&[], |_| None);
            }
            self.history.push(Step {
                chart_len: before,
                stop,
            });
            self.record(|| Logged::Token(token));
            return Ok(());
        }
        if self.is_stop(token) {
            if self.terminate_without_stop_token {
                return Err(TokenRejection::StopDisabled { token });
            }
            if self.chart.can_exit() {
                self.terminated = true;
                if let Some(k) = &mut self.keys {
                    k.accept(&[], |_| None);
                }
                self.history.push(Step {
                    chart_len: before,
                    stop: true,
                });
                self.record(|| Logged::Stop);
                return Ok(());
            }
            return Err(TokenRejection::StopNotAllowed { token });
        }
        if vocab.is_special(token) {
            return Err(TokenRejection::SpecialNotAllowed { token });
        }
        if vocab.is_stop_token(token) {
            // Overridden away: not a text token either (the trie leaves it out).
            return Err(TokenRejection::StopOverridden { token });
        }
        if bytes.is_empty() {
            return Err(TokenRejection::Empty { token });
        }
        // The first token of the output, read as the tokenizer's decoder writes it there.
        let bytes = if self.at_output_start() {
            vocab.start_bytes(token).unwrap_or(bytes)
        } else {
            bytes
        };
        self.push_bytes(bytes, token)
    }

    /// True at the first step when the vocabulary reads the first token in its start form
    /// ([`crate::Vocabulary::with_strip_output_start`]).
    fn at_output_start(&self) -> bool {
        self.history.is_empty() && self.compiled.vocab.strips_output_start()
    }

    /// True when some item of the current set has an edge: more than the end may follow.
    fn can_continue(&self) -> bool {
        let aut = &self.compiled.aut;
        self.chart.current().iter().any(|it| {
            let mut bytes = false;
            aut.for_each_byte_range(it.node, |_, _| bytes = true);
            bytes || !aut.tokens_of(it.node).is_empty() || !aut.calls_of(it.node).is_empty()
        })
    }

    /// Accepts the bytes of `text` as one step (for rollback), all or nothing.
    pub fn accept_string(&mut self, text: &str) -> bool {
        self.try_accept_bytes(text.as_bytes()).is_ok()
    }

    /// Accepts `bytes` as one step, all or nothing.
    ///
    /// # Errors
    /// [`TokenRejection::Bytes`] (with `token` = `u32::MAX`) at the first byte the grammar
    /// rejects, or [`TokenRejection::Terminated`]; the state is then unchanged.
    pub fn try_accept_bytes(&mut self, bytes: &[u8]) -> Result<(), TokenRejection> {
        let _step = ForegroundCall::enter();
        if self.terminated {
            return Err(TokenRejection::Terminated { token: u32::MAX });
        }
        let deferred = |reason| TokenRejection::Deferred {
            token: u32::MAX,
            reason,
        };
        self.settle().map_err(deferred)?;
        // Bytes may be longer than any token, so the near check does not cover them: read
        // them first, and build every stub the reading reaches (one build per round).
        while let Some(stubs) = self.stubs_on_path(bytes) {
            self.build_stubs(Some(&stubs)).map_err(deferred)?;
        }
        self.chart.refuel(self.compiled.max_step_items);
        self.push_bytes(bytes, u32::MAX)
    }

    /// On a grammar with stubs: the stub rules with an item in a chart set while `bytes`
    /// are read from the current state (as far as they are accepted), or `None` when no
    /// set has one. The state is unchanged after.
    fn stubs_on_path(&mut self, bytes: &[u8]) -> Option<Vec<u32>> {
        let d = self.compiled.deferred.as_deref()?;
        let aut = &self.compiled.aut;
        let start = self.chart.len();
        self.chart.refuel(self.compiled.max_step_items);
        let mut stubs = Vec::new();
        d.near.stubs_in(aut, self.chart.current(), &mut stubs);
        for &b in bytes {
            if !self.chart.push_byte(aut, b) {
                break;
            }
            d.near.stubs_in(aut, self.chart.current(), &mut stubs);
        }
        self.chart.truncate(start);
        stubs.sort_unstable();
        stubs.dedup();
        (!stubs.is_empty()).then_some(stubs)
    }

    /// Pushes `bytes` as one step, all or nothing; `token` names the step in errors.
    fn push_bytes(&mut self, bytes: &[u8], token: u32) -> Result<(), TokenRejection> {
        let before = self.chart.len() as u32;
        for (offset, &byte) in bytes.iter().enumerate() {
            if !self.chart.push_byte(&self.compiled.aut, byte) {
                self.chart.truncate(before as usize);
                if self.chart.exhausted() {
                    return Err(TokenRejection::StepLimit {
                        token,
                        limit: self.step_limit(),
                    });
                }
                return Err(TokenRejection::Bytes {
                    token,
                    offset,
                    byte,
                });
            }
        }
        if let Some(k) = &mut self.keys {
            if let Some(v) = k.first_violation(bytes) {
                self.chart.truncate(before as usize);
                return Err(match v {
                    KeyViolation::Duplicate(d) => TokenRejection::DuplicateKey {
                        token,
                        offset: d.offset,
                        key: d.key,
                    },
                    KeyViolation::NotLeft { offset, what } => TokenRejection::KeyNotAllowed {
                        token,
                        offset,
                        what,
                    },
                });
            }
            let (aut, chart) = (&self.compiled.aut, &self.chart);
            let closed = self.compiled.closed_objects.as_deref();
            // The byte at offset `o` is read between chart sets `before - 1 + o` and `before + o`.
            k.accept(bytes, |o| {
                closed?.opened_at(aut, chart, before - 1 + o as u32)
            });
        }
        self.history.push(Step {
            chart_len: before,
            stop: false,
        });
        self.record(|| Logged::Bytes(bytes.into()));
        Ok(())
    }

    /// Logs an accepted step while the grammar is a stub grammar.
    #[inline]
    fn record(&mut self, step: impl FnOnce() -> Logged) {
        if self.compiled.deferred.is_some() {
            self.log.push(step());
        }
    }

    /// On a stub grammar (`compiler::deferred`): when an item of the current set that did
    /// not start here (those that did are covered by their predictor) is near a stub,
    /// moves to the grammar with the stubs its tokens can enter built, and again until no
    /// item is near one. Errors: the build's compile error.
    fn settle(&mut self) -> Result<(), String> {
        // Each move builds at least one more tool: at most one per tool.
        while let Some(d) = self.compiled.deferred.as_deref() {
            let (aut, trie, pos) = (&self.compiled.aut, &self.compiled.trie, self.chart.pos());
            // The first token may be read in its start form, which the trie does not hold:
            // there the lower bound decides, and every stub is built.
            let start_form = self.at_output_start();
            let mut entered = Vec::new();
            let mut near = false;
            for it in self.chart.current().iter().filter(|it| it.origin != pos) {
                if start_form {
                    if d.near.may_be_near(aut, it.node) {
                        near = true;
                        entered.clear();
                        break;
                    }
                } else if d.near.is_near(aut, trie, it.node) {
                    near = true;
                    d.near.stubs_entered(aut, trie, it.node, &mut entered);
                }
            }
            if !near {
                return Ok(());
            }
            self.build_stubs(Some(&entered))?;
        }
        Ok(())
    }

    /// Moves to the grammar with the stub rules `stubs` built too (every stub when `None`
    /// or empty); no effect on a grammar without stubs.
    fn build_stubs(&mut self, stubs: Option<&[u32]>) -> Result<(), String> {
        let Some(d) = self.compiled.deferred.as_deref() else {
            return Ok(());
        };
        let next = d.expand(stubs)?;
        self.upgrade(next)
    }

    /// Moves from a grammar with stubs to `next`, the same grammar with more tools built:
    /// replays the logged steps on a new chart (same sets, so `history` stays valid). The
    /// log is kept while `next` still has stubs.
    fn upgrade(&mut self, next: Arc<CompiledGrammar>) -> Result<(), String> {
        let aut = &next.aut;
        let mut chart = Chart::new(aut, aut.rule_start[aut.root as usize]);
        chart.filtering = true;
        chart.refuel(u64::MAX);
        for step in &self.log {
            let ok = match step {
                Logged::Token(t) => chart.push_token(aut, *t),
                Logged::Bytes(b) => b.iter().all(|&x| chart.push_byte(aut, x)),
                Logged::Stop => true,
            };
            if !ok {
                return Err(
                    "the built grammar rejected the input the stub grammar accepted".into(),
                );
            }
        }
        if chart.len() != self.chart.len() {
            return Err(
                "the built grammar read the input into a different number of chart sets".into(),
            );
        }
        self.node_stamp = vec![0; aut.nodes.len()];
        self.stamp = 0;
        self.chart = chart;
        self.uncertain_memo.generation += 1;
        if next.deferred.is_none() {
            self.log = Vec::new();
        }
        // The stub grammar keeps the builds its matchers share: keep it while this matcher
        // lives.
        if self.origin.is_none() {
            self.origin = Some(self.compiled.clone());
        }
        self.compiled = next;
        Ok(())
    }

    /// The error for a call that ran out of Earley work budget.
    fn step_limit(&self) -> LimitExceeded {
        LimitExceeded::new(
            Limit::StepItems,
            self.compiled.max_step_items,
            self.chart.work(),
            None,
        )
    }

    /// Undoes the last `n` accepted steps (tokens, or strings accepted with
    /// `accept_string`); a stop token counts as one step.
    ///
    /// # Errors
    /// [`MatcherError::Rollback`] when `n` exceeds the steps accepted; nothing changes then.
    pub fn rollback(&mut self, n: usize) -> Result<(), MatcherError> {
        let available = self.num_accepted_steps();
        if n > available {
            return Err(MatcherError::Rollback {
                requested: n,
                available,
            });
        }
        self.rollback_steps(n);
        Ok(())
    }

    /// Undoes the last `n` steps, `n <= history.len()` (whatever `max_rollback_tokens`).
    pub(crate) fn rollback_steps(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let keep = self.history.len() - n;
        let first = self.history[keep];
        if self.history[keep..].iter().any(|s| s.stop) {
            self.terminated = false;
        }
        self.chart.truncate(first.chart_len as usize);
        self.uncertain_memo.generation += 1;
        self.history.truncate(keep);
        self.log.truncate(keep);
        if let Some(k) = &mut self.keys {
            k.rollback(n);
        }
    }

    /// Returns to the start of the grammar, as a new matcher.
    pub fn reset(&mut self) {
        self.chart.truncate(1);
        self.uncertain_memo.generation += 1;
        self.history.clear();
        self.log.clear();
        self.terminated = false;
        if let Some(k) = &mut self.keys {
            k.reset();
        }
    }

    /// The bytes that the grammar forces next, whatever is sampled: the longest run of
    /// positions with exactly one possible byte (stopping where the root could end or a
    /// special token could come). Does not change the state.
    pub fn find_jump_forward_bytes(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.terminated || self.settle().is_err() {
            return out;
        }
        // Forced bytes may run into a stub: then build it and start again.
        while let Some(stubs) = self.forced_bytes(&mut out) {
            out.clear();
            if self.build_stubs(Some(&stubs)).is_err() {
                break;
            }
        }
        if let Some(k) = &mut self.keys {
            // Forced bytes that repeat a key (or leave a closed object no name) lead
            // nowhere: stop before the byte the key check refuses.
            out.truncate(k.prefix_without_violation(&out));
        }
        out
    }

    /// The forced bytes of [`GrammarMatcher::find_jump_forward_bytes`], into `out`; the
    /// state is unchanged after. `Some(stub rules)` when the run reaches a set with an
    /// item inside a stub (on a grammar with stubs): the bytes are then not all known.
    fn forced_bytes(&mut self, out: &mut Vec<u8>) -> Option<Vec<u32>> {
        let aut = &self.compiled.aut;
        let deferred = self.compiled.deferred.as_deref();
        let start = self.chart.len();
        let mut stubs = Vec::new();
        // Past the work budget the forced bytes found so far are returned.
        self.chart.refuel(self.compiled.max_step_items);
        while out.len() < 65_536 && !self.chart.can_exit() {
            if let Some(d) = deferred {
                d.near.stubs_in(aut, self.chart.current(), &mut stubs);
                if !stubs.is_empty() {
                    stubs.sort_unstable();
                    stubs.dedup();
                    break;
                }
            }
            let mut single: Option<u8> = None;
            let mut forced = true;
            'items: for it in self.chart.current() {
                if !aut.tokens_of(it.node).is_empty() {
                    forced = false;
                    break;
                }
                aut.for_each_byte_range(it.node, |lo, hi| {
                    if lo != hi || single.is_some_and(|s| s != lo) {
                        forced = false;
                    }
                    single = Some(lo);
                });
                if !forced {
                    break 'items;
                }
            }
            match single {
                Some(b) if forced && self.chart.push_byte(aut, b) => out.push(b),
                _ => break,
            }
        }
        self.chart.truncate(start);
        (!stubs.is_empty()).then_some(stubs)
    }

    /// [`GrammarMatcher::find_jump_forward_bytes`] cut to its longest valid UTF-8 prefix, as
    /// XGrammar's `find_jump_forward_string`.
    pub fn find_jump_forward_string(&mut self) -> String {
        let bytes = self.find_jump_forward_bytes();
        match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => {
                let valid = e.utf8_error().valid_up_to();
                let mut b = e.into_bytes();
                b.truncate(valid);
                String::from_utf8(b).unwrap_or_default()
            }
        }
    }

    /// Writes the token bitmask of the next step into `bitmask`: bit `i % 32` of word
    /// `i / 32` is set when `accept_token(i)` would succeed now. Padding ids and the bits
    /// past `vocab_size` are clear; after termination every bit is clear.
    ///
    /// `bitmask.len()` must be `ceil(vocab_size / 32)` words. No allocation once the
    /// matcher's scratch space is warm, except inside an undeclared key of a JSON Schema
    /// grammar that may still end on a declared name (a few small buffers to decode it).
    ///
    /// # Errors
    /// [`MatcherError::BitmaskLength`] for a buffer of the wrong length.
    pub fn fill_next_token_bitmask(&mut self, bitmask: &mut [u32]) -> Result<(), MatcherError> {
        let words = self.bitmask_words();
        if bitmask.len() != words {
            return Err(MatcherError::BitmaskLength {
                expected: words,
                got: bitmask.len(),
            });
        }
        if self.terminated {
            bitmask.fill(0);
            return Ok(());
        }
        let _step = ForegroundCall::enter();
        self.settle().map_err(MatcherError::Deferred)?;
        // Borrowed, not cloned: an `Arc` clone per fill is one atomic shared by every thread
        // filling a matcher of this grammar.
        let compiled: &CompiledGrammar = &self.compiled;
        let aut = &compiled.aut;
        let pos = self.chart.pos();
        self.chart.refuel(compiled.max_step_items);
        let deadline = compiled.lazy_deadline();
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.node_stamp.fill(0);
            self.stamp = 1;
        }
        self.kernel.clear();
        for it in self.chart.current() {
            // Items of rule instances that started here are covered by their predictor's
            // precomputed mask; only older instances (and the base item) need their own.
            if it.origin != pos {
                self.kernel.push(*it);
            }
        }
        // `bitmask` holds garbage until the first token set is written: a large first set
        // is copied in rather than ORed into a cleared buffer.
        let mut blank = true;
        self.uncertain_lists.clear();
        self.pairs_seen.clear();
        self.recheck.clear();
        let filters = aut.key_filters.as_deref();
        // An item of a key checked when it ends: the state depends on the key's bytes.
        let mut in_key = false;
        for k in 0..self.kernel.len() {
            let it = self.kernel[k];
            let n = it.node;
            let Some(m) = compiled
                .node_mask_until(n, &deadline)
                .map_err(MatcherError::Limit)?
            else {
                continue;
            };
            // Virtual nodes (counted repetitions) are not deduplicated: rare, and harmless.
            let fresh = match self.node_stamp.get_mut(n as usize) {
                Some(st) if *st == self.stamp => false,
                Some(st) => {
                    *st = self.stamp;
                    true
                }
                None => true,
            };
            if fresh {
                or_token_set(
                    bitmask,
                    &mut blank,
                    &m.accepted,
                    &compiled.text_bits,
                    &compiled.trie.sorted,
                    &mut self.scratch_bits,
                );
            }
            // A key checked when it ends: its bytes decide which tokens end it well.
            let rule = aut.rule_of(n);
            if let Some(f) = filters.filter(|f| it.origin != EXT && f.filters(rule)) {
                in_key = true;
                filtered::key_item(
                    f,
                    (rule, it, pos, !m.uncertain.is_empty()),
                    &self.chart,
                    compiled,
                    bitmask,
                    &mut blank,
                    &mut self.scratch_bits,
                    &mut self.uncertain_lists,
                    &mut self.recheck,
                    &deadline,
                )?;
                continue;
            }
            // Tokens that run past the rule's end: nothing follows the root's base instance;
            // other instances continue in each caller waiting at the origin, whose context
            // mask decides most of them.
            if m.uncertain.is_empty() || it.origin == EXT {
                continue;
            }
            for caller in self.chart.set(it.origin) {
                if !aut.calls_of(caller.node).iter().any(|c| c.rule == rule) {
                    continue;
                }
                let open = caller.origin != EXT;
                if let Some(seen) = self
                    .pairs_seen
                    .iter_mut()
                    .find(|p| p.0 == n && p.1 == caller.node)
                {
                    if seen.2 || !open {
                        continue;
                    }
                    seen.2 = true;
                } else {
                    self.pairs_seen.push((n, caller.node, open));
                    let Some(pm) = compiled
                        .pair_mask_until(n, caller.node, &deadline)
                        .map_err(MatcherError::Limit)?
                    else {
                        continue;
                    };
                    or_token_set(
                        bitmask,
                        &mut blank,
                        &pm.accepted,
                        &compiled.text_bits,
                        &compiled.trie.sorted,
                        &mut self.scratch_bits,
                    );
                }
                if open {
                    let pm = compiled
                        .pair_mask_until(n, caller.node, &deadline)
                        .map_err(MatcherError::Limit)?;
                    if let Some(pm) = pm {
                        if !pm.uncertain.is_empty() {
                            self.uncertain_lists.push((n, caller.node));
                        }
                    }
                }
            }
        }
        if blank {
            bitmask.fill(0);
        }
        // Special tokens through token terminals (stop tokens: `set_stop_bits`, at the end).
        for it in self.chart.current() {
            for e in aut.tokens_of(it.node) {
                bitmask[(e.token / 32) as usize] |= 1 << (e.token % 32);
            }
        }

        // Context-dependent tokens: run each through the full chart, sharing prefixes.
        let by_position = |p: &u32| {
            let id = compiled.trie.sorted[*p as usize];
            (id, compiled.trie.bytes_at(*p))
        };
        let memo = &mut self.uncertain_memo;
        let seen_before = !in_key
            && memo
                .at
                .as_ref()
                .is_some_and(|(g, items)| *g == memo.generation && *items == self.kernel);
        if seen_before {
            for &id in &memo.accepted {
                bitmask[(id / 32) as usize] |= 1 << (id % 32);
            }
        } else if self.uncertain_lists.is_empty() {
            memo.at = Some((memo.generation, self.kernel.clone()));
            memo.accepted.clear();
        } else if self.uncertain_lists.len() == 1 {
            let (n, c) = self.uncertain_lists[0];
            memo.accepted.clear();
            if let Some(pm) = compiled.pair_mask(n, c) {
                check_tokens(
                    &mut self.chart,
                    compiled,
                    pm.uncertain.iter().map(by_position),
                    bitmask,
                    &mut memo.accepted,
                );
            }
            memo.at = Some((memo.generation, self.kernel.clone()));
        } else {
            let mut list = std::mem::take(&mut self.scratch_uncertain);
            list.clear();
            for &(n, c) in &self.uncertain_lists {
                if let Some(pm) = compiled.pair_mask(n, c) {
                    list.extend_from_slice(&pm.uncertain);
                }
            }
            list.sort_unstable();
            list.dedup();
            memo.accepted.clear();
            check_tokens(
                &mut self.chart,
                compiled,
                list.iter().map(by_position),
                bitmask,
                &mut memo.accepted,
            );
            memo.at = Some((memo.generation, self.kernel.clone()));
            self.scratch_uncertain = list;
        }
        if self.at_output_start() {
            // Tokens with a start form are read by it alone: their bits so far were for
            // their usual bytes. Cost: one prefix-sharing walk over the start forms.
            // (A special or stop token is never read as text, whatever its form.)
            let vocab = &compiled.vocab;
            let text = |t: u32| !vocab.is_special(t) && !vocab.is_stop_token(t);
            for &t in vocab.start_form_tokens().iter().filter(|&&t| text(t)) {
                bitmask[(t / 32) as usize] &= !(1 << (t % 32));
            }
            check_tokens(
                &mut self.chart,
                compiled,
                vocab.start_forms_by_bytes().filter(|&(t, _)| text(t)),
                bitmask,
                &mut Vec::new(),
            );
        }
        if let Some(f) = filters {
            let at_start = self.at_output_start();
            filtered::recheck_keys(
                f,
                &mut self.chart,
                compiled,
                bitmask,
                &mut self.recheck,
                at_start,
            );
        }
        if in_key {
            self.uncertain_memo.at = None; // its answers held for these key bytes only
        }
        if self.chart.exhausted() {
            self.uncertain_memo.at = None;
            return Err(MatcherError::Limit(self.step_limit()));
        }
        if let Some(k) = &mut self.keys {
            k.filter_mask(&compiled.trie, &compiled.vocab, bitmask);
        }
        self.set_stop_bits(bitmask);
        Ok(())
    }

    /// Stop tokens where the root may end (none under `terminate_without_stop_token`). An
    /// overridden stop token may be a text token of the trie: it only ever stops, so its
    /// text bit is cleared first (a token terminal naming it still allows it).
    fn set_stop_bits(&self, bitmask: &mut [u32]) {
        let aut = &self.compiled.aut;
        if self.stop_tokens.is_some() {
            for &t in self.stop_tokens() {
                bitmask[(t / 32) as usize] &= !(1 << (t % 32));
            }
            for it in self.chart.current() {
                for e in aut.tokens_of(it.node) {
                    bitmask[(e.token / 32) as usize] |= 1 << (e.token % 32);
                }
            }
        }
        if self.chart.can_exit() && !self.terminate_without_stop_token {
            for &t in self.stop_tokens() {
                bitmask[(t / 32) as usize] |= 1 << (t % 32);
            }
        }
    }
}

/// Sets the bit of every token that the chart accepts, given as `(id, bytes)` sorted by
/// bytes (trie order), and appends to `set` the ids whose bit it set. The chart is
/// restored before returning.
fn check_tokens<'b>(
    chart: &mut Chart,
    compiled: &CompiledGrammar,
    tokens: impl Iterator<Item = (u32, &'b [u8])>,
    bitmask: &mut [u32],
    set: &mut Vec<u32>,
) {
    let aut = &compiled.aut;
    let base = chart.len();
    let mut prev: &[u8] = &[];
    // Bytes of `prev` pushed onto the chart; `failed`: byte `pushed` of `prev` was rejected.
    let mut pushed = 0usize;
    let mut failed = false;
    // Cost: one chart push per byte not shared with the previous token's accepted prefix.
    for (id, bytes) in tokens {
        if bitmask[(id / 32) as usize] >> (id % 32) & 1 == 1 {
            continue;
        }
        let lcp = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
        if failed && lcp > pushed {
            continue; // shares the prefix that already failed
        }
        if lcp < pushed {
            chart.truncate(base + lcp);
            pushed = lcp;
        }
        failed = false;
        prev = bytes;
        while pushed < bytes.len() {
            if chart.push_byte(aut, bytes[pushed]) {
                pushed += 1;
            } else {
                failed = true;
                break;
            }
        }
        if chart.exhausted() {
            break; // the caller reports the work budget
        }
        if !failed {
            bitmask[(id / 32) as usize] |= 1 << (id % 32);
            set.push(id);
        }
    }
    chart.truncate(base);
}
