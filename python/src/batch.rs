//! Batch calls over many matchers: fills on a thread pool, accepts and rollbacks.

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::bitmask::{words_mut, Rows};
use crate::compiler::pool;
use crate::engine::PyStructuredOutputGrammar;
use crate::errors::{engine_err, TokensieveError};
use crate::matcher::{accept_bytes, accept_token, string_bytes, PyGrammarMatcher};

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

/// The threads of batch fills, kept for the life of a `BatchGrammarMatcher`: the calling
/// thread and a pool of `threads - 1` helpers (none for one thread).
#[pyclass(module = "tokensieve._core", name = "ThreadPool", frozen)]
pub(crate) struct PyThreadPool {
    helpers: Option<Arc<rayon::ThreadPool>>,
}

#[pymethods]
impl PyThreadPool {
    #[new]
    fn new(threads: usize) -> PyResult<Self> {
        Ok(Self {
            helpers: match threads {
                0 | 1 => None,
                n => Some(pool(n - 1)?),
            },
        })
    }

    /// The number of threads of a fill, the calling thread included.
    #[getter]
    fn threads(&self) -> usize {
        1 + self.helpers.as_ref().map_or(0, |p| p.current_num_threads())
    }
}

/// Fills row `indices[i]` (or `i`) of `bitmask` from `matchers[i]` on the calling thread and
/// the helpers of `pool` (`tokensieve::mask::batch_fill_next_token_bitmask_with`), with the
/// GIL released.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, pool, indices=None))]
pub(crate) fn batch_fill_next_token_bitmask(
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
    let helpers = pool.helpers.as_deref();
    let (ptr, total) = (rows.ptr, rows.rows * rows.words);
    let pairs: Vec<(&mut tokensieve::GrammarMatcher, usize)> =
        ms.iter_mut().map(|m| m.get_mut()).zip(idx).collect();
    py.detach(move || {
        // SAFETY: see `words_mut`; the rows were checked above.
        let all = unsafe { words_mut(ptr, total) };
        tokensieve::mask::batch_fill_next_token_bitmask_with(helpers, pairs, all)
            .map_err(|e| e.to_string())
    })
    .map_err(TokensieveError::new_err)
}

/// `matchers[i].accept_token(tokens[i])` for each i.
#[pyfunction]
pub(crate) fn batch_accept_token(
    matchers: &Bound<'_, PyAny>,
    tokens: Vec<u32>,
) -> PyResult<Vec<bool>> {
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
pub(crate) fn batch_accept_string(
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
pub(crate) fn batch_rollback(matchers: &Bound<'_, PyAny>, num_tokens: Vec<usize>) -> PyResult<()> {
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
