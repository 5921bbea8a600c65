//! Rewrites of one schema object before it is built: the spellings of older drafts (draft
//! 4's boolean exclusive bounds, draft 4-2019 `items` arrays and `additionalItems`) and
//! `unevaluatedProperties` / `unevaluatedItems` where they mean `additionalProperties` /
//! `items`.

use serde_json::{Map, Value};

/// Draft 4's boolean exclusive bounds as 2020-12's numeric ones (see [`Builder::legacy`]).
pub(super) fn legacy_bounds(obj: &Map<String, Value>) -> Option<Map<String, Value>> {
    let pairs = [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ];
    if !pairs
        .iter()
        .any(|(x, _)| obj.get(*x).is_some_and(Value::is_boolean))
    {
        return None;
    }
    let mut o = obj.clone();
    for (x, base) in pairs {
        if let Some(Value::Bool(b)) = o.get(x).cloned() {
            o.remove(x);
            if b {
                if let Some(v) = o.remove(base) {
                    o.insert(x.into(), v);
                }
            }
        }
    }
    Some(o)
}

/// Draft 4-2019 arrays: `items` as an array means `prefixItems`, and `additionalItems`
/// then means `items`; beside an `items` schema (or none), `additionalItems` asserts
/// nothing. Returns the rewritten schema, or `None` when there is nothing to rewrite (or
/// `prefixItems` is present too, which is left to refuse).
pub(crate) fn legacy_items(obj: &Map<String, Value>) -> Option<Map<String, Value>> {
    let array_items = obj.get("items").is_some_and(Value::is_array);
    if !(array_items || obj.contains_key("additionalItems")) || obj.contains_key("prefixItems") {
        return None;
    }
    let mut o = obj.clone();
    let additional = o.remove("additionalItems");
    if array_items {
        if let Some(items) = o.remove("items") {
            o.insert("prefixItems".into(), items);
        }
        if let Some(a) = additional {
            o.insert("items".into(), a);
        }
    }
    Some(o)
}

/// Without in-place applicators, `unevaluatedProperties` means `additionalProperties` (and
/// nothing when that is present), and `unevaluatedItems` means `items` (nothing when `items`
/// is present). Returns the rewritten schema, or `None` when there is nothing to rewrite.
pub(super) fn unevaluated_as_additional(obj: &Map<String, Value>) -> Option<Map<String, Value>> {
    const APPLICATORS: &[&str] = &[
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "$ref",
        "$dynamicRef",
        "dependentSchemas",
        "contains",
    ];
    if !(obj.contains_key("unevaluatedProperties") || obj.contains_key("unevaluatedItems"))
        || APPLICATORS.iter().any(|k| obj.contains_key(*k))
    {
        return None;
    }
    let mut o = obj.clone();
    if let Some(u) = o.remove("unevaluatedProperties") {
        if !o.contains_key("additionalProperties") {
            o.insert("additionalProperties".into(), u);
        }
    }
    if let Some(u) = o.remove("unevaluatedItems") {
        if !o.contains_key("items") {
            o.insert("items".into(), u);
        }
    }
    Some(o)
}

/// `obj` without `unevaluatedProperties`/`unevaluatedItems`, in itself and in the
/// subschemas it applies in place (not through `$ref`): for lenient mode.
pub(super) fn strip_unevaluated(obj: &Map<String, Value>) -> Map<String, Value> {
    let strip = |v: &Value| match v {
        Value::Object(o) => Value::Object(strip_unevaluated(o)),
        other => other.clone(),
    };
    let mut o = Map::new();
    for (k, v) in obj {
        let v = match (k.as_str(), v) {
            ("unevaluatedProperties" | "unevaluatedItems", _) => continue,
            ("allOf" | "anyOf" | "oneOf", Value::Array(list)) => {
                Value::Array(list.iter().map(strip).collect())
            }
            ("if" | "then" | "else", _) => strip(v),
            ("dependentSchemas", Value::Object(m)) => {
                Value::Object(m.iter().map(|(k, s)| (k.clone(), strip(s))).collect())
            }
            _ => v.clone(),
        };
        o.insert(k.clone(), v);
    }
    o
}
