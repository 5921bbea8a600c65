//! Per-matcher options (XGrammar's `GrammarMatcher(compiled_grammar, override_stop_tokens,
//! terminate_without_stop_token, max_rollback_tokens)`), and the serving-engine calls that
//! do not change the matcher's state: filling one row of a batch bitmask and validating a
//! draft.

use super::{GrammarMatcher, MatcherError};

/// Options of one [`GrammarMatcher`], as XGrammar's `GrammarMatcher` constructor takes them.
///
/// ```
/// use tokensieve::matcher::MatcherOptions;
/// use tokensieve::{GrammarCompiler, GrammarMatcher, Vocabulary};
///
/// let tokens: Vec<&[u8]> = vec![b"a", b"b", b"<eos>", b"<eot>"];
/// let vocab = Vocabulary::from_token_bytes(&tokens, &[2, 3], &[2]).unwrap();
/// let grammar = GrammarCompiler::new(vocab).compile_grammar(r#"root ::= "a""#).unwrap();
/// // Stop on <eot> (id 3) instead of the vocabulary's <eos>.
/// let options = MatcherOptions { override_stop_tokens: Some(vec![3]), ..Default::default() };
/// let mut m = GrammarMatcher::with_options(grammar.clone(), &options).unwrap();
/// assert!(m.accept_token(0));
/// assert!(!m.accept_token(2)); // <eos> no longer stops this matcher
/// assert!(m.accept_token(3));
/// assert!(m.is_terminated());
/// // Or end with the grammar, no stop token at all.
/// let options = MatcherOptions { terminate_without_stop_token: true, ..Default::default() };
/// let mut m = GrammarMatcher::with_options(grammar, &options).unwrap();
/// assert!(m.accept_token(0));
/// assert!(m.is_terminated());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatcherOptions {
    /// The stop tokens of this matcher instead of the vocabulary's
    /// ([`Vocabulary::stop_tokens`](crate::Vocabulary::stop_tokens)); XGrammar's
    /// `override_stop_tokens`. A stop token only ever stops: where the grammar may end it is
    /// allowed and terminates the matcher, elsewhere it is rejected, even when its bytes are
    /// ordinary text. The vocabulary's own stop tokens left out of the list are then accepted
    /// only through a token terminal of the grammar (never as text).
    pub override_stop_tokens: Option<Vec<u32>>,
    /// XGrammar's `terminate_without_stop_token`: the matcher is done when the grammar is:
    /// [`GrammarMatcher::is_terminated`] is true whenever the output so far is a complete
    /// match of the root rule (the same as [`GrammarMatcher::is_completed`]), and no stop
    /// token is ever allowed by the mask or accepted. Tokens that continue the grammar are
    /// still allowed there (`root ::= "a"+` after `a`: another `a`), so an engine stops when
    /// `is_terminated()` says so; where nothing can continue the mask is empty. (XGrammar's
    /// mask still allows the stop tokens there while its `accept_token` rejects them; here
    /// the mask and `accept_token` agree.)
    pub terminate_without_stop_token: bool,
    /// At most this many steps can be rolled back (XGrammar's `max_rollback_tokens`; `None`,
    /// the default, is unlimited). The chart is kept whole either way (Earley parsing needs
    /// it), so the limit only bounds [`GrammarMatcher::rollback`] and
    /// [`GrammarMatcher::num_accepted_steps`].
    pub max_rollback_tokens: Option<usize>,
}

impl GrammarMatcher {
    /// A matcher at the start of `compiled`'s root rule, with `options`.
    ///
    /// # Errors
    /// [`MatcherError::StopTokenOutOfRange`] when an id of
    /// [`MatcherOptions::override_stop_tokens`] is not below the tokenizer's size.
    pub fn with_options(
        compiled: std::sync::Arc<crate::CompiledGrammar>,
        options: &MatcherOptions,
    ) -> Result<Self, MatcherError> {
        let size = compiled.vocab.tokenizer_size();
        let mut m = GrammarMatcher::new(compiled);
        if let Some(stop) = &options.override_stop_tokens {
            if let Some(&token) = stop.iter().find(|&&t| t as usize >= size) {
                return Err(MatcherError::StopTokenOutOfRange {
                    token,
                    tokenizer_size: size,
                });
            }
            let mut s = stop.clone();
            s.sort_unstable();
            s.dedup();
            m.stop_tokens = Some(s.into());
        }
        m.terminate_without_stop_token = options.terminate_without_stop_token;
        m.max_rollback_tokens = options.max_rollback_tokens;
        Ok(m)
    }

    /// The options this matcher was made with (stop tokens sorted and deduplicated).
    pub fn options(&self) -> MatcherOptions {
        MatcherOptions {
            override_stop_tokens: self.stop_tokens.as_ref().map(|s| s.to_vec()),
            terminate_without_stop_token: self.terminate_without_stop_token,
            max_rollback_tokens: self.max_rollback_tokens,
        }
    }

    /// This matcher's stop tokens, sorted: the override, else the vocabulary's.
    pub fn stop_tokens(&self) -> &[u32] {
        match &self.stop_tokens {
            Some(s) => s,
            None => self.compiled.vocab.stop_tokens(),
        }
    }

    /// True when `token` is one of this matcher's stop tokens.
    pub(super) fn is_stop(&self, token: u32) -> bool {
        self.stop_tokens().binary_search(&token).is_ok()
    }

    /// Writes the next token bitmask into row `row` of `bitmask`, a row-major `[batch,
    /// words]` buffer of `words = ceil(vocab_size / 32)` (XGrammar's
    /// `fill_next_token_bitmask(bitmask, index)`). The other rows are not touched.
    ///
    /// # Errors
    /// [`MatcherError::BatchBitmaskLength`] when `bitmask.len()` is not a whole number of
    /// rows (or is empty), [`MatcherError::RowOutOfRange`] when `row` is not below the
    /// number of rows; nothing is written then. Otherwise as
    /// [`GrammarMatcher::fill_next_token_bitmask`].
    pub fn fill_next_token_bitmask_at(
        &mut self,
        bitmask: &mut [u32],
        row: usize,
    ) -> Result<(), MatcherError> {
        let words = self.bitmask_words();
        if bitmask.is_empty() || bitmask.len() % words != 0 {
            return Err(MatcherError::BatchBitmaskLength {
                words,
                got: bitmask.len(),
            });
        }
        let rows = bitmask.len() / words;
        if row >= rows {
            return Err(MatcherError::RowOutOfRange { row, rows });
        }
        self.fill_next_token_bitmask(&mut bitmask[row * words..(row + 1) * words])
    }

    /// How many of `tokens`, from the first, would be accepted in a row (speculative
    /// decoding: the longest prefix of a draft that the grammar allows). The state is
    /// unchanged: the tokens are accepted, then rolled back. A stop token that would be
    /// accepted counts, and nothing after it does.
    ///
    /// Under [`MatcherOptions::terminate_without_stop_token`], tokens that continue the
    /// grammar past a complete match still count (they would be accepted); the engine
    /// adapter's `StructuredOutputGrammar::validate_tokens` stops at the first complete
    /// match instead, as vLLM's backends do.
    ///
    /// Costs what accepting and rolling back the counted tokens costs; the limit of
    /// [`MatcherOptions::max_rollback_tokens`] does not apply.
    pub fn validate_tokens(&mut self, tokens: &[u32]) -> usize {
        let mut n = 0;
        for &t in tokens {
            if self.try_accept_token(t).is_err() {
                break;
            }
            n += 1;
        }
        self.rollback_steps(n);
        n
    }
}
