//! `GrammarCompiler` and `CompiledGrammar`: compiles on the compiler's own thread pool with
//! the GIL released.

use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::{
    deserialize_err, engine_err, json_value, InvalidJSONSchemaError, InvalidStructuralTagError,
    TokensieveError,
};
use crate::grammar::{schema_options, xgrammar_layout, PyGrammar};
use crate::vocabulary::PyVocabulary;

/// A thread pool of `threads` threads (at least one).
pub(crate) fn pool(threads: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map(Arc::new)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread pool: {e}")))
}

/// A grammar compiled against a vocabulary (`Arc<tokensieve::CompiledGrammar>`).
#[pyclass(module = "tokensieve._core", name = "CompiledGrammar", frozen)]
pub(crate) struct PyCompiledGrammar {
    pub(crate) inner: Arc<tokensieve::CompiledGrammar>,
}

#[pymethods]
impl PyCompiledGrammar {
    /// The grammar it was compiled from.
    #[getter]
    fn grammar(&self) -> PyGrammar {
        PyGrammar {
            inner: self.inner.grammar().clone(),
        }
    }

    /// The vocabulary it was compiled against.
    #[getter]
    fn vocabulary(&self) -> PyVocabulary {
        PyVocabulary {
            inner: self.inner.vocabulary().clone(),
        }
    }

    /// Heap memory of the automata and mask cache, in bytes.
    #[getter]
    fn memory_size_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    /// The grammar as bytes (`CompiledGrammar::serialize`: its automata and the masks
    /// computed so far), with the GIL released.
    fn serialize<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &self.inner;
        let bytes = py.detach(|| inner.serialize()).map_err(engine_err)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Reads the bytes of `serialize` with `compiler`, of the same vocabulary
    /// (`CompiledGrammar::deserialize`), with the GIL released. Raises
    /// `DeserializeFormatError` / `DeserializeVersionError` (ValueErrors) for bad bytes or
    /// another vocabulary.
    #[staticmethod]
    fn deserialize(py: Python<'_>, data: &[u8], compiler: &PyGrammarCompiler) -> PyResult<Self> {
        let c = &compiler.inner;
        py.detach(|| tokensieve::CompiledGrammar::deserialize(data, c))
            .map(compiled)
            .map_err(|e| deserialize_err(py, e))
    }
}

/// Compiles grammars against one vocabulary (`tokensieve::GrammarCompiler`) on its own pool
/// of `max_threads` threads, with the GIL released while it compiles.
#[pyclass(module = "tokensieve._core", name = "GrammarCompiler", frozen)]
pub(crate) struct PyGrammarCompiler {
    pub(crate) inner: tokensieve::GrammarCompiler,
    pub(crate) pool: Arc<rayon::ThreadPool>,
    pub(crate) cache_enabled: bool,
}

impl PyGrammarCompiler {
    fn run<T: Send, E: std::fmt::Display + Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&tokensieve::GrammarCompiler) -> Result<T, E> + Send,
        err: fn(String) -> PyErr,
    ) -> PyResult<T> {
        let (inner, pool) = (&self.inner, &self.pool);
        py.detach(|| pool.install(|| f(inner)))
            .map_err(|e| err(e.to_string()))
    }
}

pub(crate) fn compiled(inner: Arc<tokensieve::CompiledGrammar>) -> PyCompiledGrammar {
    PyCompiledGrammar { inner }
}

#[pymethods]
impl PyGrammarCompiler {
    /// `mask_cache_bytes`: the bytes of node masks shared across grammars (0: none; None:
    /// the engine's default). `cache_enabled`, `cache_limit_bytes`: the whole-grammar cache
    /// (`with_cache_enabled`, `with_cache_limit_bytes`; None: unlimited); `cache_enabled =
    /// false` also turns off the rule automata shared across grammars. `precompute`: when
    /// node masks are computed (`tokensieve::Precompute`): "background" (the default: a
    /// lazy compile, then the rest filled after compile on the engine's background pool),
    /// "eager" (all at compile) or "lazy" (on first use); another value is a ValueError.
    #[new]
    #[pyo3(signature = (vocabulary, max_threads=8, mask_cache_bytes=None, *, cache_enabled=true, cache_limit_bytes=None, precompute="background"))]
    fn new(
        vocabulary: &PyVocabulary,
        max_threads: usize,
        mask_cache_bytes: Option<usize>,
        cache_enabled: bool,
        cache_limit_bytes: Option<usize>,
        precompute: &str,
    ) -> PyResult<Self> {
        let precompute = match precompute {
            "eager" => tokensieve::Precompute::Eager,
            "lazy" => tokensieve::Precompute::Lazy,
            "background" => tokensieve::Precompute::Background,
            other => {
                return Err(PyValueError::new_err(format!(
                    "precompute must be \"eager\", \"lazy\" or \"background\", got {other:?}"
                )))
            }
        };
        let mut inner = tokensieve::GrammarCompiler::new(vocabulary.inner.clone())
            .with_precompute(precompute)
            .with_cache_enabled(cache_enabled)
            .with_cache_limit_bytes(cache_limit_bytes);
        if let Some(bytes) = mask_cache_bytes {
            inner = inner.with_mask_cache_capacity(bytes);
        }
        if !cache_enabled {
            // XGrammar's `cache_enabled=False`: nothing of one compile kept for the next,
            // rule automata included.
            inner = inner.with_rule_automaton_cache_capacity(0);
        }
        Ok(Self {
            inner,
            pool: pool(max_threads)?,
            cache_enabled,
        })
    }

    /// Whether the whole-grammar cache keeps compiled grammars.
    #[getter]
    fn cache_enabled(&self) -> bool {
        self.cache_enabled
    }

    /// The byte bound of the whole-grammar cache (None: unlimited).
    #[getter]
    fn cache_limit_bytes(&self) -> Option<usize> {
        self.inner.cache_limit_bytes()
    }

    /// Bytes held by the whole-grammar cache (`GrammarCompiler::cache_size_bytes`).
    fn cache_size_bytes(&self) -> usize {
        self.inner.cache_size_bytes()
    }

    /// Empties the whole-grammar cache (`GrammarCompiler::clear_cache`).
    fn clear_cache(&self) {
        self.inner.clear_cache();
    }

    /// `entries`, `size_bytes`, `hits`, `compiles` of the whole-grammar cache
    /// (`GrammarCompiler::grammar_cache_stats`).
    fn grammar_cache_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.inner.grammar_cache_stats();
        let d = PyDict::new(py);
        d.set_item("entries", st.entries)?;
        d.set_item("size_bytes", st.size_bytes)?;
        d.set_item("hits", st.hits)?;
        d.set_item("compiles", st.compiles)?;
        Ok(d)
    }

    /// The vocabulary grammars are compiled against.
    #[getter]
    fn vocabulary(&self) -> PyVocabulary {
        PyVocabulary {
            inner: self.inner.vocabulary().clone(),
        }
    }

    /// Compiles a JSON Schema given as JSON text, laid out as XGrammar writes it
    /// ([`xgrammar_layout`]: `indent`, `separators`); with `lenient`, keywords (formats
    /// included) that are not enforced are ignored instead of refused
    /// (`JsonSchemaOptions::lenient`).
    #[pyo3(signature = (schema, any_whitespace=true, max_whitespace_cnt=None, strict_mode=true, any_order=false, lenient=false, indent=None, separators=None))]
    #[allow(clippy::too_many_arguments)]
    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: &str,
        any_whitespace: bool,
        max_whitespace_cnt: Option<i64>,
        strict_mode: bool,
        any_order: bool,
        lenient: bool,
        indent: Option<i64>,
        separators: Option<(String, String)>,
    ) -> PyResult<PyCompiledGrammar> {
        let value = json_value(schema)?;
        let mut opts = schema_options(any_whitespace, max_whitespace_cnt, strict_mode, any_order)?;
        opts.lenient = lenient;
        xgrammar_layout(&mut opts, indent, separators)?;
        self.run(
            py,
            |c| c.compile_json_schema(&value, &opts),
            InvalidJSONSchemaError::new_err,
        )
        .map(compiled)
    }

    /// Compiles XGrammar's built-in JSON grammar (an object or an array, no whitespace
    /// around it).
    fn compile_builtin_json_grammar(&self, py: Python<'_>) -> PyResult<PyCompiledGrammar> {
        self.run(
            py,
            |c| c.compile_builtin_json_object_or_array(),
            TokensieveError::new_err,
        )
        .map(compiled)
    }

    /// Compiles EBNF text with the given root rule.
    #[pyo3(signature = (ebnf, root_rule_name="root"))]
    fn compile_ebnf(
        &self,
        py: Python<'_>,
        ebnf: &str,
        root_rule_name: &str,
    ) -> PyResult<PyCompiledGrammar> {
        self.run(
            py,
            |c| c.compile_grammar_with_root(ebnf, root_rule_name),
            TokensieveError::new_err,
        )
        .map(compiled)
    }

    /// Compiles a grammar object.
    fn compile_grammar(&self, py: Python<'_>, grammar: &PyGrammar) -> PyResult<PyCompiledGrammar> {
        let g = &grammar.inner;
        self.run(py, |c| c.compile_ir(g), TokensieveError::new_err)
            .map(compiled)
    }

    /// Compiles a regular expression, in XGrammar's dialect (`crate::grammar::xgrammar_regex`).
    fn compile_regex(&self, py: Python<'_>, regex: &str) -> PyResult<PyCompiledGrammar> {
        let opts = crate::grammar::xgrammar_regex();
        self.run(
            py,
            |c| c.compile_regex_with(regex, &opts),
            TokensieveError::new_err,
        )
        .map(compiled)
    }

    /// Compiles a structural tag given as XGrammar's JSON text.
    fn compile_structural_tag(&self, py: Python<'_>, tag: &str) -> PyResult<PyCompiledGrammar> {
        let value = json_value(tag)?;
        self.run(
            py,
            |c| c.compile_structural_tag(&value),
            InvalidStructuralTagError::new_err,
        )
        .map(compiled)
    }

    /// Bytes and number of the node masks shared across this compiler's grammars.
    fn mask_cache_stats(&self) -> (usize, usize) {
        self.inner.mask_cache_stats()
    }
}
