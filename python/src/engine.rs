//! The serving adapter (`tokensieve::engine`): one backend per compiler, one
//! `StructuredOutputGrammar` per request.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use tokensieve::engine::{EngineError, StructuredOutputKind};
use tokensieve::MatcherOptions;

use crate::bitmask::{words_mut, Rows};
use crate::compiler::{compiled, PyCompiledGrammar, PyGrammarCompiler};
use crate::errors::{engine_err, InvalidJSONSchemaError, TokensieveError};
use crate::grammar::{schema_options, xgrammar_layout};
use crate::matcher::{check_token_ids, PyGrammarMatcher};

/// The engine-level half of the serving adapter (`tokensieve::engine::StructuredOutputBackend`):
/// compiles each request's structured output through the compiler's whole-grammar cache,
/// on the compiler's pool, with the GIL released.
#[pyclass(module = "tokensieve._core", name = "StructuredOutputBackend", frozen)]
pub(crate) struct PyStructuredOutputBackend {
    pub(crate) inner: tokensieve::engine::StructuredOutputBackend,
    pub(crate) pool: Arc<rayon::ThreadPool>,
}

fn request_kind(kind: &str) -> PyResult<StructuredOutputKind> {
    Ok(match kind {
        "json" => StructuredOutputKind::Json,
        "json_object" => StructuredOutputKind::JsonObject,
        "regex" => StructuredOutputKind::Regex,
        "grammar" | "ebnf" => StructuredOutputKind::Grammar,
        "structural_tag" => StructuredOutputKind::StructuralTag,
        "choice" => StructuredOutputKind::Choice,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown request kind {other:?}: expected json, json_object, regex, grammar (or ebnf), structural_tag or choice"
            )))
        }
    })
}

fn adapter_err(e: EngineError) -> PyErr {
    match e {
        EngineError::JsonSchema(e) => InvalidJSONSchemaError::new_err(e.to_string()),
        e @ (EngineError::Choice(_) | EngineError::Matcher(_)) => {
            PyValueError::new_err(e.to_string())
        }
        e => TokensieveError::new_err(e.to_string()),
    }
}

#[pymethods]
impl PyStructuredOutputBackend {
    /// A backend over `compiler` (a clone: the same whole-grammar cache), with the JSON
    /// Schema options of `json` / `json_object` requests and every request's matcher
    /// options. JSON is laid out as XGrammar's `compile_json_schema` writes it for vLLM's
    /// xgrammar backend (`xgrammar_layout`: default separators, no whitespace around the
    /// root value).
    #[new]
    #[pyo3(signature = (compiler, *, any_whitespace=true, max_whitespace_cnt=None, strict_mode=true, any_order=false, max_rollback_tokens=None, terminate_without_stop_token=false))]
    fn new(
        compiler: &PyGrammarCompiler,
        any_whitespace: bool,
        max_whitespace_cnt: Option<i64>,
        strict_mode: bool,
        any_order: bool,
        max_rollback_tokens: Option<usize>,
        terminate_without_stop_token: bool,
    ) -> PyResult<Self> {
        let mut json = schema_options(any_whitespace, max_whitespace_cnt, strict_mode, any_order)?;
        xgrammar_layout(&mut json, None, None)?;
        let inner = tokensieve::engine::StructuredOutputBackend::new(compiler.inner.clone())
            .with_json_options(json)
            .with_matcher_options(MatcherOptions {
                override_stop_tokens: None,
                terminate_without_stop_token,
                max_rollback_tokens,
            });
        Ok(Self {
            inner,
            pool: compiler.pool.clone(),
        })
    }

    /// Compiles one request's structured output: `spec` read as `kind` says (json,
    /// json_object, regex, grammar/ebnf, structural_tag, choice), with this request's
    /// stop tokens when given.
    #[pyo3(signature = (kind, spec, stop_token_ids=None))]
    fn compile_grammar(
        &self,
        py: Python<'_>,
        kind: &str,
        spec: &str,
        stop_token_ids: Option<Vec<u32>>,
    ) -> PyResult<PyStructuredOutputGrammar> {
        let kind = request_kind(kind)?;
        let (inner, pool) = (&self.inner, &self.pool);
        py.detach(|| {
            pool.install(|| match &stop_token_ids {
                Some(stop) => inner.compile_grammar_with_stop_tokens(kind, spec, stop),
                None => inner.compile_grammar(kind, spec),
            })
        })
        .map(|inner| PyStructuredOutputGrammar { inner })
        .map_err(adapter_err)
    }
}

/// The request-level half of the serving adapter
/// (`tokensieve::engine::StructuredOutputGrammar`): one matcher and vLLM's per-request calls.
#[pyclass(module = "tokensieve._core", name = "StructuredOutputGrammar")]
pub(crate) struct PyStructuredOutputGrammar {
    pub(crate) inner: tokensieve::engine::StructuredOutputGrammar,
}

impl PyStructuredOutputGrammar {
    fn vocab_size(&self) -> usize {
        self.inner
            .matcher()
            .compiled_grammar()
            .vocabulary()
            .vocab_size()
    }
}

#[pymethods]
impl PyStructuredOutputGrammar {
    /// `StructuredOutputGrammar::accept_tokens`; ValueError for an id at or past the
    /// vocabulary size (nothing accepted then).
    fn accept_tokens(&mut self, request_id: &str, tokens: Vec<u32>) -> PyResult<bool> {
        check_token_ids(&tokens, self.vocab_size())?;
        Ok(self.inner.accept_tokens(request_id, &tokens))
    }

    /// `StructuredOutputGrammar::validate_tokens`: the accepted prefix, state unchanged.
    fn validate_tokens(&mut self, tokens: Vec<u32>) -> PyResult<Vec<u32>> {
        check_token_ids(&tokens, self.vocab_size())?;
        Ok(self.inner.validate_tokens(&tokens))
    }

    /// `StructuredOutputGrammar::rollback`; ValueError past the tokens accepted or the
    /// rollback bound.
    fn rollback(&mut self, num_tokens: usize) -> PyResult<()> {
        self.inner
            .rollback(num_tokens)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Writes the next-token mask into row `row` of a `[rows, words]` int32 buffer
    /// (`StructuredOutputGrammar::fill_bitmask`), with the GIL released.
    fn fill_bitmask(
        &mut self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        row: i64,
    ) -> PyResult<()> {
        let rows = Rows::new(bitmask, "bitmask")?;
        rows.check_words(self.inner.matcher().bitmask_words(), "bitmask")?;
        let row = rows.check_row(row, "bitmask")?;
        let (ptr, total) = (rows.ptr, rows.rows * rows.words);
        let inner = &mut self.inner;
        py.detach(move || {
            // SAFETY: see `words_mut`; the buffer is checked above and held by `rows`.
            let all = unsafe { words_mut(ptr, total) };
            inner.fill_bitmask(all, row)
        })
        .map_err(engine_err)
    }

    /// True once the request's output is finished.
    fn is_terminated(&self) -> bool {
        self.inner.is_terminated()
    }

    /// Back to the start, as a new request.
    fn reset(&mut self) {
        self.inner.reset();
    }

    /// Tokens accepted so far.
    #[getter]
    fn num_processed_tokens(&self) -> usize {
        self.inner.num_processed_tokens()
    }

    /// The text the grammar forces next; state unchanged.
    fn find_jump_forward_string(&mut self) -> String {
        self.inner.find_jump_forward_string()
    }

    /// The compiled grammar of this request (shared through the cache).
    #[getter]
    fn compiled_grammar(&self) -> PyCompiledGrammar {
        compiled(self.inner.matcher().compiled_grammar().clone())
    }

    /// A copy of the matcher underneath, advancing independently.
    fn fork_matcher(&self) -> PyGrammarMatcher {
        PyGrammarMatcher {
            inner: self.inner.matcher().clone(),
        }
    }

    /// A copy of this request's grammar in the same state.
    fn fork(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}
