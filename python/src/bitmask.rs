//! Bitmask and logits buffers written in place: the checks made before the GIL is released.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};

use crate::errors::engine_err;

/// torch's `Tensor` type and the dtypes the extension reads in place, given once by the
/// Python package when torch imports (`_register_torch`); without it every bitmask and
/// logits array goes through the buffer protocol.
struct Torch {
    tensor: Py<PyType>,
    int32: Py<PyAny>,
    float32: Py<PyAny>,
    float16: Py<PyAny>,
    bfloat16: Py<PyAny>,
}

static TORCH: PyOnceLock<Torch> = PyOnceLock::new();

/// Tells the extension torch's `Tensor` type and its `int32`, `float32`, `float16` and
/// `bfloat16` dtypes, so that bitmask and logits calls take a CPU tensor's memory directly
/// (its data pointer, shape and dtype) instead of a numpy view built per call. Called by
/// `tokensieve.matcher` at import; later calls are ignored.
#[pyfunction]
pub(crate) fn _register_torch(
    py: Python<'_>,
    tensor: Bound<'_, PyType>,
    int32: Bound<'_, PyAny>,
    float32: Bound<'_, PyAny>,
    float16: Bound<'_, PyAny>,
    bfloat16: Bound<'_, PyAny>,
) {
    let _ = TORCH.set(
        py,
        Torch {
            tensor: tensor.unbind(),
            int32: int32.unbind(),
            float32: float32.unbind(),
            float16: float16.unbind(),
            bfloat16: bfloat16.unbind(),
        },
    );
}

/// True when `obj` is a torch tensor (exactly, or a subclass: `Parameter`, ...).
fn is_tensor(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = obj.py();
    match TORCH.get(py) {
        Some(t) => {
            let ty = t.tensor.bind(py);
            Ok(obj.get_type().is(ty) || obj.is_instance(ty)?)
        }
        None => Ok(false),
    }
}

/// The memory of a CPU tensor: `(data_ptr, rows, columns)` of a 1-D (one row) or 2-D tensor,
/// after the device check, `dtype_ok` (which names the dtypes it takes in its error), the
/// contiguity and shape checks and the alignment to `align` bytes. `data_ptr()` counts the
/// storage offset. Five attribute reads: about 3,900 instructions.
fn cpu_tensor(
    t: &Bound<'_, PyAny>,
    what: &str,
    align: usize,
    dtype_ok: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<()>,
) -> PyResult<(usize, usize, usize)> {
    let py = t.py();
    if !t.getattr(intern!(py, "is_cpu"))?.is_truthy()? {
        let device = t.getattr(intern!(py, "device"))?;
        return Err(PyValueError::new_err(format!(
            "{what} must be on CPU, got a tensor on {device}"
        )));
    }
    dtype_ok(&t.getattr(intern!(py, "dtype"))?)?;
    if !t.call_method0(intern!(py, "is_contiguous"))?.is_truthy()? {
        return Err(PyValueError::new_err(format!(
            "{what} must be contiguous (row-major); call .contiguous()"
        )));
    }
    // torch.Size is a tuple: read its items (a Vec extraction costs twice as much).
    let shape = t.getattr(intern!(py, "shape"))?;
    let shape = shape.cast::<PyTuple>()?;
    let (rows, cols) = match shape.len() {
        1 => (1, shape.get_item(0)?.extract()?),
        2 => (shape.get_item(0)?.extract()?, shape.get_item(1)?.extract()?),
        _ => rows_words(&shape.extract::<Vec<usize>>()?, what)?,
    };
    let ptr: usize = t.call_method0(intern!(py, "data_ptr"))?.extract()?;
    if ptr % align != 0 {
        return Err(PyValueError::new_err(format!(
            "{what}'s data is not aligned to {align} bytes"
        )));
    }
    Ok((ptr, rows, cols))
}

/// A writable, C-contiguous buffer of 32-bit ints seen as `[rows, words]` (a 1-D buffer is
/// one row): a CPU torch tensor, or any object with the buffer protocol (numpy arrays,
/// `array.array("i")`, memoryviews).
pub(crate) struct Rows {
    /// The buffer view of a buffer-protocol object, held until the call returns (a tensor is
    /// kept alive by the caller's reference).
    _buf: Option<PyBuffer<i32>>,
    pub(crate) ptr: usize,
    pub(crate) rows: usize,
    pub(crate) words: usize,
}

impl Rows {
    /// Checks `obj` (named `what` in errors) and reads its address and shape. Runs on every
    /// fill: an exact `torch.Tensor` costs five attribute reads (about 3,900 instructions,
    /// most of the binding's cost per call), a numpy array one buffer request (about 500).
    /// Nothing is cached, so a tensor resized in place is seen at its new size.
    ///
    /// # Errors
    /// TypeError for a wrong dtype or an object that is neither a tensor nor an int32
    /// buffer; ValueError for a tensor off the CPU, a read-only or non-contiguous buffer, or
    /// one of more than 2 dimensions.
    pub(crate) fn new(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Self> {
        let py = obj.py();
        let torch = TORCH.get(py);
        if let Some(t) = torch {
            if obj.get_type().is(t.tensor.bind(py)) {
                return Self::from_tensor(obj, what, t.int32.bind(py));
            }
        }
        let buf = match PyBuffer::<i32>::get(obj) {
            Ok(buf) => buf,
            Err(e) => {
                // Subclasses of Tensor (Parameter, ...) have no buffer protocol either.
                if let Some(t) = torch {
                    if obj.is_instance(t.tensor.bind(py))? {
                        return Self::from_tensor(obj, what, t.int32.bind(py));
                    }
                }
                return Err(not_a_buffer(obj, what, e));
            }
        };
        if buf.readonly() {
            return Err(PyValueError::new_err(format!("{what} is read-only")));
        }
        if !buf.is_c_contiguous() {
            return Err(PyValueError::new_err(format!(
                "{what} must be contiguous (row-major); call .contiguous() or np.ascontiguousarray"
            )));
        }
        let (rows, words) = rows_words(buf.shape(), what)?;
        Ok(Self {
            ptr: buf.buf_ptr() as usize,
            _buf: Some(buf),
            rows,
            words,
        })
    }

    /// A CPU int32 tensor's memory (`cpu_tensor`).
    fn from_tensor(t: &Bound<'_, PyAny>, what: &str, int32: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (ptr, rows, words) = cpu_tensor(t, what, std::mem::align_of::<u32>(), |dtype| {
            if dtype.is(int32) {
                Ok(())
            } else {
                Err(PyTypeError::new_err(format!(
                    "{what} must have dtype torch.int32, got {dtype}"
                )))
            }
        })?;
        Ok(Self {
            _buf: None,
            ptr,
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

/// `(rows, words)` of a 1-D (one row) or 2-D shape.
fn rows_words(shape: &[usize], what: &str) -> PyResult<(usize, usize)> {
    match *shape {
        [w] => Ok((1, w)),
        [r, w] => Ok((r, w)),
        ref s => Err(PyValueError::new_err(format!(
            "{what} must have 1 or 2 dimensions, got shape {s:?}"
        ))),
    }
}

/// The TypeError for an object that gave no int32 buffer (`err`: why): a numpy array of
/// another dtype, or something that is not an array at all.
fn not_a_buffer(obj: &Bound<'_, PyAny>, what: &str, err: PyErr) -> PyErr {
    let py = obj.py();
    if obj
        .hasattr(intern!(py, "__array_interface__"))
        .unwrap_or(false)
    {
        return PyTypeError::new_err(format!("{what} must be an int32 array or tensor ({err})"));
    }
    let ty = obj
        .get_type()
        .repr()
        .map_or_else(|_| "?".to_string(), |r| r.to_string());
    PyTypeError::new_err(format!(
        "{what} must be a torch.Tensor or a numpy.ndarray (or another writable int32 buffer), not {ty} ({err})"
    ))
}

/// The whole buffer as words. Safety: `ptr` is the start of a live, writable, C-contiguous
/// buffer of `len` 32-bit ints that nothing else accesses during the call (the buffer view
/// held by [`Rows`], or the caller's reference to a tensor, keeps it alive; its owner is a
/// Python object whose other users wait for the call, as with any in-place numpy/torch
/// operation: a tensor must not be resized or given new storage by another thread while a
/// fill writes into it).
pub(crate) unsafe fn words_mut<'a>(ptr: usize, len: usize) -> &'a mut [u32] {
    if len == 0 {
        // An empty tensor's data pointer may be null, which no slice may hold.
        return &mut [];
    }
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

/// The element type of logits masked in place, with the bits of its negative infinity.
#[derive(Clone, Copy)]
enum LogitsType {
    F32,
    /// IEEE half precision (`torch.float16`): -inf is `0xFC00`.
    F16,
    /// `torch.bfloat16`: -inf is `0xFF80`.
    BF16,
}

/// Logits written in place: a contiguous `[rows, width]` (or `[width]`) float32 buffer
/// (numpy arrays, anything with the buffer protocol), or a CPU torch tensor of float32,
/// float16 or bfloat16 taken through its data pointer.
struct Logits {
    /// The buffer view of a buffer-protocol object, held until the call returns.
    _buf: Option<PyBuffer<f32>>,
    ptr: usize,
    rows: usize,
    width: usize,
    ty: LogitsType,
}

impl Logits {
    /// # Errors
    /// TypeError for another dtype or an object that is neither a tensor nor a float32
    /// buffer; ValueError for a tensor off the CPU, a read-only or non-contiguous buffer, or
    /// one of more than 2 dimensions.
    fn new(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        if let (Some(t), true) = (TORCH.get(py), is_tensor(obj)?) {
            let mut ty = LogitsType::F32;
            let (ptr, rows, width) = cpu_tensor(obj, "logits", 2, |dtype| {
                ty = if dtype.is(t.float32.bind(py)) {
                    LogitsType::F32
                } else if dtype.is(t.float16.bind(py)) {
                    LogitsType::F16
                } else if dtype.is(t.bfloat16.bind(py)) {
                    LogitsType::BF16
                } else {
                    return Err(PyTypeError::new_err(format!(
                        "logits must have dtype torch.float32, torch.float16 or torch.bfloat16, got {dtype}"
                    )));
                };
                Ok(())
            })?;
            if matches!(ty, LogitsType::F32) && ptr % std::mem::align_of::<f32>() != 0 {
                return Err(PyValueError::new_err(
                    "logits' data is not aligned to 4 bytes",
                ));
            }
            return Ok(Self {
                _buf: None,
                ptr,
                rows,
                width,
                ty,
            });
        }
        let buf = PyBuffer::<f32>::get(obj).map_err(|e| {
            PyTypeError::new_err(format!("logits must be a float32 array or tensor ({e})"))
        })?;
        if buf.readonly() || !buf.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "logits must be writable and contiguous",
            ));
        }
        let (rows, width) = match *buf.shape() {
            [w] => (1, w),
            [r, w] => (r, w),
            ref s => {
                return Err(PyValueError::new_err(format!(
                    "logits must have 1 or 2 dimensions, got shape {s:?}"
                )))
            }
        };
        Ok(Self {
            ptr: buf.buf_ptr() as usize,
            _buf: Some(buf),
            rows,
            width,
            ty: LogitsType::F32,
        })
    }
}

/// The logits as `len` elements of `T`. Safety: as [`words_mut`], for a buffer of `len`
/// elements of `T` aligned for `T`.
unsafe fn logits_mut<'a, T>(ptr: usize, len: usize) -> &'a mut [T] {
    if len == 0 {
        // An empty tensor's data pointer may be null, which no slice may hold.
        return &mut [];
    }
    std::slice::from_raw_parts_mut(ptr as *mut T, len)
}

/// Masks the first `vocab_size` logits of each row `r` of `rows` (rows of `width` in
/// `logits`) with row `r` of `bitmask` (rows of `words`), writing `neg_inf`.
fn mask_rows<T: Copy>(
    logits: &mut [T],
    width: usize,
    vocab_size: usize,
    bitmask: &[u32],
    words: usize,
    rows: &[usize],
    neg_inf: T,
) -> Result<(), tokensieve::mask::BitmaskError> {
    for &r in rows {
        tokensieve::mask::apply_token_bitmask_inplace_with(
            &mut logits[r * width..r * width + vocab_size],
            &bitmask[r * words..(r + 1) * words],
            neg_inf,
        )?;
    }
    Ok(())
}

/// Sets `logits[r, j]` to -inf for each row `r` of `indices` (default: every row) and each
/// token `j < vocab_size` whose bit in `bitmask[r]` is clear (`tokensieve::mask::
/// apply_token_bitmask_inplace_with` per row), with the GIL released. `logits`: a
/// contiguous `[rows, width]` or `[width]` CPU buffer, float32 (numpy arrays, torch tensors)
/// or float16/bfloat16 (torch tensors); `vocab_size` <= width and <= 32 x words.
#[pyfunction]
#[pyo3(signature = (logits, bitmask, vocab_size, indices=None))]
pub(crate) fn apply_token_bitmask_inplace_cpu(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    vocab_size: usize,
    indices: Option<Vec<i64>>,
) -> PyResult<()> {
    let lg = Logits::new(logits)?;
    let (lrows, width) = (lg.rows, lg.width);
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
    let (lptr, ty, bptr, words) = (lg.ptr, lg.ty, rows.ptr, rows.words);
    let total_b = rows.rows * words;
    py.detach(move || {
        // SAFETY: both buffers are checked above and held until the call returns (`lg`,
        // `rows`, or the caller's references to the tensors); `Logits::new` checked the
        // alignment of the element type; the rows of `idx` are below both row counts.
        let b = unsafe { words_mut(bptr, total_b) };
        let n = lrows * width;
        match ty {
            LogitsType::F32 => {
                let l = unsafe { logits_mut::<f32>(lptr, n) };
                mask_rows(l, width, vocab_size, b, words, &idx, f32::NEG_INFINITY)
            }
            LogitsType::F16 => {
                let l = unsafe { logits_mut::<u16>(lptr, n) };
                mask_rows(l, width, vocab_size, b, words, &idx, 0xFC00)
            }
            LogitsType::BF16 => {
                let l = unsafe { logits_mut::<u16>(lptr, n) };
                mask_rows(l, width, vocab_size, b, words, &idx, 0xFF80)
            }
        }
    })
    .map_err(engine_err)?;
    drop(lg);
    Ok(())
}
