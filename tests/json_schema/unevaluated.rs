//! `unevaluatedProperties` / `unevaluatedItems` beside in-place applicators (`allOf`,
//! `anyOf`, `oneOf`, `$ref`, `if`/`then`/`else`, `dependentSchemas`), on the byte
//! vocabulary: what they accept and reject, and what stays refused (with the keyword and its
//! JSON pointer).

use crate::common;

use common::{byte_check, byte_compiler};
use serde_json::{json, Value};
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::JsonSchemaError;

fn opts() -> JsonSchemaOptions {
    JsonSchemaOptions {
        any_order: true,
        ..Default::default()
    }
}

fn check(schema: Value, good: &[&str], bad: &[&str]) {
    byte_check(&schema, &opts(), good, bad)
}

fn refused(schema: Value) -> (String, String) {
    match byte_compiler().compile_json_schema(&schema, &opts()) {
        Err(tokensieve::CompileError::JsonSchema(JsonSchemaError::Unsupported {
            keyword,
            pointer,
            ..
        })) => (keyword, pointer),
        Err(e) => panic!("{schema}: expected Unsupported, got {e}"),
        Ok(_) => panic!("{schema}: expected Unsupported, it compiled"),
    }
}

#[test]
fn properties_of_all_of_and_ref_are_evaluated() {
    check(
        json!({"properties": {"foo": {"type": "string"}},
               "allOf": [{"properties": {"bar": {"type": "string"}}}],
               "unevaluatedProperties": false}),
        &[r#"{"foo":"a","bar":"b"}"#, r#"{"bar":"b"}"#, "{}"],
        &[r#"{"foo":"a","baz":1}"#, r#"{"bar":1}"#],
    );
    check(
        json!({"$ref": "#/$defs/bar", "properties": {"foo": {"type": "string"}},
               "unevaluatedProperties": {"type": "integer"},
               "$defs": {"bar": {"properties": {"bar": {"type": "string"}}}}}),
        &[r#"{"foo":"a","bar":"b","x":1}"#],
        &[r#"{"foo":"a","x":"y"}"#, r#"{"bar":2}"#],
    );
    // Patterns of an `allOf` branch.
    check(
        json!({"properties": {"foo": {}}, "allOf": [{"patternProperties": {"^bar": {"type": "string"}}}],
               "unevaluatedProperties": false}),
        &[r#"{"foo":1,"barx":"s"}"#],
        &[r#"{"barx":1}"#, r#"{"baz":1}"#],
    );
    // `additionalProperties` in a branch evaluates everything.
    check(
        json!({"properties": {"foo": {}}, "allOf": [{"additionalProperties": true}],
               "unevaluatedProperties": false}),
        &[r#"{"foo":1,"bar":2}"#],
        &[],
    );
    // A cousin's properties are not seen: `foo` must still satisfy `false`.
    check(
        json!({"allOf": [{"properties": {"foo": true}}, {"unevaluatedProperties": false}]}),
        &["{}"],
        &[r#"{"foo":1}"#],
    );
}

#[test]
fn all_of_merges_additional_properties_with_names_of_other_branches() {
    // `a` is an additional property of the second branch: forbidden.
    check(
        json!({"allOf": [{"properties": {"a": true}}, {"additionalProperties": false}]}),
        &["{}", "1"],
        &[r#"{"a":1}"#, r#"{"b":1}"#],
    );
    check(
        json!({"allOf": [{"properties": {"a": {"type": "integer"}}},
                         {"properties": {"b": {}}, "additionalProperties": {"minimum": 5}}]}),
        &[r#"{"a":7,"b":"x"}"#],
        &[r#"{"a":3}"#, r#"{"a":7.5}"#, r#"{"c":1}"#],
    );
    // `prefixItems` beyond the other branch's prefix take its `items`.
    check(
        json!({"allOf": [{"prefixItems": [{"type": "integer"}, {"type": "integer"}]},
                         {"prefixItems": [true], "items": {"minimum": 5}}]}),
        &["[1,6,7]", "[1]"],
        &["[1,2]", "[1,6,3]"],
    );
}

#[test]
fn any_of_unites_the_keys_of_every_matching_branch() {
    let schema = json!({"properties": {"foo": {"type": "string"}},
        "anyOf": [
            {"properties": {"bar": {"const": "bar"}}, "required": ["bar"]},
            {"properties": {"baz": {"const": "baz"}}, "required": ["baz"]}
        ],
        "unevaluatedProperties": false});
    check(
        schema,
        &[r#"{"foo":"f","bar":"bar"}"#, r#"{"bar":"bar","baz":"baz"}"#],
        &[
            r#"{"foo":"f","bar":"bar","baz":"no"}"#,
            r#"{"foo":"f"}"#,
            r#"{"bar":"bar","q":1}"#,
        ],
    );
}

#[test]
fn one_of_with_exclusive_branches() {
    let schema = json!({
        "$defs": {"one": {"properties": {"a": true}}, "two": {"required": ["x"], "properties": {"x": true}}},
        "allOf": [{"$ref": "#/$defs/one"}, {"properties": {"b": true}},
                  {"oneOf": [{"$ref": "#/$defs/two"}, {"required": ["y"], "properties": {"y": true}}]}],
        "unevaluatedProperties": false});
    check(
        schema,
        &[r#"{"a":1,"x":1}"#, r#"{"a":1,"b":1,"y":1}"#],
        &[
            "{}",
            r#"{"a":1,"b":1}"#,
            r#"{"x":1,"y":1}"#,
            r#"{"a":1,"x":1,"z":1}"#,
        ],
    );
}

#[test]
fn if_then_else_per_branch() {
    check(
        json!({"if": {"properties": {"foo": {"const": 1}}, "required": ["foo"]},
               "then": {"properties": {"bar": {"type": "string"}}, "required": ["bar"]},
               "else": {"properties": {"baz": {"type": "string"}}, "required": ["baz"]},
               "unevaluatedProperties": false}),
        &[r#"{"foo":1,"bar":"b"}"#, r#"{"baz":"z"}"#],
        &[
            r#"{"foo":1,"bar":"b","baz":"z"}"#,
            r#"{"foo":2,"baz":"z"}"#,
            r#"{"baz":"z","bar":"b"}"#,
        ],
    );
    // An `if` alone still evaluates its properties when it holds.
    check(
        json!({"if": {"patternProperties": {"foo": {"type": "string"}}}, "unevaluatedProperties": false}),
        &[r#"{"foo":"a"}"#, "{}"],
        &[r#"{"foo":1}"#, r#"{"bar":"a"}"#],
    );
}

#[test]
fn dependent_schemas_evaluate_when_triggered() {
    check(
        json!({"properties": {"foo2": {}},
               "dependentSchemas": {"foo": {}, "foo2": {"properties": {"bar": {}}}},
               "unevaluatedProperties": false}),
        &["{}", r#"{"foo2":1,"bar":2}"#],
        &[r#"{"foo":1}"#, r#"{"bar":2}"#],
    );
}

#[test]
fn items_of_prefix_items_and_contains() {
    check(
        json!({"prefixItems": [{"type": "string"}], "allOf": [{"prefixItems": [true, {"type": "number"}]}],
               "unevaluatedItems": false}),
        &[r#"["a",1]"#, r#"["a"]"#, "[]"],
        &[r#"["a",1,2]"#, r#"["a","b"]"#],
    );
    check(
        json!({"prefixItems": [{"const": 1}],
               "anyOf": [{"prefixItems": [true, {"const": 2}]}, {"prefixItems": [true, true, {"const": 3}]}],
               "unevaluatedItems": false}),
        &["[1,2]", "[1,2,3]"],
        &["[1,2,3,4]", "[1,5,3,6]"],
    );
    check(
        json!({"$ref": "#/$defs/bar", "prefixItems": [{"type": "string"}], "unevaluatedItems": false,
               "$defs": {"bar": {"prefixItems": [true, {"type": "string"}]}}}),
        &[r#"["a","b"]"#],
        &[r#"["a","b","c"]"#],
    );
    // Items matched by `contains` are evaluated.
    check(
        json!({"contains": {"type": "string"}, "unevaluatedItems": {"type": "number"}}),
        &[r#"[1,"a"]"#, r#"["a"]"#, r#"[1,"a","b",2]"#],
        &[r#"[1,"a",null]"#, "[1]"],
    );
    check(
        json!({"unevaluatedItems": {"type": "boolean"}, "anyOf": [{"items": {"type": "string"}}, true]}),
        &[r#"["a","b"]"#, "[true]"],
        &[r#"["a",1]"#],
    );
}

#[test]
fn inexpressible_cases_stay_refused() {
    // `not` gives no annotations: `bar`, required by the double negation, is never
    // evaluated, so no object is accepted.
    check(
        json!({"properties": {"foo": {}},
               "not": {"not": {"properties": {"bar": {"const": "bar"}}, "required": ["bar"]}},
               "unevaluatedProperties": false}),
        &["1", "\"s\""],
        &[r#"{"foo":"f","bar":"bar"}"#, r#"{"bar":"bar"}"#, "{}"],
    );
    // Negating a pattern (for `oneOf` exclusiveness) has no exact grammar.
    let (k, p) = refused(json!({"oneOf": [
        {"properties": {"bar": {"pattern": "^bar$"}}, "required": ["bar"]},
        {"properties": {"baz": {"pattern": "^baz$"}}, "required": ["baz"]}],
        "unevaluatedProperties": false}));
    assert_eq!((k.as_str(), p.as_str()), ("oneOf", "#/oneOf"));
    // `$dynamicRef` is refused, not dropped.
    let (k, _) = refused(
        json!({"$dynamicRef": "#x", "properties": {"a": {}}, "unevaluatedProperties": false}),
    );
    assert_eq!(k, "$dynamicRef");
}

/// String constants negate (a pattern), so overlapping `oneOf` subschemas with string
/// constants compile beside `unevaluated*`: only the matching subschema's properties are
/// evaluated.
#[test]
fn one_of_with_string_constants_beside_unevaluated() {
    check(
        json!({"oneOf": [
            {"properties": {"bar": {"const": "bar"}}, "required": ["bar"]},
            {"properties": {"baz": {"const": "baz"}}, "required": ["baz"]}],
            "unevaluatedProperties": false}),
        &[r#"{"bar":"bar"}"#, r#"{"baz":"baz"}"#],
        &[
            // Both subschemas match.
            r#"{"bar":"bar","baz":"baz"}"#,
            "1",
            // One matches; the other's property is not evaluated.
            r#"{"bar":"bar","baz":"x"}"#,
            r#"{"bar":"x","baz":"baz"}"#,
            r#"{"bar":"bar","x":1}"#,
            "{}",
            r#"{"bar":"x"}"#,
        ],
    );
}

#[test]
fn lenient_drops_unevaluated_and_lists_it() {
    let schema = json!({"oneOf": [
        {"properties": {"bar": {"pattern": "^bar$"}}, "required": ["bar"]},
        {"properties": {"baz": {"pattern": "^baz$"}}, "required": ["baz"]}],
        "unevaluatedProperties": false});
    let opts = JsonSchemaOptions {
        lenient: true,
        ..opts()
    };
    let report = tokensieve::json_schema::json_schema_to_grammar_with_report(&schema, &opts)
        .expect("lenient compiles");
    assert!(
        report
            .ignored
            .iter()
            .any(|i| i.keyword == "unevaluatedProperties" && i.pointer == "#/unevaluatedProperties"),
        "{:?}",
        report.ignored
    );
}
