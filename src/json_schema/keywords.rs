//! The shape of every keyword's value, checked on the whole document before anything is
//! compiled: a malformed value (`"minItems": "x"`, `"maxLength": -1`, `"required": true`)
//! is a [`JsonSchemaError::InvalidKeyword`] with its JSON pointer wherever it is written,
//! also where the instance type it constrains does not apply (`minItems` beside
//! `"type": "string"`), in `$defs` that nothing references, and under `not`, `if` or
//! `contentSchema`. The checks follow the meta-schemas of 2020-12 (Validation §6,
//! Core §10) and of the older drafts the front end reads (draft 4's boolean
//! `exclusiveMinimum`/`exclusiveMaximum`, draft 4-2019 `items` arrays, draft 4-7
//! `dependencies`, draft 3's `divisibleBy`). What they leave to the front end: whether a
//! `pattern` is a regex it reads, whether a `format` is one it knows, limits, and
//! `$id`/`$anchor`/`$defs` (checked by `resources::check_identifiers`).
//!
//! Not checked: keywords no draft defines (with
//! [`super::JsonSchemaOptions::ignore_unknown_keywords`] they are ignored as before, and
//! nothing inside them is a subschema), annotations, the values of `const`/`enum`, and,
//! under a draft 3-7 `$schema`, the siblings of `$ref` (which those drafts ignore; their
//! subschemas are still checked, since a `$ref` may point into them).

use serde_json::{Map, Value};

use super::{child, types, JsonSchemaError};

/// What a keyword's value must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// One subschema (an object or a boolean).
    Schema,
    /// `items`: a subschema, or (draft 4-2019) an array of them.
    SchemaOrList,
    /// `allOf`, `anyOf`, `oneOf`: a non-empty array of subschemas (Core §10.2.1).
    NonEmptyList,
    /// `prefixItems`, draft 3 `extends` (as an array): an array of subschemas.
    List,
    /// `properties`, `patternProperties`, `dependentSchemas`: an object of subschemas.
    Map,
    /// `$defs`, `definitions`: their shape is checked by `resources::check_identifiers`;
    /// entries that are schemas are walked.
    Definitions,
    /// `dependentRequired`: an object of arrays of strings.
    RequiredMap,
    /// Draft 4-7 `dependencies`: an object of subschemas or arrays of strings (draft 3:
    /// or one string).
    Dependencies,
    /// A non-negative integer (`minLength`, `maxItems`...; `2.0` counts as `2`).
    Count,
    /// A number (`minimum`, `maximum`).
    Number,
    /// `exclusiveMinimum`/`exclusiveMaximum`: a number, or (draft 4) a boolean.
    ExclusiveBound,
    /// `multipleOf`, `divisibleBy`: a number above 0.
    Positive,
    /// `uniqueItems`: a boolean.
    Boolean,
    /// `pattern`, `format`, `$ref`: a string.
    String,
    /// `enum`: an array.
    Array,
    /// `required`: an array of strings (draft 3: a boolean inside a property's schema).
    Required,
    /// `type`: a type name or an array of them.
    Type,
}

/// The shape of the value of keyword `k`, for the keywords the front end reads.
fn shape(k: &str) -> Option<Shape> {
    Some(match k {
        "additionalProperties"
        | "additionalItems"
        | "unevaluatedProperties"
        | "unevaluatedItems"
        | "not"
        | "if"
        | "then"
        | "else"
        | "contains"
        | "propertyNames"
        | "contentSchema" => Shape::Schema,
        "items" | "extends" => Shape::SchemaOrList,
        "allOf" | "anyOf" | "oneOf" => Shape::NonEmptyList,
        "prefixItems" => Shape::List,
        "properties" | "patternProperties" | "dependentSchemas" => Shape::Map,
        "$defs" | "definitions" => Shape::Definitions,
        "dependentRequired" => Shape::RequiredMap,
        "dependencies" => Shape::Dependencies,
        "minLength" | "maxLength" | "minItems" | "maxItems" | "minContains" | "maxContains"
        | "minProperties" | "maxProperties" => Shape::Count,
        "minimum" | "maximum" => Shape::Number,
        "exclusiveMinimum" | "exclusiveMaximum" => Shape::ExclusiveBound,
        "multipleOf" | "divisibleBy" => Shape::Positive,
        "uniqueItems" => Shape::Boolean,
        "pattern" | "format" | "$ref" => Shape::String,
        "enum" => Shape::Array,
        "required" => Shape::Required,
        "type" => Shape::Type,
        _ => return None,
    })
}

/// Whether `v` is a schema (an object or a boolean).
fn is_schema(v: &Value) -> bool {
    v.is_object() || v.is_boolean()
}

/// Checks the value of every keyword of `root`, a document whose places are spelled
/// `{base}/...` (`#` for the root document, `<uri>#` for another one), against its
/// draft: `draft` is the `$schema` in force (the document's own, else the root's).
///
/// # Errors
/// [`JsonSchemaError::InvalidKeyword`] for the first malformed value in document order,
/// naming the keyword and the pointer of the value (of the entry, for a malformed entry of
/// a list or map); [`JsonSchemaError::Unsupported`] for draft 3's boolean `required` under
/// a draft 3 `$schema` (valid there, but not read).
pub(crate) fn check_keyword_values(
    root: &Value,
    base: &str,
    draft: &str,
) -> Result<(), JsonSchemaError> {
    let draft = root.get("$schema").and_then(Value::as_str).unwrap_or(draft);
    let draft3 = draft.contains("draft-03");
    let ref_alone = ["draft-03", "draft-04", "draft-06", "draft-07"]
        .iter()
        .any(|d| draft.contains(d));
    // (schema, its place, the property it is the schema of), in document order.
    let mut stack: Vec<(&Value, String, Option<&str>)> = vec![(root, base.to_string(), None)];
    while let Some((node, loc, property)) = stack.pop() {
        let Value::Object(o) = node else { continue };
        // Drafts 3-7 ignore the siblings of `$ref`: only their subschemas are walked.
        let check = !(ref_alone && o.contains_key("$ref"));
        let mut next = Vec::new();
        for (k, v) in o {
            let Some(s) = shape(k) else { continue };
            let at = child(&loc, k);
            if check || k == "$ref" {
                check_value(o, k, v, s, &loc, property, draft3)?;
            }
            match (s, v) {
                (Shape::Schema | Shape::SchemaOrList, x) if is_schema(x) => {
                    next.push((x, at, None));
                }
                (Shape::SchemaOrList | Shape::NonEmptyList | Shape::List, Value::Array(a)) => {
                    for (i, x) in a.iter().enumerate() {
                        next.push((x, child(&at, &i.to_string()), None));
                    }
                }
                (Shape::Map | Shape::Definitions | Shape::Dependencies, Value::Object(m)) => {
                    let props = k == "properties";
                    for (name, x) in m {
                        if is_schema(x) {
                            next.push((x, child(&at, name), props.then_some(name.as_str())));
                        }
                    }
                }
                _ => {}
            }
        }
        stack.extend(next.into_iter().rev());
    }
    Ok(())
}

/// Checks the value `v` of keyword `k` (of shape `s`) of the schema `o` at `loc`, which
/// is the schema of the property `property` if any.
fn check_value(
    o: &Map<String, Value>,
    k: &str,
    v: &Value,
    s: Shape,
    loc: &str,
    property: Option<&str>,
    draft3: bool,
) -> Result<(), JsonSchemaError> {
    let at = child(loc, k);
    let invalid = |pointer: &str, message: String| JsonSchemaError::InvalidKeyword {
        keyword: k.into(),
        pointer: pointer.into(),
        message,
    };
    let not_schema = |x: &Value, what: &str| {
        format!("{what} must be a schema (an object or a boolean), not {x}")
    };
    let entries = |list: &[Value]| -> Result<(), JsonSchemaError> {
        match list.iter().position(|x| !is_schema(x)) {
            Some(i) => Err(invalid(
                &child(&at, &i.to_string()),
                not_schema(&list[i], &format!("entry {i}")),
            )),
            None => Ok(()),
        }
    };
    let strings = |x: &Value| x.as_array().is_some_and(|l| l.iter().all(Value::is_string));
    match s {
        Shape::Schema if !is_schema(v) => Err(invalid(&at, not_schema(v, "the value"))),
        Shape::SchemaOrList => match v {
            Value::Array(a) => entries(a),
            x if is_schema(x) => Ok(()),
            x => Err(invalid(
                &at,
                format!(
                    "must be a schema (an object or a boolean) or an array of schemas, not {x}"
                ),
            )),
        },
        Shape::NonEmptyList | Shape::List => match v {
            Value::Array(a) if a.is_empty() && s == Shape::NonEmptyList => Err(invalid(
                &at,
                "must be a non-empty array of schemas, not []".into(),
            )),
            Value::Array(a) => entries(a),
            x => Err(invalid(
                &at,
                format!("must be an array of schemas, not {x}"),
            )),
        },
        Shape::Map | Shape::Dependencies | Shape::RequiredMap => {
            let Value::Object(m) = v else {
                let what = match s {
                    Shape::Map => "schemas",
                    Shape::RequiredMap => "arrays of property names",
                    _ => "schemas or arrays of property names",
                };
                return Err(invalid(
                    &at,
                    format!("must be an object of {what} by name, not {v}"),
                ));
            };
            for (name, x) in m {
                let ok = match s {
                    Shape::Map => is_schema(x),
                    Shape::RequiredMap => strings(x),
                    _ => is_schema(x) || strings(x) || x.is_string(),
                };
                if !ok {
                    let what = match s {
                        Shape::Map => "a schema (an object or a boolean)",
                        Shape::RequiredMap => "an array of property names (strings)",
                        _ => "a schema (an object or a boolean) or an array of property names",
                    };
                    return Err(invalid(
                        &child(&at, name),
                        format!("entry {name:?} must be {what}, not {x}"),
                    ));
                }
            }
            Ok(())
        }
        Shape::Count => {
            let n =
                v.as_u64().is_some() || v.as_f64().is_some_and(|f| f >= 0.0 && f.fract() == 0.0);
            if n {
                Ok(())
            } else {
                Err(invalid(
                    &at,
                    format!("must be a non-negative integer, not {v}"),
                ))
            }
        }
        Shape::Number if !v.is_number() => Err(invalid(&at, format!("must be a number, not {v}"))),
        Shape::ExclusiveBound if !(v.is_number() || v.is_boolean()) => Err(invalid(
            &at,
            format!("must be a number (or, in draft 4, a boolean), not {v}"),
        )),
        Shape::Positive if !v.as_f64().is_some_and(|f| f > 0.0) => {
            Err(invalid(&at, format!("must be a number above 0, not {v}")))
        }
        Shape::Boolean if !v.is_boolean() => {
            Err(invalid(&at, format!("must be a boolean, not {v}")))
        }
        Shape::String if !v.is_string() => Err(invalid(&at, format!("must be a string, not {v}"))),
        Shape::Array if !v.is_array() => Err(invalid(&at, format!("must be an array, not {v}"))),
        Shape::Required => match v {
            x if strings(x) => Ok(()),
            Value::Bool(b) => Err(draft3_required(*b, &at, loc, property, draft3)),
            x => Err(invalid(
                &at,
                format!("must be an array of property names (strings), not {x}"),
            )),
        },
        Shape::Type => types::parse_types(o, loc).map(|_| ()),
        _ => Ok(()),
    }
}

/// The error for a boolean `required` at `at` (in the schema at `loc`, of the property
/// `property` if any): draft 3's form, which draft 4 replaced by a list of names in the
/// parent object (2020-12 Validation §6.5.3).
fn draft3_required(
    b: bool,
    at: &str,
    loc: &str,
    property: Option<&str>,
    draft3: bool,
) -> JsonSchemaError {
    let parent = loc
        .rsplit_once('/')
        .and_then(|(p, _)| p.strip_suffix("/properties"))
        .filter(|_| property.is_some());
    let how = match (b, property, parent) {
        (true, Some(name), Some(parent)) => format!(
            "list the name in the object's `required` instead: \"required\": [{name:?}] in \
             the schema at {parent}, beside its `properties`, and remove it here"
        ),
        (true, _, _) => "list the names in the object's `required` instead: \
                         \"required\": [\"name\", ...] beside `properties`, in the schema \
                         whose `properties` holds this one, and remove it here"
            .to_string(),
        (false, _, _) => "`false` asserts nothing: remove it".to_string(),
    };
    let form = format!(
        "`\"required\": {b}` inside a property's schema is draft 3's form; from draft 4 on \
         (2020-12 Validation §6.5.3) `required` is an array of property names written in \
         the object's schema: {how}"
    );
    if draft3 {
        JsonSchemaError::Unsupported {
            keyword: "required".into(),
            pointer: at.into(),
            reason: format!("{form} (draft 3 is not read beyond what later drafts share)"),
        }
    } else {
        JsonSchemaError::InvalidKeyword {
            keyword: "required".into(),
            pointer: at.into(),
            message: format!("must be an array of property names, not {b}: {form}"),
        }
    }
}

/// Keywords that never constrain an instance (ignored everywhere; `$id` only at the root).
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "$comment",
    "$schema",
    "readOnly",
    "writeOnly",
    "deprecated",
    // Annotation-only in draft 2020-12 (the content vocabulary asserts nothing).
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    // Containers of subschemas reached only through `$ref`.
    "$defs",
    "definitions",
];

/// Every keyword with a meaning in some JSON Schema draft (3 to 2020-12): never ignored as
/// "unknown".
pub(crate) const KNOWN_KEYWORDS: &[&str] = &[
    "$ref",
    "$defs",
    "definitions",
    "$id",
    "id",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
    "$vocabulary",
    "type",
    "enum",
    "const",
    "multipleOf",
    "divisibleBy",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "additionalItems",
    "items",
    "prefixItems",
    "maxItems",
    "minItems",
    "uniqueItems",
    "contains",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "additionalProperties",
    "properties",
    "patternProperties",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "propertyNames",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "format",
    "disallow",
    "extends",
    "optional",
    "requires",
];

/// Whether `k` is an annotation (or `$id` at the root pointer `ptr`).
pub(crate) fn is_annotation(k: &str, ptr: &str) -> bool {
    // Identifiers and anchors only name places, which references resolve through.
    let _ = ptr;
    ANNOTATIONS.contains(&k) || matches!(k, "$id" | "$anchor" | "$dynamicAnchor")
}

/// Whether keyword `k` of `obj` is an identifier (`$id`, or draft 4's `id`, a string) that
/// changes nothing here: it only sets the base URI of references, and `obj` holds no
/// `$ref` at any depth (references into it from outside are refused when they cross it).
/// Two forms of `id` never change a base URI, whatever `obj` holds: outside draft 4
/// (`draft4` false; drafts 6 on renamed it `$id`, so `id` is no keyword there and
/// references resolve as if it were absent, see [`resources::Resources`]) and, in draft 4,
/// a fragment (`"id": "#/definitions/service"`, `"#name"`): RFC 3986 resolves it to the
/// same document, so it only names a place.
pub(crate) fn harmless_id(obj: &Map<String, Value>, k: &str, draft4: bool) -> bool {
    if k == "id"
        && obj
            .get(k)
            .and_then(Value::as_str)
            .is_some_and(|s| !draft4 || s.starts_with('#'))
    {
        return true;
    }
    pub(super) fn has_ref(v: &Value) -> bool {
        match v {
            Value::Object(o) => o.contains_key("$ref") || o.values().any(has_ref),
            Value::Array(a) => a.iter().any(has_ref),
            _ => false,
        }
    }
    (k == "$id" || k == "id")
        && obj.get(k).is_some_and(Value::is_string)
        && !obj.values().any(has_ref)
        && !obj.contains_key("$ref")
}
