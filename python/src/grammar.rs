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

/// The regex dialect of XGrammar's `Grammar.from_regex` and `compile_regex` (its regex
/// converter, checked on 0.2.9): `\d`, `\w`, `\s` are ECMAScript's classes (`[0-9]`,
/// `[a-zA-Z0-9_]`, ECMAScript white space) and `.` is any code point, `\n` included. The
/// Rust API's default stays the `regex` crate's (Unicode classes, `.` without `\n`).
pub(crate) fn xgrammar_regex() -> tokensieve::RegexOptions {
    tokensieve::RegexOptions::new()
        .ecmascript_classes(true)
        .dot_matches_new_line(true)
}

/// XGrammar's `max_whitespace_cnt`: None (no limit) or a positive count; anything else is a
/// ValueError saying so (not pyo3's OverflowError for a negative int).
pub(crate) fn whitespace_count(max_whitespace_cnt: Option<i64>) -> PyResult<Option<u32>> {
    match max_whitespace_cnt {
        None => Ok(None),
        Some(n) if (1..=i64::from(u32::MAX)).contains(&n) => Ok(Some(n as u32)),
        Some(n) => Err(PyValueError::new_err(format!(
            "max_whitespace_cnt must be a positive integer below 2**32 (or None for no limit), \
             not {n}"
        ))),
    }
}

pub(crate) fn schema_options(
    any_whitespace: bool,
    max_whitespace_cnt: Option<i64>,
    strict_mode: bool,
    any_order: bool,
) -> PyResult<JsonSchemaOptions> {
    Ok(JsonSchemaOptions {
        any_whitespace,
        max_whitespace: whitespace_count(max_whitespace_cnt)?,
        strict: strict_mode,
        any_order,
        ..JsonSchemaOptions::default()
    })
}

/// XGrammar 0.2.9's layout of JSON Schema output on `opts`: no whitespace before or after
/// the root value, and `separators` (item, key), or XGrammar's defaults: `(",", ":")` with
/// `any_whitespace`, `(", ", ": ")` without. `indent` is ignored with `any_whitespace` (as
/// XGrammar ignores it) and refused without it (ValueError: not supported yet).
pub(crate) fn xgrammar_layout(
    opts: &mut JsonSchemaOptions,
    indent: Option<i64>,
    separators: Option<(String, String)>,
) -> PyResult<()> {
    if indent.is_some() && !opts.any_whitespace {
        return Err(PyValueError::new_err(
            "tokensieve does not support indent with any_whitespace=False yet: use \
             separators for one-line output, or any_whitespace=True",
        ));
    }
    opts.root_whitespace = false;
    let (item, key) = separators.unwrap_or_else(|| {
        if opts.any_whitespace {
            (",".into(), ":".into())
        } else {
            (", ".into(), ": ".into())
        }
    });
    opts.item_separator = item;
    opts.key_separator = key;
    opts.check_separators()
        .map_err(|e| PyValueError::new_err(format!("separators: {e}")))
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

    /// The grammar of a JSON Schema (JSON text), laid out as XGrammar writes it
    /// ([`xgrammar_layout`]).
    #[staticmethod]
    #[pyo3(signature = (schema, any_whitespace=true, max_whitespace_cnt=None, strict_mode=true, any_order=false, indent=None, separators=None))]
    fn from_json_schema(
        schema: &str,
        any_whitespace: bool,
        max_whitespace_cnt: Option<i64>,
        strict_mode: bool,
        any_order: bool,
        indent: Option<i64>,
        separators: Option<(String, String)>,
    ) -> PyResult<Self> {
        let value = json_value(schema)?;
        let mut opts = schema_options(any_whitespace, max_whitespace_cnt, strict_mode, any_order)?;
        xgrammar_layout(&mut opts, indent, separators)?;
        tokensieve::json_schema_to_grammar(&value, &opts)
            .map(|inner| Self { inner })
            .map_err(|e| InvalidJSONSchemaError::new_err(e.to_string()))
    }

    /// The grammar of a regular expression, in XGrammar's dialect ([`xgrammar_regex`]).
    #[staticmethod]
    fn from_regex(regex: &str) -> PyResult<Self> {
        tokensieve::regex::regex_to_grammar(regex, &xgrammar_regex())
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

    /// XGrammar's built-in JSON grammar: an object or an array, no whitespace around it.
    #[staticmethod]
    fn builtin_json_grammar() -> Self {
        Self {
            inner: tokensieve::grammar::json_object_or_array_grammar(),
        }
    }

    /// A grammar matching what any one of `grammars` matches (`Grammar::union`: rules
    /// renamed apart, root `root_1 | root_2 | …`).
    #[staticmethod]
    fn union(grammars: Vec<PyGrammar>) -> Self {
        let gs: Vec<tokensieve::Grammar> = grammars.into_iter().map(|g| g.inner).collect();
        Self {
            inner: tokensieve::Grammar::union(&gs),
        }
    }

    /// A grammar matching one match of each of `grammars` in order (`Grammar::concat`).
    #[staticmethod]
    fn concat(grammars: Vec<PyGrammar>) -> Self {
        let gs: Vec<tokensieve::Grammar> = grammars.into_iter().map(|g| g.inner).collect();
        Self {
            inner: tokensieve::Grammar::concat(&gs),
        }
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }
}
