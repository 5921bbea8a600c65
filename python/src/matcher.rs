//! `GrammarMatcher`: one sequence's matcher, token by token.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use tokensieve::MatcherOptions;

use crate::bitmask::{needs_apply, words_mut, Rows};
use crate::compiler::{compiled, PyCompiledGrammar};
use crate::errors::engine_err;

/// Checks that every id of `tokens` is below `vocab_size` (ValueError naming the first that
/// is not).
pub(crate) fn check_token_ids(tokens: &[u32], vocab_size: usize) -> PyResult<()> {
    match tokens.iter().position(|&t| t as usize >= vocab_size) {
        Some(i) => Err(PyValueError::new_err(format!(
            "tokens[{i}] = {} is not below the vocabulary size {vocab_size}",
            tokens[i]
        ))),
        None => Ok(()),
    }
}

/// One sequence's matcher (`tokensieve::GrammarMatcher`).
#[pyclass(module = "tokensieve._core", name = "GrammarMatcher")]
pub(crate) struct PyGrammarMatcher {
    pub(crate) inner: tokensieve::GrammarMatcher,
}

pub(crate) fn accept_token(m: &mut tokensieve::GrammarMatcher, token: u32) -> PyResult<bool> {
    use tokensieve::TokenRejection;
    match m.try_accept_token(token) {
        Ok(()) => Ok(true),
        Err(e @ TokenRejection::OutOfRange { .. }) => Err(PyValueError::new_err(e.to_string())),
        Err(TokenRejection::StepLimit { limit, .. }) => Err(engine_err(limit)),
        Err(_) => Ok(false),
    }
}

pub(crate) fn string_bytes(s: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = s.cast::<PyString>() {
        Ok(s.to_str()?.as_bytes().to_vec())
    } else if let Ok(b) = s.cast::<PyBytes>() {
        Ok(b.as_bytes().to_vec())
    } else {
        Err(PyTypeError::new_err(format!(
            "expected str or bytes, got {}",
            s.get_type().name()?
        )))
    }
}

pub(crate) fn accept_bytes(m: &mut tokensieve::GrammarMatcher, bytes: &[u8]) -> PyResult<bool> {
    use tokensieve::TokenRejection;
    match m.try_accept_bytes(bytes) {
        Ok(()) => Ok(true),
        Err(TokenRejection::StepLimit { limit, .. }) => Err(engine_err(limit)),
        Err(_) => Ok(false),
    }
}

impl PyGrammarMatcher {
    /// Fills row `index` of `bitmask` with the GIL released (the checks of [`Rows`] first);
    /// whether some token is masked, and with `timed` the nanoseconds of the engine's fill.
    fn fill_row(
        &mut self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        index: i64,
        timed: bool,
    ) -> PyResult<(bool, u64)> {
        let rows = Rows::new(bitmask, "bitmask")?;
        let words = self.inner.bitmask_words();
        rows.check_words(words, "bitmask")?;
        let row = rows.check_row(index, "bitmask")?;
        let vocab_size = self.inner.compiled_grammar().vocabulary().vocab_size();
        let (ptr, total) = (rows.ptr, rows.rows * rows.words);
        let inner = &mut self.inner;
        py.detach(move || {
            // SAFETY: see `words_mut`; the buffer is checked above and held by `rows`.
            let all = unsafe { words_mut(ptr, total) };
            let dst = &mut all[row * words..(row + 1) * words];
            let start = timed.then(std::time::Instant::now);
            inner.fill_next_token_bitmask(dst)?;
            let ns = start.map_or(0, |s| s.elapsed().as_nanos() as u64);
            Ok::<_, tokensieve::MatcherError>((needs_apply(dst, vocab_size), ns))
        })
        .map_err(engine_err)
    }
}

#[pymethods]
impl PyGrammarMatcher {
    /// A matcher with XGrammar's options (`GrammarMatcher::with_options`); ValueError for
    /// an override stop token at or past the tokenizer's size.
    #[new]
    #[pyo3(signature = (compiled_grammar, *, override_stop_tokens=None, terminate_without_stop_token=false, max_rollback_tokens=None))]
    fn new(
        compiled_grammar: &PyCompiledGrammar,
        override_stop_tokens: Option<Vec<u32>>,
        terminate_without_stop_token: bool,
        max_rollback_tokens: Option<usize>,
    ) -> PyResult<Self> {
        let options = MatcherOptions {
            override_stop_tokens,
            terminate_without_stop_token,
            max_rollback_tokens,
        };
        tokensieve::GrammarMatcher::with_options(compiled_grammar.inner.clone(), &options)
            .map(|inner| Self { inner })
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// How many of `tokens`, from the first, would be accepted in a row, the state
    /// unchanged (`GrammarMatcher::validate_tokens`). ValueError for an id at or past the
    /// vocabulary size.
    fn validate_tokens(&mut self, tokens: Vec<u32>) -> PyResult<usize> {
        check_token_ids(
            &tokens,
            self.inner.compiled_grammar().vocabulary().vocab_size(),
        )?;
        Ok(self.inner.validate_tokens(&tokens))
    }

    /// The rollback bound (None: unlimited).
    #[getter]
    fn max_rollback_tokens(&self) -> Option<usize> {
        self.inner.options().max_rollback_tokens
    }

    /// Whether the matcher terminates when the grammar completes.
    #[getter]
    fn terminate_without_stop_token(&self) -> bool {
        self.inner.options().terminate_without_stop_token
    }

    /// As `fill_next_token_bitmask`, and the nanoseconds the engine's fill took inside the
    /// call (for the bench's binding overhead: the call's time minus this).
    #[pyo3(signature = (bitmask, index=0))]
    fn _fill_next_token_bitmask_timed(
        &mut self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        index: i64,
    ) -> PyResult<(bool, u64)> {
        self.fill_row(py, bitmask, index, true)
    }

    /// Accepts a token; False (state unchanged) when the grammar rejects it. Raises
    /// ValueError for an id at or past the vocabulary size.
    fn accept_token(&mut self, token_id: u32) -> PyResult<bool> {
        accept_token(&mut self.inner, token_id)
    }

    /// Why `accept_token(token_id)` would fail now, or None when it would succeed. The
    /// state is unchanged either way.
    fn rejection_reason(&mut self, token_id: u32) -> Option<String> {
        match self.inner.try_accept_token(token_id) {
            Ok(()) => {
                let _ = self.inner.rollback(1);
                None
            }
            Err(e) => Some(e.to_string()),
        }
    }

    /// Accepts the bytes of a str (UTF-8) or bytes as one step, all or nothing.
    fn accept_string(&mut self, input_str: &Bound<'_, PyAny>) -> PyResult<bool> {
        let bytes = string_bytes(input_str)?;
        accept_bytes(&mut self.inner, &bytes)
    }

    /// Writes the next token bitmask into row `index` of a `[rows, words]` (or `[words]`)
    /// int32 CPU tensor, numpy array or other buffer, with the GIL released. Returns whether
    /// some token is masked.
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_next_token_bitmask(
        &mut self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        index: i64,
    ) -> PyResult<bool> {
        self.fill_row(py, bitmask, index, false)
            .map(|(need, _)| need)
    }

    /// Undoes the last `num_tokens` steps.
    #[pyo3(signature = (num_tokens=1))]
    fn rollback(&mut self, num_tokens: usize) -> PyResult<()> {
        self.inner
            .rollback(num_tokens)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Returns to the start of the grammar.
    fn reset(&mut self) {
        self.inner.reset();
    }

    /// True once a stop token has been accepted.
    fn is_terminated(&self) -> bool {
        self.inner.is_terminated()
    }

    /// True when the output so far is a complete match (a stop token would be accepted).
    fn is_completed(&self) -> bool {
        self.inner.is_completed()
    }

    /// The text the grammar forces next (longest valid UTF-8 prefix); state unchanged.
    fn find_jump_forward_string(&mut self) -> String {
        self.inner.find_jump_forward_string()
    }

    /// The steps that `rollback` can undo.
    fn num_accepted_steps(&self) -> usize {
        self.inner.num_accepted_steps()
    }

    /// This matcher's stop token ids, ascending: the override, else the vocabulary's.
    #[getter]
    fn stop_token_ids(&self) -> Vec<u32> {
        self.inner.stop_tokens().to_vec()
    }

    /// The compiled grammar this matcher runs.
    #[getter]
    fn compiled_grammar(&self) -> PyCompiledGrammar {
        compiled(self.inner.compiled_grammar().clone())
    }

    /// A copy in the same state, advancing independently.
    fn fork(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}
