//! `tokensieve._core`: the Python extension of tokensieve (PyO3, abi3 for CPython >= 3.11).
//!
//! Thin by design: conversions between Python and Rust values, GIL handling, and mapping of
//! errors to Python exceptions carrying the Rust message. The XGrammar-compatible Python API
//! (`tokensieve.TokenizerInfo`, `GrammarCompiler`, `GrammarMatcher`, ...) is written in
//! Python over these classes (`python/tokensieve/*.py`); every decision about grammars,
//! vocabularies and masks is the `tokensieve` crate's.
//!
//! Bitmasks and logits are written in place through the buffer protocol (a numpy array, or
//! a CPU torch tensor through `tensor.numpy()`, which shares its memory): the dtype, the
//! shape, contiguity, writability and the row index are checked before the GIL is released,
//! and every failure is a Python exception.

use std::sync::Arc;

use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyType};
use rayon::prelude::*;

use tokensieve::engine::{EngineError, StructuredOutputKind};
use tokensieve::vocab::VocabType;
use tokensieve::{DeserializeError, JsonSchemaOptions, MatcherOptions, Vocabulary};

mod tools;

create_exception!(
    _core,
    TokensieveError,
    PyRuntimeError,
    "An error of the tokensieve engine (the message is the Rust error's)."
);
create_exception!(
    _core,
    InvalidJSONError,
    TokensieveError,
    "A JSON text (schema, structural tag, serialized object) that is not valid JSON."
);
create_exception!(
    _core,
    InvalidJSONSchemaError,
    TokensieveError,
    "A JSON Schema that cannot be turned into a grammar (the message names the JSON pointer)."
);
create_exception!(
    _core,
    InvalidStructuralTagError,
    TokensieveError,
    "A structural tag that cannot be read or lowered (the message names the JSON path)."
);

fn engine_err(e: impl std::fmt::Display) -> PyErr {
    TokensieveError::new_err(e.to_string())
}

fn json_value(text: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| InvalidJSONError::new_err(format!("invalid JSON: {e}")))
}

/// A [`DeserializeError`] as `tokensieve.exception.DeserializeVersionError` (a format version
/// this tokensieve does not read, newer or older) or `DeserializeFormatError` (anything else), both `ValueError`s; a plain
/// `ValueError` if the Python package's exception module cannot be imported.
fn deserialize_err(py: Python<'_>, e: DeserializeError) -> PyErr {
    let name = match e {
        DeserializeError::NewerVersion { .. } | DeserializeError::OlderVersion { .. } => {
            "DeserializeVersionError"
        }
        _ => "DeserializeFormatError",
    };
    let msg = e.to_string();
    match py
        .import("tokensieve.exception")
        .and_then(|m| m.getattr(name))
        .and_then(|t| Ok(t.cast_into::<PyType>()?))
    {
        Ok(t) => PyErr::from_type(t, msg),
        Err(_) => PyValueError::new_err(msg),
    }
}

/// Checks that every id of `tokens` is below `vocab_size` (ValueError naming the first that
/// is not).
fn check_token_ids(tokens: &[u32], vocab_size: usize) -> PyResult<()> {
    match tokens.iter().position(|&t| t as usize >= vocab_size) {
        Some(i) => Err(PyValueError::new_err(format!(
            "tokens[{i}] = {} is not below the vocabulary size {vocab_size}",
            tokens[i]
        ))),
        None => Ok(()),
    }
}

/// A thread pool of `threads` threads (at least one).
fn pool(threads: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map(Arc::new)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread pool: {e}")))
}

// ---------------------------------------------------------------------------------------
// Vocabulary
// ---------------------------------------------------------------------------------------

/// The vocabulary (`tokensieve::Vocabulary`): token bytes, special and stop tokens, logits
/// width. Immutable; shared by every grammar compiled against it.
#[pyclass(module = "tokensieve._core", name = "Vocabulary", frozen)]
struct PyVocabulary {
    inner: Arc<Vocabulary>,
}

fn with_sizes(
    mut v: Vocabulary,
    vocab_size: Option<usize>,
    stop: Option<Vec<u32>>,
) -> PyResult<Vocabulary> {
    if let Some(stop) = stop {
        v = v
            .with_stop_tokens(&stop)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    if let Some(n) = vocab_size {
        v = v
            .with_vocab_size(n)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    Ok(v)
}

/// Token strings given as `str` (UTF-8) or `bytes`.
fn token_strings(tokens: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for (i, t) in tokens.try_iter()?.enumerate() {
        let t = t?;
        if let Ok(s) = t.cast::<PyString>() {
            out.push(s.to_str()?.as_bytes().to_vec());
        } else if let Ok(b) = t.cast::<PyBytes>() {
            out.push(b.as_bytes().to_vec());
        } else {
            return Err(PyTypeError::new_err(format!(
                "token {i} is a {}, expected str or bytes",
                t.get_type().name()?
            )));
        }
    }
    Ok(out)
}

#[pymethods]
impl PyVocabulary {
    /// From the text of a Hugging Face `tokenizer.json` (and optionally its
    /// `tokenizer_config.json`): `Vocabulary::from_tokenizer_json_str`, then the stop tokens
    /// and the logits width when given.
    #[staticmethod]
    #[pyo3(signature = (tokenizer_json, tokenizer_config_json=None, vocab_size=None, stop_token_ids=None))]
    fn from_tokenizer_json(
        py: Python<'_>,
        tokenizer_json: &str,
        tokenizer_config_json: Option<&str>,
        vocab_size: Option<usize>,
        stop_token_ids: Option<Vec<u32>>,
    ) -> PyResult<Self> {
        let v = py
            .detach(|| Vocabulary::from_tokenizer_json_str(tokenizer_json, tokenizer_config_json))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Self {
            inner: Arc::new(with_sizes(v, vocab_size, stop_token_ids)?),
        })
    }

    /// From encoded token strings and XGrammar's vocabulary type number (0 raw, 1 byte
    /// fallback, 2 byte level): `Vocabulary::from_encoded_vocab`.
    #[staticmethod]
    #[pyo3(signature = (encoded_vocab, vocab_type, vocab_size=None, stop_token_ids=None))]
    fn from_encoded_vocab(
        encoded_vocab: &Bound<'_, PyAny>,
        vocab_type: i64,
        vocab_size: Option<usize>,
        stop_token_ids: Option<Vec<u32>>,
    ) -> PyResult<Self> {
        let tokens = token_strings(encoded_vocab)?;
        let vt = VocabType::from_index(vocab_type).ok_or_else(|| {
            PyValueError::new_err(format!(
                "vocab_type {vocab_type} is not 0 (RAW), 1 (BYTE_FALLBACK) or 2 (BYTE_LEVEL)"
            ))
        })?;
        let v = Vocabulary::from_encoded_vocab(&tokens, vt, vocab_size, stop_token_ids.as_deref())
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Self { inner: Arc::new(v) })
    }

    /// From each token's bytes, the special and the stop token ids:
    /// `Vocabulary::from_token_bytes`, then the logits width when given.
    #[staticmethod]
    #[pyo3(signature = (tokens, special_token_ids, stop_token_ids, vocab_size=None))]
    fn from_token_bytes(
        tokens: &Bound<'_, PyAny>,
        special_token_ids: Vec<u32>,
        stop_token_ids: Vec<u32>,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
        let tokens = token_strings(tokens)?;
        let v = Vocabulary::from_token_bytes(&tokens, &special_token_ids, &stop_token_ids)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Self {
            inner: Arc::new(with_sizes(v, vocab_size, None)?),
        })
    }

    /// The logits width (bits of a bitmask row).
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    /// The number of tokens the tokenizer defines (`<= vocab_size`).
    #[getter]
    fn tokenizer_size(&self) -> usize {
        self.inner.tokenizer_size()
    }

    /// The stop token ids, ascending.
    #[getter]
    fn stop_token_ids(&self) -> Vec<u32> {
        self.inner.stop_tokens().to_vec()
    }

    /// The special (added/control) token ids, ascending; the padding ids past the tokenizer
    /// are not listed.
    #[getter]
    fn special_token_ids(&self) -> Vec<u32> {
        self.inner.special_tokens().collect()
    }

    /// Each token's bytes, by id (`tokenizer_size` entries).
    #[getter]
    fn decoded_vocab<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        (0..self.inner.tokenizer_size() as u32)
            .map(|i| PyBytes::new(py, self.inner.token_bytes(i).unwrap_or_default()))
            .collect()
    }

    /// The id of the special token spelled `text`, or None.
    fn special_token_id(&self, text: &str) -> Option<u32> {
        self.inner.special_token_id(text)
    }

    /// Heap memory held, in bytes.
    #[getter]
    fn memory_size_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    /// The vocabulary as bytes (`Vocabulary::serialize`: header with magic `TSVOCAB\0`,
    /// version, fingerprint, length and checksum, then a postcard payload).
    fn serialize<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &self.inner;
        let bytes = py.detach(|| inner.serialize()).map_err(engine_err)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Reads the bytes of `serialize` (`Vocabulary::deserialize`). Raises
    /// `DeserializeFormatError` / `DeserializeVersionError` (ValueErrors) for bad bytes.
    #[staticmethod]
    fn deserialize(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let v = py
            .detach(|| Vocabulary::deserialize(data))
            .map_err(|e| deserialize_err(py, e))?;
        Ok(Self { inner: Arc::new(v) })
    }
}

// ---------------------------------------------------------------------------------------
// Grammar
// ---------------------------------------------------------------------------------------

/// A grammar (`tokensieve::Grammar`, the IR every front end produces); `str()` is its EBNF.
#[pyclass(module = "tokensieve._core", name = "Grammar", frozen)]
#[derive(Clone)]
struct PyGrammar {
    inner: tokensieve::Grammar,
}

fn schema_options(
    any_whitespace: bool,
    max_whitespace_cnt: Option<u32>,
    strict_mode: bool,
    any_order: bool,
) -> PyResult<JsonSchemaOptions> {
    if max_whitespace_cnt == Some(0) {
        return Err(PyValueError::new_err(
            "max_whitespace_cnt must be a positive integer (or None for no limit)",
        ));
    }
    Ok(JsonSchemaOptions {
        any_whitespace,
        max_whitespace: max_whitespace_cnt,
        strict: strict_mode,
        any_order,
        ..JsonSchemaOptions::default()
    })
}

#[pymethods]
impl PyGrammar {
    /// Parses EBNF (XGrammar's dialect or GBNF) with the given root rule.
    #[staticmethod]
    #[pyo3(signature = (ebnf, root_rule_name="root"))]
    fn from_ebnf(ebnf: &str, root_rule_name: &str) -> PyResult<Self> {
        tokensieve::grammar::parse_ebnf(ebnf, root_rule_name)
            .map(|inner| Self { inner })
            .map_err(engine_err)
    }

    /// The grammar of a JSON Schema (JSON text).
    #[staticmethod]
    #[pyo3(signature = (schema, any_whitespace=true, max_whitespace_cnt=None, strict_mode=true, any_order=false))]
    fn from_json_schema(
        schema: &str,
        any_whitespace: bool,
        max_whitespace_cnt: Option<u32>,
        strict_mode: bool,
        any_order: bool,
    ) -> PyResult<Self> {
        let value = json_value(schema)?;
        let opts = schema_options(any_whitespace, max_whitespace_cnt, strict_mode, any_order)?;
        tokensieve::json_schema_to_grammar(&value, &opts)
            .map(|inner| Self { inner })
            .map_err(|e| InvalidJSONSchemaError::new_err(e.to_string()))
    }

    /// The grammar of a regular expression.
    #[staticmethod]
    fn from_regex(regex: &str) -> PyResult<Self> {
        tokensieve::regex::regex_to_grammar(regex, &tokensieve::RegexOptions::default())
            .map(|inner| Self { inner })
            .map_err(engine_err)
    }

    /// The grammar of a structural tag (XGrammar's JSON), without a vocabulary: special-token
    /// text stays text until the grammar is compiled.
    #[staticmethod]
    fn from_structural_tag(tag: &str) -> PyResult<Self> {
        let tag = tokensieve::StructuralTag::from_json_str(tag)
            .map_err(|e| InvalidStructuralTagError::new_err(e.to_string()))?;
        tokensieve::structural_tag_to_grammar(&tag, None)
            .map(|inner| Self { inner })
            .map_err(|e| InvalidStructuralTagError::new_err(e.to_string()))
    }

    /// The built-in grammar of any JSON value.
    #[staticmethod]
    fn builtin_json_grammar() -> Self {
        Self {
            inner: tokensieve::grammar::json_grammar(),
        }
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }
}

// ---------------------------------------------------------------------------------------
// Compiler and compiled grammar
// ---------------------------------------------------------------------------------------

/// A grammar compiled against a vocabulary (`Arc<tokensieve::CompiledGrammar>`).
#[pyclass(module = "tokensieve._core", name = "CompiledGrammar", frozen)]
struct PyCompiledGrammar {
    inner: Arc<tokensieve::CompiledGrammar>,
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
struct PyGrammarCompiler {
    inner: tokensieve::GrammarCompiler,
    pool: Arc<rayon::ThreadPool>,
    cache_enabled: bool,
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

fn compiled(inner: Arc<tokensieve::CompiledGrammar>) -> PyCompiledGrammar {
    PyCompiledGrammar { inner }
}

#[pymethods]
impl PyGrammarCompiler {
    /// `mask_cache_bytes`: the bytes of node masks shared across grammars (0: none; None:
    /// the engine's default). `cache_enabled`, `cache_limit_bytes`: the whole-grammar cache
    /// (`with_cache_enabled`, `with_cache_limit_bytes`; None: unlimited); `cache_enabled =
    /// false` also turns off the rule automata shared across grammars.
    #[new]
    #[pyo3(signature = (vocabulary, max_threads=8, mask_cache_bytes=None, *, cache_enabled=true, cache_limit_bytes=None))]
    fn new(
        vocabulary: &PyVocabulary,
        max_threads: usize,
        mask_cache_bytes: Option<usize>,
        cache_enabled: bool,
        cache_limit_bytes: Option<usize>,
    ) -> PyResult<Self> {
        let mut inner = tokensieve::GrammarCompiler::new(vocabulary.inner.clone())
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

    /// Compiles a JSON Schema given as JSON text.
    #[pyo3(signature = (schema, any_whitespace=true, max_whitespace_cnt=None, strict_mode=true, any_order=false))]
    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: &str,
        any_whitespace: bool,
        max_whitespace_cnt: Option<u32>,
        strict_mode: bool,
        any_order: bool,
    ) -> PyResult<PyCompiledGrammar> {
        let value = json_value(schema)?;
        let opts = schema_options(any_whitespace, max_whitespace_cnt, strict_mode, any_order)?;
        self.run(
            py,
            |c| c.compile_json_schema(&value, &opts),
            InvalidJSONSchemaError::new_err,
        )
        .map(compiled)
    }

    /// Compiles the built-in JSON grammar.
    fn compile_builtin_json_grammar(&self, py: Python<'_>) -> PyResult<PyCompiledGrammar> {
        self.run(py, |c| c.compile_builtin_json(), TokensieveError::new_err)
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

    /// Compiles a regular expression.
    fn compile_regex(&self, py: Python<'_>, regex: &str) -> PyResult<PyCompiledGrammar> {
        self.run(py, |c| c.compile_regex(regex), TokensieveError::new_err)
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

// ---------------------------------------------------------------------------------------
// Bitmask buffers
// ---------------------------------------------------------------------------------------

/// A writable, C-contiguous buffer of 32-bit ints seen as `[rows, words]` (a 1-D buffer is
/// one row).
struct Rows {
    _buf: PyBuffer<i32>,
    ptr: usize,
    rows: usize,
    words: usize,
}

impl Rows {
    fn new(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Self> {
        let buf = PyBuffer::<i32>::get(obj).map_err(|e| {
            PyTypeError::new_err(format!("{what} must be an int32 array or tensor ({e})"))
        })?;
        if buf.readonly() {
            return Err(PyValueError::new_err(format!("{what} is read-only")));
        }
        if !buf.is_c_contiguous() {
            return Err(PyValueError::new_err(format!(
                "{what} must be contiguous (row-major); call .contiguous() or np.ascontiguousarray"
            )));
        }
        let (rows, words) = match *buf.shape() {
            [w] => (1, w),
            [r, w] => (r, w),
            ref s => {
                return Err(PyValueError::new_err(format!(
                    "{what} must have 1 or 2 dimensions, got shape {s:?}"
                )))
            }
        };
        Ok(Self {
            ptr: buf.buf_ptr() as usize,
            _buf: buf,
            rows,
            words,
        })
    }

    fn check_words(&self, words: usize, what: &str) -> PyResult<()> {
        if self.words != words {
            return Err(PyValueError::new_err(format!(
                "{what} has {} words per row, expected ceil(vocab_size / 32) = {words}",
                self.words
            )));
        }
        Ok(())
    }

    fn check_row(&self, index: i64, what: &str) -> PyResult<usize> {
        if index < 0 || index as usize >= self.rows {
            return Err(PyIndexError::new_err(format!(
                "index {index} is out of range for {what} of {} rows",
                self.rows
            )));
        }
        Ok(index as usize)
    }
}

/// The whole buffer as words. Safety: `ptr` is the start of a live, writable, C-contiguous
/// buffer of `len` 32-bit ints that nothing else accesses during the call (the buffer view
/// held by [`Rows`] keeps it alive; its owner is a Python object whose other users wait for
/// the call, as with any in-place numpy/torch operation).
unsafe fn words_mut<'a>(ptr: usize, len: usize) -> &'a mut [u32] {
    std::slice::from_raw_parts_mut(ptr as *mut u32, len)
}

/// True when some token id below `vocab_size` is masked in `row` (the logits need the mask).
fn needs_apply(row: &[u32], vocab_size: usize) -> bool {
    let full = vocab_size / 32;
    if row[..full].iter().any(|&w| w != u32::MAX) {
        return true;
    }
    let rest = vocab_size % 32;
    rest != 0 && row[full] & ((1u32 << rest) - 1) != (1u32 << rest) - 1
}

// ---------------------------------------------------------------------------------------
// Matcher
// ---------------------------------------------------------------------------------------

/// One sequence's matcher (`tokensieve::GrammarMatcher`).
#[pyclass(module = "tokensieve._core", name = "GrammarMatcher")]
struct PyGrammarMatcher {
    inner: tokensieve::GrammarMatcher,
}

fn accept_token(m: &mut tokensieve::GrammarMatcher, token: u32) -> PyResult<bool> {
    use tokensieve::TokenRejection;
    match m.try_accept_token(token) {
        Ok(()) => Ok(true),
        Err(e @ TokenRejection::OutOfRange { .. }) => Err(PyValueError::new_err(e.to_string())),
        Err(TokenRejection::StepLimit { limit, .. }) => Err(engine_err(limit)),
        Err(_) => Ok(false),
    }
}

fn string_bytes(s: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
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

fn accept_bytes(m: &mut tokensieve::GrammarMatcher, bytes: &[u8]) -> PyResult<bool> {
    use tokensieve::TokenRejection;
    match m.try_accept_bytes(bytes) {
        Ok(()) => Ok(true),
        Err(TokenRejection::StepLimit { limit, .. }) => Err(engine_err(limit)),
        Err(_) => Ok(false),
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
            let start = std::time::Instant::now();
            inner.fill_next_token_bitmask(dst)?;
            let ns = start.elapsed().as_nanos() as u64;
            Ok::<_, tokensieve::MatcherError>((needs_apply(dst, vocab_size), ns))
        })
        .map_err(engine_err)
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
    /// int32 buffer, with the GIL released. Returns whether some token is masked.
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_next_token_bitmask(
        &mut self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        index: i64,
    ) -> PyResult<bool> {
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
            inner.fill_next_token_bitmask(dst)?;
            Ok::<_, tokensieve::MatcherError>(needs_apply(dst, vocab_size))
        })
        .map_err(engine_err)
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

/// The matchers of a Python list, each borrowed mutably (the same matcher twice is an error).
fn borrow_all<'py>(matchers: &Bound<'py, PyAny>) -> PyResult<Vec<PyRefMut<'py, PyGrammarMatcher>>> {
    let mut out = Vec::new();
    for (i, m) in matchers.try_iter()?.enumerate() {
        let m = m?;
        let m = m
            .cast::<PyGrammarMatcher>()
            .map_err(|_| PyTypeError::new_err(format!("matchers[{i}] is not a GrammarMatcher")))?;
        out.push(m.try_borrow_mut().map_err(|_| {
            PyValueError::new_err(format!(
                "matchers[{i}] is in use (the same matcher twice in one batch, or used by another thread)"
            ))
        })?);
    }
    Ok(out)
}

/// A matcher of a batch fill: a `GrammarMatcher`, or the matcher of an engine adapter's
/// `StructuredOutputGrammar`.
enum Borrowed<'py> {
    Matcher(PyRefMut<'py, PyGrammarMatcher>),
    Request(PyRefMut<'py, PyStructuredOutputGrammar>),
}

impl Borrowed<'_> {
    fn get(&self) -> &tokensieve::GrammarMatcher {
        match self {
            Borrowed::Matcher(m) => &m.inner,
            Borrowed::Request(r) => r.inner.matcher(),
        }
    }

    fn get_mut(&mut self) -> &mut tokensieve::GrammarMatcher {
        match self {
            Borrowed::Matcher(m) => &mut m.inner,
            Borrowed::Request(r) => r.inner.matcher_mut(),
        }
    }
}

/// The matchers (or `StructuredOutputGrammar`s) of a Python list for a batch fill, each
/// borrowed mutably (the same one twice is an error).
fn borrow_fill_batch<'py>(matchers: &Bound<'py, PyAny>) -> PyResult<Vec<Borrowed<'py>>> {
    let mut out = Vec::new();
    let busy = |i: usize| {
        PyValueError::new_err(format!(
            "matchers[{i}] is in use (the same matcher twice in one batch, or used by another thread)"
        ))
    };
    for (i, m) in matchers.try_iter()?.enumerate() {
        let m = m?;
        if let Ok(m) = m.cast::<PyGrammarMatcher>() {
            out.push(Borrowed::Matcher(m.try_borrow_mut().map_err(|_| busy(i))?));
        } else if let Ok(r) = m.cast::<PyStructuredOutputGrammar>() {
            out.push(Borrowed::Request(r.try_borrow_mut().map_err(|_| busy(i))?));
        } else {
            return Err(PyTypeError::new_err(format!(
                "matchers[{i}] is not a GrammarMatcher or a StructuredOutputGrammar"
            )));
        }
    }
    Ok(out)
}

/// A pool of threads for batch fills, kept for the life of a `BatchGrammarMatcher`.
#[pyclass(module = "tokensieve._core", name = "ThreadPool", frozen)]
struct PyThreadPool {
    pool: Arc<rayon::ThreadPool>,
}

#[pymethods]
impl PyThreadPool {
    #[new]
    fn new(threads: usize) -> PyResult<Self> {
        Ok(Self {
            pool: pool(threads)?,
        })
    }

    /// The number of threads.
    #[getter]
    fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }
}

/// Fills row `indices[i]` (or `i`) of `bitmask` from `matchers[i]` on `pool`, with the GIL
/// released.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, pool, indices=None))]
fn batch_fill_next_token_bitmask(
    py: Python<'_>,
    matchers: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    pool: &PyThreadPool,
    indices: Option<Vec<i64>>,
) -> PyResult<()> {
    let mut ms = borrow_fill_batch(matchers)?;
    let rows = Rows::new(bitmask, "bitmask")?;
    let Some(first) = ms.first() else {
        return Ok(());
    };
    let words = first.get().bitmask_words();
    rows.check_words(words, "bitmask")?;
    let idx: Vec<usize> = match indices {
        Some(ix) => {
            if ix.len() != ms.len() {
                return Err(PyValueError::new_err(format!(
                    "{} indices for {} matchers",
                    ix.len(),
                    ms.len()
                )));
            }
            ix.iter()
                .map(|&i| rows.check_row(i, "bitmask"))
                .collect::<PyResult<_>>()?
        }
        None => (0..ms.len() as i64)
            .map(|i| rows.check_row(i, "bitmask"))
            .collect::<PyResult<_>>()?,
    };
    for (i, m) in ms.iter().enumerate() {
        if m.get().bitmask_words() != words {
            return Err(PyValueError::new_err(format!(
                "matchers[{i}] has {} bitmask words, matchers[0] has {words}: one vocabulary per batch",
                m.get().bitmask_words()
            )));
        }
    }
    let mut seen = vec![false; rows.rows];
    for &r in &idx {
        if std::mem::replace(&mut seen[r], true) {
            return Err(PyValueError::new_err(format!(
                "row {r} appears twice in indices"
            )));
        }
    }
    let pool = &pool.pool;
    let (ptr, total) = (rows.ptr, rows.rows * rows.words);
    let mut jobs: Vec<(&mut tokensieve::GrammarMatcher, usize)> = ms
        .iter_mut()
        .map(|m| m.get_mut())
        .zip(idx.iter().copied())
        .collect();
    py.detach(move || {
        // SAFETY: see `words_mut`; rows are distinct (checked above), so the slices are too.
        let all = unsafe { words_mut(ptr, total) };
        let mut slots: Vec<Option<&mut [u32]>> = all.chunks_mut(words).map(Some).collect();
        let mut work: Vec<(&mut tokensieve::GrammarMatcher, &mut [u32], usize)> = jobs
            .iter_mut()
            .enumerate()
            .map(|(i, (m, r))| (&mut **m, slots[*r].take().expect("distinct rows"), i))
            .collect();
        pool.install(|| {
            work.par_iter_mut().try_for_each(|(m, row, i)| {
                m.fill_next_token_bitmask(row)
                    .map_err(|e| format!("matcher {i} of the batch: {e}"))
            })
        })
    })
    .map_err(TokensieveError::new_err)
}

/// `matchers[i].accept_token(tokens[i])` for each i.
#[pyfunction]
fn batch_accept_token(matchers: &Bound<'_, PyAny>, tokens: Vec<u32>) -> PyResult<Vec<bool>> {
    let mut ms = borrow_all(matchers)?;
    if ms.len() != tokens.len() {
        return Err(PyValueError::new_err(format!(
            "{} tokens for {} matchers",
            tokens.len(),
            ms.len()
        )));
    }
    ms.iter_mut()
        .zip(tokens)
        .map(|(m, t)| accept_token(&mut m.inner, t))
        .collect()
}

/// `matchers[i].accept_string(strings[i])` for each i.
#[pyfunction]
fn batch_accept_string(
    matchers: &Bound<'_, PyAny>,
    strings: &Bound<'_, PyAny>,
) -> PyResult<Vec<bool>> {
    let mut ms = borrow_all(matchers)?;
    let strings: Vec<Vec<u8>> = strings
        .try_iter()?
        .map(|s| string_bytes(&s?))
        .collect::<PyResult<_>>()?;
    if ms.len() != strings.len() {
        return Err(PyValueError::new_err(format!(
            "{} strings for {} matchers",
            strings.len(),
            ms.len()
        )));
    }
    ms.iter_mut()
        .zip(strings)
        .map(|(m, s)| accept_bytes(&mut m.inner, &s))
        .collect()
}

/// `matchers[i].rollback(num_tokens[i])` for each i; checked for all before any changes.
#[pyfunction]
fn batch_rollback(matchers: &Bound<'_, PyAny>, num_tokens: Vec<usize>) -> PyResult<()> {
    let mut ms = borrow_all(matchers)?;
    if ms.len() != num_tokens.len() {
        return Err(PyValueError::new_err(format!(
            "{} counts for {} matchers",
            num_tokens.len(),
            ms.len()
        )));
    }
    for (i, (m, &n)) in ms.iter().zip(&num_tokens).enumerate() {
        if n > m.inner.num_accepted_steps() {
            return Err(PyValueError::new_err(format!(
                "matchers[{i}]: cannot roll back {n} tokens: only {} were accepted",
                m.inner.num_accepted_steps()
            )));
        }
    }
    for (m, n) in ms.iter_mut().zip(num_tokens) {
        m.inner.rollback(n).map_err(engine_err)?;
    }
    Ok(())
}

/// Sets `logits[r, j]` to -inf for each row `r` of `indices` (default: every row) and each
/// token `j < vocab_size` whose bit in `bitmask[r]` is clear (`tokensieve::mask::
/// apply_token_bitmask_inplace` per row), with the GIL released. `logits`: a contiguous
/// float32 `[rows, width]` or `[width]` buffer; `vocab_size` <= width and <= 32 x words.
#[pyfunction]
#[pyo3(signature = (logits, bitmask, vocab_size, indices=None))]
fn apply_token_bitmask_inplace_cpu(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    vocab_size: usize,
    indices: Option<Vec<i64>>,
) -> PyResult<()> {
    let lbuf = PyBuffer::<f32>::get(logits).map_err(|e| {
        PyTypeError::new_err(format!("logits must be a float32 array or tensor ({e})"))
    })?;
    if lbuf.readonly() || !lbuf.is_c_contiguous() {
        return Err(PyValueError::new_err(
            "logits must be writable and contiguous",
        ));
    }
    let (lrows, width) = match *lbuf.shape() {
        [w] => (1, w),
        [r, w] => (r, w),
        ref s => {
            return Err(PyValueError::new_err(format!(
                "logits must have 1 or 2 dimensions, got shape {s:?}"
            )))
        }
    };
    let rows = Rows::new(bitmask, "bitmask")?;
    if vocab_size > width || vocab_size.div_ceil(32) > rows.words {
        return Err(PyValueError::new_err(format!(
            "vocab_size {vocab_size} exceeds the logits width {width} or the bitmask's {} words",
            rows.words
        )));
    }
    let idx: Vec<usize> = match indices {
        Some(ix) => ix
            .iter()
            .map(|&i| {
                if i < 0 || i as usize >= lrows || i as usize >= rows.rows {
                    Err(PyIndexError::new_err(format!(
                        "index {i} is out of range for logits of {lrows} rows and a bitmask of {} rows",
                        rows.rows
                    )))
                } else {
                    Ok(i as usize)
                }
            })
            .collect::<PyResult<_>>()?,
        None => {
            if lrows != rows.rows {
                return Err(PyValueError::new_err(format!(
                    "logits have {lrows} rows but the bitmask has {}",
                    rows.rows
                )));
            }
            (0..lrows).collect()
        }
    };
    let (lptr, bptr, words) = (lbuf.buf_ptr() as usize, rows.ptr, rows.words);
    let total_b = rows.rows * words;
    py.detach(move || {
        // SAFETY: both buffers are checked above and held until the call returns.
        let l = unsafe { std::slice::from_raw_parts_mut(lptr as *mut f32, lrows * width) };
        let b = unsafe { words_mut(bptr, total_b) };
        for r in idx {
            let row = &mut l[r * width..r * width + vocab_size];
            tokensieve::mask::apply_token_bitmask_inplace(row, &b[r * words..(r + 1) * words])?;
        }
        Ok::<_, tokensieve::mask::BitmaskError>(())
    })
    .map_err(engine_err)?;
    drop(lbuf);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Engine adapter (tokensieve::engine)
// ---------------------------------------------------------------------------------------

/// The engine-level half of the serving adapter (`tokensieve::engine::StructuredOutputBackend`):
/// compiles each request's structured output through the compiler's whole-grammar cache,
/// on the compiler's pool, with the GIL released.
#[pyclass(module = "tokensieve._core", name = "StructuredOutputBackend", frozen)]
struct PyStructuredOutputBackend {
    inner: tokensieve::engine::StructuredOutputBackend,
    pool: Arc<rayon::ThreadPool>,
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
    /// options.
    #[new]
    #[pyo3(signature = (compiler, *, any_whitespace=true, max_whitespace_cnt=None, strict_mode=true, any_order=false, max_rollback_tokens=None, terminate_without_stop_token=false))]
    fn new(
        compiler: &PyGrammarCompiler,
        any_whitespace: bool,
        max_whitespace_cnt: Option<u32>,
        strict_mode: bool,
        any_order: bool,
        max_rollback_tokens: Option<usize>,
        terminate_without_stop_token: bool,
    ) -> PyResult<Self> {
        let json = schema_options(any_whitespace, max_whitespace_cnt, strict_mode, any_order)?;
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
struct PyStructuredOutputGrammar {
    inner: tokensieve::engine::StructuredOutputGrammar,
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

/// The module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyVocabulary>()?;
    m.add_class::<PyGrammar>()?;
    m.add_class::<PyCompiledGrammar>()?;
    m.add_class::<PyGrammarCompiler>()?;
    m.add_class::<PyGrammarMatcher>()?;
    m.add_class::<PyThreadPool>()?;
    m.add_class::<PyStructuredOutputBackend>()?;
    m.add_class::<PyStructuredOutputGrammar>()?;
    m.add_function(wrap_pyfunction!(batch_fill_next_token_bitmask, m)?)?;
    m.add_function(wrap_pyfunction!(batch_accept_token, m)?)?;
    m.add_function(wrap_pyfunction!(batch_accept_string, m)?)?;
    m.add_function(wrap_pyfunction!(batch_rollback, m)?)?;
    m.add_function(wrap_pyfunction!(apply_token_bitmask_inplace_cpu, m)?)?;
    m.add("TokensieveError", py.get_type::<TokensieveError>())?;
    m.add("InvalidJSONError", py.get_type::<InvalidJSONError>())?;
    m.add(
        "InvalidJSONSchemaError",
        py.get_type::<InvalidJSONSchemaError>(),
    )?;
    m.add(
        "InvalidStructuralTagError",
        py.get_type::<InvalidStructuralTagError>(),
    )?;
    tools::register(m)?;
    Ok(())
}
