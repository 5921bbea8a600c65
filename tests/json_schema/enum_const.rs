//! `enum`/`const` beside other keywords (`properties`, `required`, `items`, `format`,
//! `multipleOf`...), on the byte vocabulary: the schema accepts exactly the listed values
//! that also satisfy the sibling keywords; values that fail them are dropped, and a list
//! with none left is unsatisfiable.

use crate::common;

use common::{byte_accepts, byte_compiler};
use serde_json::{json, Value};
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::JsonSchemaError;

fn compile(
    schema: &Value,
) -> Result<std::sync::Arc<tokensieve::CompiledGrammar>, tokensieve::CompileError> {
    byte_compiler().compile_json_schema(schema, &JsonSchemaOptions::default())
}

fn check(schema: Value, good: &[&str], bad: &[&str]) {
    let g = compile(&schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
    for t in good {
        assert!(byte_accepts(&g, t), "{schema} should accept {t}");
    }
    for t in bad {
        assert!(!byte_accepts(&g, t), "{schema} should reject {t}");
    }
}

#[test]
fn enum_beside_object_keywords_keeps_the_values_that_satisfy_them() {
    check(
        json!({
            "enum": [{"a": 1}, {"a": "x"}, {"b": 2}, "s", 3],
            "properties": {"a": {"type": "integer"}},
            "required": ["a"],
        }),
        &[r#"{"a":1}"#, r#""s""#, "3"],
        &[r#"{"a":"x"}"#, r#"{"b":2}"#, "{}"],
    );
    check(
        json!({"enum": [{"a": 1}, {"a": 1, "z": 0}], "additionalProperties": false,
               "properties": {"a": {}}}),
        &[r#"{"a":1}"#],
        &[r#"{"a":1,"z":0}"#],
    );
}

#[test]
fn enum_beside_array_number_and_string_keywords() {
    check(
        json!({"enum": [[1, 2], [1, "x"], []], "items": {"type": "integer"}}),
        &["[1,2]", "[]"],
        &[r#"[1,"x"]"#],
    );
    check(
        json!({"enum": [2, 3, 4, 4.5, "x"], "multipleOf": 2}),
        &["2", "4", r#""x""#],
        &["3", "4.5"],
    );
    check(
        json!({"type": "string", "enum": ["2024-01-02", "tomorrow"], "format": "date"}),
        &[r#""2024-01-02""#],
        &[r#""tomorrow""#],
    );
    check(
        json!({"const": "abc", "not": {"const": "abd"}}),
        &[r#""abc""#],
        &[r#""abd""#],
    );
}

#[test]
fn enum_with_no_value_left_is_unsatisfiable() {
    let schema = json!({"enum": [{"a": "x"}], "properties": {"a": {"type": "integer"}}});
    match compile(&schema) {
        Err(tokensieve::CompileError::JsonSchema(JsonSchemaError::Unsatisfiable { .. })) => {}
        Err(e) => panic!("expected Unsatisfiable, got {e}"),
        Ok(_) => panic!("expected Unsatisfiable, it compiled"),
    }
}

#[test]
fn enum_beside_a_reference_uses_the_type_of_each_value() {
    // `properties` holds a `$ref`: string values are kept (object keywords assert nothing
    // about them), an object value makes the keyword unsupported.
    check(
        json!({"$defs": {"i": {"type": "integer"}},
               "enum": ["a", "b"], "properties": {"a": {"$ref": "#/$defs/i"}}}),
        &[r#""a""#, r#""b""#],
        &[r#""c""#, "{}"],
    );
    let schema = json!({"$defs": {"i": {"type": "integer"}},
                        "enum": [{"a": 1}], "properties": {"a": {"$ref": "#/$defs/i"}}});
    match compile(&schema) {
        Err(tokensieve::CompileError::JsonSchema(JsonSchemaError::Unsupported {
            keyword, ..
        })) => assert_eq!(keyword, "properties"),
        Err(e) => panic!("expected Unsupported, got {e}"),
        Ok(_) => panic!("expected Unsupported, it compiled"),
    }
}
