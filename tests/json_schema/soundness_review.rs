//! Regressions from a soundness review of the JSON Schema front end: each schema is either
//! refused with [`JsonSchemaError::Unsupported`] or compiled to a grammar that agrees with
//! the `jsonschema` crate on every instance listed (and, where the review named one, the
//! expected verdict is asserted outright).

use crate::common;

use common::{byte_accepts, byte_compiler};
use serde_json::{json, Value};
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::JsonSchemaError;

/// The specification's semantics: declared properties in any order.
fn opts() -> JsonSchemaOptions {
    JsonSchemaOptions {
        any_order: true,
        ..Default::default()
    }
}

/// Compiles `schema` (it must compile) and checks that the grammar accepts exactly the
/// instances (JSON texts) the `jsonschema` validator accepts.
fn agrees(schema: Value, instances: &[&str]) {
    let g = byte_compiler()
        .compile_json_schema(&schema, &opts())
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
    let v = jsonschema::validator_for(&schema).expect("a valid schema");
    for text in instances {
        let inst: Value = serde_json::from_str(text).expect("JSON instance");
        assert_eq!(
            byte_accepts(&g, text),
            v.is_valid(&inst),
            "{schema} on {text}\n{}",
            g.grammar()
        );
    }
}

/// `schema` compiles, accepts `good` and rejects `bad` (the oracle agrees on both).
fn expect(schema: Value, good: &[&str], bad: &[&str]) {
    let g = byte_compiler()
        .compile_json_schema(&schema, &opts())
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
    let v = jsonschema::validator_for(&schema).expect("a valid schema");
    for (texts, want) in [(good, true), (bad, false)] {
        for text in texts {
            let inst: Value = serde_json::from_str(text).expect("JSON instance");
            assert_eq!(v.is_valid(&inst), want, "oracle: {schema} on {text}");
            assert_eq!(
                byte_accepts(&g, text),
                want,
                "{schema} on {text}\n{}",
                g.grammar()
            );
        }
    }
}

/// Either refused as unsupported, or exact on `instances`.
fn refused_or_agrees(schema: Value, instances: &[&str]) {
    match tokensieve::json_schema_to_grammar(&schema, &opts()) {
        Err(JsonSchemaError::Unsupported { .. }) => {}
        Err(e) => panic!("{schema}: unexpected error {e}"),
        Ok(_) => agrees(schema, instances),
    }
}

const ARRAYS: &[&str] = &[
    "[]", "[1]", "[1,1]", "[1,1,1]", "[2]", "[1,2]", "[2,2,1]", "[\"a\"]", "{}", "1", "\"x\"",
];

#[test]
fn contains_trio_merges_as_one_unit() {
    expect(
        json!({"allOf":[{"contains":{"const":1},"minContains":0},{"contains":{"const":1}}]}),
        &["[1]", "[1,2]"],
        &["[]", "[2]"],
    );
    expect(
        json!({"allOf":[{"contains":{"const":1},"maxContains":1},{"contains":{"const":1},"minContains":0}]}),
        &["[1]", "[1,2]"],
        &["[]", "[2]", "[1,1]"],
    );
    expect(
        json!({"$ref":"#/$defs/a","contains":{"const":1},"$defs":{"a":{"contains":{"const":1},"minContains":0}}}),
        &["[1]"],
        &["[]"],
    );
    expect(
        json!({"contains":{"const":1},"anyOf":[{"contains":{"const":1},"minContains":0},{"type":"string"}]}),
        &["[1]", "\"s\""],
        &["[]", "[2]"],
    );
    // `minContains`/`maxContains` without a `contains` on their side mean nothing.
    agrees(
        json!({"allOf":[{"minContains":0},{"contains":{"const":1}}]}),
        ARRAYS,
    );
    agrees(
        json!({"allOf":[{"contains":{"const":1}},{"maxContains":1}]}),
        ARRAYS,
    );
    agrees(
        json!({"allOf":[{"contains":{"const":1},"minContains":2},{"contains":{"const":1},"maxContains":2}]}),
        ARRAYS,
    );
    agrees(
        json!({"allOf":[{"contains":{"const":1},"minContains":0,"maxContains":2},{"contains":{"const":1},"minContains":0}]}),
        ARRAYS,
    );
    // Two different `contains`: both hold, or refused.
    refused_or_agrees(
        json!({"allOf":[{"contains":{"const":1},"minContains":0},{"contains":{"const":2}}]}),
        ARRAYS,
    );
}

#[test]
fn if_then_else_merges_as_one_unit() {
    expect(
        json!({"allOf":[{"if":{"required":["foo"]},"then":{"required":["bar"]}},{"else":{"required":["baz"]}}]}),
        &["{}", "{\"foo\":1,\"bar\":2}", "[]"],
        &["{\"foo\":1}"],
    );
    let objs = &[
        "{}",
        "{\"foo\":1}",
        "{\"foo\":1,\"bar\":2}",
        "{\"baz\":1}",
        "{\"foo\":1,\"baz\":2}",
        "{\"foo\":1,\"bar\":1,\"baz\":1}",
        "1",
    ];
    agrees(
        json!({"allOf":[{"then":{"required":["bar"]}},{"if":{"required":["foo"]},"else":{"required":["baz"]}}]}),
        objs,
    );
    agrees(
        json!({"allOf":[{"if":{"required":["foo"]},"then":{"required":["bar"]}},{"if":{"required":["foo"]},"then":{"required":["baz"]}}]}),
        objs,
    );
    refused_or_agrees(
        json!({"allOf":[{"if":{"required":["foo"]},"then":{"required":["bar"]}},{"if":{"required":["bar"]},"else":{"required":["baz"]}}]}),
        objs,
    );
    agrees(
        json!({"$ref":"#/$defs/a","else":{"required":["baz"]},"$defs":{"a":{"if":{"required":["foo"]},"then":{"required":["bar"]}}}}),
        objs,
    );
}

#[test]
fn dependent_schemas_mark_no_array_items() {
    expect(
        json!({"dependentSchemas":{"bar":{"items":true}},"unevaluatedItems":false}),
        &["[]", "{}", "{\"bar\":1}", "1"],
        &["[1]"],
    );
    agrees(
        json!({"dependentSchemas":{"bar":{"prefixItems":[true]}},"unevaluatedItems":false}),
        &["[]", "[1]", "{}", "{\"bar\":1}"],
    );
    agrees(
        json!({"dependentSchemas":{"bar":{"properties":{"x":true}}},"unevaluatedProperties":false}),
        &[
            "{}",
            "{\"bar\":1}",
            "{\"bar\":1,\"x\":2}",
            "{\"x\":2}",
            "[1]",
        ],
    );
}

#[test]
fn merged_bounds_compare_exactly() {
    let big = &[
        "9007199254740991",
        "9007199254740992",
        "9007199254740993",
        "9007199254740994",
        "18446744073709551613",
        "18446744073709551614",
        "18446744073709551615",
        "0",
    ];
    for s in [
        json!({"allOf":[{"minimum":9007199254740992u64},{"minimum":9007199254740993u64}]}),
        json!({"allOf":[{"minimum":9007199254740993u64},{"minimum":9007199254740992u64}]}),
        json!({"allOf":[{"exclusiveMinimum":9007199254740992u64},{"exclusiveMinimum":9007199254740993u64}]}),
        json!({"allOf":[{"maximum":18446744073709551615u64},{"maximum":18446744073709551614u64}]}),
        json!({"allOf":[{"maximum":18446744073709551614u64},{"maximum":18446744073709551615u64}]}),
        json!({"allOf":[{"exclusiveMaximum":18446744073709551615u64},{"exclusiveMaximum":18446744073709551614u64}]}),
        json!({"allOf":[{"type":"integer","minimum":9007199254740992u64},{"minimum":9007199254740993u64}]}),
    ] {
        refused_or_agrees(s, big);
    }
    // The examples of the review, outright.
    let s = json!({"allOf":[{"minimum":9007199254740992u64},{"minimum":9007199254740993u64}]});
    if let Ok(g) = byte_compiler().compile_json_schema(&s, &opts()) {
        assert!(!byte_accepts(&g, "9007199254740992"));
        assert!(byte_accepts(&g, "9007199254740993"));
    }
    let s =
        json!({"allOf":[{"maximum":18446744073709551615u64},{"maximum":18446744073709551614u64}]});
    if let Ok(g) = byte_compiler().compile_json_schema(&s, &opts()) {
        assert!(!byte_accepts(&g, "18446744073709551615"));
        assert!(byte_accepts(&g, "18446744073709551614"));
    }
    // One schema with both bounds: the stricter, exactly.
    let s = json!({"minimum":9007199254740993u64,"exclusiveMinimum":9007199254740992u64});
    let g = byte_compiler()
        .compile_json_schema(&s, &opts())
        .expect("compiles");
    assert!(!byte_accepts(&g, "9007199254740992"));
    assert!(!byte_accepts(&g, "9007199254740992.5"));
    assert!(byte_accepts(&g, "9007199254740993"));
    let s = json!({"maximum":9007199254740992u64,"exclusiveMaximum":9007199254740993u64});
    let g = byte_compiler()
        .compile_json_schema(&s, &opts())
        .expect("compiles");
    assert!(!byte_accepts(&g, "9007199254740992.5"));
    assert!(byte_accepts(&g, "9007199254740992"));
    // Small bounds and lengths still merge.
    expect(
        json!({"allOf":[{"minimum":1.5},{"minimum":2}, {"maxLength": 3}, {"maxLength": 2}]}),
        &["2", "3.5", "\"ab\""],
        &["1.75", "\"abc\""],
    );
}

#[test]
fn negative_zero_in_bounded_numbers() {
    let zeros = &[
        "-0", "-0.0", "-0.00", "0", "0.0", "-1", "-0.5", "1", "2", "-5", "-6",
    ];
    for s in [
        json!({"type":"number","minimum":0}),
        json!({"type":"number","maximum":1}),
        json!({"minimum":-5}),
        json!({"type":"number","maximum":0}),
        json!({"type":"number","exclusiveMinimum":0}),
        json!({"type":"number","exclusiveMaximum":0}),
        json!({"type":"number","minimum":-0.5,"maximum":0.5}),
        json!({"type":"number","minimum":0,"maximum":0}),
    ] {
        agrees(s, zeros);
    }
    expect(
        json!({"type":"number","minimum":0}),
        &["-0", "-0.0"],
        &["-1"],
    );
}

#[test]
fn draft4_boolean_exclusive_bounds() {
    let d4 = "http://json-schema.org/draft-04/schema#";
    let nums = &["0", "1", "1.5", "2", "2.5", "3", "-1", "\"x\""];
    expect(
        json!({"$schema": d4, "minimum": 1, "exclusiveMinimum": true}),
        &["1.5", "2", "\"x\""],
        &["1", "0"],
    );
    expect(
        json!({"$schema": d4, "maximum": 2, "exclusiveMaximum": true}),
        &["1.5", "1"],
        &["2", "3"],
    );
    expect(
        json!({"$schema": d4, "type": "integer", "minimum": 1, "exclusiveMinimum": false, "maximum": 3, "exclusiveMaximum": true}),
        &["1", "2"],
        &["0", "3"],
    );
    agrees(
        json!({"$schema": d4, "allOf": [{"minimum": 1, "exclusiveMinimum": true}, {"maximum": 3, "exclusiveMaximum": true}]}),
        nums,
    );
    agrees(
        json!({"$schema": d4, "not": {"minimum": 1, "exclusiveMinimum": true}}),
        nums,
    );
}

#[test]
fn draft7_ref_ignores_siblings() {
    expect(
        json!({"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"type":"integer"}},"$ref":"#/definitions/a","minimum":100}),
        &["0", "100"],
        &["\"a\"", "1.5"],
    );
    expect(
        json!({"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"$id":"http://example.com/a.json","$ref":"#/definitions/b","definitions":{"b":{"type":"integer"}}},"b":{"type":"string"}},"$ref":"#/definitions/a"}),
        &["\"a\""],
        &["1"],
    );
    expect(
        json!({"$schema":"http://json-schema.org/draft-04/schema#","definitions":{"a":{"type":"integer"}},"properties":{"x":{"$ref":"#/definitions/a","maximum":1}}}),
        &["{\"x\":5}"],
        &["{\"x\":\"s\"}"],
    );
    // 2020-12 applies the siblings.
    expect(
        json!({"$defs":{"a":{"type":"integer"}},"$ref":"#/$defs/a","minimum":100}),
        &["100"],
        &["0"],
    );
}
