//! `patternProperties` beside open `additionalProperties`, several patterns, and patterns
//! matching declared names: keys are split by the set of patterns they match (a key
//! automaton), each set's values taking all of its patterns' schemas. Also `uniqueItems`
//! as items of pairwise different kinds.

use crate::common;

use serde_json::json;
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::JsonSchemaError;

use common::{byte_check, byte_compiler};

fn check_opts(schema: serde_json::Value, opts: &JsonSchemaOptions, good: &[&str], bad: &[&str]) {
    byte_check(&schema, opts, good, bad)
}

fn check(schema: serde_json::Value, good: &[&str], bad: &[&str]) {
    check_opts(schema, &JsonSchemaOptions::default(), good, bad)
}

#[test]
fn one_pattern_beside_open_additional_properties() {
    check(
        json!({"patternProperties": {"^[a-z]+$": {"type": "integer"}}}),
        &[
            r#"{"ab":1}"#,
            r#"{"A":"x"}"#,
            r#"{"a1":null,"b":2}"#,
            r#"{}"#,
            "3",
        ],
        &[
            r#"{"ab":"x"}"#,
            r#"{"A":"x","b":true}"#,
            r#"{"":1,"z":1.5}"#,
        ],
    );
    // additionalProperties with a schema: keys outside the pattern take it.
    check(
        json!({
            "patternProperties": {"^x-": {"type": "boolean"}},
            "additionalProperties": {"type": "string"}
        }),
        &[r#"{"x-a":true,"y":"s"}"#, r#"{"ax-":"s"}"#],
        &[r#"{"x-a":"s"}"#, r#"{"y":true}"#, r#"{"ax-":false}"#],
    );
}

#[test]
fn several_patterns() {
    // Overlapping: keys matching both take both schemas.
    check(
        json!({"patternProperties": {"a*": {"type": "integer"}, "aaa*": {"maximum": 20}}}),
        &[r#"{"a":1}"#, r#"{"aa":20}"#, r#"{"aaaa":18}"#, r#"{"b":3}"#],
        &[
            r#"{"aaa":"foo"}"#,
            r#"{"aa":21}"#,
            r#"{"a":"x"}"#,
            r#"{"b":"x"}"#,
            r#"{"aaaa":31}"#,
        ],
    );
    // Disjoint, unanchored, case-sensitive.
    check(
        json!({"patternProperties": {"[0-9]{2,}": {"type": "boolean"}, "X_": {"type": "string"}}}),
        &[
            r#"{"answer 1":"42"}"#,
            r#"{"a31b":true}"#,
            r#"{"a_x_3":3}"#,
            r#"{"a_X_3":"x"}"#,
        ],
        &[
            r#"{"a31b":null}"#,
            r#"{"a_X_3":3}"#,
            r#"{"X_11":true}"#,
            r#"{"X_11":"x"}"#,
        ],
    );
    // Boolean schemas: `false` forbids the keys it matches.
    check(
        json!({"patternProperties": {"f.*": true, "b.*": false}}),
        &[r#"{"foo":1}"#, r#"{}"#, r#"{"x":[]}"#],
        &[r#"{"bar":2}"#, r#"{"foo":1,"bar":2}"#, r#"{"foobar":1}"#],
    );
}

#[test]
fn patterns_and_declared_properties() {
    let schema = json!({
        "properties": {"foo": {"type": "string"}, "bar": true},
        "patternProperties": {"^f": {"minLength": 2}, "^b": false},
        "additionalProperties": {"type": "boolean"},
        "required": ["foo"]
    });
    let good = [
        r#"{"foo":"ab"}"#,
        r#"{"foo":"ab","x":true}"#,
        r#"{"foo":"ab","fx":"cd"}"#,
        r#"{"fx":3,"foo":"ab"}"#,
    ];
    let bad = [
        r#"{"foo":"a"}"#,
        r#"{"foo":"ab","bar":1}"#,
        r#"{"foo":"ab","baz":1}"#,
        r#"{"foo":"ab","x":1}"#,
        r#"{"x":true}"#,
        r#"{"foo":"ab","fx":"c"}"#,
        r#"{"foo":"ab","foo":"cd"}"#,
    ];
    check(schema.clone(), &good, &bad);
    let any = JsonSchemaOptions {
        any_order: true,
        ..Default::default()
    };
    check_opts(schema, &any, &good, &bad);
    // A required name that only a pattern governs.
    check(
        json!({
            "patternProperties": {"^n": {"type": "null"}},
            "additionalProperties": false,
            "required": ["name"],
            "properties": {"id": {"type": "integer"}}
        }),
        &[r#"{"name":null}"#, r#"{"id":1,"name":null,"nx":null}"#],
        &[r#"{"id":1}"#, r#"{"name":1}"#, r#"{"name":null,"x":null}"#],
    );
}

#[test]
fn unique_items_of_null_and_booleans_only() {
    // Booleans: exact.
    check(
        json!({
            "prefixItems": [{"type": "boolean"}, {"type": "boolean"}],
            "items": false,
            "uniqueItems": true
        }),
        &["[]", "[true]", "[false,true]", "[true,false]"],
        &["[true,true]", "[false,false]", "[true,false,null]", "[1]"],
    );
    check(
        json!({"items": {"type": ["boolean", "null"]}, "uniqueItems": true, "minItems": 2}),
        &["[true,null]", "[null,false,true]"],
        &["[true]", "[null,null]", "[true,false,true]"],
    );
    // Items that may be numbers, strings, objects or arrays: refused, never narrowed to one
    // of each kind; lenient mode ignores the keyword.
    let c = byte_compiler();
    for schema in [
        json!({"uniqueItems": true}),
        json!({"items": {"type": "string"}, "uniqueItems": true}),
        json!({"items": {"type": ["integer", "boolean"]}, "uniqueItems": true}),
    ] {
        match c.compile_json_schema(&schema, &JsonSchemaOptions::default()) {
            Err(tokensieve::CompileError::JsonSchema(JsonSchemaError::Unsupported {
                keyword,
                pointer,
                ..
            })) => {
                assert_eq!(
                    (keyword.as_str(), pointer.as_str()),
                    ("uniqueItems", "#/uniqueItems")
                )
            }
            other => panic!("{schema}: {other:?}"),
        }
    }
    let lenient = JsonSchemaOptions {
        lenient: true,
        ..JsonSchemaOptions::default()
    };
    check_opts(
        json!({"items": {"type": "string"}, "uniqueItems": true}),
        &lenient,
        &[r#"["a","b"]"#, r#"["a","a"]"#],
        &["[1]"],
    );
}
