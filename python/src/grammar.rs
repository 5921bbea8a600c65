//! `Grammar`: the grammar IR from EBNF, JSON Schema, regex or a structural tag.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use tokensieve::JsonSchemaOptions;

use crate::errors::{engine_err, json_value, InvalidJSONSchemaError, InvalidStructuralTagError};

/// A grammar (`tokensieve::Grammar`, the IR every front end produces); `str()` is its EBNF.
#[pyclass(module = "tokensieve._core", name = "Grammar", frozen)]
#[derive(Clone)]
pub(crate) struct PyGrammar {
    pub(crate) inner: tokensieve::Grammar,
}

pub(crate) fn schema_options(
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
