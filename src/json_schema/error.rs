//! [`JsonSchemaError`]: why a schema could not be turned into a grammar (each naming the
//! keyword's JSON pointer), and [`IgnoredKeyword`], a keyword lenient mode did not enforce.

use crate::limits::{Limit, LimitExceeded};

/// Why a JSON Schema could not be turned into a grammar. Every variant names the JSON
/// pointer (`#/properties/a/minLength`) of the offending place.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JsonSchemaError {
    /// The schema text is not JSON.
    #[error("the schema is not valid JSON: {0}")]
    NotJson(String),
    /// A keyword has a value the specification does not allow (such as `"type": "strin"`).
    #[error("invalid schema at {pointer}: `{keyword}` {message}")]
    InvalidKeyword {
        /// The keyword.
        keyword: String,
        /// Where the keyword is.
        pointer: String,
        /// What is wrong.
        message: String,
    },
    /// A keyword (or a use of one) that is not enforced: refused rather than dropped.
    #[error("unsupported keyword `{keyword}` at {pointer}: {reason}")]
    Unsupported {
        /// The keyword.
        keyword: String,
        /// Where the keyword is.
        pointer: String,
        /// Why it is refused.
        reason: String,
    },
    /// A `$ref` that names no schema of the document.
    #[error("unresolved `$ref` {reference:?} at {pointer}: define the target (under `$defs`) or correct the reference; documents outside this schema are not fetched")]
    UnresolvedRef {
        /// The reference as written.
        reference: String,
        /// Where the `$ref` is.
        pointer: String,
    },
    /// The schema (or a required part of it) accepts no instance, such as `minLength` >
    /// `maxLength`.
    #[error("unsatisfiable schema at {pointer}: {reason} (no JSON value satisfies it: correct the schema)")]
    Unsatisfiable {
        /// Where.
        pointer: String,
        /// Why.
        reason: String,
    },
    /// An option that is not supported yet.
    #[error("unsupported option `{0}`")]
    UnsupportedOption(&'static str),
    /// An option of [`super::JsonSchemaOptions`] has a value it cannot take (such as an
    /// `item_separator` without a `,`).
    #[error("invalid option `{option}`: {reason}")]
    InvalidOption {
        /// The field of [`super::JsonSchemaOptions`].
        option: &'static str,
        /// What is wrong, with the value.
        reason: String,
    },
    /// The schema exceeds one of the [`Limits`](crate::Limits) (the error names the limit, its value, the
    /// schema's value and its JSON pointer).
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
}

/// A keyword ignored in lenient mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoredKeyword {
    /// The keyword.
    pub keyword: String,
    /// Where it is.
    pub pointer: String,
    /// Why it was not enforced.
    pub reason: String,
}

/// serde_json's message, with what to do when it stopped at its nesting limit (the text
/// is valid JSON then, only deeper than the reader goes).
/// `flatten` says how to nest less (for schemas: `$defs` and `$ref`).
pub(crate) fn json_error_message(e: &serde_json::Error, flatten: &str) -> String {
    let message = e.to_string();
    if message.starts_with("recursion limit exceeded") {
        format!(
            "{message} (the text may be valid JSON, but it nests more than 128 arrays or \
             objects, deeper than serde_json reads; {flatten})"
        )
    } else {
        message
    }
}

impl JsonSchemaError {
    /// The JSON pointer the error names, if any.
    pub(super) fn pointer_mut(&mut self) -> Option<&mut String> {
        match self {
            JsonSchemaError::InvalidKeyword { pointer, .. }
            | JsonSchemaError::Unsupported { pointer, .. }
            | JsonSchemaError::UnresolvedRef { pointer, .. }
            | JsonSchemaError::Unsatisfiable { pointer, .. } => Some(pointer),
            JsonSchemaError::Limit(l) => l.pointer.as_mut(),
            _ => None,
        }
    }
}

/// A [`Limit::RepeatBound`] error (bound `value`, the input's `actual`) at `pointer`, the
/// count keyword (`#/properties/a/maxLength`) whose repetition it is.
pub(crate) fn repeat_limit_error(value: u64, actual: u64, pointer: &str) -> JsonSchemaError {
    JsonSchemaError::Limit(LimitExceeded {
        limit: Limit::RepeatBound,
        value,
        actual,
        rule: None,
        pointer: Some(pointer.to_string()),
    })
}

/// A [`Limit`] error with no rule (or place) to blame.
pub(crate) fn limit_error(
    limit: Limit,
    value: usize,
    actual: usize,
    pointer: &str,
) -> JsonSchemaError {
    JsonSchemaError::Limit(LimitExceeded {
        limit,
        value: value as u64,
        actual: actual as u64,
        rule: None,
        pointer: Some(pointer.to_string()),
    })
}
