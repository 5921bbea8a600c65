//! The Python exceptions of `tokensieve._core` and the mapping of engine errors onto them:
//! every error carries the Rust message.

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyType;

use tokensieve::DeserializeError;

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

pub(crate) fn engine_err(e: impl std::fmt::Display) -> PyErr {
    TokensieveError::new_err(e.to_string())
}

pub(crate) fn json_value(text: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| InvalidJSONError::new_err(format!("invalid JSON: {e}")))
}

/// A [`DeserializeError`] as `tokensieve.exception.DeserializeVersionError` (a format version
/// this tokensieve does not read, newer or older) or `DeserializeFormatError` (anything else), both `ValueError`s; a plain
/// `ValueError` if the Python package's exception module cannot be imported.
pub(crate) fn deserialize_err(py: Python<'_>, e: DeserializeError) -> PyErr {
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
