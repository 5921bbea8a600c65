//! Bitmask and logits buffers written in place: the checks made before the GIL is released.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::errors::engine_err;

/// A writable, C-contiguous buffer of 32-bit ints seen as `[rows, words]` (a 1-D buffer is
/// one row).
pub(crate) struct Rows {
    _buf: PyBuffer<i32>,
    pub(crate) ptr: usize,
    pub(crate) rows: usize,
    pub(crate) words: usize,
}

impl Rows {
    pub(crate) fn new(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Self> {
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

    pub(crate) fn check_words(&self, words: usize, what: &str) -> PyResult<()> {
        if self.words != words {
            return Err(PyValueError::new_err(format!(
                "{what} has {} words per row, expected ceil(vocab_size / 32) = {words}",
                self.words
            )));
        }
        Ok(())
    }

    pub(crate) fn check_row(&self, index: i64, what: &str) -> PyResult<usize> {
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
pub(crate) unsafe fn words_mut<'a>(ptr: usize, len: usize) -> &'a mut [u32] {
    std::slice::from_raw_parts_mut(ptr as *mut u32, len)
}

/// True when some token id below `vocab_size` is masked in `row` (the logits need the mask).
pub(crate) fn needs_apply(row: &[u32], vocab_size: usize) -> bool {
    let full = vocab_size / 32;
    if row[..full].iter().any(|&w| w != u32::MAX) {
        return true;
    }
    let rest = vocab_size % 32;
    rest != 0 && row[full] & ((1u32 << rest) - 1) != (1u32 << rest) - 1
}

/// Sets `logits[r, j]` to -inf for each row `r` of `indices` (default: every row) and each
/// token `j < vocab_size` whose bit in `bitmask[r]` is clear (`tokensieve::mask::
/// apply_token_bitmask_inplace` per row), with the GIL released. `logits`: a contiguous
/// float32 `[rows, width]` or `[width]` buffer; `vocab_size` <= width and <= 32 x words.
#[pyfunction]
#[pyo3(signature = (logits, bitmask, vocab_size, indices=None))]
pub(crate) fn apply_token_bitmask_inplace_cpu(
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
