//! `Vocabulary`: the tokenizer's tokens, special and stop tokens, and logits width.

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use tokensieve::vocab::VocabType;
use tokensieve::Vocabulary;

use crate::errors::{deserialize_err, engine_err};

/// The vocabulary (`tokensieve::Vocabulary`): token bytes, special and stop tokens, logits
/// width. Immutable; shared by every grammar compiled against it.
#[pyclass(module = "tokensieve._core", name = "Vocabulary", frozen)]
pub(crate) struct PyVocabulary {
    pub(crate) inner: Arc<Vocabulary>,
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
