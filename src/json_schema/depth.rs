//! [`crate::Limits::max_schema_depth`] on the document, checked before anything else and
//! without recursion, so a schema nested 10,000 deep is an error, not a stack overflow.

use serde_json::Value;

use super::{child, JsonSchemaError};
use crate::limits::{Limit, LimitExceeded};

/// Keywords whose value is one subschema.
pub(super) const SCHEMA_KEYWORDS: &[&str] = &[
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "contentSchema",
];

/// Keywords whose value is a map of subschemas.
pub(super) const SCHEMA_MAP_KEYWORDS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
];

/// Keywords whose value is a list of subschemas.
pub(super) const SCHEMA_LIST_KEYWORDS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// Enforces [`Limits::max_schema_depth`] on the document, without recursion (so a schema
/// nested 10,000 deep is an error, not a stack overflow): the nesting of subschemas (the
/// root is depth 1; `properties/a`, `items`, `allOf/0`... one more each) must stay within
/// `max_depth`, and the JSON nesting of the whole document (constants included) within
/// `4 × max_depth + 64`. The error's [`LimitExceeded::rule`] is the JSON pointer of the
/// place found too deep.
pub(super) fn check_depth(schema: &Value, max_depth: usize) -> Result<(), JsonSchemaError> {
    let json_cap = max_depth.saturating_mul(4).saturating_add(64);
    // Every visited place: (parent index, token), to spell the pointer of an error.
    let mut places: Vec<(usize, String)> = vec![(usize::MAX, String::new())];
    let pointer = |places: &Vec<(usize, String)>, mut i: usize| {
        let mut tokens = Vec::new();
        while i != 0 && i != usize::MAX {
            tokens.push(places[i].1.clone());
            i = places[i].0;
        }
        tokens
            .iter()
            .rev()
            .fold(String::from("#"), |p, t| child(&p, t))
    };
    // (value, place, subschema depth, JSON depth, whether the value is a schema)
    let mut stack = vec![(schema, 0usize, 1usize, 1usize, true)];
    while let Some((v, at, sd, jd, is_schema)) = stack.pop() {
        if sd > max_depth || jd > json_cap {
            let actual = if sd > max_depth { sd } else { jd / 4 };
            return Err(JsonSchemaError::Limit(LimitExceeded {
                limit: Limit::SchemaDepth,
                value: max_depth as u64,
                actual: actual as u64,
                rule: None,
                pointer: Some(pointer(&places, at)),
            }));
        }
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    let kind = if !is_schema {
                        0
                    } else if SCHEMA_KEYWORDS.contains(&k.as_str()) {
                        1
                    } else if SCHEMA_MAP_KEYWORDS.contains(&k.as_str()) && x.is_object() {
                        2
                    } else if SCHEMA_LIST_KEYWORDS.contains(&k.as_str()) && x.is_array() {
                        3
                    } else {
                        0
                    };
                    match (kind, x) {
                        (1, Value::Array(list)) | (3, Value::Array(list)) => {
                            places.push((at, k.clone()));
                            let p = places.len() - 1;
                            for (i, y) in list.iter().enumerate() {
                                places.push((p, i.to_string()));
                                stack.push((y, places.len() - 1, sd + 1, jd + 2, true));
                            }
                        }
                        (1, _) => {
                            places.push((at, k.clone()));
                            stack.push((x, places.len() - 1, sd + 1, jd + 1, true));
                        }
                        (2, Value::Object(m)) => {
                            places.push((at, k.clone()));
                            let p = places.len() - 1;
                            for (name, y) in m {
                                places.push((p, name.clone()));
                                stack.push((y, places.len() - 1, sd + 1, jd + 2, true));
                            }
                        }
                        _ => {
                            places.push((at, k.clone()));
                            stack.push((x, places.len() - 1, sd, jd + 1, false));
                        }
                    }
                }
            }
            Value::Array(a) => {
                for (i, y) in a.iter().enumerate() {
                    places.push((at, i.to_string()));
                    stack.push((y, places.len() - 1, sd, jd + 1, false));
                }
            }
            _ => {}
        }
    }
    Ok(())
}
