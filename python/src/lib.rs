//! `tokensieve._core`: the Python extension of tokensieve (PyO3, abi3 for CPython >= 3.11).
//!
//! Thin by design: conversions between Python and Rust values, GIL handling, and mapping of
//! errors to Python exceptions carrying the Rust message. The XGrammar-compatible Python API
//! (`tokensieve.TokenizerInfo`, `GrammarCompiler`, `GrammarMatcher`, ...) is written in
//! Python over these classes (`python/tokensieve/*.py`); every decision about grammars,
//! vocabularies and masks is the `tokensieve` crate's.
//!
//! Bitmasks are written in place: a CPU torch tensor through its data pointer, shape and
//! dtype (no numpy view per call), a numpy array or another int32 buffer through the buffer
//! protocol; logits through the buffer protocol. The device, dtype, shape, contiguity,
//! writability and the row index are checked before the GIL is released, and every failure
//! is a Python exception.

mod batch;
mod bitmask;
mod compiler;
mod engine;
mod errors;
mod grammar;
mod matcher;
mod tools;
mod vocabulary;

use pyo3::prelude::*;

use batch::{
    batch_accept_string, batch_accept_token, batch_fill_next_token_bitmask, batch_rollback,
    PyThreadPool,
};
use bitmask::{_register_torch, apply_token_bitmask_inplace_cpu};
use compiler::{PyCompiledGrammar, PyGrammarCompiler};
use engine::{PyStructuredOutputBackend, PyStructuredOutputGrammar};
use errors::{
    InvalidJSONError, InvalidJSONSchemaError, InvalidStructuralTagError, TokensieveError,
};
use grammar::PyGrammar;
use matcher::PyGrammarMatcher;
use vocabulary::PyVocabulary;

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
    m.add_function(wrap_pyfunction!(_register_torch, m)?)?;
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
